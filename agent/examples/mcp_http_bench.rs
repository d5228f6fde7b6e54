//! MCP over Streamable HTTP as the transparent proxy judges it, in process: one `tools/call`
//! POST and its JSON answer, each way through the guard, beside only copying the same bytes.
//! A 2026-07-28 stateless request gets a conversation of its own (header check included); a
//! 2025-11-25 one shares its session's.
//!
//! `cargo run --release -p agentsh --example mcp_http_bench [POLICY]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsh::audit::NullSink;
use agentsh::engine::{Decider, Engine, Local, Rules};
use agentsh::net::mcp_headers;
use agentsh::net::mcp_http::{ClientAction, McpHttp};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("policies/default.yaml"));
    let policy = agentsh::config::load_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let max = policy.mcp().max_message_bytes;
    let rules = Rules::compile(policy).expect("detector");
    let engine = Arc::new(Engine::new(rules, None, Arc::new(NullSink)));
    let decider: Arc<dyn Decider> = Arc::new(Local::new(Arc::clone(&engine), engine.session(None)));
    let n = 100_000;
    let request = |id: usize, modern: bool| {
        let meta = if modern {
            r#","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
        } else {
            ""
        };
        Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"/home/dev/project/src/main.rs"}}{meta}}}}}"#
        ))
    };
    let answer = |id: usize| {
        Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"fn main() {{ println!(\"hello\"); }}"}}]}}}}"#
        ))
    };
    let mut headers = HeaderMap::new();
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
    headers.insert("mcp-name", HeaderValue::from_static("read_text_file"));

    let session = Arc::new(McpHttp::new("bench", Arc::clone(&decider), max));
    let mut direct = Vec::with_capacity(n);
    let mut stateless = Vec::with_capacity(n);
    let mut shared = Vec::with_capacity(n);
    for id in 0..n {
        let (modern, legacy, reply) = (request(id, true), request(id, false), answer(id));

        // Direct: the bytes are only copied, each way.
        let t = Instant::now();
        std::hint::black_box(modern.to_vec());
        std::hint::black_box(reply.to_vec());
        direct.push(t.elapsed());

        // 2026-07-28: headers against the body, a conversation of its own, both ways.
        let t = Instant::now();
        let body: serde_json::Value = serde_json::from_slice(&modern).expect("json");
        assert!(mcp_headers::is_stateless(&headers));
        mcp_headers::check(&headers, &body).expect("headers agree");
        let http = McpHttp::new("bench", Arc::clone(&decider), max);
        let ClientAction::Forward(_, posted) = http.client_post(modern) else {
            panic!("refused");
        };
        std::hint::black_box(http.server_json(reply.clone()));
        http.exchange_ended(&posted);
        stateless.push(t.elapsed());

        // 2025-11-25 in a session: the session's conversation, both ways.
        let t = Instant::now();
        let ClientAction::Forward(_, posted) = session.client_post(legacy) else {
            panic!("refused");
        };
        std::hint::black_box(session.server_json(reply));
        session.exchange_ended(&posted);
        shared.push(t.elapsed());
    }
    println!("{n} tools/call exchanges (request and JSON answer), in process");
    for (name, mut v) in [
        ("direct (copy)", direct),
        ("2026-07-28 stateless", stateless),
        ("2025-11-25 session", shared),
    ] {
        v.sort();
        let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        let total: Duration = v.iter().sum();
        println!(
            "{name:<22} p50 {:>7.2}µs  p99 {:>7.2}µs  p99.9 {:>7.2}µs  {:>8.0} exchanges/s",
            p(0.5),
            p(0.99),
            p(0.999),
            v.len() as f64 / total.as_secs_f64()
        );
    }
}
