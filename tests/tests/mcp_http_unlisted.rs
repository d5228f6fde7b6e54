//! A 2026-07-28 client with a cached listing calls a network server's tool without listing it
//! in this session. On the transparent path agentshd lists a declared server's tools itself as
//! the session starts, so a tool held back by detection is refused to that client as it is to
//! one that listed (a 2025-11-25 client, here the MCP Python SDK's over its HTTP session); the
//! server never runs it. A 2025-11-25 request whose MCP headers disagree with its body is
//! refused as a 2026-07-28 one is.

use agentsh_tests::daemon::Daemon;
use agentsh_tests::mcp2;

#[test]
fn a_withheld_network_tool_is_refused_in_both_eras_listed_or_not() {
    if !agentsh_tests::kernel::can_load_hooks("mcp_http_unlisted") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ip = "127.0.0.21";
    // The MCP Python SDK's HTTP server with a poisoned `multiply`.
    let (server, url) = mcp2::http_server(ip, &["--poisoned"]);
    let daemon = Daemon::start_with(
        dir.path(),
        &format!(
            "sandbox:\n  mcp:\n    detection: {{on_detection: block}}\n    servers:\n      - {{id: calc, type: http, url: \"{url}\"}}\n"
        ),
        &format!(
            "kernel:\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [{ip}]\n"
        ),
    );
    let mut client = mcp2::client_command(
        "2026-07-28",
        &["--no-list", "--url", &url],
        &["multiply:{\"a\":6,\"b\":7}", "add:{\"a\":1,\"b\":2}"],
        &[],
    );
    // No server command: the URL names it.
    client.pop();
    let quoted = |line: Vec<String>| {
        line.iter()
            .map(|word| format!("'{}'", word.replace('\'', r"'\''")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // And a 2025-11-25 client, which lists (its session with the server ends with a DELETE).
    let mut legacy = mcp2::client_command(
        "legacy",
        &["--url", &url],
        &["multiply:{\"a\":6,\"b\":7}", "add:{\"a\":1,\"b\":2}"],
        &[],
    );
    legacy.pop();
    // A 2025-11-25 POST whose Mcp-Name header names a harmless tool and its body another: the
    // headers are optional in that revision, but one that disagrees is refused all the same.
    let smuggle = format!(
        r#"python3 -c "
import json, urllib.request, urllib.error
body = {{'jsonrpc': '2.0', 'id': 9, 'method': 'tools/call', 'params': {{'name': 'multiply', 'arguments': {{'a': 1, 'b': 1}}}}}}
req = urllib.request.Request('{url}', data=json.dumps(body).encode(), method='POST', headers={{
  'content-type': 'application/json', 'accept': 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25', 'mcp-method': 'tools/call', 'mcp-name': 'add'}})
try:
    urllib.request.urlopen(req); print(json.dumps({{'status': 200}}))
except urllib.error.HTTPError as e:
    print(json.dumps({{'status': e.code, 'body': json.loads(e.read())}}))
""#
    );
    let script = format!("{} && {} && {smuggle}", quoted(client), quoted(legacy));
    let out = daemon.run_session("unlisted", &script);
    drop(server);
    assert!(
        out.status.success(),
        "{}\n{}\nagentshd:\n{}",
        out.stdout,
        out.stderr,
        daemon.stderr()
    );
    let answers: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(answers.len(), 3, "{}", out.stdout);
    let smuggled = &answers[2];
    assert_eq!(smuggled["status"], 400, "{smuggled}");
    assert_eq!(smuggled["body"]["error"]["code"], -32020, "{smuggled}");
    for (answer, version) in answers.iter().zip(["2026-07-28", "2025-11-25"]) {
        assert_eq!(answer["protocol_version"], version, "{answer}");
        let calls = mcp2::calls(answer);
        assert!(
            !calls[0].1 && calls[0].2.contains("detection"),
            "{version}: multiply was not refused: {calls:?}\nagentshd:\n{}",
            daemon.stderr()
        );
        assert_eq!(
            calls[1],
            ("add".to_owned(), true, "3".to_owned()),
            "{version}"
        );
    }
    let session = daemon.session_id("unlisted");
    let refused = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
    assert!(
        refused.iter().any(|e| e["tool"] == "multiply"
            && e["action"] == "block"
            && e["event"] != "mcp_detection"),
        "{refused:#?}"
    );
}
