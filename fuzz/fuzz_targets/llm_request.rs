//! What the LLM proxy reads from an agent's request (`agentsh::llm::request`, `dlp`,
//! `host_names`, `Dialect::of_path`):
//! - nothing panics;
//! - DLP redaction leaves no secret behind (a second pass finds nothing), and a JSON body
//!   stays JSON;
//! - a host's tool-name pattern splits only names it could have built.
#![no_main]

use std::sync::LazyLock;

use agentsh::llm::Dialect;
use agentsh::llm::dlp::Redactor;
use agentsh::llm::host_names::{ToolNamePattern, names_tool};
use agentsh::llm::request::facts;
use libfuzzer_sys::fuzz_target;

static REDACTOR: LazyLock<Redactor> = LazyLock::new(Redactor::default);

const DIALECTS: [Dialect; 4] = [
    Dialect::AnthropicMessages,
    Dialect::OpenAiChat,
    Dialect::OpenAiResponses,
    Dialect::GeminiGenerateContent,
];

const PATHS: [&str; 4] = [
    "/v1/messages",
    "/v1/chat/completions",
    "/v1/beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
    "/v1internal:generateContent",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match selector % 3 {
        0 => {
            let dialect = DIALECTS[usize::from(selector / 3) % 4];
            let _ = facts(dialect, PATHS[usize::from(selector / 12) % 4], body);
            if let Ok(path) = std::str::from_utf8(body) {
                let _ = Dialect::of_path(path);
                let _ = facts(dialect, path, b"{}");
            }
        }
        1 => {
            let redaction = REDACTOR.redact_body(body);
            if let Some(redacted) = &redaction.body {
                assert!(
                    !redaction.findings.is_empty(),
                    "a body changed with nothing found"
                );
                let again = REDACTOR.redact_body(redacted);
                assert!(
                    again.findings.is_empty(),
                    "a secret is left after redaction: {:?} in {}",
                    again.findings,
                    String::from_utf8_lossy(redacted)
                );
                if serde_json::from_slice::<serde_json::Value>(body).is_ok() {
                    assert!(
                        serde_json::from_slice::<serde_json::Value>(redacted).is_ok(),
                        "a JSON body is no longer JSON after redaction"
                    );
                }
            } else {
                assert!(redaction.findings.is_empty());
            }
        }
        _ => {
            let Ok(text) = std::str::from_utf8(body) else {
                return;
            };
            let (pattern, name) = text.split_once('\n').unwrap_or((text, "mcp__fs__read"));
            if let Ok(pattern) = ToolNamePattern::new(pattern)
                && let Some((server, tool)) = pattern.split(name)
            {
                assert!(!server.is_empty() && !tool.is_empty());
                assert!(name.contains(server) && name.contains(tool));
            }
            let (server, tool) = name.split_once('/').unwrap_or((name, "t"));
            let _ = names_tool(server, tool, None, text);
            let _ = names_tool(server, tool, Some(server), tool);
        }
    }
});
