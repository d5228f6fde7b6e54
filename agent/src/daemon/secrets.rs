//! The brokered secrets as sessions and administrators meet them: which a new session gets a
//! placeholder for, `secrets list`, and `secrets test`.

use std::collections::BTreeMap;

use super::Daemon;
use crate::api::protocol::{SecretCheck, SecretInfo, SecretTest};
use crate::config::SecretDestination;
use crate::secrets::{Broker, Secret, Target};
use crate::session::Placement;

/// What a new session gets of the brokered secrets.
#[derive(Default)]
pub(super) struct Handout {
    pub placeholders: BTreeMap<String, String>,
    pub withheld: Vec<String>,
    pub warnings: Vec<String>,
}

/// What a `run --no-secrets` session gets: nothing, and a word saying so.
pub(super) fn declined(daemon: &Daemon) -> Handout {
    let names: Vec<&str> = daemon
        .broker
        .get()
        .map(|b| b.secrets().iter().map(|s| s.name.as_str()).collect())
        .unwrap_or_default();
    Handout {
        warnings: (!names.is_empty())
            .then(|| {
                format!(
                    "--no-secrets: this session holds none of the brokered secrets ({}); the agent's environment keeps whatever the caller's held",
                    names.join(", ")
                )
            })
            .into_iter()
            .collect(),
        ..Handout::default()
    }
}

/// A placeholder for each brokered secret whose every destination this session's requests
/// are read on their way to (after TLS termination): any on the kernel path, the LLM
/// providers' hosts through the explicit proxy. A secret going anywhere else is withheld (its
/// variable removed from the agent's environment) and the user told why: handing out a
/// placeholder that nothing replaces would only break the tool that needs it, silently.
pub(super) fn hand_out(daemon: &Daemon, placement: &Placement, no_kernel: bool) -> Handout {
    let Some(broker) = daemon.broker.get().filter(|b| !b.is_empty()) else {
        return Handout::default();
    };
    let kernel = !no_kernel && kernel_path(daemon) && matches!(placement, Placement::Cgroup(_));
    let placeholders = match broker.new_placeholders() {
        Ok(placeholders) => placeholders,
        Err(err) => {
            // Guessable placeholders would be no better than none: the session gets none.
            let names: Vec<String> = broker.secrets().iter().map(|s| s.name.clone()).collect();
            return Handout {
                placeholders: BTreeMap::new(),
                warnings: vec![format!(
                    "no randomness for placeholders ({err}): the brokered secrets {} are withheld",
                    names.join(", ")
                )],
                withheld: names,
            };
        }
    };
    let mut handout = Handout {
        placeholders,
        ..Handout::default()
    };
    for secret in broker.secrets() {
        let unread = unread(daemon, secret, kernel);
        if unread.is_empty() {
            continue;
        }
        handout.placeholders.remove(&secret.name);
        handout.withheld.push(secret.name.clone());
        handout.warnings.push(format!(
            "secret {} is withheld: its destination {} is not intercepted on this session's path (without kernel enforcement only the LLM proxy's providers are read); the agent's environment holds no {}",
            secret.name,
            unread.join(", "),
            secret.name
        ));
    }
    handout
}

/// Whether the transparent proxy runs (kernel enforcement, with the sessions' CAs).
fn kernel_path(daemon: &Daemon) -> bool {
    daemon.enforcement.get().is_some() && daemon.trust.get().is_some()
}

/// The destinations of `secret` that a session's requests do not pass read on their way to.
fn unread<'s>(daemon: &Daemon, secret: &'s Secret, kernel: bool) -> Vec<&'s str> {
    if kernel {
        // The transparent proxy terminates every destination of a secret a session holds.
        return Vec::new();
    }
    secret
        .destinations
        .iter()
        .filter(|d| !explicit_reads(daemon, d))
        .map(|d| d.host.as_str())
        .collect()
}

/// Whether the explicit proxy sends requests there: one of the providers' upstreams.
fn explicit_reads(daemon: &Daemon, d: &SecretDestination) -> bool {
    let upstreams = daemon.llm_upstreams.get().map_or(&[][..], Vec::as_slice);
    daemon.proxy.get().is_some()
        && !d.host.starts_with("*.")
        && upstreams.iter().any(|u| {
            u.host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(&d.host))
                && d.port.is_none_or(|p| u.port_or_known_default() == Some(p))
        })
}

fn describe(d: &SecretDestination) -> String {
    let mut text = d.host.clone();
    if let Some(port) = d.port {
        text.push_str(&format!(":{port}"));
    }
    let mut places = Vec::new();
    if d.headers.is_empty() {
        places.push("any header".to_owned());
    } else {
        places.push(format!("headers {}", d.headers.join(", ")));
    }
    if !d.query.is_empty() {
        places.push(format!("query {}", d.query.join(", ")));
    }
    if d.body {
        places.push("body".to_owned());
    }
    format!("{text} ({})", places.join("; "))
}

/// `secrets list`: names, sources, destinations and which paths hand them out.
pub(super) fn list(daemon: &Daemon) -> Vec<SecretInfo> {
    let Some(broker) = daemon.broker.get() else {
        return Vec::new();
    };
    broker
        .secrets()
        .iter()
        .map(|s| SecretInfo {
            name: s.name.clone(),
            source: s.source.clone(),
            destinations: s.destinations.iter().map(describe).collect(),
            kernel_path: kernel_path(daemon),
            explicit_proxy: unread(daemon, s, false).is_empty(),
        })
        .collect()
}

/// `secrets test NAME`: the secret through the daemon's own broker with a throw-away
/// placeholder: put in at each destination, refused elsewhere; and which paths hand it out.
pub(super) fn test(daemon: &Daemon, name: &str) -> Option<SecretTest> {
    let broker = daemon.broker.get()?;
    let secret = broker.secrets().iter().find(|s| s.name == name)?;
    let mut checks = vec![SecretCheck {
        ok: !secret.is_empty(),
        what: format!("the value was read ({})", secret.source),
    }];
    checks.extend(through_the_broker(broker, secret));
    let kernel = kernel_path(daemon);
    let unread = unread(daemon, secret, false);
    let explicit = unread.is_empty();
    let paths = match (kernel, explicit) {
        (true, true) => "every session gets a placeholder for it".to_owned(),
        (true, false) => format!(
            "kernel-path sessions get a placeholder; `run --no-kernel` ones none (the LLM proxy does not go to {})",
            unread.join(", ")
        ),
        (false, true) => {
            "no kernel enforcement: sessions get a placeholder through the LLM proxy".to_owned()
        }
        (false, false) => format!(
            "no session gets it: without kernel enforcement nothing reads requests to {}",
            unread.join(", ")
        ),
    };
    checks.push(SecretCheck {
        ok: kernel || explicit,
        what: paths,
    });
    Some(SecretTest {
        name: name.to_owned(),
        checks,
    })
}

/// A placeholder for the secret alone, sent to each destination (put in) and to a host that
/// is none (refused).
fn through_the_broker(broker: &Broker, secret: &Secret) -> Vec<SecretCheck> {
    let placeholders: BTreeMap<String, String> = match broker.new_placeholders() {
        Ok(all) => all.into_iter().filter(|(n, _)| *n == secret.name).collect(),
        Err(err) => {
            return vec![SecretCheck {
                ok: false,
                what: format!("no randomness for a placeholder: {err}"),
            }];
        }
    };
    let Some(placeholder) = placeholders.get(&secret.name) else {
        return Vec::new();
    };
    let session = broker.session(&placeholders);
    let mut checks = Vec::new();
    for d in &secret.destinations {
        let host = d
            .host
            .strip_prefix("*.")
            .map_or_else(|| d.host.clone(), |h| format!("api.{h}"));
        let header = d.headers.first().map_or("authorization", String::as_str);
        let mut headers = http::HeaderMap::new();
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(header.as_bytes()),
            http::HeaderValue::from_str(&format!("Bearer {placeholder}")),
        ) else {
            continue;
        };
        headers.insert(name.clone(), value);
        let mut uri = http::Uri::from_static("/");
        let to = Target {
            host: &host,
            port: d.port.unwrap_or(443),
        };
        let put_in = session.apply_head(to, &mut headers, &mut uri);
        let ok = put_in
            .as_ref()
            .is_ok_and(|names| names.contains(&secret.name))
            && headers.get(&name).is_some_and(|v| {
                !v.as_bytes()
                    .windows(placeholder.len())
                    .any(|w| w == placeholder.as_bytes())
            });
        checks.push(SecretCheck {
            ok,
            what: format!("put in at {host} in `{header}`"),
        });
    }
    let mut headers = http::HeaderMap::new();
    if let Ok(value) = http::HeaderValue::from_str(placeholder) {
        headers.insert("x-leak", value);
    }
    let elsewhere = Target {
        host: "agentsh-secrets-test.invalid",
        port: 443,
    };
    let refused = session
        .apply_head(elsewhere, &mut headers, &mut http::Uri::from_static("/"))
        .is_err();
    checks.push(SecretCheck {
        ok: refused,
        what: "refused on its way to any other host".to_owned(),
    });
    checks
}
