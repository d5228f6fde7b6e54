//! What credential brokering adds to a proxied request: the proxy's work on one request of a
//! session holding placeholders (the head's keys put in, the body scanned for every
//! placeholder in every encoding) beside the same request of a session holding none (one
//! lookup finds nothing: the path with brokering off), for conversation bodies of 2 KB to
//! 2 MB. The embedded DLP's scan of the same body is shown for scale: both run on the request
//! path before it leaves. In process, one core; medians of many runs.
//! `cargo run --release -p agentsh --example secrets_bench`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentsh::config::SecretDestination;
use agentsh::llm::dlp::Redactor;
use agentsh::secrets::{Broker, Foreign, Secret, SessionSecrets, Target};
use http::{HeaderMap, HeaderValue, Uri};

fn destination(host: &str, headers: &[&str]) -> Vec<SecretDestination> {
    vec![SecretDestination {
        host: host.into(),
        port: Some(443),
        headers: headers.iter().map(|h| (*h).into()).collect(),
        query: Vec::new(),
        body: false,
    }]
}

/// A conversation of about `bytes`, as an agent sends it (no placeholder in it).
fn conversation(bytes: usize) -> Vec<u8> {
    let turn =
        "Here is the file you asked for: fn main() { println!(\"hello\"); } and the tests pass. ";
    let mut messages = Vec::new();
    let mut size = 0;
    while size < bytes {
        let text = turn.repeat(8);
        size += text.len() + 40;
        messages.push(serde_json::json!({"role": "user", "content": text}));
    }
    serde_json::to_vec(&serde_json::json!({
        "model": "claude-sonnet-4-6", "max_tokens": 1024, "stream": true, "messages": messages
    }))
    .unwrap_or_default()
}

fn headers(key: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in [
        ("x-api-key", key),
        ("anthropic-version", "2023-06-01"),
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("user-agent", "Anthropic/Python 2.12.0"),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", "2.12.0"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(http::HeaderName::from_static(name), v);
        }
    }
    h
}

/// Median µs of `f` over `runs`.
fn median_us(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let broker = Broker::new(vec![
        Secret::new(
            "ANTHROPIC_API_KEY",
            "sk-ant-api03-bench-key-0123456789abcdefghijklmnopqrstuv",
            destination("api.anthropic.com", &["x-api-key", "authorization"]),
        ),
        Secret::new(
            "OPENAI_API_KEY",
            "sk-proj-bench-0123456789abcdefghijklmnopqrstuvwxyz",
            destination("api.openai.com", &["authorization"]),
        ),
        Secret::new(
            "GITHUB_TOKEN",
            "ghp_bench0123456789abcdefghijklmnopqrstuv",
            destination("api.github.com", &[]),
        ),
    ]);
    let placeholders: BTreeMap<String, String> = broker
        .new_placeholders()
        .expect("randomness for placeholders");
    let live: Mutex<HashMap<String, Arc<SessionSecrets>>> = Mutex::new(HashMap::from([(
        "holding".to_owned(),
        Arc::new(broker.session(&placeholders)),
    )]));
    let lookup = |id: &str| live.lock().ok().and_then(|m| m.get(id).cloned());
    let redactor = Redactor::new(Vec::new());
    let to = Target {
        host: "api.anthropic.com",
        port: 443,
    };
    println!(
        "{:<10} {:>16} {:>18} {:>14} {:>12}",
        "body", "off (no secrets)", "on (head + body)", "of which body", "DLP scan"
    );
    // The measured path does the real work: the key goes in.
    if let Some(secrets) = lookup("holding") {
        let mut h = headers(&placeholders["ANTHROPIC_API_KEY"]);
        let put_in = secrets.apply_head(to, &mut h, &mut Uri::from_static("/v1/messages"));
        assert_eq!(put_in, Ok(vec!["ANTHROPIC_API_KEY".to_owned()]));
    }
    for size in [2_000, 20_000, 200_000, 2_000_000] {
        let body = conversation(size);
        let runs = if size >= 1_000_000 { 50 } else { 500 };
        let off = median_us(runs, || {
            std::hint::black_box(lookup("none"));
        });
        let on = median_us(runs, || {
            let Some(secrets) = lookup("holding") else {
                return;
            };
            let mut h = headers(&placeholders["ANTHROPIC_API_KEY"]);
            let mut uri = Uri::from_static("/v1/messages");
            let head = secrets.apply_head(to, &mut h, &mut uri);
            let out = secrets.apply_body(to, &body, Foreign::Redact);
            let _ = std::hint::black_box((head, out));
        });
        let body_only = median_us(runs, || {
            if let Some(secrets) = lookup("holding") {
                let _ = std::hint::black_box(secrets.apply_body(to, &body, Foreign::Redact));
            }
        });
        let dlp = median_us(runs, || {
            std::hint::black_box(redactor.redact_body(&body));
        });
        println!(
            "{:<10} {:>13.2} µs {:>15.2} µs {:>11.2} µs {:>9.2} µs",
            format!("{} KB", body.len() / 1000),
            off,
            on,
            body_only,
            dlp
        );
    }
}
