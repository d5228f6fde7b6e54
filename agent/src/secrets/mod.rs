//! Credential brokering: the agent never holds the real keys.
//!
//! The daemon reads each configured secret's value once ([`vault`]). A session gets a
//! placeholder per secret in its place (same variable name, a value that is obviously not a
//! key, unique to the session). The proxies, after TLS termination, hand each request of the
//! session to [`SessionSecrets`]: the placeholder becomes the value only in requests to the
//! secret's destinations, and a placeholder on its way anywhere else stops the request
//! ([`broker`]), in any encoding [`scan`] reads.
//!
//! The real value lives only in agentshd's memory: never in a session's environment, files,
//! events or stored bodies (which keep the placeholder: they are captured before the
//! substitution).

mod broker;
mod scan;
mod vault;

#[cfg(test)]
mod tests;

pub use broker::{
    BodyOutcome, Broker, Foreign, PLACEHOLDER_PREFIX, Place, Refused, SessionSecrets, Target,
};
pub use scan::{Encoding, Found, Scanner};
pub use vault::{Secret, VaultError, ensure_private, load};
