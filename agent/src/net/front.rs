//! The transparent proxy's front door: every TCP connection the kernel hooks redirected from a
//! session arrives here. Its original destination and session come from the kernel (the
//! record the connect hook kept, by the client's address); nothing the agent sends can
//! change either.
//!
//! Then, by where it was going and the name its ClientHello asks for:
//! - an LLM provider's API: TLS terminated with the session CA's leaf, each request through
//!   the LLM interceptor, upstream to the ORIGINAL address with the real certificate verified;
//! - a network MCP server the session's policy declares: refused when the policy denies the
//!   server, else terminated (TLS) or read (plain HTTP), each message through the engine;
//! - anything else: spliced through untouched, or refused, as `kernel.other_traffic` says.
//!
//! A connection whose record is missing, whose session cannot be told, or whose ClientHello
//! cannot be read on a port where LLM or MCP traffic goes is closed: never passed unread.

use crate::sync::lock;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use url::Url;

use super::mcp_exchange::{self, SESSION_HEADER};
use super::mcp_headers;
use super::mcp_http::{Endpoints, McpHttp};
use super::origin::Origin;
use super::targets::{Class, McpTarget, Targets};
use super::tls::{self, Hello, TlsError, UpstreamTls};
use crate::audit::{Action, Event, EventKind};
use crate::config::OtherTraffic;
use crate::daemon::Daemon;
use crate::engine::{Local, Rules, Session};
use crate::kernel::Original;
use crate::limits::{Budget, Exceeded};
use crate::proxy::{Provider, Proxy, Via};
use crate::session::CgroupLookup;
use crate::session::ca::LeafName;

/// How long a client on an inspected port may take to send its first bytes.
const HELLO_PATIENCE: Duration = Duration::from_secs(10);
/// A request's head must arrive within this.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections served at once, by every session together (two descriptors each; agentshd
/// raises its open-files limit at start).
const MAX_CONNECTIONS: usize = 16_384;
/// Connections one session may hold through the proxy at once: past it, its new ones are
/// closed and the others' are still served.
pub const CONNECTIONS_PER_SESSION: u64 = 1024;
/// What a connection of the start-up self-test's session is answered with.
pub const CANARY_REPLY: &[u8] = b"agentsh-canary\n";

/// Where redirected connections were going: the kernel's records, taken once each.
pub trait OriginalDestinations: Send {
    fn take(&mut self, client: SocketAddr) -> Option<Original>;
}

/// The transparent proxy.
pub struct Front {
    daemon: Arc<Daemon>,
    proxy: Arc<Proxy>,
    originals: Mutex<Box<dyn OriginalDestinations>>,
    upstream_tls: UpstreamTls,
    providers: Vec<(Provider, Url)>,
    other_traffic: OtherTraffic,
    /// The cgroup id of the self-test's throw-away session, while it runs.
    canary: Mutex<Option<u64>>,
    /// Session cgroup ids already told (cgroup ids are never reused while the host runs).
    sessions: Mutex<HashMap<u64, String>>,
    /// The targets of each policy in use, built once per policy.
    targets: Mutex<Vec<(Weak<Rules>, Arc<Targets>)>>,
    /// MCP conversations: (session, server, conversation) -> the guard's state.
    conversations: ConversationMap,
    /// Connections held per session cgroup.
    per_session: Budget,
}

/// What the front needs at start.
pub struct FrontSettings {
    pub upstream_tls: UpstreamTls,
    pub providers: Vec<(Provider, Url)>,
    pub other_traffic: OtherTraffic,
}

impl Front {
    pub fn new(
        daemon: Arc<Daemon>,
        proxy: Arc<Proxy>,
        originals: Box<dyn OriginalDestinations>,
        settings: FrontSettings,
    ) -> Self {
        Self {
            daemon,
            proxy,
            originals: Mutex::new(originals),
            upstream_tls: settings.upstream_tls,
            providers: settings.providers,
            other_traffic: settings.other_traffic,
            canary: Mutex::default(),
            sessions: Mutex::default(),
            targets: Mutex::default(),
            conversations: ConversationMap::default(),
            per_session: Budget::new("transparent proxy connections", CONNECTIONS_PER_SESSION),
        }
    }

    /// While set, connections of the session with this cgroup id are answered
    /// [`CANARY_REPLY`] and closed (the start-up self-test).
    pub fn set_canary(&self, cgroup_id: Option<u64>) {
        *lock(&self.canary) = cgroup_id;
    }

    /// Forgets what was kept for an ended session.
    pub fn session_ended(&self, id: &str) {
        lock(&self.sessions).retain(|_, session| session != id);
        lock(&self.conversations).retain(|(session, _, _), _| session != id);
    }

    /// The targets of `rules` (the providers, and the policy's declared network servers with
    /// their names resolved).
    pub fn targets(&self, rules: &Arc<Rules>) -> Arc<Targets> {
        let mut cache = lock(&self.targets);
        cache.retain(|(weak, _)| weak.strong_count() > 0);
        if let Some((_, targets)) = cache
            .iter()
            .find(|(weak, _)| weak.upgrade().is_some_and(|r| Arc::ptr_eq(&r, rules)))
        {
            return Arc::clone(targets);
        }
        let providers: Vec<(Provider, &Url)> =
            self.providers.iter().map(|(p, u)| (*p, u)).collect();
        let targets = Arc::new(Targets::new(&providers, rules.mcp(), resolve));
        cache.push((Arc::downgrade(rules), Arc::clone(&targets)));
        targets
    }

    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                return;
            };
            match listener.accept().await {
                Ok((stream, client)) => {
                    let front = Arc::clone(&self);
                    tokio::spawn(async move {
                        front.connection(stream, client).await;
                        drop(slot);
                    });
                }
                Err(err) => {
                    eprintln!("agentshd: transparent proxy: accept: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    async fn connection(self: Arc<Self>, mut stream: TcpStream, client: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let Some(original) = lock(&self.originals).take(client) else {
            eprintln!(
                "agentshd: transparent proxy: refusing {client}: no record of where it was going"
            );
            return;
        };
        if *lock(&self.canary) == Some(original.session_cgroup) {
            let _ = stream.write_all(CANARY_REPLY).await;
            let _ = stream.shutdown().await;
            return;
        }
        let _held = match self
            .per_session
            .take(&original.session_cgroup.to_string(), 1)
        {
            Ok(share) => share,
            Err(exceeded) => {
                if exceeded.first {
                    self.report_limit(&original, &exceeded).await;
                }
                return;
            }
        };
        let Some(session) = self.session_of(original.session_cgroup).await else {
            eprintln!(
                "agentshd: transparent proxy: refusing {client} (pid {}) to {}: its session (cgroup {}) is not live",
                original.pid, original.destination, original.session_cgroup
            );
            return;
        };
        let rules = session.rules();
        let destination = original.destination;
        let targets = {
            let front = Arc::clone(&self);
            let rules = Arc::clone(&rules);
            match tokio::task::spawn_blocking(move || front.targets(&rules)).await {
                Ok(targets) => targets,
                Err(_) => return,
            }
        };
        // On a port no provider or declared server is known to use, the first side to speak
        // decides: a server that speaks first (SSH, SMTP, databases) is not an HTTPS API, and
        // is spliced at once; a client that speaks first is read like any other.
        let mut upstream = None;
        if !targets.inspects_port(destination.port()) && self.other_traffic == OtherTraffic::Splice
        {
            match first_speaker(&stream, destination).await {
                Speaker::Server(server) => return splice(stream, destination, Some(server)).await,
                Speaker::Client(server) => upstream = server,
                Speaker::Gone => return,
            }
        }
        match tls::peek_hello(&stream, HELLO_PATIENCE).await {
            Ok(hello) => match targets.tls(destination, hello.server_name.as_deref()) {
                Class::Llm(provider) => {
                    self.llm(stream, &original, session, &hello, Some(provider))
                        .await
                }
                Class::Unnamed => self.llm(stream, &original, session, &hello, None).await,
                Class::Mcp(target) => {
                    self.mcp(stream, &original, session, Some(&hello), target)
                        .await;
                }
                Class::Other => match self.brokered_for(&session, &hello, destination) {
                    Some(secrets) => {
                        self.brokered(stream, &original, session, &hello, secrets)
                            .await;
                    }
                    None => self.other(stream, &original, &session, upstream).await,
                },
            },
            Err(TlsError::NotTls(_)) => match targets.plain(destination) {
                Class::Mcp(target) => self.mcp(stream, &original, session, None, target).await,
                Class::Llm(_) | Class::Unnamed | Class::Other => {
                    self.other(stream, &original, &session, upstream).await
                }
            },
            Err(TlsError::HelloCut) => {}
            Err(err) => {
                // Cannot tell what it is, on a port where LLM or MCP traffic goes: not passed.
                eprintln!(
                    "agentshd: transparent proxy: refusing pid {} to {destination}: {err}",
                    original.pid
                );
            }
        }
    }

    /// One event per episode of a session at its connection limit.
    async fn report_limit(&self, original: &Original, exceeded: &Exceeded) {
        let reason = format!(
            "{} connections of this session through the transparent proxy at once: its new ones are closed until it holds half as many (the last to {})",
            exceeded.cap, original.destination
        );
        eprintln!(
            "agentshd: transparent proxy: session cgroup {}: {reason}",
            original.session_cgroup
        );
        let Some(session) = self.session_of(original.session_cgroup).await else {
            return;
        };
        let event = exceeded.event(
            "",
            "limit/transparent",
            reason,
            json!({"pid": original.pid, "address": original.destination.to_string()}),
        );
        self.daemon.engine.record(&session, event);
    }

    /// The live session whose cgroup id the kernel recorded.
    async fn session_of(&self, cgroup_id: u64) -> Option<Arc<Session>> {
        let known = lock(&self.sessions).get(&cgroup_id).cloned();
        let id = match known {
            Some(id) => id,
            None => {
                let daemon = Arc::clone(&self.daemon);
                let found = tokio::task::spawn_blocking(move || {
                    daemon.sessions.session_of_cgroup_id(cgroup_id)
                })
                .await
                .ok()?;
                let CgroupLookup::Found(hit) = found else {
                    return None;
                };
                lock(&self.sessions).insert(cgroup_id, hit.session.clone());
                hit.session
            }
        };
        if !self.daemon.sessions.is_live(&id) {
            return None;
        }
        self.daemon.engine.find_session(&id)
    }

    async fn llm(
        &self,
        stream: TcpStream,
        original: &Original,
        session: Arc<Session>,
        hello: &Hello,
        provider: Option<Provider>,
    ) {
        let destination = original.destination;
        let Some((client, name)) = self.terminate(stream, original, &session, hello).await else {
            return;
        };
        let origin = Arc::new(Origin::tls(destination, self.upstream_tls.clone(), name));
        let proxy = Arc::clone(&self.proxy);
        let pid = original.pid;
        let workspace = tokio::task::spawn_blocking(move || {
            crate::proxy::workspace::of_process(Some(pid), None)
        })
        .await
        .unwrap_or_default();
        let workspace = Arc::new(workspace);
        let service = service_fn(move |request| {
            let (proxy, origin, session, workspace) = (
                Arc::clone(&proxy),
                Arc::clone(&origin),
                Arc::clone(&session),
                Arc::clone(&workspace),
            );
            async move {
                // A connection that named no host: each request says whose API it speaks.
                let provider = provider.unwrap_or_else(|| {
                    crate::proxy::route::guess(
                        request.uri().path_and_query().map_or("/", |p| p.as_str()),
                        request.headers(),
                    )
                });
                let via = Via::Origin {
                    provider,
                    origin: &origin,
                };
                Ok::<_, Infallible>(proxy.exchange(request, session, workspace, via).await)
            }
        });
        serve_http(client, service, destination).await;
    }

    async fn mcp(
        &self,
        stream: TcpStream,
        original: &Original,
        session: Arc<Session>,
        hello: Option<&Hello>,
        target: &McpTarget,
    ) {
        let destination = original.destination;
        let rules = session.rules();
        let refused = crate::policy::server_policy(rules.mcp(), &target.server);
        let (action, reason) = match &refused {
            Some(verdict) => (Action::Block, verdict.reason.clone()),
            None => (
                Action::Allow,
                format!("connection to MCP server '{}' inspected", target.server),
            ),
        };
        self.daemon.engine.record(
            &session,
            Event::new(
                EventKind::McpNetworkConnection,
                &target.server,
                action,
                reason,
            )
            .rule(refused.as_ref().map_or("", |v| v.rule.as_str()))
            .details(json!({
                "pid": original.pid,
                "address": destination.to_string(),
                "tls": hello.is_some(),
            })),
        );
        if refused.is_some() {
            return;
        }
        let max = rules.mcp().max_message_bytes;
        let session_id = session.id().unwrap_or_default().to_owned();
        let decider: Arc<dyn crate::engine::Decider> = Arc::new(Local::new(
            Arc::clone(&self.daemon.engine),
            Arc::clone(&session),
        ));
        let secrets = self
            .daemon
            .secrets_of(&session_id)
            .filter(|s| !s.is_empty())
            .map(|secrets| {
                let host = hello
                    .and_then(|h| h.server_name.as_deref())
                    .map_or_else(|| destination.ip().to_string(), str::to_ascii_lowercase);
                Arc::new(super::brokered::SecretsGuard {
                    engine: Arc::clone(&self.daemon.engine),
                    session: Arc::clone(&session),
                    secrets,
                    host,
                    port: destination.port(),
                })
            });
        let conversations = Arc::new(Conversations {
            map: Arc::clone(&self.conversations),
            session: session_id,
            server: target.server.clone(),
            decider,
            max_message_bytes: max,
            secrets,
        });
        match hello {
            Some(hello) => {
                let Some((client, name)) = self.terminate(stream, original, &session, hello).await
                else {
                    return;
                };
                let origin = Origin::tls(destination, self.upstream_tls.clone(), name)
                    .pinned(target.spki_sha256.clone())
                    .keeping_host();
                conversations.serve(client, origin, destination).await;
            }
            None => {
                let origin = Origin::plain(destination).keeping_host();
                conversations.serve(stream, origin, destination).await;
            }
        }
    }

    /// The session's placeholders, when the name the client asked for (or the address it
    /// dialled) is one of its brokered secrets' destinations.
    fn brokered_for(
        &self,
        session: &Session,
        hello: &Hello,
        destination: SocketAddr,
    ) -> Option<Arc<crate::secrets::SessionSecrets>> {
        let secrets = self.daemon.secrets_of(session.id()?)?;
        let broker = self.daemon.broker.get()?;
        let host = hello
            .server_name
            .as_deref()
            .map_or_else(|| destination.ip().to_string(), str::to_ascii_lowercase);
        broker
            .secrets()
            .iter()
            .any(|s| s.destination(&host, destination.port()).is_some())
            .then_some(secrets)
    }

    /// A brokered secret's destination: terminated, its requests given the real values.
    async fn brokered(
        &self,
        stream: TcpStream,
        original: &Original,
        session: Arc<Session>,
        hello: &Hello,
        secrets: Arc<crate::secrets::SessionSecrets>,
    ) {
        let destination = original.destination;
        let Some((client, name)) = self.terminate(stream, original, &session, hello).await else {
            return;
        };
        let host = hello
            .server_name
            .as_deref()
            .map_or_else(|| destination.ip().to_string(), str::to_ascii_lowercase);
        let brokered = Arc::new(super::brokered::Brokered {
            proxy: Arc::clone(&self.proxy),
            origin: Arc::new(Origin::tls(destination, self.upstream_tls.clone(), name)),
            guard: super::brokered::SecretsGuard {
                engine: Arc::clone(&self.daemon.engine),
                session,
                secrets,
                host,
                port: destination.port(),
            },
        });
        let service = service_fn(move |request| {
            let brokered = Arc::clone(&brokered);
            async move { Ok::<_, Infallible>(brokered.exchange(request).await) }
        });
        serve_http(client, service, destination).await;
    }

    /// Traffic that is neither an LLM provider's nor a declared server's; `upstream`, a
    /// connection to its destination already open.
    async fn other(
        &self,
        stream: TcpStream,
        original: &Original,
        session: &Session,
        upstream: Option<TcpStream>,
    ) {
        let destination = original.destination;
        match self.other_traffic {
            OtherTraffic::Refuse => {
                self.daemon.engine.record(
                    session,
                    Event::new(
                        EventKind::McpNetworkConnection,
                        "",
                        Action::Block,
                        format!(
                            "connection to {destination} refused: neither an LLM provider nor a declared MCP server (kernel.other_traffic: refuse)"
                        ),
                    )
                    .rule("other_traffic")
                    .details(json!({"pid": original.pid, "address": destination.to_string()})),
                );
            }
            OtherTraffic::Splice => splice(stream, destination, upstream).await,
        }
    }

    /// Completes the client's handshake as the server its hello asked for, with a leaf of its
    /// session's CA. `None` (said why): the connection goes.
    async fn terminate(
        &self,
        stream: TcpStream,
        original: &Original,
        session: &Session,
        hello: &Hello,
    ) -> Option<(tokio_rustls::server::TlsStream<TcpStream>, LeafName)> {
        let destination = original.destination;
        let ca = self.authority(session)?;
        let name = match LeafName::of(hello.server_name.as_deref(), destination.ip()) {
            Ok(name) => name,
            Err(err) => {
                eprintln!("agentshd: transparent proxy: {destination}: {err}");
                return None;
            }
        };
        match tls::terminate(stream, &ca, hello, destination.ip()).await {
            Ok(client) => Some((client, name)),
            Err(err) if !err.to_string().contains("alert") => {
                eprintln!(
                    "agentshd: transparent proxy: pid {} to {name}: {err}",
                    original.pid
                );
                None
            }
            Err(err) => {
                // The client refused our certificate with an alert: it does not trust the
                // session CA (its own bundle, or a pinned certificate). Its traffic is not let
                // through unread: said by name.
                let program = program_of(original.pid);
                let reason = format!(
                    "{program} (pid {}) refused the session's certificate for {name}: it trusts its own roots or pins the server's certificate, so its connection to {destination} was closed unread ({err})",
                    original.pid
                );
                eprintln!("agentshd: transparent proxy: {reason}");
                self.daemon.engine.record(
                    session,
                    Event::new(EventKind::McpNetworkConnection, "", Action::Block, reason)
                        .rule("tls_untrusted")
                        .details(json!({
                            "pid": original.pid,
                            "program": program,
                            "address": destination.to_string(),
                            "server_name": hello.server_name,
                        })),
                );
                None
            }
        }
    }

    fn authority(&self, session: &Session) -> Option<Arc<crate::session::ca::SessionCa>> {
        let id = session.id()?;
        let found = self.daemon.trust.get().and_then(|t| t.authority(id));
        if found.is_none() {
            eprintln!("agentshd: transparent proxy: session {id} has no certificate authority");
        }
        found
    }
}

/// The guards' state of MCP conversations: (session, server, conversation) -> guard. It
/// outlives connections: a conversation's GET stream and POSTs may come on different ones.
type ConversationMap = Arc<Mutex<HashMap<(String, String, Conversation), Arc<McpHttp>>>>;

/// What tells one MCP conversation with a server from another.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Conversation {
    /// Streamable HTTP's Mcp-Session-Id (empty before the server gives one, or if it never
    /// does).
    Header(String),
    /// The older HTTP+SSE transport's: the URL its POSTs go to (path and query).
    Endpoint(String),
    /// A stateless request, a conversation of its own (never kept).
    Exchange,
}

/// Conversations kept at most; past it one of the same session's goes (a client inventing
/// session ids cannot grow the map without bound).
const MAX_CONVERSATIONS: usize = 4096;

/// The MCP conversations of one session with one server.
struct Conversations {
    map: ConversationMap,
    session: String,
    server: String,
    decider: Arc<dyn crate::engine::Decider>,
    max_message_bytes: usize,
    /// The session's placeholders, when it holds any: put in or refused like anywhere.
    secrets: Option<Arc<super::brokered::SecretsGuard>>,
}

impl Conversations {
    fn key(&self, conversation: Conversation) -> (String, String, Conversation) {
        (self.session.clone(), self.server.clone(), conversation)
    }

    /// The guard of a conversation, new if there is none.
    fn get(&self, conversation: Conversation) -> Arc<McpHttp> {
        let key = self.key(conversation);
        let mut map = lock(&self.map);
        if !map.contains_key(&key) && map.len() >= MAX_CONVERSATIONS {
            let evicted = map.keys().find(|(s, _, _)| *s == self.session).cloned();
            if let Some(evicted) = evicted {
                map.remove(&evicted);
            }
        }
        Arc::clone(map.entry(key).or_insert_with(|| {
            Arc::new(McpHttp::new(
                &self.server,
                Arc::clone(&self.decider),
                self.max_message_bytes,
            ))
        }))
    }

    /// The conversation a request belongs to: by its Mcp-Session-Id; else an older-transport
    /// POST by its URL, when a stream named it (whatever its headers say: its answers come on
    /// that stream); a stateless (2026-07-28) POST is one of its own; else the one without an
    /// id.
    fn of<B>(&self, request: &http::Request<B>) -> (Conversation, Arc<McpHttp>) {
        if let Some(id) = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
        {
            let conversation = Conversation::Header(id.to_owned());
            return (conversation.clone(), self.get(conversation));
        }
        if request.method() == http::Method::POST
            && let Some(path) = request.uri().path_and_query()
        {
            let conversation = Conversation::Endpoint(path.as_str().to_owned());
            if let Some(http) = lock(&self.map).get(&self.key(conversation.clone())) {
                return (conversation, Arc::clone(http));
            }
        }
        if request.method() == http::Method::POST && mcp_headers::is_stateless(request.headers()) {
            // Every answer comes in the POST's own response and nothing outlives it: two
            // clients numbering their requests alike never meet.
            let http = Arc::new(McpHttp::new(
                &self.server,
                Arc::clone(&self.decider),
                self.max_message_bytes,
            ));
            return (Conversation::Exchange, http);
        }
        let conversation = Conversation::Header(String::new());
        (conversation.clone(), self.get(conversation))
    }

    fn end(&self, conversation: Conversation) {
        lock(&self.map).remove(&self.key(conversation));
    }

    async fn serve<S>(self: Arc<Self>, client: S, origin: Origin, destination: SocketAddr)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let origin = Arc::new(origin);
        let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let (origin, conversations) = (Arc::clone(&origin), Arc::clone(&self));
            async move {
                let (conversation, http) = conversations.of(&request);
                let ended = request.method() == http::Method::DELETE;
                // A GET outside any Streamable HTTP session may be the older transport's
                // stream, which opens a conversation of its own.
                let endpoints = (request.method() == http::Method::GET
                    && conversation == Conversation::Header(String::new()))
                .then(|| Arc::clone(&conversations) as Arc<dyn Endpoints>);
                let how = mcp_exchange::Exchange {
                    max_message_bytes: conversations.max_message_bytes,
                    endpoints,
                    resumable: matches!(&conversation, Conversation::Header(id) if !id.is_empty()),
                    secrets: conversations.secrets.clone(),
                };
                let response = mcp_exchange::exchange(request, http, &origin, how).await;
                if ended {
                    conversations.end(conversation);
                }
                Ok::<_, Infallible>(response)
            }
        });
        serve_http(client, service, destination).await;
    }
}

impl Endpoints for Conversations {
    fn open(&self, endpoint: &str) -> Arc<McpHttp> {
        let conversation = Conversation::Endpoint(endpoint.to_owned());
        // A stream that names an endpoint already in use starts that conversation anew.
        self.end(conversation.clone());
        self.get(conversation)
    }

    fn close(&self, endpoint: &str, http: &Arc<McpHttp>) {
        let key = self.key(Conversation::Endpoint(endpoint.to_owned()));
        let mut map = lock(&self.map);
        if map.get(&key).is_some_and(|kept| Arc::ptr_eq(kept, http)) {
            map.remove(&key);
        }
    }
}

/// HTTP/1.1 or h2 (as the client speaks) on a terminated or plain client connection.
async fn serve_http<I, S>(client: I, service: S, destination: SocketAddr)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<crate::proxy::ResponseBody>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    // Upgrades: the Responses API's WebSocket.
    let served = builder
        .serve_connection_with_upgrades(TokioIo::new(client), service)
        .await;
    if let Err(err) = served {
        let incomplete = err
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message);
        if !incomplete {
            eprintln!("agentshd: transparent proxy: connection to {destination}: {err}");
        }
    }
}

/// Copies both ways between the client and where it was going, untouched.
async fn splice(mut client: TcpStream, destination: SocketAddr, upstream: Option<TcpStream>) {
    let mut upstream = match upstream {
        Some(upstream) => upstream,
        None => match TcpStream::connect(destination).await {
            Ok(upstream) => upstream,
            // The client sees its connection closed, as it would a refused one.
            Err(_) => return,
        },
    };
    let _ = upstream.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

/// The program a process runs, by the name it was started as (`?` when it is gone).
fn program_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Who spoke first on a connection.
enum Speaker {
    /// The server (its bytes wait, unread, in the upstream connection).
    Server(TcpStream),
    /// The client; the upstream connection, if the destination took one.
    Client(Option<TcpStream>),
    /// The client left before either spoke.
    Gone,
}

/// Opens the connection's destination and waits for the first bytes from either side, for as
/// long as it takes: no timeout a client could wait out to be taken for a server-first
/// protocol.
async fn first_speaker(client: &TcpStream, destination: SocketAddr) -> Speaker {
    // `peek` waits for bytes (a fresh socket's readiness alone says nothing); 0 is the end.
    let mut one = [0u8; 1];
    let upstream = tokio::select! {
        connected = TcpStream::connect(destination) => connected.ok(),
        // A client that speaks before its destination answers the connect: read it.
        peeked = client.peek(&mut one) => {
            return match peeked {
                Ok(0) | Err(_) => Speaker::Gone,
                Ok(_) => Speaker::Client(None),
            };
        }
    };
    let Some(upstream) = upstream else {
        // Nothing listens there: what the client says may still be worth reading.
        return Speaker::Client(None);
    };
    let _ = upstream.set_nodelay(true);
    let mut theirs = [0u8; 1];
    tokio::select! {
        biased;
        peeked = client.peek(&mut one) => match peeked {
            Ok(0) | Err(_) => Speaker::Gone,
            Ok(_) => Speaker::Client(Some(upstream)),
        },
        peeked = upstream.peek(&mut theirs) => match peeked {
            Ok(n) if n > 0 => Speaker::Server(upstream),
            // The destination closed without a word: the client's bytes decide.
            Ok(_) | Err(_) => Speaker::Client(None),
        },
    }
}

/// Looks up a declared server's host name (blocking; called off the runtime's workers).
fn resolve(name: &str, port: u16) -> Vec<std::net::IpAddr> {
    (name, port)
        .to_socket_addrs()
        .map(|addrs| addrs.map(|a| a.ip()).collect())
        .unwrap_or_default()
}
