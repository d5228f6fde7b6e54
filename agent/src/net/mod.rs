//! The transparent proxy: connections the kernel hooks sent here, by their original
//! destination. So far its parts: TLS ([`tls`]: the ClientHello read in place, termination
//! with the session's CA, upstream TLS to the original address) and MCP over HTTP
//! ([`mcp_http`]: the stdio shim's guard applied to Streamable HTTP messages), and brokered
//! secrets' destinations ([`brokered`]: the real values put in).

pub mod brokered;
pub mod front;
pub mod listen;
pub mod mcp_exchange;
pub mod mcp_headers;
pub mod mcp_http;
pub mod origin;
pub mod prefetch;
pub mod self_test;
pub mod targets;
pub mod tls;
pub mod transparent;
