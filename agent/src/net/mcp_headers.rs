//! MCP 2026-07-28 request headers over Streamable HTTP: `Mcp-Method` and `Mcp-Name` repeat a
//! request's method and the tool, prompt or resource it names, and `MCP-Protocol-Version` its
//! `_meta` protocol version, so that servers and intermediaries can route without reading the
//! body. A request whose headers and body disagree could be judged on one and served on the
//! other; it is refused (HTTP 400, JSON-RPC -32020, as a server must answer it), and so is a
//! 2026-07-28 request without the headers its revision requires.

use base64::Engine as _;
use http::HeaderMap;
use serde_json::Value;

/// JSON-RPC error code of a header that disagrees with the body (2026-07-28).
pub const HEADER_MISMATCH: i64 = -32020;

const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";
const VERSION: &str = "mcp-protocol-version";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The first protocol revision whose requests must carry the headers.
const FIRST_WITH_HEADERS: &str = "2026-07-28";

/// Why a request's headers and body disagree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("header {header} is {found:?}, but the body says {body:?}")]
    Differs {
        header: &'static str,
        found: String,
        body: String,
    },
    #[error("a {version} request has no {header} header")]
    Missing {
        header: &'static str,
        version: String,
    },
    #[error("header {header} cannot be read: {why}")]
    Unreadable { header: &'static str, why: String },
    #[error("headers name one request, but the body is a batch")]
    Batch,
}

/// Whether a request says it is of a stateless revision (2026-07-28 or later): each of its
/// exchanges stands alone.
pub fn is_stateless(headers: &HeaderMap) -> bool {
    header(headers, VERSION)
        .ok()
        .flatten()
        .is_some_and(|v| is_revision(&v) && v.as_str() >= FIRST_WITH_HEADERS)
}

/// Whether `v` reads as a protocol revision (a date, `YYYY-MM-DD`), which compare as text.
fn is_revision(v: &str) -> bool {
    v.len() == 10
        && v.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

/// Checks a POST's MCP headers against its JSON body (`body` already parsed; a body that is
/// not JSON is the guard's to refuse).
pub fn check(headers: &HeaderMap, body: &Value) -> Result<(), Mismatch> {
    let method_header = header(headers, METHOD)?;
    let name_header = header(headers, NAME)?;
    let version_header = header(headers, VERSION)?;
    let Value::Object(message) = body else {
        return match (&method_header, &name_header) {
            (None, None) => Ok(()),
            _ => Err(Mismatch::Batch),
        };
    };
    let params = message.get("params");
    let meta_version = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_VERSION))
        .and_then(Value::as_str);
    if let (Some(header), Some(body)) = (&version_header, meta_version)
        && header != body
    {
        return Err(Mismatch::Differs {
            header: "MCP-Protocol-Version",
            found: header.clone(),
            body: body.to_owned(),
        });
    }
    let version = meta_version.or(version_header.as_deref());
    let requires = version.is_some_and(|v| is_revision(v) && v >= FIRST_WITH_HEADERS);
    let method = message.get("method").and_then(Value::as_str);
    let is_request = message.contains_key("id");
    match (&method_header, method) {
        (Some(found), Some(body)) if found != body => {
            return Err(Mismatch::Differs {
                header: "Mcp-Method",
                found: found.clone(),
                body: body.to_owned(),
            });
        }
        (Some(found), None) => {
            return Err(Mismatch::Differs {
                header: "Mcp-Method",
                found: found.clone(),
                body: String::new(),
            });
        }
        (None, Some(_)) if requires && is_request => {
            return Err(Mismatch::Missing {
                header: "Mcp-Method",
                version: version.unwrap_or_default().to_owned(),
            });
        }
        _ => {}
    }
    // Methods whose name the header repeats; for any other, a name header is not ours to
    // check (an extension's routing, or a method the server will refuse).
    let named = match method {
        Some("tools/call" | "prompts/get") => params.and_then(|p| p.get("name")),
        Some("resources/read") => params.and_then(|p| p.get("uri")),
        // The tasks extension names the task.
        Some("tasks/get" | "tasks/cancel" | "tasks/update") => params.and_then(|p| p.get("taskId")),
        _ => return Ok(()),
    };
    match (&name_header, named) {
        (Some(found), Some(Value::String(body))) if found != body => Err(Mismatch::Differs {
            header: "Mcp-Name",
            found: found.clone(),
            body: body.clone(),
        }),
        (Some(_), Some(Value::String(_))) => Ok(()),
        // A name header with nothing (or no text) to name in the body.
        (Some(found), _) => Err(Mismatch::Differs {
            header: "Mcp-Name",
            found: found.clone(),
            body: named.map(Value::to_string).unwrap_or_default(),
        }),
        (None, Some(_)) if requires && is_request => Err(Mismatch::Missing {
            header: "Mcp-Name",
            version: version.unwrap_or_default().to_owned(),
        }),
        (None, _) => Ok(()),
    }
}

/// A header's value, decoded from the `=?base64?...?=` form; None when absent. A header given
/// twice is unreadable (which one a server reads is its own choice).
fn header(headers: &HeaderMap, name: &'static str) -> Result<Option<String>, Mismatch> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    let unreadable = |why: String| Mismatch::Unreadable { header: name, why };
    if values.next().is_some() {
        return Err(unreadable("it is given more than once".to_owned()));
    }
    let text = value
        .to_str()
        .map_err(|_| unreadable("it is not visible ASCII".to_owned()))?;
    let Some(encoded) = text
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Ok(Some(text.to_owned()));
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| unreadable(format!("its base64 does not decode: {e}")))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| unreadable("its base64 is not UTF-8".to_owned()))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn modern_call(tool: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": {},
            "_meta": {META_VERSION: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
    }

    #[test]
    fn headers_that_agree_with_the_body_pass() {
        let h = headers(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "read_file"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        assert_eq!(check(&h, &modern_call("read_file")), Ok(()));
        // Base64 for names that are not plain ASCII.
        let h = headers(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?csOpc3Vtw6k=?="),
        ]);
        assert_eq!(check(&h, &modern_call("résumé")), Ok(()));
        let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
            "params": {"uri": "file:///a", "_meta": {META_VERSION: "2026-07-28"}}});
        let h = headers(&[("mcp-method", "resources/read"), ("mcp-name", "file:///a")]);
        assert_eq!(check(&h, &read), Ok(()));
        // 2025-11-25 requests need none.
        let old =
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}});
        assert_eq!(check(&HeaderMap::new(), &old), Ok(()));
    }

    #[test]
    fn a_header_that_names_another_call_is_refused() {
        let h = headers(&[("mcp-method", "tools/call"), ("mcp-name", "read_file")]);
        assert_eq!(
            check(&h, &modern_call("delete_repo")),
            Err(Mismatch::Differs {
                header: "Mcp-Name",
                found: "read_file".into(),
                body: "delete_repo".into()
            })
        );
        let h = headers(&[("mcp-method", "tools/list"), ("mcp-name", "x")]);
        assert!(matches!(
            check(&h, &modern_call("x")),
            Err(Mismatch::Differs {
                header: "Mcp-Method",
                ..
            })
        ));
        let h = headers(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "x"),
            ("mcp-protocol-version", "2025-11-25"),
        ]);
        assert!(matches!(
            check(&h, &modern_call("x")),
            Err(Mismatch::Differs {
                header: "MCP-Protocol-Version",
                ..
            })
        ));
        // Given twice: a server may read either.
        let h = headers(&[
            ("mcp-method", "tools/call"),
            ("mcp-name", "x"),
            ("mcp-name", "y"),
        ]);
        assert!(matches!(
            check(&h, &modern_call("x")),
            Err(Mismatch::Unreadable { .. })
        ));
        let h = headers(&[("mcp-method", "tools/call"), ("mcp-name", "=?base64?!!?=")]);
        assert!(matches!(
            check(&h, &modern_call("x")),
            Err(Mismatch::Unreadable { .. })
        ));
    }

    #[test]
    fn a_2026_request_without_its_headers_is_refused() {
        assert!(matches!(
            check(&HeaderMap::new(), &modern_call("x")),
            Err(Mismatch::Missing {
                header: "Mcp-Method",
                ..
            })
        ));
        let h = headers(&[("mcp-method", "tools/call")]);
        assert!(matches!(
            check(&h, &modern_call("x")),
            Err(Mismatch::Missing {
                header: "Mcp-Name",
                ..
            })
        ));
        // A notification needs none.
        let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1, "_meta": {META_VERSION: "2026-07-28"}}});
        assert_eq!(check(&HeaderMap::new(), &cancelled), Ok(()));
        // Headers describe one request; a batch cannot match them.
        let h = headers(&[("mcp-method", "tools/call")]);
        assert_eq!(check(&h, &json!([modern_call("x")])), Err(Mismatch::Batch));
    }
}
