//! The MCP protocol layer: JSON-RPC 2.0 framing, a strict message model, typed views over the
//! MCP payloads the guard needs, canonical (RFC 8785) hashing of tool definitions, and tool
//! naming.
//!
//! Everything here is pure (bytes in, values out) except [`framing`], which owns the bounded
//! line reader for stdio transports.
//!
//! The guiding rule is that the guard must see exactly what the peer will see:
//!
//! * messages are forwarded as their original bytes ([`framing::Line::raw`],
//!   [`jsonrpc::Message::raw`]), never re-serialised;
//! * the parser ([`jsonrpc::parse`]) refuses every input on which two conforming JSON parsers
//!   could disagree (duplicate keys, lone surrogates, a BOM, trailing data, excessive nesting);
//! * classification ([`jsonrpc::Kind`]) marks ambiguous envelopes `Invalid`, and
//!   [`jsonrpc::suspicious_method`] flags method names that are not a known name but look like
//!   one after normalisation. Callers refuse both when the message could be a `tools/call`
//!   ([`jsonrpc::Message::may_be_tool_call`]).

pub mod canonical;
pub mod framing;
pub mod jsonrpc;
pub mod message;
pub mod tool;

pub use canonical::{
    ToolHash, ToolHashParseError, arguments_digest, definition_hash, to_canonical_vec,
};
pub use framing::{FrameItem, FrameReader, FramingError, Line, Terminator};
pub use jsonrpc::{
    Frame, Id, InvalidReason, Kind, MAX_DEPTH, Message, Method, ParseError, parse,
    suspicious_method,
};
pub use message::{CallToolResult, ContentItem, MessageError, ToolCallParams, ToolsListResult};
pub use tool::{ToolDefinition, ToolError, ToolKey, parse_prefixed_tool_name};
