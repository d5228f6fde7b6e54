//! `secrets:` in the daemon config: credentials agentsh brokers. A session never holds the real
//! value: it gets a placeholder, which the proxy replaces by the value only in requests to the
//! secret's destinations.
//!
//! ```yaml
//! secrets:
//!   ANTHROPIC_API_KEY:            # the environment variable the agent reads
//!     credential: anthropic       # systemd LoadCredential= (or file:, command:, value:)
//!   GITHUB_TOKEN:
//!     command: [/usr/local/bin/vault-read, github]
//!     destinations:
//!       - host: api.github.com
//!         headers: [authorization]   # the default; also `query: [NAME]`, `body: true`
//! ```
//!
//! Or `secrets: /etc/agentsh/secrets.yaml`, a file holding that map (read at start, 0600 and
//! owned by the daemon's user). The LLM providers' keys need no `destinations`: their API host
//! (from `providers`) and the headers their SDKs send are built in.
//!
//! Parsing only: reading values (files, commands, credentials) is the daemon's, at start.

use std::path::{Path, PathBuf};

use super::diagnostic::{ConfigError, Report};
use super::proxy::ProxyConfig;
use super::reader::{self, Fields};
use super::yaml::Node;

const SECRET_KEYS: &[&str] = &["value", "file", "command", "credential", "destinations"];
const SOURCE_KEYS: [&str; 4] = ["value", "file", "command", "credential"];
const DESTINATION_KEYS: &[&str] = &["host", "port", "headers", "query", "body"];

/// Headers that carry no credential and that the proxy itself manages: a destination naming one
/// is a mistake.
const NOT_CREDENTIAL_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
];

/// Every brokered secret, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretsConfig {
    pub secrets: Vec<SecretConfig>,
    /// `secrets: FILE`: where they were read from (checked to be private at start).
    pub file: Option<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretConfig {
    /// The environment variable agents read it from (`GITHUB_TOKEN`).
    pub name: String,
    pub source: SecretSource,
    pub destinations: Vec<SecretDestination>,
    /// `file:line:column` of its definition, for errors found while reading the value.
    pub defined_at: String,
}

/// Where the real value comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// Written in the config (which must then be private).
    Value(String),
    /// The whole file (one trailing newline dropped); it must be private.
    File(PathBuf),
    /// What the command prints (one trailing newline dropped), run once at start.
    Command(Vec<String>),
    /// A systemd credential (`LoadCredential=NAME:…`): `$CREDENTIALS_DIRECTORY/NAME`.
    Credential(String),
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Never the value, not even in a debug print.
            Self::Value(_) => f.write_str("Value(..)"),
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Command(argv) => f.debug_tuple("Command").field(argv).finish(),
            Self::Credential(name) => f.debug_tuple("Credential").field(name).finish(),
        }
    }
}

/// A host the secret may be presented to, and where in its requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretDestination {
    /// Lowercase; `*.example.com` for any name below example.com.
    pub host: String,
    /// Any port when `None`.
    pub port: Option<u16>,
    /// Header names (lowercase) where the placeholder is replaced. The config never leaves it
    /// empty (`authorization` when not named); empty would mean any header.
    pub headers: Vec<String>,
    /// Query parameters whose value may carry it.
    pub query: Vec<String>,
    /// Whether the request body may carry it.
    pub body: bool,
}

impl SecretDestination {
    /// Whether `host` (lowercase, no port) on `port` is this destination.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match self.host.strip_prefix("*.") {
            Some(parent) => host
                .strip_suffix(parent)
                .is_some_and(|rest| rest.len() > 1 && rest.ends_with('.')),
            None => self.host.eq_ignore_ascii_case(host),
        }
    }
}

/// The built-in destinations of the providers' key variables, by the upstreams in `proxy`.
pub fn provider_destinations(name: &str, proxy: &ProxyConfig) -> Option<Vec<SecretDestination>> {
    let at = |url: &url::Url, headers: &[&str], query: &[&str]| {
        url.host_str().map(|host| SecretDestination {
            host: host.to_ascii_lowercase(),
            port: url.port_or_known_default(),
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            query: query.iter().map(|q| (*q).to_owned()).collect(),
            body: false,
        })
    };
    let one = |d: Option<SecretDestination>| d.map(|d| vec![d]);
    match name {
        "ANTHROPIC_API_KEY" => one(at(
            &proxy.anthropic_upstream,
            &["x-api-key", "authorization"],
            &[],
        )),
        "ANTHROPIC_AUTH_TOKEN" => one(at(&proxy.anthropic_upstream, &["authorization"], &[])),
        // Codex CLI sends its key from CODEX_API_KEY (and only from it, in `codex exec`).
        "OPENAI_API_KEY" | "CODEX_API_KEY" => {
            one(at(&proxy.openai_upstream, &["authorization"], &[]))
        }
        "GEMINI_API_KEY" | "GOOGLE_API_KEY" => {
            one(at(&proxy.google_upstream, &["x-goog-api-key"], &["key"]))
        }
        _ => None,
    }
}

/// `secrets:` in the daemon config: a map, or the path of a file holding one.
pub(super) fn read(r: &mut Report, node: &Node, base: &Path, proxy: &ProxyConfig) -> SecretsConfig {
    if node.as_scalar().is_some() {
        let Some(text) = reader::nonempty_string(r, node, "secrets") else {
            return SecretsConfig::default();
        };
        return SecretsConfig {
            secrets: Vec::new(),
            file: Some(base.join(text)),
        };
    }
    SecretsConfig {
        secrets: read_map(r, node, proxy),
        file: None,
    }
}

/// A secrets file: its top level is the map `secrets:` holds inline.
pub fn load_secrets_file(
    path: &Path,
    proxy: &ProxyConfig,
) -> Result<Vec<SecretConfig>, ConfigError> {
    let src = super::load::read_source(path)?;
    let origin = path.display().to_string();
    let mut r = Report::new(&origin);
    let secrets = super::load::parse_document(&mut r, &src)
        .map(|root| read_map(&mut r, &root, proxy))
        .unwrap_or_default();
    r.finish()?;
    Ok(secrets)
}

fn read_map(r: &mut Report, node: &Node, proxy: &ProxyConfig) -> Vec<SecretConfig> {
    let Some(entries) = reader::map(r, node, "secrets") else {
        return Vec::new();
    };
    let mut out: Vec<SecretConfig> = Vec::new();
    for (key, value) in entries {
        let Some(name) = reader::nonempty_string(r, key, "secrets key") else {
            continue;
        };
        if !is_env_name(&name) {
            r.error(
                key.loc,
                format!(
                    "`secrets.{name}`: a secret is named by the environment variable agents read \
                     it from (letters, digits and `_`, not starting with a digit)"
                ),
            );
            continue;
        }
        if out.iter().any(|s| s.name == name) {
            r.error(key.loc, format!("`secrets.{name}` is defined twice"));
            continue;
        }
        if let Some(secret) = read_secret(r, (&name, key.loc), value, proxy) {
            out.push(secret);
        }
    }
    out
}

fn read_secret(
    r: &mut Report,
    (name, at): (&str, super::diagnostic::Location),
    node: &Node,
    proxy: &ProxyConfig,
) -> Option<SecretConfig> {
    let path = format!("secrets.{name}");
    let f = Fields::open(r, node, &path, SECRET_KEYS)?;
    let given: Vec<&str> = SOURCE_KEYS.iter().copied().filter(|k| f.has(k)).collect();
    let source = match given.as_slice() {
        [] => {
            r.error(
                at,
                format!(
                    "`{path}` says nowhere to read the value from: give one of `credential`, \
                     `file`, `command` or `value`"
                ),
            );
            None
        }
        [key] => source(r, &f, key),
        [first, second, ..] => {
            r.error(
                f.key_loc(second),
                format!("`{path}`: `{first}` and `{second}` both give the value; keep one"),
            );
            None
        }
    };
    let destinations = match f.get("destinations") {
        Some(node) => destinations(r, node, &f.path_of("destinations")),
        None => match provider_destinations(name, proxy) {
            Some(built_in) => built_in,
            None => {
                r.error(
                    at,
                    format!(
                        "`{path}` has no `destinations`: say which hosts it may be presented to \
                         (only the LLM providers' key variables have them built in)"
                    ),
                );
                Vec::new()
            }
        },
    };
    let defined_at = format!("{}:{}:{}", r.origin(), at.line, at.column);
    Some(SecretConfig {
        name: name.to_owned(),
        source: source?,
        destinations,
        defined_at,
    })
}

fn source(r: &mut Report, f: &Fields<'_>, key: &str) -> Option<SecretSource> {
    let path = f.path_of(key);
    let node = f.get(key)?;
    match key {
        "value" => {
            let value = reader::nonempty_string(r, node, &path)?;
            Some(SecretSource::Value(value))
        }
        "file" => {
            let text = reader::nonempty_string(r, node, &path)?;
            let file = PathBuf::from(&text);
            if !file.is_absolute() {
                r.error(
                    node.loc,
                    format!("`{path}`: `{text}` must be an absolute path"),
                );
                return None;
            }
            Some(SecretSource::File(file))
        }
        "command" => {
            let argv: Vec<String> = f.strings(r, key).into_iter().map(|(_, s)| s).collect();
            match argv.first() {
                None => {
                    r.error(
                        node.loc,
                        format!("`{path}` must name a program: [PROGRAM, ARGS...]"),
                    );
                    None
                }
                Some(program) if !Path::new(program).is_absolute() => {
                    // No PATH search as root: the program is the one named.
                    r.error(
                        node.loc,
                        format!("`{path}`: `{program}` must be an absolute path"),
                    );
                    None
                }
                Some(_) => Some(SecretSource::Command(argv)),
            }
        }
        "credential" => {
            let name = reader::nonempty_string(r, node, &path)?;
            if name.contains('/') || name == "." || name == ".." {
                r.error(
                    node.loc,
                    format!("`{path}`: `{name}` is a credential name, not a path"),
                );
                return None;
            }
            Some(SecretSource::Credential(name))
        }
        _ => None,
    }
}

fn destinations(r: &mut Report, node: &Node, path: &str) -> Vec<SecretDestination> {
    let Some(items) = reader::list(r, node, path) else {
        return Vec::new();
    };
    if items.is_empty() {
        r.error(
            node.loc,
            format!("`{path}` is empty: the secret could be presented nowhere"),
        );
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| destination(r, item, &format!("{path}[{i}]")))
        .collect()
}

fn destination(r: &mut Report, node: &Node, path: &str) -> Option<SecretDestination> {
    let f = Fields::open(r, node, path, DESTINATION_KEYS)?;
    let host_path = f.path_of("host");
    let host = f
        .required(r, "host")
        .and_then(|n| reader::nonempty_string(r, n, &host_path).map(|h| (n, h)))
        .and_then(|(n, h)| {
            let lower = h.to_ascii_lowercase();
            let bare = lower.strip_prefix("*.").unwrap_or(&lower);
            let valid = !bare.is_empty()
                && !bare.contains('*')
                && url::Host::parse(bare).is_ok()
                && !bare.contains(['/', ':', '@']);
            if valid {
                Some(lower)
            } else {
                r.error(
                    n.loc,
                    format!(
                        "`{host_path}`: `{h}` is not a host name (a name, an address, or \
                         `*.example.com`; no scheme, port or path)"
                    ),
                );
                None
            }
        });
    let port = f
        .get("port")
        .and_then(|n| reader::uint(r, n, &f.path_of("port"), 1..=65_535))
        .and_then(|p| u16::try_from(p).ok());
    let mut headers = Vec::new();
    for (loc, name) in f.strings(r, "headers") {
        let lower = name.to_ascii_lowercase();
        if http::HeaderName::from_bytes(lower.as_bytes()).is_err() {
            r.error(
                loc,
                format!("`{path}.headers`: `{name}` is not a header name"),
            );
        } else if NOT_CREDENTIAL_HEADERS.contains(&lower.as_str()) {
            r.error(
                loc,
                format!("`{path}.headers`: `{lower}` carries no credential"),
            );
        } else {
            headers.push(lower);
        }
    }
    if !f.has("headers") {
        // Not "any header": servers reflect some (Referer, Origin, cookies) back.
        headers.push("authorization".to_owned());
    } else if headers.is_empty() {
        r.error(
            f.key_loc("headers"),
            format!("`{path}.headers` names no header that could carry it"),
        );
    }
    let query = f.strings(r, "query").into_iter().map(|(_, q)| q).collect();
    let body = f.bool(r, "body", false);
    Some(SecretDestination {
        host: host?,
        port,
        headers,
        query,
        body,
    })
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
