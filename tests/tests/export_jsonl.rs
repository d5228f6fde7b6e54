//! `agentshctl export`: the audit trail as JSON lines, every event once and in order, across
//! pages (more events than one `events.page` answer holds), resumable with `--cursor`, narrowed
//! by `--session`, and live with `--follow`. Needs root (cgroup sessions).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentsh::api::Client;
use agentsh::api::protocol::{RecordArgs, ops};
use agentsh::audit::{Action, Event, EventKind};
use agentsh_tests::bin;
use agentsh_tests::daemon::{Daemon, skip_unless_root};
use serde_json::Value;

fn seqs(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .map(|e| e["seq"].as_u64().unwrap_or_else(|| panic!("no seq: {e}")))
        .collect()
}

#[test]
fn the_trail_exports_once_in_order_resumes_and_follows() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path(), "");
    let out = daemon.run_session("first", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let first = daemon.session_id("first");
    daemon.wait_for_session_end(&first);
    // More events than one page (500) holds, recorded the way a shim records them.
    let mut client = Client::connect(&daemon.socket).unwrap();
    for i in 0..1200 {
        let event = Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Allow,
            format!("call {i}"),
        )
        .tool("read_file");
        let _: Value = client.call(ops::RECORD, &RecordArgs { event }).unwrap();
    }

    // Everything, in order, once: the same events `mcp events` lists.
    let all = daemon.json_lines(&["export"]);
    assert!(all.len() > 1200, "{}", all.len());
    let numbers = seqs(&all);
    assert!(
        numbers == (1..=all.len() as u64).collect::<Vec<_>>(),
        "not 1..={}: {numbers:?}",
        all.len()
    );
    let listed = daemon.json_lines(&["mcp", "events", "--json"]);
    assert!(
        seqs(&listed) == numbers,
        "export: {} events, mcp events: {}",
        numbers.len(),
        listed.len()
    );
    assert_eq!(all[all.len() - 1]["reason"], "call 1199");

    // --cursor: the first run writes where it stopped; the next one prints only what is new.
    let cursor = dir.path().join("export.cursor");
    let cursor_arg = cursor.to_str().unwrap();
    let again = daemon.json_lines(&["export", "--cursor", cursor_arg]);
    assert_eq!(seqs(&again), numbers);
    let last = *numbers.last().unwrap();
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap().trim(),
        last.to_string()
    );
    let out = daemon.run_session("second", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let second = daemon.session_id("second");
    daemon.wait_for_session_end(&second);
    let new = daemon.json_lines(&["export", "--cursor", cursor_arg]);
    assert!(!new.is_empty());
    assert_eq!(
        seqs(&new),
        (last + 1..=last + new.len() as u64).collect::<Vec<_>>()
    );
    // (Besides checkpoints the daemon signs on its own schedule.)
    assert!(
        new.iter()
            .filter(|e| e["event"] != "audit_checkpoint")
            .all(|e| e["session"] == second.as_str()),
        "{new:#?}"
    );
    assert!(
        daemon
            .json_lines(&["export", "--cursor", cursor_arg])
            .is_empty()
    );

    // --session and --after narrow it.
    let only_first = daemon.json_lines(&["export", "--session", &first]);
    assert!(only_first.len() >= 2);
    assert!(only_first.iter().all(|e| e["session"] == first.as_str()));
    let tail = daemon.json_lines(&["export", "--after", &(last - 1).to_string()]);
    assert_eq!(seqs(&tail)[0], last);

    // A cursor file that holds something else is an error naming it, not a restart from 0.
    std::fs::write(&cursor, "yesterday\n").unwrap();
    let out = daemon.ctl(&["export", "--cursor", cursor_arg]);
    assert_eq!(out.status.code(), Some(2), "{}", out.stdout);
    assert!(
        out.stderr.contains("export.cursor") && out.stderr.contains("`yesterday`"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());

    // --follow prints events as they are recorded.
    let mut follow = Command::new(bin("agentshctl"))
        .arg("--socket")
        .arg(&daemon.socket)
        .args(["export", "--follow", "--after", &last.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines_tx, lines) = mpsc::channel::<Value>();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                break;
            }
        }
    });
    let out = daemon.run_session("third", "true");
    assert!(out.status.success(), "{}", out.stderr);
    let third = daemon.session_id("third");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut followed = Vec::new();
    while !followed
        .iter()
        .any(|e: &Value| e["event"] == "session_ended" && e["session"] == third.as_str())
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => followed.push(line),
            Err(_) => panic!("--follow did not print the third session's end: {followed:#?}"),
        }
    }
    let _ = follow.kill();
    let _ = follow.wait();
    let numbers = seqs(&followed);
    assert_eq!(
        numbers,
        (last + 1..=last + numbers.len() as u64).collect::<Vec<_>>()
    );
}

/// `agentshctl run --report --events`: a CI job's artifacts, written when the agent has exited
/// (its session ended), whatever the agent's exit code, which stays the run's; through sudo,
/// the agent runs as the invoking user and the files are that user's.
#[test]
fn run_writes_the_sessions_report_and_events_when_the_agent_exits() {
    if skip_unless_root() {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path(), "");
    let report = dir.path().join("agentsh-report.json");
    let events = dir.path().join("agentsh-events.jsonl");
    // As `sudo` leaves it for a runner user (nobody here): agentshctl drops to SUDO_UID.
    let mut cmd = daemon.session_command(
        &[
            "--report",
            report.to_str().unwrap(),
            "--events",
            events.to_str().unwrap(),
        ],
        "ci-42",
        "test \"$(id -u)\" = 65534 || exit 9; exit 3",
    );
    cmd.env("SUDO_UID", "65534").env("SUDO_GID", "65534");
    let out = agentsh_tests::run_bounded(cmd, b"", Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr);

    let session = daemon.session_id("ci-42");
    let report_json: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        report_json["session"]["id"],
        session.as_str(),
        "{report_json}"
    );
    let lines: Vec<Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.iter().all(|e| e["session"] == session.as_str()));
    let kinds: Vec<&str> = lines.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"session_started"), "{kinds:?}");
    // The session's end, then the signed checkpoint that closes it.
    assert_eq!(
        kinds[kinds.len().saturating_sub(2)..],
        ["session_ended", "audit_checkpoint"],
        "{kinds:?}"
    );
    for file in [&report, &events] {
        assert_eq!(
            std::fs::metadata(file).unwrap().uid(),
            65534,
            "{}",
            file.display()
        );
    }
}
