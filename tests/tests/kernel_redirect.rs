//! The kernel programs redirecting and refusing for real: attached to a throw-away parent cgroup
//! with a session cgroup (and a sub-sub-cgroup of it) below; listeners on 127.0.0.1 and [::1]
//! play the proxy, fake destinations live on 127.0.0.2, 127.0.0.3 and [::1] (127.0.0.2 and ::1
//! named for interception, 127.0.0.3 not); python3 children are placed in the cgroups before they
//! run anything. Needs root (CI runs as root); elsewhere each test says so and does nothing.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentsh::kernel::{
    self, Attachment, EVERY_SESSION, Event, EventReader, Interception, KernelError, KernelPrograms,
    Original, Originals, Refusal, SessionFlags,
};
use agentsh_tests::kernel::{PinGuard, TestCgroup, can_load_hooks, python_in};

/// The loopback addresses the fixture names for interception, as config would.
const NAMED: [&str; 2] = ["127.0.0.2", "::1"];

struct Fixture {
    programs: KernelPrograms,
    originals: Originals,
    events: EventReader,
    session_id: u64,
    parent: PathBuf,
    session: PathBuf,
    /// session/sub/deeper: still the session's.
    deeper: PathBuf,
    proxy4: TcpListener,
    proxy6: TcpListener,
    // Last: the cgroups go after the programs are detached.
    cgroups: TestCgroup,
}

fn fixture(test: &str) -> Option<Fixture> {
    fixture_naming(test, &NAMED)
}

/// The fixture with only `named` loopback addresses intercepted.
fn fixture_naming(test: &str, named: &[&str]) -> Option<Fixture> {
    if !can_load_hooks(test) {
        return None;
    }
    let mut cgroups = TestCgroup::new(&format!("agentsh-test-{}-{test}", std::process::id()));
    let session = cgroups.child("session");
    cgroups.child("session/sub");
    let deeper = cgroups.child("session/sub/deeper");
    let session_id = kernel::cgroup_id(&session).unwrap();
    let proxy4 = nonblocking(TcpListener::bind("127.0.0.1:0").unwrap());
    let proxy6 = nonblocking(TcpListener::bind("[::1]:0").unwrap());
    let (SocketAddr::V4(p4), SocketAddr::V6(p6)) =
        (proxy4.local_addr().unwrap(), proxy6.local_addr().unwrap())
    else {
        panic!("proxy listeners of the wrong family");
    };

    let mut programs = KernelPrograms::load().expect("load the kernel programs");
    programs.attach(cgroups.path()).expect("attach");
    programs
        .set_interception(&Interception {
            proxy4: Some(p4),
            proxy6: Some(p6),
        })
        .unwrap();
    for addr in named {
        programs.intercept_loopback(addr.parse().unwrap()).unwrap();
    }
    programs.add_session(session_id, 7).unwrap();
    Some(Fixture {
        originals: programs.take_originals().unwrap(),
        events: programs.take_events().unwrap(),
        programs,
        session_id,
        parent: cgroups.path().to_owned(),
        session,
        deeper,
        proxy4,
        proxy6,
        cgroups,
    })
}

fn nonblocking(listener: TcpListener) -> TcpListener {
    listener.set_nonblocking(true).unwrap();
    listener
}

/// A fake destination that must (or must not) be reached directly.
fn upstream(addr: &str) -> (TcpListener, u16) {
    let listener = nonblocking(TcpListener::bind(addr).unwrap());
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

fn accept_within(listener: &TcpListener, limit: Duration) -> Option<(TcpStream, SocketAddr)> {
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, peer)) => {
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                return Some((stream, peer));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && start.elapsed() < limit => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return None,
        }
    }
}

fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    accept_within(listener, Duration::from_secs(10)).expect("a connection to accept")
}

fn nothing_pending(listener: &TcpListener) -> bool {
    accept_within(listener, Duration::from_millis(100)).is_none()
}

fn read_all(mut stream: TcpStream) -> String {
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text
}

/// Runs the script in `cgroup`; its stdout, after checking it exited cleanly.
fn run(cgroup: &Path, script: &str) -> String {
    let out = python_in(cgroup, script);
    assert!(
        out.status.success(),
        "python failed: {}{}",
        out.stdout,
        out.stderr
    );
    out.stdout
}

fn pid_line(stdout: &str) -> u32 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid "))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {stdout}"))
}

#[test]
fn session_connect_is_redirected_with_its_original_destination() {
    let Some(mut f) = fixture("redirect") else {
        return;
    };
    let (upstream, port) = upstream("127.0.0.2:0");
    let out = run(
        &f.session,
        &format!(
            "import os, socket\n\
             s = socket.create_connection(('127.0.0.2', {port}))\n\
             s.sendall(b'hello'); s.close(); print('pid', os.getpid())\n"
        ),
    );
    let (stream, peer) = accept(&f.proxy4);
    let original = f.originals.take(peer);
    assert_eq!(
        original,
        Some(Original {
            destination: SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port)),
            session_cgroup: f.session_id,
            pid: pid_line(&out),
            tid: pid_line(&out),
        })
    );
    assert_eq!(read_all(stream), "hello");
    assert_eq!(f.originals.take(peer), None, "an entry is read once");
    assert!(nothing_pending(&upstream), "the destination was reached");
}

#[test]
fn denied_destinations_fail_with_eperm_and_are_reported() {
    let Some(mut f) = fixture("deny") else {
        return;
    };
    let (_denied4, port4) = upstream("127.0.0.3:0");
    let (_denied6, port6) = upstream("[::1]:0");
    f.programs
        .deny(
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)),
            port4,
            EVERY_SESSION,
        )
        .unwrap();
    f.programs
        .deny("::1".parse().unwrap(), port6, EVERY_SESSION)
        .unwrap();
    // Every port of 127.0.0.4, given as an IPv4-mapped address.
    f.programs
        .deny("::ffff:127.0.0.4".parse().unwrap(), 0, EVERY_SESSION)
        .unwrap();
    let out = run(
        &f.session,
        &format!(
            "import os, socket\n\
             print('pid', os.getpid())\n\
             cases = [('v4', socket.AF_INET, '127.0.0.3', {port4}),\n\
             \x20        ('v6', socket.AF_INET6, '::1', {port6}),\n\
             \x20        ('mapped', socket.AF_INET6, '::ffff:127.0.0.3', {port4}),\n\
             \x20        ('anyport', socket.AF_INET, '127.0.0.4', 9)]\n\
             for name, family, host, port in cases:\n\
             \x20   s = socket.socket(family)\n\
             \x20   try:\n\
             \x20       s.connect((host, port)); print(name, 'connected')\n\
             \x20   except OSError as e:\n\
             \x20       print(name, 'errno', e.errno)\n"
        ),
    );
    for name in ["v4", "v6", "mapped", "anyport"] {
        assert!(
            out.contains(&format!("{name} errno 1\n")),
            "{name} not refused with EPERM: {out}"
        );
    }
    let pid = pid_line(&out);
    let events = f.events.drain();
    let expect = |destination: SocketAddr| Event {
        session_cgroup: f.session_id,
        pid,
        tid: pid,
        destination,
        refusal: Refusal::Denied,
    };
    let v4 = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 3), port4));
    assert_eq!(
        events,
        vec![
            expect(v4),
            expect(SocketAddr::new("::1".parse().unwrap(), port6)),
            // The mapped address is reported as what it is: IPv4.
            expect(v4),
            expect(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 4), 9))),
        ]
    );
    assert!(f.events.drain().is_empty());
    assert!(nothing_pending(&f.proxy4) && nothing_pending(&f.proxy6));
}

#[test]
fn sub_cgroups_are_captured_the_parent_and_outside_are_not() {
    let Some(mut f) = fixture("subtree") else {
        return;
    };
    let (upstream, port) = upstream("127.0.0.2:0");
    let script = format!(
        "import os, socket\n\
         s = socket.create_connection(('127.0.0.2', {port}))\n\
         s.sendall(b'from ' + str(os.getpid()).encode()); s.close(); print('pid', os.getpid())\n"
    );

    let out = run(&f.deeper, &script);
    let (stream, peer) = accept(&f.proxy4);
    let original = f.originals.take(peer).expect("captured");
    assert_eq!(
        original.session_cgroup, f.session_id,
        "the session, not the sub-cgroup"
    );
    assert_eq!(original.pid, pid_line(&out));
    assert_eq!(
        original.destination,
        SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port))
    );
    assert_eq!(read_all(stream), format!("from {}", pid_line(&out)));
    assert!(nothing_pending(&upstream));

    // A process in the parent itself is not in a session: it reaches the destination.
    let out = run(&f.parent, &script);
    let (stream, _) = accept(&upstream);
    assert_eq!(read_all(stream), format!("from {}", pid_line(&out)));

    // Neither is this test process, outside the parent.
    TcpStream::connect(("127.0.0.2", port))
        .unwrap()
        .write_all(b"outside")
        .unwrap();
    let (stream, _) = accept(&upstream);
    assert_eq!(read_all(stream), "outside");
    assert!(nothing_pending(&f.proxy4));
}

#[test]
fn ipv6_and_ipv4_mapped_destinations_are_redirected() {
    let Some(mut f) = fixture("ipv6") else {
        return;
    };
    let (upstream4, port4) = upstream("127.0.0.2:0");
    let (upstream6, port6) = upstream("[::1]:0");
    run(
        &f.session,
        &format!(
            "import socket\n\
             s = socket.create_connection(('::1', {port6})); s.sendall(b'six'); s.close()\n\
             s = socket.socket(socket.AF_INET6)\n\
             s.connect(('::ffff:127.0.0.2', {port4})); s.sendall(b'mapped'); s.close()\n"
        ),
    );
    let (stream, peer) = accept(&f.proxy6);
    let original = f.originals.take(peer).expect("v6 original");
    assert_eq!(
        original.destination,
        SocketAddr::new("::1".parse().unwrap(), port6)
    );
    assert_eq!(read_all(stream), "six");

    // The mapped connection went to the IPv4 proxy; the proxy sees an IPv4 peer.
    let (stream, peer) = accept(&f.proxy4);
    assert!(peer.is_ipv4(), "{peer}");
    let original = f.originals.take(peer).expect("mapped original");
    assert_eq!(
        original.destination,
        SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port4))
    );
    assert_eq!(original.session_cgroup, f.session_id);
    assert_eq!(read_all(stream), "mapped");
    assert!(nothing_pending(&upstream4) && nothing_pending(&upstream6));
}

#[test]
fn udp_to_port_443_is_refused_for_sessions() {
    let Some(mut f) = fixture("quic") else {
        return;
    };
    let out = run(
        &f.session,
        "import socket\n\
         def attempt(name, family, how, addr):\n\
         \x20   s = socket.socket(family, socket.SOCK_DGRAM)\n\
         \x20   try:\n\
         \x20       s.sendto(b'q', addr) if how == 'sendto' else s.connect(addr)\n\
         \x20       print(name, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'errno', e.errno)\n\
         attempt('v4', socket.AF_INET, 'sendto', ('127.0.0.2', 443))\n\
         attempt('v6', socket.AF_INET6, 'sendto', ('::1', 443))\n\
         attempt('mapped', socket.AF_INET6, 'sendto', ('::ffff:127.0.0.2', 443))\n\
         attempt('connected', socket.AF_INET, 'connect', ('127.0.0.2', 443))\n\
         attempt('other', socket.AF_INET, 'sendto', ('127.0.0.2', 8443))\n",
    );
    for name in ["v4", "v6", "mapped", "connected"] {
        assert!(
            out.contains(&format!("{name} errno 1\n")),
            "{name} not refused: {out}"
        );
    }
    assert!(out.contains("other ok\n"), "{out}");
    let events = f.events.drain();
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e.refusal == Refusal::Quic && e.destination.port() == 443),
        "{events:?}"
    );
    // Outside sessions UDP 443 is untouched.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.send_to(b"q", "127.0.0.2:443").unwrap();
}

#[test]
fn many_concurrent_connections_each_get_their_original_destination() {
    const CONNECTIONS: usize = 1000;
    const BASE_PORT: usize = 20000;
    let Some(f) = fixture("many") else {
        return;
    };
    let Fixture {
        programs,
        originals,
        session,
        session_id,
        proxy4,
        cgroups,
        ..
    } = f;
    let originals = Arc::new(Mutex::new(originals));
    // The proxy: one thread per accepted connection, as a real one would serve them.
    let proxy = {
        let originals = Arc::clone(&originals);
        std::thread::spawn(move || {
            let mut handlers = Vec::new();
            for _ in 0..CONNECTIONS {
                let Some((mut stream, peer)) = accept_within(&proxy4, Duration::from_secs(60))
                else {
                    break;
                };
                let originals = Arc::clone(&originals);
                handlers.push(std::thread::spawn(move || {
                    let original = originals
                        .lock()
                        .unwrap()
                        .take(peer)
                        .ok_or_else(|| format!("no original for {peer}"))?;
                    let mut line = String::new();
                    let mut byte = [0u8; 1];
                    while stream.read(&mut byte).map_err(|e| e.to_string())? == 1
                        && byte[0] != b'\n'
                    {
                        line.push(char::from(byte[0]));
                    }
                    let index: usize = line.parse().map_err(|_| format!("bad index {line:?}"))?;
                    let want =
                        SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), (BASE_PORT + index) as u16));
                    let ok = original.destination == want && original.session_cgroup == session_id;
                    let _ = stream.write_all(if ok { b"ok" } else { b"no" });
                    if ok {
                        Ok(())
                    } else {
                        Err(format!("connection {index}: {original:?}, wanted {want}"))
                    }
                }));
            }
            handlers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("handler panicked".into())))
                .collect::<Vec<Result<(), String>>>()
        })
    };
    let out = run(
        &session,
        &format!(
            "import socket\n\
             from concurrent.futures import ThreadPoolExecutor\n\
             def one(i):\n\
             \x20   s = socket.create_connection(('127.0.0.2', {BASE_PORT} + i), timeout=30)\n\
             \x20   s.sendall(b'%d\\n' % i); r = s.recv(2); s.close(); return r\n\
             with ThreadPoolExecutor(64) as pool:\n\
             \x20   replies = list(pool.map(one, range({CONNECTIONS})))\n\
             print('ok', replies.count(b'ok'))\n"
        ),
    );
    let results = proxy.join().unwrap();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(results.len(), CONNECTIONS, "connections accepted");
    assert!(
        failures.is_empty(),
        "{} wrong: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(out.contains(&format!("ok {CONNECTIONS}\n")), "{out}");
    drop(programs);
    drop(cgroups);
}

/// A python3 script connecting to `host:port` and sending `tag`.
fn connect_and_send(host: &str, port: u16, tag: &str) -> String {
    format!(
        "import socket\n\
         s = socket.create_connection(('{host}', {port})); s.sendall(b'{tag}'); s.close()\n"
    )
}

/// A python3 script printing how a connect to `host:port` went: `connected`, `refused`
/// (ECONNREFUSED) or `errno N`.
fn connect_outcome(host: &str, port: u16) -> String {
    format!(
        "import socket\n\
         s = socket.socket(socket.AF_INET6 if ':' in '{host}' else socket.AF_INET)\n\
         try:\n\
         \x20   s.connect(('{host}', {port})); print('connected')\n\
         except ConnectionRefusedError:\n\
         \x20   print('refused')\n\
         except OSError as e:\n\
         \x20   print('errno', e.errno)\n"
    )
}

#[test]
fn the_proxy_itself_no_proxy_and_ended_sessions_are_not_redirected() {
    let Some(mut f) = fixture("exempt") else {
        return;
    };
    let (upstream, port) = upstream("127.0.0.2:0");
    let proxy4 = f.proxy4.local_addr().unwrap();

    // Straight to the proxy: reaches it, with nothing recorded.
    run(
        &f.session,
        &connect_and_send("127.0.0.1", proxy4.port(), "direct"),
    );
    let (stream, peer) = accept(&f.proxy4);
    assert_eq!(f.originals.take(peer), None);
    assert_eq!(read_all(stream), "direct");

    // Without a proxy nothing is redirected, named loopback addresses included.
    f.programs
        .set_interception(&Interception {
            proxy4: None,
            proxy6: None,
        })
        .unwrap();
    run(&f.session, &connect_and_send("127.0.0.2", port, "no proxy"));
    let (stream, _) = accept(&upstream);
    assert_eq!(read_all(stream), "no proxy");
    assert!(nothing_pending(&f.proxy4) && nothing_pending(&f.proxy6));

    // A session that ended is no longer one: its leftover processes are untouched.
    f.programs
        .deny("127.0.0.2".parse().unwrap(), 0, EVERY_SESSION)
        .unwrap();
    f.programs.remove_session(f.session_id).unwrap();
    f.programs.remove_session(f.session_id).unwrap();
    run(&f.session, &connect_and_send("127.0.0.2", port, "ended"));
    let (stream, _) = accept(&upstream);
    assert_eq!(read_all(stream), "ended");
}

#[test]
fn loopback_is_redirected_only_where_named() {
    let Some(mut f) = fixture_naming("loopback", &["127.0.0.2"]) else {
        return;
    };
    let (named, named_port) = upstream("127.0.0.2:0");
    let (other, other_port) = upstream("127.0.0.3:0");
    let (six, six_port) = upstream("[::1]:0");

    run(
        &f.session,
        &connect_and_send("127.0.0.2", named_port, "named"),
    );
    let (stream, peer) = accept(&f.proxy4);
    assert_eq!(
        f.originals.take(peer).map(|o| o.destination),
        Some(SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), named_port)))
    );
    assert_eq!(read_all(stream), "named");

    // 127.0.0.3, also spelled IPv4-mapped, and ::1 are not named: reached directly.
    run(
        &f.session,
        &connect_and_send("127.0.0.3", other_port, "other"),
    );
    let (stream, _) = accept(&other);
    assert_eq!(read_all(stream), "other");
    run(
        &f.session,
        &format!(
            "import socket\n\
             s = socket.socket(socket.AF_INET6); s.connect(('::ffff:127.0.0.3', {other_port}))\n\
             s.sendall(b'mapped'); s.close()\n"
        ),
    );
    let (stream, _) = accept(&other);
    assert_eq!(read_all(stream), "mapped");
    run(&f.session, &connect_and_send("::1", six_port, "six direct"));
    let (stream, _) = accept(&six);
    assert_eq!(read_all(stream), "six direct");
    assert!(nothing_pending(&f.proxy4) && nothing_pending(&f.proxy6));

    // Named while sessions run: ::1 is redirected from now on.
    f.programs
        .intercept_loopback("::1".parse().unwrap())
        .unwrap();
    run(&f.session, &connect_and_send("::1", six_port, "six"));
    let (stream, peer) = accept(&f.proxy6);
    assert_eq!(
        f.originals.take(peer).map(|o| o.destination),
        Some(SocketAddr::new("::1".parse().unwrap(), six_port))
    );
    assert_eq!(read_all(stream), "six");
    assert!(nothing_pending(&named) && nothing_pending(&six));

    // Only loopback can be named; everything else is intercepted anyway.
    for addr in ["10.1.2.3", "::ffff:192.0.2.1", "2001:db8::1"] {
        let err = f
            .programs
            .intercept_loopback(addr.parse().unwrap())
            .unwrap_err();
        assert!(matches!(err, KernelError::NotLoopback(_)), "{addr}: {err}");
    }
}

#[test]
fn the_session_flag_intercepts_all_loopback_for_that_session_only() {
    let Some(mut f) = fixture("flag") else {
        return;
    };
    let canary = f.cgroups.child("canary");
    let canary_id = kernel::cgroup_id(&canary).unwrap();
    f.programs
        .add_session_flags(
            canary_id,
            8,
            SessionFlags {
                intercept_loopback: true,
            },
        )
        .unwrap();
    let (other, port) = upstream("127.0.0.3:0");

    run(&canary, &connect_and_send("127.0.0.3", port, "canary"));
    let (stream, peer) = accept(&f.proxy4);
    let original = f.originals.take(peer).expect("canary original");
    assert_eq!(
        original.destination,
        SocketAddr::from((Ipv4Addr::new(127, 0, 0, 3), port))
    );
    assert_eq!(original.session_cgroup, canary_id);
    assert_eq!(read_all(stream), "canary");

    // The other session still reaches unnamed loopback directly.
    run(&f.session, &connect_and_send("127.0.0.3", port, "session"));
    let (stream, _) = accept(&other);
    assert_eq!(read_all(stream), "session");

    // Even with the flag the proxy itself is not redirected.
    let proxy_port = f.proxy4.local_addr().unwrap().port();
    run(
        &canary,
        &connect_and_send("127.0.0.1", proxy_port, "to proxy"),
    );
    let (stream, peer) = accept(&f.proxy4);
    assert_eq!(f.originals.take(peer), None);
    assert_eq!(read_all(stream), "to proxy");

    // Registering again replaces the flags.
    f.programs.add_session(canary_id, 8).unwrap();
    run(&canary, &connect_and_send("127.0.0.3", port, "plain"));
    let (stream, _) = accept(&other);
    assert_eq!(read_all(stream), "plain");
    assert!(nothing_pending(&f.proxy4) && nothing_pending(&other));
}

#[test]
fn pinned_links_refuse_while_the_daemon_is_dead_and_survive_a_restart() {
    if !can_load_hooks("pinned") {
        return;
    }
    let mut cgroups = TestCgroup::new(&format!("agentsh-test-{}-pinned", std::process::id()));
    let session = cgroups.child("session");
    let session_id = kernel::cgroup_id(&session).unwrap();
    let parent = cgroups.path().to_owned();
    // After the cgroups: the pins go first, also when an assertion fails.
    let _pins = PinGuard::new(&parent);
    let (upstream, port) = upstream("127.0.0.2:0");
    let destination = SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), port));
    let pinned = || -> Vec<bool> {
        kernel::pinned_links(&parent)
            .unwrap()
            .into_iter()
            .map(|(_, pinned)| pinned)
            .collect()
    };
    // What a daemon does at start: load, fill the maps, then attach.
    let start = |proxy: &TcpListener| {
        let SocketAddr::V4(p4) = proxy.local_addr().unwrap() else {
            unreachable!("bound to 127.0.0.1")
        };
        let mut programs = KernelPrograms::load().expect("load the kernel programs");
        programs
            .set_interception(&Interception {
                proxy4: Some(p4),
                proxy6: None,
            })
            .unwrap();
        programs
            .intercept_loopback(IpAddr::V4(*destination_v4(destination).ip()))
            .unwrap();
        programs.add_session(session_id, 1).unwrap();
        let attached = programs.attach_pinned(&parent).expect("attach pinned");
        (programs, attached)
    };
    assert_eq!(pinned(), [false; 5]);

    let proxy = nonblocking(TcpListener::bind("127.0.0.1:0").unwrap());
    let (mut first, attached) = start(&proxy);
    assert!(attached.all(Attachment::New), "{attached}");
    assert_eq!(pinned(), [true; 5]);
    let mut originals = first.take_originals().unwrap();
    run(&session, &connect_and_send("127.0.0.2", port, "first"));
    let (stream, peer) = accept(&proxy);
    assert_eq!(
        originals.take(peer).map(|o| o.destination),
        Some(destination)
    );
    assert_eq!(read_all(stream), "first");

    // The daemon dies: its programs, maps and proxy listener are gone, the pinned hooks stay.
    drop((first, originals, proxy));
    assert_eq!(pinned(), [true; 5]);
    let out = run(&session, &connect_outcome("127.0.0.2", port));
    assert_eq!(
        out, "refused\n",
        "a dead daemon must refuse, never let through"
    );
    assert!(nothing_pending(&upstream), "the destination was reached");

    // A new daemon swaps its programs (and with them its maps) into the same links, while a
    // session process keeps connecting: each attempt is refused (old programs, dead proxy) or
    // reaches the new proxy, none gets through.
    let hammer = {
        let session = session.clone();
        let script = format!(
            "import socket, time\n\
             counts = {{'refused': 0, 'connected': 0, 'other': 0}}\n\
             for _ in range(400):\n\
             \x20   s = socket.socket(); s.settimeout(5)\n\
             \x20   try:\n\
             \x20       s.connect(('127.0.0.2', {port})); counts['connected'] += 1\n\
             \x20   except ConnectionRefusedError:\n\
             \x20       counts['refused'] += 1\n\
             \x20   except OSError:\n\
             \x20       counts['other'] += 1\n\
             \x20   s.close(); time.sleep(0.003)\n\
             print(counts['refused'], counts['connected'], counts['other'])\n"
        );
        std::thread::spawn(move || python_in(&session, &script))
    };
    std::thread::sleep(Duration::from_millis(300));
    let proxy = nonblocking(TcpListener::bind("127.0.0.1:0").unwrap());
    let (mut second, attached) = start(&proxy);
    assert!(attached.all(Attachment::Updated), "{attached}");
    let mut accepted = 0;
    while !hammer.is_finished() {
        accepted += usize::from(accept_within(&proxy, Duration::from_millis(20)).is_some());
    }
    while accept_within(&proxy, Duration::from_millis(100)).is_some() {
        accepted += 1;
    }
    let out = hammer.join().unwrap();
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    let counts: Vec<usize> = out
        .stdout
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let [refused, connected, other] = counts[..] else {
        panic!("counts: {}", out.stdout)
    };
    assert!(
        nothing_pending(&upstream),
        "a connection got through during the swap"
    );
    assert_eq!(
        (refused + connected, other, accepted),
        (400, 0, connected),
        "refused {refused}, connected {connected}, other {other}, accepted {accepted}"
    );
    assert!(
        refused > 0 && connected > 0,
        "the swap did not happen while connecting: refused {refused}, connected {connected}"
    );
    let names: Vec<&str> = attached.links.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        ["connect4", "connect6", "sendmsg4", "sendmsg6", "rekey"]
    );
    assert!(
        matches!(
            second.attach_pinned(&parent),
            Err(KernelError::AlreadyAttached(_))
        ),
        "attached twice"
    );
    let mut originals = second.take_originals().unwrap();
    run(&session, &connect_and_send("127.0.0.2", port, "second"));
    let (stream, peer) = accept(&proxy);
    let original = originals
        .take(peer)
        .expect("the new maps know the connection");
    assert_eq!(
        (original.destination, original.session_cgroup),
        (destination, session_id)
    );
    assert_eq!(read_all(stream), "second");
    assert!(nothing_pending(&upstream));

    // Uninstall: the hooks go even though this daemon still holds its programs.
    assert!(kernel::detach_pinned(&parent).unwrap());
    assert!(!kernel::detach_pinned(&parent).unwrap(), "nothing left");
    assert_eq!(pinned(), [false; 5]);
    run(&session, &connect_and_send("127.0.0.2", port, "unhooked"));
    let (stream, _) = accept(&upstream);
    assert_eq!(read_all(stream), "unhooked");
    assert!(nothing_pending(&proxy));
    drop(second);
}

fn destination_v4(addr: SocketAddr) -> SocketAddrV4 {
    match addr {
        SocketAddr::V4(v4) => v4,
        SocketAddr::V6(_) => unreachable!("an IPv4 destination"),
    }
}

#[test]
fn originals_and_events_are_taken_once_and_the_ring_wakes_async_readers() {
    let Some(mut f) = fixture("async") else {
        return;
    };
    fn send<T: Send>(_: &T) {}
    send(&f.originals);
    send(&f.events);
    assert!(matches!(
        f.programs.take_originals(),
        Err(KernelError::MapTaken("ORIG_BY_PEER"))
    ));
    assert!(matches!(
        f.programs.take_events(),
        Err(KernelError::MapTaken("EVENTS"))
    ));
    let (_denied, port) = upstream("127.0.0.3:0");
    f.programs
        .deny(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), port, EVERY_SESSION)
        .unwrap();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let session = f.session.clone();
    let events = runtime.block_on(async move {
        // SAFETY: an EventReader owns its descriptor and always reports that same one.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                f.events,
                tokio::io::Interest::READABLE,
            )
        };
        let mut ring = registered.map_err(|e| e.to_string()).unwrap();
        // Nothing yet: not readable.
        let idle = tokio::time::timeout(Duration::from_millis(200), ring.readable_mut()).await;
        assert!(idle.is_err(), "readable with nothing reported");
        let child =
            tokio::task::spawn_blocking(move || run(&session, &connect_outcome("127.0.0.3", port)));
        let mut guard = tokio::time::timeout(Duration::from_secs(30), ring.readable_mut())
            .await
            .expect("the deny wakes the reader")
            .unwrap();
        let events = guard.get_inner_mut().drain();
        guard.clear_ready();
        assert_eq!(child.await.unwrap(), "errno 1\n");
        events
    });
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].refusal, Refusal::Denied);
    assert_eq!(events[0].session_cgroup, f.session_id);
    assert_eq!(
        events[0].destination,
        SocketAddr::from((Ipv4Addr::new(127, 0, 0, 3), port))
    );
}
