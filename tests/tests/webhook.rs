//! Alerts: a block in a session reaches the webhook (`on_detection.webhook_url`) as it happens,
//! and a webhook that is down when the block happens gets it once it is back (retried with
//! backoff), while the session never waited for it. Needs root (cgroup sessions).

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, client, skip_unless_root, steps};
use agentsh_tests::recorder::Recorder;

const MEMORY: &str = "npx -y @modelcontextprotocol/server-memory";

#[test]
fn blocks_reach_the_webhook_and_an_outage_only_delays_them() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The webhook's address, with nobody listening yet: the first attempts are refused.
    let addr: SocketAddr = TcpListener::bind("127.0.0.13:0")
        .and_then(|probe| probe.local_addr())
        .unwrap();
    let daemon = Daemon::start_with(
        dir.path(),
        r#"
sandbox:
  mcp:
    rules:
      - {id: no-reading, match: {server: memory, tool_name: read_graph}, decision: block, reason: "no reading the graph"}
"#,
        &format!("on_detection:\n  webhook_url: http://{addr}/agentsh\n"),
    );
    let started = Instant::now();
    let steps_json = r#"[{"op":"list"},{"op":"call","name":"read_graph","arguments":{}}]"#;
    let out = daemon.run_session("alerts", &client(steps_json, MEMORY));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);
    let answers = steps(&out.stdout);
    assert_eq!(answers[1]["ok"], false, "{}", answers[1]);
    // The session did not wait for the webhook (its retries run for seconds).
    let session_took = started.elapsed();

    // Back up, and refusing once more (503) before it accepts.
    let webhook = Recorder::start(
        TcpListener::bind(addr).expect("the webhook's port again"),
        1,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let alert = loop {
        let found = webhook
            .accepted()
            .iter()
            .find(|e| e["event"] == "mcp_tool_called" && e["tool"] == "read_graph")
            .cloned();
        if let Some(alert) = found {
            break alert;
        }
        assert!(
            Instant::now() < deadline,
            "no alert in 60 s; the session took {session_took:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(alert["action"], "block", "{alert}");
    assert_eq!(alert["server"], "memory", "{alert}");
    assert_eq!(alert["reason"], "no reading the graph", "{alert}");
    assert!(alert["session"].is_string(), "{alert}");
    assert!(webhook.requests() >= 2, "the 503 was not retried");
    assert_eq!(webhook.header("x-agentsh-dropped")[0], "0");
    // Only alerts are sent: the allowed list and the session's start are not.
    let accepted = webhook.accepted();
    assert!(
        accepted
            .iter()
            .all(|e| e["action"] == "block" || e["severity"] == "critical"),
        "{accepted:#?}"
    );
}
