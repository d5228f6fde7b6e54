//! The upstream of one transparent client connection: the address the agent dialled, opened on
//! the first request and kept for the ones after it, never shared with another client (two
//! sessions may resolve one name to different addresses; each gets the one it chose).
//!
//! TLS to the origin verifies the real certificate for the name the client asked for; the
//! protocol is what the origin picks (h2 or HTTP/1.1), whatever the client speaks.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::proxy::RequestBody;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

use super::tls::{TlsError, UpstreamTls};
use crate::session::ca::LeafName;

/// Why a request could not be sent to the origin.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP with {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: hyper::Error,
    },
    #[error(
        "the server at {addr} presented a certificate (sha256 of its key {found}) that its tls_fingerprint {expected} names neither by key nor by certificate"
    )]
    Fingerprint {
        addr: SocketAddr,
        expected: String,
        found: String,
    },
    #[error("cannot build the request for {addr}: {source}")]
    Request {
        addr: SocketAddr,
        source: http::Error,
    },
}

/// Where one client connection's requests go.
pub struct Origin {
    address: SocketAddr,
    /// The name TLS verifies (the client's SNI, or the address); `None`: plain HTTP.
    tls: Option<(UpstreamTls, LeafName)>,
    /// What requests name as their authority (`Host`, `:authority`).
    authority: String,
    /// The SHA-256 of the key the origin's certificate must carry (lowercase hex).
    spki_sha256: Option<String>,
    /// Whether an HTTP/1.1 request keeps the `Host` its client gave (the transparent path,
    /// where the client chose the server); otherwise it names the origin.
    keep_host: bool,
    sender: Mutex<Option<Sender>>,
}

/// A request on its way, whichever protocol carries it.
type Pending = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response<Incoming>, hyper::Error>> + Send>,
>;

enum Sender {
    Http1(http1::SendRequest<RequestBody>),
    Http2(http2::SendRequest<RequestBody>),
}

impl Sender {
    /// Whether the connection can take a request (waiting for the last HTTP/1.1 body).
    async fn ready(&mut self) -> bool {
        match self {
            Self::Http1(sender) => sender.ready().await.is_ok(),
            Self::Http2(sender) => sender.ready().await.is_ok(),
        }
    }
}

impl Origin {
    /// TLS to `address`, verified for `name`.
    pub fn tls(address: SocketAddr, tls: UpstreamTls, name: LeafName) -> Self {
        let authority = authority_of(&name.to_string(), address.port(), 443);
        Self {
            address,
            tls: Some((tls, name)),
            authority,
            spki_sha256: None,
            keep_host: false,
            sender: Mutex::new(None),
        }
    }

    /// Plain HTTP to `address`.
    pub fn plain(address: SocketAddr) -> Self {
        Self {
            address,
            tls: None,
            authority: authority_of(&address.ip().to_string(), address.port(), 80),
            spki_sha256: None,
            keep_host: false,
            sender: Mutex::new(None),
        }
    }

    /// Requests keep the `Host` their client gave: the server's name-based checks (DNS
    /// rebinding protection, virtual hosts) see what the client asked for, not the address
    /// agentsh connected to.
    pub fn keeping_host(mut self) -> Self {
        self.keep_host = true;
        self
    }

    /// Whether a request's own `Host` goes to the origin: on the transparent path, unless over
    /// TLS it names another host than the one the connection was opened and verified for (a
    /// declared server's name and pin must not front for another site behind the same
    /// address).
    fn keeps(&self, host: Option<&http::HeaderValue>) -> bool {
        let Some(host) = host.and_then(|h| h.to_str().ok()) else {
            return false;
        };
        if !self.keep_host {
            return false;
        }
        match &self.tls {
            None => true,
            Some((_, name)) => host_part(host).eq_ignore_ascii_case(&name.to_string()),
        }
    }

    /// Only a certificate carrying the key with this SHA-256 (SPKI, lowercase hex) will do,
    /// besides verifying (a declared server's `tls_fingerprint`).
    pub fn pinned(mut self, spki_sha256: Option<String>) -> Self {
        self.spki_sha256 = spki_sha256;
        self
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// What requests to this origin name as their host.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Sends `request` (its URI's path and query are used; the authority is the origin's).
    /// A connection the origin closed since the last request is opened again.
    pub async fn send(
        &self,
        request: Request<RequestBody>,
    ) -> Result<Response<Incoming>, OriginError> {
        let (mut head, body) = request.into_parts();
        let path = head
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        let mut slot = self.sender.lock().await;
        let reused = match slot.take() {
            Some(mut sender) => sender.ready().await.then_some(sender),
            None => None,
        };
        let mut current = match reused {
            Some(sender) => sender,
            None => self.open().await?,
        };
        let bad = |source| OriginError::Request {
            addr: self.address,
            source,
        };
        let sent = match &mut current {
            Sender::Http1(sender) => {
                head.uri = Uri::try_from(path).map_err(|e| bad(e.into()))?;
                if !self.keeps(head.headers.get(http::header::HOST)) {
                    head.headers.insert(
                        http::header::HOST,
                        http::HeaderValue::from_str(&self.authority).map_err(|e| bad(e.into()))?,
                    );
                }
                Box::pin(sender.send_request(Request::from_parts(head, body))) as Pending
            }
            Sender::Http2(sender) => {
                let scheme = if self.tls.is_some() { "https" } else { "http" };
                head.uri = Uri::builder()
                    .scheme(scheme)
                    .authority(self.authority.as_str())
                    .path_and_query(path)
                    .build()
                    .map_err(bad)?;
                head.headers.remove(http::header::HOST);
                Box::pin(sender.send_request(Request::from_parts(head, body)))
            }
        };
        let multiplexed = matches!(current, Sender::Http2(_));
        *slot = Some(current);
        if multiplexed {
            // Streams multiplex: the connection is free for the next request at once.
            drop(slot);
        }
        // HTTP/1.1 answers in order: the lock is held until this answer's head is in, and the
        // next request's `ready` waits for its body.
        let response = sent.await;
        response.map_err(|source| OriginError::Http {
            addr: self.address,
            source,
        })
    }

    /// Sends an upgrade request (a WebSocket handshake) on a connection of its own, HTTP/1.1,
    /// which becomes the upgraded stream when the origin agrees.
    pub async fn upgrade(
        &self,
        request: Request<RequestBody>,
    ) -> Result<Response<Incoming>, OriginError> {
        let address = self.address;
        let http_error = |source| OriginError::Http {
            addr: address,
            source,
        };
        let (mut head, body) = request.into_parts();
        let path = head
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        head.uri = Uri::try_from(path).map_err(|e| OriginError::Request {
            addr: address,
            source: e.into(),
        })?;
        head.headers.insert(
            http::header::HOST,
            http::HeaderValue::from_str(&self.authority).map_err(|e| OriginError::Request {
                addr: address,
                source: e.into(),
            })?,
        );
        let request = Request::from_parts(head, body);
        let mut sender = match &self.tls {
            Some((tls, name)) => {
                let stream = tls.connect_http1(address, name).await?;
                self.check_pin(&stream)?;
                let (sender, connection) = http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(http_error)?;
                tokio::spawn(connection.with_upgrades());
                sender
            }
            None => {
                let stream = self.connect_plain().await?;
                let (sender, connection) = http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(http_error)?;
                tokio::spawn(connection.with_upgrades());
                sender
            }
        };
        sender.send_request(request).await.map_err(http_error)
    }

    /// A plain TCP connection to the origin.
    async fn connect_plain(&self) -> Result<TcpStream, OriginError> {
        let stream =
            TcpStream::connect(self.address)
                .await
                .map_err(|source| OriginError::Connect {
                    addr: self.address,
                    source,
                })?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// A declared server's certificate must carry the pinned key, or be the pinned
    /// certificate: the design documents' "cert pin" is what `openssl x509 -fingerprint
    /// -sha256` prints, a key pin survives renewal; both are taken.
    fn check_pin(
        &self,
        stream: &tokio_rustls::client::TlsStream<TcpStream>,
    ) -> Result<(), OriginError> {
        let Some(expected) = &self.spki_sha256 else {
            return Ok(());
        };
        let found = leaf_fingerprints(stream.get_ref().1.peer_certificates());
        if found.as_ref().is_some_and(|leaf| leaf.pinned_by(expected)) {
            return Ok(());
        }
        Err(OriginError::Fingerprint {
            addr: self.address,
            expected: expected.clone(),
            found: found.map_or_else(|| "none".to_owned(), |leaf| leaf.spki),
        })
    }

    async fn open(&self) -> Result<Sender, OriginError> {
        let address = self.address;
        let http_error = |source| OriginError::Http {
            addr: address,
            source,
        };
        match &self.tls {
            Some((tls, name)) => {
                let stream = tls.connect(address, name).await?;
                self.check_pin(&stream)?;
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                let io = TokioIo::new(stream);
                if h2 {
                    let (sender, connection) = http2::handshake(TokioExecutor::new(), io)
                        .await
                        .map_err(http_error)?;
                    tokio::spawn(connection);
                    Ok(Sender::Http2(sender))
                } else {
                    let (sender, connection) = http1::handshake(io).await.map_err(http_error)?;
                    tokio::spawn(connection);
                    Ok(Sender::Http1(sender))
                }
            }
            None => {
                let stream = self.connect_plain().await?;
                let (sender, connection) = http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(http_error)?;
                tokio::spawn(connection);
                Ok(Sender::Http1(sender))
            }
        }
    }
}

/// The SHA-256 digests of a leaf certificate, lowercase hex.
#[derive(Debug, PartialEq, Eq)]
struct LeafFingerprints {
    /// Of its public key (SPKI DER).
    spki: String,
    /// Of the whole certificate (DER).
    certificate: String,
}

impl LeafFingerprints {
    /// Whether a `tls_fingerprint` (lowercase hex) names this leaf, by key or by certificate.
    fn pinned_by(&self, fingerprint: &str) -> bool {
        self.spki == fingerprint || self.certificate == fingerprint
    }
}

fn leaf_fingerprints(
    chain: Option<&[rustls::pki_types::CertificateDer<'_>]>,
) -> Option<LeafFingerprints> {
    use sha2::Digest as _;
    let leaf = chain?.first()?;
    let cert = webpki::EndEntityCert::try_from(leaf).ok()?;
    Some(LeafFingerprints {
        spki: hex::encode(sha2::Sha256::digest(
            cert.subject_public_key_info().as_ref(),
        )),
        certificate: hex::encode(sha2::Sha256::digest(leaf.as_ref())),
    })
}

/// The host of a `Host` header value: without its port, an IPv6 address without brackets.
fn host_part(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    value.rsplit_once(':').map_or(value, |(host, _)| host)
}

/// `host` or `host:port` when the port is not the scheme's own; IPv6 in brackets.
fn authority_of(host: &str, port: u16, default_port: u16) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if port == default_port {
        host
    } else {
        format!("{host}:{port}")
    }
}

/// Shared by the requests of one client connection.
pub type SharedOrigin = Arc<Origin>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprints_are_the_sha256_of_the_leaf_s_key_and_of_the_leaf() {
        use sha2::Digest as _;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["mcp.test".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let expected = hex::encode(sha2::Sha256::digest(
            rcgen::PublicKeyData::subject_public_key_info(&key),
        ));
        let chain = [cert.der().clone()];
        assert_eq!(
            leaf_fingerprints(Some(&chain)),
            Some(LeafFingerprints {
                spki: expected,
                certificate: hex::encode(sha2::Sha256::digest(cert.der().as_ref())),
            })
        );
        let leaf = leaf_fingerprints(Some(&chain)).unwrap();
        assert!(leaf.pinned_by(&leaf.spki) && leaf.pinned_by(&leaf.certificate));
        assert!(!leaf.pinned_by(&"0".repeat(64)));
        assert_eq!(leaf_fingerprints(Some(&[])), None);
        assert_eq!(leaf_fingerprints(None), None);
    }

    #[test]
    fn host_headers_lose_their_port() {
        assert_eq!(host_part("mcp.example.com:8443"), "mcp.example.com");
        assert_eq!(host_part("mcp.example.com"), "mcp.example.com");
        assert_eq!(host_part("[::1]:8080"), "::1");
        assert_eq!(host_part("127.0.0.1:80"), "127.0.0.1");
    }

    #[test]
    fn authorities_name_the_port_only_when_it_is_not_the_default() {
        assert_eq!(
            authority_of("api.anthropic.com", 443, 443),
            "api.anthropic.com"
        );
        assert_eq!(authority_of("127.0.0.3", 8080, 80), "127.0.0.3:8080");
        assert_eq!(authority_of("::1", 443, 443), "[::1]");
        assert_eq!(authority_of("::1", 8443, 443), "[::1]:8443");
    }
}
