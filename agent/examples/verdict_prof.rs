use agentsh::audit::NullSink;
use agentsh::engine::{Engine, Rules};
use serde_json::{Value, json};
use std::sync::Arc;
fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut policy = agentsh::config::load_file(&root.join("policies/default.yaml")).unwrap();
    if std::env::args().nth(1).is_none() {
        policy.sandbox.mcp.cross_server.burst.enabled = false;
    }
    let tools: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("tool_{i}"), "description": format!("Tool number {i}."), "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}))
        .collect();
    let names: Vec<String> = (0..100).map(|i| format!("tool_{i}")).collect();
    let arguments = json!({"path": "/home/dev/project/src/main.rs"});
    let arguments = arguments.as_object();
    let engine = Engine::new(Rules::compile(policy).unwrap(), None, Arc::new(NullSink));
    let session = engine.session(Some("bench"));
    engine.tools_listed(&session, "fs", &tools);
    for i in 0..2_000_000usize {
        std::hint::black_box(engine.tool_call(&session, "fs", &names[i % 100], arguments));
    }
}
