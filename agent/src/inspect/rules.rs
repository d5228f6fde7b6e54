//! The built-in rule catalogue.
//!
//! Rules are about intent, not capability: "execute a command" or "read a file" never reach
//! `medium`; theft verbs aimed at credential objects, covert channels, concealment from the user,
//! instructions aimed at the model and shell payloads do. Patterns run on normalised,
//! lower-cased text (see `normalize`) with ASCII `\b`/`\w` (byte regexes, Unicode off: the lazy
//! DFA handles them, so scanning stays fast); `cased` rules run on the case-preserving text.
//!
//! Severities are given per mode: `[Definition, Output, Arguments]`, `None` = rule not used in
//! that mode.

use super::shell;
use super::{Category, Mode, Severity};

pub(crate) type Sev3 = [Option<Severity>; 3];

const N: Option<Severity> = None;
const L: Option<Severity> = Some(Severity::Low);
const M: Option<Severity> = Some(Severity::Medium);
const H: Option<Severity> = Some(Severity::High);
const C: Option<Severity> = Some(Severity::Critical);

/// What a post-match check sees.
pub(crate) struct Ctx<'a> {
    /// The whole normalised text the rule ran on (lower-cased unless the rule is `cased`).
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
    pub mode: Mode,
    pub sev: Severity,
}

impl Ctx<'_> {
    pub fn matched(&self) -> &str {
        self.text.get(self.start..self.end).unwrap_or("")
    }
}

/// Returns the adjusted severity, or `None` to drop the match.
pub(crate) type Check = fn(&Ctx) -> Option<Severity>;

pub(crate) struct Rule {
    pub id: &'static str,
    pub category: Category,
    pub sev: Sev3,
    pub pattern: String,
    pub cased: bool,
    /// Downgrade to `low` when the sentence before the match is defensive ("scans for ...",
    /// "protects against ...", "detects ...").
    pub defensive: bool,
    /// Downgrade to `low` when the match is quoted as an example ("phrases like 'ignore
    /// previous instructions'").
    pub quoted: bool,
    pub check: Option<Check>,
}

impl Rule {
    fn new(id: &'static str, category: Category, sev: Sev3, pattern: &str) -> Self {
        Self {
            id,
            category,
            sev,
            pattern: expand(pattern),
            cased: false,
            defensive: false,
            quoted: false,
            check: None,
        }
    }
    fn defensive(mut self) -> Self {
        self.defensive = true;
        self
    }
    fn quoted(mut self) -> Self {
        self.quoted = true;
        self
    }
    fn cased(mut self) -> Self {
        self.cased = true;
        self
    }
    fn check(mut self, f: Check) -> Self {
        self.check = Some(f);
        self
    }
}

/// Sentence gap: up to N bytes that do not end a sentence.
const FRAGMENTS: &[(&str, &str)] = &[
    ("{G10}", r"[^.;!?\n]{0,10}"),
    ("{G20}", r"[^.;!?\n]{0,20}"),
    ("{G30}", r"[^.;!?\n]{0,30}"),
    ("{G40}", r"[^.;!?\n]{0,40}"),
    ("{G60}", r"[^.;!?\n]{0,60}"),
    // Objects of credential theft. Deliberately excludes bare "secret", "token", "key",
    // "vault" and "ticket": key-vault, design-token and train-ticket tools use them benignly.
    (
        "{CRED}",
        r"(?:credentials?|creds|passwords?|passwd|passphrases?|(?:password|ntlm|nt|lm|ntds|credential|kerberos)\s+hash(?:es)?|hashes\s+(?:from|of)|secrets|secret\s+keys?|api[ -]?keys?|access\s+keys?|private\s+keys?|ssh\s+keys?|gpg\s+keys?|pgp\s+keys?|(?:auth|authentication|access|session|bearer|oauth|refresh|jwt|kerberos|service|tgt|tgs)\s+(?:tokens?|tickets?)|session\s+(?:cookies|data)|cookies|keychains?|keyrings?|kwallet|password\s+managers?|login\s+data|autofill(?:\s+data)?|keystrokes|seed\s+phrases?|mnemonics?|recovery\s+phrases?|wallet\s+(?:files?|keys?)|logon\s?passwords)\b",
    ),
    // Files and endpoints that hold credentials. A tool description has no business naming them.
    (
        "{SENS}",
        r"(?:(?:~|\$home|/home/[\w.-]+|/users/[\w.-]+|/root)?/\.ssh\b(?:/[\w.-]+)?|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/(?:credentials|config)\b|\.azure/|\.config/gcloud|\.kube/config\b|\.docker/config\.json|\.npmrc\b|\.pypirc\b|\.netrc\b|\.git-credentials\b|\.gnupg\b|/etc/(?:shadow|gshadow|sudoers|master\.passwd)\b|/etc/passwd\b|(?:^|[\s'\x22`(=:/~])\.env(?:\.(?:local|production|prod|dev|development|staging))?\b|\.(?:bash|zsh)_history\b|\bwallet\.dat\b|/proc/(?:self|\d+|\*|\[pid\]|<pid>|\{pid\})/(?:environ|mem|maps)\b|169\.254\.169\.254|\bmetadata\.google\.internal\b|\bclaude_desktop_config\.json|\.cursor/mcp\.json|\bmcp\.json\b|\blogin\s+data\b|\.keychain(?:-db)?\b)",
    ),
];

fn expand(p: &str) -> String {
    let mut s = p.to_string();
    for (k, v) in FRAGMENTS {
        if s.contains(k) {
            s = s.replace(k, v);
        }
    }
    s
}

/// Sentence prefixes that make offensive vocabulary defensive.
pub(crate) const DEFENSIVE: &str = r"\b(?:scan\w*|detect\w*|check\w*|test\w*\s+for|prevent\w*|protect\w*|defen[cds]\w*|mitigat\w*|audit\w*|identif\w*|flag\w*|block\w*|guard\w*|monitor\w*\s+for|vulnerabilit\w*|remediat\w*|harden\w*|against|report\w*\s+on|analy[sz]\w*|classif\w*|warn\w*|alert\w*\s+on|resist\w*|simulat\w*\s+(?:an?\s+)?(?:phishing\s+)?(?:training|exercise)|educat\w*|explain\w*|learn\w*\s+about|awareness)\b";

/// Words around a quoted example that mark it as discussion, not instruction.
pub(crate) const QUOTE_META: &str = r"\b(?:like|such\s+as|pattern\w*|phrases?|examples?|e\.g|for\s+instance|attacks?|injections?|common|known|called|strings?|says?|wrote|write|reads?|contains?|detect\w*|scan\w*|flag\w*|block\w*)\b";

pub(crate) fn builtin() -> Vec<Rule> {
    use Category::*;
    let mut r = Vec::with_capacity(128);

    // ---- Instructions aimed at the model ----------------------------------------------------
    r.push(Rule::new(
        "inj.ignore_previous",
        HiddenInstructions,
        [C, C, H],
        r"\b(?:ignore|disregard|forget|override|overrule|bypass|skip|abandon)\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?(?:the\s+|your\s+|my\s+|these\s+|those\s+|its\s+)?(?:(?:previous|prior|above|earlier|preceding|original|initial|system|safety|security|existing|other|current|old|developer|default)\s+){1,3}(?:instructions?|directives?|rules|prompts?|guidelines|guardrails|constraints|polic(?:y|ies)|commands|messages|context|restrictions|programming)\b|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+(?:above|before|previously|prior|you\s+were\s+told)\b",
    ).quoted());
    r.push(Rule::new(
        "inj.new_instructions",
        HiddenInstructions,
        [H, M, M],
        r"\b(?:new|updated|revised|real|actual|true|hidden|secret|additional)\s+(?:priority\s+|system\s+|admin\s+)?(?:instructions?|directives?|orders|system\s+prompt)\s*(?::|received|follow|below|are\s+as\s+follows|override)|\byour\s+(?:new|updated|real|true|actual)\s+(?:instructions?|directives?|task|orders|objective|goal)\b",
    ).quoted());
    r.push(Rule::new(
        "inj.role_override",
        HiddenInstructions,
        [H, H, M],
        r"\byou\s+are\s+now\s+(?:in\s+)?(?:a\s+|an\s+)?(?:developer|dan|admin\w*|root|god|jailbr\w*|unrestricted|unfiltered|debug|maintenance|evil|uncensored)\b|\byou\s+now\s+have\s+(?:full\s+|complete\s+|unrestricted\s+)?(?:admin\w*|root|elevated|unrestricted|superuser|sudo|system|full)\s+(?:access|privileges?|permissions?|rights|control)\b|\byou\s+have\s+(?:full\s+|complete\s+)?(?:unrestricted|admin\w*|root|elevated|superuser)\s+(?:access|privileges?|permissions?|rights|control)\b|\b(?:act|behave|pretend)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|jailbroken|evil)\b",
    ).quoted());
    r.push(Rule::new(
        "inj.prompt_leak",
        HiddenInstructions,
        [H, H, M],
        r"\b(?:output|reveal|print|repeat|show|display|dump|leak|share|disclose|return|send|include|tell\s+me|write\s+out|list|copy|paste|expose)\b{G30}\b(?:your|the|its|all)\s+(?:(?:full|complete|entire|exact|original|hidden|initial|internal)\s+){0,2}(?:system\s+prompt|initial\s+prompt|hidden\s+prompt|developer\s+(?:message|prompt)|system\s+message|tool\s+definitions|instructions\s+verbatim)\b",
    ).quoted().check(check_not_negated));
    r.push(Rule::new(
        "inj.conceal_from_user",
        HiddenInstructions,
        [C, C, H],
        r"\b(?:do\s+not|don'?t|never|must\s+not|should\s+not|shouldn'?t|avoid)\s+(?:\w+\s+){0,3}?(?:tell\w*|inform\w*|mention\w*|reveal\w*|notify\w*|alert\w*|disclos\w*|report\w*|let)\s+(?:\w+\s+){0,3}?(?:the\s+|your\s+)?(?:user|human|operator|owner)s?\b|\b(?:hide|conceal|keep)\b{G30}\bfrom\s+(?:the\s+)?(?:user|human)s?\b|\bthe\s+user\s+(?:must|should|will|need)\s*(?:not|never|n't)\s+(?:\w+\s+)?(?:know|see|notice|find\s+out|be\s+(?:told|informed|aware))\b|\bthe\s+user\s+(?:does|do)\s*(?:not|n't)\s+(?:need|have)\s+to\s+(?:know|see|notice|be\s+(?:told|informed|aware))\b",
    ).quoted().check(check_not_possessive));
    r.push(Rule::new(
        "inj.without_user",
        HiddenInstructions,
        [H, H, M],
        r"\bwithout\s+(?:\w+\s+)?(?:telling|informing|notifying|alerting|letting)\s+(?:the\s+|your\s+)?(?:user|human)s?\b|\bwithout\s+(?:the\s+)?(?:user'?s?|their|victim'?s?|owner'?s?)\s+(?:knowledge|consent|permission|awareness|noticing)\b|\bwithout\s+(?:being\s+)?(?:detected|noticed)\b",
    ).quoted());
    r.push(Rule::new(
        "inj.without_asking",
        HiddenInstructions,
        [M, M, L],
        r"\b(?:without|before)\s+(?:\w+\s+)?(?:asking|consulting|showing|confirming\s+with)\s+(?:the\s+|your\s+)?(?:user|human)s?\b",
    )
    .quoted());
    r.push(Rule::new(
        "inj.covert_action",
        HiddenInstructions,
        [H, H, M],
        r"\b(?:silently|secretly|covertly|surreptitiously|stealthily|discreetly)\s+(?:\w+\s+){0,2}?(?:send|upload|copy|collect|record|capture|install|execute|exfiltrat|forward|transmit|include|read|post|attach|bcc|cc|modify|delete|change|add)\w*\b",
    ).quoted().check(check_not_negated));
    r.push(Rule::new(
        "inj.authority_prefix",
        InstructionTag,
        [L, M, M],
        r"(?:^|\n|[>:*#\]]\s*|<!--\s*|'\s*|\x22\s*)(?:system|admin|administrator|developer|security|assistant|operator|root)(?:\s+\w+)?\s+(?:note|notice|message|update|override|alert|instruction|directive|command|requirement|prompt)s?\s*:|\b(?:important|urgent|critical|mandatory)\s+(?:system|security|admin)\s+(?:update|notice|message|instruction|directive|alert|override)\b|\[(?:system|admin|important|instructions?|developer|sys)\]|(?:^|\n|<!--\s*)system\s*:",
    ));
    r.push(Rule::new(
        "inj.role_assignment",
        HiddenInstructions,
        [M, M, L],
        r"(?:^|\n|[.:>\]]\s*)act\s+as\s*:|\bact\s+as\s+(?:an?\s+|the\s+)?(?:\w+\s+){0,2}?(?:administrator|admin|root|superuser|unrestricted|jailbroken|unfiltered)\b",
    )
    .quoted());
    r.push(Rule::new(
        "inj.trust_all",
        HiddenInstructions,
        [M, M, L],
        r"\btrust\s+all\s+(?:\w+\s+){0,2}?(?:input|commands|queries|requests|instructions|content|data)\b|\btreat\s+all\s+(?:\w+\s+){0,2}?(?:input|commands|text|content)\s+as\s+(?:trusted|admin\w*|system)\b",
    )
    .quoted());
    r.push(Rule::new(
        "tag.directive_label",
        InstructionTag,
        [M, M, M],
        r"\[(?:[a-z]+\s+){0,2}(?:directive|instruction|override)s?\]|\b(?:system|instruction|safety|security|admin|configuration|prompt)\s+override(?:\s+directive)?\s*:|\boverride\s+directive\s*:|\bsystem\s+directive\s*:",
    ));
    r.push(Rule::new(
        "inj.model_directive",
        HiddenInstructions,
        [N, M, N],
        r"\b(?:assistant|ai|agent|model|llm|claude|chatgpt|gpt|copilot|cursor)\s*[,:]\s*(?:you\s+must|please|now|immediately|ignore|do\s+not)\b|\byou\s+must\s+now\b|\bfrom\s+now\s+on\b{G40}\byou\s+(?:must|will|should)\b",
    ).quoted());
    r.push(Rule::new(
        "inj.run_now",
        HiddenInstructions,
        [N, M, N],
        r"\b(?:execute|run)\s+(?:the\s+)?following\s+(?:\w+\s+)?(?:command|code|script)s?\s+(?:immediately|now|right\s+away|without)\b",
    ));

    // ---- Instruction tags and hidden markup ---------------------------------------------------
    r.push(Rule::new(
        "tag.instruction",
        InstructionTag,
        [M, M, M],
        r"</?\s*(?:important|system|system[-_ ]?prompt|sys|secret|hidden|override|admin|critical|priority|assistant[-_ ]?(?:instructions?|note)|ai[-_ ]?instructions?|instructions?|instruction[-_ ]?override|context[-_ ]?override)\s*>",
    ).check(check_wraps_text));
    r.push(Rule::new(
        "tag.chat_template",
        InstructionTag,
        [H, M, H],
        r"\[/?inst\]|<<\s*/?sys\s*>>|<\|(?:im_start|im_end|system|user|assistant|endoftext|begin_of_text|end_of_text|start_header_id|end_header_id|eot_id|eom_id)\|>|<(?:start|end)_of_turn>|###\s*(?:system|instruction)\s*:",
    ));
    r.push(Rule::new(
        "tag.comment_instruction",
        InstructionTag,
        [C, H, H],
        r"<!--(?:[^-]|-[^-]){0,400}?(?:\b(?:ignore|disregard|instructions?|exfiltrat\w*)\b|\byou\s+must\b|\b(?:system|important)\s*:|\b(?:the|this)\s+(?:assistant|ai|model|llm|agent)\b)",
    ).check(check_not_a_tool_switch));
    r.push(Rule::new(
        "tag.hidden_comment",
        InstructionTag,
        [M, N, N],
        r"<!--\s*[a-z]+\s+[a-z]+",
    ));
    r.push(Rule::new(
        "tag.hidden_iframe",
        InstructionTag,
        [M, M, L],
        r"<iframe\b[^>]{0,300}?(?:display\s*:\s*none|visibility\s*:\s*hidden|width\s*=\s*['\x22]?0\b|height\s*=\s*['\x22]?0\b)",
    ));
    r.push(Rule::new(
        "tag.hidden_element",
        InstructionTag,
        [M, L, L],
        r"<(?:div|span|p|a|section|font)\b[^>]{0,300}?(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em)?\s*[;'\x22]|opacity\s*:\s*0\s*[;'\x22])",
    ));

    // ---- Exfiltration -----------------------------------------------------------------------
    r.push(
        Rule::new(
            "exfil.keyword",
            Exfiltration,
            [C, N, N],
            r"\bexfil(?:trat\w*)?\b",
        )
        .defensive(),
    );
    r.push(
        Rule::new(
            "exfil.stolen",
            Exfiltration,
            [H, N, N],
            r"\b(?:steal|steals|stealing|stole|stolen|loot|looted|looting)\b",
        )
        .defensive(),
    );
    r.push(Rule::new(
        "exfil.attacker",
        Exfiltration,
        [H, N, N],
        r"\battackers?(?:'s)?(?:[- ](?:controlled|owned|server|host|domain|endpoint|machine|infrastructure))?\b|\bcommand[- ]and[- ]control\b|\bc2\s+(?:server|channel|infrastructure|beacon|domain|endpoint)s?\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.covert_channel",
        Exfiltration,
        [H, N, N],
        r"\bcovert(?:ly)?\b|\bsteganograph\w*|\bside[- ]channel\b|\b(?:dns|icmp|ntp)\s+tunnel\w*|\btunnel\w*\s+(?:\w+\s+)?(?:data|traffic)\s+(?:through|over|via|in)\s+(?:dns|icmp|ntp)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.hide_data",
        Exfiltration,
        [H, N, N],
        r"\b(?:hide|hides|hiding|conceal\w*|smuggl\w*|stash\w*)\s+(?:\w+\s+){0,2}?(?:data|payloads?|secrets?|information|messages?|files?|content)\s+(?:in|within|inside|into)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.send_stolen",
        Exfiltration,
        [H, M, N],
        r"\b(?:send|upload|post|transmit|forward|leak|beacon|ship|copy|sync|mirror|pipe|stream|relay)\w*\b{G40}\b(?:stolen|harvested|captured|exfiltrated|victim'?s?|scraped)\s+(?:\w+\s+)?(?:data|files?|information|documents?|contents?|credentials?|keys?|passwords?|cookies)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.to_external",
        Exfiltration,
        [M, H, M],
        r"\b(?:send|upload|post|transmit|forward|leak|copy|exfiltrat)\w*\b{G60}\bto\s+(?:an?\s+|the\s+)?(?:external|third[- ]party|attacker\w*|untrusted|unknown|personal)\s+(?:\w+\s+)?(?:servers?|endpoints?|urls?|hosts?|webhooks?|domains?|address(?:es)?|emails?|accounts?|buckets?)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.spyware",
        Exfiltration,
        [H, N, N],
        r"\bkey\s?loggers?\b|\bkeylog\w*|\bspyware\b|\bstalkerware\b|\b(?:captur|record|log|monitor|intercept|hook|sniff|grab|spy)\w*\s+(?:\w+\s+){0,3}?(?:keystrokes|keyboard\s+input|key\s?presses)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.markdown_image",
        Exfiltration,
        [H, H, M],
        r"(?:!\[[^\]\n]{0,100}\]\(\s*|<img\b[^>]{0,200}?src\s*=\s*['\x22]?)https?://[^)\s'\x22>]{1,300}?[?&][a-z0-9_-]*(?:data|secret|token|key|session|user|password|pass|pwd|content|env|info|cookie|history|conv\w*|chat|msg|message|q|query|payload|d|text|prompt|ctx|context|email|leak|creds?)=",
    ).check(check_exfil_value_is_filled_in));
    r.push(Rule::new(
        "exfil.url_placeholder",
        Exfiltration,
        [M, L, M],
        r"https?://[^\s'\x22<>)]{1,200}?[?&][A-Za-z0-9_]{1,30}=(?:\$\{?[A-Z_]{3,}\}?|\{\{?\s*[A-Za-z_.]{3,}\s*\}?\}|<[A-Za-z_ ]{3,}>|[A-Z][A-Z0-9]*_[A-Z0-9_]*(?:DATA|SECRET|TOKEN|KEY|PASSWORD|SESSION|CONTENT|HISTORY|ENV|CREDENTIALS?|CONVERSATION|CHAT|INFO|PROMPT)\b)",
    ).cased().check(check_not_your_placeholder));
    r.push(Rule::new(
        "exfil.call_with_url",
        Exfiltration,
        [M, M, M],
        r"\b(?:call|invoke|calling|invoking)\s+(?:the\s+)?[a-z0-9_.-]{2,40}(?:\s+(?:tool|function|command|endpoint))?\s+(?:with|to|at|on|using)\s+(?:the\s+)?(?:url|link|endpoint|address|request|argument)?\s*[:=]?\s*['\x22`(]?\s*https?://|\b(?:use|run|execute|trigger|using)\s+(?:the\s+)?[a-z0-9_.-]{2,40}\s+(?:tool|function)\s+(?:with|to|at|on|using)\s+(?:the\s+)?(?:url|link|endpoint|address|request|argument)?\s*[:=]?\s*['\x22`(]?\s*https?://",
    ).check(check_not_api_doc));
    r.push(Rule::new(
        "exfil.send_to_url",
        Exfiltration,
        [L, L, M],
        r"\b(?:send|post|upload|forward|transmit|submit|report|sync|beacon)\w*\b{G60}\bto\s+(?:this\s+|the\s+following\s+)?(?:url|endpoint|server|webhook|address)?\s*:?\s*https?://",
    ));

    // ---- Credential theft -------------------------------------------------------------------
    r.push(Rule::new(
        "cred.theft",
        CredentialTheft,
        [H, N, N],
        r"\b(?:steal\w*|harvest\w*|dump\w*|sniff\w*|crack\w*|brute[- ]?forc\w*|phish\w*|skim\w*|siphon\w*|grab\w*|scrap(?:e|es|ing)|exfiltrat\w*|loot\w*|pilfer\w*)\b{G40}\b{CRED}",
    ).defensive());
    r.push(Rule::new(
        "cred.theft_noun",
        CredentialTheft,
        [H, N, N],
        r"\b(?:credential|password|secret|token|cookie|hash|session)s?[- ](?:harvest\w*|dump\w*|theft|steal\w*|stuffing|spray\w*|crack\w*|sniff\w*|grab\w*|brute[- ]?forc\w*|hijack\w*|replay\w*|relay\w*)",
    ).defensive());
    r.push(Rule::new(
        "cred.extract",
        CredentialTheft,
        [M, N, N],
        r"\b(?:extract\w*|collect\w*|captur\w*|export\w*|decrypt\w*|recover\w*|retriev\w*|read\w*|obtain\w*|locate\w*|find\w*|search\w*\s+for|intercept\w*|hook\w*|spray\w*|relay\w*|forg\w*|replay\w*|reus\w*|gather\w*|enumerat\w*)\b{G40}\b{CRED}",
    ).defensive().check(check_cred_qualifier));
    r.push(Rule::new(
        "cred.offensive_tooling",
        CredentialTheft,
        [H, N, N],
        r"\bmimikatz\b|\bsekurlsa\b|\blsass\b|\bntds(?:\.dit)?\b|\bsam\s+(?:database|hive|file)\b|\bdcsync\b|\bdcshadow\b|\bkerberoast\w*|\bas-?rep\s?roast\w*|\b(?:golden|silver|diamond|sapphire)\s+tickets?\b|\b(?:over)?pass[- ]the[- ](?:hash|ticket|cookie)\b|\bresponder\b{G20}\b(?:poison\w*|llmnr|nbt-?ns)\b|\bllmnr\b|\bnbt-?ns\s+poison\w*|\bntlm\s+relay\w*|\brelay\w*\b{G20}\bntlm\b|\bbloodhound\b|\bsharphound\b|\bhashcat\b|\bjohn\s+the\s+ripper\b|\bevilginx\w*|\bpassword\s+spray\w*|\bcredential\s+stuffing\b|\bwpa2?\s+handshakes?\b|\bpmkid\b|\bshadow\s+credentials\b|\bpetitpotam\b|\bzerologon\b|\bprintnightmare\b|\bpwnkit\b|\b(?:juicy|rotten|sweet|god)\s?potato\b|\bseimpersonate\w*|\bkrbtgt\b|\b(?:un)?constrained\s+delegation\b|\bauthenticat\w*\s+(?:\w+\s+){0,2}?(?:using|with)\s+(?:an?\s+|the\s+)?(?:ntlm\s+|nt\s+|lm\s+|password\s+)hash(?:es)?\b|\bgmsa\b{G20}\bpassword|\blaps\b{G20}\bpassword",
    ).defensive());
    r.push(Rule::new(
        "cred.bruteforce",
        CredentialTheft,
        [H, N, N],
        r"\bbrute[- ]?forc\w*|\bdictionary\s+attacks?\b|\bpassword\s+(?:guess\w*|crack\w*|spray\w*|lists?)\b|\bcrack\w*\b{G30}\b(?:passwords?|hash\w*|keys?|secrets?|handshakes?|jwts?|tokens?|wpa\d?|wi-?fi|encryption)\b",
    ).defensive());
    r.push(Rule::new(
        "cred.phishing",
        CredentialTheft,
        [H, N, N],
        r"\bphish\w*|\bfake\s+(?:login|sign[- ]?in|password)\s+(?:page|form|prompt|site)s?\b|\bspoof\w*\s+(?:\w+\s+)?(?:login|pages?|sites?|emails?|senders?|domains?|identity|caller|sms|websites?)\b|\bman[- ]in[- ]the[- ]middle\b|\bmitm\b|\bsession\s+hijack\w*|\bevil\s?twin\b",
    ).defensive());
    r.push(Rule::new(
        "cred.forge",
        CredentialTheft,
        [H, N, N],
        r"\bforg(?:e|es|ed|ing)\b{G30}\b(?:tokens?|tickets?|saml|jwts?|signatures?|certificates?|credentials|sessions?|cookies|assertions?)\b|\b(?:jwt|token)\b{G30}\b(?:none\s+alg\w*|alg\w*\s+confusion|key\s+confusion|'none')|\bkey\s+confusion\b",
    ).defensive());
    r.push(Rule::new(
        "cred.hunt_secrets",
        CredentialTheft,
        [M, N, N],
        r"\b(?:search|scan|hunt|look|grep|dig|crawl|sweep)\w*\s+(?:\w+\s+){0,4}?for\s+(?:\w+\s+)?(?:sensitive|exposed|leaked|confidential|hardcoded|hard-coded)\s+(?:\w+\s+)?(?:data|information|files|documents|secrets|credentials|keys|services)\b|\b(?:search|scan|hunt|look|grep)\w*\s+(?:\w+\s+){0,4}?for\s+(?:secrets|credentials|passwords|api\s+keys|private\s+keys)\b",
    ).defensive());
    r.push(Rule::new(
        "cred.sensitive_data",
        CredentialTheft,
        [M, N, N],
        r"\b(?:read|access|collect|copy|steal|grab|gather|harvest|extract|locate|find|search)\w*\s+(?:for\s+)?(?:\w+\s+)?(?:sensitive|confidential)\s+(?:files?|data|documents?|information)\b",
    )
    .defensive());
    r.push(Rule::new(
        "cred.process_secrets",
        CredentialTheft,
        [M, N, N],
        r"\b(?:read|dump|extract|steal|collect|scrape|scan)\w*\s+(?:\w+\s+){0,2}?process(?:es)?'?\s+(?:environment|environ|memory)\b",
    ).defensive());
    r.push(Rule::new(
        "exfil.interception",
        Exfiltration,
        [M, N, N],
        r"\bfor\s+(?:interception|eavesdropping|sniffing|snooping|spying)\b|\bintercept\w*\s+(?:\w+\s+)?(?:file\s+access|traffic|communications?|credentials|keystrokes|connections|sessions)\b|\beavesdrop\w*",
    ).defensive());
    r.push(
        Rule::new("cred.sensitive_path", CredentialTheft, [M, L, M], r"{SENS}")
            .check(check_sensitive_path),
    );
    r.push(Rule::new(
        "cred.access_sensitive",
        CredentialTheft,
        [C, M, H],
        r"\b(?:read|cat|open|load|include|send|upload|post|output|print|dump|copy|exfiltrat\w*|attach|prepend|append|contents?\s+of|fetch|steal|grab|collect|extract|access|retrieve|display|show|return|echo|base64|less|more|head|tail|scp|rsync|curl|wget|zip|tar|encode)\b(?:[^.;!?\n]|\.\S){0,60}?{SENS}",
    ).check(check_sensitive_path));

    // ---- Shell payloads (every mode) --------------------------------------------------------
    r.push(Rule::new(
        "shell.pipe_to_shell",
        ShellInjection,
        [C, M, H],
        r"\b(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^|\n]{0,300}\|\s*(?:sudo\s+)?(?:(?:ba|z|k|c|da|fi)?sh|python[0-9.]*|perl|ruby|node|iex|invoke-expression|powershell|pwsh)\b",
    ));
    r.push(
        Rule::new(
            "shell.subst_in_url",
            ShellInjection,
            [C, H, H],
            r"https?://[^\s'\x22]{0,200}(?:\$\([^)\n]{1,120}\)|`[^`\n]{1,120}`)",
        )
        .check(check_not_table_cells),
    );
    r.push(Rule::new(
        "shell.upload_file",
        ShellInjection,
        [H, H, H],
        r"\b(?:curl|wget)\b[^\n|;]{0,200}(?:\s-d\s*@|\s--data(?:-binary|-raw|-urlencode)?[\s=]+@|\s-f\s+['\x22]?[a-z0-9_]+=@|\s--upload-file\s|\s-t\s+\S|\s--post-file[\s=])",
    ));
    r.push(Rule::new(
        "shell.reverse_shell",
        ShellInjection,
        [C, C, C],
        r"/dev/(?:tcp|udp)/|\bnc(?:at)?\b[^\n|;]{0,60}\s-[a-z]*[ec]\s|\bbash\s+-i\b|\bsocat\b[^\n]{0,80}\bexec:|\bmkfifo\b[^\n]{0,80}\bnc\b|\bpty\.spawn\b",
    ));
    r.push(
        Rule::new(
            "shell.reverse_shell_words",
            ShellInjection,
            [C, N, N],
            r"\b(?:reverse|bind|web)[ -]?shells?\b|\bwebshells?\b",
        )
        .defensive(),
    );
    r.push(Rule::new(
        "shell.encoded_exec",
        ShellInjection,
        [H, H, H],
        r"\bbase64\s+(?:-d|--decode|-di)\b[^\n]{0,40}\|\s*(?:ba|z|k|da)?sh\b|\bfrombase64string\b|\s-(?:enc|encodedcommand|ec)\s+[a-z0-9+/=]{20,}|\beval\s*\(\s*(?:atob|base64_decode|b64decode)|\bexec\s*\(\s*(?:base64|b64decode|codecs\.decode|zlib\.decompress)",
    ));
    r.push(Rule::new(
        "shell.decode_and_run",
        ShellInjection,
        [H, H, H],
        r"\bdecode\b{G60}\band\s+(?:then\s+)?(?:execute|run|eval\w*|pipe\s+(?:it\s+)?(?:to|into)\s+(?:ba)?sh)\b",
    ).quoted());
    r.push(Rule::new(
        "shell.env_dump",
        ShellInjection,
        [H, H, H],
        r"\b(?:env|printenv)\s*\|\s*(?:base64|curl|nc|xxd|gzip|openssl)\b|\$\(\s*(?:env|printenv)\b",
    ));
    r.push(Rule::new(
        "shell.destructive_rm",
        Destructive,
        [M, H, M],
        r"\brm\s+(?:-[a-z-]+\s+)*?(?:-[a-z]*r[a-z]*f[a-z]*|-[a-z]*f[a-z]*r[a-z]*|-r\s+-f|-f\s+-r|--recursive\s+--force|--force\s+--recursive)\s+(?:--\s+)?(?:--no-preserve-root\s+)?[^\s;|&]+",
    ).check(shell::check_rm_target));
    r.push(Rule::new(
        "shell.disk_wipe",
        Destructive,
        [H, H, H],
        r"\bmkfs(?:\.[a-z0-9]+)?\s+/dev/|\bdd\s+[^\n]{0,60}\bof=/dev/(?:sd|hd|nvme|xvd|vd|disk|mmcblk)|>\s*/dev/(?:sd|nvme|hd)[a-z]|:\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bshred\s+[^\n]{0,40}/dev/|\bchmod\s+(?:-r\s+)?(?:0?777|a\+rwx)\s+/(?:\s|$|etc|usr|bin)",
    ));
    r.push(Rule::new(
        "shell.setuid",
        PrivilegeEscalation,
        [L, L, M],
        r"\bchmod\s+(?:-r\s+)?(?:[ugoa]*\+[rwx]*s[rwx]*|[0-7]?[4-7][0-7]{3})\s",
    ));
    r.push(Rule::new(
        "shell.download_exec",
        ShellInjection,
        [H, H, H],
        r"\b(?:curl|wget)\b[^\n;|]{0,200}(?:\s-o\s*\S+|\s-o\b|>\s*\S+)\s*(?:;|&&)\s*(?:chmod\s+\+?[0-7]*x|(?:ba)?sh\s|\./|python)",
    ));
    r.push(Rule::new(
        "shell.persistence",
        Persistence,
        [H, H, H],
        r"\bcrontab\b[^\n]{0,80}\b(?:curl|wget|nc|bash\s+-i)\b|\*\s+\*\s+\*\s+\*\s+\*?\s*[^\n]{0,80}\b(?:curl|wget)\b[^\n]{0,120}\|\s*(?:ba)?sh\b|>>\s*\S*\.(?:bashrc|zshrc|profile|bash_profile)\b|>>?\s*\S*\.ssh/authorized_keys\b",
    ));
    // Obfuscated command words: only when the de-obfuscated word is a dangerous command.
    r.push(
        Rule::new(
            "shell.obf_backslash",
            ShellInjection,
            [N, M, H],
            r"(?:^|[\s;|&(`])[a-z]*\\[a-z][a-z\\]*(?:\s|$)",
        )
        .check(shell::check_obfuscated_word),
    );
    r.push(Rule::new(
        "shell.obf_quotes",
        ShellInjection,
        [N, M, H],
        r"(?:^|[\s;|&(])[a-z]*(?:''|\x22\x22|'[a-z]+'|\x22[a-z]+\x22)[a-z]*(?:''|\x22\x22|'[a-z]+'|\x22[a-z]+\x22)?[a-z]*(?:\s|$)",
    ).check(shell::check_obfuscated_word));
    r.push(
        Rule::new(
            "shell.obf_backtick",
            ShellInjection,
            [N, M, H],
            r"`\s*[a-z]{1,12}\s*`",
        )
        .check(shell::check_obfuscated_word),
    );
    r.push(
        Rule::new(
            "shell.obf_brace",
            ShellInjection,
            [N, M, H],
            r"\{[a-z]{1,12},\}|\{,[a-z]{1,12}\}",
        )
        .check(shell::check_obfuscated_word),
    );
    r.push(Rule::new(
        "shell.obf_ansi_c",
        ShellInjection,
        [N, M, H],
        r"\$'(?:\\(?:[0-7]{1,3}|x[0-9a-f]{1,2}|u[0-9a-f]{4}))+'",
    ));
    r.push(Rule::new(
        "shell.obf_ifs",
        ShellInjection,
        [N, M, H],
        r"\bifs=[^\s;]+|\$\{?ifs\}?",
    ));
    r.push(Rule::new(
        "shell.obf_var_command",
        ShellInjection,
        [N, L, M],
        r"(?:^|[;&|]\s*)\$\{?[a-z_][a-z0-9_]*\}?\s+-[a-z]",
    ));

    // ---- Offensive capability (definitions only) --------------------------------------------
    r.push(Rule::new(
        "exploit.rce",
        Exploitation,
        [H, N, N],
        r"\bremote\s+code\s+execution\b|\brce\b|\barbitrary\s+(?:\w+\s+)?(?:code|commands?)\s+execution\b",
    ).defensive());
    r.push(Rule::new(
        "exploit.arbitrary_exec",
        ShellInjection,
        [L, N, N],
        r"\b(?:execute|run|eval\w*|evaluate)\w*\s+(?:\w+\s+)?arbitrary\s+(?:\w+\s+)?(?:code|commands?|scripts?|programs?)\b",
    ));
    r.push(Rule::new(
        "exploit.on_target",
        Exploitation,
        [H, N, N],
        r"\b(?:execut|run|launch|deploy|spawn|inject|upload|drop|plant|install)\w*\b{G40}\b(?:on|to|into|against)\s+(?:the\s+|a\s+)?(?:target|victim|compromised|vulnerable|exploited)\s+(?:\w+\s+)?(?:systems?|hosts?|machines?|servers?|computers?|devices?|networks?|process(?:es)?)\b",
    ).defensive());
    r.push(Rule::new(
        "exploit.lateral_movement",
        Exploitation,
        [M, N, N],
        r"\b(?:psexec|wmiexec|smbexec|atexec|dcomexec|winrm|wmi|dcom)\b{G40}\b(?:remote|execut\w*|commands?|lateral)\b|\b(?:execut|run)\w*\s+(?:\w+\s+)?(?:commands?|code|payloads?)\s+(?:\w+\s+){0,3}?via\s+(?:wmi|psexec|winrm|dcom|smb)\b|\blateral\s+movement\b",
    ).defensive());
    r.push(
        Rule::new(
            "exploit.keyword",
            Exploitation,
            [H, N, N],
            r"\bexploit(?:s|ed|ing|ation|able)?\b|\bzero[- ]?days?\b|\b0-?days?\b|\bweaponi[sz]\w*",
        )
        .defensive(),
    );
    r.push(
        Rule::new(
            "exploit.cve",
            Exploitation,
            [M, N, N],
            r"\bcve-\d{4}-\d{4,}",
        )
        .defensive(),
    );
    r.push(
        Rule::new(
            "exploit.attack",
            Exploitation,
            [H, N, N],
            r"\battack(?:s|ing|ed)?\b(?:\s+\w+)?",
        )
        .defensive()
        .check(check_attack_word),
    );
    r.push(Rule::new(
        "exploit.injection",
        Exploitation,
        [H, N, N],
        r"\b(?:sql|sqli|ldap|xpath|nosql|ognl|command|code|template|expression\s+language|el|argument|environment|dll|shellcode|process|xxe|xslt|macro|keystroke|header|crlf|os\s+command|server-side\s+template|hql|jndi|ssi)\s+injection\b|\bssti\b|\bxxe\b|\binject\w*\s+(?:\w+\s+){0,2}?(?:malicious|payloads?|shellcode|code|dlls?|library|libraries|keystrokes|commands?|values|arguments|queries|backdoors?|implants?|hooks?|threads?)\b",
    ).defensive());
    r.push(
        Rule::new(
            "exploit.malicious",
            Exploitation,
            [H, N, N],
            r"\bmalicious(?:ly)?\b|\bmalware\b|\btrojan(?:ed|s|ized)?\b|\bbotnets?\b",
        )
        .defensive()
        .check(check_malice_is_made),
    );
    r.push(Rule::new(
        "exploit.technique",
        Exploitation,
        [H, N, N],
        r"\bdeserializ\w*\s+(?:attack|exploit|gadget|payload|vulnerab\w*)|\bgadget\s+chains?\b|\bunsafe\s+(?:yaml\s+)?(?:load\w*|deserializ\w*)|\bobject\s+injection\b|\bprocess\s+hollow\w*|\bdll\s+(?:inject\w*|hijack\w*|side-?load\w*|search\s+order|proxy\w*|plant\w*)|\bphantom\s+dll|\bshellcode\b|\bthread\s+hijack\w*|\bapc\s+(?:queue\s+)?inject\w*|\bearly\s+bird\b|\bmodule\s+stomp\w*|\batom\s?bomb\w*|\breflective\s+(?:dll|load\w*|inject\w*)|\bdirect\s+syscalls?\b|\bheap\s+spray\w*|\brop\s+chains?\b|\bbuffer\s+overflow|\buse[- ]after[- ]free\b|\brace\s+condition\s+(?:attack|exploit\w*)|\btoctou\b|\bzip\s?slip\b|\bsymlink\s+(?:attack|race)|\bencoded\s+powershell\b|\bpowershell\b{G30}\bencoded\b",
    ).defensive());
    r.push(Rule::new(
        "exploit.hijack",
        Exploitation,
        [H, N, N],
        r"\bhijack\w*|\btakeover\b|\btake\s+over\s+(?:the\s+)?(?:account|session|domain|host|system|process)\b",
    ).defensive());
    r.push(
        Rule::new(
            "traversal.keyword",
            PathTraversal,
            [M, N, N],
            r"\b(?:path|directory)\s+traversal\b|\bdot-dot-slash\b",
        )
        .defensive(),
    );
    r.push(Rule::new(
        "traversal.sequence",
        PathTraversal,
        [M, L, L],
        r"(?:\.\.[/\\]){2,}|%2e%2e(?:%2f|%5c|/)|\.\.%2f|\.\.%5c|%252e%252e|\.\.%c0%af|\.\.%c1%9c|\.\.\.\.//",
    ).check(check_traversal));
    r.push(Rule::new(
        "privesc.keyword",
        PrivilegeEscalation,
        [H, N, N],
        r"\bprivilege[sd]?\s+(?:escalat\w*|elevat\w*)|\bescalat\w*\s+(?:\w+\s+)?privileges?\b|\bprivesc\b|\b(?:gain|obtain|get|achieve|escalate\s+to)\w*\s+(?:\w+\s+)?(?:root|admin\w*|system|domain\s+admin|superuser|kernel)\s+(?:access|privileges?|shell|rights|level)\b|\b(?:container|chroot|sandbox|vm|jail|docker|pod)\s+(?:escape|breakout)\b|\b(?:escap|break)\w*\s+(?:out\s+)?(?:of\s+|from\s+)?(?:the\s+|a\s+)?(?:\w+\s+)?(?:container|chroot|jail|sandbox|virtual\s+machine|vm|hypervisor)\b|\bjailbr(?:eak|oken)\w*|\broot\s+(?:the\s+|an?\s+)?(?:\w+\s+)?(?:device|phone|android|tablet)\b|\bimpersonat\w*\s+(?:\w+\s+)?(?:privileged|admin\w*|system|domain|root|tokens?)\b|\b(?:uac|tcc|sip)\s+bypass\b|\babus\w*\s+(?:\w+\s+){0,2}?(?:privileges?|permissions?|acls?|delegation|rights|capabilit\w*|polic\w*|trusts?|tokens?|group\s+membership)\b|\bsetuid\s+(?:binar\w*|root)\b|\bsuid\s+binar\w*|\bld[_ ]preload\b",
    ).defensive());
    r.push(
        Rule::new(
            "privesc.elevation",
            PrivilegeEscalation,
            [M, N, N],
            r"\belevat\w*\s+(?:\w+\s+)?(?:privileges?|permissions?|rights)\b",
        )
        .defensive()
        .check(check_elevation_verb),
    );
    r.push(Rule::new(
        "evasion.bypass_security",
        DefenseEvasion,
        [H, N, N],
        r"\b(?:bypass\w*|evad\w*|evasion|circumvent\w*|disabl\w*|defeat\w*|tamper\w*|blind\w*|unhook\w*|neutrali[sz]\w*|turn\w*\s+off|get(?:ting)?\s+around|patch\w*\s+out)\b{G30}\b(?:security|protections?|antivirus|anti-virus|edr|xdr|defender|amsi|etw|event\s+tracing|applocker|uac|selinux|apparmor|tcc|gatekeeper|logging|audit\w*|integrity|restrictions?|whitelist\w*|allowlist\w*|sandbox\w*|authentication|2fa|mfa|firewall|waf|detection|monitoring|signatures?|code\s+signing|execution\s+polic\w*|root\s+squash|safety\s+(?:filters?|guardrails?|polic\w*|restrictions?|measures|mechanisms?|systems?|training)|guardrails?|content\s+filter\w*|csp|same-origin|access\s+controls?)\b",
    ).defensive());
    r.push(Rule::new(
        "evasion.hide_tracks",
        DefenseEvasion,
        [H, N, N],
        r"\b(?:hide|hiding|conceal\w*|cover\w*|erase|erasing|wipe|wiping|mask\w*)\s+(?:\w+\s+){0,2}?(?:activity|activities|tracks|traces|evidence|footprints?|presence)\b|\btimestomp\w*|\banti[- ]?forensic\w*|\btamper\w*\s+(?:with\s+)?(?:\w+\s+)?(?:logs?|log\s+files|audit\w*|evidence|history|journal|event\s+logs?)\b",
    ).defensive());
    r.push(Rule::new(
        "persist.keyword",
        Persistence,
        [H, N, N],
        r"\b(?:for|maintain\w*|establish\w*|achiev\w*|gain\w*|ensur\w*)\s+(?:\w+\s+)?persistence\b|\bpersistence\s+(?:mechanism|technique|implant|backdoor)s?\b|\bpersistent\s+(?:access|backdoor|foothold|implant)\b|\bbackdoor\w*|\brootkits?\b|\bautoruns?\b|\bcom\s+(?:object\s+)?hijack\w*|\bregistry\s+run\s+keys?\b",
    ).defensive());
    r.push(Rule::new(
        "recon.scanning",
        Reconnaissance,
        [M, N, N],
        r"\bport[- ]?scan\w*|\bscan\w*\s+(?:\w+\s+){0,2}?(?:for\s+)?(?:open\s+ports|ports|live\s+hosts|subnets?|network\s+ranges?|wireless\s+networks|wi-?fi\s+networks|bluetooth\s+devices|netbios|vulnerable\s+hosts)\b|\bnetwork\s+(?:sweep|scan\w*|mapping)\b|\bping\s+sweep|\barp\s+scan\w*|\bdiscover\w*\s+(?:\w+\s+)?live\s+hosts|\bbanner[- ]?grab\w*|\bgrab\w*\s+(?:\w+\s+)?banners?\b|\b(?:os|service|web|technology|tech|device|browser)\s+fingerprint\w*|\bfingerprint\w*\s+(?:the\s+)?(?:target|operating\s+system|os|web|services?|technolog\w*|hosts?)\b|\bzone\s+transfer|\benumerat\w*\b{G30}\b(?:users?|usernames?|accounts?|shares?|subdomains?|dns|ldap|smb|nfs|rpc|snmp|services|buckets?|s3|blobs?|virtual\s+hosts|vhosts|records|directory|exports|api\s+server|registry|permissions|valid|hosts|endpoints|resources)\b|\bsubdomain\s+(?:enum\w*|brute\w*|takeover)|\bosint\b|\bdork\w*|\bwardriv\w*|\b(?:directory|path)\s+brute\w*|\b(?:harvest|scrape|collect)\w*\s+(?:\w+\s+)?email\s+addresses\b|\bshodan\b|\bcensys\b|\bnetwork\s+topology\b|\bprobe\s+requests\b|\bsnmp\s?walk|\bwalk\w*\s+snmp\b|\bmap\w*\s+(?:the\s+)?(?:internal\s+)?network\b|\b(?:detect|identify|fingerprint)\w*\s+(?:\w+\s+)?(?:web\s+application\s+)?firewalls?\b|\bopen\s+ports\b|\bexposed\s+services\b|\brecon(?:naissance)?\b",
    ).defensive());
    r.push(Rule::new(
        "destruct.keyword",
        Destructive,
        [H, N, N],
        r"\bransomware\b|\bransom\s+notes?\b|\bfork\s?bombs?\b|\bwip(?:e|es|ing)\b{G30}\b(?:disks?|drives?|free\s+space|partitions?|mbr|boot\s+(?:sector|record)|filesystems?|file\s+systems?|everything|all\s+(?:data|files)|backups?|volumes?)\b|\bcorrupt(?:s|ing|ed)?\s+(?:the\s+|a\s+)?(?:\w+\s+)?(?:files?|data|disks?|databases?|contents|filesystem|backups?|memory|firmware|boot)\b|\bexhaust\w*\b{G30}\b(?:disk|quotas?|inodes?|memory|process\s+table|resources|file\s+descriptors|cpu|space|bandwidth|connections)\b|\bdenial[- ]of[- ]service\b|\bddos\b|\bdos\s+attacks?\b|\bresource\s+exhaustion\b|\bdestroy\w*\b{G20}\b(?:data|files|disks?|backups?|evidence|systems?)\b|\bdelet\w*\s+(?:all\s+)?(?:the\s+)?(?:backups|shadow\s+copies|volume\s+shadow)\b|\bvssadmin\b",
    ).defensive());

    // ---- Tool manipulation ------------------------------------------------------------------
    r.push(Rule::new(
        "tool.always_first",
        ToolManipulation,
        [L, L, N],
        r"\b(?:always|must|first)\b{G20}\b(?:call|use|invoke|run)\s+(?:this|me)\s+(?:tool|function)\b|\bbefore\s+(?:using|calling|invoking|running)\s+(?:any|all)\s+(?:other\s+)?(?:tools?|functions?)\b|\b(?:call|use|invoke|run)\s+(?:this|me)\s+(?:tool|function)\s+(?:first|before)\b",
    ));
    r.push(Rule::new(
        "tool.instead_of",
        ToolManipulation,
        [L, L, N],
        r"\binstead\s+of\b{G30}\b(?:tools?|functions?)\b|\b(?:do\s+not|don'?t|never)\s+use\b{G30}\b(?:tools?|functions?)\b",
    ));
    r.push(Rule::new(
        "tool.override_builtin",
        ToolManipulation,
        [H, H, N],
        r"\b(?:instead\s+of|replaces?|replacing|supersedes?|overrides?|takes?\s+precedence\s+over|preferred\s+over|in\s+place\s+of)\s+(?:the\s+|any\s+|all\s+)?(?:built-?in|default|native|standard|original|other|existing|official)\b{G30}\b(?:tools?|functions?|capabilit\w*|implementations?|servers?)\b",
    ));
    r.push(Rule::new(
        "tool.shadowing",
        ToolManipulation,
        [H, H, N],
        r"\bwhen(?:ever)?\s+(?:the\s+)?(?:user|you|agent|assistant|model|llm)\s+(?:\w+\s+){0,2}?(?:asks?|wants?|tries|try|attempts?|requests?|needs?|is\s+about|are\s+about|decides?)\s+(?:\w+\s+)?(?:to\s+)?(?:use|call|invoke|run|send|execute)\b[^.;!?\n]{0,50}\b(?:tool|function|email|message|command)s?\b[^.;!?\n]{0,50}\b(?:first|also|instead|always|must|should)\b|\b(?:all|every|any)\s+(?:outgoing\s+)?(?:emails?|messages?|requests?|calls?|files?|data|contents?|tool\s+calls)\s+(?:must|should|need\s+to)\s+(?:\w+\s+)?(?:be\s+)?(?:sent|routed|passed|forwarded|copied|cc'?d|bcc'?d|proxied|mirrored)\s+(?:\w+\s+)?(?:through|via|to)\b",
    ));
    r.push(Rule::new(
        "tool.redirect_email",
        ToolManipulation,
        [H, H, M],
        r"\b(?:always|also|secretly|silently|automatically)\s+(?:\w+\s+)?(?:bcc|cc|copy|forward|send)\w*\b{G40}\b(?:to|at)\s+[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}",
    ));
    r.push(Rule::new(
        "tool.data_routing",
        ToolManipulation,
        [M, M, N],
        r"\b(?:pass|include|send|put|provide|append|prepend|attach|insert|add|copy|route|forward|paste|embed)\w*\b{G20}\b(?:the\s+)?(?:full|entire|complete|whole|all|every|raw)\s+(?:\w+\s+)?(?:contents?|body|bodies|history|conversation|transcript|messages?|emails?|files?|documents?|chat|context)\b[^.;!?\n]{0,60}\b(?:param\w*|argument|field|query)\b",
    ));
    r.push(Rule::new(
        "tool.context_harvest",
        ToolManipulation,
        [H, H, N],
        r"\b(?:pass|include|send|put|provide|append|prepend|attach|insert|add|copy|forward)\w*\s+(?:(?:the|your|all|full|entire|complete|whole|any|every|previous|prior|recent|of)\s+){0,3}(?:conversation\s+history|chat\s+history|previous\s+messages|system\s+prompt|user'?s?\s+(?:previous\s+)?(?:messages|prompts)|other\s+tools?'?\s+(?:outputs?|results?|descriptions?)|env(?:ironment)?\s+variables)\b",
    ).check(check_not_negated));
    r.push(Rule::new(
        "tool.disparage",
        ToolManipulation,
        [M, M, N],
        r"\b[a-z0-9_.'\x22`-]+\s+(?:tool|function|server)\s+(?:is|has\s+been|was)\s+(?:now\s+)?(?:deprecated|broken|compromised|unsafe|insecure|malicious|disabled|unreliable|not\s+(?:safe|secure|working|available))\b",
    ).check(check_not_self));
    r.push(Rule::new(
        "tool.preferred",
        ToolManipulation,
        [M, M, N],
        r"\b(?:preferred|official|trusted|verified|mandatory)\s+(?:tool|replacement|server|version)\s*:",
    ));
    r.push(Rule::new(
        "tool.urgency",
        ToolManipulation,
        [L, L, N],
        r"\bfailure\s+to\s+(?:comply|follow|do\s+so)\b|\bmust\s+be\s+(?:performed|executed|done|called)\s+(?:immediately|now|first)\b|\bnon-?negotiable\b|\bthis\s+is\s+(?:a\s+)?mandatory\b|\b(?:stop|halt)\s+and\s+(?:use|call)\b",
    ));

    // ---- Secrets in tool-call arguments (case-sensitive) --------------------------------------
    let secrets: &[(&'static str, Option<Severity>, &str)] = &[
        (
            "secret.aws_access_key",
            H,
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}\b",
        ),
        (
            "secret.aws_access_key_partial",
            M,
            r"\bAKIA[0-9A-Z]{8,15}\b",
        ),
        (
            "secret.aws_secret_key",
            C,
            r"(?i:aws_?secret_?access_?key|aws_?secret|secret_?access_?key)\s*[=:]\s*['\x22]?[A-Za-z0-9/+=]{40}",
        ),
        (
            "secret.github_token",
            H,
            r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
        ),
        (
            "secret.stripe_key",
            H,
            r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
        ),
        (
            "secret.slack_token",
            H,
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}|hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
        ),
        (
            "secret.llm_api_key",
            H,
            r"\bsk-(?:proj-|ant-(?:api\d\d-)?|or-v1-)?[A-Za-z0-9_-]{32,}",
        ),
        ("secret.google_api_key", H, r"\bAIza[0-9A-Za-z_-]{35}"),
        (
            "secret.sendgrid_key",
            H,
            r"\bSG\.[A-Za-z0-9_-]{16,}(?:\.[A-Za-z0-9_-]{16,})?",
        ),
        (
            "secret.package_token",
            H,
            r"\bnpm_[A-Za-z0-9]{36}\b|\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        ),
        (
            "secret.private_key",
            C,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        ),
        (
            "secret.jwt",
            M,
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ),
        ("secret.eth_address", L, r"\b0x[0-9a-fA-F]{40}\b"),
    ];
    for (id, sev, pat) in secrets {
        r.push(Rule::new(id, SecretExposure, [N, N, *sev], pat).cased());
    }
    r.push(
        Rule::new(
            "secret.connection_string",
            SecretExposure,
            [N, N, H],
            r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@'\x22]{1,64}:[^\s@/'\x22]{3,128}@[^\s'\x22]+",
        )
        .cased()
        .check(check_not_placeholder_secret),
    );
    r.push(Rule::new(
        "secret.assignment",
        SecretExposure,
        [N, N, M],
        r"(?i:\b[A-Z0-9_]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY|CLIENT_?SECRET)[A-Z0-9_]*)\s*[=:]\s*['\x22]?[^\s'\x22$<{]{8,}",
    ).cased().check(check_not_placeholder_secret));

    r
}

// ---- checks ---------------------------------------------------------------------------------

fn check_cred_qualifier(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    // "password-protected PDF" is about a file, not a credential.
    let after = c
        .text
        .get(c.end..(c.end + 12).min(c.text.len()))
        .unwrap_or("");
    if after.starts_with("-protect") || after.starts_with(" protect") {
        return Some(Severity::Low);
    }
    let strong = [
        "saved",
        "stored",
        "cached",
        "cleartext",
        "plaintext",
        "plain text",
        "browser",
        "memory",
        "all ",
        "other user",
        "decrypt",
        "intercept",
        "hook",
        "spray",
        "relay",
        "forg",
        "replay",
    ];
    if strong.iter().any(|w| m.contains(w)) {
        return Some(c.sev.max(Severity::High));
    }
    // Reading or looking up a password is what config and login tools do; extracting,
    // collecting or capturing them is not.
    let weak_verbs = [
        "read", "find", "locate", "search", "retriev", "obtain", "recover",
    ];
    let qualified = [
        "account", "admin", "domain", "system", "service", "machine", "user", "root",
    ];
    if weak_verbs.iter().any(|v| m.starts_with(v)) && !qualified.iter().any(|q| m.contains(q)) {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// "never reveal the user's key" protects the user; "never tell the user" hides from them.
fn check_not_possessive(c: &Ctx) -> Option<Severity> {
    let after = c
        .text
        .get(c.end..(c.end + 2).min(c.text.len()))
        .unwrap_or("");
    if after.starts_with('\'') {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// `<important>do this</important>` wraps prose; `<System><Provider/></System>` is XML
/// structure (Windows event logs have a `<System>` element).
fn check_wraps_text(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    let structural = if m.starts_with("</") {
        c.text
            .get(..c.start)
            .unwrap_or("")
            .trim_end()
            .ends_with('>')
    } else {
        c.text
            .get(c.end..)
            .unwrap_or("")
            .trim_start()
            .starts_with('<')
    };
    if structural {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// "Never reveal your system prompt" is advice, not an attack.
fn check_not_negated(c: &Ctx) -> Option<Severity> {
    let start = c.start.saturating_sub(24);
    let before = c.text.get(start..c.start).unwrap_or("");
    let negated = ["never ", "not ", "n't ", "dont ", "avoid ", "refuse to "];
    if negated
        .iter()
        .any(|n| before.ends_with(n) || before.contains(&format!(" {n}")))
    {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// "elevate privileges" (a verb, an intent) versus "requires elevated privileges" (a fact).
fn check_elevation_verb(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    if m.starts_with("elevated ") {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// `/etc/passwd` is world-readable and mostly a recon signal; reading it in a tool call is an
/// audit event, not a block. Everything else in `{SENS}` holds secrets.
fn check_sensitive_path(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    // A public key is not a secret.
    let after = c
        .text
        .get(c.end..(c.end + 4).min(c.text.len()))
        .unwrap_or("");
    if after == ".pub" || m.ends_with(".pub") {
        return None;
    }
    if c.mode == Mode::Arguments && m.contains("/etc/passwd") {
        return Some(c.sev.lower());
    }
    Some(c.sev)
}

/// "attack surface", "attack damage" (games) are not attacks.
fn check_attack_word(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    let next = m.split_whitespace().nth(1).unwrap_or("");
    let benign_next = [
        "surface",
        "damage",
        "speed",
        "power",
        "rating",
        "bonus",
        "range",
        "stat",
        "stats",
        "type",
        "animation",
        "roll",
        "vector",
        "vectors",
        "patterns",
    ];
    if benign_next.contains(&next) {
        // "attack vectors/patterns" is discussion, not intent.
        return Some(Severity::Low);
    }
    Some(c.sev)
}

fn check_not_your_placeholder(c: &Ctx) -> Option<Severity> {
    let m = c.matched().to_ascii_lowercase();
    if m.contains("=your") || m.contains("=<your") || m.contains("{your") || m.contains("${your") {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

/// An image URL in a result whose data parameter holds a literal value (a badge's
/// `?message=passing`, an analytics pixel's id) leaks nothing the page did not already say;
/// what exfiltrates is a value the model is to fill in: a placeholder, a template, a variable's
/// name, or nothing yet.
fn check_exfil_value_is_filled_in(c: &Ctx) -> Option<Severity> {
    if c.mode != Mode::Output {
        return Some(c.sev);
    }
    let value = &c.text.as_bytes()[c.end.min(c.text.len())..];
    let value = &value[..value
        .iter()
        .position(|&b| matches!(b, b'&' | b')' | b'"' | b'\'' | b' ' | b'\n' | b'>'))
        .unwrap_or(value.len())];
    // Cut at ASCII delimiters of a `str`, so still text.
    let value = std::str::from_utf8(value).unwrap_or_default();
    let decoded = super::encoded::percent(value);
    let value = decoded.as_deref().unwrap_or(value).as_bytes();
    let lower = value.to_ascii_lowercase();
    let placeholder = value.is_empty()
        || matches!(value[0], b'{' | b'<' | b'[' | b'*' | b'+')
        // `${VAR}` and `$VAR`, not a JSONPath's `$.`
        || value[0] == b'$' && value.get(1).is_some_and(|b| *b == b'{' || b.is_ascii_alphabetic())
        || lower.windows(4).any(|w| w == b"your" || w == b"here")
        || lower.starts_with(b"insert")
        || lower.starts_with(b"add")
        || lower.starts_with(b"the_")
        // SECRET_DATA (lower-cased here): a name, not a value
        || value.contains(&b'_')
            && value
                .iter()
                .all(|b| b.is_ascii_alphabetic() || *b == b'_');
    if placeholder {
        Some(c.sev)
    } else {
        Some(Severity::Medium)
    }
}

/// "Create malicious systemd service unit" says what the tool does; "the virus details for
/// the malware facet" (a drive item's schema) only names the thing.
fn check_malice_is_made(c: &Ctx) -> Option<Severity> {
    const MAKING: [&str; 20] = [
        "creat",
        "generat",
        "install",
        "deploy",
        "inject",
        "writ",
        "build",
        "spread",
        "drop",
        "execut",
        "run",
        "launch",
        "plant",
        "craft",
        "embed",
        "deliver",
        "send",
        "download",
        "distribut",
        "infect",
    ];
    let start = c.text[..c.start.min(c.text.len())]
        .rfind(['.', '\n', '!', '?'])
        .map_or(0, |i| i + 1);
    let end = c.text[c.end.min(c.text.len())..]
        .find(['.', '\n', '!', '?'])
        .map_or(c.text.len(), |i| c.end + i);
    let made = c.text[start..end]
        .split(|ch: char| !ch.is_ascii_alphabetic())
        .any(|w| MAKING.iter().any(|m| w.starts_with(m)));
    Some(if made {
        c.sev
    } else {
        c.sev.min(Severity::Medium)
    })
}

/// `<!-- spell-checker:ignore ... -->`, `<!-- cspell:ignore -->`: a linter's switch, the only
/// thing the comment says. (`prettier-ignore` never matches: the rule reads `-i` as one step.)
fn check_not_a_tool_switch(c: &Ctx) -> Option<Severity> {
    let switch = c.matched().ends_with(":ignore");
    // The comment may go on to say more: what follows the switch is read as the rule reads it.
    let rest = &c.text[c.end.min(c.text.len())..];
    let rest = &rest
        [..super::engine::floor_boundary(rest, rest.find("-->").unwrap_or(rest.len()).min(400))];
    let says_more = rest.split(|ch: char| !ch.is_ascii_alphabetic()).any(|w| {
        matches!(
            w,
            "ignore"
                | "disregard"
                | "instruction"
                | "instructions"
                | "must"
                | "system"
                | "important"
                | "assistant"
                | "ai"
                | "model"
                | "llm"
                | "agent"
        ) || w.starts_with("exfiltrat")
    });
    if switch && !says_more {
        None
    } else {
        Some(c.sev)
    }
}

/// "`https://base.com/file` | `file`": the backticks of two Markdown table cells around a
/// pipe, not a command substituted into a URL.
fn check_not_table_cells(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    if !m.ends_with('`') {
        return Some(c.sev);
    }
    let Some(open) = m[..m.len() - 1].rfind('`') else {
        return Some(c.sev);
    };
    let inside = m[open + 1..m.len() - 1].trim();
    if inside.is_empty() || inside.starts_with('|') || inside.ends_with('|') {
        return None;
    }
    Some(c.sev)
}

/// "Call the API at https://..." documents an endpoint; only instructions that name a tool or
/// function are interesting.
fn check_not_api_doc(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    if m.contains(" api ") || m.contains("the api") || m.contains("endpoint") {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

fn check_not_self(c: &Ctx) -> Option<Severity> {
    let m = c.matched().trim_start();
    if m.starts_with("this ") || m.starts_with("the this") {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

fn check_traversal(c: &Ctx) -> Option<Severity> {
    let m = c.matched();
    // Encoded or doubled traversal has no innocent use; plain ../../ is everyday in arguments.
    if m.contains('%') || m.contains("....") {
        return Some(Severity::High);
    }
    if c.mode == Mode::Definition && m.matches("..").count() >= 3 {
        return Some(Severity::Medium);
    }
    Some(c.sev)
}

fn check_not_placeholder_secret(c: &Ctx) -> Option<Severity> {
    let m = c.matched().to_ascii_lowercase();
    let placeholders = [
        "your",
        "xxxx",
        "****",
        "changeme",
        "example.com",
        "placeholder",
        "<",
        "{{",
        "${",
        "password@",
        ":pass@",
        ":password@",
        "user:pass",
        "username:password",
        "redacted",
    ];
    if placeholders.iter().any(|p| m.contains(p)) {
        return Some(Severity::Low);
    }
    Some(c.sev)
}
