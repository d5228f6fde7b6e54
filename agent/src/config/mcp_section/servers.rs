//! `servers[]`: how agentsh starts or reaches each declared server.

use super::{name_globs, sha256};
use crate::config::diagnostic::Report;
use crate::config::formats::{check_http_url, check_id};
use crate::config::keywords::Transport;
use crate::config::reader::{self, Fields};
use crate::config::schema::ServerConfig;
use crate::config::yaml::Node;

const SERVER_KEYS: &[&str] = &[
    "id",
    "type",
    "command",
    "args",
    "url",
    "tls_fingerprint",
    "env_allow",
    "env_deny",
];

pub(super) fn server(r: &mut Report, node: &Node, path: &str) -> Option<ServerConfig> {
    let f = Fields::open(r, node, path, SERVER_KEYS)?;
    let id = f.required(r, "id").and_then(|n| {
        let id = reader::string(r, n, &f.path_of("id"))?;
        check_id(&id)
            .map_err(|m| r.error(n.loc, format!("`{}`: {m}", f.path_of("id"))))
            .ok()
            .map(|()| id)
    });
    let transport = f.keyword(r, "type", Transport::Stdio);
    let command = match f.get("command") {
        Some(n) => reader::nonempty_string(r, n, &f.path_of("command")),
        None => None,
    };
    let url = match f.get("url") {
        Some(n) => reader::string(r, n, &f.path_of("url")).filter(|u| {
            check_http_url(u)
                .map_err(|m| r.error(n.loc, format!("`{}`: {m}", f.path_of("url"))))
                .is_ok()
        }),
        None => None,
    };
    let server = ServerConfig {
        id: id.clone().unwrap_or_default(),
        transport,
        command,
        args: f.strings(r, "args").into_iter().map(|(_, s)| s).collect(),
        url,
        tls_fingerprint: sha256(r, &f, "tls_fingerprint"),
        env_allow: name_globs(r, &f, "env_allow"),
        env_deny: name_globs(r, &f, "env_deny"),
        span: node.loc,
    };
    check_transport_keys(r, &f, &server);
    if !server.env_deny.is_empty() && server.env_allow.is_empty() {
        // Without lists a server gets no credentials; a deny list alone takes charge of the
        // environment (the design documents' "strip these, pass all others").
        r.warn(
            f.key_loc("env_deny"),
            format!(
                "`{}` without `env_allow` passes every other variable to server `{}`, \
                 credentials included (GITHUB_TOKEN, *_API_KEY ...); without either list \
                 agentsh strips them. Name what the server needs in `env_allow` to keep the rest \
                 out",
                f.path_of("env_deny"),
                server.id
            ),
        );
    }
    id.map(|_| server)
}

/// Each transport has its own keys: a key meant for the other kind is almost always a
/// forgotten or wrong `type`, so it is an error rather than silently ignored.
fn check_transport_keys(r: &mut Report, f: &Fields<'_>, server: &ServerConfig) {
    let (needs, foreign): (&str, &[&str]) = match server.transport {
        Transport::Stdio => ("command", &["url", "tls_fingerprint"]),
        Transport::Http | Transport::Sse => ("url", &["command", "args", "env_allow", "env_deny"]),
    };
    if f.get(needs).is_none() {
        r.error(
            f.loc(),
            format!(
                "`{}`: a server of type `{}` needs `{needs}`",
                f.path(),
                server.transport
            ),
        );
    }
    for key in foreign {
        if f.has(key) {
            r.error(
                f.key_loc(key),
                format!(
                    "`{}` does not apply to a server of type `{}`",
                    f.path_of(key),
                    server.transport
                ),
            );
        }
    }
}
