//! The LLM proxy agentshd serves on `proxy.listen`: plain HTTP on loopback, one pooled client
//! to the providers. Each connection's session comes from the kernel (the process holding the
//! client's socket, and its cgroup); each tool call in a response passes the engine before the
//! agent sees it.
//!
//! `agentshctl run --no-kernel` points the agent's SDKs here (ANTHROPIC_BASE_URL,
//! OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL); the transparent path hands its decrypted connections to the same
//! [`Proxy::exchange`].

mod body;
mod brokered;
mod connectors;
pub mod encoding;
mod exchange;
mod judge;
pub mod peer;
mod record;
pub mod route;
mod store;
pub mod upstream;
mod websocket;
pub mod workspace;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::audit::{Action, Event, EventKind};
use crate::config::ProxyConfig;
use crate::daemon::Daemon;
use crate::llm::Limits;
use crate::llm::dlp::Redactor;
use crate::llm::host_names::ToolNamePattern;
use crate::store::BodyStore;
pub use body::{BoxError, RequestBody, whole_request};
pub use exchange::{ResponseBody, Via, full, strip_hop_by_hop};
pub use route::{ANTHROPIC_PREFIX, GOOGLE_PREFIX, OPENAI_PREFIX, Provider};
use upstream::{Upstream, UpstreamError};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 1024;
/// A request's head must arrive within this (slow clients hold a connection slot).
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// How often stored bodies past their retention are removed.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("proxy.listen {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error("the proxy's runtime: {0}")]
    Runtime(std::io::Error),
    #[error("stored bodies: {0}")]
    Bodies(#[from] crate::store::StoreError),
}

/// The proxy, shared by its connections.
pub struct Proxy {
    daemon: Arc<Daemon>,
    config: ProxyConfig,
    upstream: Upstream,
    patterns: Arc<[ToolNamePattern]>,
    limits: Limits,
    redactor: Option<Redactor>,
    bodies: BodyStore,
    /// Request bytes held while requests are read, per session and in all.
    request_bytes: RequestBudgets,
}

impl Proxy {
    /// The request-byte budgets, which the transparent path's brokered destinations share.
    pub(crate) fn request_budgets(&self) -> &RequestBudgets {
        &self.request_bytes
    }
}

/// How many request bytes the proxy holds while reading requests: per session, so that one
/// session's large or slow requests cannot take the memory the others need, and in all.
pub(crate) struct RequestBudgets {
    pub per_session: crate::limits::Budget,
    pub total: crate::limits::Budget,
}

/// A running proxy: its runtime (which the transparent path shares) and, when `proxy.listen`
/// is set, the explicit listener.
#[derive(Clone)]
pub struct Running {
    /// Where the explicit proxy listens.
    pub listen: Option<SocketAddr>,
    pub proxy: Arc<Proxy>,
    pub runtime: tokio::runtime::Handle,
    bodies: BodyStore,
}

impl Running {
    /// Before the daemon stops: the stored bodies queued so far reach the disk (the events
    /// that point at them are already recorded).
    pub fn sync_bodies(&self) {
        self.bodies.sync(Duration::from_secs(10));
    }

    /// What Anthropic's SDKs take as ANTHROPIC_BASE_URL.
    pub fn anthropic_base_url(&self) -> Option<String> {
        self.listen
            .map(|addr| format!("http://{addr}{ANTHROPIC_PREFIX}"))
    }

    /// What OpenAI's SDKs take as OPENAI_BASE_URL (their paths start below /v1).
    pub fn openai_base_url(&self) -> Option<String> {
        self.listen
            .map(|addr| format!("http://{addr}{OPENAI_PREFIX}/v1"))
    }

    /// What Google's SDKs (and Gemini CLI) take as GOOGLE_GEMINI_BASE_URL (they add the API
    /// version themselves).
    pub fn google_base_url(&self) -> Option<String> {
        self.listen
            .map(|addr| format!("http://{addr}{GOOGLE_PREFIX}"))
    }
}

/// Starts the proxy on its own runtime threads, with the explicit listener when config sets
/// `proxy.listen`.
pub fn start(
    daemon: Arc<Daemon>,
    config: &ProxyConfig,
    state_dir: &Path,
) -> Result<Running, ProxyError> {
    let listener = match config.listen {
        None => None,
        Some(addr) => {
            let listener = crate::net::listen::listen_on(addr)
                .map_err(|source| ProxyError::Bind { addr, source })?;
            let local = listener
                .local_addr()
                .map_err(|source| ProxyError::Bind { addr, source })?;
            Some((listener, local))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("proxy")
        .enable_all()
        .build()
        .map_err(ProxyError::Runtime)?;
    // The client spawns its connection tasks on the runtime it is built in.
    let upstream = {
        let _guard = runtime.enter();
        upstream::client(&config.extra_roots)?
    };
    let bodies = {
        // A stored body that cannot be written is an alert in the trail, not just a log line.
        let engine = Arc::clone(&daemon.engine);
        let report = Arc::new(move |what: String| {
            eprintln!("agentshd: proxy: stored bodies: {what}");
            engine.record_global(Event::new(
                EventKind::StoreError,
                "llm_proxy",
                Action::Alert,
                format!("an LLM body was not stored: {what}"),
            ));
        });
        BodyStore::open(state_dir, config.bodies.clone(), report)?
    };
    let redactor = matches!(
        (config.mode, config.dlp.mode),
        (
            crate::config::ProxyMode::Embedded,
            crate::config::DlpMode::Redact
        )
    )
    .then(|| {
        Redactor::new(
            config
                .dlp
                .custom_patterns
                .iter()
                .map(|p| (p.name.clone(), p.regex.clone())),
        )
    });
    let proxy = Arc::new(Proxy {
        daemon,
        patterns: config.tool_names.clone().into(),
        config: config.clone(),
        upstream,
        limits: Limits::default(),
        redactor,
        bodies: bodies.clone(),
        request_bytes: RequestBudgets {
            per_session: crate::limits::Budget::new(
                "LLM request bytes in flight",
                exchange::REQUEST_BYTES_PER_SESSION,
            ),
            total: crate::limits::Budget::new(
                "LLM request bytes in flight (all sessions)",
                exchange::REQUEST_BYTES_TOTAL,
            ),
        },
    });
    let handle = runtime.handle().clone();
    let listen = listener.as_ref().map(|(_, local)| *local);
    let served = Arc::clone(&proxy);
    std::thread::Builder::new()
        .name("proxy".into())
        .spawn(move || {
            runtime.block_on(async move {
                tokio::spawn(Arc::clone(&served).prune_bodies());
                let Some((listener, local)) = listener else {
                    // The runtime lives on for the transparent path.
                    return std::future::pending().await;
                };
                match TcpListener::from_std(listener) {
                    Ok(listener) => served.serve(listener, local).await,
                    Err(err) => eprintln!("agentshd: proxy: cannot listen: {err}"),
                }
            });
        })
        .map_err(ProxyError::Runtime)?;
    Ok(Running {
        listen,
        proxy,
        runtime: handle,
        bodies,
    })
}

impl Proxy {
    async fn serve(self: Arc<Self>, listener: TcpListener, local: SocketAddr) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            // At the cap, new clients wait in the listen backlog: agentshd's descriptors
            // also serve the control socket and must not run out.
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            match listener.accept().await {
                Ok((stream, peer)) => {
                    let proxy = Arc::clone(&self);
                    tokio::spawn(async move {
                        proxy.connection(stream, local, peer).await;
                        drop(slot);
                    });
                }
                Err(err) => {
                    // Out of descriptors, mostly: wait rather than spin.
                    eprintln!("agentshd: proxy: accept: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Removes stored bodies past their retention, at start and then hourly.
    async fn prune_bodies(self: Arc<Self>) {
        let mut every = tokio::time::interval(PRUNE_EVERY);
        loop {
            every.tick().await;
            let proxy = Arc::clone(&self);
            let pruned = tokio::task::spawn_blocking(move || {
                proxy.bodies.prune(std::time::SystemTime::now())
            })
            .await;
            match pruned {
                Ok(Ok(report)) => {
                    for failed in report.failed {
                        eprintln!("agentshd: proxy: stored bodies: cannot remove {failed}");
                    }
                }
                Ok(Err(err)) => eprintln!("agentshd: proxy: stored bodies: {err}"),
                Err(err) => eprintln!("agentshd: proxy: stored bodies: {err}"),
            }
        }
    }

    /// One client connection: its session first (refused when it cannot be told), then HTTP.
    async fn connection(self: Arc<Self>, stream: TcpStream, local: SocketAddr, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let daemon = Arc::clone(&self.daemon);
        let identified =
            tokio::task::spawn_blocking(move || peer::identify(local, peer, &daemon.sessions))
                .await;
        let client = match identified {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => {
                eprintln!("agentshd: proxy: refusing {peer}: its session cannot be told: {err}");
                return;
            }
            Err(err) => {
                eprintln!("agentshd: proxy: refusing {peer}: {err}");
                return;
            }
        };
        let session = self.daemon.verdict_session(
            client.session.as_deref(),
            &client.verdict_session,
            client.uid,
        );
        let (pid, uid) = (client.pid, client.uid);
        let workspace = tokio::task::spawn_blocking(move || workspace::of_process(pid, Some(uid)))
            .await
            .unwrap_or_default();
        let workspace = Arc::new(workspace);
        let service = service_fn(move |request| {
            let proxy = Arc::clone(&self);
            let session = Arc::clone(&session);
            let workspace = Arc::clone(&workspace);
            async move {
                Ok::<_, Infallible>(
                    proxy
                        .exchange(request, session, workspace, Via::Configured)
                        .await,
                )
            }
        });
        let served = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .keep_alive(true)
            .serve_connection(TokioIo::new(stream), service)
            .with_upgrades()
            .await;
        if let Err(err) = served
            && !err.is_incomplete_message()
        {
            eprintln!("agentshd: proxy: connection from {peer}: {err}");
        }
    }
}
