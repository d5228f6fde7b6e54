//! TLS on the transparent path: read a client's ClientHello without taking it off the socket
//! (so a connection that is not ours to open can still be spliced through untouched),
//! terminate the ones that are with the session's leaf, and open the upstream side to the
//! ORIGINAL address, verifying the real certificate for the name the client asked for.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::server::{Acceptor, ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio_rustls::{LazyConfigAcceptor, TlsConnector, client, server};

use crate::session::ca::{CaError, LeafName, SessionCa};

/// The protocols both sides may speak, in our order of preference.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];
/// A ClientHello is at most one handshake message; real ones are a few KiB (post-quantum key
/// shares included). Past this the connection is not TLS we can read.
const MAX_HELLO: usize = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the client sent no ClientHello within {0:?}")]
    HelloTimeout(Duration),
    #[error("the client closed the connection before its ClientHello was complete")]
    HelloCut,
    #[error("the client's first bytes are not a TLS ClientHello: {0}")]
    NotTls(rustls::Error),
    #[error("the ClientHello is larger than {MAX_HELLO} bytes")]
    HelloTooLarge,
    #[error(transparent)]
    Leaf(#[from] CaError),
    #[error("the TLS handshake with the client failed: {0}")]
    ClientHandshake(io::Error),
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: SocketAddr, source: io::Error },
    #[error("the TLS handshake with {name} at {addr} failed: {source}")]
    UpstreamHandshake {
        name: String,
        addr: SocketAddr,
        source: io::Error,
    },
    #[error("reading the socket: {0}")]
    Io(io::Error),
}

/// What a ClientHello says that matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The server name (SNI), if the client sent one.
    pub server_name: Option<String>,
    /// The protocols offered (ALPN), in the client's order.
    pub alpn: Vec<Vec<u8>>,
}

/// Reads the ClientHello at the head of `stream` without consuming it: after this the bytes
/// are still the socket's, for a handshake or for a splice.
pub async fn peek_hello(stream: &TcpStream, patience: Duration) -> Result<Hello, TlsError> {
    tokio::time::timeout(patience, peek_hello_now(stream))
        .await
        .map_err(|_| TlsError::HelloTimeout(patience))?
}

async fn peek_hello_now(stream: &TcpStream) -> Result<Hello, TlsError> {
    let mut buffer = vec![0u8; 4096];
    let mut seen = 0;
    let mut wait = Duration::from_micros(100);
    loop {
        let peeked = stream.peek(&mut buffer).await.map_err(TlsError::Io)?;
        if peeked == 0 {
            return Err(TlsError::HelloCut);
        }
        if peeked > seen {
            seen = peeked;
            if let Some(hello) = read_hello(&buffer[..peeked])? {
                return Ok(hello);
            }
        } else {
            // Nothing new: the socket stays readable while the first part sits in it, so
            // wait a little (a hello in several segments is rare), unless the client left.
            let ready = stream
                .ready(Interest::READABLE)
                .await
                .map_err(TlsError::Io)?;
            if ready.is_read_closed() {
                return Err(TlsError::HelloCut);
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(10));
        }
        if peeked == buffer.len() {
            if buffer.len() >= MAX_HELLO {
                return Err(TlsError::HelloTooLarge);
            }
            buffer.resize(buffer.len() * 2, 0);
        }
    }
}

/// The hello in `bytes`, or None while it is incomplete. Public for the fuzz targets only.
#[doc(hidden)]
pub fn read_hello(bytes: &[u8]) -> Result<Option<Hello>, TlsError> {
    let mut acceptor = Acceptor::default();
    let mut rest = bytes;
    while !rest.is_empty() {
        match acceptor.read_tls(&mut rest) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Err(TlsError::HelloTooLarge),
        }
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => {
            let hello = accepted.client_hello();
            Ok(Some(Hello {
                server_name: hello.server_name().map(str::to_owned),
                alpn: hello
                    .alpn()
                    .map(|protocols| protocols.map(<[u8]>::to_vec).collect())
                    .unwrap_or_default(),
            }))
        }
        Ok(None) => Ok(None),
        Err((error, _alert)) => Err(TlsError::NotTls(error)),
    }
}

/// Completes the handshake with the client as the server it asked for: a leaf of the session's
/// CA for the hello's name, or for `original` (the address it dialled) without one. The
/// protocol is h2 when the client offers it, else HTTP/1.1.
pub async fn terminate(
    stream: TcpStream,
    ca: &SessionCa,
    hello: &Hello,
    original: IpAddr,
) -> Result<server::TlsStream<TcpStream>, TlsError> {
    let name = LeafName::of(hello.server_name.as_deref(), original)?;
    let leaf = ca.leaf(&name)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::ClientHandshake(io::Error::other(e)))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Presents(leaf)));
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    let start = LazyConfigAcceptor::new(Acceptor::default(), stream)
        .await
        .map_err(TlsError::ClientHandshake)?;
    start
        .into_stream(Arc::new(config))
        .await
        .map_err(TlsError::ClientHandshake)
}

/// Presents one leaf, whatever the hello (it was chosen from the hello already).
#[derive(Debug)]
struct Presents(Arc<CertifiedKey>);

impl ResolvesServerCert for Presents {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// The client side of upstream TLS: the system roots plus the configured extra ones.
#[derive(Clone)]
pub struct UpstreamTls {
    config: Arc<ClientConfig>,
    /// The same, offering HTTP/1.1 alone: an upgrade (WebSocket) needs it.
    http1: Arc<ClientConfig>,
}

/// How agentsh talks TLS to upstreams, on either path: ring, the safe protocol versions, these
/// roots, no client certificate.
pub fn client_config(roots: RootCertStore) -> Result<ClientConfig, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl UpstreamTls {
    pub fn new(roots: RootCertStore) -> Result<Self, rustls::Error> {
        let mut config = client_config(roots)?;
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        let mut http1 = config.clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
            http1: Arc::new(http1),
        })
    }

    /// [`Self::connect`], offering HTTP/1.1 only.
    pub async fn connect_http1(
        &self,
        original: SocketAddr,
        name: &LeafName,
    ) -> Result<client::TlsStream<TcpStream>, TlsError> {
        self.connect_with(&self.http1, original, name).await
    }

    /// Connects to `original` (the address the agent dialled, never a name looked up again)
    /// and verifies its certificate for `name`, what the agent's client would have verified.
    pub async fn connect(
        &self,
        original: SocketAddr,
        name: &LeafName,
    ) -> Result<client::TlsStream<TcpStream>, TlsError> {
        self.connect_with(&self.config, original, name).await
    }

    async fn connect_with(
        &self,
        config: &Arc<ClientConfig>,
        original: SocketAddr,
        name: &LeafName,
    ) -> Result<client::TlsStream<TcpStream>, TlsError> {
        let server_name = match name {
            LeafName::Dns(dns) => ServerName::try_from(dns.clone())
                .map_err(|_| TlsError::Leaf(CaError::BadName { name: dns.clone() }))?,
            LeafName::Ip(ip) => ServerName::IpAddress((*ip).into()),
        };
        let tcp = TcpStream::connect(original)
            .await
            .map_err(|source| TlsError::Connect {
                addr: original,
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        TlsConnector::from(Arc::clone(config))
            .connect(server_name, tcp)
            .await
            .map_err(|source| TlsError::UpstreamHandshake {
                name: name.to_string(),
                addr: original,
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    const PATIENCE: Duration = Duration::from_secs(10);

    /// A TLS server on 127.0.0.2 with a leaf of `ca` for `name`, echoing "pong" to each read.
    async fn real_upstream(ca: &SessionCa, name: &str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.2:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let leaf = ca.leaf(&LeafName::Dns(name.to_owned())).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(Presents(leaf)));
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buffer = [0u8; 64];
                    while let Ok(n) = tls.read(&mut buffer).await {
                        if n == 0 || tls.write_all(b"pong").await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn roots_of(ca: &SessionCa) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(ca.certificate().clone()).unwrap();
        roots
    }

    /// The agent's side: trusts `ca`, connects to `front` asking for `name`.
    async fn agent(
        front: SocketAddr,
        ca: &SessionCa,
        name: &str,
    ) -> io::Result<client::TlsStream<TcpStream>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots_of(ca))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let tcp = TcpStream::connect(front).await?;
        TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from(name.to_owned()).unwrap(), tcp)
            .await
    }

    /// The front: one connection, peeked, terminated, and relayed to `upstream` over TLS
    /// verified by `upstream_ca`.
    async fn front(
        session: Arc<SessionCa>,
        upstream: SocketAddr,
        upstream_ca: &SessionCa,
    ) -> (SocketAddr, tokio::task::JoinHandle<Result<Hello, TlsError>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let tls = UpstreamTls::new(roots_of(upstream_ca)).unwrap();
        let task = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.map_err(TlsError::Io)?;
            let hello = peek_hello(&tcp, PATIENCE).await?;
            let name = LeafName::of(hello.server_name.as_deref(), upstream.ip())?;
            // Upstream first: a certificate that does not verify refuses the agent.
            let mut out = tls.connect(upstream, &name).await?;
            let mut inbound = terminate(tcp, &session, &hello, upstream.ip()).await?;
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
            Ok(hello)
        });
        (addr, task)
    }

    #[tokio::test]
    async fn an_agent_trusting_its_session_ca_reaches_the_verified_upstream_through_the_front() {
        let upstream_ca = SessionCa::generate("upstream").unwrap();
        let upstream = real_upstream(&upstream_ca, "api.anthropic.com").await;
        let session = Arc::new(SessionCa::generate("s1").unwrap());
        let (front_addr, front_task) = front(Arc::clone(&session), upstream, &upstream_ca).await;

        let mut tls = agent(front_addr, &session, "api.anthropic.com")
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        tls.write_all(b"ping").await.unwrap();
        let mut answer = [0u8; 4];
        tls.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"pong");
        drop(tls);
        let hello = front_task.await.unwrap().unwrap();
        assert_eq!(hello.server_name.as_deref(), Some("api.anthropic.com"));
        assert_eq!(hello.alpn, [b"http/1.1".to_vec()]);
    }

    #[tokio::test]
    async fn an_upstream_whose_certificate_is_for_another_name_is_refused() {
        let upstream_ca = SessionCa::generate("upstream").unwrap();
        let upstream = real_upstream(&upstream_ca, "elsewhere.example").await;
        let session = Arc::new(SessionCa::generate("s1").unwrap());
        let (front_addr, front_task) = front(Arc::clone(&session), upstream, &upstream_ca).await;
        // The agent's handshake never completes: the front gave up before answering it.
        assert!(
            agent(front_addr, &session, "api.anthropic.com")
                .await
                .is_err()
        );
        let err = front_task.await.unwrap().unwrap_err();
        assert!(matches!(err, TlsError::UpstreamHandshake { .. }), "{err}");
        assert!(err.to_string().contains("not valid for name"), "{err}");
    }

    #[tokio::test]
    async fn peeking_leaves_the_hello_on_the_socket_for_a_splice() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let session = SessionCa::generate("s1").unwrap();
        let client = tokio::spawn(async move { agent(addr, &session, "example.org").await });
        let (mut tcp, _) = listener.accept().await.unwrap();
        let hello = peek_hello(&tcp, PATIENCE).await.unwrap();
        assert_eq!(hello.server_name.as_deref(), Some("example.org"));
        // What a splice would send on: the whole hello, from its first byte.
        let mut head = [0u8; 5];
        tcp.read_exact(&mut head).await.unwrap();
        assert_eq!(head[0], 0x16, "a TLS handshake record");
        drop(tcp);
        assert!(client.await.unwrap().is_err());
    }

    #[tokio::test]
    async fn a_hello_in_pieces_is_read_whole() {
        let session = SessionCa::generate("s1").unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots_of(&session))
            .with_no_client_auth();
        let mut conn = rustls::ClientConnection::new(
            Arc::new(config),
            ServerName::try_from("api.openai.com").unwrap(),
        )
        .unwrap();
        let mut bytes = Vec::new();
        conn.write_tls(&mut bytes).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let (first, second) = bytes.split_at(7);
        client.write_all(first).await.unwrap();
        let peek = tokio::spawn(async move { peek_hello(&tcp, PATIENCE).await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        client.write_all(second).await.unwrap();
        let hello = peek.await.unwrap().unwrap();
        assert_eq!(hello.server_name.as_deref(), Some("api.openai.com"));
    }

    #[tokio::test]
    async fn what_is_not_a_hello_is_told_apart() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Plain HTTP.
        let mut plain = TcpStream::connect(addr).await.unwrap();
        plain
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let err = peek_hello(&tcp, PATIENCE).await.unwrap_err();
        assert!(matches!(err, TlsError::NotTls(_)), "{err}");
        // Silence.
        let _quiet = TcpStream::connect(addr).await.unwrap();
        let (tcp, _) = listener.accept().await.unwrap();
        let err = peek_hello(&tcp, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(err, TlsError::HelloTimeout(_)), "{err}");
        // A hello cut short by the client closing.
        let mut cut = TcpStream::connect(addr).await.unwrap();
        cut.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
            .await
            .unwrap();
        drop(cut);
        let (tcp, _) = listener.accept().await.unwrap();
        let err = peek_hello(&tcp, PATIENCE).await.unwrap_err();
        assert!(matches!(err, TlsError::HelloCut), "{err}");
    }
}
