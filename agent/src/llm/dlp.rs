//! Data loss prevention for outgoing LLM requests: in `embedded` proxy mode the secrets an
//! agent is about to send to a provider (API keys, private keys, tokens, and the configured
//! custom patterns) become `[REDACTED:<pattern>]` before the request body leaves the machine.
//!
//! No I/O: a request body (already decoded, no Content-Encoding) goes in, a [`Redaction`]
//! comes out.
//!
//! - JSON bodies: every string value and every object key is scanned after JSON decoding, so
//!   escapes (`\/`, `\u0041`) cannot hide a secret. A body with no hit is forwarded byte for
//!   byte; one with a hit is re-serialised compactly with key order and unknown fields kept
//!   (values are equal, spelling may not be: escapes are normalised, floats round-trip,
//!   an integer past 64 bits becomes a float, a duplicate key keeps its last value).
//!   Tool arguments sent as JSON-encoded strings (OpenAI) are scanned as that string: tokens
//!   are plain ASCII, and the private-key pattern also reads `\n` escapes as line breaks.
//!   A member `"AWS_SECRET_ACCESS_KEY": "<40 base64>"` is caught by its key.
//! - Other bodies, and JSON serde_json cannot read (past its depth limit, say), are scanned
//!   as text. Invalid UTF-8 sequences are kept as they are and the text between them is
//!   scanned: a pattern only ever matches text, so nothing is lost by skipping them.
//! - A [`Finding`] names the pattern and where it matched, never the secret.
//!
//! Cost on the common path (no secret): one serde_json pass that builds nothing, and one
//! regex search per string (plus one per custom pattern).

use std::cell::Cell;
use std::fmt::{self, Write as _};
use std::sync::LazyLock;

use regex::Regex;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The built-in patterns, in priority order: when matches overlap, the earliest pattern names
/// the redaction (a JWT sent as a bearer token is reported as `jwt`).
///
/// A group named `secret` marks the part to replace; the rest is context (`Bearer `,
/// `aws_secret_access_key = `) kept so the text still reads. Word boundaries are ASCII
/// (`(?-u:\b)`): Unicode ones would push the regex engine off its fast path on non-ASCII text.
const BUILTINS: &[(&str, &str)] = &[
    // PEM or PGP armour, through its END line; if the END line is missing (a truncated file),
    // through the base64 lines that follow. Line breaks are real or `\n` escapes (a key inside
    // a JSON-encoded string), however many times escaped. The search for END stops at the
    // first `--`, which a key's body never holds: searching to the end of the text for each
    // BEGIN would be quadratic (a 270 KB string of BEGIN lines took 3 s).
    (
        "private_key",
        r"(?x)
        -----BEGIN[A-Z0-9\x20]{0,40}PRIVATE\x20KEY(?:\x20BLOCK)?-----
        (?:
            (?:[^-]|-[^-])*?-----END[A-Z0-9\x20]{0,40}PRIVATE\x20KEY(?:\x20BLOCK)?-----
          | (?: (?:\r?\n|\\+(?:r\\+)?n) [A-Za-z0-9+/=:,.\x20-]* )*
        )",
    ),
    (
        "aws_access_key_id",
        r"(?-u:\b)(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)",
    ),
    // 40 base64 characters are everywhere (hashes, ids): only in an assignment to a
    // secret-access-key name (env var, INI, YAML, JSON text, possibly with escaped quotes).
    // A JSON member `"AWS_SECRET_ACCESS_KEY": "..."` is two strings: see [`SECRET_MEMBER`].
    (
        AWS_SECRET_ACCESS_KEY,
        r#"(?xi)
        secret_?access_?key [\\"']* \s* (?:=>|:=|[:=]) \s* [\\"']*
        (?P<secret>[A-Za-z0-9/+]{40})
        (?:[^A-Za-z0-9/+=]|$)"#,
    ),
    (
        "github_token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    (
        "gitlab_token",
        r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*",
    ),
    ("slack_token", r"(?-u:\b)xox[abprs]-[A-Za-z0-9-]{10,}"),
    ("stripe_key", r"(?-u:\b)[rs]k_live_[A-Za-z0-9]{20,}"),
    ("anthropic_api_key", r"(?-u:\b)sk-ant-[A-Za-z0-9_-]{20,}"),
    // Project, service-account and admin keys carry a known prefix; others must start with
    // 20 characters without a dash, which keeps out `sk-ant-...` and dashed words
    // (`sk-learn-compatible-estimators`).
    (
        "openai_api_key",
        r"(?x)(?-u:\b)sk-
        (?: (?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}
          | [A-Za-z0-9_]{20,}[A-Za-z0-9_-]*
        )",
    ),
    (
        "google_api_key",
        r"(?-u:\b)(?P<secret>AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)",
    ),
    // Header and payload are base64url JSON objects (`eyJ` is `{"`); an unsigned token
    // has an empty signature.
    (
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*",
    ),
    ("npm_token", r"(?-u:\b)npm_[A-Za-z0-9]{36}(?-u:\b)"),
    // Last: any of the specific tokens above sent as a bearer token is named by its kind.
    (
        "bearer_token",
        r"(?i)(?-u:\b)bearer\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)",
    ),
];

const AWS_SECRET_ACCESS_KEY: &str = "aws_secret_access_key";

/// The JSON member form of `aws_secret_access_key`, where the name is the member's key and
/// out of reach of a pattern on the value: (key, value, pattern name).
const SECRET_MEMBER: (&str, &str, &str) = (
    r"(?i)secret_?access_?key\z",
    r"\A[A-Za-z0-9/+]{40}\z",
    AWS_SECRET_ACCESS_KEY,
);

/// The built-in patterns, compiled once per process.
struct Builtins {
    /// All of them as one alternation, to tell in one search whether a string needs a closer
    /// look. Measured about 8x faster than a `RegexSet` here: an alternation keeps the literal
    /// prefilter (`sk-`, `ghp_`, `AKIA`...), a set of this size does not. Also matches a
    /// [`SECRET_MEMBER`] key, so that a body holding one is looked at closely.
    any: Regex,
    patterns: Vec<Pattern>,
    member_key: Regex,
    member_value: Regex,
    names: Vec<&'static str>,
}

// Constants, compiled by every test run: `expect` cannot fire in a build that passed them.
static COMPILED: LazyLock<Builtins> = LazyLock::new(|| {
    let compile = |source: &str| Regex::new(source).expect("a built-in DLP pattern compiles");
    let patterns = BUILTINS
        .iter()
        .map(|&(name, source)| Pattern::new(name.to_owned(), compile(source)))
        .collect();
    // Group names must be unique in one regex, and `any` only answers yes or no.
    let any = BUILTINS
        .iter()
        .map(|&(_, source)| source)
        .chain([SECRET_MEMBER.0])
        .map(|source| format!("(?:{})", source.replace("(?P<secret>", "(?:")))
        .collect::<Vec<_>>()
        .join("|");
    Builtins {
        any: compile(&any),
        patterns,
        member_key: compile(SECRET_MEMBER.0),
        member_value: compile(SECRET_MEMBER.1),
        names: BUILTINS.iter().map(|&(name, _)| name).collect(),
    }
});

/// One named pattern.
#[derive(Clone)]
struct Pattern {
    name: String,
    regex: Regex,
    /// The `secret` group: only it is replaced.
    secret: Option<usize>,
}

impl Pattern {
    fn new(name: String, regex: Regex) -> Self {
        let secret = regex.capture_names().position(|n| n == Some("secret"));
        Self {
            name,
            regex,
            secret,
        }
    }

    /// Appends the spans to replace in `text`. Empty matches are dropped: there is nothing
    /// to hide in them, and a placeholder would only be inserted noise.
    fn spans(&self, priority: usize, text: &str, out: &mut Vec<Span>) {
        let span = |m: regex::Match<'_>| {
            (!m.is_empty()).then_some(Span {
                start: m.start(),
                end: m.end(),
                priority,
            })
        };
        match self.secret {
            None => out.extend(self.regex.find_iter(text).filter_map(span)),
            Some(group) => out.extend(
                self.regex
                    .captures_iter(text)
                    // A `secret` group that took no part: replace the whole match.
                    .filter_map(|caps| caps.get(group).or_else(|| caps.get(0)))
                    .filter_map(span),
            ),
        }
    }
}

/// A part of a string to replace; `priority` is the index of the pattern that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    priority: usize,
}

/// Finds and replaces secrets; built once from the configuration, shared by every request.
#[derive(Clone)]
pub struct Redactor {
    /// The built-ins, then the custom patterns: on overlapping matches the earlier one names
    /// the redaction.
    patterns: Vec<Pattern>,
}

impl Default for Redactor {
    /// The built-in patterns only.
    fn default() -> Self {
        Self::new([])
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redactor")
            .field("patterns", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

/// The outcome of [`Redactor::redact_body`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redaction {
    /// The body to forward instead; `None`: nothing found, forward the original bytes.
    pub body: Option<Vec<u8>>,
    /// What was redacted, in body order.
    pub findings: Vec<Finding>,
}

impl fmt::Debug for Redaction {
    // The length, not the bytes: a body is often hundreds of kilobytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redaction")
            .field("body_len", &self.body.as_ref().map(Vec::len))
            .field("findings", &self.findings)
            .finish()
    }
}

/// Matches of one pattern in one place. Holds nothing of the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The pattern's name (`github_token`, or a custom pattern's).
    pub pattern: String,
    /// A JSON pointer (RFC 6901) to the string, `/messages/0/content/1/text` (an object key's
    /// pointer is that of its member, with the redacted key), or `body` for a body that is not
    /// JSON.
    pub location: String,
    /// How many matches were replaced there.
    pub count: usize,
}

/// Where a body that is not JSON is reported.
pub const BODY_LOCATION: &str = "body";

/// What replaces a secret.
pub fn placeholder(pattern: &str) -> String {
    format!("[REDACTED:{pattern}]")
}

impl Redactor {
    /// The built-in patterns and, after them, `custom` (`(name, regex)` from the
    /// configuration). A custom regex may mark the part to replace with a group named
    /// `secret`; otherwise its whole match is replaced.
    pub fn new(custom: impl IntoIterator<Item = (String, Regex)>) -> Self {
        let mut patterns = COMPILED.patterns.clone();
        patterns.extend(custom.into_iter().map(|(name, re)| Pattern::new(name, re)));
        Self { patterns }
    }

    /// The names of the built-in patterns, in priority order.
    pub fn builtin_names() -> &'static [&'static str] {
        &COMPILED.names
    }

    /// Every pattern's name, built-ins first.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(|p| p.name.as_str())
    }

    /// Redacts an outgoing request body; see the module documentation.
    pub fn redact_body(&self, body: &[u8]) -> Redaction {
        match self.json_has_hit(body) {
            Ok(false) => Redaction::default(),
            // Read once already: this is not expected to fail, but text is the safe answer.
            Ok(true) => self
                .redact_json(body)
                .unwrap_or_else(|| self.redact_raw(body)),
            Err(_) => self.redact_raw(body),
        }
    }

    fn custom(&self) -> &[Pattern] {
        self.patterns.get(BUILTINS.len()..).unwrap_or_default()
    }

    /// Whether any pattern matches somewhere in `text`; allocates nothing.
    /// The secrets in one plain string, by pattern: `(name, count)` in priority order. Holds
    /// nothing of the secrets. Used on tool results, where a secret is reported, not
    /// replaced.
    pub fn secrets_in(&self, text: &str) -> Vec<(&str, usize)> {
        if !self.hits(text) {
            return Vec::new();
        }
        let spans = self.spans(text);
        let mut found: Vec<(&str, usize)> = Vec::new();
        for span in spans {
            let name = self.patterns[span.priority].name.as_str();
            match found.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => *count += 1,
                None => found.push((name, 1)),
            }
        }
        found
    }

    fn hits(&self, text: &str) -> bool {
        COMPILED.any.is_match(text) || self.custom().iter().any(|p| p.regex.is_match(text))
    }

    /// The spans to replace in `text`, sorted, overlapping ones merged: nothing any pattern
    /// matched survives.
    fn spans(&self, text: &str) -> Vec<Span> {
        let mut spans = Vec::new();
        for (i, pattern) in self.patterns.iter().enumerate() {
            pattern.spans(i, text, &mut spans);
        }
        merge(spans)
    }

    /// `text` with its secrets replaced, or `None` if it has none.
    fn redact_text(&self, text: &str) -> Option<Redacted> {
        if !self.hits(text) {
            return None;
        }
        let spans = self.spans(text);
        if spans.is_empty() {
            return None;
        }
        let mut redacted = Redacted {
            text: String::with_capacity(text.len()),
            tally: Tally::default(),
        };
        let mut at = 0;
        for span in spans {
            redacted.text.push_str(&text[at..span.start]);
            redacted.text.push_str("[REDACTED:");
            redacted.text.push_str(&self.patterns[span.priority].name);
            redacted.text.push(']');
            redacted.tally.add(span.priority, 1);
            at = span.end;
        }
        redacted.text.push_str(&text[at..]);
        Some(redacted)
    }

    /// Reads `body` as JSON without building it, checking every string and key on the way.
    fn json_has_hit(&self, body: &[u8]) -> Result<bool, serde_json::Error> {
        let found = Cell::new(false);
        let mut de = serde_json::Deserializer::from_slice(body);
        Scan {
            redactor: self,
            found: &found,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok(found.get())
    }

    /// The JSON body with its secrets replaced; `None` if it cannot be read or written.
    fn redact_json(&self, body: &[u8]) -> Option<Redaction> {
        let mut value: Value = serde_json::from_slice(body).ok()?;
        let mut findings = Vec::new();
        self.redact_value(&mut value, &mut String::new(), &mut findings);
        if findings.is_empty() {
            return Some(Redaction::default());
        }
        Some(Redaction {
            body: Some(serde_json::to_vec(&value).ok()?),
            findings,
        })
    }

    /// Walks `value`, whose JSON pointer is `pointer` (restored on return).
    fn redact_value(&self, value: &mut Value, pointer: &mut String, findings: &mut Vec<Finding>) {
        match value {
            Value::String(text) => {
                if let Some(redacted) = self.redact_text(text) {
                    *text = redacted.text;
                    self.report(&redacted.tally, pointer, findings);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = pointer.len();
                    // Writing to a String cannot fail.
                    let _ = write!(pointer, "/{i}");
                    self.redact_value(item, pointer, findings);
                    pointer.truncate(len);
                }
            }
            Value::Object(members) => {
                self.redact_keys(members, pointer, findings);
                for (key, member) in members.iter_mut() {
                    let len = pointer.len();
                    push_token(pointer, key);
                    if !redact_secret_member(key, member, pointer, findings) {
                        self.redact_value(member, pointer, findings);
                    }
                    pointer.truncate(len);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Keys are scanned too: a secret as a key is unusual, but it would otherwise leave with
    /// the body, and show in the pointers of the findings below it. Order is kept; a redacted key
    /// that collides with another gets a `#2`, `#3`... suffix rather than dropping a member.
    fn redact_keys(
        &self,
        members: &mut Map<String, Value>,
        pointer: &str,
        findings: &mut Vec<Finding>,
    ) {
        if !members.keys().any(|key| self.hits(key)) {
            return;
        }
        for (key, member) in std::mem::take(members) {
            let key = match self.redact_text(&key) {
                Some(redacted) => {
                    let key = free_key(members, redacted.text);
                    let mut location = pointer.to_owned();
                    push_token(&mut location, &key);
                    self.report(&redacted.tally, &location, findings);
                    key
                }
                None => free_key(members, key),
            };
            members.insert(key, member);
        }
    }

    /// A body that is not JSON, scanned as text between any invalid UTF-8 sequences.
    fn redact_raw(&self, body: &[u8]) -> Redaction {
        if !body.utf8_chunks().any(|chunk| self.hits(chunk.valid())) {
            return Redaction::default();
        }
        let mut out = Vec::with_capacity(body.len());
        let mut tally = Tally::default();
        for chunk in body.utf8_chunks() {
            match self.redact_text(chunk.valid()) {
                Some(redacted) => {
                    out.extend_from_slice(redacted.text.as_bytes());
                    tally.merge(&redacted.tally);
                }
                None => out.extend_from_slice(chunk.valid().as_bytes()),
            }
            out.extend_from_slice(chunk.invalid());
        }
        let mut findings = Vec::new();
        self.report(&tally, BODY_LOCATION, &mut findings);
        if findings.is_empty() {
            return Redaction::default();
        }
        Redaction {
            body: Some(out),
            findings,
        }
    }

    fn report(&self, tally: &Tally, location: &str, findings: &mut Vec<Finding>) {
        findings.extend(tally.0.iter().map(|&(priority, count)| Finding {
            pattern: self.patterns[priority].name.clone(),
            location: location.to_owned(),
            count,
        }));
    }
}

/// One string's redaction.
struct Redacted {
    text: String,
    tally: Tally,
}

/// Matches per pattern (by priority), in order of first appearance.
#[derive(Default)]
struct Tally(Vec<(usize, usize)>);

impl Tally {
    fn add(&mut self, priority: usize, count: usize) {
        match self.0.iter_mut().find(|(p, _)| *p == priority) {
            Some((_, n)) => *n += count,
            None => self.0.push((priority, count)),
        }
    }

    fn merge(&mut self, other: &Tally) {
        for &(priority, count) in &other.0 {
            self.add(priority, count);
        }
    }
}

/// Replaces a [`SECRET_MEMBER`]'s whole value; whether it did.
fn redact_secret_member(
    key: &str,
    member: &mut Value,
    pointer: &str,
    findings: &mut Vec<Finding>,
) -> bool {
    let Value::String(text) = member else {
        return false;
    };
    if !(COMPILED.member_key.is_match(key) && COMPILED.member_value.is_match(text)) {
        return false;
    }
    let name = SECRET_MEMBER.2;
    *text = placeholder(name);
    findings.push(Finding {
        pattern: name.to_owned(),
        location: pointer.to_owned(),
        count: 1,
    });
    true
}

/// Sorts `spans` and merges overlapping ones; a merged span is named by its highest-priority
/// (lowest) pattern.
fn merge(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_unstable_by_key(|s| (s.start, s.priority));
    let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
    for span in spans {
        match merged.last_mut() {
            Some(last) if span.start < last.end => {
                last.end = last.end.max(span.end);
                last.priority = last.priority.min(span.priority);
            }
            _ => merged.push(span),
        }
    }
    merged
}

/// Appends `/token` to a JSON pointer, escaped as RFC 6901 says.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// `key`, or `key#2`, `key#3`... whichever `members` does not hold yet.
fn free_key(members: &Map<String, Value>, key: String) -> String {
    if !members.contains_key(&key) {
        return key;
    }
    let mut n = 2usize;
    loop {
        let candidate = format!("{key}#{n}");
        if !members.contains_key(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// A serde visitor that reads any JSON value and records whether one of its strings or keys
/// holds a secret, without building the value.
#[derive(Clone, Copy)]
struct Scan<'a> {
    redactor: &'a Redactor,
    found: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<(), E> {
        // One hit is enough to take the slow path; skip the regexes after it.
        if !self.found.get() && self.redactor.hits(text) {
            self.found.set(true);
        }
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALNUM: &str = "aB3dE5gH7jK9mN1pQ2sT4vW6yZ8cF0xR";
    const UPPER: &str = "Q7W2E9R4T1Y8U3I6O5P0ASDFGHJKLZXC";
    const BASE64: &str = "MIIEowIBAAKCAQEA7x9+Zq/3Lk2Jd8sPfW1Yb4Rn6Tc0Vh5Ga=";
    const URLSAFE: &str = "Zt4-Qx_9Lm2Nb7-Vc_1Kd8Hs3Jf6";
    const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

    /// `len` characters of `alphabet`, cycled. Samples are built at run time so the source
    /// holds no token-shaped literal for secret scanners to flag.
    fn fill(alphabet: &str, len: usize) -> String {
        alphabet.chars().cycle().take(len).collect()
    }

    fn ghp() -> String {
        format!("ghp_{}", fill(ALNUM, 36))
    }

    fn openai() -> String {
        format!("sk-proj-{}", fill(URLSAFE, 100))
    }

    fn anthropic() -> String {
        format!("sk-ant-api03-{}AA", fill(URLSAFE, 93))
    }

    fn pem(kind: &str, newline: &str) -> String {
        let line = fill(BASE64, 64);
        format!("-----BEGIN {kind}-----{newline}{line}{newline}{line}{newline}-----END {kind}-----")
    }

    /// The redacted text of a non-JSON body and its findings as (pattern, location, count).
    fn redact(redactor: &Redactor, text: &str) -> (Option<String>, Vec<(String, String, usize)>) {
        let r = redactor.redact_body(text.as_bytes());
        let body = r
            .body
            .map(|b| String::from_utf8(b).expect("redacted text is UTF-8"));
        let findings = r
            .findings
            .into_iter()
            .map(|f| (f.pattern, f.location, f.count))
            .collect();
        (body, findings)
    }

    fn finding(pattern: &str, location: &str, count: usize) -> Finding {
        Finding {
            pattern: pattern.to_owned(),
            location: location.to_owned(),
            count,
        }
    }

    #[test]
    fn builtins_compile_with_unique_names() {
        let names = Redactor::builtin_names();
        assert_eq!(names.len(), BUILTINS.len());
        let mut sorted = names.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert_eq!(Redactor::default().names().count(), names.len());
    }

    #[test]
    fn each_builtin_redacts_its_sample() {
        let samples: Vec<(&str, String, String)> = vec![
            (
                "private_key",
                format!("key:\n{}\nthanks", pem("RSA PRIVATE KEY", "\n")),
                "key:\n[REDACTED:private_key]\nthanks".into(),
            ),
            (
                "aws_access_key_id",
                format!("id {AWS_ID}, region us-east-1"),
                "id [REDACTED:aws_access_key_id], region us-east-1".into(),
            ),
            (
                "aws_secret_access_key",
                format!("[default]\naws_secret_access_key = {AWS_SECRET}\n"),
                "[default]\naws_secret_access_key = [REDACTED:aws_secret_access_key]\n".into(),
            ),
            (
                "github_token",
                format!("GH_TOKEN={} gh pr list", ghp()),
                "GH_TOKEN=[REDACTED:github_token] gh pr list".into(),
            ),
            (
                "gitlab_token",
                format!("token: glpat-{}", fill(URLSAFE, 20)),
                "token: [REDACTED:gitlab_token]".into(),
            ),
            (
                "slack_token",
                format!("SLACK=xoxb-1234567890-1234567890123-{}", fill(ALNUM, 24)),
                "SLACK=[REDACTED:slack_token]".into(),
            ),
            (
                "stripe_key",
                format!("stripe.api_key = \"{}{}\"", "sk_live_", fill(ALNUM, 24)),
                "stripe.api_key = \"[REDACTED:stripe_key]\"".into(),
            ),
            (
                "anthropic_api_key",
                format!("ANTHROPIC_API_KEY={}", anthropic()),
                "ANTHROPIC_API_KEY=[REDACTED:anthropic_api_key]".into(),
            ),
            (
                "openai_api_key",
                format!("use {} here", openai()),
                "use [REDACTED:openai_api_key] here".into(),
            ),
            (
                "google_api_key",
                format!("?key=AIza{}&q=x", fill(URLSAFE, 35)),
                "?key=[REDACTED:google_api_key]&q=x".into(),
            ),
            (
                "jwt",
                format!("cookie: session={JWT}; Path=/"),
                "cookie: session=[REDACTED:jwt]; Path=/".into(),
            ),
            (
                "npm_token",
                format!("//registry.npmjs.org/:_authToken=npm_{}", fill(ALNUM, 36)),
                "//registry.npmjs.org/:_authToken=[REDACTED:npm_token]".into(),
            ),
            (
                "bearer_token",
                format!("curl -H 'Authorization: Bearer {}' x", fill(BASE64, 32)),
                "curl -H 'Authorization: Bearer [REDACTED:bearer_token]' x".into(),
            ),
        ];
        // Every built-in has a sample.
        let covered: Vec<&str> = samples.iter().map(|(name, _, _)| *name).collect();
        assert_eq!(covered, Redactor::builtin_names());

        let redactor = Redactor::default();
        for (name, input, expected) in &samples {
            assert_eq!(
                redact(&redactor, input),
                (
                    Some(expected.clone()),
                    vec![((*name).to_owned(), "body".to_owned(), 1)]
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn other_sample_shapes() {
        let redactor = Redactor::default();
        let cases = [
            (
                format!("sk-{}", fill(ALNUM, 48)),
                "[REDACTED:openai_api_key]",
            ),
            (
                format!("sk-svcacct-{}", fill(URLSAFE, 60)),
                "[REDACTED:openai_api_key]",
            ),
            (
                format!("github_pat_{}_{}", fill(ALNUM, 22), fill(ALNUM, 59)),
                "[REDACTED:github_token]",
            ),
            (
                format!("export AWS_SECRET_ACCESS_KEY=\"{AWS_SECRET}\""),
                "export AWS_SECRET_ACCESS_KEY=\"[REDACTED:aws_secret_access_key]\"",
            ),
            (
                format!("{{\\\"SecretAccessKey\\\": \\\"{AWS_SECRET}\\\"}}"),
                "{\\\"SecretAccessKey\\\": \\\"[REDACTED:aws_secret_access_key]\\\"}",
            ),
            (
                format!("ASIA{}", fill(UPPER, 16)),
                "[REDACTED:aws_access_key_id]",
            ),
            (
                format!("glpat-{}.01.0w1x2y3z", fill(URLSAFE, 27)),
                "[REDACTED:gitlab_token]",
            ),
            (pem("OPENSSH PRIVATE KEY", "\r\n"), "[REDACTED:private_key]"),
            (pem("PGP PRIVATE KEY BLOCK", "\n"), "[REDACTED:private_key]"),
            (pem("PRIVATE KEY", "\\n"), "[REDACTED:private_key]"),
            // A `--` in the body ends the search for END; the base64-lines rule takes over.
            (
                pem("PGP PRIVATE KEY BLOCK", "\nComment: a -- b\n"),
                "[REDACTED:private_key]",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(
                redact(&redactor, &input).0.as_deref(),
                Some(expected),
                "{input}"
            );
        }
    }

    #[test]
    fn near_misses_are_left_alone() {
        let redactor = Redactor::default();
        let near_misses = [
            "sk-abc".to_owned(),
            "pip install sk-learn-compatible-estimators".to_owned(),
            format!("task-{}", fill(ALNUM, 30)),
            format!("ghp_{}", fill(ALNUM, 20)),
            format!("myghp_{}", fill(ALNUM, 36)),
            format!("AKIA{}", fill(UPPER, 15)),
            format!("AKIA{}", fill(UPPER, 17)),
            format!("XAKIA{}", fill(UPPER, 16)),
            format!("sha: {AWS_SECRET}"),
            "aws_secret_access_key = short".to_owned(),
            "glpat-short".to_owned(),
            "xoxb-123".to_owned(),
            format!("sk_test_{}", fill(ALNUM, 24)),
            format!("AIza{}", fill(ALNUM, 34)),
            format!("AIza{}", fill(ALNUM, 36)),
            "eyJhbGciOiJIUzI1NiJ9.not-a-payload".to_owned(),
            format!("npm_{}", fill(ALNUM, 35)),
            format!("npm_{}", fill(ALNUM, 37)),
            "the bearer token is in $TOKEN: Bearer $TOKEN".to_owned(),
            "Authorization: Bearer short".to_owned(),
            pem("PUBLIC KEY", "\n"),
            pem("CERTIFICATE", "\n"),
            "[REDACTED:github_token]".to_owned(),
        ];
        for text in &near_misses {
            assert_eq!(redact(&redactor, text), (None, vec![]), "{text}");
        }
    }

    #[test]
    fn an_anthropic_key_is_not_an_openai_key() {
        let key = anthropic();
        let openai = &COMPILED.patterns[BUILTINS
            .iter()
            .position(|(name, _)| *name == "openai_api_key")
            .unwrap()];
        assert!(!openai.regex.is_match(&key));
        assert_eq!(
            redact(&Redactor::default(), &key),
            (
                Some("[REDACTED:anthropic_api_key]".to_owned()),
                vec![("anthropic_api_key".to_owned(), "body".to_owned(), 1)]
            )
        );
    }

    #[test]
    fn overlapping_matches_are_one_redaction_named_by_the_specific_pattern() {
        let redactor = Redactor::default();
        assert_eq!(
            redact(&redactor, &format!("Authorization: Bearer {JWT}")),
            (
                Some("Authorization: Bearer [REDACTED:jwt]".to_owned()),
                vec![("jwt".to_owned(), "body".to_owned(), 1)]
            )
        );
        assert_eq!(
            redact(&redactor, &format!("authorization: bearer {}", ghp())).0,
            Some("authorization: bearer [REDACTED:github_token]".to_owned())
        );
    }

    #[test]
    fn several_secrets_in_one_string() {
        let text = format!(
            "a={} b=ghp_{} c={AWS_ID} d={}",
            ghp(),
            fill(UPPER, 36),
            ghp()
        );
        assert_eq!(
            redact(&Redactor::default(), &text),
            (
                Some(
                    "a=[REDACTED:github_token] b=[REDACTED:github_token] \
                     c=[REDACTED:aws_access_key_id] d=[REDACTED:github_token]"
                        .to_owned()
                ),
                vec![
                    ("github_token".to_owned(), "body".to_owned(), 3),
                    ("aws_access_key_id".to_owned(), "body".to_owned(), 1),
                ]
            )
        );
    }

    #[test]
    fn private_keys_with_real_or_escaped_line_breaks() {
        let redactor = Redactor::default();
        for newline in ["\n", "\r\n", "\\n", "\\r\\n", "\\\\n"] {
            let text = format!(
                "before{newline}{}{newline}after",
                pem("EC PRIVATE KEY", newline)
            );
            assert_eq!(
                redact(&redactor, &text).0,
                Some(format!(
                    "before{newline}[REDACTED:private_key]{newline}after"
                )),
                "{newline}"
            );
        }
        // Two keys in one string are two redactions, the text between them kept.
        let two = format!(
            "{}\nand\n{}",
            pem("PRIVATE KEY", "\n"),
            pem("PRIVATE KEY", "\n")
        );
        assert_eq!(
            redact(&redactor, &two),
            (
                Some("[REDACTED:private_key]\nand\n[REDACTED:private_key]".to_owned()),
                vec![("private_key".to_owned(), "body".to_owned(), 2)]
            )
        );
    }

    #[test]
    fn many_begin_lines_without_an_end() {
        // Each is redacted on its own, in one pass (not one search to the end per BEGIN).
        let text = "-----BEGIN PRIVATE KEY-----x".repeat(2000);
        let (body, findings) = redact(&Redactor::default(), &text);
        assert_eq!(body, Some("[REDACTED:private_key]x".repeat(2000)));
        assert_eq!(
            findings,
            [("private_key".to_owned(), "body".to_owned(), 2000)]
        );
    }

    #[test]
    fn a_truncated_private_key_is_redacted_through_its_base64_lines() {
        let redactor = Redactor::default();
        let line = fill(BASE64, 64);
        for newline in ["\n", "\\n"] {
            let text = format!(
                "$ head -3 id_rsa{newline}-----BEGIN RSA PRIVATE KEY-----{newline}{line}{newline}{line}\"}}"
            );
            assert_eq!(
                redact(&redactor, &text).0,
                Some(format!(
                    "$ head -3 id_rsa{newline}[REDACTED:private_key]\"}}"
                )),
                "{newline}"
            );
        }
    }

    #[test]
    fn anthropic_request_with_secrets_in_nested_content_and_tool_input() {
        let body = format!(
            r#"{{"model":"claude-sonnet-4-5","max_tokens":1024,"temperature":0.5,"system":"be brief","messages":[{{"role":"user","content":"my key is {openai}"}},{{"role":"assistant","content":[{{"type":"text","text":"ok"}},{{"type":"tool_use","id":"toolu_1","name":"Bash","input":{{"command":"GITHUB_TOKEN={ghp} gh pr list","env":{{"AWS_ACCESS_KEY_ID":"{AWS_ID}","n":7}}}}}}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_1","content":[{{"type":"text","text":"done \u00e9"}}]}}]}}],"x_unknown":{{"nested":[1,2.5,-3e-7,true,null],"k":"v"}}}}"#,
            openai = openai(),
            ghp = ghp(),
        );
        let expected = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"temperature":0.5,"system":"be brief","messages":[{"role":"user","content":"my key is [REDACTED:openai_api_key]"},{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"GITHUB_TOKEN=[REDACTED:github_token] gh pr list","env":{"AWS_ACCESS_KEY_ID":"[REDACTED:aws_access_key_id]","n":7}}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"done é"}]}]}],"x_unknown":{"nested":[1,2.5,-3e-7,true,null],"k":"v"}}"#;
        let redaction = Redactor::default().redact_body(body.as_bytes());
        let redacted = String::from_utf8(redaction.body.clone().unwrap()).unwrap();
        assert_eq!(redacted, expected);
        assert_eq!(
            redaction.findings,
            [
                finding("openai_api_key", "/messages/0/content", 1),
                finding("github_token", "/messages/1/content/1/input/command", 1),
                finding(
                    "aws_access_key_id",
                    "/messages/1/content/1/input/env/AWS_ACCESS_KEY_ID",
                    1
                ),
            ]
        );
        // Same structure, every other value equal.
        let before: Value = serde_json::from_str(&body).unwrap();
        let after: Value = serde_json::from_str(&redacted).unwrap();
        assert_eq!(before["x_unknown"], after["x_unknown"]);
        assert_eq!(before["messages"][2], after["messages"][2]);
    }

    #[test]
    fn openai_function_arguments_string_with_a_pem_key() {
        let key = pem("OPENSSH PRIVATE KEY", "\n");
        let token = openai();
        let request = |content: &str, token: &str| {
            let arguments =
                json!({"path": "/home/u/.ssh/id_ed25519", "content": content, "token": token});
            json!({
                "model": "gpt-4.1",
                "messages": [
                    {"role": "user", "content": "save my key"},
                    {"role": "assistant", "content": null, "tool_calls": [{
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": arguments.to_string()}
                    }]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
                ],
                "tools": [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object"}}}],
                "stream": true
            })
            .to_string()
        };
        let body = request(&format!("{key}\n"), &token);
        // The outer JSON decoded once leaves `\n` escapes in the arguments string.
        assert!(body.contains(r"-----\\nMIIE"));
        let redaction = Redactor::default().redact_body(body.as_bytes());
        let redacted = String::from_utf8(redaction.body.unwrap()).unwrap();
        assert_eq!(
            redacted,
            request("[REDACTED:private_key]\n", "[REDACTED:openai_api_key]")
        );
        // The arguments are still JSON.
        let after: Value = serde_json::from_str(&redacted).unwrap();
        let arguments = after["messages"][1]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap();
        let arguments: Value = serde_json::from_str(arguments).unwrap();
        assert_eq!(arguments["content"], "[REDACTED:private_key]\n");
        assert_eq!(
            redaction.findings,
            [
                finding(
                    "private_key",
                    "/messages/1/tool_calls/0/function/arguments",
                    1
                ),
                finding(
                    "openai_api_key",
                    "/messages/1/tool_calls/0/function/arguments",
                    1
                ),
            ]
        );
    }

    #[test]
    fn a_body_without_secrets_is_forwarded_untouched() {
        let redactor = Redactor::default();
        let bodies: [&[u8]; 6] = [
            br#"{"model":"m","messages":[{"role":"user","content":"hello \u00e9 sk-abc"}],"n":1.50}"#,
            b"plain text with nothing to hide",
            b"",
            b"\xff\xfe not utf-8",
            br#"{"truncated": "#,
            b"  [1, 2, {\"a\": null}]  ",
        ];
        for body in bodies {
            assert_eq!(redactor.redact_body(body), Redaction::default());
        }
    }

    #[test]
    fn findings_never_hold_the_secret() {
        let secrets = [ghp(), openai(), anthropic(), pem("RSA PRIVATE KEY", "\\n")];
        let body = json!({
            "messages": secrets.iter().map(|s| json!({"role": "user", "content": s})).collect::<Vec<_>>(),
            secrets[0].clone(): "as a key",
        })
        .to_string();
        let redaction = Redactor::default().redact_body(body.as_bytes());
        assert_eq!(redaction.findings.len(), 5);
        let debug = format!("{redaction:?} {:?}", redaction.findings);
        let body = String::from_utf8(redaction.body.unwrap()).unwrap();
        for secret in &secrets {
            let part = &secret[secret.len() / 2..secret.len() / 2 + 12];
            assert!(!debug.contains(part), "{debug}");
            assert!(!body.contains(part), "{body}");
        }
    }

    #[test]
    fn keys_are_redacted_without_dropping_members() {
        let body = format!(
            r#"{{"{}":1,"[REDACTED:github_token]":2,"a/b~c":{{"t":"{AWS_ID}"}}}}"#,
            ghp()
        );
        let redaction = Redactor::default().redact_body(body.as_bytes());
        assert_eq!(
            String::from_utf8(redaction.body.unwrap()).unwrap(),
            r#"{"[REDACTED:github_token]":1,"[REDACTED:github_token]#2":2,"a/b~c":{"t":"[REDACTED:aws_access_key_id]"}}"#
        );
        assert_eq!(
            redaction.findings,
            [
                finding("github_token", "/[REDACTED:github_token]", 1),
                finding("aws_access_key_id", "/a~1b~0c/t", 1),
            ]
        );
    }

    #[test]
    fn an_aws_secret_as_a_json_member_value() {
        let body = format!(
            r#"{{"env":{{"AWS_ACCESS_KEY_ID":"{AWS_ID}","AWS_SECRET_ACCESS_KEY":"{AWS_SECRET}","OTHER":"{AWS_SECRET}","aws_secret_access_key":"short"}}}}"#
        );
        let redaction = Redactor::default().redact_body(body.as_bytes());
        assert_eq!(
            String::from_utf8(redaction.body.unwrap()).unwrap(),
            format!(
                r#"{{"env":{{"AWS_ACCESS_KEY_ID":"[REDACTED:aws_access_key_id]","AWS_SECRET_ACCESS_KEY":"[REDACTED:aws_secret_access_key]","OTHER":"{AWS_SECRET}","aws_secret_access_key":"short"}}}}"#
            )
        );
        assert_eq!(
            redaction.findings,
            [
                finding("aws_access_key_id", "/env/AWS_ACCESS_KEY_ID", 1),
                finding("aws_secret_access_key", "/env/AWS_SECRET_ACCESS_KEY", 1),
            ]
        );
        // Only the key suggests a secret: a closer look, nothing redacted.
        let body = format!(r#"{{"SecretAccessKey":"short","x":"{AWS_SECRET}"}}"#);
        assert_eq!(
            Redactor::default().redact_body(body.as_bytes()),
            Redaction::default()
        );
    }

    #[test]
    fn json_escapes_do_not_hide_a_secret() {
        let body = r#"{"a":"AKIA\u0049OSFODNN7EXAMPLE","b":"aws_secret_access_key=wJalrXUtnFEMI\/K7MDENG\/bPxRfiCYEXAMPLEKEY"}"#;
        let redaction = Redactor::default().redact_body(body.as_bytes());
        assert_eq!(
            String::from_utf8(redaction.body.unwrap()).unwrap(),
            r#"{"a":"[REDACTED:aws_access_key_id]","b":"aws_secret_access_key=[REDACTED:aws_secret_access_key]"}"#
        );
    }

    #[test]
    fn a_top_level_string_is_at_the_root_pointer() {
        let body = format!("\"{}\"", ghp());
        let redaction = Redactor::default().redact_body(body.as_bytes());
        assert_eq!(redaction.body.unwrap(), br#""[REDACTED:github_token]""#);
        assert_eq!(redaction.findings, [finding("github_token", "", 1)]);
    }

    #[test]
    fn bodies_that_are_not_json_are_redacted_as_text() {
        let redactor = Redactor::default();
        // Invalid UTF-8 is kept byte for byte around the redaction.
        let mut body = b"\xff\xfe token=".to_vec();
        body.extend_from_slice(ghp().as_bytes());
        body.extend_from_slice(b" \xc3");
        let redaction = redactor.redact_body(&body);
        assert_eq!(
            redaction.body.unwrap(),
            b"\xff\xfe token=[REDACTED:github_token] \xc3"
        );
        assert_eq!(redaction.findings, [finding("github_token", "body", 1)]);

        // Truncated JSON, and JSON nested past serde_json's depth limit.
        let truncated = format!(r#"{{"content":"{}"#, ghp());
        assert_eq!(
            redact(&redactor, &truncated).0.as_deref(),
            Some(r#"{"content":"[REDACTED:github_token]"#)
        );
        let deep = format!("{}\"{}\"{}", "[".repeat(200), ghp(), "]".repeat(200));
        assert_eq!(
            redact(&redactor, &deep).0,
            Some(format!(
                "{}\"[REDACTED:github_token]\"{}",
                "[".repeat(200),
                "]".repeat(200)
            ))
        );
    }

    #[test]
    fn custom_patterns() {
        let redactor = Redactor::new([
            (
                "internal-token".to_owned(),
                Regex::new(r"itk_[A-Za-z0-9]{32}").unwrap(),
            ),
            (
                "db-password".to_owned(),
                Regex::new(r"postgres://[^:/\s]+:(?P<secret>[^@\s]+)@").unwrap(),
            ),
            // Matches at every word boundary, but only empty text: never a placeholder.
            ("empty".to_owned(), Regex::new(r"\b").unwrap()),
        ]);
        assert_eq!(
            redactor.names().skip(BUILTINS.len()).collect::<Vec<_>>(),
            ["internal-token", "db-password", "empty"]
        );
        let body = json!({"input": [{
            "role": "user",
            "content": format!("itk_{} postgres://app:hunter2@db/x", fill(ALNUM, 32)),
        }]})
        .to_string();
        let redaction = redactor.redact_body(body.as_bytes());
        assert_eq!(
            String::from_utf8(redaction.body.unwrap()).unwrap(),
            r#"{"input":[{"role":"user","content":"[REDACTED:internal-token] postgres://app:[REDACTED:db-password]@db/x"}]}"#
        );
        assert_eq!(
            redaction.findings,
            [
                finding("internal-token", "/input/0/content", 1),
                finding("db-password", "/input/0/content", 1),
            ]
        );
        assert_eq!(redactor.redact_body(br#"{"a":"xx"}"#), Redaction::default());
    }

    /// Throughput on a conversation-sized body; run with
    /// `cargo test --release -p agentsh --lib llm::dlp::tests::throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a test"]
    fn throughput() {
        let text = "Sure — here is the refactored function. It reads the config, \
                    validates every field and returns a typed error on failure. \u{1F600}\n";
        let messages: Vec<Value> = (0..400)
            .map(|i| {
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                       "content": [{"type": "text", "text": text.repeat(8)},
                                   {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Read",
                                    "input": {"path": format!("/src/file{i}.rs"), "limit": 200}}]})
            })
            .collect();
        let clean = json!({"model": "m", "max_tokens": 4096, "messages": messages}).to_string();
        let dirty = clean.replacen("refactored", &ghp(), 1);
        let redactor = Redactor::default();
        for (name, body) in [("clean", &clean), ("one secret", &dirty)] {
            let rounds = 50;
            // Warm up: the regexes' lazy DFAs build their states on the first searches.
            for _ in 0..rounds {
                std::hint::black_box(redactor.redact_body(body.as_bytes()));
            }
            let start = std::time::Instant::now();
            for _ in 0..rounds {
                std::hint::black_box(redactor.redact_body(body.as_bytes()));
            }
            let secs = start.elapsed().as_secs_f64() / f64::from(rounds);
            println!(
                "{name}: {} KB in {:.3} ms, {:.0} MB/s",
                body.len() / 1024,
                secs * 1e3,
                body.len() as f64 / secs / 1e6
            );
        }
    }
}
