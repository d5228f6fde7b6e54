//! Shim benchmark: messages/s and per-message latency through agentsh-shim against a direct
//! pipe to the same server, in the same run.
//!
//!   shim_bench [--shim PATH] [--policy FILE] [--messages N] [--pings N]
//!   shim_bench --echo-server        (the server both paths talk to)
//!
//! Throughput: N tools/call requests written back to back while responses are read.
//! Latency: one request at a time, round trip measured; "added" is shim minus direct.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--echo-server") {
        echo_server();
        return;
    }
    if args.iter().any(|a| a == "--copy-relay") {
        copy_relay();
        return;
    }
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let root = agentsh_tests::repo_root();
    let shim = opt("--shim")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/release/agentsh-shim"));
    let policy = opt("--policy")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("policies/default.yaml"));
    let messages: usize = opt("--messages")
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let pings: usize = opt("--pings")
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let me = std::env::current_exe().expect("own path");

    let direct = || {
        let mut cmd = Command::new(&me);
        cmd.arg("--echo-server");
        cmd
    };
    // A process that copies bytes both ways and inspects nothing: what any extra process hop
    // costs on this machine, so the shim's own share can be read off.
    let through_relay = || {
        let mut cmd = Command::new(&me);
        cmd.arg("--copy-relay");
        cmd
    };
    let through_shim = || {
        let mut cmd = Command::new(&shim);
        cmd.arg("--policy")
            .arg(&policy)
            .args(["--server-id", "bench", "--"])
            .arg(&me)
            .arg("--echo-server");
        cmd
    };

    println!(
        "shim benchmark: {messages} pipelined tools/call, {pings} ping-pongs; policy {}",
        policy.display()
    );
    let direct_rate = throughput(direct(), messages);
    let shim_rate = throughput(through_shim(), messages);
    println!(
        "throughput   direct {:>10.0} msg/s   shim {:>10.0} msg/s   ({:.1}% of direct)",
        direct_rate,
        shim_rate,
        100.0 * shim_rate / direct_rate
    );

    // On a VM, a process that blocks lets its vCPU idle, and waking it costs tens of µs: the
    // shim adds two process hops per round trip, so it pays that twice. Measured both ways.
    for awake in [false, true] {
        let spinner = awake.then(|| {
            Command::new("nice")
                .args(["-n", "19", "sh", "-c", "while :; do :; done"])
                .spawn()
                .expect("start the busy process")
        });
        let rtts = latency([direct(), through_relay(), through_shim()], pings);
        if let Some(mut spinner) = spinner {
            let _ = spinner.kill();
            let _ = spinner.wait();
        }
        println!(
            "round trip, {}",
            if awake {
                "CPUs kept awake by a nice-19 busy loop (as on a loaded runner)"
            } else {
                "idle machine (each process hop may wake an idle vCPU)"
            }
        );
        println!(
            "             {:>10} {:>9} {:>9} {:>9}",
            "", "p50", "p90", "p99"
        );
        for (name, rtt) in ["direct", "copy relay", "shim"].iter().zip(&rtts) {
            println!(
                "             {:>10} {:>7.1}µs {:>7.1}µs {:>7.1}µs",
                name,
                pct(rtt, 50.0),
                pct(rtt, 90.0),
                pct(rtt, 99.0)
            );
        }
        let [direct_rtt, relay_rtt, shim_rtt] = &rtts;
        println!(
            "             added by the shim vs direct: p50 {:.1}µs  p99 {:.1}µs;  vs the copy relay: p50 {:.1}µs  p99 {:.1}µs",
            pct(shim_rtt, 50.0) - pct(direct_rtt, 50.0),
            pct(shim_rtt, 99.0) - pct(direct_rtt, 99.0),
            pct(shim_rtt, 50.0) - pct(relay_rtt, 50.0),
            pct(shim_rtt, 99.0) - pct(relay_rtt, 99.0),
        );
    }
}

fn request(id: usize) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_text_file","arguments":{{"path":"/home/dev/project/src/main.rs"}}}}}}"#
    )
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

fn throughput(cmd: Command, n: usize) -> f64 {
    let mut child = spawn(cmd);
    let stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let start = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut w = BufWriter::with_capacity(1 << 16, stdin);
        for id in 0..n {
            writeln!(w, "{}", request(id)).expect("write");
        }
        w.flush().expect("flush");
    });
    let mut line = String::new();
    for _ in 0..n {
        line.clear();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "server closed early"
        );
        assert!(line.contains("\"result\""), "not a result: {line}");
    }
    let elapsed = start.elapsed();
    writer.join().expect("writer");
    finish(child);
    n as f64 / elapsed.as_secs_f64()
}

/// Round trips of one request at a time, alternating between the paths so that all see the
/// same machine conditions (this matters on small, shared VMs).
fn latency<const N: usize>(cmds: [Command; N], n: usize) -> [Vec<Duration>; N] {
    let mut paths = cmds.map(Pinger::new);
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(n));
    // A warm-up so page faults and lazy initialisation stay out of the samples.
    for id in 0..n + 1000 {
        for (path, out) in paths.iter_mut().zip(samples.iter_mut()) {
            let rtt = path.ping(id);
            if id >= 1000 {
                out.push(rtt);
            }
        }
    }
    for Pinger { child, stdin, .. } in paths {
        drop(stdin);
        finish(child);
    }
    for s in &mut samples {
        s.sort();
    }
    samples
}

struct Pinger {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    line: String,
}

impl Pinger {
    fn new(cmd: Command) -> Self {
        let mut child = spawn(cmd);
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    fn ping(&mut self, id: usize) -> Duration {
        let msg = format!("{}\n", request(id));
        let start = Instant::now();
        self.stdin.write_all(msg.as_bytes()).expect("write");
        self.stdin.flush().expect("flush");
        self.line.clear();
        assert!(
            self.stdout.read_line(&mut self.line).expect("read") > 0,
            "server closed early"
        );
        start.elapsed()
    }
}

fn finish(mut child: Child) {
    drop(child.stdin.take());
    let _ = agentsh_tests::wait_bounded(&mut child, Duration::from_secs(30));
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p / 100.0).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Answers every request line with a small tools/call result carrying its id.
fn echo_server() {
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let mut reader = BufReader::with_capacity(1 << 16, stdin);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some(start) = line.find("\"id\":") else {
            continue;
        };
        let rest = &line[start + 5..];
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        let id = &rest[..end];
        let _ = writeln!(
            out,
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"fn main() {{ println!(\"hello\"); }}"}}]}}}}"#
        );
        // Flush when nothing more is waiting, so pipelined input is answered in batches.
        if reader.buffer().is_empty() {
            let _ = out.flush();
        }
    }
    let _ = out.flush();
}

/// Copies stdin to an echo server and its stdout back, one thread per direction, inspecting
/// nothing.
fn copy_relay() {
    use std::io::Read;
    let me = std::env::current_exe().expect("own path");
    let mut child = Command::new(me)
        .arg("--echo-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("echo server");
    let mut to_server = child.stdin.take().expect("stdin");
    let mut from_server = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut input = std::io::stdin().lock();
        while let Ok(n) = input.read(&mut buf) {
            if n == 0 || to_server.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 1 << 16];
    let mut out = std::io::stdout().lock();
    while let Ok(n) = from_server.read(&mut buf) {
        if n == 0 || out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    let _ = child.wait();
}
