//! The audit trail proves itself: `agentshctl audit key|verify` against a real agentshd, its
//! store and its exports (`agentshctl export`, `run --events`), and every kind of tampering
//! found where it is. Needs root (cgroup sessions).

use std::time::Duration;

use agentsh::api::Client;
use agentsh::api::protocol::{RecordArgs, ops};
use agentsh::audit::{Action, Event, EventKind};
use agentsh_tests::Output;
use agentsh_tests::daemon::{Daemon, skip_unless_root};
use redb::ReadableTable;
use serde_json::Value;

/// `audit verify` with `args`; its exit code and what it printed.
fn verify(daemon: &Daemon, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["audit", "verify"];
    all.extend_from_slice(args);
    let out: Output = daemon.ctl(&all);
    (out.status.code(), format!("{}{}", out.stdout, out.stderr))
}

fn write_lines(path: &std::path::Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn the_trail_verifies_and_every_tampering_is_found_where_it_is() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start_with(dir.path(), "", "checkpoints:\n  every_events: 10\n");
    let events_file = dir.path().join("session.jsonl");
    let report_file = dir.path().join("report.json");
    let out = daemon.run_session_with(
        &[
            "--events",
            events_file.to_str().unwrap(),
            "--report",
            report_file.to_str().unwrap(),
        ],
        "work",
        "true",
    );
    assert!(out.status.success(), "{}", out.stderr);
    let session = daemon.session_id("work");
    daemon.wait_for_session_end(&session);
    let mut client = Client::connect(&daemon.socket).expect("the control socket");
    for i in 0..40 {
        let event = Event::new(
            EventKind::McpToolCalled,
            "fs",
            Action::Allow,
            format!("call {i}"),
        )
        .tool("read_file");
        let _: Value = client.call(ops::RECORD, &RecordArgs { event }).unwrap();
    }

    // The key, as an operator keeps it.
    let key_out = daemon.ctl(&["audit", "key"]);
    assert!(key_out.status.success(), "{}", key_out.stderr);
    let key = key_out.stdout.trim().to_owned();
    assert!(
        key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{key}"
    );
    assert!(
        daemon.stderr().contains(&key),
        "agentshd names its key at start"
    );

    // The store verifies, as stored; so does the session alone.
    let (code, said) = verify(&daemon, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("OK"), "{said}");
    let (code, said) = verify(&daemon, &["--session", &session, "--complete"]);
    assert_eq!(code, Some(0), "{said}");
    // (An administrator's check of one session is the whole trail's, and the session's.)
    assert!(
        said.contains(&format!("audit trail, and session {session} in it")),
        "{said}"
    );
    // A session the trail does not hold: nothing to verify, said so (not "OK").
    let (code, said) = verify(&daemon, &["--session", "no-such-session"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(
        said.contains("no record of session no-such-session"),
        "{said}"
    );

    // `run --events` and `export` verify offline, with the key alone (no daemon to ask).
    let offline = |args: &[&str]| {
        let mut all = vec!["--socket", "/nonexistent/agentsh.sock", "audit", "verify"];
        all.extend_from_slice(args);
        let out = agentsh_tests::run_bounded(
            {
                let mut c = std::process::Command::new(agentsh_tests::bin("agentshctl"));
                c.args(&all);
                c
            },
            b"",
            Duration::from_secs(60),
        );
        (out.status.code(), format!("{}{}", out.stdout, out.stderr))
    };
    let events = events_file.to_str().unwrap();
    let (code, said) = offline(&["--key", &key, "--session", &session, "--complete", events]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("checked as one session's records only"),
        "{said}"
    );
    let (code, said) = offline(&[events]);
    assert_eq!(code, Some(2), "no key, no daemon: {said}");
    assert!(said.contains("--key"), "{said}");

    // The report names the policy in force and the checkpoint that closed the session.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_file).unwrap()).unwrap();
    let sha = report["policy_sha256"].as_str().unwrap_or_default();
    assert_eq!(sha.len(), 64, "{report:#}");
    let closing = &report["closing_checkpoint"];
    assert_eq!(closing["checkpoint"]["reason"], "session_end", "{report:#}");
    assert_eq!(closing["checkpoint"]["session"], session.as_str());
    let text = daemon.ctl(&["session", "report", &session]);
    assert!(
        text.stdout.contains(sha) && text.stdout.contains("by signed checkpoint"),
        "{}",
        text.stdout
    );

    // The head, kept elsewhere before the export: an anchor for later checks.
    let head = daemon.ctl(&["audit", "head"]);
    assert!(head.status.success(), "{}", head.stderr);
    let head = head.stdout.trim().to_owned();
    let export = daemon.ctl(&["export"]);
    assert!(export.status.success(), "{}", export.stderr);
    let lines: Vec<String> = export.stdout.lines().map(str::to_owned).collect();
    assert!(lines.len() > 40, "{}", lines.len());
    let file = dir.path().join("trail.jsonl");
    let name = file.to_str().unwrap();
    write_lines(&file, &lines);
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(0), "{said}");
    let closing_anchor = format!(
        "{}:{}",
        closing["seq"],
        closing["hash"].as_str().unwrap_or_default()
    );
    let (code, said) = offline(&[
        "--key",
        &key,
        "--expect",
        &head,
        "--expect",
        &closing_anchor,
        "--session",
        &session,
        name,
    ]);
    assert_eq!(code, Some(0), "{said}");
    assert!(
        said.contains("2 of 2 anchor(s) found")
            && said.contains(&format!("audit trail, and session {session} in it")),
        "{said}"
    );

    // One word edited: a recorded call's verdict.
    let at = call_line(&lines, 19);
    let mut edited = lines.clone();
    edited[at] = edited[at].replacen("\"allow\"", "\"alert\"", 1);
    assert_ne!(edited[at], lines[at]);
    write_lines(&file, &edited);
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(1), "{said}");
    let line = at + 1;
    assert!(
        said.contains(&format!("{name}:{line} (#{line}): edited")),
        "{said}"
    );

    // A key put in twice: parsers keep the last (the hash still matches), readers differ.
    let mut doubled = lines.clone();
    doubled[at] = doubled[at].replacen('{', "{\"action\":\"block\",", 1);
    write_lines(&file, &doubled);
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("{name}:{line}: unreadable")) && said.contains("twice"),
        "{said}"
    );

    // One record deleted (line 25).
    let mut deleted = lines.clone();
    deleted.remove(24);
    write_lines(&file, &deleted);
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("{name}:25 (#26): missing #25..#25")),
        "{said}"
    );

    // Two swapped (lines 30 and 31).
    let mut swapped = lines.clone();
    swapped.swap(29, 30);
    write_lines(&file, &swapped);
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("{name}:31 (#30): out of order")),
        "{said}"
    );

    // Truncated: mid-line, and cleanly after a record with the closing checkpoints gone.
    let all = lines.join("\n");
    std::fs::write(&file, &all[..all.len() - 40]).unwrap();
    let (code, said) = offline(&["--key", &key, name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("{name}:{}: unreadable", lines.len())),
        "{said}"
    );
    let is_checkpoint = |l: &String| l.contains("\"event\":\"audit_checkpoint\"");
    let cut = (1..lines.len())
        .rev()
        .find(|&i| is_checkpoint(&lines[i]) && !is_checkpoint(&lines[i - 1]))
        .expect("a checkpoint after a record");
    write_lines(&file, &lines[..cut]);
    let (code, said) = offline(&["--key", &key, "--complete", name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("not signed"), "{said}");
    // Cut back to an earlier checkpoint: signed and complete, so only the anchor kept
    // elsewhere shows it.
    let earlier = (1..cut)
        .rev()
        .find(|&i| is_checkpoint(&lines[i]) && !is_checkpoint(&lines[i - 1]))
        .expect("an earlier checkpoint");
    write_lines(&file, &lines[..=earlier]);
    let (code, said) = offline(&["--key", &key, "--complete", name]);
    assert_eq!(code, Some(0), "{said}");
    let (code, said) = offline(&["--key", &key, "--complete", "--expect", &head, name]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("{name}:{}", earlier + 1)) && said.contains("cut short"),
        "{said}"
    );

    // In the store itself: agentshd down, a record edited and one deleted in events.redb.
    let victim = call_line(&lines, 14) as u64 + 1;
    daemon.kill9();
    {
        let db = redb::Database::create(
            agentsh_tests::files::find_file(dir.path(), "events.redb").expect("events.redb"),
        )
        .unwrap();
        let table: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("events");
        let txn = db.begin_write().unwrap();
        {
            let mut events = txn.open_table(table).unwrap();
            let edited = {
                let record = events.get(victim).unwrap().unwrap();
                String::from_utf8(record.value().to_vec())
                    .unwrap()
                    .replacen("\"allow\"", "\"audit\"", 1)
            };
            events.insert(victim, edited.as_bytes()).unwrap();
            events.remove(33).unwrap();
        }
        txn.commit().unwrap();
    }
    daemon.restart_after_kill9();
    let (code, said) = verify(&daemon, &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(
        said.contains(&format!("record {victim} (#{victim}): edited")),
        "{said}"
    );
    assert!(said.contains("(#34): missing #33..#33"), "{said}");
}

/// The index of the first recorded call (an `allow` verdict to edit) at or after `from`.
fn call_line(lines: &[String], from: usize) -> usize {
    (from..lines.len())
        .find(|&i| lines[i].contains("\"reason\":\"call "))
        .expect("a recorded call")
}
