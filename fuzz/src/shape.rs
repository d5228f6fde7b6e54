//! Pieces every dialect's stream generator uses: tool names (some blocked, some spelt with
//! escapes), arguments (objects, not objects, broken JSON), and the SSE rendering of an event
//! with the framing variations clients accept.

use arbitrary::Arbitrary;
use serde_json::Value;

/// A tool name, as the JSON string literal a stream carries.
#[derive(Arbitrary, Debug, Clone)]
pub enum Name {
    Blocked(u8),
    /// `blocked_x` with its first letter escaped: the judge must see it unescaped.
    BlockedEscaped,
    Allowed(u8),
    Empty,
    Free(String),
}

impl Name {
    /// The JSON string literal (quotes included).
    pub fn literal(&self) -> String {
        match self {
            Name::Blocked(n) => format!("\"blocked_{}\"", n % 3),
            Name::BlockedEscaped => "\"\\u0062locked_x\"".to_owned(),
            Name::Allowed(n) => {
                let names = ["read_file", "Bash", "mcp__fs__write_file", "ok"];
                format!("\"{}\"", names[usize::from(*n) % names.len()])
            }
            Name::Empty => "\"\"".to_owned(),
            Name::Free(s) => json_string(s),
        }
    }
}

/// A JSON object key for arguments.
#[derive(Arbitrary, Debug, Clone)]
pub enum Key {
    Path,
    Command,
    Free(String),
}

impl Key {
    fn literal(&self) -> String {
        match self {
            Key::Path => "\"path\"".to_owned(),
            Key::Command => "\"command\"".to_owned(),
            Key::Free(s) => json_string(s),
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Scalar {
    Str(String),
    Int(i32),
    Bool(bool),
    Null,
    Float,
    Nested,
}

impl Scalar {
    fn literal(&self) -> String {
        match self {
            Scalar::Str(s) => json_string(s),
            Scalar::Int(n) => n.to_string(),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Null => "null".to_owned(),
            Scalar::Float => "1.5e3".to_owned(),
            Scalar::Nested => "{\"a\":[1,{\"b\":\"c\"}]}".to_owned(),
        }
    }
}

/// Arguments, as the JSON text a call carries.
#[derive(Arbitrary, Debug, Clone)]
pub enum Args {
    Empty,
    One(Key, Scalar),
    Two(Key, Scalar, Key, Scalar),
    /// The same key twice: parsers disagree on which wins.
    Duplicate(Scalar, Scalar),
    NotObject(Scalar),
    /// Any text at all (truncated or broken JSON among it).
    Raw(String),
    /// Valid JSON with whitespace and escapes.
    Spaced(Scalar),
}

impl Args {
    pub fn text(&self) -> String {
        match self {
            Args::Empty => "{}".to_owned(),
            Args::One(k, v) => format!("{{{}:{}}}", k.literal(), v.literal()),
            Args::Two(k1, v1, k2, v2) => format!(
                "{{{}:{},{}:{}}}",
                k1.literal(),
                v1.literal(),
                k2.literal(),
                v2.literal()
            ),
            Args::Duplicate(a, b) => {
                format!("{{\"path\":{},\"path\":{}}}", a.literal(), b.literal())
            }
            Args::NotObject(v) => v.literal(),
            Args::Raw(s) => s.clone(),
            Args::Spaced(v) => format!(" {{ \"p\\u0061th\" :\t{} }} ", v.literal()),
        }
    }

    /// The text as a JSON value where one is needed in place (Gemini's `args`): raw text
    /// that is not JSON goes in as it is, which breaks the chunk.
    pub fn value_text(&self) -> String {
        self.text()
    }
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Pieces of `text` at fuzz-chosen char boundaries.
pub fn split_text(text: &str, cuts: &[u8]) -> Vec<String> {
    let mut bounds: Vec<usize> = cuts
        .iter()
        .take(8)
        .map(|c| usize::from(*c) % (text.len() + 1))
        .filter(|at| text.is_char_boundary(*at))
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut pieces = Vec::new();
    let mut from = 0;
    for at in bounds {
        pieces.push(text[from..at].to_owned());
        from = at;
    }
    pieces.push(text[from..].to_owned());
    pieces
}

/// How one event is framed.
#[derive(Arbitrary, Debug, Clone, Copy, Default)]
pub struct Style {
    pub line_end: LineEnd,
    /// `data:{…}` without the space.
    pub no_space: bool,
    /// The JSON split over several `data:` lines at its commas (joined with `\n`, which is
    /// JSON whitespace).
    pub multi_line: bool,
    /// A comment line before the event.
    pub comment: bool,
    /// The `event:` line left out.
    pub no_name: bool,
    /// An `id:` line.
    pub id: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy, Default)]
pub enum LineEnd {
    #[default]
    Lf,
    CrLf,
    Cr,
}

impl LineEnd {
    fn as_str(self) -> &'static str {
        match self {
            LineEnd::Lf => "\n",
            LineEnd::CrLf => "\r\n",
            LineEnd::Cr => "\r",
        }
    }
}

/// One SSE event.
pub fn sse_event(out: &mut String, name: Option<&str>, data: &str, style: Style) {
    let end = style.line_end.as_str();
    let sep = if style.no_space { ":" } else { ": " };
    if style.comment {
        out.push_str(": keep-alive");
        out.push_str(end);
    }
    if let Some(name) = name.filter(|_| !style.no_name) {
        out.push_str("event");
        out.push_str(sep);
        out.push_str(name);
        out.push_str(end);
    }
    if style.id {
        out.push_str("id: 1");
        out.push_str(end);
    }
    if style.multi_line {
        // Cut after commas outside strings only: then each piece ends in JSON whitespace.
        let mut in_string = false;
        let mut escaped = false;
        let mut start = 0;
        for (i, c) in data.char_indices() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                ',' => {
                    out.push_str("data");
                    out.push_str(sep);
                    out.push_str(&data[start..=i]);
                    out.push_str(end);
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.push_str("data");
        out.push_str(sep);
        out.push_str(&data[start..]);
        out.push_str(end);
    } else {
        out.push_str("data");
        out.push_str(sep);
        out.push_str(data);
        out.push_str(end);
    }
    out.push_str(end);
}
