//! `rules[]`: argument rules, their tool matchers and argument patterns. A rule whose match
//! has `host` is about the agents' own tools, and is read into a [`HostRule`].

use regex::Regex;

use super::{glob_error, name_glob, regex_error};
use crate::config::diagnostic::Report;
use crate::config::keywords::Decision;
use crate::config::patterns::{
    ArgPattern, ArgSelector, NameGlob, NameRegex, PathGlob, ToolMatcher,
};
use crate::config::reader::{self, Fields};
use crate::config::schema::{ArgumentMatch, HostRule, HostSelector, Rule};
use crate::config::yaml::Node;
use crate::native::{Category, catalog};

const TOOL_NAME_KEYS: [&str; 3] = ["tool_name", "tool_name_regex", "tool_name_any"];

/// A rule of either kind.
pub(super) enum AnyRule {
    Mcp(Box<Rule>),
    Host(HostRule),
}

pub(super) fn rule(r: &mut Report, node: &Node, path: &str) -> Option<AnyRule> {
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
    match matcher? {
        Matcher::Mcp(matched) => {
            let (server, package, tool, arguments) = *matched;
            Some(AnyRule::Mcp(Box::new(Rule {
                id: id?,
                server,
                package,
                tool,
                arguments,
                decision: decision?,
                reason,
                span: node.loc,
            })))
        }
        Matcher::Host(tools, arguments) => Some(AnyRule::Host(HostRule {
            id: id?,
            tools,
            arguments,
            decision: decision?,
            reason,
            span: node.loc,
        })),
    }
}

enum Matcher {
    Mcp(Box<RuleMatch>),
    Host(Vec<HostSelector>, Vec<ArgumentMatch>),
}

const MATCH_KEYS: [&str; 7] = [
    "server",
    "package",
    "argument_patterns",
    "host",
    "tool_name",
    "tool_name_regex",
    "tool_name_any",
];

fn rule_match(r: &mut Report, node: &Node, path: &str) -> Option<Matcher> {
    let f = Fields::open(r, node, path, &MATCH_KEYS)?;
    if f.has("host") {
        return host_match(r, &f, path);
    }
    mcp_match(r, &f, path).map(|m| Matcher::Mcp(Box::new(m)))
}

/// `match: {host: …, argument_patterns: …}`.
fn host_match(r: &mut Report, f: &Fields<'_>, path: &str) -> Option<Matcher> {
    let mcp_keys: Vec<&str> = ["server", "package"]
        .into_iter()
        .chain(TOOL_NAME_KEYS)
        .filter(|k| f.has(k))
        .collect();
    if let Some(first) = mcp_keys.first() {
        r.error(
            f.key_loc(first),
            format!(
                "`{path}`: `host` names the agents' own tools, `{first}` names MCP tools: a rule matches one or the other"
            ),
        );
        return None;
    }
    let host_path = f.path_of("host");
    let node = f.get("host")?;
    let items: Vec<&Node> = if node.as_scalar().is_some() {
        vec![node]
    } else {
        reader::list(r, node, &host_path)?.iter().collect()
    };
    if items.is_empty() {
        r.error(
            node.loc,
            format!("`{host_path}` must name at least one category or tool"),
        );
        return None;
    }
    let mut tools = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = if node.as_scalar().is_some() {
            host_path.clone()
        } else {
            format!("{host_path}[{i}]")
        };
        tools.push(host_selector(r, item, &item_path)?);
    }
    let arguments = argument_patterns(r, f);
    host_field_warnings(r, &tools, &arguments, &f.path_of("argument_patterns"));
    Some(Matcher::Host(tools, arguments))
}

fn host_selector(r: &mut Report, node: &Node, path: &str) -> Option<HostSelector> {
    let text = reader::nonempty_string(r, node, path)?;
    if text == "*" {
        return Some(HostSelector::Any);
    }
    if let Some(category) = Category::parse(&text) {
        return Some(HostSelector::Category(category));
    }
    let glob = name_glob(r, node, path)?;
    if !catalog::TOOLS.iter().any(|t| glob.matches(t.name)) {
        let categories: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
        let hint = crate::config::reader::suggest(&text, catalog::TOOLS.iter().map(|t| t.name))
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        r.warn(
            node.loc,
            format!(
                "`{path}`: `{text}` is neither a category ({}) nor a tool of Claude Code, Codex CLI or Gemini CLI that agentsh knows; it applies only to a host tool of exactly that name{hint}",
                categories.join(", ")
            ),
        );
    }
    Some(HostSelector::Tool(glob))
}

/// An argument a rule names that the calls it selects may not have: the rule would apply to
/// fewer calls than it seems to.
fn host_field_warnings(
    r: &mut Report,
    tools: &[HostSelector],
    arguments: &[ArgumentMatch],
    path: &str,
) {
    let categories: Vec<Category> = tools
        .iter()
        .filter_map(|t| match t {
            HostSelector::Category(c) => Some(*c),
            HostSelector::Any | HostSelector::Tool(_) => None,
        })
        .collect();
    // Tools named exactly are matched on their own arguments too, which agentsh does not list.
    if categories.len() != tools.len() {
        return;
    }
    for argument in arguments {
        let ArgSelector::Path(keys) = &argument.selector else {
            continue;
        };
        let Some(first) = keys.first() else { continue };
        let missing: Vec<&str> = categories
            .iter()
            .filter(|c| !c.fields().contains(&first.as_str()))
            .map(|c| c.as_str())
            .collect();
        if let Some(category) = missing.first() {
            let fields = Category::parse(category)
                .map(|c| c.fields().join(", "))
                .unwrap_or_default();
            r.warn(
                argument.span,
                format!(
                    "`{path}.{}`: a `{category}` call has no field `{first}` (its fields: {}); the rule only applies to a tool whose own arguments have one",
                    keys.join("."),
                    if fields.is_empty() { "none" } else { &fields }
                ),
            );
        }
    }
}

fn mcp_match(r: &mut Report, f: &Fields<'_>, path: &str) -> Option<RuleMatch> {
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
        [key] => tool_matcher(r, f, key),
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
    let arguments = argument_patterns(r, f);
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
