//! B2 (issue 18): a request that asks the provider to call MCP servers itself (Anthropic's
//! `mcp_servers`, a Responses `{"type": "mcp"}` tool) is judged before it leaves: a server the
//! policy does not allow is refused, the official SDK sees why, and the upstream never sees the
//! request; an allowed one goes, recorded as a provider-side connection, and the calls the
//! provider makes through it are recorded as calls of the server its URL names.

use agentsh_tests::daemon::Daemon;
use agentsh_tests::llm::{FakeUpstream, sdk};
use serde_json::{Value, json};

const POLICY: &str = r#"
sandbox:
  mcp:
    servers:
      - {id: wiki, type: http, url: "https://mcp.deepwiki.com/mcp"}
      - {id: evil, type: http, url: "https://evil.example/mcp"}
      - {id: filesystem, type: stdio, command: npx}
    denied_servers: [evil]
    denied_tools: [{server: wiki, tool: delete_page}]
"#;

fn through(daemon: &Daemon, api: &str, scenario: &str, servers: &[&str]) -> agentsh_tests::Output {
    through_with(daemon, api, scenario, servers, &[])
}

fn through_with(
    daemon: &Daemon,
    api: &str,
    scenario: &str,
    servers: &[&str],
    extra: &[&str],
) -> agentsh_tests::Output {
    let proxy = daemon.proxy.as_deref().expect("agentshd serves the proxy");
    let base = match api {
        "anthropic" => format!("http://{proxy}/anthropic"),
        _ => format!("http://{proxy}/openai/v1"),
    };
    let mut args = vec!["--api", api, "--base-url", &base, "--scenario", scenario];
    for server in servers {
        args.extend(["--mcp-server", server]);
    }
    args.extend(extra);
    sdk(&args)
}

fn daemon_before(upstream: &FakeUpstream, dir: &std::path::Path) -> Daemon {
    Daemon::start_with(
        dir,
        POLICY,
        &format!(
            "proxy:\n  listen: 127.0.0.1:0\n  mode: embedded\nproviders:\n  anthropic: {{upstream: \"{0}\"}}\n  openai: {{upstream: \"{0}\"}}\n",
            upstream.url
        ),
    )
}

#[test]
fn provider_side_mcp_servers_are_judged_before_the_request_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = daemon_before(&upstream, dir.path());
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

#[test]
fn calls_the_provider_makes_are_recorded_as_the_servers_and_approvals_are_judged() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = daemon_before(&upstream, dir.path());
    // The label is the request's; the server is the one its URL names (wiki).
    let server = ["docs=https://mcp.deepwiki.com/mcp"];
    for (api, scenario) in [
        ("anthropic", "anthropic_connector"),
        ("responses", "responses_connector"),
    ] {
        for stream in [false, true] {
            let extra: &[&str] = if stream { &["--stream"] } else { &[] };
            let out = through_with(&daemon, api, scenario, &server, extra);
            assert!(
                out.status.success(),
                "{api} stream={stream}: {}",
                out.stderr
            );
            let answer: Value = serde_json::from_str(out.stdout.trim()).unwrap();
            let choice = &answer["choices"][0];
            let provider_calls: Vec<(&str, &str)> = choice["provider_calls"]
                .as_array()
                .unwrap_or_else(|| panic!("{api} stream={stream}: {answer}"))
                .iter()
                .map(|c| (c["type"].as_str().unwrap(), c["name"].as_str().unwrap()))
                .collect();
            let text = choice["text"].as_str().unwrap_or_default();
            if api == "anthropic" {
                // Made already: they pass, as the SDK reads them.
                assert_eq!(
                    provider_calls,
                    [
                        ("mcp_tool_use", "ask_question"),
                        ("mcp_tool_use", "delete_page")
                    ],
                    "stream={stream}"
                );
            } else {
                // The request for approval of a denied tool never reaches the agent.
                assert_eq!(
                    provider_calls,
                    [("mcp_call", "ask_question")],
                    "stream={stream}"
                );
                assert!(
                    text.contains("[agentsh] Tool 'delete_page' blocked by policy"),
                    "stream={stream}: {text}"
                );
            }
        }
    }

    let called = daemon.json_lines(&["mcp", "events", "--type", "mcp_tool_called", "--json"]);
    let provider: Vec<(String, String, String, String)> = called
        .iter()
        .filter(|e| e["details"]["origin"] == "provider")
        .map(|e| {
            let field = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                field(&e["details"]["dialect"]),
                field(&e["server"]),
                field(&e["tool"]),
                field(&e["action"]),
            )
        })
        .collect();
    let count = |dialect: &str, tool: &str, action: &str| {
        provider
            .iter()
            .filter(|(d, s, t, a)| d == dialect && s == "wiki" && t == tool && a == action)
            .count()
    };
    // Each response, buffered and streamed, told once per call.
    assert_eq!(
        count("anthropic_messages", "ask_question", "allow"),
        2,
        "{provider:?}"
    );
    assert_eq!(
        count("anthropic_messages", "delete_page", "alert"),
        2,
        "{provider:?}"
    );
    assert_eq!(
        count("openai_responses", "ask_question", "allow"),
        2,
        "{provider:?}"
    );
    assert_eq!(provider.len(), 6, "{provider:?}");

    let intercepted = daemon.json_lines(&[
        "mcp",
        "events",
        "--type",
        "mcp_tool_call_intercepted",
        "--json",
    ]);
    let refused: Vec<&Value> = intercepted
        .iter()
        .filter(|e| e["details"]["origin"] == "provider")
        .collect();
    assert_eq!(refused.len(), 2, "{intercepted:?}");
    for event in refused {
        assert_eq!(
            (&event["server"], &event["tool"], &event["action"]),
            (&json!("wiki"), &json!("delete_page"), &json!("block"))
        );
    }
}
