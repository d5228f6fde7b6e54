//! The design documents' spellings of the policy language (`../shared/seeds`), beside ours:
//! what each means, and the error when one file writes a setting both ways.

use std::time::Duration;

use super::*;
use crate::inspect::Category;

fn ok(src: &str) -> Policy {
    load_str(src, "p.yaml").unwrap_or_else(|e| panic!("expected a valid policy, got:\n{e}"))
}

fn errors(src: &str) -> Vec<String> {
    match load_str(src, "p.yaml") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn windows_take_durations_with_units() {
    let p = ok("sandbox:
  mcp:
    cross_server:
      read_then_send: {window: 30s}
      burst: {window: \"1m30s\", max_calls: 10}
      cross_server_flow: {window: 250ms}
");
    let c = &p.mcp().cross_server;
    assert_eq!(c.read_then_send.window, Duration::from_secs(30));
    assert_eq!(c.burst.window, Duration::from_secs(90));
    assert_eq!(c.cross_server_flow.window, Some(Duration::from_millis(250)));
    let p = ok(
        "sandbox: {mcp: {cross_server: {burst: {window: 1.5h}, cross_server_flow: {window_seconds: 7}}}}",
    );
    let c = &p.mcp().cross_server;
    assert_eq!(c.burst.window, Duration::from_secs(5400));
    assert_eq!(c.cross_server_flow.window, Some(Duration::from_secs(7)));

    assert_eq!(
        errors("sandbox: {mcp: {cross_server: {read_then_send: {window: 30}}}}"),
        [
            "p.yaml:1:57: error: `sandbox.mcp.cross_server.read_then_send.window` must be a duration with its unit, such as \"30s\", \"5m\" or \"1m30s\": `30` has no unit"
        ]
    );
    assert_eq!(
        errors("sandbox: {mcp: {cross_server: {burst: {window: 5d}}}}"),
        [
            "p.yaml:1:48: error: `sandbox.mcp.cross_server.burst.window` must be a duration with its unit, such as \"30s\", \"5m\" or \"1m30s\": unknown unit `d` in `5d` (units: ns, us, ms, s, m, h)"
        ]
    );
    assert_eq!(
        errors("sandbox: {mcp: {cross_server: {burst: {window: 25h}}}}"),
        [
            "p.yaml:1:48: error: `sandbox.mcp.cross_server.burst.window` must be between 1ms and 1day, found 1day 1h"
        ]
    );
}

#[test]
fn the_same_window_written_twice_names_both_places() {
    let src = "sandbox:
  mcp:
    cross_server:
      read_then_send:
        window_seconds: 60
        window: 30s
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:6:9: error: `sandbox.mcp.cross_server.read_then_send.window` and `sandbox.mcp.cross_server.read_then_send.window_seconds` are two spellings of one setting (`sandbox.mcp.cross_server.read_then_send.window_seconds` is at line 5, column 9); write one"
        ]
    );
}

#[test]
fn server_lists_take_id_entries() {
    let p = ok("sandbox:
  mcp:
    server_policy: allowlist
    allowed_servers:
      - id: filesystem
      - \"internal-*\"
    denied_servers:
      - id: \"*\"
");
    let m = p.mcp();
    let allowed: Vec<&str> = m.allowed_servers.iter().map(|g| g.as_str()).collect();
    assert_eq!(allowed, ["filesystem", "internal-*"]);
    assert_eq!(m.denied_servers[0].as_str(), "*");
    assert_eq!(
        errors("sandbox: {mcp: {allowed_servers: [{name: x}]}}"),
        [
            "p.yaml:1:35: error: missing required key `id` in `sandbox.mcp.allowed_servers[0]`",
            "p.yaml:1:36: error: unknown key `name` in `sandbox.mcp.allowed_servers[0]` (known keys: id)",
        ]
    );
}

#[test]
fn calls_per_minute_is_rpm() {
    let p = ok("sandbox:
  mcp:
    servers: [{id: weather-api, type: http, url: \"https://mcp.example.com/sse\"}]
    rate_limits:
      enabled: true
      per_server:
        weather-api: {calls_per_minute: 10, burst: 3}
");
    assert_eq!(
        p.mcp().rate_limits.for_server("weather-api"),
        RateLimit { rpm: 10, burst: 3 }
    );
    assert_eq!(
        errors("sandbox: {mcp: {rate_limits: {per_server: {a: {rpm: 5, calls_per_minute: 10}}}}}"),
        [
            "p.yaml:1:56: error: `sandbox.mcp.rate_limits.per_server.a.calls_per_minute` and `sandbox.mcp.rate_limits.per_server.a.rpm` are two spellings of one setting (`sandbox.mcp.rate_limits.per_server.a.rpm` is at line 1, column 48); write one"
        ]
    );
}

#[test]
fn similarity_under_shadow_tool_is_name_similarity() {
    let p = ok("sandbox:
  mcp:
    cross_server:
      shadow_tool:
        similarity_check: false
        similarity_threshold: 0.9
");
    let c = &p.mcp().cross_server;
    assert!(!c.name_similarity.enabled && c.shadow_tool.enabled);
    assert_eq!(c.name_similarity.threshold, 0.9);
    let src = "sandbox:
  mcp:
    cross_server:
      name_similarity: {threshold: 0.8}
      shadow_tool: {similarity_threshold: 0.9}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:5:21: error: `sandbox.mcp.cross_server.shadow_tool.similarity_threshold` and `sandbox.mcp.cross_server.name_similarity.threshold` are two spellings of one setting (`sandbox.mcp.cross_server.name_similarity.threshold` is at line 4, column 25); write one"
        ]
    );
}

#[test]
fn custom_patterns_take_a_name_and_need_no_category() {
    let p = ok("sandbox:
  mcp:
    detection:
      custom_patterns:
        - name: internal_api
          pattern: \"internal\\\\.corp\\\\.example\\\\.com\"
          severity: high
");
    let pattern = &p.mcp().detection.custom_patterns[0];
    assert_eq!(
        (pattern.id.as_str(), pattern.category.as_str()),
        ("internal_api", "custom")
    );
    assert_eq!(
        errors(
            "sandbox: {mcp: {detection: {custom_patterns: [{id: a, name: b, pattern: x, severity: low}]}}}"
        ),
        [
            "p.yaml:1:55: error: `sandbox.mcp.detection.custom_patterns[0].name` and `sandbox.mcp.detection.custom_patterns[0].id` are two spellings of one setting (`sandbox.mcp.detection.custom_patterns[0].id` is at line 1, column 48); write one"
        ]
    );
    // Names are unique whichever spelling gave them.
    let errs = errors(
        "sandbox: {mcp: {detection: {custom_patterns: [{id: a, pattern: x, severity: low}, {name: a, pattern: y, severity: low}]}}}",
    );
    assert!(
        errs[0].contains("duplicate custom pattern id `a`"),
        "{errs:?}"
    );
}

#[test]
fn mcp_rules_is_the_mcp_section() {
    let p = ok("mcp_rules:
  tool_policy: allowlist
  allowed_tools: [{server: notes, tool: read_note}]
  server_policy: allowlist
  allowed_servers: [{id: notes}]
");
    let m = p.mcp();
    assert_eq!(m.tool_policy, ListPolicy::Allowlist);
    assert_eq!(m.allowed_servers[0].as_str(), "notes");
    // Paths in messages say where the key is.
    assert_eq!(
        errors("mcp_rules: {fail_closd: true}\n"),
        [
            "p.yaml:1:13: error: unknown key `fail_closd` in `mcp_rules`; did you mean `fail_closed`?"
        ]
    );
    assert_eq!(
        errors("sandbox:\n  mcp: {}\nmcp_rules: {}\n"),
        [
            "p.yaml:3:1: error: `mcp_rules` and `sandbox.mcp` are two spellings of one setting (`sandbox.mcp` is at line 2, column 3); write one"
        ]
    );
}

#[test]
fn agentshield_rule_files_load_as_they_are() {
    let p = ok("defaults:
  decision: \"BLOCK\"
blocked_tools: [execute_command]
rules:
  - id: reads
    match: {tool_name: read_file}
    decision: ALLOW
");
    let m = p.mcp();
    assert_eq!(m.default_decision, Decision::Block);
    assert_eq!(m.blocked_tools[0].as_str(), "execute_command");
    assert_eq!(
        (m.rules[0].id.as_str(), m.rules[0].decision),
        ("reads", Decision::Allow)
    );
    // Each key is the MCP section's setting too: both is an error naming both places.
    let src = "sandbox:
  mcp:
    default_decision: audit
    blocked_tools: [a]
defaults: {decision: ALLOW}
blocked_tools: [b]
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:5:12: error: `defaults.decision` and `sandbox.mcp.default_decision` are two spellings of one setting (`sandbox.mcp.default_decision` is at line 3, column 5); write one",
            "p.yaml:6:1: error: `blocked_tools` and `sandbox.mcp.blocked_tools` are two spellings of one setting (`sandbox.mcp.blocked_tools` is at line 4, column 5); write one",
        ]
    );
}

#[test]
fn the_inspection_section_maps_onto_the_policy() {
    let src = "mcp:
  inspection:
    enabled: true
    server_patterns: [\"@modelcontextprotocol/*\", \"uvx mcp-server-*\", \"acme-mcp-*\"]
    custom_servers: [\"my-company-mcp-*\", \"/opt/internal/mcp-server.js\"]
    registry: {pin_on_first_use: false, alert_on_change: true, persistent: true, path: ~/.agentsh/r.json}
    detection:
      builtin: {credential_theft: true, path_traversal: false}
      custom_patterns: [{name: corp, pattern: \"corp\\\\.example\", severity: high}]
      alert_threshold: high
    on_detection: {webhook_url: \"\"}
";
    let p = ok(src);
    let m = p.mcp();
    assert!(m.detection.enabled && m.version_pinning.enabled);
    let patterns: Vec<&str> = m
        .launch_patterns
        .iter()
        .map(|c| c.pattern.as_str())
        .collect();
    // The built-in ones (alone or after a launcher word) add nothing; a path is its file name.
    assert_eq!(patterns, ["acme-mcp-*", "my-company-mcp-*", "mcp-server"]);
    assert!(!m.version_pinning.auto_trust_first);
    assert_eq!(m.version_pinning.on_change, PinAction::Alert);
    assert_eq!(m.detection.disabled_builtin, [Category::PathTraversal]);
    assert_eq!(m.detection.custom_patterns[0].id, "corp");
    assert_eq!(m.detection.alert_threshold, Severity::High);
    assert_eq!(
        p.warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "p.yaml:5:42: warning: `mcp.inspection.custom_servers[1]`: the path `/opt/internal/mcp-server.js` is matched by its file name `mcp-server` when a launcher (node, python, uvx, ...) runs it; a binary the agent starts directly is guarded when the agent's MCP configuration names it, as every configured server is",
            "p.yaml:6:82: warning: `mcp.inspection.registry.path` is ignored: agentshd keeps the registry (its pins) in its state dir, not in a file of the policy's choosing (`agentshctl mcp pins` lists them)",
        ]
    );
    let p = ok("mcp: {inspection: {registry: {alert_on_change: false}}}");
    assert_eq!(p.mcp().version_pinning.on_change, PinAction::Allow);
}

#[test]
fn the_inspection_section_refuses_what_it_cannot_mean() {
    let errs = errors(
        "mcp:
  inspection:
    registry: {persistent: false}
    on_detection: {webhook_url: \"https://hooks.example/x\"}
    custom_servers: [\"docker run mcp-thing\"]
",
    );
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "p.yaml:3:28: error: `mcp.inspection.registry.persistent: false` is not available"
        ),
        "{errs:?}"
    );
    assert!(errs[1].starts_with("p.yaml:4:20: error: `mcp.inspection.on_detection.webhook_url` belongs in agentshd's config"), "{errs:?}");
    assert!(errs[2].starts_with("p.yaml:5:22: error: `mcp.inspection.custom_servers[0]`: `docker run mcp-thing` is not a package"), "{errs:?}");
}

#[test]
fn the_inspection_section_and_the_mcp_section_cannot_both_set_a_thing() {
    let src = "sandbox:
  mcp:
    detection: {alert_threshold: medium}
    version_pinning: {on_change: block}
mcp:
  inspection:
    registry: {alert_on_change: true}
    detection: {alert_threshold: high}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:7:16: error: `mcp.inspection.registry.alert_on_change` and `sandbox.mcp.version_pinning.on_change` are two spellings of one setting (`sandbox.mcp.version_pinning.on_change` is at line 4, column 23); write one",
            "p.yaml:8:17: error: `mcp.inspection.detection.alert_threshold` and `sandbox.mcp.detection.alert_threshold` are two spellings of one setting (`sandbox.mcp.detection.alert_threshold` is at line 3, column 17); write one",
        ]
    );
}

#[test]
fn keywords_read_in_any_case() {
    let p = ok("sandbox: {mcp: {detection: {on_detection: Block, alert_threshold: HIGH}}}");
    assert_eq!(p.mcp().detection.on_detection, Action::Block);
    assert_eq!(p.mcp().detection.alert_threshold, Severity::High);
}
