//! The kernel's deny list follows the policies in force: a reload (SIGHUP) that newly denies a
//! declared network server denies its address to the running sessions at once, a session's own
//! policy denies what it denies to that session only, and lifted denials are lifted. By
//! address: whatever name or SNI the agent would use. Needs root (CI runs as root).

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use agentsh_tests::daemon::Daemon;
use agentsh_tests::kernel::can_load_hooks;
use agentsh_tests::policy_file;
use serde_json::Value;

fn policy(denied: bool) -> String {
    format!(
        "sandbox:\n  mcp:\n    servers:\n      - {{id: svc, type: http, url: \"http://127.0.0.19:{PORT}/mcp\"}}\n    denied_servers: [{}]\n",
        if denied { "svc" } else { "" }
    )
}

const PORT: u16 = 18_999;

/// A session that connects to the server each time the test creates `go-N`, printing what
/// happened, until `stop` exists.
fn prober(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "python3 -c \"
import errno, os, socket, sys, time
n = 0
while not os.path.exists('{dir}/stop'):
    if os.path.exists('{dir}/go-%d' % n):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(('127.0.0.19', {PORT})); result = 'ok'
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e))
        s.close()
        open('{dir}/done-%d.tmp' % n, 'w').write(result)
        os.rename('{dir}/done-%d.tmp' % n, '{dir}/done-%d' % n)
        n += 1
    time.sleep(0.02)
\""
    )
}

/// Asks the prober in `dir` to connect once more; what it got.
fn probe(dir: &Path, n: usize) -> String {
    std::fs::write(dir.join(format!("go-{n}")), "").unwrap();
    let done = dir.join(format!("done-{n}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "the prober did not answer go-{n}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(done).unwrap()
}

fn policy_events(daemon: &Daemon) -> Vec<Value> {
    daemon.json_lines(&["mcp", "events", "--type", "policy_loaded", "--json"])
}

#[test]
fn reloads_and_session_policies_reach_the_kernel() {
    if !can_load_hooks("kernel_policy_denials") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The server: anything that accepts on its address.
    let listener = TcpListener::bind(("127.0.0.19", PORT)).expect("bind the server's address");
    std::thread::spawn(move || for _ in listener.incoming() {});
    let daemon = Daemon::start_with(
        dir.path(),
        &policy(false),
        "kernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n",
    );
    let (follows, own) = (dir.path().join("follows"), dir.path().join("own"));
    std::fs::create_dir_all(&follows).unwrap();
    std::fs::create_dir_all(&own).unwrap();
    let strict = policy_file(&own, &policy(true));
    let follower = std::thread::spawn({
        let cmd = daemon.session_command(&[], "follows", &prober(&follows));
        move || agentsh_tests::run_bounded(cmd, b"", Duration::from_secs(120))
    });
    let owner = std::thread::spawn({
        let cmd = daemon.session_command(
            &["--policy", strict.to_str().unwrap()],
            "own",
            &prober(&own),
        );
        move || agentsh_tests::run_bounded(cmd, b"", Duration::from_secs(120))
    });

    // The daemon's policy allows the server; the session's own denies it, to it alone.
    assert_eq!(probe(&follows, 0), "ok");
    assert_eq!(probe(&own, 0), "EPERM");

    // A reload that denies it: the running session that follows the daemon's policy is
    // refused from the next connect on.
    std::fs::write(dir.path().join("policy.yaml"), policy(true)).unwrap();
    let reloaded = policy_events(&daemon).len();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while policy_events(&daemon).len() == reloaded {
        assert!(Instant::now() < deadline, "no policy_loaded after SIGHUP");
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = policy_events(&daemon).pop().unwrap();
    assert_eq!(last["action"], "allow", "{last}");
    assert_eq!(probe(&follows, 1), "EPERM");
    assert_eq!(probe(&own, 1), "EPERM");

    // And a reload that lifts it again lifts it for the follower only.
    std::fs::write(dir.path().join("policy.yaml"), policy(false)).unwrap();
    let reloaded = policy_events(&daemon).len();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    while policy_events(&daemon).len() == reloaded {
        assert!(
            Instant::now() < deadline,
            "no policy_loaded after the second SIGHUP"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(probe(&follows, 2), "ok");
    assert_eq!(probe(&own, 2), "EPERM");

    for dir in [&follows, &own] {
        std::fs::write(dir.join("stop"), "").unwrap();
    }
    for (name, session) in [("follows", follower), ("own", owner)] {
        let out = session.join().unwrap();
        assert!(out.status.success(), "{name}: {}", out.stderr);
    }
}

/// Two daemons with kernel enforcement side by side (as a test beside the machine's own
/// agentshd): each has its own transparent port, pins and cgroup parent, and each one's deny
/// list applies to its own sessions only.
#[test]
fn two_daemons_enforce_side_by_side() {
    if !can_load_hooks("kernel_two_daemons") {
        return;
    }
    let listener = TcpListener::bind(("127.0.0.19", PORT + 1)).expect("bind the server's address");
    std::thread::spawn(move || for _ in listener.incoming() {});
    let config =
        "kernel:\n  enforcement: required\n  listen: 127.0.0.1:0\n  listen6: \"[::1]:0\"\n";
    let policy = |denied: bool| policy(denied).replace(&PORT.to_string(), &(PORT + 1).to_string());
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let denying = Daemon::start_with(one.path(), &policy(true), config);
    let allowing = Daemon::start_with(two.path(), &policy(false), config);
    let script = format!(
        "python3 -c \"import errno, socket\ns = socket.socket()\ntry:\n  s.connect(('127.0.0.19', {}))\n  print('ok')\nexcept OSError as e:\n  print(errno.errorcode.get(e.errno, e))\"",
        PORT + 1
    );
    for (daemon, want) in [(&denying, "EPERM"), (&allowing, "ok"), (&denying, "EPERM")] {
        let out = daemon.run_session("side", &script);
        assert!(out.status.success(), "{}", out.stderr);
        assert_eq!(out.stdout.trim(), want, "{}", daemon.stderr());
    }
}
