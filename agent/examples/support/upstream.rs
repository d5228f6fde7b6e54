//! The fake provider the benchmarks' clients reach directly and through agentshd: HTTP/1.1 on
//! 127.0.0.2, served on a thread and runtime of its own, noting by request id what it got and
//! when it wrote each event, for the client to match against what it read.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

/// The fake upstream as the client sees it.
pub struct Upstream {
    pub addr: SocketAddr,
    pub log: SendLog,
}

impl Upstream {
    /// Listens on 127.0.0.2 and answers each connection with `serve` (given the shared log)
    /// until the process exits; failures go to stderr, after `bench`'s name.
    pub fn start<F, Fut>(bench: &'static str, serve: F) -> Result<Self>
    where
        F: Fn(tokio::net::TcpStream, SendLog) -> Fut + Send + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.2:0")
            .context("bind the fake upstream on 127.0.0.2")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let log = SendLog::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("the fake upstream's runtime")?;
        let served_log = log.clone();
        std::thread::Builder::new()
            .name("upstream".into())
            .spawn(move || runtime.block_on(accept_loop(listener, bench, served_log, serve)))
            .context("the fake upstream's thread")?;
        Ok(Self { addr, log })
    }
}

async fn accept_loop<F, Fut>(
    listener: std::net::TcpListener,
    bench: &'static str,
    log: SendLog,
    serve: F,
) where
    F: Fn(tokio::net::TcpStream, SendLog) -> Fut,
    Fut: Future<Output = Result<()>> + Send + 'static,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("{bench}: upstream: cannot listen: {err}");
            return;
        }
    };
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let connection = serve(stream, log.clone());
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        eprintln!("{bench}: upstream: {err:#}");
                    }
                });
            }
            Err(err) => {
                eprintln!("{bench}: upstream: accept: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// What the upstream got and did for one request.
#[derive(Default)]
pub struct Sent {
    /// The request as it arrived, where the bench notes it.
    pub request: String,
    /// When each event was written.
    pub at: Vec<Instant>,
}

/// What the upstream got and did, by the id the client gave each request; shared by the
/// upstream's thread and the client's.
#[derive(Clone, Default)]
pub struct SendLog(Arc<Mutex<HashMap<u64, Sent>>>);

impl SendLog {
    pub fn note_request(&self, id: u64, request: String) {
        self.lock().entry(id).or_default().request = request;
    }

    /// An event of request `id` goes out now. Called just before the write, so a latency never
    /// comes out negative for a reader woken before the writer returns.
    pub fn note_write(&self, id: u64) {
        self.lock().entry(id).or_default().at.push(Instant::now());
    }

    /// What was noted for request `id` (all of it once the client has read the end), removed.
    pub fn take(&self, id: u64) -> Sent {
        self.lock().remove(&id).unwrap_or_default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Sent>> {
        // A panicked writer leaves nothing half-done that matters to a bench.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A chunked response written event by event: one chunk and one write each, the head with the
/// first, each write noted in the log under the request's id.
pub struct EventWriter<'a, W> {
    write: &'a mut W,
    log: &'a SendLog,
    id: u64,
    frame: Vec<u8>,
}

impl<'a, W: AsyncWrite + Unpin> EventWriter<'a, W> {
    /// `head` is the response's status line and headers, through the blank line.
    pub fn new(write: &'a mut W, head: &[u8], log: &'a SendLog, id: u64) -> Self {
        Self {
            write,
            log,
            id,
            frame: head.to_vec(),
        }
    }

    pub async fn event(&mut self, event: &[u8]) -> Result<()> {
        push_chunk(&mut self.frame, event);
        self.log.note_write(self.id);
        self.write.write_all(&self.frame).await?;
        self.frame.clear();
        Ok(())
    }

    /// The last chunk, which ends the body.
    pub async fn finish(self) -> Result<()> {
        self.write.write_all(LAST_CHUNK).await?;
        Ok(())
    }
}

/// The empty chunk that ends a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Appends `data` as one chunk of a chunked body.
pub fn push_chunk(out: &mut Vec<u8>, data: &[u8]) {
    let _ = write!(out, "{:x}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A whole 404 response, `text` its body: the answer to a path the upstream does not serve.
pub fn not_found(text: &str) -> String {
    format!(
        "HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{text}",
        text.len()
    )
}

/// A request's line and headers as the upstream read them; its body is still to be read.
pub struct RequestHead {
    pub method: String,
    pub path: String,
    /// Each header's name in lower case, and its value trimmed.
    pub headers: Vec<(String, String)>,
    pub content_length: usize,
}

/// The next request's head on a connection; `None` when the peer closed it between requests.
/// A chunked body is refused: the proxy sends lengths.
pub async fn read_request_head(
    read: &mut (impl AsyncBufRead + Unpin),
) -> Result<Option<RequestHead>> {
    let mut line = String::new();
    if read.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
        bail!("a bad request line {line:?}");
    };
    let (method, path) = (method.to_owned(), path.to_owned());
    let (mut headers, mut content_length) = (Vec::new(), 0usize);
    loop {
        line.clear();
        ensure!(
            read.read_line(&mut line).await? > 0,
            "the connection closed inside a request head"
        );
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("a bad header line {header:?}"))?;
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "content-length" => content_length = value.parse().context("content-length")?,
            "transfer-encoding" => bail!("a chunked request body (the proxy sends lengths)"),
            _ => {}
        }
        headers.push((name, value.to_owned()));
    }
    Ok(Some(RequestHead {
        method,
        path,
        headers,
        content_length,
    }))
}

/// The text of the `i`th delta: a few words that differ from delta to delta.
pub fn words(i: usize) -> String {
    format!("word{i} and some more text to read ")
}
