//! A prompt-injected agent, running as an unprivileged user inside a session, turns on agentshd
//! and on the other sessions: it must not take another identity, starve the control socket for
//! others, or reach another session's processes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use agentsh_tests::daemon::{Daemon, skip_unless_root};
use serde_json::Value;

/// The unprivileged user the hostile sessions run as.
const NOBODY: &str = "65534";

/// A daemon whose socket (and directory) an unprivileged session can reach.
fn daemon_for_nobody(dir: &Path) -> Daemon {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    Daemon::start(dir, "")
}

/// `agentshctl run --name NAME -- python3 -c SCRIPT SOCKET ARGS...` as nobody, started in the
/// background.
fn python_session(daemon: &Daemon, name: &str, script: &str, args: &[&str]) -> std::process::Child {
    let mut cmd = std::process::Command::new(agentsh_tests::bin("agentshctl"));
    cmd.arg("--socket")
        .arg(&daemon.socket)
        .args(["run", "--name", name, "--", "python3", "-c", script])
        .arg(&daemon.socket)
        .args(args)
        .env("SUDO_UID", NOBODY)
        .env("SUDO_GID", NOBODY)
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.spawn().expect("start agentshctl run")
}

/// Waits (bounded) until a hogging session has made `ready`: it holds what it could take.
fn wait_until_ready(ready: &Path) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "the hog never got ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn finish(child: std::process::Child, what: &str) -> (String, String) {
    let out = child.wait_with_output().expect("wait for the session");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// The last line of a script's output, as JSON.
fn result(stdout: &str) -> Value {
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

const CONNECT_AND_EXIT: &str = r#"
import json, os, socket, sys
path, tries = sys.argv[1], int(sys.argv[2])
roles = {}
for _ in range(tries):
    s = socket.socket(socket.AF_UNIX)
    child = os.fork()
    if child == 0:
        try:
            s.connect(path)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    try:
        s.sendall(b'{"v":1,"id":1,"op":"hello","args":{}}\n')
        answer = json.loads(s.makefile().readline() or "{}")
    except OSError:
        answer = {}
    s.close()
    if "ok" in answer:
        key = answer["ok"]["role"] + ":" + str(answer["ok"].get("session"))
    else:
        key = "refused"
    roles[key] = roles.get(key, 0) + 1
print(json.dumps(roles))
"#;

/// B4: a child connects and exits at once; its parent, still in the session, speaks on the
/// socket. agentshd either identified the child while it lived (the session's role) or refuses
/// the connection: never `user` or `admin` because the child's /proc entry was gone.
#[test]
fn a_peer_that_connects_and_exits_is_never_taken_for_another_identity() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon_for_nobody(dir.path());
    let child = python_session(&daemon, "racer", CONNECT_AND_EXIT, &["400"]);
    let (stdout, _) = finish(child, "the racing session");
    let session = daemon.session_id("racer");
    let roles = result(&stdout);
    let roles = roles.as_object().unwrap();
    let allowed = [format!("session:{session}"), "refused".to_owned()];
    let wrong: Vec<_> = roles.iter().filter(|(k, _)| !allowed.contains(k)).collect();
    assert!(
        wrong.is_empty(),
        "a connection was taken for another identity: {roles:?}"
    );
    eprintln!("connect-and-exit: {roles:?}");
}

const HOG: &str = r#"
import json, os, socket, sys, time
path, ready, done = sys.argv[1], sys.argv[2], sys.argv[3]
def answer(s, wait):
    s.settimeout(wait)
    try:
        line = s.makefile().readline()
    except (OSError, ValueError):
        return None
    return json.loads(line) if line else None
# Unterminated 60 MB lines: agentshd holds them until the line ends.
floods, flood_refused = [], 0
for _ in range(4):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    try:
        s.sendall(b'{"v":1,"id":1,"op":"hello","args":{"pad":"' + b"x" * (60 << 20))
    except OSError:
        pass
    got = answer(s, 2)
    if got and "error" in got:
        flood_refused += 1
        s.close()
    else:
        floods.append(s)
# Idle connections, as many as it can.
idle, idle_refused, reasons = [], 0, set()
for _ in range(400):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    idle.append(s)
time.sleep(1)
for s in idle:
    got = answer(s, 0.05)
    if got and "error" in got:
        idle_refused += 1
        reasons.add(got["error"]["message"])
print(json.dumps({"flood_refused": flood_refused, "idle_refused": idle_refused,
                  "reasons": sorted(reasons)}), flush=True)
open(ready, "w").close()
while not os.path.exists(done):
    time.sleep(0.1)
"#;

const HELLO: &str = r#"
import json, socket, sys, time
path = sys.argv[1]
times = []
for _ in range(50):
    start = time.monotonic()
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(b'{"v":1,"id":1,"op":"hello","args":{}}\n')
    answer = json.loads(s.makefile().readline())
    assert answer["ok"]["role"] == "session", answer
    s.close()
    times.append(time.monotonic() - start)
times.sort()
print(json.dumps({"median_ms": times[len(times) // 2] * 1000, "max_ms": times[-1] * 1000}))
"#;

/// D3: one session holds as many control connections as it can and floods unterminated lines;
/// it meets its own limits (each reported once) and another session does not notice.
#[test]
fn one_session_cannot_starve_the_control_socket() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon_for_nobody(dir.path());
    let (ready, done) = (dir.path().join("ready"), dir.path().join("done"));
    let baseline = python_session(&daemon, "calm-before", HELLO, &[]);
    let (before, _) = finish(baseline, "the session before the flood");

    let hog = python_session(
        &daemon,
        "hog",
        HOG,
        &[ready.to_str().unwrap(), done.to_str().unwrap()],
    );
    wait_until_ready(&ready);
    let rss = agentsh_tests::proc_status_kib(daemon.pid(), "VmRSS");
    let other = python_session(&daemon, "calm", HELLO, &[]);
    let (during, _) = finish(other, "the other session");
    std::fs::write(&done, "").unwrap();
    let (hog_out, _) = finish(hog, "the hog");

    let hog_result = result(&hog_out);
    // Two 60 MB lines fit the session's 128 MiB in flight; the others are refused.
    assert_eq!(hog_result["flood_refused"], 2, "{hog_result}");
    // 256 connections per session: the two held floods and 254 idle ones.
    assert_eq!(hog_result["idle_refused"], 400 - 254, "{hog_result}");
    let hog_id = daemon.session_id("hog");
    let events = daemon.json_lines(&["mcp", "events", "--session", &hog_id, "--json"]);
    let limits: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "limit_reached")
        .filter_map(|e| e["details"]["limit"].as_str())
        .collect();
    assert_eq!(
        limits,
        ["control request bytes in flight", "control connections"],
        "one event per episode of each limit: {events:?}"
    );
    eprintln!(
        "control socket: hello before the flood {}, during it {} (another session); agentshd RSS during the flood {} MiB",
        before.trim(),
        during.trim(),
        rss / 1024
    );
}

const VICTIM: &str = r#"
import os, sys, time
pid_file, done = sys.argv[2], sys.argv[3]
secret = "victim-secret-" + "7" * 16
with open(pid_file + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(pid_file + ".tmp", pid_file)
while not os.path.exists(done):
    time.sleep(0.1)
print(secret[:6])
"#;

const INTRUDER: &str = r#"
import ctypes, json, os, signal, sys, time
pid_file = sys.argv[2]
while not os.path.exists(pid_file):
    time.sleep(0.05)
victim = int(open(pid_file).read())
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
SYS_pidfd_open, SYS_pidfd_getfd = 434, 438
def errno_of(result):
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())
def try_ptrace(pid):
    result = errno_of(libc.ptrace(PTRACE_ATTACH, pid, None, None))
    if result == "ok":
        os.waitpid(pid, 0)
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    return result
def try_getfd(pid):
    pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
    if pidfd < 0:
        return "pidfd_open: " + errno_of(pidfd)
    result = errno_of(libc.syscall(SYS_pidfd_getfd, pidfd, 0, 0))
    os.close(pidfd)
    return result
def try_read(path):
    try:
        with open(path, "rb") as f:
            f.read(64)
        return "ok"
    except OSError as e:
        return os.strerror(e.errno)
def try_signal(pid, sig):
    try:
        os.kill(pid, sig)
        return "ok"
    except OSError as e:
        return os.strerror(e.errno)
# The same attempts on a process of this very session: they work, so a refusal above is the
# isolation's, not a lack of means.
own = os.fork()
if own == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(0.2)
result = {
    "other": {
        "ptrace": try_ptrace(victim),
        "pidfd_getfd": try_getfd(victim),
        "mem": try_read(f"/proc/{victim}/mem"),
        "environ": try_read(f"/proc/{victim}/environ"),
        "signal": try_signal(victim, signal.SIGCONT),
    },
    "own": {
        "ptrace": try_ptrace(own),
        "pidfd_getfd": try_getfd(own),
        "environ": try_read(f"/proc/{own}/environ"),
        "signal": try_signal(own, signal.SIGCONT),
    },
}
os.kill(own, signal.SIGKILL)
os.waitpid(own, 0)
print(json.dumps(result))
"#;

/// B5: two sessions of the same unprivileged user. One cannot ptrace the other's process,
/// take its descriptors, read its memory or environment, or signal it; within a session all of
/// that still works.
#[test]
fn one_session_cannot_reach_into_another_of_the_same_user() {
    if skip_unless_root() {
        return;
    }
    if let agentsh::session::isolation::Isolation::Unavailable(why) =
        agentsh::session::isolation::available()
    {
        eprintln!("skipped: no Landlock here ({why})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon_for_nobody(dir.path());
    let (pid_file, done) = (dir.path().join("victim.pid"), dir.path().join("done"));
    let (pid_arg, done_arg) = (pid_file.to_str().unwrap(), done.to_str().unwrap());
    let victim = python_session(&daemon, "victim", VICTIM, &[pid_arg, done_arg]);
    let intruder = python_session(&daemon, "intruder", INTRUDER, &[pid_arg]);
    let (out, _) = finish(intruder, "the intruding session");
    std::fs::write(&done, "").unwrap();
    finish(victim, "the victim session");
    let found = result(&out);
    for (what, outcome) in found["other"].as_object().unwrap() {
        assert_ne!(outcome, "ok", "{what} across sessions succeeded: {found}");
    }
    for (what, outcome) in found["own"].as_object().unwrap() {
        assert_eq!(outcome, "ok", "{what} within the session failed: {found}");
    }
    let events = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &daemon.session_id("intruder"),
        "--json",
    ]);
    let started = events
        .iter()
        .find(|e| e["event"] == "session_started")
        .expect("session_started");
    assert!(
        started["details"]["isolation"]
            .as_str()
            .is_some_and(|i| i.starts_with("Landlock domain")),
        "{started}"
    );
    eprintln!("across sessions: {}", found["other"]);
}

const UDP_FLOOD: &str = r#"
import json, socket, sys, time
seconds = float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
refused, sent, end, port = 0, 0, time.monotonic() + seconds, 0
while time.monotonic() < end:
    for _ in range(1000):
        # QUIC to one address, and denied UDP to many ports of another.
        target = ("127.0.0.2", 443) if sent % 2 else ("127.0.0.3", 443)
        try:
            s.sendto(b"x", target)
        except PermissionError:
            refused += 1
        sent += 1
print(json.dumps({"sent": sent, "refused": refused}))
"#;

/// D5: a session floods the kernel with refused datagrams. Its refusals reach the trail as a
/// few events with counts, not one each, so the trail (and every other session's events in
/// it) survives; another session's control requests go on meanwhile.
#[test]
fn a_flood_of_kernel_refusals_is_counted_not_recorded_one_by_one() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = daemon_for_nobody(dir.path());
    let flood = python_session(&daemon, "flood", UDP_FLOOD, &["5"]);
    std::thread::sleep(Duration::from_secs(1));
    let other = python_session(&daemon, "calm", HELLO, &[]);
    let (calm, _) = finish(other, "the calm session");
    let (out, _) = finish(flood, "the flooding session");
    let flooded = result(&out);
    let refused = flooded["refused"].as_u64().unwrap();
    assert!(refused > 10_000, "{flooded}");
    let session = daemon.session_id("flood");
    // The window closes 10 s after the first refusal; its counts come then.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let events = daemon.json_lines(&[
            "mcp",
            "events",
            "--session",
            &session,
            "--type",
            "mcp_network_connection",
            "--json",
        ]);
        let counted: u64 = events
            .iter()
            .map(|e| e["details"]["count"].as_u64().unwrap_or(1))
            .sum();
        if counted >= refused {
            assert_eq!(counted, refused, "every refusal counted once: {events:#?}");
            // Two destinations: each first refusal as it came, then its count per window.
            assert!(events.len() <= 8, "{} events: {events:#?}", events.len());
            eprintln!(
                "UDP flood: {refused} refusals in 5 s recorded as {} events; another session's hello meanwhile {}",
                events.len(),
                calm.trim()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{counted} of {refused} refusals counted: {events:#?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// An echo server on `addr` for as many connections as come, in one thread.
fn echo_server(addr: &str) -> u16 {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    let listener = std::net::TcpListener::bind(addr).expect("bind the echo server");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut peers: Vec<std::net::TcpStream> = Vec::new();
        loop {
            while let Ok((peer, _)) = listener.accept() {
                peer.set_nonblocking(true).unwrap();
                peers.push(peer);
            }
            let mut fds: Vec<PollFd> = std::iter::once(listener.as_fd())
                .chain(peers.iter().map(|p| p.as_fd()))
                .map(|fd| PollFd::new(fd, PollFlags::POLLIN))
                .collect();
            if poll(&mut fds, PollTimeout::from(50u16)).is_err() {
                continue;
            }
            let ready: Vec<bool> = fds[1..]
                .iter()
                .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
                .collect();
            drop(fds);
            let mut closed = Vec::new();
            for (i, peer) in peers.iter_mut().enumerate().filter(|(i, _)| ready[*i]) {
                let mut buf = [0u8; 4096];
                match peer.read(&mut buf) {
                    Ok(0) => closed.push(i),
                    Ok(n) => {
                        let _ = peer.write_all(&buf[..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => closed.push(i),
                }
            }
            for i in closed.into_iter().rev() {
                peers.swap_remove(i);
            }
        }
    });
    port
}

const HOLD_CONNECTIONS: &str = r#"
import json, os, resource, socket, sys, time
host, port, count, ready, done = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
for _ in range(count):
    s = socket.socket()
    s.connect((host, port))
    held.append(s)
time.sleep(2)
closed = 0
for s in held:
    s.setblocking(False)
    try:
        if s.recv(1) == b"":
            closed += 1
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(json.dumps({"held": count - closed, "closed": closed}), flush=True)
open(ready, "w").close()
while not os.path.exists(done):
    time.sleep(0.1)
"#;

const ECHO_ROUND_TRIPS: &str = r#"
import json, socket, sys, time
host, port = sys.argv[2], int(sys.argv[3])
times, failures = [], 0
for _ in range(50):
    start = time.monotonic()
    s = socket.socket()
    s.settimeout(5)
    try:
        s.connect((host, port))
        s.sendall(b"ping\n")
        assert s.recv(16) == b"ping\n"
        times.append(time.monotonic() - start)
    except (OSError, AssertionError):
        failures += 1
    s.close()
times.sort()
print(json.dumps({"failures": failures, "median_ms": times[len(times) // 2] * 1000 if times else None}))
"#;

/// D1: one session holds as many connections through the transparent proxy as it can. It
/// meets its own limit (reported once), and another session's connections are still served.
#[test]
fn one_session_cannot_starve_the_transparent_proxy() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let host = "127.0.0.29";
    let port = echo_server(&format!("{host}:0"));
    let daemon = Daemon::start_with(
        dir.path(),
        "",
        &format!(
            "kernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n  intercept_loopback: [{host}]\n"
        ),
    );
    let (ready, done) = (dir.path().join("ready"), dir.path().join("done"));
    let port_arg = port.to_string();
    let before = python_session(&daemon, "calm-before", ECHO_ROUND_TRIPS, &[host, &port_arg]);
    let (before, _) = finish(before, "the session before");
    let hog = python_session(
        &daemon,
        "hog",
        HOLD_CONNECTIONS,
        &[
            host,
            &port_arg,
            "4300",
            ready.to_str().unwrap(),
            done.to_str().unwrap(),
        ],
    );
    wait_until_ready(&ready);
    let calm = python_session(&daemon, "calm", ECHO_ROUND_TRIPS, &[host, &port_arg]);
    let (during, _) = finish(calm, "the other session");
    std::fs::write(&done, "").unwrap();
    let (hog_out, _) = finish(hog, "the hog");
    let held = result(&hog_out);
    assert_eq!(held["held"], 1024, "{held}");
    let during_result = result(&during);
    assert_eq!(during_result["failures"], 0, "{during}");
    let events = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &daemon.session_id("hog"),
        "--type",
        "limit_reached",
        "--json",
    ]);
    assert_eq!(events.len(), 1, "one event per episode: {events:#?}");
    assert_eq!(
        events[0]["details"]["limit"],
        "transparent proxy connections"
    );
    eprintln!(
        "transparent proxy: another session's connect+echo before the hog {}, while it holds 1024 (of 4300 tried) {}",
        before.trim(),
        during.trim()
    );
}

const HOLD_REQUESTS: &str = r#"
import json, os, socket, sys, time
host, port, ready, done = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
size = 60 << 20
answers = []
held = []
for _ in range(3):
    s = socket.create_connection((host, port))
    s.sendall(("POST /anthropic/v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
               "content-length: %d\r\n\r\n" % size).encode())
    s.settimeout(3)
    try:
        s.sendall(b" " * (size - 1))  # all but the last byte: the proxy holds it
        status = s.recv(64).split(b" ")[1].decode()
    except socket.timeout:
        status = "held"
    except OSError as e:
        try:
            status = s.recv(64).split(b" ")[1].decode()
        except Exception:
            status = "error " + str(e)
    answers.append(status)
    held.append(s)
print(json.dumps({"answers": answers}), flush=True)
open(ready, "w").close()
while not os.path.exists(done):
    time.sleep(0.1)
"#;

/// D4: one session's large, slow requests to the LLM proxy hold at most its own budget of
/// memory (two of the largest requests); past it they are refused (503, one event), and
/// another session's requests go on.
#[test]
fn one_session_cannot_take_the_llm_proxys_memory() {
    if skip_unless_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let upstream = agentsh_tests::llm::FakeUpstream::start(dir.path());
    let daemon = Daemon::start_with(
        dir.path(),
        "",
        &format!(
            "proxy:\n  listen: 127.0.0.1:0\n  mode: embedded\nproviders:\n  anthropic: {{upstream: \"{0}\"}}\n  openai: {{upstream: \"{0}\"}}\n",
            upstream.url
        ),
    );
    let proxy = daemon.proxy.clone().expect("the proxy");
    let (host, port) = proxy.rsplit_once(':').unwrap();
    let (ready, done) = (dir.path().join("ready"), dir.path().join("done"));
    let hog = python_session(
        &daemon,
        "hog",
        HOLD_REQUESTS,
        &[host, port, ready.to_str().unwrap(), done.to_str().unwrap()],
    );
    wait_until_ready(&ready);
    let rss = agentsh_tests::proc_status_kib(daemon.pid(), "VmRSS");
    let call = agentsh_tests::llm::sdk_command(&format!(
        "--api anthropic --base-url http://{proxy}/anthropic --scenario anthropic_tools"
    ));
    let calm = daemon.run_session("calm", &call);
    std::fs::write(&done, "").unwrap();
    let (hog_out, _) = finish(hog, "the hog");
    assert!(calm.status.success(), "{}", calm.stderr);
    let hog_result = result(&hog_out);
    assert_eq!(
        hog_result["answers"],
        serde_json::json!(["held", "held", "503"]),
        "{hog_result}"
    );
    let events = daemon.json_lines(&[
        "mcp",
        "events",
        "--session",
        &daemon.session_id("hog"),
        "--type",
        "limit_reached",
        "--json",
    ]);
    assert_eq!(events.len(), 1, "{events:#?}");
    eprintln!(
        "LLM proxy: a session holding two 60 MB requests, its third refused; agentshd RSS {} MiB; another session's call went through",
        rss / 1024
    );
}
