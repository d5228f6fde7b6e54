//! What the proxy does with a request of a session that holds placeholders: the real value goes
//! in where the secret's destination allows it, and a placeholder on its way anywhere else
//! stops the request.
//!
//! Per placeholder found, by the host the request goes to:
//! - one of its secret's destinations: replaced by the value in the headers the destination
//!   names (any header when it names none; inside `Basic` credentials too), in its query
//!   parameters and in the body where configured; elsewhere in the request it stays a
//!   placeholder (harmless: it is not the key);
//! - any other host: refused, wherever and however it is written. One exception, by the
//!   caller's choice: a request body to an LLM provider (a conversation that quotes `env`
//!   output) has the placeholder redacted instead, as the embedded DLP does with secrets.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, HeaderValue, Uri};
use zeroize::Zeroizing;

use super::reflect::{ValueScrubber, Values};
use super::scan::{Encoding, Found, Scanner, looks_like_json};
use super::vault::Secret;

/// How every placeholder starts: obviously not a key, and what the stdio shim lets through to
/// a server as the non-secret it is.
pub const PLACEHOLDER_PREFIX: &str = "agentsh-placeholder-";

/// How many random bytes end a placeholder (written as twice as many lowercase hex digits).
const PLACEHOLDER_RANDOM_BYTES: usize = 12;

/// The part of a placeholder that names its secret: the variable's name lowercased, `_` as
/// `-` (`GITHUB_TOKEN` -> `github-token`).
fn placeholder_label(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

/// Whether `value` is exactly what [`Broker::new_placeholders`] makes for the variable `name`:
/// `agentsh-placeholder-<name's label>-<24 lowercase hex digits>`. What the stdio shim lets
/// through to a server under a credential's name: anything else in that variable may be the
/// credential itself.
pub fn is_placeholder_for(name: &str, value: &str) -> bool {
    let Some(rest) = value.strip_prefix(PLACEHOLDER_PREFIX) else {
        return false;
    };
    let label = placeholder_label(name);
    let Some(random) = rest
        .strip_prefix(label.as_str())
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    !label.is_empty()
        && random.len() == 2 * PLACEHOLDER_RANDOM_BYTES
        && random
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Where a request is going: the host it names (SNI or Host, lowercase) and the port.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub host: &'a str,
    pub port: u16,
}

/// Where in a request a placeholder was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    Header(String),
    Url,
    Body,
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Header(name) => write!(f, "header {name}"),
            Self::Url => f.write_str("URL"),
            Self::Body => f.write_str("body"),
        }
    }
}

/// A request refused: a placeholder on its way where its secret may not go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub secret: String,
    pub place: Place,
    pub encoding: Encoding,
    /// The host it was going to.
    pub host: String,
    /// Where the secret may go.
    pub allowed: Vec<String>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the placeholder of secret {} ({}, {}) was on its way to {}; it may only go to {}",
            self.secret,
            self.place,
            self.encoding.as_str(),
            self.host,
            self.allowed.join(", ")
        )
    }
}

impl Refused {
    /// The `secret_refused` event every path records for it; `destination` as that path
    /// names where the request was going.
    pub fn event(&self, destination: &str) -> crate::audit::Event {
        crate::audit::Event::new(
            crate::audit::EventKind::SecretRefused,
            &self.host,
            crate::audit::Action::Block,
            format!("request refused: {self}"),
        )
        .rule("secrets")
        .severity(crate::config::Severity::High)
        .details(serde_json::json!({
            "secret": self.secret,
            "destination": destination,
            "place": self.place.to_string(),
            "encoding": self.encoding.as_str(),
            "allowed": self.allowed,
        }))
    }
}

/// What to do with another secret's placeholder in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    Refuse,
    /// Replace it by `[REDACTED:secret NAME]` (a plain occurrence; any other form refuses).
    Redact,
}

/// What became of a body.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct BodyOutcome {
    /// The body to send instead, when anything was replaced.
    pub body: Option<Vec<u8>>,
    pub substituted: Vec<String>,
    pub redacted: Vec<String>,
}

/// The daemon's brokered secrets.
#[derive(Debug, Default)]
pub struct Broker {
    secrets: Arc<[Secret]>,
}

impl Broker {
    pub fn new(secrets: Vec<Secret>) -> Self {
        Self {
            secrets: secrets.into(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn secrets(&self) -> &[Secret] {
        &self.secrets
    }

    /// New placeholders, one per secret: obviously not a key (`agentsh-placeholder-…`), and
    /// unique to the session they are made for.
    pub fn new_placeholders(&self) -> Result<BTreeMap<String, String>, getrandom::Error> {
        self.secrets
            .iter()
            .map(|s| {
                let mut random = [0u8; PLACEHOLDER_RANDOM_BYTES];
                getrandom::fill(&mut random)?;
                let label = placeholder_label(&s.name);
                Ok((
                    s.name.clone(),
                    format!("{PLACEHOLDER_PREFIX}{label}-{}", hex::encode(random)),
                ))
            })
            .collect()
    }

    /// A session's secrets by its placeholders (kept with the session, so a restarted daemon
    /// recognises the ones its agents already hold). Placeholders of secrets no longer
    /// configured are left out.
    pub fn session(&self, placeholders: &BTreeMap<String, String>) -> SessionSecrets {
        let entries: Vec<(usize, String)> = self
            .secrets
            .iter()
            .enumerate()
            .filter_map(|(i, s)| placeholders.get(&s.name).map(|p| (i, p.clone())))
            .collect();
        let scanner = Scanner::new(&entries.iter().map(|(_, p)| p).collect::<Vec<_>>());
        SessionSecrets {
            secrets: Arc::clone(&self.secrets),
            entries,
            scanner,
            values: std::sync::OnceLock::new(),
        }
    }
}

/// One session's placeholders, ready to look for.
#[derive(Debug)]
pub struct SessionSecrets {
    secrets: Arc<[Secret]>,
    /// (index into `secrets`, placeholder); the scanner's secret indexes are into this.
    entries: Vec<(usize, String)>,
    scanner: Scanner,
    /// The values to put back in responses, made when the first response is scrubbed.
    values: std::sync::OnceLock<Arc<Values>>,
}

impl SessionSecrets {
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn secret(&self, found: &Found) -> (&Secret, &str) {
        let (index, placeholder) = &self.entries[found.secret];
        (&self.secrets[*index], placeholder)
    }

    fn refused(&self, found: &Found, place: Place, to: Target<'_>) -> Refused {
        let (secret, _) = self.secret(found);
        Refused {
            secret: secret.name.clone(),
            place,
            encoding: found.encoding,
            host: to.host.to_owned(),
            allowed: secret.destinations.iter().map(|d| d.host.clone()).collect(),
        }
    }

    /// The request's head: placeholders replaced where allowed; the secrets put in, or why
    /// the request may not go.
    pub fn apply_head(
        &self,
        to: Target<'_>,
        headers: &mut HeaderMap,
        uri: &mut Uri,
    ) -> Result<Vec<String>, Refused> {
        let mut substituted = Vec::new();
        if self.is_empty() {
            return Ok(substituted);
        }
        let mut replacements: Vec<(http::HeaderName, usize, HeaderValue)> = Vec::new();
        for name in headers.keys() {
            for (n, value) in headers.get_all(name).iter().enumerate() {
                let place = || Place::Header(name.as_str().to_owned());
                let mut text = Cow::Borrowed(value.as_bytes());
                if let Some(found) = self.scanner.find(name.as_str().as_bytes()).first() {
                    return Err(self.refused(found, place(), to));
                }
                for found in self.scanner.find(value.as_bytes()) {
                    let (secret, placeholder) = self.secret(&found);
                    let Some(dest) = secret.destination(to.host, to.port) else {
                        return Err(self.refused(&found, place(), to));
                    };
                    let allowed =
                        dest.headers.is_empty() || dest.headers.iter().any(|h| h == name.as_str());
                    if !allowed {
                        continue;
                    }
                    let replaced = match found.encoding {
                        Encoding::Plain => replace(&text, placeholder, secret.value()),
                        Encoding::Base64 => replace_in_basic(&text, placeholder, secret.value()),
                        _ => None,
                    };
                    if let Some(new) = replaced {
                        text = Cow::Owned(new);
                        push_once(&mut substituted, &secret.name);
                    }
                }
                if let Cow::Owned(bytes) = text {
                    // The value has no control characters (checked when it was read).
                    if let Ok(mut value) = HeaderValue::from_bytes(&bytes) {
                        value.set_sensitive(true);
                        replacements.push((name.clone(), n, value));
                    }
                }
            }
        }
        for (name, n, value) in replacements {
            if let http::header::Entry::Occupied(mut entry) = headers.entry(&name)
                && let Some(slot) = entry.iter_mut().nth(n)
            {
                *slot = value;
            }
        }
        if let Some(path_and_query) = uri.path_and_query().map(|p| p.as_str().to_owned()) {
            let mut query_secrets = Vec::new();
            for found in self.scanner.find(path_and_query.as_bytes()) {
                let (secret, _) = self.secret(&found);
                match secret.destination(to.host, to.port) {
                    None => return Err(self.refused(&found, Place::Url, to)),
                    Some(dest) if !dest.query.is_empty() && found.encoding == Encoding::Plain => {
                        query_secrets.push(found);
                    }
                    Some(_) => {}
                }
            }
            if !query_secrets.is_empty() {
                let rebuilt =
                    self.replace_in_query(&path_and_query, &query_secrets, to, &mut substituted);
                if let Some(rebuilt) = rebuilt {
                    let mut parts = uri.clone().into_parts();
                    if let Ok(pq) = rebuilt.parse() {
                        parts.path_and_query = Some(pq);
                        if let Ok(new) = Uri::from_parts(parts) {
                            *uri = new;
                        }
                    }
                }
            }
        }
        Ok(substituted)
    }

    /// `path?query` with the placeholders of `found` replaced in the query parameters their
    /// destination names.
    fn replace_in_query(
        &self,
        path_and_query: &str,
        found: &[Found],
        to: Target<'_>,
        substituted: &mut Vec<String>,
    ) -> Option<String> {
        let (path, query) = path_and_query.split_once('?')?;
        let mut changed = false;
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                let decoded_key: String = url::form_urlencoded::parse(key.as_bytes())
                    .next()
                    .map(|(k, _)| k.into_owned())
                    .unwrap_or_default();
                let mut value = value.to_owned();
                for f in found {
                    let (secret, placeholder) = self.secret(f);
                    let Some(dest) = secret.destination(to.host, to.port) else {
                        continue;
                    };
                    if dest.query.contains(&decoded_key) && value.contains(placeholder) {
                        let encoded = query_component(secret.value());
                        value = value.replace(placeholder, &encoded);
                        changed = true;
                        push_once(substituted, &secret.name);
                    }
                }
                if pair.contains('=') {
                    format!("{key}={value}")
                } else {
                    key.to_owned()
                }
            })
            .collect();
        changed.then(|| format!("{path}?{}", pairs.join("&")))
    }

    /// The request body (decoded of any Content-Encoding): the values put in where the
    /// destination takes them in the body; other secrets' placeholders refused, or redacted
    /// when `foreign` says so. The body's kind is told by its first character (JSON);
    /// [`Self::apply_body_as`] when the request's Content-Type is known.
    pub fn apply_body(
        &self,
        to: Target<'_>,
        body: &[u8],
        foreign: Foreign,
    ) -> Result<BodyOutcome, Refused> {
        self.apply_body_as(to, body, foreign, None)
    }

    /// [`Self::apply_body`] for a body of `content_type`: a value goes into a JSON body
    /// JSON-string-escaped, into an `application/x-www-form-urlencoded` one form-encoded, into
    /// anything else as it is.
    pub fn apply_body_as(
        &self,
        to: Target<'_>,
        body: &[u8],
        foreign: Foreign,
        content_type: Option<&str>,
    ) -> Result<BodyOutcome, Refused> {
        let mut outcome = BodyOutcome::default();
        if self.is_empty() || body.is_empty() {
            return Ok(outcome);
        }
        let found = self.scanner.find_in_body(body);
        if found.is_empty() {
            return Ok(outcome);
        }
        let kind = BodyKind::of(content_type, body);
        let mut text = Cow::Borrowed(body);
        for f in &found {
            let (secret, placeholder) = self.secret(f);
            match secret.destination(to.host, to.port) {
                Some(dest) if dest.body && f.encoding == Encoding::Plain => {
                    let value = kind.encode(secret.value());
                    if let Some(new) = replace(&text, placeholder, &value) {
                        text = Cow::Owned(new);
                        push_once(&mut outcome.substituted, &secret.name);
                    }
                }
                Some(_) => {}
                None => match (foreign, f.encoding) {
                    (Foreign::Redact, Encoding::Plain) => {
                        let marker = format!("[REDACTED:secret {}]", secret.name);
                        match replace(&text, placeholder, &marker) {
                            Some(new) => {
                                text = Cow::Owned(new);
                                push_once(&mut outcome.redacted, &secret.name);
                            }
                            // Only an upper-cased copy: not worth a redaction, but not allowed.
                            None => return Err(self.refused(f, Place::Body, to)),
                        }
                    }
                    _ => return Err(self.refused(f, Place::Body, to)),
                },
            }
        }
        if !outcome.redacted.is_empty() {
            // A redacted body must hold no other secret's placeholder in any form: a plain copy
            // redacted beside an escaped one would otherwise let the escaped one through.
            if let Some(f) = self
                .scanner
                .find_in_body(&text)
                .iter()
                .find(|f| self.secret(f).0.destination(to.host, to.port).is_none())
            {
                return Err(self.refused(f, Place::Body, to));
            }
        }
        if let Cow::Owned(bytes) = text {
            outcome.body = Some(bytes);
        }
        Ok(outcome)
    }

    /// A response's headers with every real value of the session's secrets put back to its
    /// placeholder: a destination that reflects a request header (a redirect keeping the
    /// query, an echo) must not hand the value to the agent. Which secrets were seen.
    pub fn scrub_response_headers(&self, headers: &mut HeaderMap) -> Vec<String> {
        let mut seen = Vec::new();
        if self.is_empty() {
            return seen;
        }
        for value in headers.values_mut() {
            let mut text = Cow::Borrowed(value.as_bytes());
            for (index, placeholder) in &self.entries {
                let secret = &self.secrets[*index];
                if let Some(new) = replace(&text, secret.value(), placeholder) {
                    text = Cow::Owned(new);
                    push_once(&mut seen, &secret.name);
                }
            }
            if let Cow::Owned(bytes) = text
                && let Ok(scrubbed) = HeaderValue::from_bytes(&bytes)
            {
                *value = scrubbed;
            }
        }
        seen
    }

    /// A streamed response body's scrubber: every real value of the session's secrets put
    /// back to its placeholder as the body passes (see [`ValueScrubber`]).
    ///
    /// All of the session's values, not only those put into the request the response
    /// answers: a destination may return a value it was given earlier (a stored upload
    /// token, a gist written with it), on a request that carried none.
    pub fn response_scrubber(&self) -> ValueScrubber {
        ValueScrubber::new(Arc::clone(self.values()))
    }

    /// A whole response body (or WebSocket message) with every real value of the session's
    /// secrets put back to its placeholder, and the secrets seen; `None` when it holds none.
    pub fn scrub_response_body(&self, body: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
        if self.is_empty() {
            return None;
        }
        self.values().replace_all(body)
    }

    fn values(&self) -> &Arc<Values> {
        self.values.get_or_init(|| {
            Arc::new(Values::new(self.entries.iter().map(
                |(index, placeholder)| {
                    let secret = &self.secrets[*index];
                    (secret.name.as_str(), secret.value(), placeholder.as_str())
                },
            )))
        })
    }
}

/// How a request body is written, which says how a value is written into it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Form,
    Other,
}

impl BodyKind {
    /// By the request's Content-Type; without one that says, JSON when the body starts as a
    /// JSON document does.
    fn of(content_type: Option<&str>, body: &[u8]) -> Self {
        let essence = content_type
            .and_then(|c| c.split(';').next())
            .map(|m| m.trim().to_ascii_lowercase());
        match essence.as_deref() {
            Some("application/x-www-form-urlencoded") => Self::Form,
            Some(m) if m == "application/json" || m.ends_with("+json") || m.ends_with("/jsonl") => {
                Self::Json
            }
            Some("application/x-ndjson") => Self::Json,
            _ if looks_like_json(body) => Self::Json,
            _ => Self::Other,
        }
    }

    /// The value as it goes in: inside a JSON string, a form field, or as it is.
    fn encode(self, value: &str) -> Zeroizing<String> {
        Zeroizing::new(match self {
            Self::Json => {
                let quoted = Zeroizing::new(serde_json::to_string(value).unwrap_or_default());
                quoted[1..quoted.len().saturating_sub(1)].to_owned()
            }
            Self::Form => url::form_urlencoded::byte_serialize(value.as_bytes()).collect(),
            Self::Other => value.to_owned(),
        })
    }
}

/// A value percent-encoded for a URL's query component: unreserved characters (RFC 3986) as
/// they are, every other byte `%XX` (a space `%20`, which a form reader and a plain URL
/// reader both take for a space; `+` would be a space to one and a plus to the other).
fn query_component(value: &str) -> Zeroizing<String> {
    let mut out = Zeroizing::new(String::with_capacity(value.len() * 3));
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn push_once(list: &mut Vec<String>, name: &str) {
    if !list.iter().any(|n| n == name) {
        list.push(name.to_owned());
    }
}

/// `text` with every exact occurrence of `from` replaced; `None` when there is none.
fn replace(text: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let finder = memchr::memmem::Finder::new(from.as_bytes());
    let mut out = Vec::with_capacity(text.len());
    let mut last = 0;
    for at in finder.find_iter(text) {
        out.extend_from_slice(&text[last..at]);
        out.extend_from_slice(to.as_bytes());
        last = at + from.len();
    }
    if last == 0 {
        return None;
    }
    out.extend_from_slice(&text[last..]);
    Some(out)
}

/// `Basic base64(user:password)` with the placeholder replaced inside the credentials.
fn replace_in_basic(header: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(header).ok()?;
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = zeroize::Zeroizing::new(STANDARD.decode(encoded.trim()).ok()?);
    let replaced = zeroize::Zeroizing::new(replace(&decoded, from, to)?);
    Some(format!("{scheme} {}", STANDARD.encode(&*replaced)).into_bytes())
}
