//! Compiled matchers: built once at load time so the engine never recompiles a pattern.

use std::fmt;

use super::diagnostic::Location;
use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};
use regex::Regex;

/// Upper bound on the patterns one glob's `{..}` alternatives may expand to.
pub const MAX_GLOB_EXPANSIONS: usize = 256;

/// Why a glob does not compile.
#[derive(Debug, thiserror::Error)]
pub enum GlobError {
    #[error("{}", .0.kind())]
    Syntax(globset::Error),
    #[error("its {{..}} alternatives expand to more than {MAX_GLOB_EXPANSIONS} patterns")]
    TooManyAlternatives,
}

/// Compiles a glob. `{a,b}` alternatives are expanded here rather than by globset, which
/// silently drops empty alternatives (`x{,/**}` would not match `x`, `http{,s}://` not `http://`).
fn build_glob(source: &str, literal_separator: bool) -> Result<GlobSet, GlobError> {
    let mut set = GlobSetBuilder::new();
    for pattern in expand_braces(source)? {
        // Backslash escapes are set explicitly (globset's default depends on the platform) so
        // that `\[` means a literal bracket in every policy, e.g. in an IPv6 URL.
        let glob = GlobBuilder::new(&pattern)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map_err(GlobError::Syntax)?;
        set.add(glob);
    }
    set.build().map_err(GlobError::Syntax)
}

/// `a{b,{c,}}d` -> `abd`, `acd`, `ad`. Escaped braces and braces inside `[..]` classes are
/// literal; an unbalanced `{` is left for globset to report.
fn expand_braces(source: &str) -> Result<Vec<String>, GlobError> {
    let Some((open, close)) = first_group(source) else {
        return Ok(vec![source.to_owned()]);
    };
    let (prefix, body, suffix) = (
        &source[..open],
        &source[open + 1..close],
        &source[close + 1..],
    );
    let mut out = Vec::new();
    for alternative in split_alternatives(body) {
        for expanded in expand_braces(&format!("{prefix}{alternative}{suffix}"))? {
            if out.len() == MAX_GLOB_EXPANSIONS {
                return Err(GlobError::TooManyAlternatives);
            }
            out.push(expanded);
        }
    }
    Ok(out)
}

/// Byte offsets of the first top-level `{` and its matching `}`.
fn first_group(s: &str) -> Option<(usize, usize)> {
    let bytes = s.as_bytes();
    let (mut i, mut depth, mut open) = (0, 0usize, None);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => i = class_end(bytes, i),
            b'{' => {
                if depth == 0 {
                    open = Some(i);
                }
                depth += 1;
            }
            b'}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    return open.map(|o| (o, i));
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the `]` closing the class that opens at `start` (or `start` if it never closes).
fn class_end(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    if matches!(bytes.get(i), Some(b'!' | b'^')) {
        i += 1;
    }
    // A `]` right after the opening bracket is a member of the class.
    if bytes.get(i) == Some(&b']') {
        i += 1;
    }
    while i < bytes.len() {
        if bytes[i] == b']' {
            return i;
        }
        i += 1;
    }
    start
}

/// Splits a group body at its top-level commas.
fn split_alternatives(body: &str) -> Vec<&str> {
    let bytes = body.as_bytes();
    let (mut parts, mut start, mut depth, mut i) = (Vec::new(), 0, 0usize, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => i = class_end(bytes, i),
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(&body[start..]);
    parts
}

/// A glob over names (servers, tools, environment variables): `*` matches any run of
/// characters, `?` one character, `[abc]` a class, `{a,b}` alternatives. Case-sensitive.
#[derive(Clone, Debug)]
pub struct NameGlob {
    source: String,
    matcher: NameMatcher,
    /// Where the policy wrote it, when it came from a file.
    at: Option<Location>,
}

/// `*` and plain names are most of a policy's globs; they are decided without globset, which
/// would build a match candidate for every name it is asked about.
#[derive(Clone, Debug)]
enum NameMatcher {
    Any,
    Literal,
    Glob(GlobSet),
}

impl NameGlob {
    pub fn new(source: &str) -> Result<Self, GlobError> {
        let matcher = if source == "*" {
            NameMatcher::Any
        } else if !source.contains(['*', '?', '[', ']', '{', '}', '\\']) {
            NameMatcher::Literal
        } else {
            NameMatcher::Glob(build_glob(source, false)?)
        };
        Ok(Self {
            source: source.to_string(),
            matcher,
            at: None,
        })
    }

    /// The same glob, written at `at` in a policy file.
    pub fn written_at(self, at: Location) -> Self {
        Self {
            at: Some(at),
            ..self
        }
    }

    /// Where the policy wrote it.
    pub fn location(&self) -> Option<Location> {
        self.at
    }

    /// Whether the glob matches only the one name it spells.
    pub fn is_literal(&self) -> bool {
        matches!(self.matcher, NameMatcher::Literal)
    }

    /// The glob `*`, which matches every name.
    pub fn any() -> Self {
        Self::new("*").unwrap_or_else(|_| unreachable!("`*` is a valid glob"))
    }

    pub fn matches(&self, name: &str) -> bool {
        match &self.matcher {
            NameMatcher::Any => true,
            NameMatcher::Literal => self.source == name,
            NameMatcher::Glob(set) => set.is_match(name),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether this is the match-everything glob `*`.
    pub fn is_any(&self) -> bool {
        matches!(self.matcher, NameMatcher::Any)
    }
}

/// A glob over paths: `*` and `?` never cross a `/`, `**` matches any number of whole
/// components (`**/.ssh/**` matches `/home/u/.ssh/id_rsa` but not `/home/u/ssh-project/x`).
/// Matched against the whole string.
#[derive(Clone, Debug)]
pub struct PathGlob {
    source: String,
    matcher: GlobSet,
}

impl PathGlob {
    pub fn new(source: &str) -> Result<Self, GlobError> {
        Ok(Self {
            source: source.to_string(),
            matcher: build_glob(source, true)?,
        })
    }

    pub fn matches(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// A value prepared once for every pattern it is tested against (globset's match candidate is
/// built here, not again for each glob).
pub struct Subject<'a> {
    text: &'a str,
    candidate: Candidate<'a>,
}

impl<'a> Subject<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            candidate: Candidate::new(text),
        }
    }

    pub fn as_str(&self) -> &'a str {
        self.text
    }
}

/// A regular expression that must match a whole name (`read_.*` matches `read_file`, not
/// `unread_file` nor `read_file2`... unless the pattern says so).
#[derive(Clone, Debug)]
pub struct NameRegex {
    source: String,
    regex: Regex,
}

impl NameRegex {
    pub fn new(source: &str) -> Result<Self, regex::Error> {
        Ok(Self {
            source: source.to_string(),
            regex: Regex::new(&format!("^(?:{source})$"))?,
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        self.regex.is_match(name)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }
}

/// How a rule selects tool names.
#[derive(Clone, Debug)]
pub enum ToolMatcher {
    Glob(NameGlob),
    Regex(NameRegex),
    /// Any of these globs.
    Any(Vec<NameGlob>),
}

impl ToolMatcher {
    pub fn matches(&self, tool: &str) -> bool {
        match self {
            ToolMatcher::Glob(g) => g.matches(tool),
            ToolMatcher::Regex(r) => r.matches(tool),
            ToolMatcher::Any(gs) => gs.iter().any(|g| g.matches(tool)),
        }
    }
}

/// Which argument values a pattern is applied to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgSelector {
    /// `*`: every string value anywhere in the arguments (nested objects and arrays included).
    AnyString,
    /// `a.b.c`: the value at this path of object keys (`path` is a path of one key).
    Path(Vec<String>),
}

impl fmt::Display for ArgSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgSelector::AnyString => f.write_str("*"),
            ArgSelector::Path(keys) => f.write_str(&keys.join(".")),
        }
    }
}

/// A test applied to one string argument value.
#[derive(Clone, Debug)]
pub enum ArgPattern {
    /// Whole-value path glob.
    Glob(PathGlob),
    /// Regex search anywhere in the value (anchor with `^`/`$` to match all of it).
    Regex(Regex),
    /// Plain substring.
    Contains(String),
}

impl ArgPattern {
    pub fn matches(&self, value: &str) -> bool {
        self.matches_subject(&Subject::new(value))
    }

    pub fn matches_subject(&self, value: &Subject) -> bool {
        match self {
            ArgPattern::Glob(g) => g.matcher.is_match_candidate(&value.candidate),
            ArgPattern::Regex(r) => r.is_match(value.text),
            ArgPattern::Contains(s) => value.text.contains(s.as_str()),
        }
    }
}

/// Turns the regex crate's multi-line syntax errors into the one line a diagnostic can hold.
pub(crate) fn regex_error_message(err: &regex::Error) -> String {
    match err {
        regex::Error::Syntax(text) => text
            .lines()
            .find_map(|l| l.strip_prefix("error: "))
            .map(str::to_string)
            .unwrap_or_else(|| text.split_whitespace().collect::<Vec<_>>().join(" ")),
        other => other
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_glob_double_star() {
        let g = PathGlob::new("**/.ssh/**").unwrap();
        assert!(g.matches("/home/u/.ssh/id_rsa"));
        assert!(g.matches("/root/.ssh/x"));
        assert!(g.matches("~/.ssh/config"));
        assert!(!g.matches("/home/u/ssh-project/x"));
        assert!(!g.matches("/home/u/.sshx/y"));
    }

    #[test]
    fn path_glob_single_star_stays_in_component() {
        let g = PathGlob::new("/etc/*").unwrap();
        assert!(g.matches("/etc/passwd"));
        assert!(!g.matches("/etc/a/b"));
        let all = PathGlob::new("/etc/**").unwrap();
        assert!(all.matches("/etc/a/b"));
    }

    #[test]
    fn path_glob_escapes_and_alternatives() {
        let g = PathGlob::new(r"{http://\[fd00:ec2::254\],http://\[fd00:ec2::254\]/**}").unwrap();
        assert!(g.matches("http://[fd00:ec2::254]"));
        assert!(g.matches("http://[fd00:ec2::254]/latest/meta-data"));
        assert!(!g.matches("http://f"));
        let g = PathGlob::new("http*://169.254.169.254/**").unwrap();
        assert!(g.matches("http://169.254.169.254/latest/meta-data/iam/"));
        assert!(g.matches("https://169.254.169.254/x"));
        assert!(!g.matches("http://169.254.169.2540/"));
        // Empty alternatives work (we expand braces ourselves; globset alone drops them).
        assert!(PathGlob::new("/etc{,/**}").unwrap().matches("/etc"));
    }

    #[test]
    fn name_glob() {
        let g = NameGlob::new("git-*").unwrap();
        assert!(g.matches("git-local") && !g.matches("gitlab"));
        let g = NameGlob::new("NODE_*").unwrap();
        assert!(g.matches("NODE_OPTIONS") && !g.matches("node_options"));
        assert!(NameGlob::any().matches("any/thing"));
        assert!(NameGlob::new("[a").is_err());
        // Plain names compare whole and case-sensitively; escapes still go through globset.
        let g = NameGlob::new("read_file").unwrap();
        assert!(g.matches("read_file") && !g.matches("read_file2") && !g.matches("Read_file"));
        let g = NameGlob::new(r"a\*").unwrap();
        assert!(g.matches("a*") && !g.matches("ab"));
        assert!(NameGlob::new("x{y,z}").unwrap().matches("xz"));
    }

    #[test]
    fn name_regex_is_full_match() {
        let r = NameRegex::new("read_.*|list_dir").unwrap();
        assert!(r.matches("read_file"));
        assert!(r.matches("list_dir"));
        assert!(!r.matches("unread_file"));
        assert!(!r.matches("list_dirs"));
        assert!(!r.matches("xlist_dir"));
    }

    #[test]
    fn arg_patterns() {
        let re = ArgPattern::Regex(Regex::new("(?m)^kind:\\s*ClusterRoleBinding").unwrap());
        assert!(re.matches("apiVersion: v1\nkind: ClusterRoleBinding\n"));
        assert!(!re.matches("kind: Pod"));
        assert!(ArgPattern::Contains("rm -rf".into()).matches("sudo rm -rf /"));
    }

    #[test]
    fn regex_errors_are_one_line() {
        // Built at run time so clippy's literal check does not reject the invalid pattern.
        let src = String::from("(abc");
        let err = Regex::new(&src).unwrap_err();
        assert_eq!(regex_error_message(&err), "unclosed group");
    }
}

#[cfg(test)]
mod brace_tests {
    use super::*;

    #[test]
    fn empty_and_nested_alternatives_expand() {
        assert_eq!(expand_braces("a{b,{c,}}d").unwrap(), ["abd", "acd", "ad"]);
        assert_eq!(expand_braces(r"x\{a,b\}").unwrap(), [r"x\{a,b\}"]);
        assert_eq!(expand_braces("[{,}]x").unwrap(), ["[{,}]x"]);
        let g =
            PathGlob::new("http{,s}://{169.254.169.254,metadata.google.internal}{,/**}").unwrap();
        for hit in [
            "http://169.254.169.254",
            "https://169.254.169.254/latest/meta-data/",
            "http://metadata.google.internal/computeMetadata/v1/",
        ] {
            assert!(g.matches(hit), "{hit}");
        }
        assert!(!g.matches("http://169.254.169.2544/"));
        let etc = PathGlob::new("/etc{,/**}").unwrap();
        assert!(etc.matches("/etc") && etc.matches("/etc/a/b") && !etc.matches("/etcx"));
    }

    #[test]
    fn expansion_is_bounded_and_errors_are_reported() {
        let many = "{a,b,c,d}".repeat(5);
        assert!(matches!(
            PathGlob::new(&many),
            Err(GlobError::TooManyAlternatives)
        ));
        assert!(matches!(PathGlob::new("a{b"), Err(GlobError::Syntax(_))));
    }
}
