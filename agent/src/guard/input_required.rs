//! Multi round-trip requests (MRTR, MCP 2026-07-28): a server answers `tools/call`,
//! `prompts/get` or `resources/read` with `{"resultType": "input_required", "inputRequests":
//! {KEY: {"method": ..., "params": ...}}, "requestState": ...}` instead of sending sampling,
//! elicitation or roots requests of its own; the client answers them and retries the call.
//!
//! Each input request is what the stand-alone server request would have been, and is judged
//! as one. Any result that carries `inputRequests` is read so, whatever its `resultType` says
//! and whatever the era: a client that acts on them would otherwise answer requests nobody
//! judged.

use serde_json::Value;

/// The methods MCP defines as input requests; the ones `server_requests` governs.
const INPUT_REQUEST_METHODS: [&str; 3] =
    ["sampling/createMessage", "elicitation/create", "roots/list"];

/// One entry of `inputRequests`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct InputRequest<'a> {
    /// The server's key for it, which the client's answer repeats.
    pub key: &'a str,
    pub method: &'a str,
    /// What it shows the user or the model (none for roots).
    pub params: Option<&'a Value>,
}

/// Why a result's input requests cannot be judged.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unreadable {
    #[error("its inputRequests is not an object")]
    NotAnObject,
    #[error("input request '{key}' has no method")]
    NoMethod { key: String },
    #[error("input request '{key}' asks for {method}, which MCP does not define as one")]
    UnknownMethod { key: String, method: String },
}

/// The input requests `result` carries, in order; None when it carries none.
pub(super) fn input_requests(result: &Value) -> Option<Result<Vec<InputRequest<'_>>, Unreadable>> {
    let requests = result.get("inputRequests")?;
    let Value::Object(requests) = requests else {
        // `null` is as good as absent; anything else might be read by some client.
        return (!requests.is_null()).then_some(Err(Unreadable::NotAnObject));
    };
    Some(
        requests
            .iter()
            .map(|(key, request)| {
                let method = request
                    .get("method")
                    .and_then(Value::as_str)
                    .ok_or_else(|| Unreadable::NoMethod { key: key.clone() })?;
                if !INPUT_REQUEST_METHODS.contains(&method) {
                    return Err(Unreadable::UnknownMethod {
                        key: key.clone(),
                        method: method.to_owned(),
                    });
                }
                Ok(InputRequest {
                    key,
                    method,
                    params: request.get("params"),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_input_requests_of_a_result_are_read_in_order() {
        let result = json!({
            "resultType": "input_required",
            "inputRequests": {
                "github_login": {"method": "elicitation/create", "params": {"mode": "form", "message": "user?", "requestedSchema": {"type": "object"}}},
                "capital": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 10}},
                "where": {"method": "roots/list"}
            },
            "requestState": "opaque"
        });
        let found = input_requests(&result).unwrap().unwrap();
        let read: Vec<(&str, &str, Option<&Value>)> =
            found.iter().map(|r| (r.key, r.method, r.params)).collect();
        let params = |key: &str| result["inputRequests"][key].get("params");
        assert_eq!(
            read,
            [
                ("github_login", "elicitation/create", params("github_login")),
                ("capital", "sampling/createMessage", params("capital")),
                ("where", "roots/list", None),
            ]
        );
        assert!(read[0].2.is_some());
    }

    #[test]
    fn a_result_without_input_requests_has_none() {
        assert_eq!(input_requests(&json!({"content": []})), None);
        assert_eq!(input_requests(&json!({"inputRequests": null})), None);
        // State only (load shedding): nothing to judge.
        let state_only = json!({"resultType": "input_required", "requestState": "s"});
        assert_eq!(input_requests(&state_only), None);
    }

    #[test]
    fn what_cannot_be_judged_says_why() {
        assert_eq!(
            input_requests(&json!({"inputRequests": []})),
            Some(Err(Unreadable::NotAnObject))
        );
        assert_eq!(
            input_requests(&json!({"inputRequests": {"k": {"params": {}}}})),
            Some(Err(Unreadable::NoMethod { key: "k".into() }))
        );
        assert_eq!(
            input_requests(&json!({"inputRequests": {"k": {"method": "tools/call"}}})),
            Some(Err(Unreadable::UnknownMethod {
                key: "k".into(),
                method: "tools/call".into()
            }))
        );
    }
}
