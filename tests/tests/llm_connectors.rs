//! B2 (issue 18): a request that asks the provider to call MCP servers itself (Anthropic's
//! `mcp_servers`, a Responses `{"type": "mcp"}` tool) is judged before it leaves: a server the
//! policy does not allow is refused, the official SDK sees why, and the upstream never sees the
//! request; an allowed one goes, recorded as a provider-side connection.

use agentsh_tests::daemon::Daemon;
use agentsh_tests::llm::{FakeUpstream, sdk};
use serde_json::Value;

const POLICY: &str = r#"
sandbox:
  mcp:
    servers:
      - {id: wiki, type: http, url: "https://mcp.deepwiki.com/mcp"}
      - {id: evil, type: http, url: "https://evil.example/mcp"}
      - {id: filesystem, type: stdio, command: npx}
    denied_servers: [evil]
"#;

fn through(daemon: &Daemon, api: &str, scenario: &str, servers: &[&str]) -> agentsh_tests::Output {
    let proxy = daemon.proxy.as_deref().expect("agentshd serves the proxy");
    let base = match api {
        "anthropic" => format!("http://{proxy}/anthropic"),
        _ => format!("http://{proxy}/openai/v1"),
    };
    let mut args = vec!["--api", api, "--base-url", &base, "--scenario", scenario];
    for server in servers {
        args.extend(["--mcp-server", server]);
    }
    sdk(&args)
}

#[test]
fn provider_side_mcp_servers_are_judged_before_the_request_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = Daemon::start_with(
        dir.path(),
        POLICY,
        &format!(
            "proxy:\n  listen: 127.0.0.1:0\n  mode: embedded\nproviders:\n  anthropic: {{upstream: \"{0}\"}}\n  openai: {{upstream: \"{0}\"}}\n",
            upstream.url
        ),
    );
    let refused = [
        // Declared and denied, under any label.
        (
            "anthropic",
            "anthropic_tools",
            "docs=https://evil.example/mcp",
            "server 'evil' is denied",
        ),
        (
            "responses",
            "responses_tools",
            "docs=https://evil.example/mcp/",
            "server 'evil' is denied",
        ),
        // A label that borrows a declared server's name for another URL.
        (
            "anthropic",
            "anthropic_tools",
            "filesystem=https://exfil.example/mcp",
            "names declared server 'filesystem'",
        ),
    ];
    for (api, scenario, server, why) in refused {
        let out = through(&daemon, api, scenario, &[server]);
        assert!(!out.status.success(), "{api} {server}: {}", out.stdout);
        assert!(
            out.stderr.contains("403") && out.stderr.contains(why),
            "{api} {server}: {}",
            out.stderr
        );
    }
    assert!(
        upstream.requests().is_empty(),
        "a refused request reached the upstream"
    );

    for (api, scenario) in [
        ("anthropic", "anthropic_tools"),
        ("responses", "responses_tools"),
    ] {
        let out = through(
            &daemon,
            api,
            scenario,
            &["docs=https://mcp.deepwiki.com/mcp"],
        );
        assert!(out.status.success(), "{api}: {}", out.stderr);
    }
    assert_eq!(upstream.requests().len(), 2);

    let events = daemon.json_lines(&[
        "mcp",
        "events",
        "--type",
        "mcp_network_connection",
        "--json",
    ]);
    let provider_side: Vec<&Value> = events
        .iter()
        .filter(|e| e["details"]["provider_side"] == true)
        .collect();
    let summary: Vec<(String, String)> = provider_side
        .iter()
        .map(|e| {
            (
                e["server"].as_str().unwrap_or_default().to_owned(),
                e["action"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let count = |server: &str, action: &str| {
        summary
            .iter()
            .filter(|(s, a)| s == server && a == action)
            .count()
    };
    assert_eq!(count("evil", "block"), 2, "{summary:?}");
    assert_eq!(count("filesystem", "block"), 1, "{summary:?}");
    assert_eq!(count("wiki", "allow"), 2, "{summary:?}");
}
