//! Verdict latency with 100 registered tools: the engine in process, and a round trip over
//! agentshd's control socket, against a bare round trip over a Unix socket (the floor any
//! socket protocol pays) in the same run; the per-session limits' bookkeeping, which every
//! control line, proxied connection and request body pays; a provider-side MCP server's call
//! as the LLM proxy records it.
//! `cargo run --release -p agentsh --example verdict_bench` (or `make bench`).
//!
//! The shipped default policy, with one change for the steady-state lines: 50 000 calls in a
//! second would trip its burst rule (30 calls in 10 s) on every call, which is not the path an
//! agent's calls take. The burst path is measured on its own line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentsh::api::RemoteDecider;
use agentsh::audit::NullSink;
use agentsh::daemon::{self, Daemon, Listener, Settings};
use agentsh::engine::provider::ProviderCall;
use agentsh::engine::{Decider, Engine, Rules};
use agentsh::limits::Budget;
use agentsh::llm::{Arguments, ToolCall};
use agentsh::session::{CgroupParent, Sessions};
use agentsh::store::EventLog;
use serde_json::{Value, json};

const N: usize = 50_000;

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let shipped = agentsh::config::load_file(&root.join("policies/default.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut policy = shipped.clone();
    policy.sandbox.mcp.cross_server.burst.max_calls = u32::MAX;
    let dir = tempfile::tempdir().expect("temp dir");
    let tools: Vec<Value> = (0..100)
        .map(|i| json!({"name": format!("tool_{i}"), "description": format!("Tool number {i}."), "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}))
        .collect();
    let names: Vec<String> = (0..100).map(|i| format!("tool_{i}")).collect();
    let arguments = json!({"path": "/home/dev/project/src/main.rs"});
    let arguments = arguments.as_object();

    // In process: the engine's decision (the event goes to a sink that drops it).
    let in_process_with = |policy: agentsh::config::Policy| {
        let engine = Engine::new(
            Rules::compile(policy).expect("rules"),
            None,
            Arc::new(NullSink),
        );
        let session = engine.session(Some("bench"));
        engine.tools_listed(&session, "fs", &tools);
        measure(|i| {
            std::hint::black_box(engine.tool_call(&session, "fs", &names[i % 100], arguments));
        })
    };
    let in_process = in_process_with(policy.clone());
    let in_process_burst = in_process_with(shipped);

    // A model's call as the LLM proxy sees it, named the way each host names MCP tools: the
    // name is resolved to (server, tool) against every tool of the session (here 5 servers of
    // 100 tools, the called one last), then decided as the tools/call.
    let intercepted = |name: &str, namespace: Option<&str>| {
        let engine = Engine::new(
            Rules::compile(policy.clone()).expect("rules"),
            None,
            Arc::new(NullSink),
        );
        let session = engine.session(Some("bench"));
        for server in ["github", "memory", "browser", "db", "my.fs"] {
            engine.tools_listed(&session, server, &tools);
        }
        let patterns = agentsh::llm::host_names::default_tool_names();
        let workspace = agentsh::native::Workspace {
            home: Some("/home/dev".into()),
            cwd: Some("/home/dev/project".into()),
        };
        let call = ToolCall {
            id: "toolu_1".into(),
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            arguments: Arguments::Object(arguments.cloned().unwrap_or_default()),
        };
        measure(|_| {
            std::hint::black_box(engine.intercepted_call(
                &session,
                &agentsh::engine::Intercepted {
                    dialect: agentsh::llm::Dialect::AnthropicMessages,
                    request_id: "r",
                    call: &call,
                    patterns: &patterns,
                    workspace: &workspace,
                },
            ));
        })
    };
    let claude = intercepted("mcp__my_fs__tool_99", None);
    let gemini = intercepted("mcp_my.fs_tool_99", None);
    let codex = intercepted("tool_99", Some("mcp__my_fs"));
    let native = intercepted("Bash", None);

    // A call the provider made through a provider-side MCP server: decided as an execution,
    // counted and recorded.
    let provider_ran = {
        let engine = Engine::new(
            Rules::compile(policy.clone()).expect("rules"),
            None,
            Arc::new(NullSink),
        );
        let session = engine.session(Some("bench"));
        let call = ToolCall {
            id: "mcptoolu_1".into(),
            name: "ask_question".into(),
            namespace: None,
            arguments: Arguments::Object(arguments.cloned().unwrap_or_default()),
        };
        measure(|_| {
            std::hint::black_box(engine.provider_call_ran(
                &session,
                &ProviderCall {
                    dialect: agentsh::llm::Dialect::AnthropicMessages,
                    request_id: "req-1",
                    server: "wiki",
                    label: "docs",
                    named_by_request: true,
                    call: &call,
                },
            ));
        })
    };

    // The per-session limits: a share of a budget taken, grown to a control line's size and
    // given back, among 64 sessions' keys (what each control line and request body pays).
    let budget = Budget::new("bench bytes", 128 << 20);
    let keys: Vec<String> = (0..64).map(|i| format!("session-{i}")).collect();
    let limits = measure(|i| {
        let mut share = budget.share(&keys[i % keys.len()]);
        share.resize(300).expect("within the cap");
        std::hint::black_box(&share);
    });
    let no_limits = measure(|i| {
        std::hint::black_box(keys[i % keys.len()].len());
    });

    // Over the control socket, to a daemon with its event log (events journaled and committed).
    let log = Arc::new(EventLog::open(dir.path()).expect("event log"));
    let daemon_engine = Arc::new(Engine::new(
        Rules::compile(policy).expect("rules"),
        None,
        log.clone(),
    ));
    let socket = dir.path().join("agentsh.sock");
    let listener = Arc::new(Listener::bind(&socket).expect("bind"));
    let d = Arc::new(Daemon::new(
        daemon_engine,
        log,
        Sessions::new(&CgroupParent::Auto),
        Settings::default(),
        Vec::new(),
        root.join("policies/default.yaml"),
    ));
    {
        let listener = Arc::clone(&listener);
        std::thread::spawn(move || daemon::serve(d, &listener));
    }
    let remote = RemoteDecider::connect(&socket).expect("connect");
    remote.tools_listed("fs", &tools).expect("listed");
    let round_trip = measure(|i| {
        let verdict = remote.tool_call("fs", &names[i % 100], arguments);
        std::hint::black_box(verdict.expect("verdict"));
    });

    // The floor: a bare line echo over a Unix socket, same size of request.
    let echo_path = dir.path().join("echo.sock");
    let echo = UnixListener::bind(&echo_path).expect("bind echo");
    std::thread::spawn(move || {
        if let Ok((stream, _)) = echo.accept() {
            let mut out = stream.try_clone().expect("clone");
            let mut reader = BufReader::new(stream);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                if out.write_all(b"{\"v\":1,\"id\":1,\"ok\":{}}\n").is_err() {
                    break;
                }
                line.clear();
            }
        }
    });
    let stream = UnixStream::connect(&echo_path).expect("connect echo");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let request = format!(
        "{}\n",
        json!({"v":1,"id":1,"op":"mcp.tool_call","args":{"server":"fs","tool":"tool_1","arguments":arguments}})
    );
    let mut line = Vec::new();
    let bare = measure(|_| {
        writer.write_all(request.as_bytes()).expect("write");
        line.clear();
        reader.read_until(b'\n', &mut line).expect("read");
    });

    println!("verdict for one tools/call, 100 tools registered, {N} calls each:");
    report("in-process engine decision", in_process);
    report("in-process, burst alert on every call", in_process_burst);
    println!("a model's call, resolved among 500 tools of 5 servers, then decided:");
    report("Claude Code's mcp__my_fs__tool_99", claude);
    report("Gemini CLI's mcp_my.fs_tool_99", gemini);
    report("Codex's namespace mcp__my_fs + tool_99", codex);
    report("a native tool (Bash): every name tried", native);
    report("a provider-side server's call, recorded", provider_ran);
    report("control socket round trip (agentshd)", round_trip);
    report("bare Unix socket round trip (floor)", bare);
    println!("per-session limits, per control line or request body:");
    report("budget share taken and given back", limits);
    report("no accounting (floor)", no_limits);
}

fn measure(mut f: impl FnMut(usize)) -> Vec<Duration> {
    for i in 0..N / 10 {
        f(i);
    }
    (0..N)
        .map(|i| {
            let t = Instant::now();
            f(i);
            t.elapsed()
        })
        .collect()
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "  {name:<40} p50 {:>7.2} µs   p99 {:>7.2} µs",
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6
    );
}
