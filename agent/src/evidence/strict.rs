//! Reading records for verification: JSON that means one thing only.
//!
//! serde_json keeps the last of two equal keys in an object. A record with `"action": "block"`
//! put in front of its own `"action": "allow"` hashes as the original (the first is dropped),
//! yet a reader that keeps the first key (jq's `--stream`, some log tools) sees `block`. A
//! record that reads two ways is not the record that was signed: it is refused as unreadable.

use serde_json::Value;

use crate::mcp::jsonrpc::{ParseError, parse_strict};

/// Deeper than any record agentsh writes; serde_json's own recursion limit.
const MAX_DEPTH: usize = 128;

/// Parses one record; an object anywhere in it with a key twice is an error naming the key.
pub fn parse_record(bytes: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    parse_strict(text, MAX_DEPTH).map_err(|e| match e {
        ParseError::DuplicateKey { key } => {
            format!("the key {key:?} twice in one object (readers disagree on which counts)")
        }
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        let text =
            r#"{"a": [1, -2, 3.5, "x\u00e9", null, true, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            parse_record(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn refuses_a_key_twice_at_any_depth() {
        for text in [
            r#"{"action": "block", "action": "allow"}"#,
            r#"{"details": {"n": 1, "n": 2}}"#,
            r#"[{"a": 1, "a": 1}]"#,
        ] {
            let err = parse_record(text.as_bytes()).unwrap_err();
            assert!(err.contains("twice"), "{text}: {err}");
        }
        assert!(
            parse_record(br#"{"a": 1} {"b": 2}"#).is_err(),
            "trailing data"
        );
    }
}
