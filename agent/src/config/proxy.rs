//! The LLM proxy's part of the daemon config: `proxy` (where it listens, what it does, how host
//! tool names map to MCP servers, stored bodies), `providers` (upstreams), `tls` (extra roots
//! for upstream TLS) and `dlp` (redaction of secrets in requests, `embedded` mode).
//!
//! The proxy is off unless `proxy.listen` names an address; it listens on loopback only.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use regex::Regex;
use url::Url;

use super::diagnostic::{Location, Report};
use super::keywords::{DlpMode, ProxyMode};
use super::reader::{self, Fields};
use super::yaml::Node;
use crate::llm::host_names::{ToolNamePattern, default_tool_names};

pub(super) const PROXY_KEYS: &[&str] = &["listen", "mode", "tool_names", "bodies"];
const BODIES_KEYS: &[&str] = &["store", "max_bytes", "retention_days"];
const PROVIDERS_KEYS: &[&str] = &["anthropic", "openai", "google", "code_assist"];
const PROVIDER_KEYS: &[&str] = &["upstream"];
const TLS_KEYS: &[&str] = &["extra_roots"];
const DLP_KEYS: &[&str] = &["mode", "custom_patterns"];
const DLP_PATTERN_KEYS: &[&str] = &["name", "regex"];

pub const ANTHROPIC_UPSTREAM: &str = "https://api.anthropic.com";
pub const OPENAI_UPSTREAM: &str = "https://api.openai.com";
pub const GOOGLE_UPSTREAM: &str = "https://generativelanguage.googleapis.com";
pub const CODE_ASSIST_UPSTREAM: &str = "https://cloudcode-pa.googleapis.com";

/// `proxy`, `providers`, `tls` and `dlp`, read together.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Where the proxy listens (loopback); `None`: no proxy.
    pub listen: Option<SocketAddr>,
    pub mode: ProxyMode,
    /// How hosts name MCP tools to the model, tried in order: `{server}` and `{tool}` mark
    /// the parts.
    pub tool_names: Vec<ToolNamePattern>,
    pub bodies: BodyStorage,
    pub anthropic_upstream: Url,
    pub openai_upstream: Url,
    /// Google's Gemini API (or a Vertex AI endpoint, which speaks the same dialect).
    pub google_upstream: Url,
    /// Google's Code Assist, what Gemini CLI signed in with a Google account speaks to (the
    /// same dialect, paths below `/v1internal`).
    pub code_assist_upstream: Url,
    /// PEM files trusted for upstream TLS besides the system roots.
    pub extra_roots: Vec<PathBuf>,
    pub dlp: Dlp,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self {
            listen: None,
            mode: ProxyMode::McpOnly,
            tool_names: default_tool_names(),
            bodies: BodyStorage::default(),
            anthropic_upstream: default_url(ANTHROPIC_UPSTREAM),
            openai_upstream: default_url(OPENAI_UPSTREAM),
            google_upstream: default_url(GOOGLE_UPSTREAM),
            code_assist_upstream: default_url(CODE_ASSIST_UPSTREAM),
            extra_roots: Vec::new(),
            dlp: Dlp::default(),
        }
    }
}

fn default_url(text: &str) -> Url {
    Url::parse(text).unwrap_or_else(|_| unreachable!("{text} is a valid URL"))
}

/// Request and response bodies kept for audit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyStorage {
    pub store: bool,
    /// Per body; the rest is cut (and the cut recorded).
    pub max_bytes: u64,
    pub retention_days: u64,
}

impl Default for BodyStorage {
    fn default() -> Self {
        Self {
            store: true,
            max_bytes: 1 << 20,
            retention_days: 30,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Dlp {
    pub mode: DlpMode,
    /// Besides the built-in patterns (API keys, private keys, tokens).
    pub custom_patterns: Vec<DlpPattern>,
}

impl Default for Dlp {
    fn default() -> Self {
        Self {
            mode: DlpMode::Redact,
            custom_patterns: Vec::new(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct DlpPattern {
    pub name: String,
    pub regex: Regex,
    pub span: Location,
}

/// Reads `proxy`, `providers`, `tls` and `dlp` from the top level's fields.
pub(super) fn read(r: &mut Report, f: &Fields<'_>, base: &Path) -> ProxyConfig {
    let mut config = ProxyConfig::default();
    if let Some(node) = f.get("proxy") {
        proxy(r, node, &mut config);
    }
    if let Some(node) = f.get("providers") {
        providers(r, node, &mut config);
    }
    if let Some(node) = f.get("tls") {
        tls(r, node, base, &mut config);
    }
    if let Some(node) = f.get("dlp") {
        config.dlp = dlp(r, node);
    }
    config
}

fn proxy(r: &mut Report, node: &Node, config: &mut ProxyConfig) {
    let Some(f) = Fields::open(r, node, "proxy", PROXY_KEYS) else {
        return;
    };
    config.listen = f
        .get("listen")
        .and_then(|n| listen(r, n, &f.path_of("listen")));
    config.mode = f.keyword(r, "mode", config.mode);
    if f.has("tool_names") {
        let path = f.path_of("tool_names");
        config.tool_names = f
            .list(r, "tool_names")
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let item = format!("{path}[{i}]");
                let text = reader::nonempty_string(r, n, &item)?;
                ToolNamePattern::new(&text)
                    .map_err(|why| r.error(n.loc, format!("`{item}`: `{text}` {why}")))
                    .ok()
            })
            .collect();
    }
    if let Some(n) = f.get("bodies") {
        config.bodies = bodies(r, n);
    }
}

/// A loopback `address:port`: the proxy tells sessions apart by the connecting process, which
/// only a local peer has.
fn listen(r: &mut Report, node: &Node, path: &str) -> Option<SocketAddr> {
    let text = reader::nonempty_string(r, node, path)?;
    let addr: SocketAddr = match text.parse() {
        Ok(addr) => addr,
        Err(_) => {
            r.error(
                node.loc,
                format!(
                    "`{path}` must be a loopback address and port such as 127.0.0.1:8765 or \
                     [::1]:8765, found `{text}`"
                ),
            );
            return None;
        }
    };
    if !addr.ip().is_loopback() {
        r.error(
            node.loc,
            format!(
                "`{path}`: `{text}` is not a loopback address; the proxy only serves processes \
                 of this host"
            ),
        );
        return None;
    }
    Some(addr)
}

fn bodies(r: &mut Report, node: &Node) -> BodyStorage {
    let d = BodyStorage::default();
    let Some(f) = Fields::open(r, node, "proxy.bodies", BODIES_KEYS) else {
        return d;
    };
    BodyStorage {
        store: f.bool(r, "store", d.store),
        max_bytes: f.uint(r, "max_bytes", 0..=(1 << 30), d.max_bytes),
        retention_days: f.uint(r, "retention_days", 1..=3650, d.retention_days),
    }
}

fn providers(r: &mut Report, node: &Node, config: &mut ProxyConfig) {
    let Some(f) = Fields::open(r, node, "providers", PROVIDERS_KEYS) else {
        return;
    };
    for (key, slot) in [
        ("anthropic", &mut config.anthropic_upstream),
        ("openai", &mut config.openai_upstream),
        ("google", &mut config.google_upstream),
        ("code_assist", &mut config.code_assist_upstream),
    ] {
        let Some(n) = f.get(key) else { continue };
        let path = f.path_of(key);
        let Some(p) = Fields::open(r, n, &path, PROVIDER_KEYS) else {
            continue;
        };
        if let Some(url) = p
            .required(r, "upstream")
            .and_then(|u| upstream(r, u, &p.path_of("upstream")))
        {
            *slot = url;
        }
    }
}

/// An http(s) base URL without credentials, query or fragment.
fn upstream(r: &mut Report, node: &Node, path: &str) -> Option<Url> {
    let text = reader::nonempty_string(r, node, path)?;
    let url = match Url::parse(&text) {
        Ok(url) => url,
        Err(e) => {
            r.error(node.loc, format!("`{path}`: `{text}` is not a URL: {e}"));
            return None;
        }
    };
    let problem = if !matches!(url.scheme(), "https" | "http") {
        Some(format!(
            "must be https (or http, for tests), not {}",
            url.scheme()
        ))
    } else if url.host().is_none() {
        Some("has no host".to_owned())
    } else if !url.username().is_empty() || url.password().is_some() {
        Some("must not hold credentials (the agent's own API key is sent)".to_owned())
    } else if url.query().is_some() || url.fragment().is_some() {
        Some("must not have a query or fragment: it is a base the request path joins".to_owned())
    } else {
        None
    };
    if let Some(problem) = problem {
        r.error(node.loc, format!("`{path}`: `{text}` {problem}"));
        return None;
    }
    Some(url)
}

fn tls(r: &mut Report, node: &Node, base: &Path, config: &mut ProxyConfig) {
    let Some(f) = Fields::open(r, node, "tls", TLS_KEYS) else {
        return;
    };
    let path = f.path_of("extra_roots");
    config.extra_roots = f
        .list(r, "extra_roots")
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let text = reader::nonempty_string(r, n, &format!("{path}[{i}]"))?;
            Some(base.join(text).components().collect())
        })
        .collect();
}

fn dlp(r: &mut Report, node: &Node) -> Dlp {
    let d = Dlp::default();
    let Some(f) = Fields::open(r, node, "dlp", DLP_KEYS) else {
        return d;
    };
    let path = f.path_of("custom_patterns");
    let custom_patterns = f
        .list(r, "custom_patterns")
        .iter()
        .enumerate()
        .filter_map(|(i, n)| dlp_pattern(r, n, &format!("{path}[{i}]")))
        .collect();
    Dlp {
        mode: f.keyword(r, "mode", d.mode),
        custom_patterns,
    }
}

fn dlp_pattern(r: &mut Report, node: &Node, path: &str) -> Option<DlpPattern> {
    let f = Fields::open(r, node, path, DLP_PATTERN_KEYS)?;
    let name = f
        .required(r, "name")
        .and_then(|n| reader::nonempty_string(r, n, &f.path_of("name")));
    let regex = f.required(r, "regex").and_then(|n| {
        let key = f.path_of("regex");
        let text = reader::nonempty_string(r, n, &key)?;
        Regex::new(&text)
            .map_err(|e| {
                let why = super::patterns::regex_error_message(&e);
                r.error(n.loc, format!("`{key}`: invalid regex: {why}"));
            })
            .ok()
    });
    Some(DlpPattern {
        name: name?,
        regex: regex?,
        span: node.loc,
    })
}
