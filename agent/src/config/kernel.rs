//! The kernel part of the daemon config, `kernel:`: whether the eBPF hooks enforce, where the
//! transparent proxy listens, which loopback addresses are intercepted, what happens to
//! traffic that is neither LLM nor a declared MCP server, and addresses no session may reach.

use std::net::{IpAddr, SocketAddr};

use super::diagnostic::Report;
use super::keywords::{Enforcement, OtherTraffic};
use super::reader::{self, Fields};
use super::yaml::Node;

pub(super) const KERNEL_KEYS: &[&str] = &[
    "enforcement",
    "listen",
    "listen6",
    "intercept_loopback",
    "other_traffic",
    "deny",
];

/// Below 1024: while agentshd is down nobody else can listen there (an unprivileged agent
/// cannot take the port and receive its own session's redirected connections). Port 0 (any
/// free port) is for tests that run several daemons.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:915";
pub const DEFAULT_LISTEN6: &str = "[::1]:915";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelConfig {
    pub enforcement: Enforcement,
    /// The transparent proxy, IPv4 (loopback).
    pub listen: SocketAddr,
    /// The transparent proxy, IPv6 (loopback); `None` (`off`): IPv6 connections are not
    /// redirected (hosts without IPv6 loopback).
    pub listen6: Option<SocketAddr>,
    /// Loopback addresses whose connections are intercepted like remote ones (fake upstreams
    /// in tests, a local MCP server to inspect).
    pub intercept_loopback: Vec<IpAddr>,
    pub other_traffic: OtherTraffic,
    /// Destinations no session may connect to: (address, port), port 0 for every port.
    pub deny: Vec<(IpAddr, u16)>,
}

impl Default for KernelConfig {
    fn default() -> Self {
        Self {
            enforcement: Enforcement::Auto,
            listen: parse_default(DEFAULT_LISTEN),
            listen6: Some(parse_default(DEFAULT_LISTEN6)),
            intercept_loopback: Vec::new(),
            other_traffic: OtherTraffic::Splice,
            deny: Vec::new(),
        }
    }
}

fn parse_default(text: &str) -> SocketAddr {
    text.parse()
        .unwrap_or_else(|_| unreachable!("{text} is a socket address"))
}

pub(super) fn read(r: &mut Report, node: &Node) -> KernelConfig {
    let d = KernelConfig::default();
    let Some(f) = Fields::open(r, node, "kernel", KERNEL_KEYS) else {
        return d;
    };
    let listen = f
        .get("listen")
        .and_then(|n| loopback_socket(r, n, &f.path_of("listen"), false))
        .unwrap_or(d.listen);
    let listen6 = match f.get("listen6") {
        None => d.listen6,
        Some(n) if n.as_scalar().is_some_and(|s| s.text == "off") => None,
        Some(n) => loopback_socket(r, n, &f.path_of("listen6"), true).or(d.listen6),
    };
    let path = f.path_of("intercept_loopback");
    let intercept_loopback = f
        .list(r, "intercept_loopback")
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let item = format!("{path}[{i}]");
            let text = reader::nonempty_string(r, n, &item)?;
            match text.parse::<IpAddr>() {
                Ok(ip) if ip.is_loopback() => Some(ip),
                Ok(_) => {
                    r.error(
                        n.loc,
                        format!("`{item}`: `{text}` is not a loopback address (127.0.0.0/8 or ::1); other addresses are intercepted anyway"),
                    );
                    None
                }
                Err(_) => {
                    r.error(n.loc, format!("`{item}`: `{text}` is not an IP address"));
                    None
                }
            }
        })
        .collect();
    let path = f.path_of("deny");
    let deny = f
        .list(r, "deny")
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let item = format!("{path}[{i}]");
            let text = reader::nonempty_string(r, n, &item)?;
            let parsed = parse_destination(&text);
            if parsed.is_none() {
                r.error(
                    n.loc,
                    format!("`{item}`: `{text}` is not an address or address:port (169.254.169.254, 10.0.0.5:5432, [2001:db8::1]:443)"),
                );
            }
            parsed
        })
        .collect();
    KernelConfig {
        enforcement: f.keyword(r, "enforcement", d.enforcement),
        listen,
        listen6,
        intercept_loopback,
        other_traffic: f.keyword(r, "other_traffic", d.other_traffic),
        deny,
    }
}

/// `ip` (every port) or `ip:port` / `[ipv6]:port`.
fn parse_destination(text: &str) -> Option<(IpAddr, u16)> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some((ip, 0));
    }
    let addr: SocketAddr = text.parse().ok()?;
    (addr.port() != 0).then(|| (addr.ip(), addr.port()))
}

fn loopback_socket(r: &mut Report, node: &Node, path: &str, v6: bool) -> Option<SocketAddr> {
    let text = reader::nonempty_string(r, node, path)?;
    let example = if v6 { "[::1]:915" } else { "127.0.0.1:915" };
    match text.parse::<SocketAddr>() {
        Ok(addr) if addr.ip().is_loopback() && addr.is_ipv6() == v6 => Some(addr),
        _ => {
            r.error(
                node.loc,
                format!(
                    "`{path}` must be an {} loopback address with a port, such as {example}; found `{text}`",
                    if v6 { "IPv6" } else { "IPv4" }
                ),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_with_and_without_ports() {
        assert_eq!(
            parse_destination("169.254.169.254"),
            Some(("169.254.169.254".parse().unwrap(), 0))
        );
        assert_eq!(
            parse_destination("[2001:db8::1]:443"),
            Some(("2001:db8::1".parse().unwrap(), 443))
        );
        assert_eq!(parse_destination("10.0.0.5:0"), None);
        assert_eq!(parse_destination("example.com"), None);
    }
}
