//! The connect hooks' denials, for real: the programs attached to a throw-away parent cgroup
//! under the host's cgroup2 mount, with one session cgroup below it and no proxy configured. A
//! session process gets EPERM for a denied address and connects elsewhere; a process outside
//! reaches the denied address. Needs root (CI runs as root); elsewhere it says so and does nothing.

use std::net::{IpAddr, Ipv4Addr, TcpListener};

use agentsh::kernel::{self, KernelPrograms};
use agentsh_tests::kernel::{TestCgroup, can_load_hooks, python_in};

#[test]
fn connect4_denies_session_processes_only() {
    if !can_load_hooks("kernel_connect4") {
        return;
    }
    let mut parent = TestCgroup::new(&format!("agentsh-test-{}", std::process::id()));
    let session = parent.child("session");
    let session_id = kernel::cgroup_id(&session).unwrap();
    let other = parent.child("other");
    let other_id = kernel::cgroup_id(&other).unwrap();

    let denied = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 2), 0)).unwrap();
    let allowed = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 3), 0)).unwrap();
    let denied_port = denied.local_addr().unwrap().port();
    let allowed_port = allowed.local_addr().unwrap().port();
    // Denied to session 1 only.
    let own = TcpListener::bind((Ipv4Addr::new(127, 0, 0, 4), 0)).unwrap();
    let own_port = own.local_addr().unwrap().port();

    let mut programs = KernelPrograms::load().expect("load the kernel programs");
    programs.attach(parent.path()).expect("attach");
    programs.add_session(session_id, 1).unwrap();
    programs.add_session(other_id, 2).unwrap();
    programs
        .deny(
            IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
            denied_port,
            kernel::EVERY_SESSION,
        )
        .unwrap();
    programs
        .deny(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4)), own_port, 1)
        .unwrap();

    let script = format!(
        "import socket\n\
         for host, port in (('127.0.0.2', {denied_port}), ('127.0.0.3', {allowed_port}), ('127.0.0.4', {own_port})):\n\
         \x20   s = socket.socket()\n\
         \x20   try:\n\
         \x20       s.connect((host, port)); print(host, 'connected')\n\
         \x20   except OSError as e:\n\
         \x20       print(host, 'errno', e.errno)\n"
    );
    let out = python_in(&session, &script);
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("127.0.0.2 errno 1"),
        "denied address not refused with EPERM: {}",
        out.stdout
    );
    assert!(
        out.stdout.contains("127.0.0.3 connected"),
        "allowed address refused: {}",
        out.stdout
    );

    assert!(
        out.stdout.contains("127.0.0.4 errno 1"),
        "the session's own denial not applied: {}",
        out.stdout
    );
    // The other session: every session's denial holds, session 1's does not.
    let out = python_in(&other, &script);
    assert!(
        out.stdout.contains("127.0.0.2 errno 1") && out.stdout.contains("127.0.0.4 connected"),
        "denials of another session applied: {}",
        out.stdout
    );

    // Outside the session (this test process), the denied address is reachable.
    std::net::TcpStream::connect(("127.0.0.2", denied_port)).expect("non-session connect");
    drop(programs);
}
