//! A server is known by the name the user gave it in the agent's configuration, under
//! `agentshctl run`, with the official MCP SDK client as the agent: the launcher names it so,
//! policies, events and refusals use that name, its package is recorded and matched by rules,
//! the shim finds agentshd with a scrubbed environment (as Codex starts servers), and a policy
//! rule naming a server nothing has is said at start and recorded at the session's end.
//! Needs root (cgroups), as CI runs.

use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, client, skip_unless_root, steps};
use serde_json::Value;

const POLICY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: notes-ro, match: {server: notes, tool_name_any: [write_file]}, decision: block, reason: "notes are read-only"}
      - {id: no-dirs, match: {package: "@modelcontextprotocol/server-*", tool_name: create_directory}, decision: block, reason: "no new directories"}
      - {id: ghost-ro, match: {server: ghost, tool_name: "*"}, decision: block}
"#;

#[test]
fn a_server_is_named_as_the_user_s_configuration_names_it() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let files = dir.path().join("files");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("a.txt"), "alpha\n").unwrap();
    // The user's Claude Code names the filesystem server `notes`.
    let server = format!(
        "npx -y @modelcontextprotocol/server-filesystem {}",
        files.display()
    );
    std::fs::write(
        home.join(".claude.json"),
        serde_json::json!({"mcpServers": {"notes": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", files],
        }}})
        .to_string(),
    )
    .unwrap();
    let daemon = Daemon::start(dir.path(), POLICY);

    let steps_json = format!(
        r#"[{{"op":"list"}},{{"op":"call","name":"write_file","arguments":{{"path":"{f}/b.txt","content":"x"}}}},{{"op":"call","name":"create_directory","arguments":{{"path":"{f}/d"}}}},{{"op":"call","name":"read_text_file","arguments":{{"path":"{f}/a.txt"}}}}]"#,
        f = files.display()
    );
    // The agent keeps PATH and HOME and nothing else of agentsh's (Codex does so): the shim
    // finds agentshd on the socket the session was made on all the same.
    let script = format!(
        "exec env -i PATH=\"$PATH\" HOME=\"$HOME\" {}",
        client(&steps_json, &server)
    );
    let mut command = daemon.session_command(&[], "named", &script);
    command.env("HOME", &home);
    let out = agentsh_tests::run_bounded(command, b"", Duration::from_secs(120));
    assert!(out.status.success(), "{}\n{}", out.stdout, out.stderr);

    // agentshctl said what it found, and that a rule names a server nothing has.
    assert!(
        out.stderr.contains("MCP server `notes`") && out.stderr.contains("guarded as `notes`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("warning:")
            && out
                .stderr
                .contains("`rules[ghost-ro].match.server` names server `ghost`"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("names server `notes`"),
        "{}",
        out.stderr
    );

    let answers = steps(&out.stdout);
    assert_eq!(answers.len(), 4, "{}", out.stdout);
    let refused = |i: usize| {
        answers[i]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        refused(1).contains("on server 'notes' by rules/notes-ro: notes are read-only"),
        "{}",
        answers[1]
    );
    assert!(
        refused(2).contains("by rules/no-dirs"),
        "the package rule: {}",
        answers[2]
    );
    assert_eq!(answers[3]["ok"], true, "{}", answers[3]);
    assert!(!files.join("b.txt").exists() && !files.join("d").exists());

    let session = daemon.session_id("named");
    let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "mcp_server_started")
        .collect();
    assert_eq!(started.len(), 1, "{events:#?}");
    assert_eq!(started[0]["server"], "notes");
    let details = &started[0]["details"];
    assert_eq!(
        details["package"],
        "@modelcontextprotocol/server-filesystem"
    );
    assert_eq!(details["host"], "claude-code");
    assert_eq!(details["config_source"], "~/.claude.json (user)");
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "mcp_tool_called")
            .all(|e| e["server"] == "notes"),
        "{events:#?}"
    );
    let servers = daemon.json_lines(&["mcp", "servers", "--session", &session, "--json"]);
    assert!(
        servers.iter().any(|s| s["server"] == "notes"),
        "{servers:#?}"
    );

    // Once the session has ended: the rule that named a server no session ran is recorded.
    let deadline = Instant::now() + Duration::from_secs(30);
    let unseen = loop {
        let events = daemon.json_lines(&["mcp", "events", "--session", &session, "--json"]);
        let unseen: Vec<Value> = events
            .into_iter()
            .filter(|e| e["event"] == "policy_server_unseen")
            .collect();
        if !unseen.is_empty() || Instant::now() > deadline {
            break unseen;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(unseen.len(), 1, "{unseen:#?}");
    assert_eq!(unseen[0]["details"]["server"], "ghost");
    assert_eq!(
        unseen[0]["details"]["reference"],
        "rules[ghost-ro].match.server"
    );
    assert_eq!(unseen[0]["action"], "alert");
}
