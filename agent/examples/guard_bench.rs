//! In-process cost of the stdio guard per message, without pipes or processes:
//! `cargo run --release -p agentsh --example guard_bench [-- POLICY]`.

use std::sync::Arc;
use std::time::Instant;

use agentsh::audit::NullSink;
use agentsh::engine::{Engine, Local, Rules};
use agentsh::guard::Guard;

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
    let session = engine.session(None);
    let guard = Guard::new("bench", Arc::new(Local::new(engine, session)), max);
    let n = 200_000;
    let requests: Vec<Vec<u8>> = (0..n)
        .map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"/home/dev/project/src/main.rs"}}}}}}"#).into_bytes())
        .collect();
    let responses: Vec<Vec<u8>> = (0..n)
        .map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"fn main() {{ println!(\"hello\"); }}"}}]}}}}"#).into_bytes())
        .collect();
    let mut client = Vec::with_capacity(n);
    let mut server = Vec::with_capacity(n);
    for (req, resp) in requests.iter().zip(&responses) {
        let t = Instant::now();
        std::hint::black_box(guard.from_client(req));
        let c = t.elapsed();
        let t = Instant::now();
        std::hint::black_box(guard.from_server(resp));
        client.push(c);
        server.push(t.elapsed());
    }
    for (name, mut v) in [
        ("tools/call request", client),
        ("tools/call result", server),
    ] {
        v.sort();
        let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!(
            "{name:<20} p50 {:>6.2}µs  p99 {:>6.2}µs  p99.9 {:>6.2}µs",
            p(0.5),
            p(0.99),
            p(0.999)
        );
    }
}
