//! The control socket between agentshd, agentshctl and agentsh-shim.
//!
//! Newline-delimited JSON over a Unix stream socket, one request and one response per line, in
//! order. `docs/control-protocol.md` documents every operation; [`protocol`] is the same in
//! types. The daemon knows who is asking from the socket's peer credentials (SO_PEERCRED) and
//! the peer's cgroup, never from anything in a request.

pub mod client;
pub mod protocol;

pub use client::{Client, ClientError, Notices, RemoteDecider, default_socket_path, socket_path};
pub use protocol::{ApiError, ErrorCode, Notice, NoticeKind, PROTOCOL_VERSION};
