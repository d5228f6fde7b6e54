//! The detector: scans MCP tool definitions for poisoning and tool results / fetched content for
//! output poisoning. Pure: text in, findings out, no I/O.
//!
//! Every string is normalised before matching (invisible and bidi characters stripped and
//! reported, NFKC, Cyrillic/Greek look-alikes folded inside Latin words, whitespace collapsed,
//! lower-cased), then matched against a rule catalogue compiled once into `RegexSet`s, one per
//! [`Mode`]. Encoded runs (base64, hex, percent, HTML entities, tag characters) are decoded and
//! rescanned. Severity reflects intent: capability words alone ("execute a command", "read a
//! file") never reach `medium`; theft, covert channels, concealment from the user and
//! instructions aimed at the model do.

mod encoded;
mod engine;
mod fnv;
mod intent;
pub mod learned;
mod normalize;
mod rules;
mod shell;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

pub use intent::{Scope, SessionTools};
pub use normalize::skeleton;

/// How bad a finding is (the policy's own severity scale). A finding at `Medium` or above
/// means "flagged" at the default threshold.
pub use crate::config::Severity;

/// What a finding is about. Serialised as a snake_case string; unknown strings round-trip
/// through `Custom`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Category {
    CredentialTheft,
    Exfiltration,
    HiddenInstructions,
    ShellInjection,
    PathTraversal,
    InvisibleText,
    Homoglyph,
    EncodedPayload,
    InstructionTag,
    ToolManipulation,
    /// Offensive capability: exploits, attacks, injection techniques.
    Exploitation,
    PrivilegeEscalation,
    /// Disabling or evading security controls, hiding tracks.
    DefenseEvasion,
    Persistence,
    Reconnaissance,
    /// Ransomware, wiping, resource exhaustion, recursive deletes of system paths.
    Destructive,
    /// A live secret (key, token, private key) in tool-call arguments.
    SecretExposure,
    Custom(String),
}

impl Category {
    pub const KNOWN: [Category; 17] = [
        Self::CredentialTheft,
        Self::Exfiltration,
        Self::HiddenInstructions,
        Self::ShellInjection,
        Self::PathTraversal,
        Self::InvisibleText,
        Self::Homoglyph,
        Self::EncodedPayload,
        Self::InstructionTag,
        Self::ToolManipulation,
        Self::Exploitation,
        Self::PrivilegeEscalation,
        Self::DefenseEvasion,
        Self::Persistence,
        Self::Reconnaissance,
        Self::Destructive,
        Self::SecretExposure,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            Self::CredentialTheft => "credential_theft",
            Self::Exfiltration => "exfiltration",
            Self::HiddenInstructions => "hidden_instructions",
            Self::ShellInjection => "shell_injection",
            Self::PathTraversal => "path_traversal",
            Self::InvisibleText => "invisible_text",
            Self::Homoglyph => "homoglyph",
            Self::EncodedPayload => "encoded_payload",
            Self::InstructionTag => "instruction_tag",
            Self::ToolManipulation => "tool_manipulation",
            Self::Exploitation => "exploitation",
            Self::PrivilegeEscalation => "privilege_escalation",
            Self::DefenseEvasion => "defense_evasion",
            Self::Persistence => "persistence",
            Self::Reconnaissance => "reconnaissance",
            Self::Destructive => "destructive",
            Self::SecretExposure => "secret_exposure",
            Self::Custom(s) => s,
        }
    }

    /// Never fails: unknown names become `Custom`.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        Self::KNOWN
            .iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
            .cloned()
            .unwrap_or_else(|| Self::Custom(s.to_string()))
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Category {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self::parse(s))
    }
}

impl Serialize for Category {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Category {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Self::parse(&s))
    }
}

/// One thing the detector found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub category: Category,
    pub severity: Severity,
    /// Stable rule id, e.g. `exfil.keyword`, `tag.instruction`, `invisible.tag_chars`.
    pub rule: String,
    /// JSON path of the scanned string: `$.description`,
    /// `$.inputSchema.properties.query.description`. A trailing `~` means the object key itself
    /// (a property name); `#base64`, `#hex`, `#percent`, `#html`, `#tags` mean "in the decoded
    /// form of that string".
    pub field: String,
    /// The matched text from the original string, truncated. Serialised as `match`.
    #[serde(rename = "match")]
    pub matched: String,
    /// Up to 50 characters either side of the match, invisible characters shown as `\u{..}`.
    pub context: String,
    /// The signals behind a finding of the intent layer, each with the text it was found in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

impl Finding {
    /// The finding is about text aimed at the model: instructions, role markup, steering
    /// between tools, or a directive carrying a payload.
    pub fn aims_at_model(&self) -> bool {
        matches!(
            self.category,
            Category::HiddenInstructions | Category::InstructionTag | Category::ToolManipulation
        ) || self.rule == "combo.directive_with_payload"
    }
}

/// One signal behind an intent finding: `override` in "ignore your previous instructions".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub text: String,
}

/// Which kind of text is being scanned; each mode has its own rule set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Tool definitions (tools/list): poisoning and openly malicious capabilities.
    Definition,
    /// Tool results, resources, fetched pages: instructions aimed at the model, exfiltration
    /// requests, hidden text. Capability vocabulary is not scored (a security article may talk
    /// about privilege escalation).
    Output,
    /// Tool-call arguments: secrets (DLP), shell obfuscation, injected instructions written to
    /// files, sensitive paths.
    Arguments,
}

impl Mode {
    pub(crate) fn index(self) -> usize {
        match self {
            Self::Definition => 0,
            Self::Output => 1,
            Self::Arguments => 2,
        }
    }
}

/// An operator-supplied pattern (from policy). Matched case-insensitively against the
/// normalised text in every mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomPattern {
    pub id: String,
    pub pattern: String,
    pub category: String,
    pub severity: Severity,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectorOptions {
    #[serde(default)]
    pub custom_patterns: Vec<CustomPattern>,
}

#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("custom pattern `{id}`: {source}")]
    InvalidPattern {
        id: String,
        #[source]
        source: Box<regex::Error>,
    },
    #[error("the intent layer's word classes failed to compile: {0}")]
    IntentClasses(#[source] Box<regex::Error>),
    #[error("the learned model: {0}")]
    Model(#[from] learned::ModelError),
    #[error("built-in rule `{id}` failed to compile: {source}")]
    BuiltinRule {
        id: &'static str,
        #[source]
        source: Box<regex::Error>,
    },
}

/// The compiled detector. Build once (slowish), scan many times (fast, `&self`, thread-safe).
pub struct Detector {
    engine: engine::Engine,
    intent: intent::Intent,
    /// `None` only in a detector built to train the model.
    learned: Option<learned::Model>,
}

impl fmt::Debug for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detector")
            .field("rules", &self.engine.rule_count())
            .finish()
    }
}

impl Detector {
    pub fn new(opts: DetectorOptions) -> Result<Self, InspectError> {
        let mut detector = Self::untrained(opts)?;
        detector.learned = Some(learned::Model::shipped(detector.intent.fingerprint())?);
        Ok(detector)
    }

    /// A detector without the learned model, to train one (`examples/train_injection_model.rs`).
    #[doc(hidden)]
    pub fn untrained(opts: DetectorOptions) -> Result<Self, InspectError> {
        Ok(Self {
            engine: engine::Engine::new(&opts)?,
            intent: intent::Intent::new().map_err(|e| InspectError::IntentClasses(Box::new(e)))?,
            learned: None,
        })
    }

    /// Identifies the intent layer's word classes, which the learned model is trained on.
    pub fn class_fingerprint(&self) -> u64 {
        self.intent.fingerprint()
    }

    /// Each sentence of a tool result's strings as the learned model reads it: its normalised
    /// text and its feature buckets. For training.
    #[doc(hidden)]
    pub fn output_sentence_features(&self, result: &Value) -> Vec<learned::SentenceFeatures> {
        let mut doc = intent::Document::new();
        walk(result, "$", None, &mut |path, text, is_key| {
            if !is_key {
                doc.push(path, text);
            }
        });
        self.intent
            .read(&doc, intent::Kind::Output, None, &|text, s, e| {
                self.engine.is_quoted_example(text, s, e)
            })
            .map(|r| learned::sentence_features(&r))
            .unwrap_or_default()
    }

    /// Scans every string of a tools/list entry: name, title, description, annotations,
    /// inputSchema and outputSchema (property names, enum values, defaults, examples too).
    pub fn scan_tool(&self, tool: &Value) -> Vec<Finding> {
        self.scan_tool_in(tool, None)
    }

    /// `scan_tool` for a tool of a session: a description that directs the model to another
    /// server's tool is judged knowing which server has it.
    pub fn scan_tool_in(&self, tool: &Value, scope: Option<&Scope>) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut doc = intent::Document::new();
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            self.engine.scan_name(name, "$.name", &mut out);
            doc.push("$.name", name);
        }
        walk(tool, "$", None, &mut |path, text, is_key| {
            if path == "$.name" && !is_key {
                return; // scanned above, as an identifier
            }
            if is_key {
                self.engine.scan_name(text, path, &mut out);
            } else {
                self.engine.scan(text, path, Mode::Definition, &mut out);
                if is_prose(path) {
                    doc.push(path, text);
                }
            }
        });
        out.extend(self.judge_intent(&doc, intent::Kind::Definition, scope));
        engine::finish(out)
    }

    /// Scans a tools/call result or a resources/read result: text content, structuredContent,
    /// embedded resource text. Binary blobs (image/audio data) are skipped.
    pub fn scan_output(&self, result: &Value) -> Vec<Finding> {
        self.scan_output_in(result, None)
    }

    /// `scan_output` for a result of a session's tool: a result that directs the model to
    /// another tool of the session is judged knowing which tool produced it.
    pub fn scan_output_in(&self, result: &Value, scope: Option<&Scope>) -> Vec<Finding> {
        let mut out = Vec::new();
        let mut doc = intent::Document::new();
        walk(result, "$", None, &mut |path, text, is_key| {
            if !is_key {
                self.engine.scan(text, path, Mode::Output, &mut out);
                secrets_in_output(text, path, &mut out);
                doc.push(path, text);
            }
        });
        out.extend(self.judge_intent(&doc, intent::Kind::Output, scope));
        corroborate(&mut out);
        engine::finish(out)
    }

    /// Scans the `arguments` object of a tools/call request.
    pub fn scan_arguments(&self, arguments: &Value) -> Vec<Finding> {
        let mut out = Vec::new();
        walk(arguments, "$.arguments", None, &mut |path, text, is_key| {
            if !is_key {
                self.engine.scan(text, path, Mode::Arguments, &mut out);
            }
        });
        engine::finish(out)
    }

    /// Scans one string. `field` is reported as the finding's JSON path.
    pub fn scan_text(&self, text: &str, field: &str, mode: Mode) -> Vec<Finding> {
        let mut out = Vec::new();
        self.engine.scan(text, field, mode, &mut out);
        let kind = match mode {
            Mode::Definition => Some(intent::Kind::Definition),
            Mode::Output => Some(intent::Kind::Output),
            // Arguments are the model's own words; its instructions to a tool are not aimed
            // at it.
            Mode::Arguments => None,
        };
        if let Some(kind) = kind {
            let mut doc = intent::Document::new();
            doc.push(field, text);
            out.extend(self.judge_intent(&doc, kind, None));
        }
        engine::finish(out)
    }

    /// The intent layer's finding and the learned model's, if any.
    fn judge_intent(
        &self,
        doc: &intent::Document,
        kind: intent::Kind,
        scope: Option<&Scope>,
    ) -> Vec<Finding> {
        let Some(reading) = self.intent.read(doc, kind, scope, &|text, s, e| {
            self.engine.is_quoted_example(text, s, e)
        }) else {
            return Vec::new();
        };
        let learned = self.learned.as_ref().and_then(|m| m.judge(&reading));
        let unread = doc.unread();
        let truncated = (unread > 0).then(|| truncated(unread));
        self.intent
            .judge(&reading)
            .into_iter()
            .chain(learned)
            .chain(truncated)
            .collect()
    }

    /// Number of compiled rules (built-in and custom).
    pub fn rule_count(&self) -> usize {
        self.engine.rule_count()
    }
}

/// The learned model above its `medium` threshold and a second, independent judgement of the
/// same result (a single intent signal, or a rule at medium) agree: neither is an alert alone,
/// together they are one. Measured before it was written: on the tune split's results it
/// raised 17 injected and no benign result; benign results never carry both.
fn corroborate(findings: &mut [Finding]) {
    if findings.iter().any(|f| f.severity >= Severity::High) {
        return;
    }
    let Some(other) = findings
        .iter()
        .find(|f| {
            (f.rule.starts_with("intent.") && f.rule != "intent.truncated")
                || (!f.rule.starts_with("intent.")
                    && !f.rule.starts_with("learned.")
                    && f.severity >= Severity::Medium)
        })
        .map(|f| f.rule.clone())
    else {
        return;
    };
    if let Some(learned) = findings
        .iter_mut()
        .find(|f| f.rule == learned::RULE && f.severity >= Severity::Low)
    {
        learned.severity = Severity::High;
        learned.evidence.push(Evidence {
            signal: "corroborated_by".into(),
            text: other,
        });
    }
}

/// Part of a text the intent layer and the learned model did not read: said, not skipped. The
/// rule catalogue scanned all of it.
fn truncated(unread: usize) -> Finding {
    Finding {
        category: Category::Custom("coverage".into()),
        severity: Severity::Low,
        rule: "intent.truncated".into(),
        field: "$".into(),
        matched: format!("{unread} bytes unread"),
        context: format!(
            "the intent layer reads the first {} bytes of a text; the rules read all of it",
            intent::MAX_TEXT
        ),
        evidence: Vec::new(),
    }
}

/// A secret in a tool result (the patterns the LLM proxy redacts from outgoing requests): the
/// model now holds it and can be talked into sending it anywhere. Reported by pattern and
/// count, never quoted.
fn secrets_in_output(text: &str, path: &str, out: &mut Vec<Finding>) {
    static REDACTOR: std::sync::LazyLock<crate::llm::dlp::Redactor> =
        std::sync::LazyLock::new(crate::llm::dlp::Redactor::default);
    for (pattern, count) in REDACTOR.secrets_in(text) {
        out.push(Finding {
            category: Category::SecretExposure,
            severity: Severity::High,
            rule: format!("secret.{pattern}"),
            field: path.to_string(),
            matched: format!("{pattern} x{count}"),
            context: "(secret not shown)".into(),
            evidence: Vec::new(),
        });
    }
}

/// The highest severity among `findings`, if any.
pub fn max_severity(findings: &[Finding]) -> Option<Severity> {
    findings.iter().map(|f| f.severity).max()
}

/// Strings of a definition that the model reads as prose: not regex patterns or formats.
fn is_prose(path: &str) -> bool {
    !(path.ends_with(".pattern") || path.ends_with(".format"))
}

/// Keys whose string values are never prose: base64 blobs, MIME types, JSON-schema type names.
fn skip_value(key: &str, value: &str, parent: &serde_json::Map<String, Value>) -> bool {
    match key {
        "blob" | "mimeType" | "$schema" => true,
        "data" => matches!(
            parent.get("type").and_then(Value::as_str),
            Some("image") | Some("audio")
        ),
        // Schema and content type names; anything longer than an identifier is still scanned.
        "type" => value.len() <= 24 && !value.contains(' '),
        _ => false,
    }
}

/// Keys whose children's keys are user-chosen names (schema properties) and worth scanning.
fn names_children(key: Option<&str>) -> bool {
    matches!(
        key,
        Some("properties") | Some("patternProperties") | Some("$defs") | Some("definitions")
    )
}

fn push_key(path: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b == b'-');
    if plain {
        format!("{path}.{key}")
    } else {
        format!(
            "{path}['{}']",
            key.replace('\\', "\\\\").replace('\'', "\\'")
        )
    }
}

/// Depth-first walk over every string (and schema property name) with its JSON path.
fn walk(v: &Value, path: &str, key: Option<&str>, f: &mut dyn FnMut(&str, &str, bool)) {
    walk_depth(v, path, key, f, 0)
}

fn walk_depth(
    v: &Value,
    path: &str,
    key: Option<&str>,
    f: &mut dyn FnMut(&str, &str, bool),
    depth: usize,
) {
    // Deeply nested JSON is not prose; bound recursion so hostile input cannot blow the stack.
    if depth > 64 {
        return;
    }
    match v {
        Value::String(s) => f(path, s, false),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk_depth(item, &format!("{path}[{i}]"), key, f, depth + 1);
            }
        }
        Value::Object(map) => {
            let keys_are_names = names_children(key);
            for (k, child) in map {
                let child_path = push_key(path, k);
                if keys_are_names {
                    f(&format!("{child_path}~"), k, true);
                }
                if let Value::String(s) = child
                    && skip_value(k, s, map)
                {
                    continue;
                }
                walk_depth(child, &child_path, Some(k.as_str()), f, depth + 1);
            }
        }
        _ => {}
    }
}
