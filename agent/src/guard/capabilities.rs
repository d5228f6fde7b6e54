//! The client capabilities a server is told of, without those the policy withholds: where
//! `server_requests` refuses sampling, elicitation or roots, the server is not told the client
//! could answer them, so it does not ask at all. Both eras declare them: `initialize`'s
//! `params.capabilities` (2025-11-25) and every request's
//! `params._meta["io.modelcontextprotocol/clientCapabilities"]` (2026-07-28).

use serde_json::{Map, Value};

/// Where 2026-07-28 requests declare the client's capabilities.
pub(super) const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// The message without the withheld capabilities; None when it declares none of them.
pub(super) fn without(message: &Value, initialize: bool, withhold: &[String]) -> Option<Value> {
    let withheld_declared = declared(message, initialize).iter().any(|capabilities| {
        withhold
            .iter()
            .any(|name| capabilities.contains_key(name.as_str()))
    });
    if !withheld_declared {
        return None;
    }
    let mut message = message.clone();
    for capabilities in declared_mut(&mut message, initialize) {
        for name in withhold {
            capabilities.remove(name.as_str());
        }
    }
    Some(message)
}

/// JSON-RPC error code of a request that needs a client capability the client did not declare
/// (2026-07-28, `MissingRequiredClientCapabilityError`).
pub(super) const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;

/// The server request a withheld capability stands for, when `error` is a
/// missing-capability error naming one: the server would have asked, and only did not because
/// the capability was withheld from it.
pub(super) fn withheld_request(error: &Value, withhold: &[String]) -> Option<&'static str> {
    if error.get("code").and_then(Value::as_i64) != Some(MISSING_REQUIRED_CLIENT_CAPABILITY) {
        return None;
    }
    let required = error
        .get("data")
        .and_then(|d| d.get("requiredCapabilities"))
        .and_then(Value::as_object)?;
    withhold
        .iter()
        .filter(|name| required.contains_key(name.as_str()))
        .find_map(|name| match name.as_str() {
            "sampling" => Some("sampling/createMessage"),
            "elicitation" => Some("elicitation/create"),
            "roots" => Some("roots/list"),
            _ => None,
        })
}

/// Whether the message declares capabilities at all (the guard asks for the policy's list
/// only then).
pub(super) fn declares_any(message: &Value, initialize: bool) -> bool {
    !declared(message, initialize).is_empty()
}

/// The capability objects a message declares: `initialize`'s, and its `_meta` one.
fn declared(message: &Value, initialize: bool) -> Vec<&Map<String, Value>> {
    let Some(params) = message.get("params") else {
        return Vec::new();
    };
    let from_initialize = initialize
        .then(|| params.get("capabilities").and_then(Value::as_object))
        .flatten();
    let from_meta = params
        .get("_meta")
        .and_then(|meta| meta.get(CLIENT_CAPABILITIES_META))
        .and_then(Value::as_object);
    from_initialize.into_iter().chain(from_meta).collect()
}

fn declared_mut(message: &mut Value, initialize: bool) -> Vec<&mut Map<String, Value>> {
    let Some(Value::Object(params)) = message.get_mut("params") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (key, value) in params.iter_mut() {
        let Value::Object(object) = value else {
            continue;
        };
        if key == "capabilities" && initialize {
            found.push(object);
        } else if key == "_meta"
            && let Some(Value::Object(declared)) = object.get_mut(CLIENT_CAPABILITIES_META)
        {
            found.push(declared);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn withhold(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_missing_capability_error_names_the_request_it_stands_for() {
        let error = json!({"code": -32021, "message": "Server requires the elicitation capability",
                           "data": {"requiredCapabilities": {"elicitation": {}}}});
        let withheld = withhold(&["sampling", "elicitation"]);
        assert_eq!(
            withheld_request(&error, &withheld),
            Some("elicitation/create")
        );
        // A capability the policy does not withhold: the client really lacks it.
        assert_eq!(withheld_request(&error, &withhold(&["sampling"])), None);
        let other = json!({"code": -32602, "data": {"requiredCapabilities": {"elicitation": {}}}});
        assert_eq!(withheld_request(&other, &withheld), None);
    }

    #[test]
    fn initialize_loses_the_withheld_capabilities_and_keeps_the_rest() {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}, "experimental": {}},
            "clientInfo": {"name": "c", "version": "1"}}});
        let out = without(&init, true, &withhold(&["sampling", "elicitation"])).unwrap();
        assert_eq!(
            out["params"]["capabilities"],
            json!({"roots": {"listChanged": true}, "experimental": {}})
        );
        assert_eq!(out["params"]["clientInfo"], init["params"]["clientInfo"]);
    }

    #[test]
    fn every_2026_request_loses_them_from_its_meta() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "deploy", "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "roots": {}}}}});
        let out = without(&call, false, &withhold(&["elicitation", "sampling"])).unwrap();
        assert_eq!(
            out["params"]["_meta"][CLIENT_CAPABILITIES_META],
            json!({"roots": {}})
        );
        assert_eq!(out["params"]["name"], "deploy");
        // `capabilities` outside initialize is a tool's business, not a declaration.
        let odd = json!({"method": "tools/call", "params": {"capabilities": {"sampling": {}}}});
        assert_eq!(without(&odd, false, &withhold(&["sampling"])), None);
    }

    #[test]
    fn nothing_changes_when_nothing_withheld_is_declared() {
        let call = json!({"method": "tools/list", "params": {"_meta": {CLIENT_CAPABILITIES_META: {"roots": {}}}}});
        assert_eq!(without(&call, false, &withhold(&["sampling"])), None);
        assert_eq!(without(&call, false, &[]), None);
        assert!(declares_any(&call, false));
        assert!(!declares_any(&json!({"method": "tools/list"}), false));
    }
}
