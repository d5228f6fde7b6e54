//! Alerts: a block in a session reaches the webhook (`on_detection.webhook_url`) as it happens,
//! and a webhook that is down when the block happens gets it once it is back (retried with
//! backoff), while the session never waited for it. Needs root (cgroup sessions).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, client, skip_unless_root, steps};
use serde_json::Value;

const MEMORY: &str = "npx -y @modelcontextprotocol/server-memory";

/// A webhook stand-in: answers 503 to the first `refuse` requests, 200 after; keeps the
/// bodies it accepted and counts every request.
#[derive(Default)]
struct Received {
    accepted: Vec<Value>,
    requests: usize,
    dropped_header: Vec<String>,
}

fn serve(listener: TcpListener, refuse: usize, received: Arc<Mutex<Received>>) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let received = Arc::clone(&received);
            std::thread::spawn(move || {
                let _ = answer(stream, refuse, &received);
            });
        }
    });
}

/// Requests of one keep-alive connection, until it closes.
fn answer(stream: TcpStream, refuse: usize, received: &Mutex<Received>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut length = 0;
        let mut dropped = String::new();
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
                if name.eq_ignore_ascii_case("x-agentsh-dropped") {
                    dropped = value.trim().to_owned();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let status = {
            let mut received = received.lock().unwrap();
            received.requests += 1;
            if received.requests <= refuse {
                "503 Service Unavailable"
            } else {
                received
                    .accepted
                    .push(serde_json::from_slice(&body).expect("a JSON event"));
                received.dropped_header.push(dropped);
                "200 OK"
            }
        };
        write!(out, "HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n")?;
    }
}

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
    let received = Arc::new(Mutex::new(Received::default()));
    serve(
        TcpListener::bind(addr).expect("the webhook's port again"),
        1,
        Arc::clone(&received),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let alert = loop {
        let found = received
            .lock()
            .unwrap()
            .accepted
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
    let received = received.lock().unwrap();
    assert!(received.requests >= 2, "the 503 was not retried");
    assert_eq!(received.dropped_header[0], "0");
    // Only alerts are sent: the allowed list and the session's start are not.
    assert!(
        received
            .accepted
            .iter()
            .all(|e| e["action"] == "block" || e["severity"] == "critical"),
        "{:#?}",
        received.accepted
    );
}
