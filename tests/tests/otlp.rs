//! The audit trail exported to an OpenTelemetry collector stand-in (tests/peers/otlp: grpcio
//! and the official OpenTelemetry protos, which decode what agentshd sends strictly), over
//! each OTLP protocol: gRPC (over TLS, gzipped, with an authorization header; and over plain
//! HTTP/2), `http/protobuf` and `http/json`. In the middle of each run the collector refuses requests
//! (UNAVAILABLE / 503) and then goes away and comes back; afterwards every event of the trail
//! has arrived exactly once, in order. Needs root (cgroup sessions).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::llm::TestCa;
use agentsh_tests::repo_root;
use serde_json::Value;

/// The collector stand-in, killed on drop.
struct Collector {
    child: Option<Child>,
    dir: PathBuf,
    kind: &'static str,
    host: &'static str,
    port: u16,
    log: PathBuf,
    tls: Option<(PathBuf, PathBuf)>,
}

impl Collector {
    fn start(
        dir: &Path,
        kind: &'static str,
        host: &'static str,
        tls: Option<(PathBuf, PathBuf)>,
    ) -> Self {
        let mut collector = Self {
            child: None,
            dir: dir.to_owned(),
            kind,
            host,
            port: 0,
            log: dir.join("collector.log"),
            tls,
        };
        collector.restart(0);
        collector
    }

    /// (Re)starts it on its port, refusing the first `unavailable` requests.
    fn restart(&mut self, unavailable: u32) {
        self.stop();
        let peers = repo_root().join("tests/peers/otlp");
        let python = peers.join(".venv/bin/python");
        assert!(
            python.exists(),
            "the OTLP collector stand-in is not installed: run `bash scripts/setup.sh` (make test does)"
        );
        let mut command = Command::new(python);
        command
            .arg(peers.join("collector.py"))
            .arg(format!("--{}", self.kind))
            .args(["--host", self.host, "--port", &self.port.to_string()])
            .arg("--log")
            .arg(&self.log)
            .args(["--unavailable", &unavailable.to_string()])
            .current_dir(&self.dir);
        if let Some((cert, key)) = &self.tls {
            command
                .arg("--tls-cert")
                .arg(cert)
                .arg("--tls-key")
                .arg(key);
        }
        let (child, addr) = agentsh_tests::spawn_listening(command, "collector.py");
        let port = addr
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or_else(|| panic!("collector.py listens on {addr:?}"));
        if self.port != 0 {
            assert_eq!(port, self.port, "the collector came back on another port");
        }
        self.port = port;
        self.child = Some(child);
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn entries(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line {l}: {e}")))
            .collect()
    }

    fn refusals(&self) -> usize {
        self.entries()
            .iter()
            .filter(|e| e["refused"] == true)
            .count()
    }

    /// (seq, event kind, session) of every log record it accepted, in arrival order.
    fn records(&self) -> Vec<(u64, String, String)> {
        let mut out = Vec::new();
        for entry in self.entries() {
            let resources = entry["request"]["resourceLogs"].as_array().cloned();
            for resource in resources.into_iter().flatten() {
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
                                .unwrap_or_else(|| panic!("a seq in {record}")),
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

    fn wait_for_session_end(&self, what: &str, session: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self
            .records()
            .iter()
            .any(|(_, kind, s)| kind == "session_ended" && s == session)
        {
            assert!(Instant::now() < deadline, "{what}: {:#?}", self.records());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs a session before, during and after a collector outage and checks the export.
/// Returns the collector's accepted entries (for checks on metadata).
fn export_survives_an_outage(
    dir: &Path,
    collector: &mut Collector,
    otlp_config: &str,
    extra_config: &str,
) -> Vec<Value> {
    let daemon = Daemon::start_with(dir, "", &format!("{otlp_config}{extra_config}"));

    let out = daemon.run_session("before", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let before = daemon.session_id("before");
    collector.wait_for_session_end("the first session's end", &before);

    // The collector refuses every request for a while; a session runs meanwhile.
    collector.restart(u32::MAX);
    let out = daemon.run_session("during", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let during = daemon.session_id("during");
    let deadline = Instant::now() + Duration::from_secs(30);
    while collector.refusals() < 2 {
        assert!(
            Instant::now() < deadline,
            "no export attempt (and retry) during the outage"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Then it goes away and comes back: the exporter connects again.
    collector.restart(0);
    collector.wait_for_session_end("the second session after the outage", &during);

    // Every event of the trail, once each, in order: nothing skipped, nothing twice.
    let records = collector.records();
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
    collector
        .entries()
        .into_iter()
        .filter(|e| e["refused"] != true)
        .collect()
}

#[test]
fn grpc_over_tls_gzipped_with_a_header() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "collector-ca");
    let cert = ca.issue(dir.path(), "collector", &["127.0.0.15"]);
    let mut collector = Collector::start(
        dir.path(),
        "grpc",
        "127.0.0.15",
        Some((cert.cert.clone(), cert.key.clone())),
    );
    let otlp = format!(
        "otlp:\n  endpoint: https://127.0.0.15:{}\n  protocol: grpc\n  compression: gzip\n  headers:\n    authorization: Bearer s3cret\n",
        collector.port
    );
    let tls = format!("tls:\n  extra_roots: [{}]\n", ca.pem.display());
    let accepted = export_survives_an_outage(dir.path(), &mut collector, &otlp, &tls);
    for entry in &accepted {
        assert_eq!(entry["transport"], "grpc");
        assert_eq!(
            entry["metadata"]["authorization"], "Bearer s3cret",
            "{entry}"
        );
        // grpcio keeps grpc-encoding to itself; a gzipped message is what makes the request
        // (a 5-byte frame header and the message) shorter than the decoded message.
        let sent: u64 = entry["metadata"]["content-length"]
            .as_str()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no content-length: {entry}"));
        assert!(
            sent < entry["message_bytes"].as_u64().unwrap(),
            "not compressed: {entry}"
        );
        let resource = &entry["request"]["resourceLogs"][0]["resource"]["attributes"][0];
        assert_eq!(resource["value"]["stringValue"], "agentshd", "{entry}");
    }
}

#[test]
fn http_protobuf() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut collector = Collector::start(dir.path(), "http", "127.0.0.14", None);
    let otlp = format!(
        "otlp:\n  endpoint: http://127.0.0.14:{}\n  protocol: http/protobuf\n",
        collector.port
    );
    let accepted = export_survives_an_outage(dir.path(), &mut collector, &otlp, "");
    assert!(
        accepted
            .iter()
            .all(|e| e["transport"] == "application/x-protobuf")
    );
}

#[test]
fn http_json_gzipped() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut collector = Collector::start(dir.path(), "http", "127.0.0.16", None);
    let otlp = format!(
        "otlp:\n  endpoint: http://127.0.0.16:{}/\n  protocol: http/json\n  compression: gzip\n",
        collector.port
    );
    let accepted = export_survives_an_outage(dir.path(), &mut collector, &otlp, "");
    for entry in &accepted {
        assert_eq!(entry["transport"], "application/json");
        assert_eq!(entry["metadata"]["content-encoding"], "gzip", "{entry}");
    }
}

#[test]
fn grpc_over_plain_http2() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut collector = Collector::start(dir.path(), "grpc", "127.0.0.17", None);
    let otlp = format!(
        "otlp:\n  endpoint: http://127.0.0.17:{}\n  protocol: grpc\n",
        collector.port
    );
    let accepted = export_survives_an_outage(dir.path(), &mut collector, &otlp, "");
    assert!(accepted.iter().all(|e| e["transport"] == "grpc"));
}
