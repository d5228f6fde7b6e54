//! End-to-end tests of the loader: positions and wording of every error kind, defaults,
//! the shipped policies, and garbage input.

use std::path::PathBuf;
use std::time::Duration;

use super::*;

fn ok(src: &str) -> Policy {
    load_str(src, "p.yaml").unwrap_or_else(|e| panic!("expected a valid policy, got:\n{e}"))
}

fn errors(src: &str) -> Vec<String> {
    match load_str(src, "p.yaml") {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
    }
}

fn warnings(src: &str) -> Vec<String> {
    ok(src).warnings.iter().map(ToString::to_string).collect()
}

fn shipped(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../policies")
        .join(name)
}

fn assert_defaults(p: &McpPolicy) {
    assert!(p.enforce_policy);
    assert!(!p.fail_closed);
    assert_eq!(p.default_decision, Decision::Allow);
    assert_eq!(p.max_message_bytes, 16 * 1024 * 1024);
    assert!(p.servers.is_empty());
    assert_eq!(p.server_policy, ListPolicy::None);
    assert_eq!(p.tool_policy, ListPolicy::None);
    assert!(p.allowed_servers.is_empty() && p.denied_servers.is_empty());
    assert!(p.allowed_tools.is_empty() && p.denied_tools.is_empty());
    assert!(p.blocked_tools.is_empty() && p.rules.is_empty());
    assert_eq!(
        p.version_pinning,
        VersionPinning {
            enabled: true,
            on_change: PinAction::Block,
            auto_trust_first: true,
            pin_binary: false
        }
    );
    assert!(!p.rate_limits.enabled);
    assert_eq!(
        p.rate_limits.default,
        RateLimit {
            rpm: 120,
            burst: 20
        }
    );
    assert!(p.rate_limits.per_server.is_empty());
    let c = &p.cross_server;
    assert!(c.enabled);
    assert_eq!(
        (c.shadow_tool.enabled, c.shadow_tool.action),
        (true, Action::Block)
    );
    assert_eq!(
        (
            c.read_then_send.enabled,
            c.read_then_send.window,
            c.read_then_send.action
        ),
        (true, Duration::from_secs(300), Action::Block)
    );
    assert_eq!(
        (
            c.cross_server_flow.enabled,
            c.cross_server_flow.same_turn_only,
            c.cross_server_flow.window,
            c.cross_server_flow.action
        ),
        (true, true, None, Action::Alert)
    );
    assert_eq!(
        (
            c.burst.enabled,
            c.burst.max_calls,
            c.burst.window,
            c.burst.action
        ),
        (true, 30, Duration::from_secs(10), Action::Alert)
    );
    assert_eq!(
        (
            c.name_similarity.enabled,
            c.name_similarity.threshold,
            c.name_similarity.action
        ),
        (true, 0.85, Action::Alert)
    );
    assert!(p.detection.enabled);
    assert_eq!(p.detection.alert_threshold, Severity::Medium);
    assert_eq!(p.detection.on_detection, Action::Alert);
    assert!(p.detection.custom_patterns.is_empty());
    assert_eq!(
        p.output_inspection,
        OutputInspection {
            enabled: true,
            on_detection: Action::Alert,
            alert_threshold: Severity::High,
            block_injection: InjectionBlock::Critical,
        }
    );
    assert_eq!(
        p.server_requests,
        ServerRequests {
            sampling: RequestAction::Block,
            elicitation: RequestAction::Block,
            roots: RequestAction::Block
        }
    );
}

#[test]
fn defaults_everywhere() {
    assert_defaults(Policy::default().mcp());
    for src in [
        "",
        "# nothing\n",
        "---\n",
        "sandbox:\n",
        "sandbox: {}\n",
        "sandbox:\n  mcp:\n",
        "sandbox:\n  mcp: {}\n",
        "sandbox:\n  mcp:\n    cross_server:\n    detection: {}\n",
    ] {
        let p = ok(src);
        assert_defaults(p.mcp());
        assert!(p.warnings.is_empty(), "{src:?}");
        assert_eq!(p.origin, "p.yaml");
    }
}

#[test]
fn partial_sections_keep_other_defaults() {
    let p = ok("sandbox:\n  mcp:\n    cross_server:\n      burst: {max_calls: 5}\n");
    let b = &p.mcp().cross_server.burst;
    assert_eq!(
        (b.enabled, b.max_calls, b.window),
        (true, 5, Duration::from_secs(10))
    );
    assert_eq!(p.mcp().cross_server.shadow_tool.action, Action::Block);
}

#[test]
fn unknown_key_with_suggestion() {
    assert_eq!(
        errors("sandbox:\n  mcp:\n    enforce_polcy: false\n"),
        [
            "p.yaml:3:5: error: unknown key `enforce_polcy` in `sandbox.mcp`; did you mean `enforce_policy`?"
        ]
    );
    assert_eq!(
        errors("sandbox:\n  mpc: {}\n"),
        ["p.yaml:2:3: error: unknown key `mpc` in `sandbox`; did you mean `mcp`?"]
    );
    assert_eq!(
        errors("network: {}\n"),
        [
            "p.yaml:1:1: error: unknown key `network` at the top level (known keys: sandbox, mcp_rules, mcp, defaults, blocked_tools, rules)"
        ]
    );
    assert_eq!(
        errors(
            "sandbox:\n  mcp:\n    detection:\n      custom_patterns:\n        - {id: a, pattern: b, category: c, severity: low, descripton: d}\n"
        ),
        [
            "p.yaml:5:59: error: unknown key `descripton` in `sandbox.mcp.detection.custom_patterns[0]`; did you mean `description`?"
        ]
    );
}

#[test]
fn wrong_types() {
    let src = "sandbox:
  mcp:
    enforce_policy: 'yes'
    fail_closed: 1
    servers: filesystem
    blocked_tools: [[x]]
    detection: true
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:3:21: error: `sandbox.mcp.enforce_policy` must be true or false, found the string \"yes\"",
            "p.yaml:4:18: error: `sandbox.mcp.fail_closed` must be true or false, found the number `1`",
            "p.yaml:5:14: error: `sandbox.mcp.servers` must be a list, found the string \"filesystem\"",
            "p.yaml:6:21: error: `sandbox.mcp.blocked_tools[0]` must be a string, found a list",
            "p.yaml:7:16: error: `sandbox.mcp.detection` must be a mapping, found the boolean `true`",
        ]
    );
    assert_eq!(
        errors("- a\n"),
        ["p.yaml:1:1: error: the file must be a mapping, found a list"]
    );
}

#[test]
fn bad_enum_values_list_the_accepted_ones() {
    let src = "sandbox:
  mcp:
    default_decision: blok
    server_policy: allow-list
    detection: {alert_threshold: severe}
    server_requests: {sampling: deny}
    output_inspection: {block_injection: never}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:3:23: error: `sandbox.mcp.default_decision`: unknown value `blok` (expected one of: allow, audit, block); did you mean `block`?",
            "p.yaml:4:20: error: `sandbox.mcp.server_policy`: unknown value `allow-list` (expected one of: none, allowlist, denylist); did you mean `allowlist`?",
            "p.yaml:5:34: error: `sandbox.mcp.detection.alert_threshold`: unknown value `severe` (expected one of: low, medium, high, critical)",
            "p.yaml:6:33: error: `sandbox.mcp.server_requests.sampling`: unknown value `deny` (expected one of: allow, block)",
            "p.yaml:7:42: error: `sandbox.mcp.output_inspection.block_injection`: unknown value `never` (expected one of: off, low, medium, high, critical)",
        ]
    );
}

#[test]
fn invalid_regexes_and_globs() {
    let src = r#"sandbox:
  mcp:
    allowed_servers: ["git-[", "ok"]
    rules:
      - id: r
        match:
          tool_name_regex: "read_(file"
          argument_patterns:
            path: "**/[z"
            content: {regex: "a{2,1}"}
        decision: block
    detection:
      custom_patterns:
        - {id: p, pattern: "(?P<x", category: c, severity: low}
"#;
    assert_eq!(
        errors(src),
        [
            "p.yaml:3:23: error: `sandbox.mcp.allowed_servers[0]`: invalid glob `git-[`: unclosed character class; missing ']'",
            "p.yaml:7:28: error: `sandbox.mcp.rules[0].match.tool_name_regex`: invalid regex: unclosed group",
            "p.yaml:9:19: error: `sandbox.mcp.rules[0].match.argument_patterns.path`: invalid glob `**/[z`: unclosed character class; missing ']'",
            "p.yaml:10:30: error: `sandbox.mcp.rules[0].match.argument_patterns.content.regex`: invalid regex: invalid repetition count range, the start must be <= the end",
            "p.yaml:14:28: error: `sandbox.mcp.detection.custom_patterns[0].pattern`: invalid regex: unclosed capture group name",
        ]
    );
}

#[test]
fn out_of_range_numbers() {
    let src = "sandbox:
  mcp:
    max_message_bytes: 1023
    rate_limits: {default_rpm: 0, default_burst: -1}
    cross_server:
      read_then_send: {window_seconds: 100000}
      name_similarity: {threshold: 1.01}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:3:24: error: `sandbox.mcp.max_message_bytes` must be between 1024 and 1073741824, found 1023",
            "p.yaml:4:32: error: `sandbox.mcp.rate_limits.default_rpm` must be between 1 and 1000000, found 0",
            "p.yaml:4:50: error: `sandbox.mcp.rate_limits.default_burst` must be between 1 and 1000000, found -1",
            "p.yaml:6:40: error: `sandbox.mcp.cross_server.read_then_send.window_seconds` must be between 1 and 86400, found 100000",
            "p.yaml:7:36: error: `sandbox.mcp.cross_server.name_similarity.threshold` must be between 0 and 1, found 1.01",
        ]
    );
    assert_eq!(
        ok("sandbox: {mcp: {max_message_bytes: 1073741824}}")
            .mcp()
            .max_message_bytes,
        1 << 30
    );
    assert!(!errors("sandbox: {mcp: {max_message_bytes: 1073741825}}").is_empty());
}

#[test]
fn missing_required_fields() {
    let src = "sandbox:
  mcp:
    servers:
      - type: stdio
        command: x
    allowed_tools:
      - {server: a}
    rules:
      - match: {tool_name: x}
    detection:
      custom_patterns:
        - id: p
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:4:9: error: missing required key `id` in `sandbox.mcp.servers[0]`",
            "p.yaml:7:9: error: missing required key `tool` in `sandbox.mcp.allowed_tools[0]`",
            "p.yaml:9:9: error: missing required key `id` in `sandbox.mcp.rules[0]`",
            "p.yaml:9:9: error: missing required key `decision` in `sandbox.mcp.rules[0]`",
            "p.yaml:12:11: error: missing required key `pattern` in `sandbox.mcp.detection.custom_patterns[0]`",
            "p.yaml:12:11: error: missing required key `severity` in `sandbox.mcp.detection.custom_patterns[0]`",
        ]
    );
    // A key written with no value counts as missing, reported where it is written.
    assert_eq!(
        errors(
            "sandbox:\n  mcp:\n    rules:\n      - id: r\n        match: {tool_name: x}\n        decision:\n"
        ),
        ["p.yaml:6:9: error: missing required key `decision` in `sandbox.mcp.rules[0]`"]
    );
}

#[test]
fn duplicate_keys() {
    let src = "sandbox:
  mcp:
    fail_closed: true
    rules: []
    fail_closed: false
  mcp: {}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:5:5: error: duplicate key `fail_closed` (first defined at line 3, column 5)",
            "p.yaml:6:3: error: duplicate key `mcp` (first defined at line 2, column 3)",
        ]
    );
}

#[test]
fn duplicate_ids() {
    let src = "sandbox:
  mcp:
    servers:
      - {id: fs, command: a}
      - {id: git, command: b}
      - {id: fs, command: c}
    rules:
      - id: r1
        match: {tool_name: a}
        decision: block
      - id: r1
        match: {tool_name: b}
        decision: allow
    detection:
      custom_patterns:
        - {id: p, pattern: a, category: c, severity: low}
        - {id: p, pattern: b, category: c, severity: low}
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:6:9: error: duplicate server id `fs` (first defined at line 4, column 9)",
            "p.yaml:11:9: error: duplicate rule id `r1` (first defined at line 8, column 9)",
            "p.yaml:17:11: error: duplicate custom pattern id `p` (first defined at line 16, column 11)",
        ]
    );
}

#[test]
fn server_transport_checks() {
    let src = "sandbox:
  mcp:
    servers:
      - id: a
      - id: b
        type: http
        command: npx
      - id: c
        type: sse
        url: ftp://example.com
      - id: d
        url: https://example.com
        command: x
      - id: 'e f'
        command: x
        tls_fingerprint: abc
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:4:9: error: `sandbox.mcp.servers[0]`: a server of type `stdio` needs `command`",
            "p.yaml:5:9: error: `sandbox.mcp.servers[1]`: a server of type `http` needs `url`",
            "p.yaml:7:9: error: `sandbox.mcp.servers[1].command` does not apply to a server of type `http`",
            "p.yaml:10:14: error: `sandbox.mcp.servers[2].url`: `ftp://example.com` is not a valid http(s) URL: the scheme must be http or https",
            "p.yaml:12:9: error: `sandbox.mcp.servers[3].url` does not apply to a server of type `stdio`",
            "p.yaml:14:13: error: `sandbox.mcp.servers[4].id`: `e f` contains ' '; ids may only use letters, digits, `.`, `_` and `-`",
            "p.yaml:16:9: error: `sandbox.mcp.servers[4].tls_fingerprint` does not apply to a server of type `stdio`",
            "p.yaml:16:26: error: `sandbox.mcp.servers[4].tls_fingerprint`: `abc` is not a SHA-256 digest (expected `sha256:` followed by 64 hex digits)",
        ]
    );
}

#[test]
fn tool_name_exactly_one() {
    let src = "sandbox:
  mcp:
    rules:
      - id: none
        match: {server: fs}
        decision: block
      - id: two
        match:
          tool_name: a
          tool_name_any: [b]
        decision: block
      - id: empty-any
        match: {tool_name_any: []}
        decision: block
";
    assert_eq!(
        errors(src),
        [
            "p.yaml:5:16: error: `sandbox.mcp.rules[0].match` needs one of `tool_name`, `tool_name_regex` or `tool_name_any`",
            "p.yaml:10:11: error: `sandbox.mcp.rules[1].match` takes only one of `tool_name`, `tool_name_regex` and `tool_name_any`; found `tool_name` and `tool_name_any`",
            "p.yaml:13:32: error: `sandbox.mcp.rules[2].match.tool_name_any` must list at least one tool name",
        ]
    );
}

#[test]
fn argument_pattern_forms() {
    let src = r#"sandbox:
  mcp:
    rules:
      - id: r
        match:
          tool_name: "*"
          argument_patterns:
            path: "**/.ssh/**"
            options.target: {glob: "/etc/*"}
            "*": {contains: "rm -rf"}
            body: {regex: "(?i)password"}
        decision: audit
        reason: why
"#;
    let p = ok(src);
    let rule = &p.mcp().rules[0];
    assert_eq!(rule.id, "r");
    assert_eq!(rule.decision, Decision::Audit);
    assert_eq!(rule.reason.as_deref(), Some("why"));
    assert_eq!(rule.span, Location::new(4, 9));
    assert!(rule.server.is_any());
    let sel: Vec<String> = rule
        .arguments
        .iter()
        .map(|a| a.selector.to_string())
        .collect();
    assert_eq!(sel, ["path", "options.target", "*", "body"]);
    assert_eq!(
        rule.arguments[1].selector,
        ArgSelector::Path(vec!["options".into(), "target".into()])
    );
    assert_eq!(rule.arguments[2].selector, ArgSelector::AnyString);
    assert_eq!(rule.arguments[0].span, Location::new(8, 13));
    assert!(rule.arguments[0].pattern.matches("/home/u/.ssh/id_rsa"));
    assert!(!rule.arguments[1].pattern.matches("/etc/a/b"));
    assert!(rule.arguments[2].pattern.matches("sudo rm -rf /"));
    assert!(rule.arguments[3].pattern.matches("my PASSWORD is"));

    let bad = r#"sandbox:
  mcp:
    rules:
      - id: r
        match:
          tool_name: x
          argument_patterns:
            a..b: x
            c: {}
            d: {glob: a, contains: b}
            e: [x]
        decision: block
"#;
    assert_eq!(
        errors(bad),
        [
            "p.yaml:8:13: error: `sandbox.mcp.rules[0].match.argument_patterns`: invalid argument name `a..b` (use a name, a dotted path like `a.b`, or `*`)",
            "p.yaml:9:16: error: `sandbox.mcp.rules[0].match.argument_patterns.c` takes exactly one of `glob`, `regex` or `contains`; found 0",
            "p.yaml:10:16: error: `sandbox.mcp.rules[0].match.argument_patterns.d` takes exactly one of `glob`, `regex` or `contains`; found 2",
            "p.yaml:11:16: error: `sandbox.mcp.rules[0].match.argument_patterns.e` must be a mapping, found a list",
        ]
    );
}

#[test]
fn rules_on_the_agents_own_tools() {
    let p = ok(r#"
sandbox:
  mcp:
    rules:
      - id: mcp
        match: {tool_name: write_file}
        decision: block
      - id: pipes
        match: {host: shell, argument_patterns: {pipeline: {regex: 'curl \| sh'}}}
        decision: block
      - id: exact
        match: {host: [Bash, "mcp__*", write], argument_patterns: {"*": "~/.ssh/**"}}
        decision: audit
"#);
    let m = p.mcp();
    assert_eq!(m.rules.len(), 1, "host rules are not MCP rules");
    assert_eq!(m.host_rules.len(), 2);
    let pipes = &m.host_rules[0];
    assert!(pipes.matches_tool("exec_command", crate::native::Category::Shell));
    assert!(!pipes.matches_tool("Write", crate::native::Category::Write));
    let exact = &m.host_rules[1];
    assert!(exact.matches_tool("Bash", crate::native::Category::Shell));
    assert!(exact.matches_tool("write_file", crate::native::Category::Write));
    assert!(!exact.matches_tool("Read", crate::native::Category::Read));
    assert_eq!(
        warnings(
            r#"
sandbox:
  mcp:
    rules:
      - id: typo
        match: {host: [shell, Bsh]}
        decision: block
      - id: field
        match: {host: [shell, write], argument_patterns: {cmd: x, path: y}}
        decision: block
"#
        ),
        [
            "p.yaml:6:31: warning: `sandbox.mcp.rules[0].match.host[1]`: `Bsh` is neither a category (shell, write, edit, read, fetch, search, other) nor a tool of Claude Code, Codex CLI or Gemini CLI that agentsh knows; it applies only to a host tool of exactly that name; did you mean `Bash`?",
            "p.yaml:9:59: warning: `sandbox.mcp.rules[1].match.argument_patterns.cmd`: a `shell` call has no field `cmd` (its fields: command, program, pipeline, writes, reads, urls, network, downloads_to_interpreter, decodes_to_interpreter, workdir, detected); the rule only applies to a tool whose own arguments have one",
            "p.yaml:9:67: warning: `sandbox.mcp.rules[1].match.argument_patterns.path`: a `shell` call has no field `path` (its fields: command, program, pipeline, writes, reads, urls, network, downloads_to_interpreter, decodes_to_interpreter, workdir, detected); the rule only applies to a tool whose own arguments have one",
        ]
    );
    assert_eq!(
        errors(
            r#"
sandbox:
  mcp:
    rules:
      - id: both
        match: {host: shell, tool_name: Bash}
        decision: block
      - id: none
        match: {host: []}
        decision: block
      - id: both
        match: {host: read}
        decision: block
"#
        ),
        [
            "p.yaml:6:30: error: `sandbox.mcp.rules[0].match`: `host` names the agents' own tools, `tool_name` names MCP tools: a rule matches one or the other",
            "p.yaml:9:23: error: `sandbox.mcp.rules[1].match.host` must name at least one category or tool",
        ]
    );
}

#[test]
fn all_errors_in_one_pass() {
    let src = "sandbox:
  mcp:
    enforce_polcy: true
    fail_closed: maybe
    max_message_bytes: 1
    servers: [{id: a}]
    rules: [{id: r, match: {tool_name: x}, decision: nope}]
    detection: {alert_threshold: extreme}
";
    let errs = errors(src);
    assert_eq!(errs.len(), 6, "{errs:#?}");
    // File order, one per line in Display.
    let lines: Vec<usize> = errs
        .iter()
        .map(|e| e.split(':').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(lines, [3, 4, 5, 6, 7, 8]);
    let shown = load_str(src, "p.yaml").unwrap_err().to_string();
    assert_eq!(shown.lines().count(), 6);
}

#[test]
fn full_schema_example() {
    let src = r#"sandbox:
  mcp:
    enforce_policy: false
    fail_closed: true
    default_decision: audit
    max_message_bytes: 0x100000
    servers:
      - id: filesystem
        type: stdio
        command: npx
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
        env_allow: ["PATH", "HOME", "LANG", "NODE_*"]
        env_deny: ["AWS_*", "*_TOKEN"]
      - id: remote
        type: http
        url: https://mcp.example.com/mcp
        tls_fingerprint: "SHA256:ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"
    server_policy: allowlist
    allowed_servers: ["filesystem", "git-*"]
    denied_servers: []
    tool_policy: allowlist
    allowed_tools:
      - {server: filesystem, tool: read_file, content_hash: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}
      - {tool: "list_*"}
    denied_tools:
      - {server: "*", tool: "delete_*"}
    blocked_tools: [execute_command, run_shell]
    rules:
      - id: block-ssh
        match:
          server: "*"
          tool_name: read_file
          argument_patterns:
            path: "**/.ssh/**"
            content: {regex: "(?m)^kind:\\s*ClusterRoleBinding"}
        decision: block
        reason: "Access to SSH key directories is blocked."
      - id: regex-rule
        match: {server: "git-*", tool_name_regex: "git_(push|fetch)"}
        decision: audit
      - id: any-rule
        match: {tool_name_any: ["a_*", "b"]}
        decision: allow
    version_pinning: {enabled: true, on_change: alert, auto_trust_first: false, pin_binary: true}
    rate_limits: {enabled: true, default_rpm: 100, default_burst: 5, per_server: {filesystem: {rpm: 60, burst: 10}, remote: {rpm: 7}}}
    cross_server:
      enabled: false
      shadow_tool: {enabled: false, action: alert}
      read_then_send: {enabled: true, window_seconds: 60, action: alert}
      cross_server_flow: {enabled: true, same_turn_only: false, action: block}
      burst: {enabled: true, max_calls: 3, window_seconds: 1, action: block}
      name_similarity: {enabled: true, threshold: 1, action: block}
    detection:
      enabled: false
      alert_threshold: critical
      on_detection: block
      custom_patterns:
        - {id: no-acme, pattern: "acme\\.internal", category: exfiltration, severity: high}
        - id: two
          pattern: "x"
          category: hidden_instructions
          severity: low
          description: "d"
    output_inspection: {enabled: false, on_detection: block, alert_threshold: low, block_injection: high}
    server_requests: {sampling: allow, elicitation: allow, roots: block}
"#;
    let p = ok(src);
    // denied_tools applies under an allowlist too (a denial always wins): nothing to warn of.
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let m = p.mcp();
    assert!(!m.enforce_policy && m.fail_closed);
    assert_eq!(m.default_decision, Decision::Audit);
    assert_eq!(m.max_message_bytes, 1 << 20);

    let fs = p.server("filesystem").unwrap();
    assert_eq!(fs.transport, Transport::Stdio);
    assert_eq!(fs.command.as_deref(), Some("npx"));
    assert_eq!(
        fs.args,
        ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    );
    assert!(fs.env_allow.iter().any(|g| g.matches("NODE_OPTIONS")));
    assert!(fs.env_deny.iter().any(|g| g.matches("GITHUB_TOKEN")));
    assert_eq!(fs.span, Location::new(8, 9));
    let remote = p.server("remote").unwrap();
    assert_eq!(remote.transport, Transport::Http);
    assert_eq!(remote.url.as_deref(), Some("https://mcp.example.com/mcp"));
    assert_eq!(
        remote.tls_fingerprint.as_deref(),
        Some("abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789")
    );
    assert!(p.server("nope").is_none());

    assert_eq!(m.server_policy, ListPolicy::Allowlist);
    assert!(m.allowed_servers[1].matches("git-local"));
    assert_eq!(m.tool_policy, ListPolicy::Allowlist);
    assert_eq!(
        m.allowed_tools[0].content_hash.as_deref(),
        Some("0".repeat(64).as_str())
    );
    assert!(m.allowed_tools[1].matches("anything", "list_dir"));
    assert!(m.denied_tools[0].matches("x", "delete_repo"));
    assert!(m.blocked_tools[1].matches("run_shell"));

    assert_eq!(m.rules.len(), 3);
    assert!(m.rules[0].matches_tool("fs", &[], "read_file"));
    assert!(!m.rules[0].matches_tool("fs", &[], "read_files"));
    assert!(m.rules[1].matches_tool("git-x", &[], "git_push"));
    assert!(!m.rules[1].matches_tool("git-x", &[], "git_push_all"));
    assert!(!m.rules[1].matches_tool("gh", &[], "git_push"));
    assert!(m.rules[2].matches_tool("s", &[], "a_b") && m.rules[2].matches_tool("s", &[], "b"));
    assert!(
        m.rules[0].arguments[1]
            .pattern
            .matches("x: 1\nkind:  ClusterRoleBinding\n")
    );

    assert_eq!(
        m.version_pinning,
        VersionPinning {
            enabled: true,
            on_change: PinAction::Alert,
            auto_trust_first: false,
            pin_binary: true
        }
    );
    let rl = &m.rate_limits;
    assert!(rl.enabled);
    assert_eq!(
        rl.for_server("filesystem"),
        RateLimit { rpm: 60, burst: 10 }
    );
    assert_eq!(rl.for_server("remote"), RateLimit { rpm: 7, burst: 5 });
    assert_eq!(rl.for_server("other"), RateLimit { rpm: 100, burst: 5 });

    let c = &m.cross_server;
    assert!(!c.enabled && !c.shadow_tool.enabled);
    assert_eq!(c.read_then_send.window.as_secs(), 60);
    assert_eq!(c.cross_server_flow.action, Action::Block);
    assert_eq!(
        (c.burst.max_calls, c.burst.window),
        (3, Duration::from_secs(1))
    );
    assert_eq!(c.name_similarity.threshold, 1.0);

    let d = &m.detection;
    assert!(!d.enabled);
    assert_eq!(
        (d.alert_threshold, d.on_detection),
        (Severity::Critical, Action::Block)
    );
    assert_eq!(d.custom_patterns[0].id, "no-acme");
    assert!(d.custom_patterns[0].pattern.is_match("see acme.internal/x"));
    assert_eq!(d.custom_patterns[0].severity, Severity::High);
    assert_eq!(d.custom_patterns[1].description.as_deref(), Some("d"));
    assert_eq!(d.custom_patterns[1].category, "hidden_instructions");
    assert_eq!(m.output_inspection.alert_threshold, Severity::Low);
    assert_eq!(m.output_inspection.block_injection, InjectionBlock::High);
    assert_eq!(m.server_requests.roots, RequestAction::Block);
}

#[test]
fn warnings_are_separate() {
    assert_eq!(
        warnings("sandbox:\n  mcp:\n    rate_limits:\n      per_server: {fs: {rpm: 1}}\n"),
        [
            "p.yaml:4:20: warning: rate limit for server `fs` cannot be checked: no servers are declared in `sandbox.mcp.servers`"
        ]
    );
    assert_eq!(
        warnings("sandbox:\n  mcp:\n    allowed_servers: [a]\n    tool_policy: allowlist\n"),
        [
            "p.yaml:3:5: warning: `sandbox.mcp.allowed_servers` has no effect: `server_policy` is `none`, not `allowlist`",
            "p.yaml:4:5: warning: `tool_policy: allowlist` with an empty `allowed_tools` blocks every tool",
        ]
    );
    // With servers declared, an undeclared id is a warning (with a suggestion): the agent's
    // own configuration may start it.
    assert_eq!(
        warnings(
            "sandbox:\n  mcp:\n    servers: [{id: filesystem, command: x}]\n    rate_limits:\n      per_server: {filesystm: {rpm: 1}}\n"
        ),
        [
            "p.yaml:5:20: warning: rate limit for server `filesystm`, which `servers` does not declare: it applies only if a server of that name is started (by the agent's own MCP configuration); did you mean `filesystem`?"
        ]
    );
}

#[test]
fn yaml_syntax_errors_have_positions() {
    let errs = errors("sandbox:\n  mcp:\n    rules: [a, b\n");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("p.yaml:4:1: error: invalid YAML:"),
        "{errs:?}"
    );
    let errs = errors("sandbox:\n\tmcp: {}\n");
    assert!(errs[0].contains("invalid YAML"), "{errs:?}");
}

#[test]
fn shipped_default_policy_loads_cleanly() {
    let p = load_file(&shipped("default.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let m = p.mcp();
    assert!(m.enforce_policy && !m.fail_closed);
    assert!(
        m.blocked_tools.is_empty(),
        "default must not block tools by name"
    );
    assert_eq!(m.detection.on_detection, Action::Alert);
    assert_eq!(m.detection.alert_threshold, Severity::Medium);
    assert_eq!(m.output_inspection.on_detection, Action::Alert);
    assert_eq!(m.version_pinning.on_change, PinAction::Block);
    assert!(m.version_pinning.auto_trust_first);
    assert_eq!(m.server_requests.sampling, RequestAction::Block);
    assert_eq!(m.server_requests.elicitation, RequestAction::Block);
    let cs = &m.cross_server;
    assert!(cs.enabled);
    for action in [
        cs.shadow_tool.action,
        cs.read_then_send.action,
        cs.cross_server_flow.action,
        cs.burst.action,
        cs.name_similarity.action,
    ] {
        assert_eq!(action, Action::Alert);
    }
    check_protective_rules(&p, false);
}

#[test]
fn shipped_strict_policy_loads_cleanly() {
    let p = load_file(&shipped("strict.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let m = p.mcp();
    assert!(m.enforce_policy && m.fail_closed);
    assert_eq!(m.server_policy, ListPolicy::Allowlist);
    assert_eq!(m.tool_policy, ListPolicy::Allowlist);
    assert!(!m.allowed_servers.is_empty() && !m.allowed_tools.is_empty());
    assert!(
        m.allowed_tools
            .iter()
            .any(|t| t.matches("git", "git_diff_staged"))
    );
    assert!(
        !m.allowed_tools
            .iter()
            .any(|t| t.matches("git", "git_reset"))
    );
    assert_eq!(m.detection.on_detection, Action::Block);
    assert_eq!(m.detection.alert_threshold, Severity::Medium);
    assert_eq!(m.output_inspection.on_detection, Action::Block);
    assert_eq!(m.version_pinning.on_change, PinAction::Block);
    assert!(m.version_pinning.pin_binary);
    assert!(m.rate_limits.enabled);
    let cs = &m.cross_server;
    for action in [
        cs.shadow_tool.action,
        cs.read_then_send.action,
        cs.cross_server_flow.action,
        cs.burst.action,
        cs.name_similarity.action,
    ] {
        assert_eq!(action, Action::Block);
    }
    check_protective_rules(&p, true);
}

/// The verdict the shipped rules give one call: the most restrictive matching rule.
fn decide(p: &Policy, tool: &str, value: &str) -> Decision {
    p.mcp()
        .rules
        .iter()
        .filter(|r| r.matches_tool("any", &[], tool))
        .filter(|r| {
            r.arguments.iter().all(|a| match a.selector {
                ArgSelector::AnyString => a.pattern.matches(value),
                ArgSelector::Path(_) => false,
            })
        })
        .map(|r| r.decision)
        .max()
        .unwrap_or(Decision::Allow)
}

fn check_protective_rules(p: &Policy, strict: bool) {
    for (tool, value) in [
        ("read_file", "/home/u/.ssh/id_rsa"),
        ("read_file", "/root/.ssh"),
        ("list_directory", "/home/u/.aws"),
        ("read_file", "/home/u/.aws/credentials"),
        ("read_file", "/home/u/.gnupg/private-keys-v1.d/x.key"),
        ("read_file", "/home/u/.kube/config"),
        ("read_file", "/home/u/.docker/config.json"),
        ("write_file", "/etc/passwd"),
        ("edit_file", "/usr/local/bin/node"),
        ("create_directory", "/boot/x"),
        ("move_file", "/bin/sh"),
        ("fetch", "http://169.254.169.254/latest/meta-data/iam/"),
        ("fetch", "http://169.254.169.254"),
        (
            "fetch",
            "http://metadata.google.internal/computeMetadata/v1/",
        ),
        ("fetch", "http://[fd00:ec2::254]/latest/meta-data"),
    ] {
        assert_eq!(decide(p, tool, value), Decision::Block, "{tool} {value}");
    }
    for (tool, value) in [
        ("read_file", "/home/u/ssh-project/README.md"),
        ("read_file", "/etc/os-release"),
        ("read_file", "/usr/include/stdio.h"),
        ("write_file", "/home/u/src/etc/config.rs"),
        ("write_file", "/home/u/project/src/main.rs"),
        ("fetch", "https://docs.rs/regex"),
        ("fetch", "http://169.254.169.2540/"),
    ] {
        assert_eq!(decide(p, tool, value), Decision::Allow, "{tool} {value}");
    }
    if strict {
        assert_eq!(decide(p, "read_file", "/repo/.env"), Decision::Block);
        assert_eq!(decide(p, "write_file", "/opt/x"), Decision::Block);
    }
}

#[test]
fn load_file_errors() {
    let err = load_file(&shipped("does-not-exist.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(err.to_string().contains("does-not-exist.yaml: cannot read"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.yaml");
    std::fs::write(&path, b"sandbox:\n  mcp: {fail_closed: \xff}\n").unwrap();
    let err = load_file(&path).unwrap_err();
    let d = &err.diagnostics()[0];
    assert_eq!((d.line, d.column), (2, 22));
    assert_eq!(d.origin, path.display().to_string());
    assert!(d.message.contains("UTF-8"));

    std::fs::write(&path, "sandbox:\n  mcp:\n    fail_closed: 2\n").unwrap();
    let err = check_file(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3:18: error: `sandbox.mcp.fail_closed` must be true or false, found the number `2`",
            path.display()
        )
    );
}

#[test]
fn oversized_input_is_refused() {
    let big = format!("# {}\n", "x".repeat(MAX_POLICY_BYTES));
    assert!(errors(&big)[0].contains("larger than"));
}

/// A small deterministic generator, so garbage tests are reproducible without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn garbage_never_panics() {
    let seeds = [
        std::fs::read_to_string(shipped("default.yaml")).unwrap(),
        std::fs::read_to_string(shipped("strict.yaml")).unwrap(),
    ];
    let alphabet: Vec<char> = " \n\t:-[]{},'\"&*!|>#%@`?\\~0aZ.é\u{feff}\0"
        .chars()
        .collect();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for round in 0..600 {
        let seed = &seeds[round % seeds.len()];
        let mut chars: Vec<char> = seed.chars().collect();
        for _ in 0..1 + rng.below(8) {
            let at = rng.below(chars.len() + 1);
            match rng.below(3) {
                0 if at < chars.len() => {
                    chars.remove(at);
                }
                1 if at < chars.len() => chars[at] = alphabet[rng.below(alphabet.len())],
                _ => chars.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        let src: String = chars.into_iter().collect();
        let _ = load_str(&src, "fuzz.yaml");
    }
    for _ in 0..2000 {
        let len = rng.below(64);
        let src: String = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        let _ = load_str(&src, "fuzz.yaml");
    }
    // Every prefix of a small policy (truncated files).
    let small =
        "sandbox:\n  mcp:\n    rules:\n      - {id: r, match: {tool_name: '*'}, decision: block}\n";
    for (i, _) in small.char_indices() {
        let _ = load_str(&small[..i], "fuzz.yaml");
    }
}
