use serde_json::{Value, json};

use super::*;
use crate::llm::test_judge::{DENIED, TestJudge};

/// Gemini 2.5 as the API streams it with `alt=sse`: text, then two parallel calls in one
/// chunk, then the finishing chunk with usage.
const SSE: &str = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"I'll look \u{e9}\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"totalTokenCount\": 9},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r\n\r\n\
data: {\"candidates\": [{\"content\": {\"parts\": [{\"functionCall\": {\"name\": \"run_shell_command\",\"args\": {\"command\": \"ls\"}},\"thoughtSignature\": \"c2ln\"},{\"functionCall\": {\"name\": \"mcp_fs_write_file\",\"args\": {\"path\": \"/tmp/x\",\"content\": \"y\"}}}],\"role\": \"model\"},\"index\": 0}],\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r\n\r\n\
data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 20,\"totalTokenCount\": 29},\"modelVersion\": \"gemini-2.5-pro\",\"responseId\": \"r1\"}\r\n\r\n";

/// The same response as a streamed JSON array (no `alt=sse`).
fn array_of(sse: &str) -> String {
    let chunks: Vec<&str> = sse
        .split("\r\n\r\n")
        .filter(|e| !e.is_empty())
        .map(|e| e.trim_start_matches("data: "))
        .collect();
    format!("[{}]", chunks.join("\r\n,\r\n"))
}

struct Run {
    out: Vec<u8>,
    seen: Vec<ToolCall>,
    broken: bool,
    ended: bool,
}

fn run(mut stream: Stream, bytes: &[u8], split: usize, blocked: &[&'static str]) -> Run {
    let mut judge = TestJudge::blocking(blocked);
    let mut out = Vec::new();
    stream.push(&bytes[..split], &mut judge, &mut out);
    stream.push(&bytes[split..], &mut judge, &mut out);
    stream.finish(&mut judge, &mut out);
    Run {
        out,
        seen: judge.seen,
        broken: stream.is_broken(),
        ended: stream.delivered_end(),
    }
}

/// The same output at every split position; that output.
fn same_at_every_split(make: fn() -> Stream, bytes: &str, blocked: &[&'static str]) -> Run {
    let bytes = bytes.as_bytes();
    let first = run(make(), bytes, 0, blocked);
    for split in 1..=bytes.len() {
        let again = run(make(), bytes, split, blocked);
        assert_eq!(
            String::from_utf8_lossy(&again.out),
            String::from_utf8_lossy(&first.out),
            "split at {split}"
        );
        assert_eq!(again.seen, first.seen, "split at {split}");
        assert_eq!(again.broken, first.broken);
    }
    first
}

fn sse() -> Stream {
    Stream::sse(Limits::default())
}

fn array() -> Stream {
    Stream::json_array(Limits::default())
}

/// The chunks a client reads from an SSE output.
fn sse_chunks(out: &[u8]) -> Vec<Value> {
    String::from_utf8(out.to_vec())
        .unwrap()
        .split("\r\n\r\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| serde_json::from_str(e.trim().trim_start_matches("data: ")).unwrap())
        .collect()
}

fn parts(chunks: &[Value]) -> Vec<Value> {
    chunks
        .iter()
        .flat_map(|c| {
            c["candidates"][0]["content"]["parts"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

fn calls_in(parts: &[Value]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|p| p["functionCall"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn methods_and_models_by_path() {
    assert_eq!(
        method_of("/v1beta/models/gemini-2.5-pro:generateContent"),
        Some(Method::Generate)
    );
    assert_eq!(
        method_of("/v1beta/models/gemini-2.5-pro:streamGenerateContent"),
        Some(Method::Stream)
    );
    assert_eq!(
        method_of(
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"
        ),
        Some(Method::Stream)
    );
    assert_eq!(
        method_of("/v1beta/tunedModels/mine:generateContent"),
        Some(Method::Generate)
    );
    assert_eq!(method_of("/v1beta/models/gemini-2.5-pro:countTokens"), None);
    assert_eq!(
        method_of("/v1beta/models/gemini-2.5-pro:embedContent"),
        None
    );
    assert_eq!(method_of("/v1beta/models"), None);
    assert_eq!(
        model_of("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"),
        Some("gemini-2.5-pro")
    );
    assert_eq!(model_of("/v1beta/models/:generateContent"), None);
    assert_eq!(model_of("/v1internal:generateContent"), None);
    assert_eq!(
        model_of("/v1beta/tunedModels/mine:generateContent"),
        Some("mine")
    );
}

#[test]
fn an_allowed_stream_passes_byte_for_byte_at_every_split() {
    let run = same_at_every_split(sse, SSE, &[]);
    assert_eq!(run.out, SSE.as_bytes());
    assert!(!run.broken);
    assert!(run.ended);
    let names: Vec<&str> = run.seen.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["run_shell_command", "mcp_fs_write_file"]);
    // No ids on the Gemini API: agentsh numbers the response's calls.
    assert_eq!(run.seen[0].id, "r1#1");
    assert_eq!(run.seen[1].id, "r1#2");
    assert!(matches!(&run.seen[0].arguments, Arguments::Object(a) if a["command"] == "ls"));

    let array_text = array_of(SSE);
    let run = same_at_every_split(array, &array_text, &[]);
    assert_eq!(run.out, array_text.as_bytes());
    assert!(run.ended);
    assert_eq!(run.seen.len(), 2);
}

#[test]
fn a_blocked_call_becomes_text_beside_the_allowed_one() {
    let run = same_at_every_split(sse, SSE, &["mcp_fs_write_file"]);
    assert!(!run.broken);
    let chunks = sse_chunks(&run.out);
    assert_eq!(chunks.len(), 3);
    let parts = parts(&chunks);
    assert_eq!(calls_in(&parts), ["run_shell_command"]);
    // The allowed call keeps its signature; the blocked one is text in its place.
    assert_eq!(parts[1]["thoughtSignature"], "c2ln");
    assert_eq!(
        parts[2],
        json!({"text": format!("[agentsh] Tool 'mcp_fs_write_file' blocked by policy: {DENIED}")})
    );
    // The chunks agentsh did not change are the upstream's bytes.
    let text = String::from_utf8(run.out).unwrap();
    assert!(text.starts_with(SSE.split("\r\n\r\n").next().unwrap()));
    assert!(
        text.ends_with(
            SSE.split("\r\n\r\n")
                .nth(2)
                .map(|e| format!("{e}\r\n\r\n"))
                .unwrap()
                .as_str()
        )
    );
    // Fields agentsh does not know survive the rewrite.
    assert_eq!(chunks[1]["modelVersion"], "gemini-2.5-pro");
}

#[test]
fn a_turn_whose_calls_are_all_blocked_is_a_plain_answer() {
    for (make, text) in [
        (sse as fn() -> Stream, SSE.to_owned()),
        (array, array_of(SSE)),
    ] {
        let run = same_at_every_split(make, &text, &["mcp_fs_write_file", "run_shell_command"]);
        let chunks: Vec<Value> = if text.starts_with('[') {
            serde_json::from_slice::<Vec<Value>>(&run.out).unwrap()
        } else {
            sse_chunks(&run.out)
        };
        let parts = parts(&chunks);
        assert!(calls_in(&parts).is_empty(), "{parts:?}");
        assert_eq!(
            parts
                .iter()
                .filter(|p| p["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("[agentsh]")))
                .count(),
            2
        );
        // The signature belonged to a call: it goes with it.
        assert!(parts.iter().all(|p| p.get("thoughtSignature").is_none()));
        assert_eq!(
            chunks.last().unwrap()["candidates"][0]["finishReason"],
            "STOP"
        );
    }
}

#[test]
fn the_array_stream_stays_a_json_array_when_rewritten() {
    let text = array_of(SSE);
    let run = same_at_every_split(array, &text, &["run_shell_command"]);
    let chunks: Vec<Value> = serde_json::from_slice(&run.out).unwrap();
    assert_eq!(calls_in(&parts(&chunks)), ["mcp_fs_write_file"]);
    // Separators are the upstream's.
    assert!(String::from_utf8(run.out).unwrap().contains("}\r\n,\r\n{"));
}

#[test]
fn a_broken_stream_withholds_the_rest_and_ends_well_formed() {
    // The second chunk does not parse: it may hold a call, so it is not passed.
    let bad = SSE.replacen("\"functionCall\": {", "\"functionCall\": {,", 1);
    let run = same_at_every_split(sse, &bad, &[]);
    assert!(run.broken);
    assert!(run.ended);
    let chunks = sse_chunks(&run.out);
    assert_eq!(chunks.len(), 2);
    let last = chunks[1]["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        last.starts_with("[agentsh] The rest of the response was withheld"),
        "{last}"
    );
    assert!(run.seen.is_empty());

    // An array cut short: its client still reads a JSON array.
    let text = array_of(SSE);
    let cut = &text[..text.find("mcp_fs").unwrap()];
    let run = same_at_every_split(array, cut, &[]);
    assert!(run.broken);
    let chunks: Vec<Value> = serde_json::from_slice(&run.out).unwrap();
    assert_eq!(chunks.len(), 2, "{}", String::from_utf8_lossy(&run.out));
    assert!(calls_in(&parts(&chunks)).is_empty());
    // Not an array at all.
    let run = same_at_every_split(array, "[1]", &[]);
    assert!(run.broken);
    assert!(
        serde_json::from_slice::<Vec<Value>>(&run.out).is_ok(),
        "{}",
        String::from_utf8_lossy(&run.out)
    );
    let run = same_at_every_split(array, "", &[]);
    assert!(run.broken);
    assert!(serde_json::from_slice::<Vec<Value>>(&run.out).is_ok());
}

#[test]
fn unreadable_calls_are_blocked() {
    let cases = [
        // Arguments that are not an object.
        (r#"{"functionCall":{"name":"x","args":[1]}}"#, "JSON array"),
        // No name: no client could run it as judged.
        (r#"{"functionCall":{"args":{}}}"#, NO_NAME),
        (r#"{"functionCall":"x"}"#, "JSON string"),
        // Arguments in pieces (Vertex AI's streamFunctionCallArguments).
        (
            r#"{"functionCall":{"name":"x","partialArgs":[{"jsonPath":"$.a","stringValue":"b"}],"willContinue":true}}"#,
            "in pieces",
        ),
        // The proto spelling is a call too.
        (
            r#"{"function_call":{"name":"x","args":"{}"}}"#,
            "JSON string",
        ),
        // Found by fuzzing (llm_gemini): both spellings, one judged, the other passed.
        (
            r#"{"functionCall":{"name":"x","args":{}},"function_call":{"name":"y","args":{}}}"#,
            "both functionCall and function_call",
        ),
    ];
    for (part, why) in cases {
        let body = format!(
            r#"{{"candidates":[{{"content":{{"role":"model","parts":[{part}]}},"finishReason":"STOP"}}]}}"#
        );
        let mut judge = TestJudge::allowing();
        let rewritten = rewrite_body(body.as_bytes(), &mut judge)
            .unwrap()
            .expect("blocked");
        let value: Value = serde_json::from_slice(&rewritten).unwrap();
        let text = value["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap();
        assert!(text.contains(why), "{part}: {text}");
        assert!(matches!(&judge.seen[0].arguments, Arguments::Unreadable(w) if w.contains(why)));
    }
}

#[test]
fn buffered_bodies() {
    let body = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"fc-7","name":"a","args":{"n":1}}},{"functionCall":{"name":"b"}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"totalTokenCount":3},"responseId":"rr"}"#;
    let mut judge = TestJudge::allowing();
    assert_eq!(rewrite_body(body.as_bytes(), &mut judge), Ok(None));
    // Vertex gives ids; calls without arguments have none.
    assert_eq!(judge.seen[0].id, "fc-7");
    assert_eq!(judge.seen[1].id, "rr#2");
    assert_eq!(judge.seen[1].arguments, Arguments::Object(Map::new()));

    let mut judge = TestJudge::blocking(&["b"]);
    let rewritten: Value =
        serde_json::from_slice(&rewrite_body(body.as_bytes(), &mut judge).unwrap().unwrap())
            .unwrap();
    assert_eq!(
        rewritten["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "a"
    );
    assert!(
        rewritten["candidates"][0]["content"]["parts"][1]["text"]
            .as_str()
            .unwrap()
            .contains("'b'")
    );
    assert_eq!(rewritten["usageMetadata"]["totalTokenCount"], 3);

    // Errors carry no calls; a list of chunks (a streamed array read whole) is read too.
    let mut judge = TestJudge::allowing();
    assert_eq!(
        rewrite_body(
            br#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}"#,
            &mut judge
        ),
        Ok(None)
    );
    let list = format!("[{body},{body}]");
    let mut judge = TestJudge::blocking(&["a"]);
    let rewritten: Value =
        serde_json::from_slice(&rewrite_body(list.as_bytes(), &mut judge).unwrap().unwrap())
            .unwrap();
    assert_eq!(judge.seen.len(), 4);
    assert!(
        calls_in(&parts(rewritten.as_array().unwrap()))
            .iter()
            .all(|n| n == "b")
    );

    // What a rewrite could not be sure of is refused, and nothing is judged.
    for bad in [
        "nope",
        "[1]",
        r#"{"candidates":{"a":1}}"#,
        r#"{"candidates":[{"content":{"parts":{"functionCall":{}}}}]}"#,
        r#"{"candidates":[{"content":{"parts":[{"text":"x"}, 3]}}]}"#,
        r#"{"candidates":[{"content":"x"}]}"#,
    ] {
        let mut judge = TestJudge::allowing();
        assert!(rewrite_body(bad.as_bytes(), &mut judge).is_err(), "{bad}");
        assert!(judge.seen.is_empty(), "{bad}");
    }
}

#[test]
fn escaped_keys_are_read_as_the_client_reads_them() {
    // `\u0043` is `C`: a client's JSON parser sees functionCall.
    let chunk = r#"{"candidates":[{"content":{"role":"model","parts":[{"function\u0043all":{"name":"rm","args":{}}}]}}]}"#;
    let text = format!("data: {chunk}\n\n");
    let run = same_at_every_split(sse, &text, &["rm"]);
    assert_eq!(run.seen.len(), 1);
    assert!(
        String::from_utf8(run.out)
            .unwrap()
            .contains("[agentsh] Tool 'rm' blocked")
    );
}

#[test]
fn keep_alives_and_empty_chunks_pass() {
    let text = ": ping\n\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}],\"role\":\"model\"},\"finishReason\":\"STOP\"}]}\n\n";
    let run = same_at_every_split(sse, text, &[]);
    assert_eq!(run.out, text.as_bytes());
    assert!(run.ended);
    assert!(!run.broken);
}

#[test]
fn code_assist_wraps_the_response() {
    assert_eq!(
        method_of("/v1internal:streamGenerateContent"),
        Some(Method::Stream)
    );
    assert_eq!(method_of("/v1internal:loadCodeAssist"), None);
    let chunk = r#"{"response":{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"id"}}}]},"finishReason":"STOP"}]},"traceId":"t9"}"#;
    let text = format!("data: {chunk}\r\n\r\n");
    let run = same_at_every_split(sse, &text, &["run_shell_command"]);
    assert_eq!(run.seen[0].id, "t9#1");
    assert!(run.ended);
    let out: Value = serde_json::from_str(
        String::from_utf8(run.out)
            .unwrap()
            .trim()
            .trim_start_matches("data: "),
    )
    .unwrap();
    assert_eq!(out["traceId"], "t9");
    assert!(
        out["response"]["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("blocked by policy")
    );
    let mut judge = TestJudge::allowing();
    assert!(rewrite_body(br#"{"response":"x"}"#, &mut judge).is_err());

    // Found by fuzzing (llm_gemini): Code Assist's clients read the wrapped response, so a
    // chunk with candidates beside it, or an error beside it, must not pass it unjudged.
    let call = r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}}]}}]}"#;
    let mut judge = TestJudge::blocking(&["run_shell_command"]);
    let both = format!(r#"{{"candidates":[],"response":{call}}}"#);
    assert!(rewrite_body(both.as_bytes(), &mut judge).is_err());
    let run = same_at_every_split(
        sse,
        &format!(
            "data: {both}

"
        ),
        &["run_shell_command"],
    );
    assert!(run.broken);
    assert!(!String::from_utf8(run.out).unwrap().contains("functionCall"));
    let error = format!(r#"{{"error":{{"code":500}},"response":{call}}}"#);
    let rewritten = rewrite_body(error.as_bytes(), &mut judge)
        .unwrap()
        .expect("the wrapped call is judged");
    assert!(
        String::from_utf8(rewritten)
            .unwrap()
            .contains("blocked by policy")
    );
}
