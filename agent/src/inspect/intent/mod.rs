//! The intent layer: what a text does to the model, not which phrases it contains.
//!
//! A tool definition or result is read sentence by sentence for classes of words (verbs of
//! acting, obligations, nouns for the model, role markup, authority, secrecy, credentials,
//! destinations, promotion, references to other tools of the session); `signals` combines them
//! within a sentence or a framing window ("a directive inside role markup", "an outward act
//! toward a destination"), and `combos` turns the strongest combination into a severity. A
//! finding names the combination, the sentence that carries it, and every signal behind it.
//!
//! It runs beside the rule catalogue: rules know specific techniques (a `curl | bash`, a
//! chat-template token), the intent layer knows the shape of an instruction aimed at the model.

mod combos;
mod sentences;
mod signals;
mod words;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use super::normalize::{self, Normalized};
use super::{Evidence, Finding};

pub(crate) use signals::{Signal, Whose};

/// What the text is: its rules differ. A definition is full of directives about its own use;
/// a result should carry none aimed at the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Definition,
    Output,
}

/// The session a text is judged in: which server it comes from, which tool it describes or
/// produced it, and every tool of the session by server.
pub struct Scope<'a> {
    pub session: &'a SessionTools,
    pub server: &'a str,
    pub tool: Option<&'a str>,
}

/// Every tool of a session, by name. Names are compared lower-cased with `-` read as `_`, the
/// way prose refers to them.
#[derive(Debug, Default, Clone)]
pub struct SessionTools {
    servers_by_tool: HashMap<String, Vec<String>>,
}

impl SessionTools {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, server: &str, tool: &str) {
        let servers = self.servers_by_tool.entry(tool_key(tool)).or_default();
        if !servers.iter().any(|s| s == server) {
            servers.push(server.to_string());
        }
    }

    pub fn is_empty(&self) -> bool {
        self.servers_by_tool.is_empty()
    }

    /// Whether some server of the session has a tool of this name.
    pub fn knows(&self, tool: &str) -> bool {
        self.servers_by_tool.contains_key(&tool_key(tool))
    }
}

fn tool_key(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// `Scope` as the signals see it; without a scope no name belongs to the session.
pub(crate) struct Context<'a> {
    scope: Option<&'a Scope<'a>>,
    subject: Option<String>,
}

impl<'a> Context<'a> {
    pub(crate) fn new(scope: Option<&'a Scope<'a>>) -> Self {
        Self {
            subject: scope.and_then(|s| s.tool).map(tool_key),
            scope,
        }
    }

    pub(crate) fn whose(&self, name: &str) -> Whose {
        let key = tool_key(name);
        if self.subject.as_deref() == Some(key.as_str()) {
            return Whose::Subject;
        }
        let Some(scope) = self.scope else {
            return Whose::Unknown;
        };
        match scope.session.servers_by_tool.get(&key) {
            None => Whose::Unknown,
            Some(servers) if servers.iter().any(|s| s == scope.server) => Whose::SameServer,
            Some(_) => Whose::OtherServer,
        }
    }
}

/// Texts longer than this are judged on their first `MAX_TEXT` bytes: injections aimed at a
/// model sit where a model reads, and the rule catalogue still scans everything. What is left
/// unread is reported (`intent.truncated`), never skipped silently.
pub(crate) const MAX_TEXT: usize = 1 << 20;

pub(crate) struct Intent {
    classes: signals::Classes,
}

/// One scanned document: several strings joined by line breaks, each remembered with its JSON
/// path so a finding points at the string it is in.
pub(crate) struct Document {
    text: String,
    pieces: Vec<(usize, String)>,
    /// Bytes of strings not taken because the document was full.
    dropped: usize,
}

impl Document {
    pub(crate) fn new() -> Self {
        Self {
            text: String::new(),
            pieces: Vec::new(),
            dropped: 0,
        }
    }

    /// Bytes of the document the intent layer does not read: past `MAX_TEXT`.
    pub(crate) fn unread(&self) -> usize {
        self.dropped + self.text.len().saturating_sub(MAX_TEXT)
    }

    pub(crate) fn push(&mut self, path: &str, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        if self.text.len() >= MAX_TEXT {
            self.dropped += text.len();
            return;
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        self.pieces.push((self.text.len(), path.to_string()));
        self.text.push_str(text);
    }

    /// The piece holding byte `at`: its path and start.
    fn piece(&self, at: usize) -> (&str, usize) {
        let i = self.pieces.partition_point(|(start, _)| *start <= at);
        self.pieces
            .get(i.saturating_sub(1))
            .map_or(("$", 0), |(start, path)| (path.as_str(), *start))
    }
}

impl Intent {
    pub(crate) fn new() -> Result<Self, regex::Error> {
        Ok(Self {
            classes: signals::Classes::new()?,
        })
    }

    /// Reads `doc` as a `kind`: its normalised text and every signal in it. `None` for an
    /// empty document. `quoted_example(lower, start, end)` says a match is a quoted example
    /// under discussion ("attacks such as 'ignore previous instructions'"), which is no signal.
    pub(crate) fn read<'d>(
        &self,
        doc: &'d Document,
        kind: Kind,
        scope: Option<&Scope>,
        quoted_example: &dyn Fn(&str, usize, usize) -> bool,
    ) -> Option<Reading<'d>> {
        if doc.text.is_empty() {
            return None;
        }
        let mut end = doc.text.len().min(MAX_TEXT);
        while !doc.text.is_char_boundary(end) {
            end -= 1;
        }
        let orig = &doc.text[..end];
        let n = normalize::normalize(orig, false);
        // Serialised JSON, YAML and Python carry line breaks as literal `\n`: read them as
        // spaces (same length, so offsets hold).
        let (cased, lower) = if n.text.contains('\\') {
            (unescape_breaks(&n.text), unescape_breaks(&n.lower))
        } else {
            (n.text.clone(), n.lower.clone())
        };
        let cx = Context::new(scope);
        let found = self
            .classes
            .signals(&cased, &lower, kind, &cx, quoted_example);
        Some(Reading {
            doc,
            orig,
            n,
            cased,
            lower,
            found,
            kind,
        })
    }

    /// The strongest intent finding of a reading, if any.
    pub(crate) fn judge(&self, reading: &Reading) -> Option<Finding> {
        let combo = combos::judge(&reading.found, reading.kind)?;
        let spans: Vec<(signals::Signal, (usize, usize))> = combo
            .because
            .iter()
            .filter_map(|s| reading.found.span(*s).map(|span| (*s, span)))
            .collect();
        let evidence = spans
            .iter()
            .map(|(signal, span)| Evidence {
                signal: signal.name().to_string(),
                text: reading.excerpt(*span, 80),
            })
            .collect();
        let first = spans.first().map_or((0, 0), |(_, span)| *span);
        Some(reading.finding(
            &format!("intent.{}", combo.id),
            combo.aim.category(),
            combo.severity,
            first,
            evidence,
        ))
    }

    /// Identifies the word classes; see [`signals::Classes::fingerprint`].
    pub(crate) fn fingerprint(&self) -> u64 {
        self.classes.fingerprint()
    }
}

/// A document as the intent layer read it: the normalised text, its sentences with their word
/// classes, and the signals they add up to.
pub(crate) struct Reading<'d> {
    doc: &'d Document,
    /// The document's text up to `MAX_TEXT`.
    orig: &'d str,
    n: Normalized,
    cased: String,
    lower: String,
    found: signals::Signals,
    kind: Kind,
}

/// One sentence of a reading: its text (normalised, with and without case), the word classes
/// in it and its byte range in the normalised text.
pub(crate) struct ReadSentence<'r> {
    pub cased: &'r str,
    pub lower: &'r str,
    pub classes: u64,
    pub span: (usize, usize),
}

impl<'d> Reading<'d> {
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn sentences(&self) -> impl Iterator<Item = ReadSentence<'_>> {
        self.found.sentences.iter().map(|s| ReadSentence {
            cased: &self.cased[s.start..s.end],
            lower: &self.lower[s.start..s.end],
            classes: s.classes,
            span: (s.start, s.end),
        })
    }

    /// The original text behind a span of the normalised text, shortened to `max_chars`.
    pub(crate) fn excerpt(&self, (a, b): (usize, usize), max_chars: usize) -> String {
        let (a, b) = self.n.orig_span(self.orig, a, b);
        super::engine::excerpt(&self.orig[a..b], max_chars)
    }

    /// A finding at a span of the normalised text, pointing at the piece of the document (its
    /// JSON path) that holds it.
    pub(crate) fn finding(
        &self,
        rule: &str,
        category: super::Category,
        severity: super::Severity,
        (ns, ne): (usize, usize),
        mut evidence: Vec<Evidence>,
    ) -> Finding {
        let (doc, orig) = (self.doc, self.orig);
        let (os, oe) = self.n.orig_span(orig, ns, ne);
        let (field, piece_start) = doc.piece(os);
        let piece_end = doc
            .pieces
            .iter()
            .map(|(start, _)| *start)
            .find(|start| *start > piece_start)
            .map_or(orig.len(), |next| next - 1);
        let piece = &orig[piece_start..piece_end.max(piece_start)];
        let (s, e) = (
            os.saturating_sub(piece_start).min(piece.len()),
            oe.saturating_sub(piece_start).min(piece.len()),
        );
        let mut f = super::engine::finding(rule, category, severity, field, piece, s, e);
        evidence.dedup();
        f.evidence = evidence;
        f
    }
}

/// Replaces literal `\n`, `\r` and `\t` escapes with two spaces.
fn unescape_breaks(s: &str) -> String {
    let mut b = s.as_bytes().to_vec();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'\\' && matches!(b[i + 1], b'n' | b'r' | b't') {
            b[i] = b' ';
            b[i + 1] = b' ';
            i += 2;
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were replaced by ASCII bytes.
    String::from_utf8(b).unwrap_or_else(|_| s.to_string())
}
