//! Starting kernel enforcement: the transparent proxy listens, the kernel learns where to send
//! sessions' connections and what to deny, and the programs are attached to the sessions'
//! parent cgroup, in that order, so that no redirected connection finds nobody listening.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::front::{Front, FrontSettings};
use super::prefetch::Prefetcher;
use super::tls::UpstreamTls;
use crate::config::DaemonConfig;
use crate::daemon::Daemon;
use crate::daemon::enforcement::{DenialPlanner, Enforcement, Originals};
use crate::kernel::{Interception, KernelError};
use crate::proxy::{Provider, Running};
use crate::session::Tracking;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("kernel.{key} {addr}: {source}")]
    Bind {
        key: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("upstream TLS: {0}")]
    Upstream(#[from] crate::proxy::upstream::UpstreamError),
    #[error("upstream TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("kernel: {0}")]
    Kernel(#[from] KernelError),
    #[error("the kernel hooks do not work: {0}")]
    SelfTest(#[from] super::self_test::SelfTestError),
    #[error("sessions are not cgroups here; the kernel hooks need them")]
    NoCgroups,
}

/// The running transparent proxy.
pub struct Transparent {
    pub front: Arc<Front>,
    /// The pinned links, new or swapped in place.
    pub attached: String,
    /// Where it listens (the ports chosen, when config said 0).
    pub listening: Vec<SocketAddr>,
    /// What the operator should know (an address family not redirected, say).
    pub notes: Vec<String>,
}

/// Starts the transparent proxy on the LLM proxy's runtime and attaches the kernel programs.
pub fn start(
    config: &DaemonConfig,
    daemon: &Arc<Daemon>,
    proxy: &Running,
    enforcement: &Arc<Enforcement>,
) -> Result<Transparent, StartError> {
    let Tracking::Cgroup { mount, parent } = daemon.sessions.tracking() else {
        return Err(StartError::NoCgroups);
    };
    let parent_dir = mount.join(parent.trim_start_matches('/'));
    let mut notes = Vec::new();
    let kernel = &config.kernel;
    let listener4 = bind("listen", kernel.listen)?;
    let listener6 = match kernel.listen6 {
        None => {
            notes.push(
                "IPv6 connections of sessions are not redirected (kernel.listen6: off)".to_owned(),
            );
            None
        }
        Some(addr) => match bind("listen6", addr) {
            Ok(listener) => Some(listener),
            // A host without IPv6 loopback has no IPv6 to route around us with.
            Err(err) => {
                notes.push(format!(
                    "IPv6 connections of sessions are not redirected: {err}"
                ));
                None
            }
        },
    };
    let roots = crate::proxy::upstream::roots(&config.proxy.extra_roots)?;
    let upstream_tls = UpstreamTls::new(roots)?;
    let settings = FrontSettings {
        upstream_tls: upstream_tls.clone(),
        providers: vec![
            (Provider::Anthropic, config.proxy.anthropic_upstream.clone()),
            (Provider::OpenAi, config.proxy.openai_upstream.clone()),
            (Provider::Google, config.proxy.google_upstream.clone()),
            (Provider::Google, config.proxy.code_assist_upstream.clone()),
        ],
        other_traffic: kernel.other_traffic,
    };
    let front = Arc::new(Front::new(
        Arc::clone(daemon),
        Arc::clone(&proxy.proxy),
        Box::new(Originals(Arc::clone(enforcement))),
        settings,
    ));
    {
        let ending = Arc::clone(&front);
        let _ = daemon
            .on_session_end
            .set(Box::new(move |id| ending.session_ended(id)));
        let front = Arc::clone(&front);
        let prefetcher = Arc::new(Prefetcher::new(
            Arc::clone(&daemon.engine),
            upstream_tls,
            proxy.runtime.clone(),
            Box::new(move |rules| front.targets(rules)),
        ));
        let _ = daemon.on_session_start.set(Box::new(move |session| {
            prefetcher.session_started(Arc::clone(session))
        }));
    }
    let mut interception = Interception {
        proxy4: None,
        proxy6: None,
    };
    let mut listening = Vec::new();
    for listener in [Some(listener4), listener6].into_iter().flatten() {
        let (listener, local) = listener;
        listening.push(local);
        match local {
            SocketAddr::V4(v4) => interception.proxy4 = Some(v4),
            SocketAddr::V6(v6) => interception.proxy6 = Some(v6),
        }
        let front = Arc::clone(&front);
        proxy.runtime.spawn(async move {
            match TcpListener::from_std(listener) {
                Ok(listener) => front.serve(listener).await,
                Err(err) => eprintln!("agentshd: transparent proxy: cannot listen: {err}"),
            }
        });
    }
    // The maps first: the moment the programs are swapped in, they read only these.
    enforcement.with(|programs| -> Result<(), KernelError> {
        programs.set_interception(&interception)?;
        for addr in &kernel.intercept_loopback {
            programs.intercept_loopback(*addr)?;
        }
        Ok(())
    })?;
    enforcement.plan_denials(denial_planner(config, &front), &daemon.engine)?;
    let attached = enforcement.with(|programs| programs.attach_pinned(&parent_dir))?;
    super::self_test::run(&front, enforcement, &parent_dir, &interception)?;
    let _ = daemon
        .traffic
        .set(traffic_words(config.kernel.other_traffic));
    Ok(Transparent {
        front,
        attached: attached.to_string(),
        listening,
        notes,
    })
}

/// What the transparent proxy opens and what it passes unread, for agentshctl and doctor.
pub fn traffic_words(other: crate::config::OtherTraffic) -> String {
    let read = "TLS to an LLM provider's name (any port) or address (any name), to a declared MCP server's name or address, and TLS that names no host are opened and judged";
    match other {
        crate::config::OtherTraffic::Splice => format!(
            "{read}; spliced unread (kernel.other_traffic: splice): TLS that names another host at another address, plain traffic to undeclared servers, and protocols where the server speaks first"
        ),
        crate::config::OtherTraffic::Refuse => {
            format!("{read}; everything else is refused (kernel.other_traffic: refuse)")
        }
    }
}

/// `kernel.deny` for every session; for each session, the addresses of the declared network
/// MCP servers its policy denies.
fn denial_planner(config: &DaemonConfig, front: &Arc<Front>) -> DenialPlanner {
    let front = Arc::clone(front);
    DenialPlanner {
        fixed: config.kernel.deny.clone(),
        by_policy: Box::new(move |rules| {
            let mut denied = Vec::new();
            for target in front.targets(rules).mcp() {
                if crate::policy::server_policy(rules.mcp(), &target.server).is_some() {
                    denied.extend(target.addresses().into_iter().map(|ip| (ip, target.port)));
                }
            }
            denied
        }),
    }
}

fn bind(
    key: &'static str,
    addr: SocketAddr,
) -> Result<(std::net::TcpListener, SocketAddr), StartError> {
    let bad = |source| StartError::Bind { key, addr, source };
    let listener = super::listen::listen_on(addr).map_err(bad)?;
    let local = listener.local_addr().map_err(bad)?;
    Ok((listener, local))
}
