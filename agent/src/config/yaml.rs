//! A YAML tree that remembers where every node came from.
//!
//! Built from saphyr-parser's events rather than a ready-made loader so that we can report every
//! duplicate key (loaders stop at the first or silently keep the last), keep 1-based positions
//! on keys and values, and bound nesting depth and alias expansion (a hostile file must not be
//! able to exhaust the stack or memory).

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::diagnostic::Location;

/// Deeper nesting than any policy needs; bounds recursion in the walkers and in `Drop`.
pub(crate) const MAX_DEPTH: usize = 64;
/// Nodes per document, aliases counted expanded (defeats "billion laughs").
pub(crate) const MAX_NODES: usize = 200_000;

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub loc: Location,
    pub value: Value,
}

#[derive(Clone, Debug)]
pub(crate) enum Value {
    Scalar(Scalar),
    Seq(Vec<Node>),
    /// Entries in file order; keys are always scalars and unique.
    Map(Vec<(Node, Node)>),
}

#[derive(Clone, Debug)]
pub(crate) struct Scalar {
    pub text: String,
    /// Plain (unquoted) scalars are the only ones that can be null, bools or numbers.
    pub plain: bool,
}

impl Node {
    /// The null scalar, e.g. what an empty file reads as.
    pub fn null(loc: Location) -> Self {
        Self {
            loc,
            value: Value::Scalar(Scalar {
                text: String::new(),
                plain: true,
            }),
        }
    }

    /// A plain scalar that YAML 1.2 reads as null (`~`, `null`, or nothing at all).
    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar(s) if s.plain && matches!(s.text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    pub fn as_scalar(&self) -> Option<&Scalar> {
        match &self.value {
            Value::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// What kind of value this is, for "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
            Value::Scalar(_) if self.is_null() => "nothing (null)".into(),
            Value::Scalar(s)
                if s.plain
                    && matches!(
                        s.text.as_str(),
                        "true" | "True" | "TRUE" | "false" | "False" | "FALSE"
                    ) =>
            {
                format!("the boolean `{}`", s.text)
            }
            Value::Scalar(s)
                if s.plain
                    && s.text.bytes().any(|b| b.is_ascii_digit())
                    && s.text.parse::<f64>().is_ok() =>
            {
                format!("the number `{}`", s.text)
            }
            Value::Scalar(s) => format!("the string {:?}", truncate(&s.text, 60)),
        }
    }

    fn count(&self) -> usize {
        1 + match &self.value {
            Value::Scalar(_) => 0,
            Value::Seq(items) => items.iter().map(Node::count).sum(),
            Value::Map(entries) => entries.iter().map(|(k, v)| k.count() + v.count()).sum(),
        }
    }
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// The root node (None for a file with no document) and every syntax error, in file order.
pub(crate) struct Parsed {
    pub root: Option<Node>,
    pub errors: Vec<(Location, String)>,
}

pub(crate) fn parse(src: &str) -> Parsed {
    // saphyr-parser is fuzzed upstream, but a parser bug must still not take the daemon down
    // with it: a panic becomes an ordinary load error.
    match std::panic::catch_unwind(|| Builder::default().run(src)) {
        Ok(parsed) => parsed,
        Err(_) => Parsed {
            root: None,
            errors: vec![(
                Location::new(1, 1),
                "internal error in the YAML parser on this input".into(),
            )],
        },
    }
}

fn loc(span: &Span) -> Location {
    Location::new(span.start.line(), span.start.col() + 1)
}

enum Key {
    Valid(Node),
    /// A key we reported (duplicate or not a scalar): its value is parsed and dropped.
    Skip,
}

enum Frame {
    Seq {
        loc: Location,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        loc: Location,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Key>,
        seen: HashMap<String, Location>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize)>,
    nodes: usize,
    documents: usize,
    root: Option<Node>,
    errors: Vec<(Location, String)>,
}

impl Builder {
    fn run(mut self, src: &str) -> Parsed {
        let mut parser = Parser::new_from_str(src);
        while let Some(next) = parser.next_event() {
            let (event, span) = match next {
                Ok(ev) => ev,
                Err(e) => {
                    let m = e.marker();
                    self.errors.push((
                        Location::new(m.line(), m.col() + 1),
                        format!("invalid YAML: {}", e.info()),
                    ));
                    break;
                }
            };
            if !self.event(event, span) {
                break;
            }
        }
        Parsed {
            root: self.root,
            errors: self.errors,
        }
    }

    /// Handles one event; false stops parsing (the error is already recorded).
    fn event(&mut self, event: Event<'_>, span: Span) -> bool {
        let at = loc(&span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.errors.push((
                        at,
                        "the file must hold exactly one YAML document; found a second one".into(),
                    ));
                    return false;
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = match self.scalar_tag(tag.as_deref(), at) {
                    Some(p) => p,
                    None => style == ScalarStyle::Plain,
                };
                let node = Node {
                    loc: at,
                    value: Value::Scalar(Scalar {
                        text: text.into_owned(),
                        plain,
                    }),
                };
                return self.complete(node, anchor);
            }
            Event::SequenceStart(anchor, tag) => {
                self.collection_tag(tag.as_deref(), "seq", at);
                if !self.open(at) {
                    return false;
                }
                self.stack.push(Frame::Seq {
                    loc: at,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(anchor, tag) => {
                self.collection_tag(tag.as_deref(), "map", at);
                if !self.open(at) {
                    return false;
                }
                self.stack.push(Frame::Map {
                    loc: at,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                    seen: HashMap::new(),
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { loc, anchor, items }) => (
                        Node {
                            loc,
                            value: Value::Seq(items),
                        },
                        anchor,
                    ),
                    Some(Frame::Map {
                        loc,
                        anchor,
                        entries,
                        ..
                    }) => (
                        Node {
                            loc,
                            value: Value::Map(entries),
                        },
                        anchor,
                    ),
                    None => return true,
                };
                return self.complete(node, anchor);
            }
            Event::Alias(id) => {
                let Some((node, size)) = self.anchors.get(&id) else {
                    self.errors.push((at, "alias to an unknown anchor".into()));
                    return false;
                };
                // The alias's own position is more useful than the anchor's for its top node.
                let mut node = node.clone();
                node.loc = at;
                self.nodes += size.saturating_sub(1);
                return self.complete(node, 0);
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        true
    }

    fn open(&mut self, at: Location) -> bool {
        if self.stack.len() >= MAX_DEPTH {
            self.errors.push((
                at,
                format!("nesting deeper than {MAX_DEPTH} levels is not supported"),
            ));
            return false;
        }
        true
    }

    /// Core-schema tags decide how a scalar resolves; other tags are rejected. Returns the
    /// plainness the tag implies, if any.
    fn scalar_tag(&mut self, tag: Option<&Tag>, at: Location) -> Option<bool> {
        let tag = tag?;
        if tag.is_yaml_core_schema() {
            match tag.suffix.as_str() {
                "str" => return Some(false),
                "int" | "float" | "bool" | "null" => return Some(true),
                _ => {}
            }
        }
        self.errors.push((
            at,
            format!("unsupported YAML tag `{}{}`", tag.handle, tag.suffix),
        ));
        None
    }

    fn collection_tag(&mut self, tag: Option<&Tag>, expected: &str, at: Location) {
        if let Some(tag) = tag
            && !(tag.is_yaml_core_schema() && tag.suffix == expected)
        {
            self.errors.push((
                at,
                format!("unsupported YAML tag `{}{}`", tag.handle, tag.suffix),
            ));
        }
    }

    /// Attaches a finished node to its parent (or makes it the document root).
    fn complete(&mut self, node: Node, anchor: usize) -> bool {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            self.errors.push((
                node.loc,
                format!("document has more than {MAX_NODES} nodes (counting expanded aliases)"),
            ));
            return false;
        }
        if anchor != 0 {
            let size = node.count();
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries, key, seen, ..
            }) => match key.take() {
                None => {
                    *key = Some(match &node.value {
                        Value::Scalar(s) => match seen.get(&s.text) {
                            Some(first) => {
                                self.errors.push((
                                    node.loc,
                                    format!(
                                        "duplicate key `{}` (first defined at line {}, column {})",
                                        s.text, first.line, first.column
                                    ),
                                ));
                                Key::Skip
                            }
                            None => {
                                seen.insert(s.text.clone(), node.loc);
                                Key::Valid(node)
                            }
                        },
                        _ => {
                            self.errors.push((
                                node.loc,
                                "mapping keys must be strings, not lists or mappings".into(),
                            ));
                            Key::Skip
                        }
                    });
                }
                Some(Key::Valid(k)) => entries.push((k, node)),
                Some(Key::Skip) => {}
            },
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(src: &str) -> Node {
        let p = parse(src);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        p.root.expect("a document")
    }

    fn map(node: &Node) -> &[(Node, Node)] {
        match &node.value {
            Value::Map(e) => e,
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn positions_are_one_based() {
        let r = root("a: 1\nb:\n  - x\n  - 'y'\n");
        let e = map(&r);
        assert_eq!(e[0].0.loc, Location::new(1, 1));
        assert_eq!(e[0].1.loc, Location::new(1, 4));
        let Value::Seq(items) = &e[1].1.value else {
            panic!()
        };
        assert_eq!(items[1].loc, Location::new(4, 5));
        assert!(!items[1].as_scalar().unwrap().plain);
    }

    #[test]
    fn empty_input_has_no_root() {
        assert!(parse("").root.is_none());
        assert!(parse("# only a comment\n").root.is_none());
        assert!(root("---\n").is_null());
    }

    #[test]
    fn every_duplicate_key_is_reported() {
        let p = parse("a: 1\nb: 2\na: 3\nb: 4\n");
        let msgs: Vec<_> = p.errors.iter().map(|(l, m)| (l.line, m.clone())).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].0, 3);
        assert!(
            msgs[0]
                .1
                .contains("duplicate key `a` (first defined at line 1, column 1)")
        );
        assert_eq!(msgs[1].0, 4);
        // The first value wins.
        let r = p.root.unwrap();
        assert_eq!(map(&r).len(), 2);
    }

    #[test]
    fn aliases_expand_and_are_bounded() {
        let r = root("a: &x [1, 2]\nb: *x\n");
        let e = map(&r);
        assert!(matches!(&e[1].1.value, Value::Seq(v) if v.len() == 2));
        assert_eq!(e[1].1.loc, Location::new(2, 4));

        let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            laughs.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let p = parse(&laughs);
        assert!(p.errors.iter().any(|(_, m)| m.contains("more than")));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        // saphyr-parser has its own recursion limit...
        let p = parse(&"[".repeat(100_000));
        assert!(!p.errors.is_empty());
        // ...ours is lower and applies to block structure too.
        let p = parse(&format!("{}x{}", "[".repeat(100), "]".repeat(100)));
        assert!(p.errors.iter().any(|(_, m)| m.contains("nesting")));
        let mut block = String::new();
        for i in 0..100 {
            block.push_str(&format!("{}k:\n", " ".repeat(i)));
        }
        let p = parse(&block);
        assert!(p.errors.iter().any(|(_, m)| m.contains("nesting")));
    }

    #[test]
    fn syntax_errors_have_positions() {
        let p = parse("a: [1, 2\nb: 3\n");
        assert_eq!(p.errors.len(), 1);
        assert!(p.errors[0].1.starts_with("invalid YAML"));
    }

    #[test]
    fn second_document_is_an_error() {
        let p = parse("a: 1\n---\nb: 2\n");
        assert!(p.errors[0].1.contains("one YAML document"));
        assert_eq!(p.errors[0].0.line, 2);
    }

    #[test]
    fn tags() {
        let r = root("a: !!str 12\nb: !!int '12'\n");
        let e = map(&r);
        assert!(!e[0].1.as_scalar().unwrap().plain);
        assert!(e[1].1.as_scalar().unwrap().plain);
        let p = parse("a: !custom x\n");
        assert!(p.errors[0].1.contains("unsupported YAML tag `!custom`"));
    }

    #[test]
    fn non_scalar_keys_are_errors() {
        let p = parse("? [a]\n: 1\nb: 2\n");
        assert!(p.errors[0].1.contains("mapping keys must be strings"));
        assert_eq!(map(p.root.as_ref().unwrap()).len(), 1);
    }
}
