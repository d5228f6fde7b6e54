//! `rules[]`: argument rules, their tool matchers and argument patterns.

use regex::Regex;

use super::{glob_error, name_glob, regex_error};
use crate::config::diagnostic::Report;
use crate::config::keywords::Decision;
use crate::config::patterns::{
    ArgPattern, ArgSelector, NameGlob, NameRegex, PathGlob, ToolMatcher,
};
use crate::config::reader::{self, Fields};
use crate::config::schema::{ArgumentMatch, Rule};
use crate::config::yaml::Node;

const TOOL_NAME_KEYS: [&str; 3] = ["tool_name", "tool_name_regex", "tool_name_any"];

pub(super) fn rule(r: &mut Report, node: &Node, path: &str) -> Option<Rule> {
    let f = Fields::open(r, node, path, &["id", "match", "decision", "reason"])?;
    let id = f
        .required(r, "id")
        .and_then(|n| reader::nonempty_string(r, n, &f.path_of("id")));
    let matcher = f
        .required(r, "match")
        .and_then(|n| rule_match(r, n, &f.path_of("match")));
    let decision = f
        .required(r, "decision")
        .and_then(|n| reader::keyword(r, n, &f.path_of("decision"), Decision::ALL));
    let reason = f.string(r, "reason");
    let (server, package, tool, arguments) = matcher?;
    Some(Rule {
        id: id?,
        server,
        package,
        tool,
        arguments,
        decision: decision?,
        reason,
        span: node.loc,
    })
}

fn rule_match(r: &mut Report, node: &Node, path: &str) -> Option<RuleMatch> {
    let mut keys = vec!["server", "package", "argument_patterns"];
    keys.extend(TOOL_NAME_KEYS);
    let f = Fields::open(r, node, path, &keys)?;
    let server = match f.get("server") {
        Some(n) => name_glob(r, n, &f.path_of("server")),
        None => Some(NameGlob::any()),
    };
    let package = match f.get("package") {
        Some(n) => Some(name_glob(r, n, &f.path_of("package"))?),
        None => None,
    };
    let given: Vec<&str> = TOOL_NAME_KEYS
        .iter()
        .copied()
        .filter(|k| f.has(k))
        .collect();
    let tool = match given.as_slice() {
        [] => {
            r.error(
                f.loc(),
                format!("`{path}` needs one of `tool_name`, `tool_name_regex` or `tool_name_any`"),
            );
            None
        }
        [key] => tool_matcher(r, &f, key),
        [_, second, ..] => {
            r.error(
                f.key_loc(second),
                format!(
                    "`{path}` takes only one of `tool_name`, `tool_name_regex` and `tool_name_any`; found {}",
                    given
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            );
            None
        }
    };
    let arguments = argument_patterns(r, &f);
    Some((server?, package, tool?, arguments))
}

/// `match:` as read: server, package, tool and argument patterns.
type RuleMatch = (NameGlob, Option<NameGlob>, ToolMatcher, Vec<ArgumentMatch>);

fn tool_matcher(r: &mut Report, f: &Fields<'_>, key: &str) -> Option<ToolMatcher> {
    let path = f.path_of(key);
    let Some(node) = f.get(key) else {
        r.error(f.key_loc(key), format!("`{path}` must not be empty"));
        return None;
    };
    match key {
        "tool_name" => name_glob(r, node, &path).map(ToolMatcher::Glob),
        "tool_name_regex" => {
            let text = reader::nonempty_string(r, node, &path)?;
            NameRegex::new(&text)
                .map_err(|e| regex_error(r, node.loc, &path, &e))
                .ok()
                .map(ToolMatcher::Regex)
        }
        _ => {
            let items = reader::list(r, node, &path)?;
            if items.is_empty() {
                r.error(
                    node.loc,
                    format!("`{path}` must list at least one tool name"),
                );
                return None;
            }
            let globs: Vec<NameGlob> = items
                .iter()
                .enumerate()
                .filter_map(|(i, n)| name_glob(r, n, &format!("{path}[{i}]")))
                .collect();
            (globs.len() == items.len()).then_some(ToolMatcher::Any(globs))
        }
    }
}

fn argument_patterns(r: &mut Report, f: &Fields<'_>) -> Vec<ArgumentMatch> {
    let Some(node) = f.get("argument_patterns") else {
        return Vec::new();
    };
    let path = f.path_of("argument_patterns");
    let Some(entries) = reader::map(r, node, &path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in entries {
        let name = key.as_scalar().map(|s| s.text.as_str()).unwrap_or_default();
        let entry_path = format!("{path}.{name}");
        let selector = arg_selector(name);
        if selector.is_none() {
            r.error(
                key.loc,
                format!(
                    "`{path}`: invalid argument name `{name}` (use a name, a dotted path like `a.b`, or `*`)"
                ),
            );
        }
        let pattern = arg_pattern(r, value, &entry_path);
        if let (Some(selector), Some(pattern)) = (selector, pattern) {
            out.push(ArgumentMatch {
                selector,
                pattern,
                span: key.loc,
            });
        }
    }
    out
}

fn arg_selector(name: &str) -> Option<ArgSelector> {
    if name == "*" {
        return Some(ArgSelector::AnyString);
    }
    let parts: Vec<String> = name.split('.').map(str::to_string).collect();
    parts
        .iter()
        .all(|p| !p.is_empty() && p != "*")
        .then_some(ArgSelector::Path(parts))
}

fn arg_pattern(r: &mut Report, node: &Node, path: &str) -> Option<ArgPattern> {
    if node.as_scalar().is_some() {
        let text = reader::nonempty_string(r, node, path)?;
        return PathGlob::new(&text)
            .map_err(|e| glob_error(r, node.loc, path, &text, &e))
            .ok()
            .map(ArgPattern::Glob);
    }
    const KINDS: [&str; 3] = ["glob", "regex", "contains"];
    let f = Fields::open(r, node, path, &KINDS)?;
    let given: Vec<&str> = KINDS.iter().copied().filter(|k| f.has(k)).collect();
    let [kind] = given.as_slice() else {
        r.error(
            f.loc(),
            format!(
                "`{path}` takes exactly one of `glob`, `regex` or `contains`; found {}",
                given.len()
            ),
        );
        return None;
    };
    let kind_path = f.path_of(kind);
    let value = f.get(kind);
    let Some(text) = value.and_then(|n| reader::nonempty_string(r, n, &kind_path)) else {
        if value.is_none() {
            r.error(f.key_loc(kind), format!("`{kind_path}` must not be empty"));
        }
        return None;
    };
    let at = value.map_or(f.loc(), |n| n.loc);
    match *kind {
        "glob" => PathGlob::new(&text)
            .map_err(|e| glob_error(r, at, &kind_path, &text, &e))
            .ok()
            .map(ArgPattern::Glob),
        "regex" => Regex::new(&text)
            .map_err(|e| regex_error(r, at, &kind_path, &e))
            .ok()
            .map(ArgPattern::Regex),
        _ => Some(ArgPattern::Contains(text)),
    }
}
