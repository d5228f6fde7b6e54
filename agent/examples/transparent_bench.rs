//! Kernel enforcement and the transparent TLS proxy, against the direct path and mitmproxy, in
//! one run on loopback (needs root: it attaches agentshd's hooks and starts a session).
//!
//! - connect(): from a process in an `agentshctl run` session, to an address the hooks pass
//!   (the hook's own cost) and to one they redirect into agentshd (the redirect's cost),
//!   against the same connect from outside every session (no hook runs);
//! - TLS requests from the same session process to a fake provider on the same machine
//!   (HTTP/1.1, keep-alive, a 1 KiB Anthropic message with a tool call): direct; through
//!   agentshd's transparent proxy (the kernel redirect, a leaf from the session's CA, the LLM
//!   interceptor, the upstream verified); through mitmproxy (PyPI, reverse mode: the same
//!   terminate, parse and re-originate work, with streaming on). The three paths take turns
//!   request by request, so they share the machine's noise;
//! - throughput: a 64 MiB SSE stream; small requests from 8 clients at once;
//! - handshakes/s: new connections, full TLS 1.3 handshakes (no resumption), 4 clients, the
//!   leaf cache warm;
//! - brokered secrets: the same keep-alive requests through agentshd from two sessions, one
//!   holding a placeholder for ANTHROPIC_API_KEY (agentshd puts the real key in; the upstream
//!   answers 401 to anything but the real key) and one started with `--no-secrets` (nothing
//!   brokered: the one the other measurements run in), the sessions taking turns; with the
//!   small request and with a 256 KiB conversation (what the body scan reads).
//!
//! Every body is checked against what the upstream sent. Goals are printed, never asserted.
//!
//! `make bench` runs it (scripts/bench.sh installs mitmproxy in tests/peers/bench/.venv), or
//! `cargo build --release -p agentsh --bins --example transparent_bench` and then
//! `target/release/examples/transparent_bench [--agentshd PATH] [--mitmdump PATH]`.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

mod support;

use support::agentshd::Agentshd;
use support::http::{READ_TIMEOUT, read_response};
use support::stats::{Stats, median, stats};

/// The provider's name: what the session's client asks for (SNI) and agentshd knows as the
/// Anthropic upstream.
const HOST: &str = "api.bench.test";
/// The address agentshd intercepts (`kernel.intercept_loopback`), and one it leaves alone.
const INTERCEPTED: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const DIRECT: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
/// The fake provider's port on both addresses.
const TLS_PORT: u16 = 8443;
/// A plain listener on both addresses for the connect() measurement (the upstream's runtime
/// runs it); agentshd splices redirected connections to it (the port is no provider's).
const SINK_PORT: u16 = 7000;
/// Plain services on ports no provider or declared server uses, on both addresses: one where
/// the server speaks first (a banner, then echo), one where the client does (echo). Through
/// agentshd the first side to speak decides what the connection is.
const BANNER_PORT: u16 = 7001;
const ECHO_PORT: u16 = 7002;
const FIRST_BYTE_ROUNDS: usize = 5;
const FIRST_BYTES_PER_ROUND: usize = 200;

const CONNECT_ROUNDS: usize = 10;
const CONNECTS_PER_ROUND: usize = 300;
const LATENCY_REQUESTS: usize = 1000;
const WARMUP: usize = 20;
const BULK_BYTES: usize = 64 << 20;
const BULK_ROUNDS: usize = 3;
const BULK_CHUNK: usize = 16 << 10;
const RATE_CLIENTS: usize = 8;
const HANDSHAKE_CLIENTS: usize = 4;
const RATE_SECONDS: f64 = 3.0;
/// Brokered secrets: rounds, and requests per session per round (on one connection, after
/// `BROKER_WARMUP` not counted), for each request size.
const BROKER_ROUNDS: usize = 20;
const BROKER_REQUESTS: usize = 50;
const BROKER_WARMUP: usize = 3;
const BROKER_SIZES_KIB: [usize; 2] = [0, 256];
/// The key the brokering session's placeholder stands for; the upstream takes it or `bench`
/// (what the other sessions send), nothing else.
const REAL_KEY: &str = "sk-ant-api03-bench-real-key-0123456789abcdefghijklmnop";
const PLAIN_KEY: &str = "bench";
/// The session's client says it is ready within this (agentshctl run, a CA bundle).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let result = if args.peek().map(String::as_str) == Some("client") {
        args.next();
        client::serve(args.collect())
    } else {
        orchestrate(args.collect())
    };
    if let Err(err) = result {
        eprintln!("transparent_bench: {err:#}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------------------------
// The paths, and what the upstream answers (built the same in both processes).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Direct,
    Agentshd,
    Mitmproxy,
}

impl Way {
    const ALL: [Self; 3] = [Self::Direct, Self::Agentshd, Self::Mitmproxy];

    fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Agentshd => "agentshd",
            Self::Mitmproxy => "mitmproxy",
        }
    }

    fn parse(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|w| w.name() == name)
            .with_context(|| format!("no path {name:?}"))
    }
}

/// The small answer: an Anthropic message with text and a tool call the policy allows (the
/// interceptor parses it and the engine decides it).
fn small_answer() -> Vec<u8> {
    json!({
        "id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-bench",
        "content": [
            {"type": "text", "text": "I will read the file and then summarize what it does for you."},
            {"type": "tool_use", "id": "toolu_bench", "name": "mcp__fs__read_file",
             "input": {"path": "/home/dev/project/src/main.rs", "note": "x".repeat(600)}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 120, "output_tokens": 80}
    })
    .to_string()
    .into_bytes()
}

/// The bulk answer: an Anthropic SSE stream of text deltas past `BULK_BYTES`.
fn bulk_answer() -> Vec<u8> {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut body = String::with_capacity(BULK_BYTES + (1 << 20));
    body.push_str(&event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_bulk", "type": "message",
            "role": "assistant", "model": "claude-bench", "content": [], "stop_reason": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    ));
    body.push_str(&event(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ));
    let mut i = 0;
    while body.len() < BULK_BYTES {
        body.push_str(&event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": format!("word{i} and some more text to read ")}}),
        ));
        i += 1;
    }
    body.push_str(&event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    body.push_str(&event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": i}}),
    ));
    body.push_str(&event("message_stop", json!({"type": "message_stop"})));
    body.into_bytes()
}

// ---------------------------------------------------------------------------------------------
// The orchestrator: upstream, sink, agentshd, mitmproxy and the session's client.

struct Options {
    agentshd: PathBuf,
    agentshctl: PathBuf,
    mitmdump: PathBuf,
    /// Whether agentshd stores request and response bodies (the shipped default does).
    store_bodies: bool,
}

impl Options {
    fn parse(args: Vec<String>) -> Result<Self> {
        let me = std::env::current_exe().context("this program's own path")?;
        let release = me
            .parent()
            .and_then(Path::parent)
            .context("this program is not in a target directory")?;
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("the repository's root")?;
        let mut options = Self {
            agentshd: release.join("agentshd"),
            agentshctl: release.join("agentshctl"),
            mitmdump: repo.join("tests/peers/bench/.venv/bin/mitmdump"),
            store_bodies: true,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a path"));
            match arg.as_str() {
                "--agentshd" => options.agentshd = value()?.into(),
                "--agentshctl" => options.agentshctl = value()?.into(),
                "--mitmdump" => options.mitmdump = value()?.into(),
                "--no-bodies" => options.store_bodies = false,
                "-h" | "--help" => {
                    println!(
                        "usage: transparent_bench [--agentshd PATH] [--agentshctl PATH] [--mitmdump PATH] [--no-bodies]"
                    );
                    std::process::exit(0);
                }
                _ => bail!("unknown argument {arg}"),
            }
        }
        for (what, path) in [
            ("agentshd", &options.agentshd),
            ("agentshctl", &options.agentshctl),
        ] {
            ensure!(
                path.is_file(),
                "no {what} at {}: build it first (cargo build --release -p agentsh --bins) or pass --{what} PATH",
                path.display()
            );
        }
        ensure!(
            options.mitmdump.is_file(),
            "no mitmdump at {}: scripts/bench.sh installs it (make bench), or pass --mitmdump PATH",
            options.mitmdump.display()
        );
        Ok(options)
    }
}

fn orchestrate(args: Vec<String>) -> Result<()> {
    let options = Options::parse(args)?;
    if !nix::unistd::geteuid().is_root() {
        println!(
            "transparent_bench: skipped: attaching the kernel hooks and starting a session need root"
        );
        return Ok(());
    }
    let dir = tempfile::tempdir().context("a temp dir")?;
    let pki = Pki::new(dir.path())?;
    let _upstream = upstream::start(&pki)?;
    let key_file = dir.path().join("anthropic.key");
    std::fs::write(&key_file, REAL_KEY)?;
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600))?;
    let daemon = Agentshd::start(&options.agentshd, "", |_| {
        format!(
            "kernel: {{enforcement: required, listen: \"127.0.0.1:0\", listen6: off, intercept_loopback: [{INTERCEPTED}]}}\n\
             providers: {{anthropic: {{upstream: \"https://{HOST}:{TLS_PORT}\"}}}}\n\
             tls: {{extra_roots: [\"{}\"]}}\n\
             proxy: {{bodies: {{store: {}}}}}\n\
             secrets: {{ANTHROPIC_API_KEY: {{file: \"{}\"}}}}\n",
            pki.ca.display(),
            options.store_bodies,
            key_file.display()
        )
    })?;
    ensure!(
        daemon.ready.contains("kernel enforcement on"),
        "agentshd runs without kernel enforcement: {}",
        daemon.ready
    );
    let mitm = Mitmproxy::start(&options.mitmdump, dir.path(), &pki)?;
    let mut session = Session::start(&options, &daemon, &pki, &mitm, Secrets::Declined)?;
    let mut brokering = Session::start(&options, &daemon, &pki, &mitm, Secrets::Held)?;
    let results = measure(&mut session, &mut brokering);
    drop(session);
    drop(brokering);
    if results.is_err() {
        // What agentshd said last explains a failure.
        let log = daemon.log();
        let lines: Vec<&str> = log.lines().collect();
        for line in &lines[lines.len().saturating_sub(20)..] {
            eprintln!("transparent_bench: agentshd said: {line}");
        }
    }
    let mitm_version = mitm.version.clone();
    drop(mitm);
    print_report(&results?, &mitm_version, options.store_bodies);
    Ok(())
}

/// The test CA and the upstream's certificate (for `HOST` and both addresses).
struct Pki {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Pki {
    fn new(dir: &Path) -> Result<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "agentsh bench CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let mut params = CertificateParams::new(vec![
            HOST.to_owned(),
            INTERCEPTED.to_string(),
            DIRECT.to_string(),
        ])?;
        params.distinguished_name.push(DnType::CommonName, HOST);
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &issuer)?;
        let pki = Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("upstream.crt"),
            key: dir.join("upstream.key"),
        };
        std::fs::write(&pki.ca, issuer.pem())?;
        std::fs::write(&pki.cert, cert.pem())?;
        std::fs::write(&pki.key, key.serialize_pem())?;
        Ok(pki)
    }
}

/// mitmdump in reverse mode in front of the direct address, stopped on drop.
struct Mitmproxy {
    child: Child,
    port: u16,
    ca: PathBuf,
    version: String,
}

impl Mitmproxy {
    fn start(mitmdump: &Path, dir: &Path, pki: &Pki) -> Result<Self> {
        let version = Command::new(mitmdump)
            .arg("--version")
            .output()
            .context("mitmdump --version")?;
        let version = String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("mitmproxy")
            .replace("Mitmproxy: ", "mitmproxy ");
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port();
        let confdir = dir.join("mitmproxy");
        let log = std::fs::File::create(dir.join("mitmdump.log"))?;
        let child = Command::new(mitmdump)
            .arg("--mode")
            .arg(format!("reverse:https://{DIRECT}:{TLS_PORT}"))
            .args(["--listen-host", "127.0.0.1", "--listen-port"])
            .arg(port.to_string())
            .arg("--set")
            .arg(format!("confdir={}", confdir.display()))
            .arg("--set")
            .arg(format!(
                "ssl_verify_upstream_trusted_ca={}",
                pki.ca.display()
            ))
            // Its best: bodies streamed (not buffered whole), nothing printed per flow.
            .args(["--set", "stream_large_bodies=64k", "--set", "flow_detail=0"])
            .args(["--set", "termlog_verbosity=warn"])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {}", mitmdump.display()))?;
        let mitm = Self {
            child,
            port,
            ca: confdir.join("mitmproxy-ca-cert.pem"),
            version,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() || !mitm.ca.is_file() {
            ensure!(
                Instant::now() < deadline,
                "mitmdump did not listen on {port} in 30 s: {}",
                std::fs::read_to_string(dir.join("mitmdump.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(mitm)
    }
}

impl Drop for Mitmproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a session holds the daemon's brokered secret.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Secrets {
    /// `run --no-secrets`: nothing brokered, the key sent as the client has it.
    Declined,
    /// A placeholder in ANTHROPIC_API_KEY, the real key put in by agentshd.
    Held,
}

/// The bench's client in an `agentshctl run` session, driven by JSON lines on its stdin.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    replies: mpsc::Receiver<Result<Value>>,
}

impl Session {
    fn start(
        options: &Options,
        daemon: &Agentshd,
        pki: &Pki,
        mitm: &Mitmproxy,
        secrets: Secrets,
    ) -> Result<Self> {
        let me = std::env::current_exe()?;
        let mut command = Command::new(&options.agentshctl);
        command.arg("--socket").arg(daemon.socket()).arg("run");
        match secrets {
            Secrets::Declined => command.args(["--name", "transparent-bench", "--no-secrets"]),
            Secrets::Held => command.args(["--name", "transparent-bench-brokered"]),
        };
        let mut child = command
            // Whatever the caller holds is not the bench's key.
            .env_remove("ANTHROPIC_API_KEY")
            .arg("--")
            .arg(me)
            .arg("client")
            .arg(mitm.port.to_string())
            .arg(&pki.ca)
            .arg(&mitm.ca)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("agentshctl run")?;
        let stdout = child.stdout.take().context("the session's stdout")?;
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || read_replies(stdout, &tx));
        let session = Self {
            stdin: child.stdin.take(),
            child,
            replies,
        };
        let ready = session.reply(CLIENT_TIMEOUT)?;
        ensure!(ready["ready"] == true, "the session's client said {ready}");
        let key = ready["key"].as_str().unwrap_or_default();
        match secrets {
            Secrets::Declined => {
                ensure!(key == PLAIN_KEY, "a session without secrets holds {key:?}")
            }
            Secrets::Held => ensure!(
                key.starts_with("agentsh-placeholder-"),
                "the brokering session holds no placeholder but {key:?}"
            ),
        }
        Ok(session)
    }

    /// Sends `command` and waits for its reply.
    fn ask(&mut self, command: Value) -> Result<Value> {
        let stdin = self
            .stdin
            .as_mut()
            .context("the session's stdin is closed")?;
        writeln!(stdin, "{command}").context("write to the session's client")?;
        stdin.flush()?;
        let reply = self
            .reply(Duration::from_secs(300))
            .with_context(|| format!("{command}"))?;
        if let Some(error) = reply["error"].as_str() {
            bail!("the session's client failed {command}: {error}");
        }
        Ok(reply)
    }

    fn reply(&self, limit: Duration) -> Result<Value> {
        match self.replies.recv_timeout(limit) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) => bail!("no reply in {limit:?}"),
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the session's client exited"),
        }
    }
}

fn read_replies(stdout: ChildStdout, tx: &mpsc::Sender<Result<Value>>) {
    for line in BufReader::new(stdout).lines() {
        let reply = match line {
            // agentshctl's own lines, if any, are not the client's.
            Ok(line) if !line.starts_with('{') => continue,
            Ok(line) => serde_json::from_str(&line).context("a reply that is not JSON"),
            Err(err) => Err(err).context("read the session's stdout"),
        };
        if tx.send(reply).is_err() {
            return;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // EOF on its stdin ends the client, and so the session.
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// The measurements.

struct Results {
    /// connect() samples: outside sessions, hook passed, hook redirected.
    connect: [Vec<Duration>; 3],
    /// Keep-alive request latency per path (`Way::ALL` order).
    latency: [Vec<Duration>; 3],
    /// MB/s of the bulk stream per round, per path.
    bulk: [Vec<f64>; 3],
    /// Small requests per second, `RATE_CLIENTS` at once, per path.
    rate: [f64; 3],
    /// Full handshakes per second, `HANDSHAKE_CLIENTS` at once, per path.
    handshakes: [f64; 3],
    /// Connect to first byte on a port no target uses: server first (direct, agentshd), client
    /// first (direct, agentshd).
    first_byte: [Vec<Duration>; 4],
    /// Through agentshd, per request size (`BROKER_SIZES_KIB`): [no secrets, key brokered].
    brokered: Vec<[Vec<Duration>; 2]>,
}

fn measure(session: &mut Session, brokering: &mut Session) -> Result<Results> {
    let passed = SocketAddr::from((DIRECT, SINK_PORT));
    let redirected = SocketAddr::from((INTERCEPTED, SINK_PORT));
    let mut connect: [Vec<Duration>; 3] = Default::default();
    eprintln!("transparent_bench: connect()");
    for _ in 0..CONNECT_ROUNDS {
        connect[0].extend(connect_samples(passed, CONNECTS_PER_ROUND)?);
        for (i, addr) in [(1, passed), (2, redirected)] {
            let reply = session.ask(
                json!({"command": "connect", "addr": addr.to_string(), "n": CONNECTS_PER_ROUND}),
            )?;
            connect[i].extend(durations(&reply["ns"])?);
        }
    }

    eprintln!("transparent_bench: TLS request latency");
    let reply = session.ask(json!({"command": "latency", "n": LATENCY_REQUESTS}))?;
    let mut latency: [Vec<Duration>; 3] = Default::default();
    for (i, way) in Way::ALL.into_iter().enumerate() {
        latency[i] = durations(&reply["ns"][way.name()])?;
    }

    eprintln!("transparent_bench: throughput");
    let mut bulk: [Vec<f64>; 3] = Default::default();
    for _ in 0..BULK_ROUNDS {
        for (i, way) in Way::ALL.into_iter().enumerate() {
            let reply = session.ask(json!({"command": "bulk", "way": way.name()}))?;
            bulk[i].push(reply["bytes"].as_f64().unwrap_or(0.0) / 1e6 / seconds(&reply)?);
        }
    }
    let mut rate = [0.0; 3];
    let mut handshakes = [0.0; 3];
    for (i, way) in Way::ALL.into_iter().enumerate() {
        let reply = session.ask(json!({"command": "rate", "way": way.name(),
            "clients": RATE_CLIENTS, "seconds": RATE_SECONDS}))?;
        rate[i] = reply["count"].as_f64().unwrap_or(0.0) / seconds(&reply)?;
    }
    eprintln!("transparent_bench: handshakes");
    for (i, way) in Way::ALL.into_iter().enumerate() {
        let reply = session.ask(json!({"command": "handshakes", "way": way.name(),
            "clients": HANDSHAKE_CLIENTS, "seconds": RATE_SECONDS}))?;
        handshakes[i] = reply["count"].as_f64().unwrap_or(0.0) / seconds(&reply)?;
    }
    eprintln!("transparent_bench: first byte on other ports");
    let mut first_byte: [Vec<Duration>; 4] = Default::default();
    for _ in 0..FIRST_BYTE_ROUNDS {
        for (i, (ip, port, client_first)) in [
            (DIRECT, BANNER_PORT, false),
            (INTERCEPTED, BANNER_PORT, false),
            (DIRECT, ECHO_PORT, true),
            (INTERCEPTED, ECHO_PORT, true),
        ]
        .into_iter()
        .enumerate()
        {
            let reply = session.ask(json!({"command": "first_byte",
                "addr": SocketAddr::from((ip, port)).to_string(),
                "client_first": client_first, "n": FIRST_BYTES_PER_ROUND}))?;
            first_byte[i].extend(durations(&reply["ns"])?);
        }
    }
    eprintln!("transparent_bench: brokered secrets");
    let mut brokered = Vec::new();
    for kib in BROKER_SIZES_KIB {
        let mut samples: [Vec<Duration>; 2] = Default::default();
        for round in 0..BROKER_ROUNDS {
            // The sessions take turns, the first one alternating.
            for k in 0..2 {
                let at = (round + k) % 2;
                let who = if at == 0 {
                    &mut *session
                } else {
                    &mut *brokering
                };
                let reply = who.ask(json!({"command": "latency_way", "way": "agentshd",
                    "n": BROKER_REQUESTS, "warmup": BROKER_WARMUP, "pad_kib": kib}))?;
                samples[at].extend(durations(&reply["ns"])?);
            }
        }
        brokered.push(samples);
    }
    Ok(Results {
        connect,
        latency,
        bulk,
        rate,
        handshakes,
        first_byte,
        brokered,
    })
}

fn seconds(reply: &Value) -> Result<f64> {
    reply["seconds"]
        .as_f64()
        .filter(|s| *s > 0.0)
        .with_context(|| format!("no duration in {reply}"))
}

fn durations(ns: &Value) -> Result<Vec<Duration>> {
    ns.as_array()
        .with_context(|| format!("not a list of samples: {ns}"))?
        .iter()
        .map(|n| n.as_u64().map(Duration::from_nanos).context("a bad sample"))
        .collect()
}

/// How long each of `n` connect() calls to `addr` took (each connection reset at once).
fn connect_samples(addr: SocketAddr, n: usize) -> Result<Vec<Duration>> {
    // A reset leaves no TIME_WAIT on either side: with thousands of connects, a listener's
    // TIME_WAIT on a reused port answers a SYN with an ACK, and that connect waits a second.
    let reset = nix::sys::socket::sockopt::Linger;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    (0..n)
        .map(|_| {
            let start = Instant::now();
            let stream = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
            let took = start.elapsed();
            nix::sys::socket::setsockopt(&stream, reset, &linger).context("SO_LINGER")?;
            drop(stream);
            Ok(took)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The report.

fn print_report(results: &Results, mitm_version: &str, store_bodies: bool) {
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let bodies = if store_bodies { "stored" } else { "not stored" };
    println!(
        "Transparent proxy on loopback: kernel redirect + TLS termination + LLM interceptor (agentshd, bodies {bodies}), vs direct, vs {mitm_version} (reverse mode, streaming); {cpus} CPUs"
    );
    println!();
    println!(
        "connect() latency, µs ({} each)           p50      p99     max",
        CONNECT_ROUNDS * CONNECTS_PER_ROUND
    );
    let connect = results.connect.each_ref().map(|s| stats(s));
    for (label, s) in [
        "outside sessions (no hook runs)",
        "in a session, hook passes it",
        "in a session, redirected to agentshd",
    ]
    .iter()
    .zip(&connect)
    {
        println!("  {label:<38} {}", row(s));
    }
    println!(
        "  added by the hook: {:+.1} µs at p50; by the redirect: {:+.1} µs at p50, {:+.1} µs at p99 (goal: under 10 µs)",
        connect[1].p50 - connect[0].p50,
        connect[2].p50 - connect[0].p50,
        connect[2].p99 - connect[0].p99
    );
    println!();
    println!(
        "TLS request latency, keep-alive, 1 KiB message with a tool call, µs ({LATENCY_REQUESTS} each, paths interleaved)"
    );
    println!("                                           p50      p99     max");
    let latency = results.latency.each_ref().map(|s| stats(s));
    for (way, s) in Way::ALL.iter().zip(&latency) {
        println!("  {:<38} {}", way.name(), row(s));
    }
    println!(
        "  added at p99: agentshd {:+.0} µs (goal: under 1000 µs), mitmproxy {:+.0} µs",
        latency[1].p99 - latency[0].p99,
        latency[2].p99 - latency[0].p99
    );
    println!();
    let bulk = results.bulk.each_ref().map(|r| median(r));
    println!(
        "Throughput                                 direct    agentshd   mitmproxy   agentshd/mitmproxy"
    );
    println!(
        "  64 MiB SSE stream, MB/s (median of {BULK_ROUNDS})    {:>8.0}  {:>10.0}  {:>10.0}   {:>6.1}x (goal: 5x)",
        bulk[0],
        bulk[1],
        bulk[2],
        bulk[1] / bulk[2]
    );
    let rate = results.rate;
    println!(
        "  requests/s, {RATE_CLIENTS} clients               {:>8.0}  {:>10.0}  {:>10.0}   {:>6.1}x (goal: 5x)",
        rate[0],
        rate[1],
        rate[2],
        rate[1] / rate[2]
    );
    let hs = results.handshakes;
    println!(
        "  handshakes/s, {HANDSHAKE_CLIENTS} clients, warm cache    {:>8.0}  {:>10.0}  {:>10.0}   {:>6.1}x",
        hs[0],
        hs[1],
        hs[2],
        hs[1] / hs[2]
    );
    println!();
    println!(
        "Connect to first byte on a port no provider or declared server uses, µs ({} each)",
        FIRST_BYTE_ROUNDS * FIRST_BYTES_PER_ROUND
    );
    println!("                                           p50      p99     max");
    let first = results.first_byte.each_ref().map(|s| stats(s));
    for (label, s) in [
        "server speaks first, direct",
        "server speaks first, agentshd (spliced)",
        "client speaks first, direct",
        "client speaks first, agentshd (read)",
    ]
    .iter()
    .zip(&first)
    {
        println!("  {label:<38} {}", row(s));
    }
    println!(
        "  added at p50: server first {:+.0} µs, client first {:+.0} µs (the first side to speak decides)",
        first[1].p50 - first[0].p50,
        first[3].p50 - first[2].p50
    );
    println!();
    println!(
        "Brokered secrets: keep-alive requests through agentshd, µs ({} each, two sessions taking turns)",
        BROKER_ROUNDS * BROKER_REQUESTS
    );
    println!("                                           p50      p99     max");
    for (kib, samples) in BROKER_SIZES_KIB.iter().zip(&results.brokered) {
        let size = if *kib == 0 {
            "small request".to_owned()
        } else {
            format!("{kib} KiB conversation")
        };
        let s = samples.each_ref().map(|s| stats(s));
        println!("  {:<38} {}", format!("{size}, no secrets"), row(&s[0]));
        println!("  {:<38} {}", format!("{size}, key brokered"), row(&s[1]));
        println!(
            "    added by brokering: {:+.0} µs at p50, {:+.0} µs at p99",
            s[1].p50 - s[0].p50,
            s[1].p99 - s[0].p99
        );
    }
}

/// Connect, say something when the client speaks first, and wait for the first byte back.
fn first_byte_samples(addr: SocketAddr, client_first: bool, n: usize) -> Result<Vec<Duration>> {
    use std::io::Read;
    (0..n)
        .map(|_| {
            let start = Instant::now();
            let mut stream = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(READ_TIMEOUT))?;
            if client_first {
                stream.write_all(b"ping\n")?;
            }
            let mut byte = [0u8; 1];
            ensure!(
                stream.read(&mut byte)? == 1,
                "{addr}: closed before its first byte"
            );
            Ok(start.elapsed())
        })
        .collect()
}

fn row(s: &Stats) -> String {
    format!("{:>8.1} {:>8.1} {:>8.1}", s.p50, s.p99, s.max)
}

// ---------------------------------------------------------------------------------------------
// The fake provider: HTTPS (HTTP/1.1) on both addresses, on a runtime of its own.

mod upstream {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::task::{Context as TaskContext, Poll};

    use anyhow::{Context, Result};
    use bytes::Bytes;
    use http_body_util::{BodyExt, Either, Full};
    use hyper::body::{Body, Frame, Incoming};
    use hyper::service::service_fn;
    use hyper::{Request, Response};
    use hyper_util::rt::TokioIo;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::AsyncReadExt;

    use super::{
        BANNER_PORT, BULK_CHUNK, DIRECT, ECHO_PORT, INTERCEPTED, Pki, SINK_PORT, TLS_PORT,
        bulk_answer, small_answer,
    };

    struct Answers {
        small: Bytes,
        bulk: Arc<[Bytes]>,
    }

    /// A body of ready chunks, one frame each (the bulk stream, as a TLS record's worth).
    struct Chunks {
        chunks: Arc<[Bytes]>,
        next: usize,
    }

    impl Body for Chunks {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut TaskContext<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            let chunk = self.chunks.get(self.next).cloned();
            self.next += 1;
            Poll::Ready(chunk.map(|c| Ok(Frame::data(c))))
        }
    }

    /// The running upstream; it lives as long as the process (its thread never ends).
    pub struct Upstream;

    pub fn start(pki: &Pki) -> Result<Upstream> {
        let certs = CertificateDer::pem_file_iter(&pki.cert)?.collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_file(&pki.key)?;
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let bulk = bulk_answer();
        let answers = Arc::new(Answers {
            small: Bytes::from(small_answer()),
            bulk: pieces(Bytes::from(bulk), BULK_CHUNK),
        });
        let mut listeners = Vec::new();
        for ip in [INTERCEPTED, DIRECT] {
            let listener = std::net::TcpListener::bind((ip, TLS_PORT))
                .with_context(|| format!("bind {ip}:{TLS_PORT} (a previous run still up?)"))?;
            listener.set_nonblocking(true)?;
            listeners.push(listener);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        for ip in [INTERCEPTED, DIRECT] {
            let drained = runtime
                .block_on(async { sink(SocketAddr::from((ip, SINK_PORT))) })
                .with_context(|| format!("bind {ip}:{SINK_PORT} (a previous run still up?)"))?;
            runtime.spawn(drain(drained));
            for (port, banner) in [(BANNER_PORT, true), (ECHO_PORT, false)] {
                let listener = runtime
                    .block_on(async { sink(SocketAddr::from((ip, port))) })
                    .with_context(|| format!("bind {ip}:{port} (a previous run still up?)"))?;
                runtime.spawn(echo(listener, banner));
            }
        }
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let mut tasks = Vec::new();
                for listener in listeners {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        continue;
                    };
                    tasks.push(tokio::spawn(serve(
                        listener,
                        acceptor.clone(),
                        Arc::clone(&answers),
                    )));
                }
                for task in tasks {
                    let _ = task.await;
                }
            });
        });
        Ok(Upstream)
    }

    /// A listener for the connect() measurement, with a backlog deep enough that a burst of
    /// connects never waits for its accept loop (a full queue drops the SYN: a second lost).
    fn sink(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(4096)
    }

    /// Echoes what each connection says, after a banner when `banner` (a server that speaks
    /// first, as SMTP or a database does).
    async fn echo(listener: tokio::net::TcpListener, banner: bool) {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                if banner && tcp.write_all(b"220 bench\r\n").await.is_err() {
                    return;
                }
                let mut buf = [0u8; 1024];
                while let Ok(n) = tcp.read(&mut buf).await {
                    if n == 0 || tcp.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    }

    /// Accepts connections and holds each until its peer goes, so the peer closes first.
    async fn drain(listener: tokio::net::TcpListener) {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut byte = [0; 1];
                let _ = tcp.read(&mut byte).await;
            });
        }
    }

    async fn serve(
        listener: tokio::net::TcpListener,
        acceptor: tokio_rustls::TlsAcceptor,
        answers: Arc<Answers>,
    ) {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let acceptor = acceptor.clone();
            let answers = Arc::clone(&answers);
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request| respond(request, Arc::clone(&answers)));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    }

    async fn respond(
        request: Request<Incoming>,
        answers: Arc<Answers>,
    ) -> Result<Response<Either<Full<Bytes>, Chunks>>, Infallible> {
        let bulk = request
            .headers()
            .get("x-bench-shape")
            .is_some_and(|v| v == "bulk");
        // The sessions' key, or the real one agentshd put in for a placeholder: nothing else.
        let key = request.headers().get("x-api-key").cloned();
        if !key.is_some_and(|k| k == super::PLAIN_KEY || k == super::REAL_KEY) {
            let response =
                Response::builder()
                    .status(401)
                    .body(Either::Left(Full::new(Bytes::from_static(
                        b"not the bench's key (a placeholder not brokered?)",
                    ))));
            return Ok(
                response.unwrap_or_else(|_| Response::new(Either::Left(Full::new(Bytes::new()))))
            );
        }
        // The request is read whole, as a provider does.
        let _ = request.into_body().collect().await;
        let response = if bulk {
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Either::Right(Chunks {
                    chunks: Arc::clone(&answers.bulk),
                    next: 0,
                }))
        } else {
            Response::builder()
                .header("content-type", "application/json")
                .body(Either::Left(Full::new(answers.small.clone())))
        };
        Ok(response.unwrap_or_else(|_| Response::new(Either::Left(Full::new(Bytes::new())))))
    }

    /// `bytes` in pieces of `size` (the last one shorter), sharing one buffer.
    fn pieces(bytes: Bytes, size: usize) -> Arc<[Bytes]> {
        (0..bytes.len())
            .step_by(size)
            .map(|at| bytes.slice(at..(at + size).min(bytes.len())))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The client, in the session: blocking HTTP/1.1 over rustls, the same code on every path.

mod client {
    use std::io::{BufRead, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, bail, ensure};
    use rustls::client::Resumption;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
    use serde_json::{Value, json};

    use super::{
        DIRECT, HOST, INTERCEPTED, READ_TIMEOUT, TLS_PORT, WARMUP, Way, bulk_answer,
        connect_samples, first_byte_samples, read_response, small_answer,
    };
    use crate::support::http::Response;

    /// `client MITM_PORT ROOTS...`: answers the orchestrator's commands, a JSON line each.
    pub fn serve(args: Vec<String>) -> Result<()> {
        let (port, roots) = args
            .split_first()
            .context("usage: transparent_bench client MITM_PORT ROOTS...")?;
        let mitm_port: u16 = port.parse().context("MITM_PORT")?;
        let mut roots: Vec<PathBuf> = roots.iter().map(PathBuf::from).collect();
        // The session's bundle (its CA among the system roots), as `agentshctl run` set it.
        let bundle = std::env::var_os("SSL_CERT_FILE").context(
            "no SSL_CERT_FILE: not in an agentshctl run session with kernel enforcement",
        )?;
        roots.push(bundle.into());
        // A brokering session's placeholder, or the key every other session sends.
        let key = std::env::var("ANTHROPIC_API_KEY").unwrap_or_else(|_| super::PLAIN_KEY.into());
        let client = Client {
            tls: tls_config(&roots)?,
            mitm_port,
            small: small_answer(),
            bulk_len: bulk_answer().len(),
            key,
        };
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", json!({"ready": true, "key": client.key}))?;
        out.flush()?;
        for line in std::io::stdin().lock().lines() {
            let line = line.context("read a command")?;
            let reply = serde_json::from_str(&line)
                .context("a command that is not JSON")
                .and_then(|command| client.run(&command))
                .unwrap_or_else(|err| json!({"error": format!("{err:#}")}));
            writeln!(out, "{reply}")?;
            out.flush()?;
        }
        Ok(())
    }

    fn tls_config(roots: &[PathBuf]) -> Result<Arc<ClientConfig>> {
        let mut store = RootCertStore::empty();
        for path in roots {
            let certs = CertificateDer::pem_file_iter(path)
                .with_context(|| format!("read {}", path.display()))?
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("parse {}", path.display()))?;
            let (added, _) = store.add_parsable_certificates(certs);
            ensure!(added > 0, "no certificate in {}", path.display());
        }
        let mut config = ClientConfig::builder()
            .with_root_certificates(store)
            .with_no_client_auth();
        // Every new connection pays a full handshake, on every path alike.
        config.resumption = Resumption::disabled();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    struct Client {
        tls: Arc<ClientConfig>,
        mitm_port: u16,
        small: Vec<u8>,
        bulk_len: usize,
        /// What goes in `x-api-key`.
        key: String,
    }

    impl Client {
        fn addr(&self, way: Way) -> SocketAddr {
            match way {
                Way::Direct => SocketAddr::from((DIRECT, TLS_PORT)),
                // The provider's real address: the kernel sends it to agentshd.
                Way::Agentshd => SocketAddr::from((INTERCEPTED, TLS_PORT)),
                Way::Mitmproxy => SocketAddr::from(([127, 0, 0, 1], self.mitm_port)),
            }
        }

        fn run(&self, command: &Value) -> Result<Value> {
            let way = || Way::parse(command["way"].as_str().unwrap_or_default());
            let number = |key: &str| {
                command[key]
                    .as_u64()
                    .map(|n| n as usize)
                    .with_context(|| format!("no {key} in {command}"))
            };
            match command["command"].as_str().unwrap_or_default() {
                "connect" => {
                    let addr: SocketAddr = command["addr"]
                        .as_str()
                        .unwrap_or_default()
                        .parse()
                        .context("addr")?;
                    let samples = connect_samples(addr, number("n")?)?;
                    Ok(json!({"ns": nanos(&samples)}))
                }
                "first_byte" => {
                    let addr: SocketAddr = command["addr"]
                        .as_str()
                        .unwrap_or_default()
                        .parse()
                        .context("addr")?;
                    let client_first = command["client_first"].as_bool().unwrap_or(false);
                    let samples = first_byte_samples(addr, client_first, number("n")?)?;
                    Ok(json!({"ns": nanos(&samples)}))
                }
                "latency" => self.latency(number("n")?),
                "latency_way" => {
                    self.latency_way(way()?, number("n")?, number("warmup")?, number("pad_kib")?)
                }
                "bulk" => self.bulk(way()?),
                "rate" => self.rate(way()?, number("clients")?, seconds(command)?),
                "handshakes" => self.handshakes(way()?, number("clients")?, seconds(command)?),
                other => bail!("unknown command {other:?}"),
            }
        }

        fn connect(&self, way: Way) -> Result<Connection> {
            Connection::open(self.addr(way), &self.tls, &self.key)
                .with_context(|| format!("a TLS connection {}", way.name()))
        }

        /// Small answers to requests carrying `pad_kib` KiB more of conversation, on one new
        /// keep-alive connection; the first `warmup` not counted.
        fn latency_way(&self, way: Way, n: usize, warmup: usize, pad_kib: usize) -> Result<Value> {
            let mut connection = self.connect(way)?;
            let body = super::request_body_padded(false, pad_kib << 10);
            let mut samples = Vec::with_capacity(n);
            for i in 0..n + warmup {
                let start = Instant::now();
                let (status, response) = connection.send(&body, "small", true)?;
                let took = start.elapsed();
                ensure!(
                    status == 200 && response.body == self.small,
                    "{}: status {status}: {}",
                    way.name(),
                    String::from_utf8_lossy(&response.body)
                );
                if i >= warmup {
                    samples.push(took);
                }
            }
            Ok(json!({"ns": nanos(&samples)}))
        }

        /// Small requests on one keep-alive connection per path, the paths taking turns.
        fn latency(&self, n: usize) -> Result<Value> {
            let mut connections = Way::ALL
                .iter()
                .map(|&way| self.connect(way))
                .collect::<Result<Vec<_>>>()?;
            let mut samples = vec![Vec::with_capacity(n); Way::ALL.len()];
            for i in 0..n + WARMUP {
                for (at, way) in Way::ALL.into_iter().enumerate() {
                    let start = Instant::now();
                    let body = connections[at].exchange().context(way.name())?;
                    let took = start.elapsed();
                    ensure!(
                        body == self.small,
                        "{}: the body differs from the upstream's: {}",
                        way.name(),
                        String::from_utf8_lossy(&body)
                    );
                    if i >= WARMUP {
                        samples[at].push(took);
                    }
                }
            }
            let mut ns = serde_json::Map::new();
            for (way, samples) in Way::ALL.iter().zip(&samples) {
                ns.insert(way.name().to_owned(), nanos(samples));
            }
            Ok(json!({"ns": ns}))
        }

        /// The bulk stream once, on a new connection.
        fn bulk(&self, way: Way) -> Result<Value> {
            let mut connection = self.connect(way)?;
            let start = Instant::now();
            let len = connection.bulk()?;
            let seconds = start.elapsed().as_secs_f64();
            ensure!(
                len == self.bulk_len,
                "{}: read {len} bytes of a {} byte stream",
                way.name(),
                self.bulk_len
            );
            Ok(json!({"bytes": len, "seconds": seconds}))
        }

        /// Small requests from `clients` keep-alive connections at once, for `seconds`.
        fn rate(&self, way: Way, clients: usize, seconds: f64) -> Result<Value> {
            self.concurrently(clients, seconds, |stop, count| {
                let mut connection = self.connect(way)?;
                while !stop.load(Ordering::Relaxed) {
                    let body = connection.exchange()?;
                    ensure!(body == self.small, "{}: a different body", way.name());
                    count.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        }

        /// New connections and full handshakes from `clients` at once, for `seconds`.
        fn handshakes(&self, way: Way, clients: usize, seconds: f64) -> Result<Value> {
            self.concurrently(clients, seconds, |stop, count| {
                while !stop.load(Ordering::Relaxed) {
                    self.connect(way)?.close();
                    count.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        }

        fn concurrently(
            &self,
            clients: usize,
            seconds: f64,
            work: impl Fn(&AtomicBool, &AtomicU64) -> Result<()> + Sync,
        ) -> Result<Value> {
            let stop = AtomicBool::new(false);
            let count = AtomicU64::new(0);
            let start = Instant::now();
            let results = std::thread::scope(|scope| {
                let workers: Vec<_> = (0..clients)
                    .map(|_| scope.spawn(|| work(&stop, &count)))
                    .collect();
                std::thread::sleep(Duration::from_secs_f64(seconds));
                stop.store(true, Ordering::Relaxed);
                workers
                    .into_iter()
                    .map(|w| w.join().unwrap_or_else(|_| bail!("a client panicked")))
                    .collect::<Vec<_>>()
            });
            let elapsed = start.elapsed().as_secs_f64();
            results.into_iter().collect::<Result<()>>()?;
            Ok(json!({"count": count.load(Ordering::Relaxed), "seconds": elapsed}))
        }
    }

    fn seconds(command: &Value) -> Result<f64> {
        command["seconds"]
            .as_f64()
            .with_context(|| format!("no seconds in {command}"))
    }

    fn nanos(samples: &[Duration]) -> Value {
        samples
            .iter()
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .collect()
    }

    struct Connection {
        tls: StreamOwned<ClientConnection, TcpStream>,
        buf: Vec<u8>,
        key: String,
    }

    impl Connection {
        /// A TCP connection to `addr` and a completed TLS handshake for `HOST`.
        fn open(addr: SocketAddr, config: &Arc<ClientConfig>, key: &str) -> Result<Self> {
            let mut tcp = TcpStream::connect_timeout(&addr, READ_TIMEOUT)
                .with_context(|| format!("connect {addr}"))?;
            tcp.set_nodelay(true)?;
            tcp.set_read_timeout(Some(READ_TIMEOUT))?;
            tcp.set_write_timeout(Some(READ_TIMEOUT))?;
            let name = ServerName::try_from(HOST)?;
            let mut tls = ClientConnection::new(Arc::clone(config), name)?;
            while tls.is_handshaking() {
                tls.complete_io(&mut tcp).context("the TLS handshake")?;
            }
            Ok(Self {
                tls: StreamOwned::new(tls, tcp),
                buf: vec![0; 256 << 10],
                key: key.to_owned(),
            })
        }

        /// A small request; its body as read.
        fn exchange(&mut self) -> Result<Vec<u8>> {
            let (status, response) = self.request("small", true)?;
            ensure!(
                status == 200,
                "status {status}: {}",
                String::from_utf8_lossy(&response.body)
            );
            Ok(response.body)
        }

        /// The bulk stream; its length as read.
        fn bulk(&mut self) -> Result<usize> {
            let (status, response) = self.request("bulk", false)?;
            ensure!(status == 200, "status {status}");
            Ok(response.body_len)
        }

        /// One request for the answer of `shape`; the body is kept when `keep`.
        fn request(&mut self, shape: &str, keep: bool) -> Result<(u16, Response)> {
            let body = super::request_body(shape == "bulk");
            self.send(&body, shape, keep)
        }

        fn send(&mut self, body: &str, shape: &str, keep: bool) -> Result<(u16, Response)> {
            let request = format!(
                "POST /v1/messages HTTP/1.1\r\nhost: {HOST}\r\ncontent-type: application/json\r\n\
                 x-api-key: {}\r\nanthropic-version: 2023-06-01\r\nx-bench-shape: {shape}\r\n\
                 content-length: {}\r\n\r\n{body}",
                self.key,
                body.len()
            );
            let sent = Instant::now();
            self.tls
                .write_all(request.as_bytes())
                .context("send a request")?;
            read_response(&mut self.tls, &mut self.buf, sent, keep)
        }

        fn close(mut self) {
            self.tls.conn.send_close_notify();
            let _ = self.tls.conn.complete_io(&mut self.tls.sock);
        }
    }
}

/// The request every path sends (a streamed one for the bulk answer, as SDKs do).
fn request_body(stream: bool) -> String {
    request_body_padded(stream, 0)
}

/// The request with about `pad` bytes of earlier conversation before the question (a file
/// the agent read, in a tool result).
fn request_body_padded(stream: bool, pad: usize) -> String {
    let mut messages = Vec::new();
    if pad > 0 {
        let mut file = String::with_capacity(pad + 64);
        for i in 0.. {
            if file.len() >= pad {
                break;
            }
            file.push_str(&support::upstream::words(i));
        }
        file.truncate(pad);
        messages.push(json!({"role": "user", "content": "Read src/lib.rs."}));
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use",
            "id": "toolu_read", "name": "mcp__fs__read_file", "input": {"path": "src/lib.rs"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": "toolu_read", "content": file}]}));
    }
    messages.push(json!({"role": "user", "content": "Read src/main.rs and summarize it."}));
    json!({"model": "claude-bench", "max_tokens": 1024, "stream": stream, "messages": messages})
        .to_string()
}
