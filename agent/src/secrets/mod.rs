//! Credential brokering: the agent never holds the real keys.
//!
//! The daemon reads each configured secret's value once ([`vault`]). A session gets a
//! placeholder per secret in its place (same variable name, a value that is obviously not a
//! key, unique to the session). The proxies, after TLS termination, hand each request of the
//! session to [`SessionSecrets`]: the placeholder becomes the value only in requests to the
//! secret's destinations, and a placeholder on its way anywhere else stops the request
//! ([`broker`]), in any encoding [`scan`] reads. A real value that comes back in a response
//! (a destination echoing what it was sent, or returning a token it stored) goes back to its
//! placeholder before the agent sees it ([`reflect`]).
//!
//! The real value lives only in agentshd's memory: never in a session's environment, files,
//! events or stored bodies (which keep the placeholder: they are captured before the
//! substitution).

mod broker;
mod reflect;
mod scan;
mod vault;

#[cfg(test)]
mod tests;

pub use broker::{
    BodyOutcome, Broker, Foreign, PLACEHOLDER_PREFIX, Place, Refused, SessionSecrets, Target,
    is_placeholder_for,
};
pub use reflect::ValueScrubber;
pub use scan::{Encoding, Found, Scanner};
pub use vault::{Secret, VaultError, ensure_private, load};
