//! The LLM test peers (tests/peers/llm): a fake Anthropic/OpenAI upstream on 127.0.0.2 serving
//! recorded fixtures, over HTTP or HTTPS with certificates from a [`TestCa`], and a client
//! driven by the official `anthropic` and `openai` SDKs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::Value;

use crate::{Output, repo_root, run_bounded, spawn_listening, wait_bounded};

/// tests/peers/llm, with its virtualenv installed by scripts/setup.sh.
pub fn llm_peers() -> PathBuf {
    let dir = repo_root().join("tests/peers/llm");
    assert!(
        python(&dir).exists(),
        "the LLM test peers are not installed: run `bash scripts/setup.sh` (make test does)"
    );
    dir
}

fn python(dir: &Path) -> PathBuf {
    dir.join(".venv/bin/python")
}

/// A recorded fixture's bytes.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = llm_peers().join("fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A session policy that refuses writes and every tool of the memory server: what the tool
/// calls of the recorded LLM fixtures meet.
pub const NO_WRITES_NO_MEMORY: &str = r#"
sandbox:
  mcp:
    rules:
      - {id: no-write, match: {tool_name: write_file}, decision: block, reason: "writes are not allowed"}
      - {id: no-memory, match: {server: memory, tool_name: "*"}, decision: block, reason: "no memory in this session"}
"#;

/// A certificate authority made for one test, and the server certificates it signs.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Its certificate (PEM): what `tls.extra_roots` names to trust it.
    pub pem: PathBuf,
}

/// A server's certificate and key, PEM files written by [`TestCa::issue`].
pub struct ServerCert {
    pub name: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    /// A new CA, its certificate written to `DIR/NAME.pem`.
    pub fn new(dir: &Path, name: &str) -> Self {
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("agentsh test CA {name}"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("a CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("a CA certificate");
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, issuer.pem()).expect("write the CA certificate");
        Self { issuer, pem }
    }

    /// A server certificate for `subject_alt_names` (IP addresses or DNS names) signed by this
    /// CA, written to `DIR/NAME.crt` and `DIR/NAME.key`.
    pub fn issue(&self, dir: &Path, name: &str, subject_alt_names: &[&str]) -> ServerCert {
        let sans: Vec<String> = subject_alt_names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(sans).expect("valid subject alt names");
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("a server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("a server certificate");
        let files = ServerCert {
            name: name.to_owned(),
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write the server certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write the server key");
        files
    }
}

/// The fake upstream, stopped on drop.
pub struct FakeUpstream {
    child: Child,
    /// `http://127.0.0.2:PORT`, or `https://` when it serves TLS.
    pub url: String,
    /// One JSON line per request it received, and per TLS handshake that failed.
    pub log: PathBuf,
}

impl FakeUpstream {
    /// Plain HTTP, logging to `DIR/upstream.log`.
    pub fn start(dir: &Path) -> Self {
        Self::spawn(dir.join("upstream.log"), None)
    }

    /// HTTPS with `cert`, logging to `DIR/upstream-NAME.log` (NAME the certificate's).
    pub fn start_tls(dir: &Path, cert: &ServerCert) -> Self {
        Self::spawn(dir.join(format!("upstream-{}.log", cert.name)), Some(cert))
    }

    /// HTTPS with `cert` on `host:port` (the port a real provider listens on, say).
    pub fn start_tls_at(dir: &Path, cert: &ServerCert, host: &str, port: u16) -> Self {
        Self::spawn_at(
            dir.join(format!("upstream-{}.log", cert.name)),
            Some(cert),
            host,
            port,
        )
    }

    fn spawn(log: PathBuf, tls: Option<&ServerCert>) -> Self {
        Self::spawn_at(log, tls, "127.0.0.2", 0)
    }

    fn spawn_at(log: PathBuf, tls: Option<&ServerCert>, host: &str, port: u16) -> Self {
        let peers = llm_peers();
        let mut command = Command::new(python(&peers));
        command
            .arg(peers.join("fake_upstream.py"))
            .args(["--host", host, "--port", &port.to_string(), "--fixtures"])
            .arg(peers.join("fixtures"))
            .arg("--log")
            .arg(&log);
        if let Some(tls) = tls {
            command
                .arg("--tls-cert")
                .arg(&tls.cert)
                .arg("--tls-key")
                .arg(&tls.key);
        }
        let (child, addr) = spawn_listening(command, "fake_upstream.py");
        let scheme = if tls.is_some() { "https" } else { "http" };
        Self {
            child,
            url: format!("{scheme}://{addr}"),
            log,
        }
    }

    /// The requests it received so far (the log's other lines are failed TLS handshakes).
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad log line {l}: {e}")))
            .filter(|entry: &Value| entry.get("method").is_some())
            .collect()
    }
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = wait_bounded(&mut self.child, Duration::from_secs(10));
    }
}

/// `llm_client.py ARGS`: one request through an official SDK.
pub fn sdk(args: &[&str]) -> Output {
    let peers = llm_peers();
    let mut cmd = Command::new(python(&peers));
    cmd.arg(peers.join("llm_client.py")).args(args);
    run_bounded(cmd, b"", Duration::from_secs(120))
}

/// The command line of `llm_client.py`, for a shell script in a session.
pub fn sdk_command(args: &str) -> String {
    let peers = llm_peers();
    format!(
        "{} {} {args}",
        python(&peers).display(),
        peers.join("llm_client.py").display()
    )
}

/// The SDK's summary of what it parsed (it must have succeeded).
pub fn summary(out: &Output) -> Value {
    assert!(out.status.success(), "the SDK failed: {}", out.stderr);
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("bad summary {}: {e}", out.stdout))
}

/// An upstream that answers each connection's request with the next canned response (raw
/// bytes, sent as they are, its parts a second apart) and closes it: for what a well-behaved
/// server never sends.
pub struct RawUpstream {
    /// `http://127.0.0.2:PORT`
    pub url: String,
}

impl RawUpstream {
    pub fn start(responses: Vec<Vec<Vec<u8>>>) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        std::thread::spawn(move || {
            for response in responses {
                let Ok((mut stream, _)) = listener.accept() else {
                    return;
                };
                let _ = read_request(&mut stream);
                for (i, part) in response.iter().enumerate() {
                    if i > 0 {
                        std::thread::sleep(Duration::from_secs(1));
                    }
                    if std::io::Write::write_all(&mut stream, part).is_err() {
                        break;
                    }
                }
            }
        });
        Self { url }
    }
}

/// Reads one request (head and Content-Length body).
fn read_request(stream: &mut std::net::TcpStream) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(data);
        }
        data.extend_from_slice(&buf[..n]);
        if let Some(end) = find(&data, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return Ok(data);
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A response read off the wire: status, lowercased head, and the body (chunked decoded).
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

/// POSTs `body` to `http://ADDR PATH` with `Connection: close` and reads the response to its
/// end; `read_only` stops after that many body bytes and hangs up (a client going away).
pub fn raw_post(addr: &str, path: &str, body: &str, read_only: Option<usize>) -> RawResponse {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = stream.read(&mut buf).unwrap_or(0);
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
        if let (Some(limit), Some(end)) = (read_only, find(&data, b"\r\n\r\n"))
            && data.len() >= end + 4 + limit
        {
            break;
        }
    }
    let end = find(&data, b"\r\n\r\n").expect("a response head");
    let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let raw = &data[end + 4..];
    let body = if head.contains("transfer-encoding: chunked") && read_only.is_none() {
        dechunk(raw)
    } else {
        raw.to_vec()
    };
    RawResponse { status, head, body }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = find(raw, b"\r\n") {
        let size = std::str::from_utf8(&raw[..line_end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .expect("a chunk size");
        raw = &raw[line_end + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&raw[..size.min(raw.len())]);
        raw = &raw[(size + 2).min(raw.len())..];
    }
    body
}

/// A run of an SDK, for [`in_parallel`].
pub type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` two at a time (the SDKs take seconds to import on a small machine); their
/// results in order.
pub fn in_parallel<T: Send>(jobs: Vec<Job<'_, T>>) -> Vec<T> {
    let mut results = Vec::new();
    let mut jobs = jobs.into_iter();
    loop {
        let batch: Vec<_> = jobs.by_ref().take(2).collect();
        if batch.is_empty() {
            return results;
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = batch.into_iter().map(|job| scope.spawn(job)).collect();
            results.extend(handles.into_iter().map(|h| h.join().expect("job")));
        });
    }
}
