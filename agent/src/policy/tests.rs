use super::*;
use crate::config::{self, Policy};
use serde_json::json;

fn policy(yaml: &str) -> Policy {
    config::load_str(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn call<'a>(
    server: &'a str,
    tool: &'a str,
    args: &'a Value,
    status: ToolStatus<'a>,
) -> CallRequest<'a> {
    CallRequest {
        server,
        packages: &[],
        tool,
        arguments: args.as_object(),
        status,
    }
}

fn hash(byte: u8) -> ToolHash {
    format!("sha256:{}", hex::encode([byte; 32]))
        .parse()
        .unwrap()
}

#[test]
fn nothing_configured_allows() {
    let p = policy("");
    let args = json!({"path": "/tmp/x"});
    let v = decide_call(
        p.mcp(),
        &call("fs", "read_file", &args, ToolStatus::Unlisted),
    );
    assert_eq!(v.decision, Decision::Allow);
    assert_eq!(v.rule, "default");
}

#[test]
fn most_restrictive_rule_wins_whatever_the_order() {
    let p = policy(
        r#"
sandbox:
  mcp:
    rules:
      - {id: ok, match: {tool_name: "*"}, decision: allow}
      - {id: watch, match: {tool_name: write_file}, decision: audit}
      - {id: no-etc, match: {tool_name: write_file, argument_patterns: {path: "/etc/**"}}, decision: block, reason: "no /etc"}
"#,
    );
    let args = json!({"path": "/etc/passwd"});
    let v = decide_call(
        p.mcp(),
        &call("fs", "write_file", &args, ToolStatus::Unlisted),
    );
    assert_eq!(
        (v.decision, v.rule.as_str()),
        (Decision::Block, "rules/no-etc")
    );
    assert_eq!(v.reason, "no /etc");
    let args = json!({"path": "/tmp/x"});
    let v = decide_call(
        p.mcp(),
        &call("fs", "write_file", &args, ToolStatus::Unlisted),
    );
    assert_eq!(
        (v.decision, v.rule.as_str()),
        (Decision::Audit, "rules/watch")
    );
}

#[test]
fn block_rules_see_normalised_paths_and_names() {
    let p = policy(
        r#"
sandbox:
  mcp:
    blocked_tools: [execute_command]
    rules:
      - {id: ssh, match: {tool_name: read_file, argument_patterns: {path: "**/.ssh/**"}}, decision: block}
      - {id: meta, match: {tool_name: "*", argument_patterns: {"*": "http://169.254.169.254/**"}}, decision: block}
"#,
    );
    for path in [
        "/home/u/project/../../u/.ssh/id_rsa",
        "//home//u/.ssh//id_rsa/",
        "file:///root/.ssh/id_rsa",
        "~/.ssh/id_ed25519",
    ] {
        let args = json!({ "path": path });
        let v = decide_call(
            p.mcp(),
            &call("fs", "read_file", &args, ToolStatus::Unlisted),
        );
        assert!(v.blocks(), "{path} passed");
    }
    let args = json!({"path": "/home/u/ssh-project/README.md"});
    assert!(
        !decide_call(
            p.mcp(),
            &call("fs", "read_file", &args, ToolStatus::Unlisted)
        )
        .blocks()
    );
    // Case and fullwidth forms of a blocked tool name.
    for name in [
        "Execute_Command",
        "ＥＸＥＣＵＴＥ_command",
        "execute_command ",
    ] {
        let args = json!({});
        let v = decide_call(p.mcp(), &call("sh", name, &args, ToolStatus::Unlisted));
        assert!(v.blocks(), "{name:?} passed");
    }
    // Nested, encoded URL.
    let args = json!({"request": {"target": "HTTP://0xA9FEA9FE/latest/meta-data/"}});
    assert!(decide_call(p.mcp(), &call("web", "fetch", &args, ToolStatus::Unlisted)).blocks());
}

#[test]
fn allow_rules_do_not_trust_traversal() {
    let p = policy(
        r#"
sandbox:
  mcp:
    default_decision: block
    rules:
      - {id: project, match: {tool_name: read_file, argument_patterns: {path: "/home/u/project/**"}}, decision: allow}
"#,
    );
    let inside = json!({"path": "/home/u/project/src/main.rs"});
    let v = decide_call(
        p.mcp(),
        &call("fs", "read_file", &inside, ToolStatus::Unlisted),
    );
    // A matching rule decides; the default is for calls no rule matched.
    assert_eq!(
        (v.decision, v.rule.as_str()),
        (Decision::Allow, "rules/project")
    );
    let escape = json!({"path": "/home/u/project/../../../etc/shadow"});
    let v = decide_call(
        p.mcp(),
        &call("fs", "read_file", &escape, ToolStatus::Unlisted),
    );
    assert_eq!((v.decision, v.rule.as_str()), (Decision::Block, "default"));
    assert!(v.blocks());
}

#[test]
fn under_an_allowlist_only_the_catch_all_denial_yields_to_a_named_server() {
    // The design documents' "deny everything not explicitly allowed".
    let p = policy(
        r#"
sandbox:
  mcp:
    server_policy: allowlist
    allowed_servers: [filesystem, "internal-*", payments-test]
    denied_servers: ["*", internal-legacy, "*-test"]
"#,
    );
    let args = json!({});
    let verdict = |server| decide_call(p.mcp(), &call(server, "t", &args, ToolStatus::Unlisted));
    assert!(!verdict("filesystem").blocks());
    assert!(!verdict("internal-wiki").blocks());
    // Any denial but the catch-all is a kill switch, however precisely the server is allowed.
    for server in ["internal-legacy", "weather", "filesystem2", "payments-test"] {
        let v = verdict(server);
        assert!(v.blocks(), "{server}");
        assert_eq!(v.rule, "denied_servers", "{server}");
    }
    // Outside an allowlist a denial always wins.
    let p = policy("sandbox: {mcp: {allowed_servers: [filesystem], denied_servers: ['*']}}");
    let v = decide_call(
        p.mcp(),
        &call("filesystem", "t", &args, ToolStatus::Unlisted),
    );
    assert!(v.blocks());
}

#[test]
fn withheld_and_unlisted_tools() {
    let p = policy("sandbox: {mcp: {fail_closed: true, servers: [{id: fs, command: x}]}}");
    let args = json!({});
    let h = hash(1);
    let v = decide_call(
        p.mcp(),
        &call(
            "fs",
            "t",
            &args,
            ToolStatus::Withheld {
                hash: &h,
                rule: "version_pinning",
                reason: "definition changed",
            },
        ),
    );
    assert!(v.blocks());
    assert_eq!(v.rule, "version_pinning");
    let v = decide_call(p.mcp(), &call("fs", "t", &args, ToolStatus::Unlisted));
    assert_eq!(v.rule, "fail_closed");
    assert!(v.blocks());
    let v = decide_call(p.mcp(), &call("fs", "t", &args, ToolStatus::Listed(&h)));
    assert!(!v.blocks());
    // An undeclared server under fail_closed.
    let v = decide_call(p.mcp(), &call("other", "t", &args, ToolStatus::Listed(&h)));
    assert!(v.blocks());
    assert!(v.reason.contains("not declared"), "{}", v.reason);
}

#[test]
fn server_and_tool_lists() {
    let h1 = hash(1);
    let h2 = hash(2);
    let p = policy(&format!(
        r#"
sandbox:
  mcp:
    server_policy: allowlist
    allowed_servers: ["fs", "git-*"]
    denied_servers: ["git-evil"]
    tool_policy: allowlist
    allowed_tools:
      - {{server: fs, tool: read_file, content_hash: "{h1}"}}
      - {{server: "git-*", tool: "*"}}
    denied_tools:
      - {{server: "*", tool: "delete_*"}}
"#
    ));
    let args = json!({});
    let d = |server, tool, status| decide_call(p.mcp(), &call(server, tool, &args, status));
    assert!(!d("fs", "read_file", ToolStatus::Listed(&h1)).blocks());
    let changed = d("fs", "read_file", ToolStatus::Listed(&h2));
    assert!(changed.blocks() && changed.reason.contains("content_hash"));
    assert!(d("fs", "write_file", ToolStatus::Listed(&h1)).blocks());
    assert!(!d("git-main", "log", ToolStatus::Unlisted).blocks());
    assert!(d("git-main", "delete_branch", ToolStatus::Unlisted).blocks());
    assert_eq!(
        d("git-evil", "log", ToolStatus::Unlisted).rule,
        "denied_servers"
    );
    assert_eq!(
        d("web", "fetch", ToolStatus::Unlisted).rule,
        "server_policy"
    );
}

#[test]
fn audit_only_mode_records_but_does_not_block() {
    let p = policy("sandbox: {mcp: {enforce_policy: false, blocked_tools: [rm]}}");
    let args = json!({});
    let v = decide_call(p.mcp(), &call("sh", "rm", &args, ToolStatus::Unlisted));
    assert_eq!(v.decision, Decision::Block);
    assert!(!v.enforced);
    assert!(!v.blocks());
}

#[test]
fn numeric_and_array_arguments_are_matched() {
    let p = policy(
        r#"
sandbox:
  mcp:
    rules:
      - {id: suid, match: {tool_name: chmod, argument_patterns: {mode: {regex: "^[2-7][0-7]{3}$"}}}, decision: block}
      - {id: ssh, match: {tool_name: read_many, argument_patterns: {paths: "**/.ssh/**"}}, decision: block}
      - {id: nested, match: {tool_name: call, argument_patterns: {opts.target: "/etc/**"}}, decision: block}
"#,
    );
    let args = json!({"mode": 4755});
    assert!(decide_call(p.mcp(), &call("s", "chmod", &args, ToolStatus::Unlisted)).blocks());
    let args = json!({"paths": ["/tmp/a", "/home/u/.ssh/id_rsa"]});
    assert!(
        decide_call(
            p.mcp(),
            &call("s", "read_many", &args, ToolStatus::Unlisted)
        )
        .blocks()
    );
    let args = json!({"opts": {"target": "/etc/shadow"}});
    assert!(decide_call(p.mcp(), &call("s", "call", &args, ToolStatus::Unlisted)).blocks());
    let args = json!({"target": "/etc/shadow"});
    assert!(!decide_call(p.mcp(), &call("s", "call", &args, ToolStatus::Unlisted)).blocks());
}

#[test]
fn spellings_servers_accept_do_not_dodge_block_rules() {
    let p = policy(
        r#"
sandbox:
  mcp:
    rules:
      - {id: meta, match: {tool_name: "*", argument_patterns: {"*": "http{,s}://169.254.169.254{,/**}"}}, decision: block}
      - {id: etc, match: {tool_name: "*", argument_patterns: {path: "/etc{,/**}"}}, decision: block}
      - {id: ssh, match: {tool_name: "*", argument_patterns: {"*": "**/.ssh{,/**}"}}, decision: block}
      - {id: suid, match: {tool_name: chmod, argument_patterns: {mode: "4755"}}, decision: block}
"#,
    );
    let blocked = |args: Value| {
        decide_call(p.mcp(), &call("s", "chmod", &args, ToolStatus::Unlisted)).blocks()
    };
    for url in [
        "http://%31%36%39.254.169.254/latest/meta-data/",
        "http://169.254.169.254\\latest\\meta-data",
        "http:169.254.169.254/latest",
        "http://[::ffff:a9fe:a9fe]/",
        "http://169.254.16\t9.254/latest",
        "http://169.254.169.254",
    ] {
        assert!(blocked(json!({ "url": url })), "{url:?} passed");
    }
    for path in [
        "file:/etc/cron.d/x",
        "FILE:///etc/cron.d/x",
        "file:///%65tc/cron.d/x",
        "/proc/self/root/etc/cron.d/x",
        "../../../../../../etc/cron.d/x",
    ] {
        assert!(blocked(json!({ "path": path })), "{path:?} passed");
        assert!(blocked(json!({ "Path": path })), "Path: {path:?} passed");
        assert!(
            blocked(json!({ "path": {"p": path} })),
            "nested {path:?} passed"
        );
    }
    assert!(blocked(json!({"x": "file:///home/u/%2essh/id_rsa"})));
    for mode in [json!(4755), json!(4755.0), json!(4.755e3), json!("4755")] {
        assert!(blocked(json!({ "mode": mode })), "{mode} passed");
    }
    assert!(!blocked(
        json!({"mode": 755.0, "path": "/home/u/etc/x", "url": "https://example.com/169.254.169.254"})
    ));
}

#[test]
fn package_rules_match_what_a_server_runs_from_whatever_its_name() {
    let p = policy(
        r#"
sandbox:
  mcp:
    rules:
      - {id: fs-ro, match: {package: "@modelcontextprotocol/server-filesystem", tool_name: write_file}, decision: block, reason: "read-only"}
      - {id: mcp-images, match: {package: "mcp/*", tool_name: "*"}, decision: audit}
"#,
    );
    let args = json!({"path": "/tmp/x"});
    let with = |server, package: Option<&str>, tool| {
        let packages: Vec<String> = package.into_iter().map(str::to_owned).collect();
        decide_call(
            p.mcp(),
            &CallRequest {
                packages: &packages,
                ..call(server, tool, &args, ToolStatus::Unlisted)
            },
        )
    };
    // Named anything by the user's configuration: the package decides.
    let v = with(
        "notes",
        Some("@modelcontextprotocol/server-filesystem"),
        "write_file",
    );
    assert_eq!(
        (v.decision, v.rule.as_str()),
        (Decision::Block, "rules/fs-ro")
    );
    assert_eq!(
        with(
            "notes",
            Some("@modelcontextprotocol/server-filesystem"),
            "read_file"
        )
        .decision,
        Decision::Allow
    );
    assert_eq!(
        with("fetch", Some("mcp/fetch"), "fetch").decision,
        Decision::Audit
    );
    // Another package, or none known: the rule does not apply.
    assert_eq!(
        with("notes", Some("@acme/notes-mcp-server"), "write_file").decision,
        Decision::Allow
    );
    assert_eq!(with("notes", None, "write_file").decision, Decision::Allow);
    // A server seen starting from two packages: a block rule holds if either matches; an
    // audit rule only if both do.
    let two = [
        "@modelcontextprotocol/server-filesystem".to_owned(),
        "x".to_owned(),
    ];
    let v = decide_call(
        p.mcp(),
        &CallRequest {
            packages: &two,
            ..call("notes", "write_file", &args, ToolStatus::Unlisted)
        },
    );
    assert_eq!(v.decision, Decision::Block);
    let images = ["mcp/fetch".to_owned(), "x".to_owned()];
    let v = decide_call(
        p.mcp(),
        &CallRequest {
            packages: &images,
            ..call("fetch", "fetch", &args, ToolStatus::Unlisted)
        },
    );
    assert_eq!(v.decision, Decision::Allow);
}

#[test]
fn every_place_a_policy_names_servers_is_a_reference_with_its_line() {
    let p = policy(
        "sandbox:\n  mcp:\n    denied_servers: [evil, \"*\"]\n    tool_policy: denylist\n    denied_tools:\n      - {server: \"gh*\", tool: delete_repo}\n    rules:\n      - {id: r1, match: {server: fs, tool_name: x}, decision: block}\n      - {id: any, match: {tool_name: y}, decision: block}\n    rate_limits:\n      per_server: {memory: {rpm: 5}}\n",
    );
    let refs: Vec<(String, String, usize)> = p
        .mcp()
        .server_references()
        .into_iter()
        .map(|r| {
            (
                r.context,
                r.glob.as_str().to_owned(),
                r.at.map_or(0, |a| a.line),
            )
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("rules[r1].match.server".to_owned(), "fs".to_owned(), 8),
            ("denied_servers".to_owned(), "evil".to_owned(), 3),
            (
                "denied_tools[delete_repo].server".to_owned(),
                "gh*".to_owned(),
                6
            ),
            (
                "rate_limits.per_server.memory".to_owned(),
                "memory".to_owned(),
                11
            ),
        ]
    );
}

#[test]
fn an_allow_rule_vouches_only_for_calls_whose_every_selected_value_matches() {
    let p = policy(
        r#"
sandbox:
  mcp:
    default_decision: block
    rules:
      - {id: files, match: {tool_name: read_text_file, argument_patterns: {path: "/home/u/project/**"}}, decision: allow}
      - {id: many, match: {tool_name: read_multiple_files, argument_patterns: {paths: "/home/u/project/**"}}, decision: allow}
      - {id: any, match: {tool_name: grep, argument_patterns: {"*": "/home/u/project/**"}}, decision: allow}
"#,
    );
    let decide = |tool: &str, args: Value| {
        let v = decide_call(p.mcp(), &call("fs", tool, &args, ToolStatus::Unlisted));
        (v.decision, v.rule)
    };
    let allowed = |rule: &str| (Decision::Allow, format!("rules/{rule}"));
    let blocked = (Decision::Block, "default".to_owned());
    assert_eq!(
        decide("read_text_file", json!({"path": "/home/u/project/a"})),
        allowed("files")
    );
    // A key in another case, which a Go server reads instead of `path`.
    assert_eq!(
        decide(
            "read_text_file",
            json!({"path": "/home/u/project/a", "PATH": "/etc/shadow"})
        ),
        blocked
    );
    assert_eq!(
        decide(
            "read_multiple_files",
            json!({"paths": ["/home/u/project/a", "/home/u/project/b"]})
        ),
        allowed("many")
    );
    assert_eq!(
        decide(
            "read_multiple_files",
            json!({"paths": ["/home/u/project/a", "/etc/shadow"]})
        ),
        blocked
    );
    assert_eq!(decide("read_multiple_files", json!({"paths": []})), blocked);
    assert_eq!(
        decide(
            "grep",
            json!({"path": "/home/u/project/src", "x": "/home/u/project/a"})
        ),
        allowed("any")
    );
    // Another argument the server ignores, or acts on: it must match too.
    assert_eq!(
        decide(
            "grep",
            json!({"path": "/etc/shadow", "x": "/home/u/project/a"})
        ),
        blocked
    );
    assert_eq!(decide("grep", json!({})), blocked);
}
