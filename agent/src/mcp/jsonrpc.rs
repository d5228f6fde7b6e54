//! Strict JSON-RPC 2.0 parsing and classification.
//!
//! [`parse`] turns one line into a [`Frame`] in a single pass: the custom visitor builds the
//! `serde_json::Value` and checks for duplicate keys and nesting depth at the same time. Every
//! [`Message`] remembers the byte range of its own value in the line, so a message (or a batch
//! element) is forwarded from its original bytes.
//!
//! # Strictness (whole-line [`ParseError`]s)
//!
//! The guard must never see a different message than the peer. Inputs on which JSON parsers
//! disagree are refused outright: invalid UTF-8, a byte order mark, invalid JSON, trailing data
//! after the value, duplicate object keys at any depth (parsers differ on first- vs last-wins),
//! lone UTF-16 surrogates in `\u` escapes (replaced, kept or refused depending on the parser),
//! nesting deeper than [`MAX_DEPTH`], an empty line, and an empty batch `[]`.
//!
//! # Classification ([`Kind`])
//!
//! Invalid (the message is well-formed JSON but not an unambiguous JSON-RPC 2.0 message):
//! * not an object (e.g. a batch element `1`);
//! * `jsonrpc` missing or not exactly `"2.0"`;
//! * `method` present but not a string;
//! * `method` together with `result` or `error`; both `result` and `error`; none of the three;
//! * an `id` that is not a string or an integer: `null` (in a request or a success response),
//!   floats (`1.0`, `1e3`, integers beyond 64 bits, which parse as floats), booleans, objects,
//!   arrays; a response without `id`;
//! * `params` present but neither an object nor an array;
//! * `error` not an object;
//! * a top-level member whose name is not an envelope member (`jsonrpc`, `id`, `method`,
//!   `params`, `result`, `error`) but folds to one (`"Method"`, `"ID"`, `"method\u0000"`,
//!   `"ｍethod"`, ...): case-insensitive decoders (Go's `encoding/json`) and C-string based
//!   parsers would read it as the envelope member.
//!
//! Merely odd, accepted as valid: unknown extra top-level members (`_meta` at the top, vendor
//! fields), `params` as an array (JSON-RPC allows it; the typed MCP views then fail, which is
//! fail-closed for `tools/call`), `params` on a response, an `error` object without a proper
//! `code`/`message`, an error response with `"id": null` (JSON-RPC's answer to unparseable
//! requests).
//!
//! Method names are compared after JSON unescaping (`"\u0074ools/call"` is `tools/call`).
//! [`suspicious_method`] flags names that are not known but normalise to a known one.

use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};
use unicode_normalization::UnicodeNormalization;

/// Deepest nesting of arrays and objects accepted (the top-level value counts as 1).
pub const MAX_DEPTH: usize = 64;

/// Why a line is refused before classification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty message (blank line)")]
    Empty,
    #[error("message starts with a UTF-8 byte order mark")]
    Bom,
    #[error("message is not valid UTF-8 (first invalid byte at offset {offset})")]
    InvalidUtf8 { offset: usize },
    #[error("invalid JSON at byte {offset}: {detail}")]
    InvalidJson { offset: usize, detail: String },
    #[error("trailing data after the JSON value at byte {offset}")]
    TrailingData { offset: usize },
    #[error("duplicate key {key:?} in a JSON object (parsers disagree on which one wins)")]
    DuplicateKey { key: String },
    #[error("lone UTF-16 surrogate in a \\u escape at byte {offset}")]
    LoneSurrogate { offset: usize },
    #[error("JSON nesting deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("empty JSON-RPC batch")]
    EmptyBatch,
}

/// A JSON-RPC id, keeping its JSON type so that replies echo it exactly.
///
/// Only strings and integers (fitting `i64` or `u64`) are ids; see [`Id::from_value`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Id {
    /// Always an integer (`is_i64() || is_u64()`).
    Number(Number),
    String(String),
}

impl Id {
    /// The id in `value`, if it is a valid id (string or integer).
    pub fn from_value(value: &Value) -> Option<Id> {
        match value {
            Value::String(s) => Some(Id::String(s.clone())),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(Id::Number(n.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            Id::Number(n) => Value::Number(n.clone()),
            Id::String(s) => Value::String(s.clone()),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Number(n.into())
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::String(s.to_owned())
    }
}

impl fmt::Display for Id {
    /// The JSON form: `7` or `"abc"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Number(n) => write!(f, "{n}"),
            Id::String(s) => match serde_json::to_string(s) {
                Ok(json) => f.write_str(&json),
                Err(_) => Err(fmt::Error),
            },
        }
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Id::Number(n) => n.serialize(serializer),
            Id::String(s) => serializer.serialize_str(s),
        }
    }
}

macro_rules! methods {
    ($($variant:ident => $name:literal,)*) => {
        /// An MCP method. Known names map to their variant; anything else is `Other` with the
        /// exact (unescaped) name.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        pub enum Method {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
            Other(String),
        }

        impl Method {
            /// Exact match on the unescaped name.
            pub fn from_name(name: &str) -> Method {
                match name {
                    $($name => Method::$variant,)*
                    other => Method::Other(other.to_owned()),
                }
            }

            pub fn as_str(&self) -> &str {
                match self {
                    $(Method::$variant => $name,)*
                    Method::Other(s) => s,
                }
            }

            /// Every known method.
            pub const KNOWN: &'static [Method] = &[$(Method::$variant,)*];
        }
    };
}

methods! {
    Initialize => "initialize",
    ServerDiscover => "server/discover",
    Ping => "ping",
    ToolsList => "tools/list",
    ToolsCall => "tools/call",
    ResourcesList => "resources/list",
    ResourcesRead => "resources/read",
    ResourcesTemplatesList => "resources/templates/list",
    ResourcesSubscribe => "resources/subscribe",
    ResourcesUnsubscribe => "resources/unsubscribe",
    PromptsList => "prompts/list",
    PromptsGet => "prompts/get",
    SamplingCreateMessage => "sampling/createMessage",
    ElicitationCreate => "elicitation/create",
    RootsList => "roots/list",
    CompletionComplete => "completion/complete",
    SubscriptionsListen => "subscriptions/listen",
    LoggingSetLevel => "logging/setLevel",
    TasksGet => "tasks/get",
    TasksResult => "tasks/result",
    TasksList => "tasks/list",
    TasksCancel => "tasks/cancel",
    Initialized => "notifications/initialized",
    Cancelled => "notifications/cancelled",
    Progress => "notifications/progress",
    ToolsListChanged => "notifications/tools/list_changed",
    ResourcesListChanged => "notifications/resources/list_changed",
    ResourcesUpdated => "notifications/resources/updated",
    PromptsListChanged => "notifications/prompts/list_changed",
    RootsListChanged => "notifications/roots/list_changed",
    Message => "notifications/message",
    TasksStatus => "notifications/tasks/status",
    ElicitationComplete => "notifications/elicitation/complete",
    SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged",
}

impl Method {
    pub fn is_known(&self) -> bool {
        !matches!(self, Method::Other(_))
    }

    /// A `notifications/...` method.
    pub fn is_notification_method(&self) -> bool {
        self.as_str().starts_with("notifications/")
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A method name that is not exactly a known method but becomes one after normalisation:
/// NFKC, removal of whitespace, control characters (NUL included) and default-ignorable
/// characters (zero-width spaces and joiners, BOM, soft hyphen, variation selectors, tags),
/// lowercasing (with Go's extra folds `ſ`→`s`, `K`→`k`), and mapping of Cyrillic and Greek
/// letters that look like Latin ones. A name is also checked truncated at its first NUL, as a
/// C-string parser would read it.
///
/// Such names are ambiguous (some server might dispatch them as the known method, and they
/// mislead a human reading the log): refuse them.
pub fn suspicious_method(name: &str) -> Option<Method> {
    if Method::from_name(name).is_known() {
        return None;
    }
    let full = fold_lookalike(name);
    if let Some(m) = known_by_folded(&full) {
        return Some(m);
    }
    if let Some(nul) = name.find('\0') {
        return known_by_folded(&fold_lookalike(&name[..nul]));
    }
    None
}

fn known_by_folded(folded: &str) -> Option<Method> {
    Method::KNOWN
        .iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(folded))
        .cloned()
}

/// The normalisation behind [`suspicious_method`] and ambiguous member names.
pub(crate) fn fold_lookalike(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.nfkc() {
        if c.is_whitespace() || c.is_control() || is_default_ignorable(c) {
            continue;
        }
        for l in c.to_lowercase() {
            out.push(latin_lookalike(l));
        }
    }
    out
}

fn is_default_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Lowercase Cyrillic/Greek letters that render like Latin ones, and Go's case-fold extras.
fn latin_lookalike(c: char) -> char {
    match c {
        'ſ' => 's',
        'а' => 'a',
        'с' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'ё' => 'e',
        'һ' => 'h',
        'і' | 'ї' | 'ι' => 'i',
        'ј' | 'ϳ' => 'j',
        'κ' | 'к' => 'k',
        'ӏ' => 'l',
        'м' => 'm',
        'ո' => 'n',
        'о' | 'ο' | 'σ' => 'o',
        'р' | 'ρ' => 'p',
        'ԛ' => 'q',
        'г' => 'r',
        'ѕ' => 's',
        'т' | 'τ' => 't',
        'υ' | 'ս' => 'u',
        'ν' | 'ѵ' => 'v',
        'ԝ' | 'ω' => 'w',
        'х' | 'χ' => 'x',
        'у' | 'γ' => 'y',
        'ᴢ' => 'z',
        other => other,
    }
}

/// Why a well-formed JSON value is not an acceptable JSON-RPC message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidReason {
    #[error("message is not a JSON object")]
    NotAnObject,
    #[error("\"jsonrpc\" is missing or not \"2.0\"")]
    BadVersion,
    #[error("\"method\" is not a string")]
    MethodNotString,
    #[error("\"method\" together with \"result\" or \"error\"")]
    MethodWithResponse,
    #[error("both \"result\" and \"error\"")]
    ResultAndError,
    #[error("neither \"method\" nor \"result\" nor \"error\"")]
    NoMethodOrResult,
    #[error("\"id\" is {found}; ids are strings or integers")]
    BadId { found: &'static str },
    #[error("response without \"id\"")]
    MissingId,
    #[error("\"params\" is neither an object nor an array")]
    BadParams,
    #[error("\"error\" is not an object")]
    BadError,
    #[error("member {member:?} is ambiguous with {looks_like:?}")]
    AmbiguousMember {
        member: String,
        looks_like: &'static str,
    },
}

/// What a message is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Request {
        id: Id,
        method: Method,
    },
    Notification {
        method: Method,
    },
    Response {
        id: Id,
    },
    /// `id` is `None` for `"id": null` (the answer to an unparseable request).
    ErrorResponse {
        id: Option<Id>,
    },
    Invalid(InvalidReason),
}

/// One JSON-RPC message: its parsed value, its classification and where its bytes are.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    range: Range<usize>,
    value: Value,
    kind: Kind,
}

impl Message {
    /// Byte range of this message's JSON value in the parsed line (surrounding whitespace and
    /// the batch's brackets and commas excluded).
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// This message's original bytes. `line` must be the slice given to [`parse`]
    /// (panics if it is shorter).
    pub fn raw<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        &line[self.range.clone()]
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    pub fn into_value(self) -> Value {
        self.value
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    pub fn is_invalid(&self) -> bool {
        matches!(self.kind, Kind::Invalid(_))
    }

    /// The id of a request or response.
    pub fn id(&self) -> Option<&Id> {
        match &self.kind {
            Kind::Request { id, .. } | Kind::Response { id } => Some(id),
            Kind::ErrorResponse { id } => id.as_ref(),
            Kind::Notification { .. } | Kind::Invalid(_) => None,
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&Method> {
        match &self.kind {
            Kind::Request { method, .. } | Kind::Notification { method } => Some(method),
            _ => None,
        }
    }

    pub fn params(&self) -> Option<&Value> {
        self.member("params")
    }

    pub fn result(&self) -> Option<&Value> {
        self.member("result")
    }

    pub fn error(&self) -> Option<&Value> {
        self.member("error")
    }

    fn member(&self, key: &str) -> Option<&Value> {
        self.value.as_object().and_then(|o| o.get(key))
    }

    /// The method of a request or notification, if [`suspicious_method`] flags it.
    pub fn suspicious_method(&self) -> Option<Method> {
        self.method().and_then(|m| suspicious_method(m.as_str()))
    }

    /// Fail-closed test for the guard: true for a `tools/call` request or notification (a
    /// sloppy server may execute a notification), a method that looks like `tools/call`, and
    /// every invalid message (it cannot be ruled out).
    pub fn may_be_tool_call(&self) -> bool {
        match &self.kind {
            Kind::Request { method, .. } | Kind::Notification { method } => {
                *method == Method::ToolsCall
                    || suspicious_method(method.as_str()) == Some(Method::ToolsCall)
            }
            Kind::Response { .. } | Kind::ErrorResponse { .. } => false,
            Kind::Invalid(_) => true,
        }
    }
}

/// A parsed line.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    Single(Message),
    /// A non-empty batch, elements in order.
    Batch(Vec<Message>),
}

impl Frame {
    pub fn messages(&self) -> &[Message] {
        match self {
            Frame::Single(m) => std::slice::from_ref(m),
            Frame::Batch(v) => v,
        }
    }

    pub fn into_messages(self) -> Vec<Message> {
        match self {
            Frame::Single(m) => vec![m],
            Frame::Batch(v) => v,
        }
    }

    pub fn is_batch(&self) -> bool {
        matches!(self, Frame::Batch(_))
    }
}

/// Parses one line (without its terminator; a trailing `\r` is harmless whitespace).
pub fn parse(line: &[u8]) -> Result<Frame, ParseError> {
    parse_with_depth(line, MAX_DEPTH)
}

/// [`parse`] with a custom nesting limit.
pub fn parse_with_depth(line: &[u8], max_depth: usize) -> Result<Frame, ParseError> {
    if line.starts_with(b"\xEF\xBB\xBF") {
        return Err(ParseError::Bom);
    }
    let text = std::str::from_utf8(line).map_err(|e| ParseError::InvalidUtf8 {
        offset: e.valid_up_to(),
    })?;
    let start = text
        .bytes()
        .position(|b| !is_json_ws(b))
        .ok_or(ParseError::Empty)?;
    if text.as_bytes()[start] == b'[' {
        return parse_batch(text, max_depth);
    }
    let value = parse_value(text, 0, 0, max_depth)?;
    let end = text
        .bytes()
        .rposition(|b| !is_json_ws(b))
        .map_or(text.len(), |p| p + 1);
    let kind = classify(&value);
    Ok(Frame::Single(Message {
        range: start..end,
        value,
        kind,
    }))
}

fn is_json_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn parse_batch(text: &str, max_depth: usize) -> Result<Frame, ParseError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let elements: Vec<&RawValue> =
        Deserialize::deserialize(&mut de).map_err(|e| map_json_error(e, None, 0, max_depth))?;
    de.end()
        .map_err(|e| map_json_error(e, None, 0, max_depth))?;
    if elements.is_empty() {
        return Err(ParseError::EmptyBatch);
    }
    let base = text.as_ptr() as usize;
    let mut messages = Vec::with_capacity(elements.len());
    for element in elements {
        let s = element.get();
        let offset = (s.as_ptr() as usize).wrapping_sub(base);
        let range = offset..offset.wrapping_add(s.len());
        if text.get(range.clone()) != Some(s) {
            // Cannot happen with a borrowed RawValue; refuse rather than guess.
            return Err(ParseError::InvalidJson {
                offset: 0,
                detail: "batch element outside the line".into(),
            });
        }
        let value = parse_value(s, 1, offset, max_depth)?;
        let kind = classify(&value);
        messages.push(Message { range, value, kind });
    }
    Ok(Frame::Batch(messages))
}

/// Parses `text` as exactly one JSON value, refusing a key twice in one object and nesting past
/// `max_depth`: JSON that reads one way only (the audit verifier's records, too).
pub fn parse_strict(text: &str, max_depth: usize) -> Result<Value, ParseError> {
    parse_value(text, 0, 0, max_depth)
}

/// Parses `text` as exactly one value (trailing whitespace allowed), nested `depth` levels deep.
fn parse_value(
    text: &str,
    depth: usize,
    base_offset: usize,
    max_depth: usize,
) -> Result<Value, ParseError> {
    let mut violation = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = ValueSeed {
        depth,
        max_depth,
        violation: &mut violation,
    };
    let result = seed.deserialize(&mut de);
    let value = match result {
        Ok(v) => v,
        Err(e) => return Err(map_json_error(e, violation, base_offset, max_depth)),
    };
    de.end()
        .map_err(|e| map_json_error(e, None, base_offset, max_depth))?;
    Ok(value)
}

fn map_json_error(
    e: serde_json::Error,
    violation: Option<Violation>,
    base_offset: usize,
    max_depth: usize,
) -> ParseError {
    match violation {
        Some(Violation::Duplicate(key)) => return ParseError::DuplicateKey { key },
        Some(Violation::TooDeep) => return ParseError::TooDeep { limit: max_depth },
        None => {}
    }
    // serde_json does not expose its error codes; its messages are stable and tested below.
    let detail = e.to_string();
    let offset = base_offset + e.column().saturating_sub(1);
    if detail.starts_with("trailing characters") {
        ParseError::TrailingData { offset }
    } else if detail.starts_with("lone leading surrogate")
        || detail.starts_with("unexpected end of hex escape")
    {
        ParseError::LoneSurrogate { offset }
    } else if detail.starts_with("recursion limit exceeded") {
        ParseError::TooDeep { limit: max_depth }
    } else {
        let detail = match detail.find(" at line ") {
            Some(cut) => detail[..cut].to_owned(),
            None => detail,
        };
        ParseError::InvalidJson { offset, detail }
    }
}

enum Violation {
    Duplicate(String),
    TooDeep,
}

/// Builds a `Value` while refusing duplicate keys and deep nesting.
struct ValueSeed<'a> {
    /// Containers already open around this value.
    depth: usize,
    max_depth: usize,
    violation: &'a mut Option<Violation>,
}

impl ValueSeed<'_> {
    fn enter<E: de::Error>(&mut self) -> Result<usize, E> {
        let depth = self.depth + 1;
        if depth > self.max_depth {
            *self.violation = Some(Violation::TooDeep);
            return Err(E::custom("nesting too deep"));
        }
        Ok(depth)
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("non-finite number"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(ValueSeed {
            depth,
            max_depth: self.max_depth,
            violation: &mut *self.violation,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                *self.violation = Some(Violation::Duplicate(key));
                return Err(de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(ValueSeed {
                depth,
                max_depth: self.max_depth,
                violation: &mut *self.violation,
            })?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

const ENVELOPE: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

/// The envelope member that `key` (not itself one) would be read as by a lenient decoder.
fn envelope_lookalike(key: &str) -> Option<&'static str> {
    if ENVELOPE.contains(&key) {
        return None;
    }
    // Cheap pre-filter: plain ASCII keys can only collide by case.
    if key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return ENVELOPE
            .iter()
            .find(|e| e.eq_ignore_ascii_case(key))
            .copied();
    }
    let folded = fold_lookalike(key);
    let truncated = key.find('\0').map(|nul| fold_lookalike(&key[..nul]));
    ENVELOPE
        .iter()
        .find(|e| **e == folded || truncated.as_deref() == Some(**e))
        .copied()
}

/// Classifies a parsed value. See the module documentation for the rules.
pub fn classify(value: &Value) -> Kind {
    let Value::Object(o) = value else {
        return Kind::Invalid(InvalidReason::NotAnObject);
    };
    for key in o.keys() {
        if let Some(looks_like) = envelope_lookalike(key) {
            return Kind::Invalid(InvalidReason::AmbiguousMember {
                member: key.clone(),
                looks_like,
            });
        }
    }
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Kind::Invalid(InvalidReason::BadVersion);
    }
    let result = o.get("result");
    let error = o.get("error");
    match o.get("method") {
        Some(Value::String(name)) => {
            if result.is_some() || error.is_some() {
                return Kind::Invalid(InvalidReason::MethodWithResponse);
            }
            match o.get("params") {
                None | Some(Value::Object(_) | Value::Array(_)) => {}
                Some(_) => return Kind::Invalid(InvalidReason::BadParams),
            }
            let method = Method::from_name(name);
            match o.get("id") {
                None => Kind::Notification { method },
                Some(v) => match Id::from_value(v) {
                    Some(id) => Kind::Request { id, method },
                    None => Kind::Invalid(InvalidReason::BadId {
                        found: describe_bad_id(v),
                    }),
                },
            }
        }
        Some(_) => Kind::Invalid(InvalidReason::MethodNotString),
        None => match (result, error) {
            (Some(_), Some(_)) => Kind::Invalid(InvalidReason::ResultAndError),
            (None, None) => Kind::Invalid(InvalidReason::NoMethodOrResult),
            (Some(_), None) => match o.get("id") {
                None => Kind::Invalid(InvalidReason::MissingId),
                Some(v) => match Id::from_value(v) {
                    Some(id) => Kind::Response { id },
                    None => Kind::Invalid(InvalidReason::BadId {
                        found: describe_bad_id(v),
                    }),
                },
            },
            (None, Some(e)) => {
                if !e.is_object() {
                    return Kind::Invalid(InvalidReason::BadError);
                }
                match o.get("id") {
                    None => Kind::Invalid(InvalidReason::MissingId),
                    Some(Value::Null) => Kind::ErrorResponse { id: None },
                    Some(v) => match Id::from_value(v) {
                        Some(id) => Kind::ErrorResponse { id: Some(id) },
                        None => Kind::Invalid(InvalidReason::BadId {
                            found: describe_bad_id(v),
                        }),
                    },
                }
            }
        },
    }
}

fn describe_bad_id(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "not an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(line: &str) -> Message {
        match parse(line.as_bytes()) {
            Ok(Frame::Single(m)) => m,
            other => panic!("expected a single message for {line}: {other:?}"),
        }
    }

    fn kind(line: &str) -> Kind {
        single(line).kind
    }

    fn err(line: &[u8]) -> ParseError {
        match parse(line) {
            Err(e) => e,
            Ok(f) => panic!(
                "expected an error for {:?}: {f:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }

    #[test]
    fn classifies_requests_notifications_responses() {
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#),
            Kind::Request {
                id: Id::from(1),
                method: Method::ToolsCall
            }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":"a","method":"\u0074ools/call"}"#),
            Kind::Request {
                id: Id::from("a"),
                method: Method::ToolsCall
            }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Kind::Notification {
                method: Method::Initialized
            }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":18446744073709551615,"result":{}}"#),
            Kind::Response {
                id: Id::Number(u64::MAX.into())
            }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":-5,"error":{"code":-32601,"message":"no"}}"#),
            Kind::ErrorResponse {
                id: Some(Id::from(-5))
            }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#),
            Kind::ErrorResponse { id: None }
        );
        assert_eq!(
            kind(r#"{"jsonrpc":"2.0","id":2,"method":"vendor/x","params":[1]}"#),
            Kind::Request {
                id: Id::from(2),
                method: Method::Other("vendor/x".into())
            }
        );
        // Odd but valid: extra members.
        assert!(matches!(
            kind(r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":true,"params":{}}"#),
            Kind::Response { .. }
        ));
    }

    #[test]
    fn classifies_invalid() {
        use InvalidReason as R;
        let inv = |l: &str| match kind(l) {
            Kind::Invalid(r) => r,
            k => panic!("expected invalid for {l}: {k:?}"),
        };
        assert_eq!(inv(r#"42"#), R::NotAnObject);
        assert_eq!(inv(r#"{"id":1,"method":"ping"}"#), R::BadVersion);
        assert_eq!(
            inv(r#"{"jsonrpc":"2","id":1,"method":"ping"}"#),
            R::BadVersion
        );
        assert_eq!(
            inv(r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#),
            R::BadVersion
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1,"method":7}"#),
            R::MethodNotString
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}"#),
            R::MethodWithResponse
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{}}"#),
            R::ResultAndError
        );
        assert_eq!(inv(r#"{"jsonrpc":"2.0","id":1}"#), R::NoMethodOrResult);
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#),
            R::BadId {
                found: "not an integer"
            }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1e2,"method":"ping"}"#),
            R::BadId {
                found: "not an integer"
            }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":123456789012345678901234,"method":"ping"}"#),
            R::BadId {
                found: "not an integer"
            }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            R::BadId { found: "null" }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            R::BadId { found: "an object" }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":true,"result":1}"#),
            R::BadId { found: "a boolean" }
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":null,"result":1}"#),
            R::BadId { found: "null" }
        );
        assert_eq!(inv(r#"{"jsonrpc":"2.0","result":1}"#), R::MissingId);
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","error":{"code":1,"message":"x"}}"#),
            R::MissingId
        );
        assert_eq!(
            inv(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}"#),
            R::BadParams
        );
        assert_eq!(inv(r#"{"jsonrpc":"2.0","id":1,"error":"x"}"#), R::BadError);
        for member in [
            "Method",
            "METHOD",
            "ID",
            "Params",
            "JSONRPC",
            "method\\u0000",
            "method\\u0000x",
            " method",
            "ｍｅｔｈｏｄ",
            "meth\\u200bod",
            "mеthod", // Cyrillic е
            "reſult",
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","{member}":"tools/call"}}"#);
            assert!(
                matches!(inv(&line), R::AmbiguousMember { .. }),
                "{member} must be ambiguous"
            );
        }
        // Not ambiguous: unrelated extra members.
        assert!(matches!(
            kind(r#"{"jsonrpc":"2.0","id":1,"method":"ping","_meta":{},"methods":1}"#),
            Kind::Request { .. }
        ));
    }

    #[test]
    fn minus_zero_and_float_ids_are_not_ids() {
        // serde_json reads -0 as an integer 0 or a float -0.0; either way it must not become
        // a *different* id than the sender meant.
        let k = kind(r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#);
        match k {
            Kind::Request { id, .. } => assert_eq!(id.to_string(), "0"),
            Kind::Invalid(InvalidReason::BadId { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn strictness_errors() {
        assert_eq!(err(b""), ParseError::Empty);
        assert_eq!(err(b"  \t\r"), ParseError::Empty);
        assert_eq!(err(b"\xEF\xBB\xBF{}"), ParseError::Bom);
        assert_eq!(
            err(b"{\"a\":\"\xff\"}"),
            ParseError::InvalidUtf8 { offset: 6 }
        );
        assert!(matches!(err(b"{\"a\":}"), ParseError::InvalidJson { .. }));
        assert!(matches!(err(b"{\"a\":1,}"), ParseError::InvalidJson { .. }));
        assert!(matches!(err(b"{'a':1}"), ParseError::InvalidJson { .. }));
        assert!(matches!(
            err(b"{\"a\":NaN}"),
            ParseError::InvalidJson { .. }
        ));
        assert!(matches!(
            err(b"{\"a\":1e400}"),
            ParseError::InvalidJson { .. }
        ));
        assert!(matches!(
            err(b"{\"a\":\"x\ty\"}"),
            ParseError::InvalidJson { .. }
        ));
        assert_eq!(
            err(br#"{"a":1}{"b":2}"#),
            ParseError::TrailingData { offset: 7 }
        );
        assert_eq!(err(br#"{"a":1} x"#), ParseError::TrailingData { offset: 8 });
        assert_eq!(
            err(br#"[{"a":1}] {}"#),
            ParseError::TrailingData { offset: 10 }
        );
        assert_eq!(
            err(br#"{"method":"ping","method":"tools/call"}"#),
            ParseError::DuplicateKey {
                key: "method".into()
            }
        );
        assert_eq!(
            err(br#"{"params":{"a":{"b":[{"x":1,"x":2}]}}}"#),
            ParseError::DuplicateKey { key: "x".into() }
        );
        // Duplicates after unescaping.
        assert_eq!(
            err(br#"{"name":1,"n\u0061me":2}"#),
            ParseError::DuplicateKey { key: "name".into() }
        );
        assert_eq!(
            err(br#"[{"jsonrpc":"2.0","id":1,"result":{},"id":2}]"#),
            ParseError::DuplicateKey { key: "id".into() }
        );
        assert!(matches!(
            err(br#"{"a":"\ud800"}"#),
            ParseError::LoneSurrogate { .. }
        ));
        assert!(matches!(
            err(br#"{"a":"\ud800x"}"#),
            ParseError::LoneSurrogate { .. }
        ));
        assert!(matches!(
            err(br#"{"a":"\udc00"}"#),
            ParseError::LoneSurrogate { .. }
        ));
        assert!(matches!(
            err(br#"{"a":"\ud800\u0041"}"#),
            ParseError::LoneSurrogate { .. }
        ));
        assert!(matches!(
            err(br#"[{"a":"\ud800"}]"#),
            ParseError::LoneSurrogate { .. }
        ));
        // A valid pair is fine.
        assert!(parse(br#"{"a":"\ud83d\ude00"}"#).is_ok());
        assert_eq!(err(b"[]"), ParseError::EmptyBatch);
        assert_eq!(err(b" [ ] "), ParseError::EmptyBatch);
    }

    #[test]
    fn depth_limit() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let obj = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        assert!(parse(obj(MAX_DEPTH).as_bytes()).is_ok());
        assert_eq!(
            err(obj(MAX_DEPTH + 1).as_bytes()),
            ParseError::TooDeep { limit: MAX_DEPTH }
        );
        // A batch counts as one level.
        let inner = format!("[{}]", obj(MAX_DEPTH - 1));
        assert!(parse(inner.as_bytes()).is_ok());
        let inner = format!("[{}]", obj(MAX_DEPTH));
        assert_eq!(
            err(inner.as_bytes()),
            ParseError::TooDeep { limit: MAX_DEPTH }
        );
        assert!(matches!(
            err(nest(100_000).as_bytes()),
            ParseError::TooDeep { .. }
        ));
        assert!(matches!(
            err(obj(100_000).as_bytes()),
            ParseError::TooDeep { .. }
        ));
    }

    #[test]
    fn raw_ranges() {
        let line = b"  {\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":1} \r";
        let m = single(std::str::from_utf8(line).expect("utf8"));
        assert_eq!(m.raw(line), &line[2..line.len() - 2]);

        let line = br#"[ {"jsonrpc":"2.0","id":1,"method":"ping"} ,{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":[1,2]}},7]"#;
        let Ok(Frame::Batch(msgs)) = parse(line) else {
            panic!("batch expected")
        };
        assert_eq!(msgs.len(), 3);
        assert_eq!(
            msgs[0].raw(line),
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#
        );
        assert_eq!(
            msgs[1].raw(line),
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":[1,2]}}"#
        );
        assert_eq!(msgs[2].raw(line), b"7");
        assert_eq!(msgs[2].kind(), &Kind::Invalid(InvalidReason::NotAnObject));
        assert!(msgs[2].may_be_tool_call());
        assert_eq!(msgs[1].method(), Some(&Method::Progress));
    }

    #[test]
    fn suspicious_methods() {
        assert_eq!(suspicious_method("tools/call"), None);
        assert_eq!(suspicious_method("vendor/thing"), None);
        for s in [
            "Tools/Call",
            " tools/call",
            "tools/call\n",
            "tools/call\0",
            "tools/call\0junk",
            "\0tools/call",
            "ｔｏｏｌｓ／ｃａｌｌ",
            "tools/\u{200B}call",
            "tоols/call", // Cyrillic о
            "tools/call\u{FE0F}",
            "\u{FEFF}tools/call",
        ] {
            assert_eq!(suspicious_method(s), Some(Method::ToolsCall), "{s:?}");
        }
        assert_eq!(
            suspicious_method("sampling/createmessage"),
            Some(Method::SamplingCreateMessage)
        );
        assert_eq!(
            suspicious_method("Notifications/Tools/List_Changed"),
            Some(Method::ToolsListChanged)
        );
        let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"Tools/call"}"#);
        assert!(m.may_be_tool_call());
        assert_eq!(m.suspicious_method(), Some(Method::ToolsCall));
        let m = single(r#"{"jsonrpc":"2.0","method":"tools/call"}"#);
        assert!(
            m.may_be_tool_call(),
            "a tools/call notification is treated as a call"
        );
        let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        assert!(!m.may_be_tool_call());
    }

    #[test]
    fn method_names_round_trip() {
        for m in Method::KNOWN {
            assert_eq!(&Method::from_name(m.as_str()), m);
            assert_eq!(suspicious_method(m.as_str()), None);
        }
        assert_eq!(
            Method::ToolsListChanged.as_str(),
            "notifications/tools/list_changed"
        );
        assert!(Method::Progress.is_notification_method());
    }

    #[test]
    fn id_display_and_serialize() {
        assert_eq!(Id::from(7).to_string(), "7");
        assert_eq!(Id::from("a\"b").to_string(), r#""a\"b""#);
        assert_eq!(
            serde_json::to_string(&Id::from("x")).expect("serialize"),
            r#""x""#
        );
        assert_eq!(Id::from_value(&serde_json::json!(1.5)), None);
    }

    /// Per-message cost of `parse` + classification (printed, not asserted).
    #[test]
    fn perf_note() {
        let line = br#"{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/home/user/project/src/main.rs","offset":0,"limit":200}}}"#;
        let iterations = if cfg!(debug_assertions) {
            20_000
        } else {
            200_000
        };
        let start = std::time::Instant::now();
        let mut n = 0usize;
        for _ in 0..iterations {
            if let Ok(Frame::Single(m)) = parse(std::hint::black_box(line)) {
                n += usize::from(m.may_be_tool_call());
            }
        }
        let per = start.elapsed() / iterations;
        assert_eq!(n, iterations as usize);
        eprintln!(
            "mcp::jsonrpc::parse: {per:?} per {}-byte tools/call ({} build)",
            line.len(),
            if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
        );
    }
}
