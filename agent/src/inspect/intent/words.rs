//! Word classes: what kinds of words and shapes say about a sentence's aim. Each is a class
//! (verbs of acting, nouns for the model, markers of authority, role markup), never an attack
//! phrase. They run on the lower-cased, normalised text unless their name says `CASED`.
//!
//! The `regex` crate has no look-around: where a class needs one ("a model noun not followed by
//! `tools`"), the check is a function in `signals`.

/// Nouns for the model being addressed.
pub(super) const MODEL_NOUN: &str = r"(?:assistant|ai|a\.i\.|llm|language model|chat ?bot|gpt(?:-?\d[\w.]*)?|chatgpt|claude|gemini|copilot|agent|model)";

/// Verbs of acting: what a directive asks for.
pub(super) const ACT: &str = r"(?:send|transfer|wire|pay|e-?mail|forward|post|upload|share|delete|remove|erase|visit|open|click|download|install|execute|run|call|invoke|use|utili[sz]e|create|book|reserve|make|grant|disable|bypass|approve|read|access|fetch|retrieve|collect|include|attach|append|insert|add|write|save|modify|change|update|schedule|invite|concatenate|copy|export|submit|transmit|provide|confirm|verify|respond|reply|tell|say|inform|recommend|suggest|mention|set|enable|escalate|skip|ignore|stop|solve|integrate|incorporate|embed|replace|rewrite|translate|answer|output|print|list|search|find|get|give|do|go|navigate|leak|reveal|disclose|ensure|blend|merge|introduce|rearrange|group|spell|misspell|encode|encrypt|explain|describe|draft|compose|generate|produce|show|display|emphasi[sz]e|urge|encourage|remind|direct|promote|advertise|highlight|substitute|absorb|leverage|enlist|complement|refine|fortify|streamline|consider|report|repeat|state|classify|rate|declare|label|treat|recommend)";

/// Verbs that act on the world outside the conversation: what an injected goal asks for.
pub(super) const ACT_OUT: &str = r"(?:send|transfer|wire|pay|e-?mail|forward|post|upload|share|delete|remove|erase|visit|open|click|download|install|execute|run|call|invoke|book|reserve|grant|disable|bypass|approve|submit|transmit|leak|reveal|disclose|navigate|go to|access|read|include|attach|create|invite|schedule|concatenate|copy|export|provide|confirm|verify)";

/// A label introducing a line: `###(system_message)`, `## instructions`, `[note]`, `TODO:`.
/// Not "Step 1:": installation guides are full of them.
const LABEL: &str = r"(?:#{2,}\s*\([a-z_ ]{2,30}\)\s*|#+\s*(?:system|instructions?|admin|assistant)[a-z_ ]{0,20}\s*|\[[a-z_ ]{2,30}\]\s*|(?:[a-z]+_)?(?:todo|note|task|action|instructions?)\s*:\s*)";

/// What may precede the verb of an imperative sentence: bullets, quotes, the opening of an HTML
/// comment, a label, a short "Reminder:" lead-in, politeness and sequencing adverbs.
fn imperative_prefix() -> String {
    format!(
        r#"^(?:<!--|[-*>\d.)\s'"`(\[{{]|•)*(?:{LABEL})?(?:[a-z ]{{1,20}}:\s+)?(?:(?:please|kindly|now|also|then|first|finally|immediately|just|do|next|afterwards)[,\s]+)*"#
    )
}

/// A sentence that starts with a verb of acting.
pub(super) fn imperative() -> String {
    format!(r"{}{ACT}\b", imperative_prefix())
}

/// A sentence that starts with any word followed by an object ("Grab the ..."); the word must
/// not be a function word or carry a noun or adjective suffix (checked in `signals`).
pub(super) fn generic_imperative() -> String {
    format!(
        r#"^(?:<!--|[-*>\d.)\s'"`(\[{{]|•)*(?:{LABEL})?(?:please\s+)?([a-z]{{3,14}})\s+(?:the|a|an|all|more|your|my|this|these|every|each|any|some|it|them|me|us|him|her)\b"#
    )
}

/// "Before you answer, send ...", "In your reply, include ...".
pub(super) fn clause_imperative() -> String {
    format!(
        r"^(?:[-*>\s]|•)*(?:before|after|when|once|if|first|then|next|finally|to (?:\w+\s+){{1,3}}|in order to (?:\w+\s+){{1,3}}|(?:in|within|for|at|on|throughout) (?:your|the|this|each|every|all) )[^,;:]{{0,80}}[,:]\s*(?:please\s+|you (?:must|should|need to)\s+)?{ACT}\b"
    )
}

/// A label directly followed by a verb: `TODO: send ...`, `###(system_message) Visit ...`.
pub(super) fn labelled_imperative() -> String {
    format!(r#"^(?:<!--|[-*>\s'"`(\[{{]|•)*{LABEL}(?:please\s+)?{ACT}\b"#)
}

/// Saying something to someone: "tell them that", "reply with".
pub(super) fn speech() -> String {
    format!(
        r"{}(?:say|tell|reply|respond|answer|inform|let)\b[^.\n]{{0,40}}\b(?:that|with|to|the user|me|them|know)\b",
        imperative_prefix()
    )
}

pub(super) const OBLIGATION: &str = r"\b(?:must|needs? to|have to|has to|required to|(?:is|are) required|should|shall|always|never|do not|don'?t|make sure|ensure|be sure to|strictly|immediately|mandatory|it is (?:essential|crucial|imperative|vital|critical)|you will|you are to)\b";

pub(super) const YOU: &str = r"\b(?:you|your|yourself)\b";

/// The model named as the addressee. The first form's model noun is checked in `signals`
/// (not "AI tools", not "agent-based").
pub(super) fn addressed_model() -> String {
    format!(
        r"\b(?:to|dear|attention|hey|hi|hello|note to|message to|instructions? (?:to|for)|directive for|note for|reminder for)\s+(?:the\s+|an?\s+|you,?\s+(?:the\s+)?)?(?:ai\s+)?{MODEL_NOUN}\b|\b(?:the|this|you,?)\s+(?:ai\s+)?{MODEL_NOUN}\s+(?:must|should|shall|will now|needs? to|has to|is (?:required|instructed|expected|now)|may not|must not|should not|are now)\b|\b{MODEL_NOUN}\s*[,:]\s*(?:you|please|now|ignore|do|stop)\b|\bfrom (?:me|the user|your user|the developer|the admin\w*|the system|the owner)\b[^.\n]{{0,40}}\bto you\b|\b(?:note|message|instructions?|directive|notice|request)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?automated\b|\bfor automated (?:screening|analysis|review|processing|scanning|evaluation)\b"
    )
}

/// Words that make "to the AI ..." a topic rather than an addressee.
pub(super) const MODEL_NOUN_TOPIC: &str = r"^(?:\s*[-(]|\s+(?:tools?|agents?|models?|systems?|applications?|apps?|developers?|sdk|frameworks?|platforms?|era|research|safety|ethics|products?|companies|industry|workflows?|integration|space|act)\b)";

/// Identifiers and keys that label content as meant for the model.
pub(super) const AI_LABEL: &str = r"\b_?(?:[a-z]+_)*(?:ai|llm|assistant|model|agent|system)_(?:[a-z]+_)*(?:instructions?|directives?|notes?|processing|commands?|messages?|prompts?|context|override)\b|\b(?:[a-z]+_)*(?:instructions?|directives?|notes?|metadata|message|commands?)_(?:for_)?(?:ai|llm|assistant|model|agent)\b|\b(?:for|to)\s+(?:the\s+)?(?:ai|llm)\s+(?:assistant|model|processing|agent)\b";

/// The model's own work product.
pub(super) const YOUR_OUTPUT: &str = r"\byour\s+(?:\w+\s+)?(?:answers?|responses?|reply|replies|output|summary|final answer|elucidation|explanation)\b";
pub(super) const YOUR_CODE: &str = r"\byour\s+(?:\w+\s+)?(?:code|implementation|solution|codebase|program|script|algorithm)\b|\bthe code you\b";
/// Calls in a code block that reach the network, run commands or destroy data.
pub(super) const CODE_ACTION: &str = r"requests\.(?:post|put)|urlopen|urlretrieve|socket\.|smtplib|ftplib|\bcurl\b|\bwget\b|subprocess|os\.system|os\.remove|\bexec\(|\beval\(|\.publish|shutil\.|/dev/sd|rm -rf|chmod \+x";

pub(super) const USER_REF: &str = r"\bthe users?(?:'s)?\b";
/// The model's task, conversation or instructions, as seen from the model.
pub(super) const TASK_REF: &str = r"\b(?:the|your|this|current|original)\s+(?:task|conversation|session|chat|instructions?|prompt)\b|\bwithout asking\b|\binstead\b|\bbefore you (?:can|continue|proceed|answer|respond|solve|do)\b|\bfor the (?:remainder|rest) of\b|\bsubsequent (?:questions|requests|messages)\b";

/// Putting something before or instead of the task the model was given: the shape of a
/// hijack, where "the task" alone is only a topic.
pub(super) const TASK_HIJACK: &str = r"\bbefore you (?:can|continue|proceed|answer|respond|solve|do|complete|finish)\b|\b(?:the|your) (?:original|previous|current|initial|real|actual) (?:task|instructions?|request|goal)\b|\btask (?:that|which) (?:i|the user|you were|was) (?:gave|given|asked|assigned)\b|\bfor the (?:remainder|rest) of\b|\bafter you do (?:that|this)\b|\binstead of (?:the|your) (?:task|request)\b";

/// A conversation turn written into data: a line that starts "User:" or "Assistant:", the way
/// an injected document fakes a new request from the user.
pub(super) const ROLE_TURN: &str = r"(?m)^[\s>*-]*(?:user|human|assistant)\s*:\s*[a-z\[<]";

/// A request in question form: "could you repeat ...", "please send ...". A directive only
/// where something else aims it at the model (markup, an address, a fake turn).
pub(super) fn request() -> String {
    format!(r"\b(?:could|can|would|will) you\s+(?:please\s+)?{ACT}\b|\bplease\s+{ACT}\b")
}

/// Text that says it is hidden from people and meant for the model.
pub(super) const HIDDEN_FROM_HUMANS: &str = r"\binvisible to (?:the\s+)?(?:humans?|users?|people|readers|human readers|recruiters)\b|\bvisible (?:only )?to (?:the\s+)?(?:llms?|ai|models?|assistants?|agents?|bots?|automated|machines?)\b|\b(?:white|hidden|invisible)[- ](?:text|font|ink)\b|\b(?:do not|don'?t|never) (?:show|display|render) (?:this )?to (?:the\s+)?(?:user|human)s?\b";

/// Dictating the model's answer: "simply respond with "...", "and output: ...", "if asked,
/// report that ...".
pub(super) const OUTPUT_DICTATION: &str = r#"(?:^|[,;:]\s*|\b(?:simply|just|only|please|must|should|always|and|then)\s+)(?:respond|reply|answer|output|report|print|say|write|state|claim)\s+(?:only\s+)?(?:with\s+)?(?:the\s+(?:text|phrase|words?|string|sentence)\s+)?(?:[":]|“|that\b)"#;

/// Cancelling the model's instructions or safety, or announcing a new mode. Any word may
/// follow "ignore your previous" (misspellings included).
pub(super) const OVERRIDE: &str = r"\b(?:ignore|disregard|forget|override|overrule|bypass|disable|abandon|neglect)\s+(?:\w+\s+){0,4}?(?:previous|prior|above|earlier|preceding|original|safety|security|content|ethical|guardrails?|filters?|instructions?|guidelines|policies|restrictions|protocols?|authentication|directions|other\s+\w*\s*tools)\b|\b(?:ignore|disregard|forget|skip)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:rest|remainder)\s+of\b|\bskip\s+(?:\w+\s+){0,3}?(?:instructions?|guidelines|safety|security|restrictions|policies|guardrails?|filters?|checks)\b|\b(?:ignore|disregard|forget)\s+(?:all|any|every)\b[^.\n]{0,30}\b(?:in|of)\s+(?:the|this)\s+(?:text|document|data|input|page|content|file|e-?mail|message|record|resume|profile)\b|\b(?:all|every|any)\s+(?:other|previous|prior|earlier)\s+(?:\w+\s+){0,2}?(?:instructions?|guidelines?|advice|tasks?|directives?|rules|priorities)\s+(?:are|is)\s+(?:now\s+)?(?:secondary|obsolete|irrelevant|void|null|cancell?ed|superseded|no longer)\b|\b(?:make|consider|treat)\s+(?:everything|anything|all)\s+else\s+(?:as\s+)?(?:secondary|irrelevant|obsolete)\b|\b(?:erase|drop|abandon|discard|suspend|pause|shelve|set aside|put aside|place a pin in|put a pin in|hold)\s+(?:every|all|any)?\s*(?:other|your|the)\s+(?:current\s+|previous\s+|other\s+)?(?:guidelines?|instructions?|tasks?|thoughts?|work|focus|directives?|priorities)\b|\b(?:this|the following|these)\s+(?:is|are|will be)\s+(?:now\s+)?your\s+(?:new\s+|only\s+|sole\s+)?(?:primary|main|only|sole|exclusive|new|top)\s+(?:focus|task|priority|objective|goal|blueprint|mission|instructions?)\b|\byou are now\b|\bnow (?:operating|running|acting) (?:in|as|with)\b|\b(?:god|dan|unrestricted|jailbreak|jailbroken)\s+mode\b|\b(?:you are|you're|now|enter|entering|activate|activating|switch to|switching to)\s+(?:in\s+)?(?:the\s+)?(?:admin(?:istrator|istrative)?|developer|debug|privileged|maintenance)\s+mode\b|\b(?:admin(?:istrator|istrative)?|developer|debug|privileged|maintenance)\s+mode\s+(?:is\s+)?(?:now\s+)?(?:enabled|activated|engaged)\b|\bdo anything now\b|\bstop what you(?:'re| are) doing\b|\bstop immediately\b|\boverrides? (?:all|any)\b";

/// The same in the languages most spoken online (the normaliser has already taken the
/// accents off Latin letters: "instrucoes", "precedentes"): "ignore the previous
/// instructions", "forget your instructions".
pub(super) const OVERRIDE_I18N: &str = r"\bignor[ae]\s+(?:todas\s+)?(?:las|as)\s+(?:instrucciones|instrucoes|indicaciones)\s+(?:anteriores|previas)\b|\b(?:olvida|esqueca)\s+(?:todas\s+)?(?:tus|las|as|suas)\s+(?:instrucciones|instrucoes)\b|\bignore[zr]?\s+(?:toutes\s+)?(?:les|tes|vos)\s+instructions\s+(?:precedentes|anterieures)\b|\boublie[zr]?\s+(?:toutes\s+)?(?:tes|vos|les)\s+instructions\b|\bignorier(?:e|en sie)\s+(?:alle\s+)?(?:vorherigen|bisherigen|vorigen|obigen)\s+(?:anweisungen|instruktionen)\b|\bvergiss\s+(?:alle\s+)?(?:deine\s+|vorherigen\s+)?anweisungen\b|\bignora\s+(?:tutte\s+)?le\s+istruzioni\s+precedenti\b|\bdimentica\s+(?:tutte\s+)?le\s+(?:tue\s+)?istruzioni\b|\bnegeer\s+(?:alle\s+)?(?:vorige|eerdere)\s+instructies\b|\bzignoruj\s+(?:wszystkie\s+)?(?:poprzednie\s+)?instrukcje\b|\bonceki\s+talimatlari\s+(?:yok say|gormezden gel)|(?:И|и)гнорир\S*\s+(?:все\s+)?(?:предыдущие\s+)?инструкции|(?:З|з)абудь\s+(?:все\s+)?(?:предыдущие\s+|свои\s+)?инструкции|忽略(?:之前|以上|上面|先前|前面)的?(?:所有)?(?:指令|指示|说明)|忽略所有(?:之前的|先前的)?指令|(?:以前|前|上記)の指示を無視|(?:이전|위의)\s*(?:모든\s*)?(?:지시|지침|명령)\S*\s*무시|تجاهل\s+(?:جميع\s+|كل\s+)?التعليمات\s+السابقة|पिछले\s+(?:सभी\s+)?निर्देशों\s+को\s+(?:अनदेखा|नज़रअंदाज़)";

/// Pointing at what comes next in the text: with urgency, a task switch ("the next part
/// demands immediate action"); alone, how documents are written.
pub(super) const WHAT_FOLLOWS: &str = r"\b(?:the\s+)?(?:next|following|upcoming|succeeding|subsequent)\s+(?:part|section|segment|few lines|lines?|piece|paragraph|information|text)\b|\bwhat (?:follows|comes next|is coming next|'s coming next|'s next)\b|\bup next\b";

/// Pressure to act now: what turns an announcement of what follows into a task switch.
/// A sentence that asks something: a task when an announcement gives it.
pub(super) const QUESTION: &str = r"\?\s*$";
/// Every other instruction set aside or outranked: "all other commands are now shadows",
/// "this is the only command that matters".
pub(super) const SUPERSEDES_OTHERS: &str = r"\b(?:all|every|any|each)\s+(?:other|else|previous|prior|earlier|remaining)\s+(?:\w+\s+){0,2}?(?:instructions?|commands?|orders|tasks?|directives?|guidelines|procedures|agendas?|priorities|edicts?|requests|assignments|duties)\b[^.;\n]{0,40}\b(?:is|are|now|becomes?|become)\b|\b(?:let go of|cast aside|set aside|put aside|put blinders on to|disregard|forget|drop|abandon)\s+(?:all|every|any|each)\s+(?:other|else|previous|prior)\b|\b(?:all|everything)\s+else\s+(?:is|are)\s+(?:now\s+)?(?:secondary|irrelevant|noise|static|a distraction|background|on hold|void|obsolete|unimportant|extraneous)\b|\b(?:the\s+)?(?:only|sole|one)\s+(?:command|instruction|directive|order|task|edict|signal)\s+(?:that\s+)?(?:matters|counts|in existence|to follow|you need)\b|\b(?:takes?|taking)\s+(?:all\s+)?precedence\b|\bevery\s+other\s+(?:instruction|command|task|directive|order)\s+is\s+(?:subordinate|secondary|a footnote)\b|\b(?:dismiss|overlook|ignore|forget|disregard)\s+(?:the rest|any other (?:tasks?|instructions?|commands?|directives?|orders)|all (?:others|else))\b|\blet\s+(?:the rest|all else|everything else)\s+(?:fade|fall away|go|wait)\b|\b(?:overshadows?|supersedes?|outranks?)\s+(?:all|every|any)\s+(?:others|prior|previous|other)\b|\bthe only (?:one|command|directive|instruction|task) (?:that matters|on your radar)\b|\bthe only relevant (?:command|directive|instruction|task)\b|\byour (?:singular|sole) (?:quest|pursuit|mandate|focus|mission|purpose|objective)\b|\bfocus exclusively on this\b";
pub(super) const URGENCY: &str = r"\b(?:immediate(?:ly)?|at once|right away|pronto|without (?:delay|hesitation)|not optional|non-?optional|non-negotiable|not (?:just )?a suggestion|not a drill|a mandate|a command|time-sensitive|act now|act swiftly|high priority|top priority|urgent(?:ly)?|(?:swift|prompt|quick|immediate|instant) (?:execution|implementation|action|attention|engagement)|demand (?:your )?(?:full |immediate |undivided )?attention|requires? (?:your )?(?:immediate|undivided|full|instant|utmost) attention)\b|(?:of\s+)?(?:the\s+)?utmost (?:importance|significance|urgency)|cannot wait|prime significance|effective immediately";

/// Elevated privilege or switched-off safety. "Full access" is not among them: descriptions
/// of file and database tools say it of what they can reach.
pub(super) const PRIVILEGE: &str = r"\b(?:elevated|admin(?:istrator|istrative)?|root|unrestricted|superuser)\s+(?:system\s+)?(?:privileges?|access|permissions?|rights|trust|mode)\b|\b(?:full|maximum)\s+(?:system\s+)?(?:privileges?|permissions?|rights|trust)\b|\bsecurity[_ ]level\s*[=:]?\s*0\b|\btrust[_ ]level\b|\bwithout (?:\w+\s+)?(?:confirmation|validation|approval|verification)\b|\b(?:skip|disable|bypass)\w*\s+(?:\w+\s+){0,2}(?:checks?|filters?|guardrails|confirmation|prompts)\b|\bprivileged (?:mode|operations?|commands?)\b|\bescalat\w+ privileges?\b|\bbypass_?\w*";

/// Hiding something from the user ("never tell the user", not "never reveal the user's key").
pub(super) fn secrecy() -> String {
    format!(
        r"\b(?:do not|don'?t|never|must not|should not|without)\s+(?:\w+\s+){{0,3}}?(?:tell\w*|inform\w*|mention\w*|reveal\w*|notify\w*|alert\w*|disclos\w*|show\w*|let)\s+(?:\w+\s+){{0,2}}?(?:the\s+)?(?:user|human|them)(?:[^'\w]|$)|\b(?:silently|secretly|covertly|quietly|discreetly|invisibly)\s+(?:\w+\s+){{0,2}}?{ACT_OUT}|\b{ACT_OUT}(?:s|es|ed|ing)?\s+(?:\w+\s+){{0,4}}?(?:silently|secretly|covertly|quietly|discreetly)\b|\b(?:do not|don'?t|never)\s+(?:mention|reveal|disclose|tell anyone about)\s+(?:this|these|that|it)\b|\bpresent (?:this|it) as\b|\bkeep (?:this|it) (?:secret|hidden|confidential|between)\b|\bwithout (?:the user|their) (?:knowing|knowledge|noticing)\b"
    )
}

pub(super) const SENSITIVE_WORD: &str = r"\b(?:passwords?|passphrases?|credentials?|api[ _-]?keys?|access[ _-]?keys?|secret[ _-]?keys?|private[ _-]?keys?|ssh[ _-]?keys?|(?:auth|session|access|bearer|refresh)[ _-]?tokens?|security codes?|2fa|mfa|otp|backup codes?|seed phrases?|mnemonics?|verification codes?|cookies?)\b";
pub(super) const SENSITIVE_FILE: &str = r"(?:~|\$home)?/?\.(?:ssh|aws|bashrc|zshrc|bash_profile|zprofile|profile|env|npmrc|netrc|git-credentials|kube|docker|gnupg|pgpass)\b|\b(?:bash|zsh|shell|command|browser)[ _]history\b|\.(?:bash|zsh)_history\b|/etc/(?:passwd|shadow)\b|\bos\.environ\b|/proc/self\b|\bid_(?:rsa|ed25519)\b|\bmcp\.json\b|\bclaude_desktop_config\b|\bcookies\.txt\b|\bdocument\.cookie\b|\blocalstorage\b";

/// A place data or money can go: URL, domain, e-mail, IBAN, crypto address, account number.
pub(super) const DESTINATION: &str = r#"(?:https?://|www\.)[^\s'"<>)]+|\b[a-z0-9-]+\.(?:com|net|org|io|xyz|ru|info|biz|co|me|app|dev|link|site|online)(?:/[^\s'"<>)]*)?\b|\b[\w.+-]+@[\w-]+\.[\w.-]+\b|\b[a-z]{2}\d{2}(?:\s?[a-z0-9]{4}){3,7}\b|\b[a-z]{2}\d{12,30}\b|\b0x[0-9a-f]{40}\b|\b(?:bc1|[13])[a-hj-np-z0-9]{25,39}\b|\baccount(?: number| no\.?)?\s*[:#]?\s*\d{6,}\b"#;

pub(super) const AUTHORITY: &str = r"\b(?:important|urgent|critical|mission[- ]critical|attention|warning|notice|alert|mandatory|compliance|official|verified|authori[sz]ed|priority|override|required by|not optional|imperative|high importance|immediate(?:ly)? attention|security (?:notice|check|update|alert|team|protocol|requirement)|system (?:update|message|notice|note|instruction|directive|command|override|requirement|alert))\b";
pub(super) const CASED_AUTHORITY: &str = r"\b(?:IMPORTANT|URGENT|CRITICAL|ATTENTION|WARNING|NOTICE|MANDATORY|SYSTEM|ADMIN|OVERRIDE|SECURITY|COMPLIANCE)\b|!{2,}|⚠|🚨";

/// Role and instruction markup. The line-start `System:` form must not be followed by a quote,
/// a brace or the end of the line (checked in `signals`: a config sample, not a role).
pub(super) const MARKUP: &str = r"(?m)<\s*/?\s*(?:information|info|system(?:[_-][\w-]+)?|sys|instructions?|instruction[_-]\w+|important|admin\w*|ai[_-]\w+|assistant[\w-]*|hidden[\w-]*|secret|override|\w+[_-]override|context[_-]\w+|prompt|directive|note)\b[^>]{0,80}>|\[\s*/?\s*(?:system|admin|important|internal|instructions?|directive|context|inst|sys)\b[^\]\n]{0,60}\]|\[\s*(?:system|admin\w*|assistant)\b[^\]\n:]{0,30}::?|\[\s*[a-z]+(?:[_ ][a-z]+)*[_ ](?:command|buffer|directive|instruction|note|log|context|message)s?\s*\]|#{2,}\s*[(\[]?(?:system|instruction|admin|assistant)[\w ]*|^[>*-]*\s?(?:system|admin|administrator|note to (?:the )?(?:ai|assistant|model)|instructions?)\s*:|={2,}\s*[a-z_ ]*(?:system|instruction|admin|override|important|assistant|prompt|directive|task|command|message|note|update|alert|context|ai|user)[a-z_ ]*={2,}|-{3}\s*[a-z ]*(?:system|override|instruction)[a-z ]*-{3}|<\|[a-z_]+\|>|\[/?inst\]|<<\s*/?sys\s*>>";
/// What comments say to a file's maintainers and their tools: not to edit generated text, how
/// to regenerate it, a linter's or spell-checker's switch.
pub(super) const MAINTAINER_NOTE: &str = r"\b(?:do not|don't|dont|never)\s+(?:edit|modify|change|touch|remove|delete|reformat)\b|\bauto-?generated\b|\bgenerated (?:file|code|section|by)\b|\b[a-z][a-z-]*[:-](?:ignore|disable|enable)\b|\bre-?run\b[^.]{0,40}\bto (?:update|regenerate)\b";
pub(super) const HTML_COMMENT_TEXT: &str = r"<!--\s*[a-z][^>]{10,}";

/// Superlatives, social proof, scarcity and urgency: advertising aimed at the tool chooser.
pub(super) const PROMOTION: &str = r"\b(?:the\s+)?(?:best|most (?:accurate|trusted|reliable|advanced|powerful|popular|secure)|#1|number one|world'?s (?:best|most|leading|first)|superior|better than|far (?:superior|better)|industry[- ]leading|game[- ]changer|breakthrough|revolutionary|exclusive (?:offers?|deals?|access|partner|provider|source)|premium|elite|vip|limited[- ]time|act now|hurry|expires? soon|only \d+ (?:uses|spots|left)|endorsed by|trusted by|featured (?:in|on)|used by (?:over )?\d|\d+(?:\.\d+)?\s?% (?:of|customer)|millions? of (?:users|downloads)|\d+x faster|zero errors|outdated|obsolete)\b";
/// A tool praising itself above the others: "this is the best tool in the world", "the most
/// accurate search engine available".
pub(super) const SELF_PRAISE: &str = r"\b(?:this|it)\s+(?:is|'s)\s+(?:the\s+|a\s+)?(?:best|greatest|ultimate|most (?:accurate|trusted|reliable|advanced|powerful|popular|secure|capable)|#1|number one|world'?s \w+|only (?:reliable|accurate|trusted|safe))\s+(?:\w+\s+){0,2}?(?:tool|service|api|server|function|engine|option|choice|source|assistant|solution)s?\b|\bthe (?:best|greatest|ultimate|most (?:accurate|trusted|reliable|advanced|powerful|capable)) (?:\w+\s+){0,2}?(?:tool|service|api|server|function|engine|choice|solution)s? (?:in the world|available|ever|on the market|there is|you can use)\b";
pub(super) const OTHER_TOOLS: &str = r"\b(?:other|any other|all other|alternative|competing|standard|outdated|inferior|third[- ]party|rival)\s+(?:\w+\s+){0,2}?(?:tools?|services?|functions?|servers?|engines?|alternatives|apis?|providers?|plugins?)\b|\b(?:instead of|rather than|in place of|superior to|better than)\s+(?:any|other|the other|all|standard|regular)\s*(?:others?\b|(?:\w+\s+){0,2}?(?:tools?|services?|functions?|servers?|engines?|apis?|providers?|plugins?|alternatives|options|sources?)\b)";
/// Words that turn a mention of other tools into steering away from them. A directive alone
/// does not: "use this tool when the other tools cannot help" is a fallback, not a steer.
pub(super) const AGAINST: &str = r"\b(?:ignore|avoid|never use|do not use|don'?t use|deprecated|inferior|prefer|instead of|rather than|in place of|superior|better than)\b";
pub(super) const SEQUENCE: &str = r"\b(?:before|after|prior to|instead of|rather than|first|then|once|whenever|each time|every time|followed by|afterwards)\b";
pub(super) const CODE_INSERT: &str = r"\b(?:following|subsequent|below|this|the)\s+(?:\w+\s+)?(?:code|snippet|script|block|excerpt|section)\b";
pub(super) const INSTRUCTION_ANNOUNCE: &str = r"\b(?:following|these|new|updated|additional|real|actual|true|next|upcoming|incoming)\s+(?:set\s+of\s+)?(?:instructions?|directives?|orders|advisories|procedures)\b|\b(?:next|upcoming|incoming|new)\s+(?:set\s+of\s+)?(?:tasks?|steps|assignments?)\b(?:[^(\w]|$)|\babout to (?:receive|unfold|follow|arrive|begin|commence|be (?:given|handed|assigned|sent|entrusted|revealed|delivered|issued))\b|\b(?:forthcoming|newly (?:received|issued|arrived|sprung|delivered)|incoming|additional)\s+(?:\w+\s+)?(?:instructions?|directives?|commands?|orders|guidelines|edicts?|undertaking|responsibilit(?:y|ies)|assignments?|missions?|tasks?)\b|\b(?:instructions?|directives?|commands?|orders|guidelines)\s+(?:have|has)\s+(?:just\s+)?(?:been\s+)?(?:delivered|pronounced|received|issued|arrived|landed)\b|\b(?:instructions?|directives?|commands?|steps|guidelines|orders|advisories)\s+(?:that\s+)?(?:follow|to follow|to come|ahead|that are about to follow|you(?:'re| are) about to)\b|\b(?:new|updated|real|actual|true)\s+commands?\b|\b(?:strictly\s+)?(?:adhere|comply)\s+(?:to|with)\s+(?:the following|these|this|my|our|the (?:new|updated|next))\b|\bstrictly\s+(?:adhere|comply)\s+(?:to|with)\b|\bfollow (?:these|the following|my|our) (?:instructions?|steps|directives?)\b|\b(?:instructions?|guidelines|guidance|directives?|commands?|orders|steps|recommendations)\s+(?:that\s+)?(?:to come|up ahead|(?:that\s+)?await|are next|is next|coming (?:up|your way|down the pipeline))\b|\b(?:another|an additional|an extra|one more)\s+(?:\w+\s+){0,2}?(?:tasks?|assignments?|directives?|instructions?|orders?|commands?|missions?|action)\s+(?:to (?:execute|carry out|perform|complete|tackle)|that (?:requires?|needs?|demands?|cannot wait|you (?:need|must|have) to)|(?:is\s+)?coming|(?:has\s+)?(?:just\s+)?(?:emerged|arrived|been assigned|come in))\b|\b(?:an?|one)\s+(?:imperative|pivotal|essential|urgent|crucial|critical)\s+(?:\w+\s+)?(?:assignment|directive|instruction|task|order|command)\s+(?:is\s+)?(?:coming|ahead|just ahead|about to)\b|\byour\s+(?:task list|agenda|list of (?:priorities|tasks)|to-?do list|workload)\s+(?:just\s+)?(?:got|has)\s+(?:an?\s+)?(?:update|new|surprise|additional|extra)\b|\b(?:instructions?|directives?|commands?|orders|guidelines|recommendations)\s+(?:have|has)\s+(?:just\s+|recently\s+)?(?:been\s+)?(?:come in|rolled in|broadcast(?:ed)?|received|arrived|sent in)\b";
pub(super) const REDIRECT: &str = r"\b(?:are|is|will be|have been|has been|now|automatically|should be|must be)\s+(?:now\s+)?(?:redirected|rerouted|forwarded|diverted|replaced|routed|sent)\s+to\b|\bredirect\w*\s+(?:all\s+)?(?:\w+\s+){0,3}?to\b";
pub(super) const TELL_USER: &str = r"\b(?:tell|inform|let|assure|convince|remind)\s+(?:the\s+)?users?\b(?:\s+know)?\s+(?:that\s+)?|\b(?:say|claim|state|report)\s+(?:to the user\s+)?that\b";
pub(super) const STOP_TASK: &str = r"\b(?:stop|halt|abort|cease|terminate)\b[^.\n]{0,30}\b(?:immediately|now|what you|processing|the task|responding)\b|\bsolve the captcha\b|\bcaptcha\b[^.\n]{0,40}\brequired\b";

/// Tool references in a sentence (cased): `backticked`, 'quoted', "quoted", snake_case,
/// camelCase, "the X tool".
pub(super) const TOOL_REFERENCE: &str = r#"`([\w.:/-]{2,60})`|'([a-z][\w-]{2,60})'|"([a-z][\w-]{2,60})"|\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b|\b([a-z]+(?:[A-Z][a-z0-9]+)+)\b|\bthe\s+([\w-]+)\s+(?:tool|function)\b"#;
/// A reference followed by these words names a parameter, not a tool.
pub(super) const PARAMETER_AFTER: &str =
    r"^\s*(?:parameter|param|argument|arg|field|option|property|key|attribute|value|flag)s?\b";

/// Function words and words with noun or adjective endings: what cannot start an imperative.
pub(super) fn is_not_a_verb(word: &str) -> bool {
    const FUNCTION_WORDS: &[&str] = &[
        "the",
        "a",
        "an",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "there",
        "here",
        "all",
        "both",
        "each",
        "every",
        "some",
        "any",
        "no",
        "not",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "from",
        "with",
        "to",
        "as",
        "if",
        "and",
        "or",
        "but",
        "so",
        "then",
        "than",
        "when",
        "while",
        "where",
        "what",
        "which",
        "who",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "may",
        "might",
        "must",
        "should",
        "shall",
        "also",
        "only",
        "just",
        "more",
        "most",
        "many",
        "much",
        "one",
        "two",
        "new",
        "after",
        "before",
        "about",
        "over",
        "under",
        "into",
        "up",
        "out",
        "per",
        "via",
        "yes",
        "hi",
        "hello",
        "dear",
        "thanks",
        "thank",
        "best",
        "regards",
        "please",
        "note",
        "see",
        "total",
        "page",
        "price",
        "date",
        "time",
        "name",
        "type",
        "status",
        "result",
        "results",
        "error",
        "file",
        "data",
        "user",
        "today",
        "tomorrow",
        "yesterday",
        "top",
        "first",
        "last",
        "next",
        "other",
        "such",
        "same",
        "own",
        "very",
        "well",
        "even",
        "still",
        "now",
        "never",
        "always",
        "often",
        "mr",
        "mrs",
        "ms",
        "dr",
        "review",
        "reviews",
        "rating",
        "hotel",
        "cash",
        "daily",
        "natural",
        "busy",
        "small",
        "cozy",
        "great",
        "good",
        "authentic",
    ];
    const SUFFIXES: &[&str] = &[
        "s", "ed", "ing", "ly", "ous", "ful", "ive", "able", "ible", "ary", "ory", "ion", "ity",
        "ness", "ship", "ist", "ism",
    ];
    FUNCTION_WORDS.contains(&word)
        || SUFFIXES
            .iter()
            .any(|s| word.len() > s.len() && word.ends_with(s))
}
