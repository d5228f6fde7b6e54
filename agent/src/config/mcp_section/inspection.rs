//! The `mcp.inspection` section of the tool-inspection design, read into the same policy:
//!
//! | `mcp.inspection.` | here |
//! |---|---|
//! | `enabled` | `detection.enabled` and `version_pinning.enabled` |
//! | `server_patterns`, `custom_servers` | launcher patterns added to the built-in ones |
//! | `registry.pin_on_first_use` | `version_pinning.auto_trust_first` |
//! | `registry.alert_on_change` | `version_pinning.on_change` (`alert`, or `allow` when false) |
//! | `registry.persistent`, `registry.path` | pins always persist, in agentshd's state dir |
//! | `detection.builtin`, `.custom_patterns`, `.alert_threshold` | the same keys of `detection` |
//! | `on_detection.webhook_url` | agentshd's config: `""` (none) is the only value a policy takes |
//!
//! A setting written here and in the MCP section is an error naming both places.

use super::settings::{custom_pattern, disabled_builtin};
use super::{Section, each};
use crate::config::daemon::CustomServer;
use crate::config::diagnostic::{Location, Report};
use crate::config::keywords::PinAction;
use crate::config::patterns::NameGlob;
use crate::config::reader::{self, Fields};
use crate::config::schema::McpPolicy;
use crate::config::yaml::Node;
use crate::launch::{BUILT_IN_LAUNCHERS, DEFAULT_PATTERNS};

const INSPECTION_KEYS: &[&str] = &[
    "enabled",
    "server_patterns",
    "custom_servers",
    "registry",
    "detection",
    "on_detection",
];

/// Applies `mcp:` (the node of the top-level key) to `policy`, read from `section`.
pub(crate) fn apply(r: &mut Report, node: &Node, section: &Section<'_>, policy: &mut McpPolicy) {
    let Some(mcp) = Fields::open(r, node, "mcp", &["inspection"]) else {
        return;
    };
    let Some(inspection) = mcp.get("inspection") else {
        return;
    };
    let Some(f) = Fields::open(r, inspection, "mcp.inspection", INSPECTION_KEYS) else {
        return;
    };
    let at = |f: &Fields<'_>, key: &str| (f.path_of(key), f.key_loc(key));

    if f.has("enabled") {
        let (path, loc) = at(&f, "enabled");
        section.same_setting(r, (&path, loc), &["detection", "enabled"]);
        section.same_setting(r, (&path, loc), &["version_pinning", "enabled"]);
        let enabled = f.bool(r, "enabled", true);
        policy.detection.enabled = enabled;
        policy.version_pinning.enabled = enabled;
    }
    for key in ["server_patterns", "custom_servers"] {
        let path = f.path_of(key);
        let patterns = f
            .list(r, key)
            .iter()
            .enumerate()
            .filter_map(|(i, n)| launch_pattern(r, n, &format!("{path}[{i}]")));
        policy.launch_patterns.extend(patterns.collect::<Vec<_>>());
    }
    if let Some(node) = f.get("registry") {
        registry(r, node, &f.path_of("registry"), section, policy);
    }
    if let Some(node) = f.get("detection") {
        detection(r, node, &f.path_of("detection"), section, policy);
    }
    if let Some(node) = f.get("on_detection") {
        webhook(r, node, &f.path_of("on_detection"));
    }
}

fn registry(
    r: &mut Report,
    node: &Node,
    path: &str,
    section: &Section<'_>,
    policy: &mut McpPolicy,
) {
    let keys = ["pin_on_first_use", "alert_on_change", "persistent", "path"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return;
    };
    let pinning = &mut policy.version_pinning;
    if f.has("pin_on_first_use") {
        let doc = (f.path_of("pin_on_first_use"), f.key_loc("pin_on_first_use"));
        section.same_setting(r, (&doc.0, doc.1), &["version_pinning", "auto_trust_first"]);
        pinning.auto_trust_first = f.bool(r, "pin_on_first_use", pinning.auto_trust_first);
    }
    if f.has("alert_on_change") {
        let doc = (f.path_of("alert_on_change"), f.key_loc("alert_on_change"));
        section.same_setting(r, (&doc.0, doc.1), &["version_pinning", "on_change"]);
        // The design's MVP alerts on a change; not alerting leaves the change recorded only.
        let alert = f.bool(r, "alert_on_change", true);
        pinning.on_change = if alert {
            PinAction::Alert
        } else {
            PinAction::Allow
        };
    }
    if let Some(n) = f.get("persistent")
        && reader::boolean(r, n, &f.path_of("persistent")) == Some(false)
    {
        r.error(
            n.loc,
            format!(
                "`{}: false` is not available: agentshd keeps pins across sessions in its \
                 state dir, so a changed definition is caught in every later session; remove \
                 the key or set it to true",
                f.path_of("persistent")
            ),
        );
    }
    if f.has("path") {
        r.warn(
            f.key_loc("path"),
            format!(
                "`{}` is ignored: agentshd keeps the registry (its pins) in its state dir, \
                 not in a file of the policy's choosing (`agentshctl mcp pins` lists them)",
                f.path_of("path")
            ),
        );
    }
}

fn detection(
    r: &mut Report,
    node: &Node,
    path: &str,
    section: &Section<'_>,
    policy: &mut McpPolicy,
) {
    let keys = ["builtin", "custom_patterns", "alert_threshold"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return;
    };
    for key in keys {
        if f.has(key) {
            section.same_setting(r, (&f.path_of(key), f.key_loc(key)), &["detection", key]);
        }
    }
    let detection = &mut policy.detection;
    if let Some(n) = f.get("builtin") {
        detection.disabled_builtin = disabled_builtin(r, n, &f.path_of("builtin"));
    }
    if f.has("custom_patterns") {
        detection.custom_patterns = each(r, &f, "custom_patterns", custom_pattern);
    }
    detection.alert_threshold = f.keyword(r, "alert_threshold", detection.alert_threshold);
}

/// Alerts leave agentshd through its own config; a session's policy cannot send them
/// elsewhere (that would let whoever picks the policy make the root daemon post anywhere).
fn webhook(r: &mut Report, node: &Node, path: &str) {
    let Some(f) = Fields::open(r, node, path, &["webhook_url"]) else {
        return;
    };
    if let Some(url) = f.string(r, "webhook_url")
        && !url.is_empty()
    {
        r.error(
            f.key_loc("webhook_url"),
            format!(
                "`{}` belongs in agentshd's config (`on_detection.webhook_url`), not in a \
                 policy: alerts leave the daemon only where its administrator sends them (an \
                 empty URL, meaning none, is accepted here)",
                f.path_of("webhook_url")
            ),
        );
    }
}

/// One entry of `server_patterns` / `custom_servers`: a name glob a launcher's target is
/// matched against. The design's shell shim matched whole command lines, so `uvx mcp-server-*`
/// (a launcher, then a name) and paths are taken apart; the built-in patterns always apply.
fn launch_pattern(r: &mut Report, node: &Node, path: &str) -> Option<CustomServer> {
    let text = reader::nonempty_string(r, node, path)?;
    let mut words = text.split_whitespace();
    let name = match (words.next(), words.next(), words.next()) {
        (Some(only), None, _) => only,
        (Some(launcher), Some(name), None) if BUILT_IN_LAUNCHERS.contains(&launcher) => name,
        _ => {
            r.error(
                node.loc,
                format!(
                    "`{path}`: `{text}` is not a package, module or image name (or a launcher \
                     and one, such as `uvx mcp-server-*`): agentsh matches the name a launcher \
                     runs, not a command line"
                ),
            );
            return None;
        }
    };
    if DEFAULT_PATTERNS.contains(&name) {
        return None;
    }
    let name = if name.starts_with('/') || name.starts_with("./") || name.starts_with("../") {
        path_pattern(r, node.loc, path, name)?
    } else {
        name.to_owned()
    };
    match NameGlob::new(&name) {
        Ok(pattern) => Some(CustomServer {
            pattern: pattern.written_at(node.loc),
            id: None,
            span: node.loc,
        }),
        Err(e) => {
            reader::glob_error(r, node.loc, path, &name, &e);
            None
        }
    }
}

/// A path names a script or binary: a launcher (node, python, ...) running the script is seen
/// by its file name; a binary the agent starts itself is seen only through its configuration.
fn path_pattern(r: &mut Report, at: Location, path: &str, text: &str) -> Option<String> {
    let file = text.rsplit('/').next().filter(|f| !f.is_empty());
    let stem = file.map(|f| f.rsplit_once('.').map_or(f, |(stem, _)| stem));
    let Some(stem) = stem.filter(|s| !s.is_empty()) else {
        r.error(
            at,
            format!("`{path}`: `{text}` names a directory, not a server"),
        );
        return None;
    };
    r.warn(
        at,
        format!(
            "`{path}`: the path `{text}` is matched by its file name `{stem}` when a launcher \
             (node, python, uvx, ...) runs it; a binary the agent starts directly is guarded \
             when the agent's MCP configuration names it, as every configured server is"
        ),
    );
    Some(stem.to_owned())
}
