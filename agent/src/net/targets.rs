//! What a redirected connection is, from where it was going and the name its ClientHello
//! asked for: an LLM provider's API, a network MCP server the policy declares, or other
//! traffic. Pure: the front asks, and opens, splices or refuses by the answer.

use std::net::{IpAddr, SocketAddr};

use url::{Host, Url};

use crate::config::{McpPolicy, Transport};
use crate::proxy::Provider;

/// The hosts the transparent proxy terminates.
#[derive(Debug, Clone, Default)]
pub struct Targets {
    llm: Vec<LlmHost>,
    /// The providers' hosts' addresses, as they resolved: a connection there is the
    /// provider's, whatever name it asks for (or none).
    llm_addresses: Vec<(IpAddr, Provider)>,
    mcp: Vec<McpTarget>,
}

/// A provider's API host.
#[derive(Debug, Clone)]
struct LlmHost {
    /// Lowercase; with `suffix`, the end of the name (`-aiplatform.googleapis.com`).
    name: String,
    suffix: bool,
    port: u16,
    provider: Provider,
}

impl LlmHost {
    /// On any port: the provider's edge serves its API on more than one (Cloudflare's 2053,
    /// 2083, 2087, 2096, 8443 as well as 443).
    fn matches(&self, sni: &str) -> bool {
        if !self.suffix {
            return self.name.eq_ignore_ascii_case(sni);
        }
        sni.len() > self.name.len()
            && sni.is_char_boundary(sni.len() - self.name.len())
            && sni[sni.len() - self.name.len()..].eq_ignore_ascii_case(&self.name)
    }
}

/// Vertex AI's hosts (the global `aiplatform.googleapis.com` and the regional
/// `{region}-aiplatform.googleapis.com`): the Gemini dialect under another path, whatever
/// `providers.google.upstream` says for the explicit proxy.
const VERTEX_HOSTS: [(&str, bool); 2] = [
    ("aiplatform.googleapis.com", false),
    ("-aiplatform.googleapis.com", true),
];

/// A declared network MCP server (`type: http` or `sse` with a `url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpTarget {
    pub server: String,
    pub host: McpHost,
    pub port: u16,
    pub tls: bool,
    /// SHA-256 of the server's SPKI, lowercase hex: the certificate must carry this key.
    pub spki_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpHost {
    /// Matched by SNI; over plain HTTP by the addresses the name resolved to.
    Name {
        name: String,
        addresses: Vec<IpAddr>,
    },
    Ip(IpAddr),
}

/// What a connection is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class<'a> {
    Llm(Provider),
    Mcp(&'a McpTarget),
    /// TLS that names no host (no SNI, or an address as SNI): no well-behaved client to a
    /// named service sends that, so it is opened and what it says decides (an LLM API call is
    /// judged like any other).
    Unnamed,
    Other,
}

impl Targets {
    /// The providers' upstream hosts (from `providers.*.upstream`) and `policy`'s declared
    /// network servers. `resolve` looks up a server's host name (plain HTTP servers are
    /// matched by address).
    pub fn new(
        providers: &[(Provider, &Url)],
        policy: &McpPolicy,
        resolve: impl Fn(&str, u16) -> Vec<IpAddr>,
    ) -> Self {
        let mut llm: Vec<LlmHost> = providers
            .iter()
            .filter_map(|(provider, url)| {
                Some(LlmHost {
                    name: url.host_str()?.to_ascii_lowercase(),
                    suffix: false,
                    port: url.port_or_known_default()?,
                    provider: *provider,
                })
            })
            .collect();
        if providers.iter().any(|(p, _)| *p == Provider::Google) {
            llm.extend(VERTEX_HOSTS.iter().map(|(name, suffix)| LlmHost {
                name: (*name).to_owned(),
                suffix: *suffix,
                port: 443,
                provider: Provider::Google,
            }));
        }
        let mut llm_addresses = Vec::new();
        for host in llm.iter().filter(|h| !h.suffix) {
            match host.name.parse::<IpAddr>() {
                Ok(ip) => llm_addresses.push((ip, host.provider)),
                Err(_) => llm_addresses.extend(
                    resolve(&host.name, host.port)
                        .into_iter()
                        .map(|ip| (ip, host.provider)),
                ),
            }
        }
        let mcp = policy
            .servers
            .iter()
            .filter(|s| matches!(s.transport, Transport::Http | Transport::Sse))
            .filter_map(|s| {
                let url = Url::parse(s.url.as_deref()?).ok()?;
                let port = url.port_or_known_default()?;
                let host = match url.host()? {
                    Host::Domain(name) => McpHost::Name {
                        addresses: resolve(name, port),
                        name: name.to_ascii_lowercase(),
                    },
                    Host::Ipv4(ip) => McpHost::Ip(IpAddr::V4(ip)),
                    Host::Ipv6(ip) => McpHost::Ip(IpAddr::V6(ip)),
                };
                Some(McpTarget {
                    server: s.id.clone(),
                    host,
                    port,
                    tls: url.scheme() == "https",
                    spki_sha256: s.tls_fingerprint.clone(),
                })
            })
            .collect();
        Self {
            llm,
            llm_addresses,
            mcp,
        }
    }

    /// Whether connections to this port may be ours to open (a ClientHello or HTTP request is
    /// worth waiting for); others are passed or refused without reading a byte, so protocols
    /// where the server speaks first (SSH, SMTP) are not held up.
    pub fn inspects_port(&self, port: u16) -> bool {
        self.llm.iter().any(|h| h.port == port) || self.mcp.iter().any(|t| t.port == port)
    }

    /// A TLS connection to `original` that asked for `sni`: by the name it asked for, then by
    /// where it goes (a foreign name at a provider's or a declared server's address is not
    /// believed), then any connection that names no host.
    pub fn tls(&self, original: SocketAddr, sni: Option<&str>) -> Class<'_> {
        let port = original.port();
        let sni = sni.map(|s| s.trim_end_matches('.'));
        let named = sni.filter(|s| s.parse::<IpAddr>().is_err());
        if let Some(sni) = named {
            if let Some(host) = self.llm.iter().find(|h| h.matches(sni)) {
                return Class::Llm(host.provider);
            }
            let by_name = self.mcp.iter().find(|t| {
                t.tls
                    && matches!(&t.host, McpHost::Name { name, .. } if name.eq_ignore_ascii_case(sni))
            });
            if let Some(target) = by_name {
                return Class::Mcp(target);
            }
        }
        let ip = canonical(original.ip());
        if let Some((_, provider)) = self.llm_addresses.iter().find(|(a, _)| canonical(*a) == ip) {
            return Class::Llm(*provider);
        }
        let by_address = self.mcp.iter().find(|t| {
            t.tls && t.port == port && t.addresses().into_iter().any(|a| canonical(a) == ip)
        });
        if let Some(target) = by_address {
            return Class::Mcp(target);
        }
        if named.is_none() {
            return Class::Unnamed;
        }
        Class::Other
    }

    /// A connection to `original` that does not start with TLS.
    pub fn plain(&self, original: SocketAddr) -> Class<'_> {
        self.mcp
            .iter()
            .filter(|t| !t.tls && t.port == original.port())
            .find(|t| match &t.host {
                McpHost::Ip(ip) => *ip == original.ip(),
                McpHost::Name { addresses, .. } => addresses.contains(&original.ip()),
            })
            .map_or(Class::Other, Class::Mcp)
    }

    /// Every declared network server, for the kernel's deny list.
    pub fn mcp(&self) -> &[McpTarget] {
        &self.mcp
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

impl McpTarget {
    /// The addresses this server is known by (for the deny list).
    pub fn addresses(&self) -> Vec<IpAddr> {
        match &self.host {
            McpHost::Ip(ip) => vec![*ip],
            McpHost::Name { addresses, .. } => addresses.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets() -> Targets {
        let policy = crate::config::load_str(
            r#"
sandbox:
  mcp:
    servers:
      - {id: remote, type: http, url: "https://mcp.example.com/mcp"}
      - {id: local, type: http, url: "http://127.0.0.3:8931/mcp"}
      - {id: named, type: sse, url: "http://tools.internal:9000/sse"}
      - {id: byip, type: http, url: "https://[::1]:8443/mcp"}
      - {id: fs, type: stdio, command: npx}
"#,
            "p.yaml",
        )
        .unwrap();
        let anthropic = Url::parse("https://api.anthropic.com").unwrap();
        let openai = Url::parse("https://api.openai.com/").unwrap();
        let google = Url::parse("https://generativelanguage.googleapis.com").unwrap();
        Targets::new(
            &[
                (Provider::Anthropic, &anthropic),
                (Provider::OpenAi, &openai),
                (Provider::Google, &google),
            ],
            policy.mcp(),
            |name, _| {
                if name == "tools.internal" {
                    vec!["10.1.2.3".parse().unwrap()]
                } else {
                    Vec::new()
                }
            },
        )
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn providers_by_name_and_port() {
        let t = targets();
        let any = addr("127.0.0.2:443");
        assert_eq!(
            t.tls(any, Some("api.anthropic.com")),
            Class::Llm(Provider::Anthropic)
        );
        assert_eq!(
            t.tls(any, Some("API.OpenAI.com.")),
            Class::Llm(Provider::OpenAi)
        );
        // The provider's own name on another port its edge serves is the provider's.
        for port in [2053, 2083, 2087, 2096, 8443] {
            assert_eq!(
                t.tls(
                    addr(&format!("127.0.0.2:{port}")),
                    Some("api.anthropic.com")
                ),
                Class::Llm(Provider::Anthropic)
            );
        }
        assert_eq!(t.tls(any, Some("example.org")), Class::Other);
        assert_eq!(
            t.tls(any, Some("generativelanguage.googleapis.com")),
            Class::Llm(Provider::Google)
        );
        // Vertex AI: global and regional.
        for vertex in [
            "aiplatform.googleapis.com",
            "us-central1-aiplatform.googleapis.com",
            "EUROPE-WEST4-aiplatform.googleapis.com",
        ] {
            assert_eq!(
                t.tls(any, Some(vertex)),
                Class::Llm(Provider::Google),
                "{vertex}"
            );
        }
        assert_eq!(
            t.tls(any, Some("x.aiplatform.googleapis.com.evil.example")),
            Class::Other
        );
        assert_eq!(t.tls(any, Some("-aiplatform.googleapis.com")), Class::Other);
        // No name, or an address for a name: opened, and what it says decides.
        assert_eq!(t.tls(any, None), Class::Unnamed);
        assert_eq!(t.tls(any, Some("127.0.0.2")), Class::Unnamed);
        assert!(t.inspects_port(443) && t.inspects_port(8931) && !t.inspects_port(22));
    }

    #[test]
    fn a_providers_address_is_the_providers_whatever_the_name() {
        let anthropic = Url::parse("https://api.anthropic.com").unwrap();
        let policy = crate::config::load_str("{}", "p.yaml").unwrap();
        let t = Targets::new(
            &[(Provider::Anthropic, &anthropic)],
            policy.mcp(),
            |name, _| {
                if name == "api.anthropic.com" {
                    vec!["160.79.104.10".parse().unwrap()]
                } else {
                    Vec::new()
                }
            },
        );
        for sni in [Some("example.org"), Some("cloudflare-ech.com"), None] {
            assert_eq!(
                t.tls(addr("160.79.104.10:2053"), sni),
                Class::Llm(Provider::Anthropic),
                "{sni:?}"
            );
            assert_eq!(
                t.tls(addr("[::ffff:160.79.104.10]:443"), sni),
                Class::Llm(Provider::Anthropic),
                "{sni:?}"
            );
        }
        assert_eq!(
            t.tls(addr("160.79.104.11:443"), Some("example.org")),
            Class::Other
        );
    }

    #[test]
    fn declared_servers_by_sni_address_or_resolved_name() {
        let t = targets();
        let server = |class: Class<'_>| match class {
            Class::Mcp(target) => target.server.clone(),
            other => format!("{other:?}"),
        };
        assert_eq!(
            server(t.tls(addr("192.0.2.1:443"), Some("mcp.example.com"))),
            "remote"
        );
        assert_eq!(server(t.plain(addr("127.0.0.3:8931"))), "local");
        assert_eq!(server(t.plain(addr("127.0.0.4:8931"))), "Other");
        assert_eq!(server(t.plain(addr("10.1.2.3:9000"))), "named");
        assert_eq!(server(t.tls(addr("[::1]:8443"), None)), "byip");
        // A declared server is its address, whatever name the client asks for.
        assert_eq!(
            server(t.tls(addr("[::1]:8443"), Some("cdn.example.net"))),
            "byip"
        );
        // A TLS server is not matched by a plain connection, nor the other way round.
        assert_eq!(server(t.plain(addr("[::1]:8443"))), "Other");
        assert_eq!(
            server(t.tls(addr("127.0.0.3:8931"), Some("x.example"))),
            "Other"
        );
    }
}
