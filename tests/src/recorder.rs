//! An HTTP endpoint that records what is POSTed to it (JSON bodies): the stand-in for a
//! webhook or an OpenTelemetry collector. It answers 503 to its first `refuse_first`
//! requests and while it is set down, 200 otherwise; only the bodies it accepted count.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

#[derive(Default)]
struct State {
    accepted: Vec<(Vec<(String, String)>, Value)>,
    requests: usize,
}

#[derive(Clone)]
pub struct Recorder {
    state: Arc<Mutex<State>>,
    up: Arc<AtomicBool>,
}

impl Recorder {
    /// Serves `listener` on threads of its own, for the rest of the test.
    pub fn start(listener: TcpListener, refuse_first: usize) -> Self {
        let recorder = Self {
            state: Arc::default(),
            up: Arc::new(AtomicBool::new(true)),
        };
        let serving = recorder.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let serving = serving.clone();
                std::thread::spawn(move || {
                    let _ = serving.answer(stream, refuse_first);
                });
            }
        });
        recorder
    }

    /// Down: every request gets a 503 (an outage the sender must ride out).
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    /// The bodies accepted so far, in order.
    pub fn accepted(&self) -> Vec<Value> {
        let state = self.state.lock().unwrap();
        state
            .accepted
            .iter()
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// The value of header `name` (lowercase) on each accepted request.
    pub fn header(&self, name: &str) -> Vec<String> {
        let state = self.state.lock().unwrap();
        state
            .accepted
            .iter()
            .map(|(headers, _)| {
                headers
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            })
            .collect()
    }

    /// Every request, accepted or not.
    pub fn requests(&self) -> usize {
        self.state.lock().unwrap().requests
    }

    /// The requests of one keep-alive connection, until it closes.
    fn answer(&self, stream: TcpStream, refuse_first: usize) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut out = stream;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let mut headers = Vec::new();
            loop {
                line.clear();
                reader.read_line(&mut line)?;
                let header = line.trim_end();
                if header.is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
                }
            }
            let length = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            let status = {
                let mut state = self.state.lock().unwrap();
                state.requests += 1;
                if state.requests <= refuse_first || !self.up.load(Ordering::SeqCst) {
                    "503 Service Unavailable"
                } else {
                    let body = serde_json::from_slice(&body).expect("a JSON body");
                    state.accepted.push((headers, body));
                    "200 OK"
                }
            };
            write!(out, "HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n")?;
        }
    }
}
