//! AgentShield's rule file, read as it is: top-level `defaults: {decision}`, `blocked_tools`
//! and `rules` (whose shape, `match` with `tool_name*` and `argument_patterns`, is ours too).
//! Decisions may be upper-case (`BLOCK`), as AgentShield writes them; every keyword reads in
//! any case.
//!
//! Each key is the same setting as `default_decision`, `blocked_tools` or `rules` of the MCP
//! section; writing it in both places is an error naming both.

use super::{Section, add_rules, name_globs};
use crate::config::diagnostic::Report;
use crate::config::reader::Fields;
use crate::config::schema::McpPolicy;

/// The top-level keys this file shape adds.
pub(crate) const KEYS: [&str; 3] = ["defaults", "blocked_tools", "rules"];

/// Applies the AgentShield keys of the top-level mapping `top` to `policy`, which was read
/// from `section`.
pub(crate) fn apply(
    r: &mut Report,
    top: &Fields<'_>,
    section: &Section<'_>,
    policy: &mut McpPolicy,
) {
    if let Some(node) = top.get("defaults")
        && let Some(f) = Fields::open(r, node, "defaults", &["decision"])
    {
        if f.has("decision") {
            section.same_setting(
                r,
                ("defaults.decision", f.key_loc("decision")),
                &["default_decision"],
            );
        }
        policy.default_decision = f.keyword(r, "decision", policy.default_decision);
    }
    if top.has("blocked_tools") {
        section.same_setting(
            r,
            ("blocked_tools", top.key_loc("blocked_tools")),
            &["blocked_tools"],
        );
        policy
            .blocked_tools
            .extend(name_globs(r, top, "blocked_tools"));
    }
    if top.has("rules") {
        section.same_setting(r, ("rules", top.key_loc("rules")), &["rules"]);
        add_rules(r, top, "rules", policy);
    }
}
