//! The audit trail exported to an OpenTelemetry collector stand-in (OTLP/HTTP, JSON logs):
//! sessions' events arrive as log records; a collector outage in the middle only delays the
//! export, and afterwards every event has arrived exactly once, in order. Needs root (cgroup
//! sessions).

use std::net::TcpListener;
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::recorder::Recorder;
use serde_json::Value;

/// (seq, event kind, session) of every log record the collector accepted.
fn records(collector: &Recorder) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for body in collector.accepted() {
        for resource in body["resourceLogs"].as_array().into_iter().flatten() {
            for scope in resource["scopeLogs"].as_array().into_iter().flatten() {
                for record in scope["logRecords"].as_array().into_iter().flatten() {
                    let attribute = |key: &str| -> Value {
                        record["attributes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .find(|a| a["key"] == key)
                            .map(|a| a["value"].clone())
                            .unwrap_or(Value::Null)
                    };
                    out.push((
                        attribute("agentsh.seq")["intValue"]
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .expect("a seq"),
                        attribute("agentsh.event")["stringValue"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        attribute("agentsh.session")["stringValue"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    ));
                }
            }
        }
    }
    out
}

fn wait_for(collector: &Recorder, what: &str, done: impl Fn(&[(u64, String, String)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done(&records(collector)) {
        assert!(
            Instant::now() < deadline,
            "{what}: {:#?}",
            records(collector)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_trail_reaches_the_collector_and_an_outage_loses_nothing() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.14:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let collector = Recorder::start(listener, 0);
    let daemon = Daemon::start_with(
        dir.path(),
        "",
        &format!("otlp:\n  endpoint: http://{addr}\n"),
    );
    let ended = |session: String| {
        move |records: &[(u64, String, String)]| {
            records
                .iter()
                .any(|(_, kind, s)| kind == "session_ended" && *s == session)
        }
    };

    let out = daemon.run_session("before", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let before = daemon.session_id("before");
    wait_for(&collector, "the first session's end", ended(before.clone()));

    // The collector fails every request for a while; a session runs meanwhile.
    collector.set_up(false);
    let out = daemon.run_session("during", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let during = daemon.session_id("during");
    let refused_before = collector.requests();
    let deadline = Instant::now() + Duration::from_secs(30);
    while collector.requests() == refused_before {
        assert!(
            Instant::now() < deadline,
            "no export attempt during the outage"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    collector.set_up(true);
    wait_for(
        &collector,
        "the second session after the outage",
        ended(during.clone()),
    );

    // Every event of the trail, once each, in order: nothing skipped, nothing twice.
    let records = records(&collector);
    let seqs: Vec<u64> = records.iter().map(|(seq, _, _)| *seq).collect();
    let first = seqs[0];
    let expected: Vec<u64> = (first..first + seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "{records:#?}");
    assert!(
        records
            .iter()
            .any(|(_, kind, s)| kind == "session_started" && *s == before),
        "{records:#?}"
    );
    // The trail and the export agree on the second session.
    let trail = daemon.json_lines(&["mcp", "events", "--session", &during, "--json"]);
    for event in trail {
        let kind = event["event"].as_str().unwrap();
        assert!(
            records
                .iter()
                .any(|(_, k, s)| k == kind && *s == event["session"]),
            "{kind} of the trail was not exported"
        );
    }
}
