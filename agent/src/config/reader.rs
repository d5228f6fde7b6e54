//! Typed reads from the YAML tree that report, rather than stop at, every problem.
//!
//! Every reader takes the report and a dotted key path (for messages) and returns `None` or a
//! default after recording an error, so the caller simply carries on to the next key.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::diagnostic::{Location, Report};
use super::keywords::Keyword;
use super::patterns::{GlobError, NameGlob};
use super::yaml::{Node, Value};

/// The closest candidate to a misspelt word, if one is close enough to be a likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(word, candidates)
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

/// The keys of one YAML mapping with a fixed schema.
pub(crate) struct Fields<'n> {
    path: String,
    loc: Location,
    entries: &'n [(Node, Node)],
}

impl<'n> Fields<'n> {
    /// Opens `node` as a mapping whose keys must be among `known`; a null node reads as an
    /// empty mapping. Reports unknown keys (with a suggestion) and returns None if `node`
    /// is not a mapping at all.
    pub fn open(r: &mut Report, node: &'n Node, path: &str, known: &[&str]) -> Option<Self> {
        let entries: &[(Node, Node)] = match &node.value {
            Value::Map(entries) => entries,
            _ if node.is_null() => &[],
            _ => {
                let what = if path.is_empty() {
                    "the file".to_string()
                } else {
                    format!("`{path}`")
                };
                r.error(
                    node.loc,
                    format!("{what} must be a mapping, found {}", node.describe()),
                );
                return None;
            }
        };
        for (key, _) in entries {
            let name = key.as_scalar().map(|s| s.text.as_str()).unwrap_or_default();
            if !known.contains(&name) {
                let hint = match suggest(name, known.iter().copied()) {
                    Some(s) => format!("; did you mean `{s}`?"),
                    None => format!(" (known keys: {})", known.join(", ")),
                };
                let place = if path.is_empty() {
                    "at the top level".to_string()
                } else {
                    format!("in `{path}`")
                };
                r.error(key.loc, format!("unknown key `{name}` {place}{hint}"));
            }
        }
        Some(Self {
            path: path.to_string(),
            loc: node.loc,
            entries,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn loc(&self) -> Location {
        self.loc
    }

    /// The dotted path of a key of this mapping, for messages.
    pub fn path_of(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`; None if it is absent or null (both mean "use the default").
    pub fn get(&self, key: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_scalar().is_some_and(|s| s.text == key))
            .map(|(_, v)| v)
            .filter(|v| !v.is_null())
    }

    /// Whether `key` is written at all (even as null).
    pub fn has(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, _)| k.as_scalar().is_some_and(|s| s.text == key))
    }

    /// Where `key` is written, falling back to the mapping itself.
    pub fn key_loc(&self, key: &str) -> Location {
        self.entries
            .iter()
            .find(|(k, _)| k.as_scalar().is_some_and(|s| s.text == key))
            .map_or(self.loc, |(k, _)| k.loc)
    }

    /// Which of two spellings of one setting is written, and its value: `preferred` when
    /// both are (after reporting that as an error naming both places).
    pub fn either<'k>(
        &self,
        r: &mut Report,
        preferred: &'k str,
        other: &'k str,
    ) -> Option<(&'k str, &'n Node)> {
        if self.has(preferred) && self.has(other) {
            conflict(
                r,
                (&self.path_of(preferred), self.key_loc(preferred)),
                (&self.path_of(other), self.key_loc(other)),
            );
        }
        match (self.get(preferred), self.get(other)) {
            (Some(n), _) => Some((preferred, n)),
            (None, Some(n)) => Some((other, n)),
            (None, None) => None,
        }
    }

    /// A duration written with its unit (`"30s"`, `"1m30s"`), or whole seconds under
    /// `seconds_key`; both at once is an error naming both places.
    pub fn duration_or_seconds(
        &self,
        r: &mut Report,
        key: &str,
        seconds_key: &str,
        range: RangeInclusive<Duration>,
        default: Duration,
    ) -> Duration {
        let read = match self.either(r, key, seconds_key) {
            Some((k, n)) if k == key => duration(r, n, &self.path_of(k), range),
            Some((k, n)) => {
                let secs = range.start().as_secs().max(1)..=range.end().as_secs();
                uint(r, n, &self.path_of(k), secs).map(Duration::from_secs)
            }
            None => None,
        };
        read.unwrap_or(default)
    }

    /// The value of a required key; reports it missing otherwise.
    pub fn required(&self, r: &mut Report, key: &str) -> Option<&'n Node> {
        let node = self.get(key);
        if node.is_none() {
            let what = if self.path.is_empty() {
                "the top level".to_string()
            } else {
                format!("`{}`", self.path)
            };
            r.error(
                self.key_loc(key),
                format!("missing required key `{key}` in {what}"),
            );
        }
        node
    }

    pub fn bool(&self, r: &mut Report, key: &str, default: bool) -> bool {
        self.get(key)
            .and_then(|n| boolean(r, n, &self.path_of(key)))
            .unwrap_or(default)
    }

    pub fn uint(&self, r: &mut Report, key: &str, range: RangeInclusive<u64>, default: u64) -> u64 {
        self.get(key)
            .and_then(|n| uint(r, n, &self.path_of(key), range))
            .unwrap_or(default)
    }

    pub fn float(
        &self,
        r: &mut Report,
        key: &str,
        range: RangeInclusive<f64>,
        default: f64,
    ) -> f64 {
        self.get(key)
            .and_then(|n| float(r, n, &self.path_of(key), range))
            .unwrap_or(default)
    }

    pub fn keyword<E: Keyword>(&self, r: &mut Report, key: &str, default: E) -> E {
        self.keyword_of(r, key, E::all(), default)
    }

    /// A keyword restricted to some of its enum's values.
    pub fn keyword_of<E: Keyword>(
        &self,
        r: &mut Report,
        key: &str,
        allowed: &[E],
        default: E,
    ) -> E {
        self.get(key)
            .and_then(|n| keyword(r, n, &self.path_of(key), allowed))
            .unwrap_or(default)
    }

    pub fn string(&self, r: &mut Report, key: &str) -> Option<String> {
        self.get(key).and_then(|n| string(r, n, &self.path_of(key)))
    }

    /// A list of strings with the position of each.
    pub fn strings(&self, r: &mut Report, key: &str) -> Vec<(Location, String)> {
        let path = self.path_of(key);
        self.list(r, key)
            .iter()
            .enumerate()
            .filter_map(|(i, n)| string(r, n, &format!("{path}[{i}]")).map(|s| (n.loc, s)))
            .collect()
    }

    /// The items of a list value (empty if absent).
    pub fn list(&self, r: &mut Report, key: &str) -> &'n [Node] {
        self.get(key)
            .and_then(|n| list(r, n, &self.path_of(key)))
            .unwrap_or_default()
    }
}

/// The key node at `path` under `node` (for its location), if every step is a mapping that
/// has it. Reports nothing: a reader that owns those keys reports their problems.
pub(crate) fn written<'n>(node: &'n Node, path: &[&str]) -> Option<&'n Node> {
    let (first, rest) = path.split_first()?;
    let Value::Map(entries) = &node.value else {
        return None;
    };
    let (key, value) = entries
        .iter()
        .find(|(k, _)| k.as_scalar().is_some_and(|s| s.text == *first))?;
    if rest.is_empty() {
        Some(key)
    } else {
        written(value, rest)
    }
}

/// Reports two spellings of one setting written in one file, at the later one, naming the
/// earlier: `a` and `b` are (dotted path, where its key is written).
pub(crate) fn conflict(r: &mut Report, a: (&str, Location), b: (&str, Location)) {
    let (first, second) = if a.1 <= b.1 { (a, b) } else { (b, a) };
    r.error(
        second.1,
        format!(
            "`{}` and `{}` are two spellings of one setting (`{}` is at line {}, column {}); write one",
            second.0, first.0, first.0, first.1.line, first.1.column
        ),
    );
}

/// A Go-style duration: decimal numbers, each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`,
/// `h`), e.g. `"30s"`, `"1m30s"`, `"1.5h"`, `"250ms"`. A bare number is refused: in Go it
/// would mean nanoseconds, which is never what a policy means.
pub(crate) fn duration(
    r: &mut Report,
    node: &Node,
    path: &str,
    range: RangeInclusive<Duration>,
) -> Option<Duration> {
    let parsed = match node.as_scalar() {
        Some(s) if !node.is_null() => parse_duration(&s.text),
        _ => Err("found ".to_string() + &node.describe()),
    };
    let value = match parsed {
        Ok(d) => d,
        Err(why) => {
            r.error(
                node.loc,
                format!(
                    "`{path}` must be a duration with its unit, such as \"30s\", \"5m\" or \"1m30s\": {why}"
                ),
            );
            return None;
        }
    };
    if range.contains(&value) {
        return Some(value);
    }
    r.error(
        node.loc,
        format!(
            "`{path}` must be between {} and {}, found {}",
            humantime::format_duration(*range.start()),
            humantime::format_duration(*range.end()),
            humantime::format_duration(value)
        ),
    );
    None
}

/// Parses Go's `time.ParseDuration` syntax (without a sign: no window is negative).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    const UNITS: &[(&str, f64)] = &[
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("μs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    let text = text.trim();
    if text.is_empty() {
        return Err("found an empty string".into());
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("`{text}` has no unit"));
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        let value: f64 = match number.parse() {
            Ok(v) if !number.is_empty() => v,
            _ => return Err(format!("`{text}` is not a duration")),
        };
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let Some((_, scale)) = UNITS.iter().find(|(u, _)| *u == unit) else {
            return Err(if unit.is_empty() {
                format!("`{text}` has a number without a unit")
            } else {
                format!("unknown unit `{unit}` in `{text}` (units: ns, us, ms, s, m, h)")
            });
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("`{text}` is out of range"))
}

pub(crate) fn boolean(r: &mut Report, node: &Node, path: &str) -> Option<bool> {
    match node.as_scalar() {
        Some(s) if s.plain => match s.text.as_str() {
            "true" | "True" | "TRUE" => return Some(true),
            "false" | "False" | "FALSE" => return Some(false),
            _ => {}
        },
        _ => {}
    }
    r.error(
        node.loc,
        format!("`{path}` must be true or false, found {}", node.describe()),
    );
    None
}

/// YAML 1.2 core-schema integers: decimal, `0x` hex, `0o` octal.
fn parse_int(text: &str) -> Option<i128> {
    let (neg, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = digits.strip_prefix("0x") {
        (16, h)
    } else if let Some(o) = digits.strip_prefix("0o") {
        (8, o)
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    // Digits beyond i128 are out of range for every field anyway: saturate.
    let value = i128::from_str_radix(digits, radix).unwrap_or(i128::MAX);
    Some(if neg { -value } else { value })
}

pub(crate) fn uint(
    r: &mut Report,
    node: &Node,
    path: &str,
    range: RangeInclusive<u64>,
) -> Option<u64> {
    let value = node
        .as_scalar()
        .filter(|s| s.plain)
        .and_then(|s| parse_int(&s.text));
    let Some(value) = value else {
        r.error(
            node.loc,
            format!("`{path}` must be an integer, found {}", node.describe()),
        );
        return None;
    };
    match u64::try_from(value) {
        Ok(v) if range.contains(&v) => Some(v),
        _ => {
            r.error(
                node.loc,
                format!(
                    "`{path}` must be between {} and {}, found {value}",
                    range.start(),
                    range.end()
                ),
            );
            None
        }
    }
}

pub(crate) fn float(
    r: &mut Report,
    node: &Node,
    path: &str,
    range: RangeInclusive<f64>,
) -> Option<f64> {
    // Only plain decimal notation: Rust's parser would also take `inf` and `NaN`.
    let value = node
        .as_scalar()
        .filter(|s| {
            s.plain
                && s.text.bytes().any(|b| b.is_ascii_digit())
                && s.text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'))
        })
        .and_then(|s| s.text.parse::<f64>().ok());
    let Some(value) = value else {
        r.error(
            node.loc,
            format!("`{path}` must be a number, found {}", node.describe()),
        );
        return None;
    };
    if range.contains(&value) {
        Some(value)
    } else {
        r.error(
            node.loc,
            format!(
                "`{path}` must be between {} and {}, found {value}",
                range.start(),
                range.end()
            ),
        );
        None
    }
}

/// Any non-null scalar reads as a string (`tool: 42` means the tool named "42").
pub(crate) fn string(r: &mut Report, node: &Node, path: &str) -> Option<String> {
    match node.as_scalar() {
        Some(s) if !node.is_null() => Some(s.text.clone()),
        _ => {
            r.error(
                node.loc,
                format!("`{path}` must be a string, found {}", node.describe()),
            );
            None
        }
    }
}

/// A non-empty string compiled as a [`NameGlob`]; a glob that does not compile is reported.
pub(crate) fn name_glob(r: &mut Report, node: &Node, path: &str) -> Option<NameGlob> {
    let text = nonempty_string(r, node, path)?;
    NameGlob::new(&text)
        .map(|g| g.written_at(node.loc))
        .map_err(|e| glob_error(r, node.loc, path, &text, &e))
        .ok()
}

pub(crate) fn glob_error(r: &mut Report, at: Location, path: &str, text: &str, e: &GlobError) {
    r.error(at, format!("`{path}`: invalid glob `{text}`: {e}"));
}

/// A non-null string that is not empty either.
pub(crate) fn nonempty_string(r: &mut Report, node: &Node, path: &str) -> Option<String> {
    let s = string(r, node, path)?;
    if s.is_empty() {
        r.error(node.loc, format!("`{path}` must not be empty"));
        return None;
    }
    Some(s)
}

pub(crate) fn keyword<E: Keyword>(
    r: &mut Report,
    node: &Node,
    path: &str,
    allowed: &[E],
) -> Option<E> {
    let names = || allowed.iter().map(|e| e.as_str());
    let text = match node.as_scalar() {
        Some(s) if !node.is_null() => s.text.as_str(),
        _ => {
            r.error(
                node.loc,
                format!(
                    "`{path}` must be one of {}, found {}",
                    names().collect::<Vec<_>>().join(", "),
                    node.describe()
                ),
            );
            return None;
        }
    };
    // Any case: AgentShield's files write `BLOCK`, ours `block`; no keyword differs by case.
    if let Some(e) = allowed
        .iter()
        .find(|e| e.as_str().eq_ignore_ascii_case(text))
    {
        return Some(*e);
    }
    r.error(
        node.loc,
        format!(
            "`{path}`: unknown value `{text}` (expected one of: {}){}",
            names().collect::<Vec<_>>().join(", "),
            did_you_mean(text, names())
        ),
    );
    None
}

pub(crate) fn list<'n>(r: &mut Report, node: &'n Node, path: &str) -> Option<&'n [Node]> {
    match &node.value {
        Value::Seq(items) => Some(items),
        _ if node.is_null() => Some(&[]),
        _ => {
            r.error(
                node.loc,
                format!("`{path}` must be a list, found {}", node.describe()),
            );
            None
        }
    }
}

/// The entries of a mapping with free-form keys (e.g. argument names, server ids).
pub(crate) fn map<'n>(r: &mut Report, node: &'n Node, path: &str) -> Option<&'n [(Node, Node)]> {
    match &node.value {
        Value::Map(entries) => Some(entries),
        _ if node.is_null() => Some(&[]),
        _ => {
            r.error(
                node.loc,
                format!("`{path}` must be a mapping, found {}", node.describe()),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::keywords::Decision;
    use crate::config::yaml::parse;

    fn with<T>(src: &str, f: impl FnOnce(&mut Report, &Fields<'_>) -> T) -> (T, Vec<String>) {
        let root = parse(src).root.expect("document");
        let mut r = Report::new("t");
        let fields = Fields::open(&mut r, &root, "", &["a", "b", "enforce_policy"]).expect("map");
        let out = f(&mut r, &fields);
        let msgs = match r.finish() {
            Ok(w) => w.into_iter().map(|d| d.to_string()).collect(),
            Err(e) => e.diagnostics().iter().map(|d| d.to_string()).collect(),
        };
        (out, msgs)
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            suggest("enforce_polcy", ["fail_closed", "enforce_policy"]),
            Some("enforce_policy")
        );
        assert_eq!(suggest("zzz", ["enforce_policy"]), None);
        assert_eq!(suggest("blokc", ["allow", "block"]), Some("block"));
    }

    #[test]
    fn unknown_keys_suggest() {
        let (_, msgs) = with("enforce_polcy: true\nqqqqqq: 1\n", |_, _| ());
        assert_eq!(
            msgs,
            [
                "t:1:1: error: unknown key `enforce_polcy` at the top level; did you mean `enforce_policy`?",
                "t:2:1: error: unknown key `qqqqqq` at the top level (known keys: a, b, enforce_policy)",
            ]
        );
    }

    #[test]
    fn integers() {
        let (v, msgs) = with("a: 0x10\nb: '5'\n", |r, f| {
            (f.uint(r, "a", 0..=100, 1), f.uint(r, "b", 0..=100, 1))
        });
        assert_eq!(v, (16, 1));
        assert_eq!(
            msgs,
            ["t:2:4: error: `b` must be an integer, found the string \"5\""]
        );
        let (v, msgs) = with(
            "a: -3\nb: 99999999999999999999999999999999999999999999\n",
            |r, f| (f.uint(r, "a", 1..=10, 7), f.uint(r, "b", 1..=10, 7)),
        );
        assert_eq!(v, (7, 7));
        assert_eq!(
            msgs[0],
            "t:1:4: error: `a` must be between 1 and 10, found -3"
        );
        assert!(msgs[1].starts_with("t:2:4: error: `b` must be between 1 and 10"));
    }

    #[test]
    fn floats() {
        let (v, msgs) = with("a: .5\nb: .nan\n", |r, f| {
            (
                f.float(r, "a", 0.0..=1.0, 0.1),
                f.float(r, "b", 0.0..=1.0, 0.1),
            )
        });
        assert_eq!(v, (0.5, 0.1));
        assert_eq!(
            msgs,
            ["t:2:4: error: `b` must be a number, found the string \".nan\""]
        );
    }

    #[test]
    fn keywords_list_accepted_values() {
        let (v, msgs) = with("a: blok\n", |r, f| f.keyword(r, "a", Decision::Allow));
        assert_eq!(v, Decision::Allow);
        assert_eq!(
            msgs,
            [
                "t:1:4: error: `a`: unknown value `blok` (expected one of: allow, audit, block); did you mean `block`?"
            ]
        );
    }

    #[test]
    fn null_means_default() {
        let (v, msgs) = with("a:\nb: ~\n", |r, f| {
            (f.bool(r, "a", true), f.list(r, "b").len())
        });
        assert_eq!(v, (true, 0));
        assert!(msgs.is_empty());
    }

    #[test]
    fn booleans_are_strict() {
        let (_, msgs) = with("a: yes\nb: 'true'\n", |r, f| {
            (f.bool(r, "a", true), f.bool(r, "b", true))
        });
        assert_eq!(msgs.len(), 2);
        assert!(msgs[0].contains("`a` must be true or false, found the string \"yes\""));
    }
}
