//! The proxy's connections to the providers: one pooled HTTP/1.1 client, TLS verified against
//! the system roots plus `tls.extra_roots`, plain HTTP only where config names an `http://`
//! upstream (tests).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The client every proxied request goes out on.
pub type Upstream = Client<HttpsConnector<HttpConnector>, super::RequestBody>;

/// Why the upstream client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("tls.extra_roots: {path}: {reason}")]
    ExtraRoot { path: PathBuf, reason: String },
    #[error(
        "no trusted roots for upstream TLS: the system store is empty or unreadable ({0}) and tls.extra_roots adds none"
    )]
    NoRoots(String),
    #[error("upstream TLS: {0}")]
    Tls(#[from] rustls::Error),
}

/// Idle upstream connections are kept this long: a model request follows a tool result within
/// seconds, and a new TLS handshake would cost more than the whole proxy hop.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// Builds the pooled client.
pub fn client(extra_roots: &[PathBuf]) -> Result<Upstream, UpstreamError> {
    let tls = crate::net::tls::client_config(roots(extra_roots)?)?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(connector());
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .build(connector))
}

/// A pooled HTTP/2-only client (gRPC): ALPN h2 over TLS, prior knowledge over plain TCP.
pub fn http2_client(extra_roots: &[PathBuf]) -> Result<Upstream, UpstreamError> {
    let tls = crate::net::tls::client_config(roots(extra_roots)?)?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http2()
        .wrap_connector(connector());
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE)
        .http2_only(true)
        .build(connector))
}

fn connector() -> HttpConnector {
    let mut http = HttpConnector::new();
    // Every event of a stream is a small write: Nagle would hold them back.
    http.set_nodelay(true);
    http.enforce_http(false);
    http.set_connect_timeout(Some(Duration::from_secs(30)));
    http
}

/// The system's roots (SSL_CERT_FILE / SSL_CERT_DIR honoured) and the extra ones: what both
/// upstream paths verify against.
pub fn roots(extra_roots: &[PathBuf]) -> Result<RootCertStore, UpstreamError> {
    let (system, system_error) = system_roots();
    let mut store = RootCertStore::empty();
    // A bad certificate among hundreds in the system store is skipped, not fatal.
    store.add_parsable_certificates(system.iter().cloned());
    for path in extra_roots {
        for cert in read_pem(path)? {
            store.add(cert).map_err(|e| UpstreamError::ExtraRoot {
                path: path.clone(),
                reason: format!("not a usable CA certificate: {e}"),
            })?;
        }
    }
    if store.is_empty() {
        let why = system_error
            .clone()
            .unwrap_or_else(|| "no certificates found".to_owned());
        return Err(UpstreamError::NoRoots(why));
    }
    Ok(store)
}

/// The system store, read once per process: the proxy, the transparent front, the webhook and
/// the exporter each build a client from it. The first error, if any, says why it is short.
fn system_roots() -> &'static (Vec<CertificateDer<'static>>, Option<String>) {
    static SYSTEM: std::sync::OnceLock<(Vec<CertificateDer<'static>>, Option<String>)> =
        std::sync::OnceLock::new();
    SYSTEM.get_or_init(|| {
        let native = rustls_native_certs::load_native_certs();
        (native.certs, native.errors.first().map(ToString::to_string))
    })
}

fn read_pem(path: &Path) -> Result<Vec<CertificateDer<'static>>, UpstreamError> {
    let bad = |reason: String| UpstreamError::ExtraRoot {
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(format!("cannot read it: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("holds no CERTIFICATE block".to_owned()));
    }
    Ok(certs)
}

/// A response read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: http::StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
    /// HTTP/2 trailers (gRPC's status is there).
    pub trailers: Option<http::HeaderMap>,
}

/// Answers longer than this are an error: webhooks and collectors say little.
const MAX_ANSWER: usize = 1024 * 1024;

/// Sends `request` (with agentsh's user agent unless it has one) and reads the answer whole,
/// all within `limit`; Err says why there is no answer, whatever its status.
pub async fn exchange(
    client: &Upstream,
    mut request: http::Request<super::RequestBody>,
    limit: Duration,
) -> Result<Answer, String> {
    request
        .headers_mut()
        .entry(http::header::USER_AGENT)
        .or_insert(http::HeaderValue::from_static(concat!(
            "agentsh/",
            env!("CARGO_PKG_VERSION")
        )));
    let exchange = async {
        let response = client.request(request).await.map_err(|e| {
            // hyper's top-level message ("client error (Connect)") hides the cause.
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                why = format!("{why}: {cause}");
                source = cause.source();
            }
            why
        })?;
        let (parts, body) = response.into_parts();
        let collected = http_body_util::Limited::new(body, MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?;
        let trailers = collected.trailers().cloned();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body: collected.to_bytes(),
            trailers,
        })
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| format!("no answer in {limit:?}"))?
}

/// POSTs a JSON `body` to `url` (a webhook), with `headers` besides the content type; Ok on a
/// 2xx within `limit`, else why not.
pub async fn post_json(
    client: &Upstream,
    url: &str,
    headers: &[(&str, String)],
    body: Bytes,
    limit: Duration,
) -> Result<(), String> {
    let mut request =
        http::Request::post(url).header(http::header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request
        .body(super::whole_request(body))
        .map_err(|e| e.to_string())?;
    match exchange(client, request, limit).await?.status {
        status if status.is_success() => Ok(()),
        status => Err(format!("HTTP {status}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_roots_must_be_certificates() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no pem here\n").unwrap();
        let err = roots(std::slice::from_ref(&empty)).unwrap_err().to_string();
        assert!(
            err.contains("empty.pem") && err.contains("no CERTIFICATE"),
            "{err}"
        );
        let missing = dir.path().join("missing.pem");
        let err = roots(&[missing]).unwrap_err().to_string();
        assert!(
            err.contains("missing.pem") && err.contains("cannot read"),
            "{err}"
        );
    }
}
