//! AgentShield's 77 MCP red-team cases, replayed against its default policy written in agentsh's
//! format (tests/policies/agentshield-default.yaml). Every expected decision and reason holds.

use std::path::Path;

use agentsh::config::{self, Decision};
use agentsh::policy::{self, CallRequest, ToolStatus};
use serde_json::Value;

#[test]
fn agentshield_redteam_cases_hold() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy = config::load_file(&root.join("policies/agentshield-default.yaml"))
        .unwrap_or_else(|e| panic!("policy does not load:\n{e}"));
    let data: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("data/agentshield-redteam.json")).unwrap(),
    )
    .unwrap();
    let cases = data["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 77, "the suite has 77 cases");

    let mut failures = Vec::new();
    for case in cases {
        let id = case["id"].as_str().unwrap();
        let tool = case["tool"].as_str().unwrap();
        let arguments = case["arguments"].as_object().unwrap();
        let expected = match case["expected"].as_str().unwrap() {
            "BLOCK" => Decision::Block,
            "AUDIT" => Decision::Audit,
            "ALLOW" => Decision::Allow,
            other => panic!("{id}: unknown expectation {other}"),
        };
        let reason = case["reason"].as_str().unwrap();
        let verdict = policy::decide_call(
            policy.mcp(),
            &CallRequest {
                server: "agentshield",
                packages: &[],
                tool,
                arguments: Some(arguments),
                status: ToolStatus::Unlisted,
            },
        );
        let reason_ok = reason.is_empty()
            || verdict
                .reason
                .to_lowercase()
                .contains(&reason.to_lowercase());
        if verdict.decision != expected || !reason_ok {
            failures.push(format!(
                "{id}: expected {expected:?} ({reason:?}), got {:?} by {} ({:?})",
                verdict.decision, verdict.rule, verdict.reason
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 77 cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
