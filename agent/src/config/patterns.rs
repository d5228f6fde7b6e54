//! Compiled matchers: built once at load time so the engine never recompiles a pattern.

use std::fmt;

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::Regex;

fn build_glob(source: &str, literal_separator: bool) -> Result<GlobMatcher, globset::Error> {
    // Backslash escapes are set explicitly (globset's default depends on the platform) so that
    // `\[` means a literal bracket in every policy, e.g. in an IPv6 URL.
    let glob: Glob = GlobBuilder::new(source)
        .literal_separator(literal_separator)
        .backslash_escape(true)
        .build()?;
    Ok(glob.compile_matcher())
}

/// A glob over names (servers, tools, environment variables): `*` matches any run of
/// characters, `?` one character, `[abc]` a class, `{a,b}` alternatives. Case-sensitive.
#[derive(Clone, Debug)]
pub struct NameGlob {
    source: String,
    matcher: GlobMatcher,
}

impl NameGlob {
    pub fn new(source: &str) -> Result<Self, globset::Error> {
        Ok(Self {
            source: source.to_string(),
            matcher: build_glob(source, false)?,
        })
    }

    /// The glob `*`, which matches every name.
    pub fn any() -> Self {
        Self::new("*").unwrap_or_else(|_| unreachable!("`*` is a valid glob"))
    }

    pub fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether this is the match-everything glob `*`.
    pub fn is_any(&self) -> bool {
        self.source == "*"
    }
}

/// A glob over paths: `*` and `?` never cross a `/`, `**` matches any number of whole
/// components (`**/.ssh/**` matches `/home/u/.ssh/id_rsa` but not `/home/u/ssh-project/x`).
/// Matched against the whole string.
#[derive(Clone, Debug)]
pub struct PathGlob {
    source: String,
    matcher: GlobMatcher,
}

impl PathGlob {
    pub fn new(source: &str) -> Result<Self, globset::Error> {
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
        match self {
            ArgPattern::Glob(g) => g.matches(value),
            ArgPattern::Regex(r) => r.is_match(value),
            ArgPattern::Contains(s) => value.contains(s.as_str()),
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
        // globset has no empty alternative: `x{,/**}` does not match `x`, so policies spell
        // both forms out.
        assert!(!PathGlob::new("/etc{,/**}").unwrap().matches("/etc"));
    }

    #[test]
    fn name_glob() {
        let g = NameGlob::new("git-*").unwrap();
        assert!(g.matches("git-local") && !g.matches("gitlab"));
        let g = NameGlob::new("NODE_*").unwrap();
        assert!(g.matches("NODE_OPTIONS") && !g.matches("node_options"));
        assert!(NameGlob::any().matches("any/thing"));
        assert!(NameGlob::new("[a").is_err());
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
