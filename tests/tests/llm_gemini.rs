//! agentshd's LLM proxy between the official `google-genai` SDK (PyPI) and a fake Gemini API on
//! 127.0.0.2 serving recorded responses, in each of the three forms Google answers in: a
//! buffered `generateContent`, `streamGenerateContent?alt=sse`, and `streamGenerateContent`
//! without it (a streamed JSON array of chunks, which the SDK cannot ask for: llm_client.py
//! sends the SDK's own request on that path with the SDK's HTTP client and parses each element
//! with the SDK's converter). A blocked `functionCall` (Gemini CLI's `mcp_SERVER_TOOL` name)
//! arrives as a text part, the allowed call beside it keeps its arguments and its
//! `thoughtSignature`, and the SDK parses every rewritten response, compressed ones included;
//! an answer without calls passes byte for byte; the trail names the dialect
//! (`gemini_generate_content`) and the provider (`google`).
//! Needs root (cgroups), as CI runs.

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use agentsh_tests::llm::{FakeUpstream, Job, fixture, in_parallel, sdk, summary};
use serde_json::{Value, json};

/// The daemon's policy: writes are refused.
const POLICY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: no-write, match: {tool_name: write_file}, decision: block, reason: "writes are not allowed"}
"#;

const BLOCKED_WRITE: &str =
    "[agentsh] Tool 'mcp_filesystem_write_file' blocked by policy: writes are not allowed";
const CREATE: &str = "mcp_memory_create_entities";
/// The text of the `gemini_tools` fixture, before its calls.
const TOOLS_TEXT: &str =
    "I'll remember that about Alice — and write the note to /tmp/agentsh-e2e/notes.txt.";
/// The `responseId` of the `gemini_tools` fixture: agentsh names its calls `{responseId}#{n}`.
const TOOLS_RESPONSE_ID: &str = "kq8TacH7JIe-z7IP3sK1mAk";
const MODEL: &str = "gemini-2.5-flash";
const ENCODINGS: [Option<&str>; 5] = [
    None,
    Some("gzip"),
    Some("br"),
    Some("zstd"),
    Some("deflate"),
];

fn entities() -> Value {
    json!({"entities": [{"name": "alice", "entityType": "person", "observations": ["likes tea"]}]})
}

fn proxy_config(upstream: &str) -> String {
    format!(
        "proxy:\n  listen: 127.0.0.1:0\n  mode: embedded\nproviders:\n  google: {{upstream: \"{upstream}\"}}\n"
    )
}

fn start(dir: &std::path::Path, upstream: &FakeUpstream) -> Daemon {
    Daemon::start_with(dir, POLICY, &proxy_config(&upstream.url))
}

/// How the SDK asks for the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `:generateContent`
    Buffered,
    /// `:streamGenerateContent?alt=sse`
    Sse,
    /// `:streamGenerateContent`, a streamed JSON array
    Array,
}

impl Form {
    const ALL: [Form; 3] = [Form::Buffered, Form::Sse, Form::Array];

    fn flags(self) -> &'static [&'static str] {
        match self {
            Form::Buffered => &[],
            Form::Sse => &["--stream"],
            Form::Array => &["--gemini-array"],
        }
    }

    fn streams(self) -> bool {
        self != Form::Buffered
    }

    /// The fixture file of `scenario` in this form.
    fn fixture(self, scenario: &str) -> String {
        let extension = match self {
            Form::Buffered => "json",
            Form::Sse => "sse",
            Form::Array => "jsonarray",
        };
        format!("{scenario}.{extension}")
    }
}

/// `llm_client.py --api gemini` through the proxy (the SDK's base URL `http://PROXY/google`).
fn through(daemon: &Daemon, scenario: &str, form: Form, extra: &[&str]) -> agentsh_tests::Output {
    let proxy = daemon.proxy.as_deref().expect("agentshd serves the proxy");
    let base = format!("http://{proxy}/google");
    let mut args = vec![
        "--api",
        "gemini",
        "--base-url",
        &base,
        "--scenario",
        scenario,
    ];
    args.extend_from_slice(form.flags());
    args.extend_from_slice(extra);
    sdk(&args)
}

/// The events of `kind` the daemon recorded, as `agentshctl mcp events --json` prints them.
fn events(daemon: &Daemon, kind: &str) -> Vec<Value> {
    daemon.json_lines(&["mcp", "events", "--type", kind, "--json"])
}

#[test]
fn a_blocked_gemini_call_becomes_text_in_every_form_and_encoding() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = start(dir.path(), &upstream);

    // Each form, each encoding of the upstream's body; and each form on v1beta, the API
    // version Gemini CLI asks for (the SDK's own default is v1).
    let mut runs: Vec<(Form, Option<&str>, Option<&str>)> = Vec::new();
    for form in Form::ALL {
        for encoding in ENCODINGS {
            runs.push((form, encoding, None));
        }
        runs.push((form, None, Some("v1beta")));
    }
    let mut jobs: Vec<Job<(String, Form, Value)>> = Vec::new();
    for &(form, encoding, version) in &runs {
        let daemon = &daemon;
        jobs.push(Box::new(move || {
            let mut extra = Vec::new();
            if let Some(encoding) = encoding {
                extra.extend(["--encoding", encoding]);
            }
            if let Some(version) = version {
                extra.extend(["--api-version", version]);
            }
            let label = format!(
                "{form:?} encoding={} version={}",
                encoding.unwrap_or("identity"),
                version.unwrap_or("default")
            );
            let out = summary(&through(daemon, "gemini_tools", form, &extra));
            (label, form, out)
        }));
    }
    for (label, form, out) in in_parallel(jobs) {
        assert_eq!(out["api"], "gemini", "{label}: {out}");
        assert_eq!(out["stream"], form.streams(), "{label}: {out}");
        assert_eq!(out["model"], MODEL, "{label}: {out}");
        let choices = out["choices"].as_array().expect("choices");
        assert_eq!(choices.len(), 1, "{label}: {out}");
        let choice = &choices[0];
        // Gemini ends a turn with calls as one without: STOP either way.
        assert_eq!(choice["finish_reason"], "STOP", "{label}: {out}");
        // The write's part is text now, after the model's own.
        assert_eq!(
            choice["text"],
            format!("{TOOLS_TEXT}{BLOCKED_WRITE}"),
            "{label}: {out}"
        );
        // The allowed call is untouched: its arguments, and the signature the model wants
        // back with it.
        assert_eq!(
            choice["tool_calls"],
            json!([{"id": null, "name": CREATE, "arguments": entities(), "signed": true}]),
            "{label}: {out}"
        );
    }

    // What reached the upstream: every request, its /google prefix gone, on the SDK's path
    // for its form, the agent's key untouched.
    let seen = upstream.requests();
    assert_eq!(seen.len(), runs.len(), "{seen:#?}");
    for request in &seen {
        let path = request["path"].as_str().unwrap();
        assert!(
            path.starts_with("/v1/models/gemini-2.5-flash:")
                || path.starts_with("/v1beta/models/gemini-2.5-flash:"),
            "{path}"
        );
        assert_eq!(request["headers"]["x-goog-api-key"], "sk-test", "{request}");
        assert_eq!(
            request["body"]["tools"][0]["functionDeclarations"][1]["name"],
            "mcp_filesystem_write_file",
            "{request}"
        );
    }
    for path in [
        "/v1/models/gemini-2.5-flash:generateContent",
        "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "/v1/models/gemini-2.5-flash:streamGenerateContent",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    ] {
        assert!(
            seen.iter().any(|r| r["path"] == path),
            "no request to {path}: {seen:#?}"
        );
    }

    // The trail: each exchange a Google one of the Gemini dialect, one of its two calls
    // blocked; streamed when the path streams.
    let requests = events(&daemon, "llm_request");
    assert_eq!(requests.len(), runs.len(), "{requests:#?}");
    for request in &requests {
        let details = &request["details"];
        assert_eq!(details["provider"], "google", "{request}");
        assert_eq!(details["dialect"], "gemini_generate_content", "{request}");
        assert_eq!(details["model"], MODEL, "{request}");
        assert_eq!(details["status"], 200, "{request}");
        assert_eq!(details["tool_calls"], 2, "{request}");
        assert_eq!(details["blocked"], 1, "{request}");
        assert_eq!(request["action"], "block", "{request}");
        let path = details["path"].as_str().unwrap_or_default();
        assert_eq!(
            details["stream"],
            path.contains(":streamGenerateContent"),
            "{request}"
        );
    }
    let request_ids: Vec<&str> = requests
        .iter()
        .filter_map(|r| r["details"]["request_id"].as_str())
        .collect();

    // Each call judged once per exchange, under the server and tool Gemini CLI's name
    // resolves to, with the id agentsh gives a call the Gemini API leaves without one.
    let intercepted = events(&daemon, "mcp_tool_call_intercepted");
    assert!(
        intercepted
            .iter()
            .all(|e| e["details"]["dialect"] == "gemini_generate_content"),
        "{intercepted:#?}"
    );
    let writes: Vec<&Value> = intercepted
        .iter()
        .filter(|e| e["tool"] == "write_file")
        .collect();
    let creates: Vec<&Value> = intercepted
        .iter()
        .filter(|e| e["tool"] == "create_entities")
        .collect();
    assert_eq!(writes.len(), runs.len(), "{intercepted:#?}");
    assert_eq!(creates.len(), runs.len(), "{intercepted:#?}");
    for write in &writes {
        assert_eq!(write["action"], "block", "{write}");
        assert_eq!(write["server"], "filesystem", "{write}");
        assert_eq!(write["rule"], "rules/no-write", "{write}");
        assert_eq!(
            write["details"]["call_id"],
            format!("{TOOLS_RESPONSE_ID}#2"),
            "{write}"
        );
    }
    for create in &creates {
        assert_eq!(create["action"], "allow", "{create}");
        assert_eq!(create["server"], "memory", "{create}");
        assert_eq!(
            create["details"]["call_id"],
            format!("{TOOLS_RESPONSE_ID}#1"),
            "{create}"
        );
    }
    for event in writes.iter().chain(&creates) {
        let id = event["details"]["request_id"].as_str().unwrap_or_default();
        assert!(request_ids.contains(&id), "no llm_request {id}: {event}");
    }
}

#[test]
fn a_gemini_answer_nothing_blocks_passes_byte_for_byte() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let upstream = FakeUpstream::start(dir.path());
    let daemon = start(dir.path(), &upstream);

    // Nothing blocked: the SDK's HTTP client receives the upstream's bytes exactly, in each
    // form and whatever the upstream compressed them with.
    let mut jobs: Vec<Job<(String, bool)>> = Vec::new();
    for form in Form::ALL {
        for encoding in ENCODINGS {
            let daemon = &daemon;
            jobs.push(Box::new(move || {
                let mut extra = vec!["--raw"];
                if let Some(encoding) = encoding {
                    extra.extend(["--encoding", encoding]);
                }
                let out = through(daemon, "gemini_text", form, &extra);
                assert!(
                    out.status.success(),
                    "{form:?} {encoding:?}: {}",
                    out.stderr
                );
                let file = form.fixture("gemini_text");
                let same = out.stdout.as_bytes() == fixture(&file).as_slice();
                (format!("{file} encoding={encoding:?}"), same)
            }));
        }
    }
    for (what, same) in in_parallel(jobs) {
        assert!(same, "{what} did not pass byte for byte");
    }
    // ...and parsed, the answer is the fixture's.
    let text = "Hello! I'm doing well, merci — how can I help with your café notes today? ☕";
    for form in Form::ALL {
        let out = summary(&through(&daemon, "gemini_text", form, &[]));
        assert_eq!(
            out["choices"],
            json!([{"finish_reason": "STOP", "text": text, "tool_calls": []}]),
            "{form:?}: {out}"
        );
    }

    // A rewritten answer is not the fixture (the comparison can fail), and stays well formed
    // on the wire in its form: one JSON object; as many SSE events, each one JSON; a JSON
    // array of as many chunks.
    for form in Form::ALL {
        let out = through(&daemon, "gemini_tools", form, &["--raw"]);
        assert!(out.status.success(), "{form:?}: {}", out.stderr);
        let original = String::from_utf8(fixture(&form.fixture("gemini_tools"))).unwrap();
        assert_ne!(out.stdout, original, "{form:?}");
        assert!(
            out.stdout.contains(BLOCKED_WRITE),
            "{form:?}: {}",
            out.stdout
        );
        let (chunks, expected): (Vec<Value>, usize) = match form {
            Form::Buffered => (
                vec![serde_json::from_str(&out.stdout).expect("a JSON body")],
                1,
            ),
            Form::Sse => (sse_data(&out.stdout), original.matches("\r\n\r\n").count()),
            Form::Array => (
                serde_json::from_str(&out.stdout).expect("a JSON array"),
                serde_json::from_str::<Vec<Value>>(&original).unwrap().len(),
            ),
        };
        assert_eq!(chunks.len(), expected, "{form:?}: {}", out.stdout);
        let last = chunks.last().unwrap();
        assert_eq!(last["candidates"][0]["finishReason"], "STOP", "{form:?}");
        assert_eq!(last["responseId"], TOOLS_RESPONSE_ID, "{form:?}");
        if form == Form::Sse {
            // Events keep the stream's CRLF framing.
            assert!(
                out.stdout
                    .split_inclusive("\r\n\r\n")
                    .all(|e| e.starts_with("data: ") && e.ends_with("}\r\n\r\n")),
                "{}",
                out.stdout
            );
        }
    }

    // An upstream error reaches the SDK as Google's error.
    for form in [Form::Buffered, Form::Array] {
        let limited = through(
            &daemon,
            "gemini_text",
            form,
            &["--header", "x-fake-status:429"],
        );
        assert!(!limited.status.success(), "{form:?}: {}", limited.stdout);
        assert!(
            limited.stderr.contains("429 RESOURCE_EXHAUSTED"),
            "{form:?}: {}",
            limited.stderr
        );
    }

    // Embedded mode: a secret in the prompt is redacted before the request leaves; the key
    // in the headers is the agent's to send.
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let suffix = format!(" My AWS key is {aws}.");
    let out = summary(&through(
        &daemon,
        "gemini_text",
        Form::Sse,
        &["--prompt-suffix", &suffix],
    ));
    assert_eq!(out["choices"][0]["text"], text);
    let seen = upstream.requests();
    let last = seen.last().expect("a request");
    let body = serde_json::to_string(&last["body"]).unwrap();
    assert!(!body.contains(aws), "{body}");
    assert!(body.contains("[REDACTED:"), "{body}");
    assert_eq!(last["headers"]["x-goog-api-key"], "sk-test");

    // The trail: the answers without calls allowed, as Google's and of the Gemini dialect.
    let requests = events(&daemon, "llm_request");
    let clean: Vec<&Value> = requests
        .iter()
        .filter(|r| r["details"]["tool_calls"] == 0 && r["details"]["status"] == 200)
        .collect();
    assert_eq!(clean.len(), 3 * ENCODINGS.len() + 3 + 1, "{requests:#?}");
    for request in &clean {
        assert_eq!(request["action"], "allow", "{request}");
        assert_eq!(request["details"]["provider"], "google", "{request}");
        assert_eq!(
            request["details"]["dialect"], "gemini_generate_content",
            "{request}"
        );
    }
    let blocks = events(&daemon, "mcp_tool_call_intercepted")
        .into_iter()
        .filter(|e| e["action"] == "block")
        .count();
    assert_eq!(blocks, 3, "one write per rewritten answer");
}

/// The data of each event of an SSE body, parsed.
fn sse_data(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad event {d}: {e}")))
        .collect()
}
