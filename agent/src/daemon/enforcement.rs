//! Kernel enforcement as the daemon runs it: the loaded programs, which session cgroup ids the
//! kernel knows, the deny list, and the kernel's refusals turned into events.

use crate::sync::lock;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::audit::{Action, Event, EventKind};
use crate::engine::Engine;
use crate::kernel::{self, EventReader, KernelError, KernelPrograms, Original, Refusal};
use crate::net::front::OriginalDestinations;

/// The kernel side of enforcement, shared by the control socket's handlers (sessions come
/// and go) and the transparent proxy (original destinations).
pub struct Enforcement {
    programs: Mutex<KernelPrograms>,
    originals: Mutex<kernel::Originals>,
    events: Mutex<Option<EventReader>>,
    /// Session id -> the cgroup id the kernel knows it by (kept: the cgroup is gone by the
    /// time its session is ended).
    sessions: Mutex<HashMap<String, u64>>,
    next_session_number: Mutex<u32>,
}

impl Enforcement {
    pub fn new(mut programs: KernelPrograms) -> Result<Self, KernelError> {
        let originals = programs.take_originals()?;
        let events = programs.take_events()?;
        Ok(Self {
            programs: Mutex::new(programs),
            originals: Mutex::new(originals),
            events: Mutex::new(Some(events)),
            sessions: Mutex::default(),
            next_session_number: Mutex::new(1),
        })
    }

    /// The kernel's ring buffer of refusals, for the one thread that reads it.
    pub fn take_events(&self) -> Option<EventReader> {
        lock(&self.events).take()
    }

    /// Runs `f` on the programs (setting up at start).
    pub fn with<T>(&self, f: impl FnOnce(&mut KernelPrograms) -> T) -> T {
        f(&mut lock(&self.programs))
    }

    /// The kernel learns session `id`'s cgroup (`dir`): from now on its connections are
    /// redirected and its denials apply. Called before the agent runs.
    pub fn session_started(&self, id: &str, dir: &Path) -> Result<(), KernelError> {
        let cgroup_id = kernel::cgroup_id(dir)?;
        let number = {
            let mut next = lock(&self.next_session_number);
            let number = *next;
            *next = next.wrapping_add(1).max(1);
            number
        };
        lock(&self.programs).add_session(cgroup_id, number)?;
        lock(&self.sessions).insert(id.to_owned(), cgroup_id);
        Ok(())
    }

    /// The kernel forgets session `id`.
    pub fn session_ended(&self, id: &str) {
        let Some(cgroup_id) = lock(&self.sessions).remove(id) else {
            return;
        };
        if let Err(err) = lock(&self.programs).remove_session(cgroup_id) {
            eprintln!("agentshd: kernel: cannot forget session {id}: {err}");
        }
    }

    /// The session whose cgroup id the kernel reported.
    pub fn session_of_cgroup(&self, cgroup_id: u64) -> Option<String> {
        lock(&self.sessions)
            .iter()
            .find(|(_, id)| **id == cgroup_id)
            .map(|(session, _)| session.clone())
    }

    /// Records what the kernel refused, as events of the sessions.
    pub fn record_refusals(&self, engine: &Engine, refusals: Vec<kernel::Event>) {
        for refusal in refusals {
            let session = self.session_of_cgroup(refusal.session_cgroup);
            let (rule, reason) = match refusal.refusal {
                Refusal::Denied => (
                    "kernel_deny",
                    format!(
                        "connect to {} refused by the kernel (denied destination)",
                        refusal.destination
                    ),
                ),
                Refusal::Quic => (
                    "kernel_quic",
                    format!(
                        "UDP to {} refused by the kernel (QUIC; clients fall back to TCP)",
                        refusal.destination
                    ),
                ),
                Refusal::Other(code) => (
                    "kernel",
                    format!(
                        "{} refused by the kernel (action {code})",
                        refusal.destination
                    ),
                ),
            };
            let mut event = Event::new(EventKind::McpNetworkConnection, "", Action::Block, reason)
                .rule(rule)
                .details(json!({
                    "pid": refusal.pid,
                    "address": refusal.destination.to_string(),
                    "cgroup_id": refusal.session_cgroup,
                }));
            match session.and_then(|id| engine.find_session(&id)) {
                Some(session) => engine.record(&session, event),
                None => {
                    event.session = None;
                    engine.record_global(event);
                }
            }
        }
    }

    /// Session processes may not reach `addr:port` (0: any port).
    pub fn deny(&self, addr: IpAddr, port: u16) -> Result<(), KernelError> {
        lock(&self.programs).deny(addr, port)
    }
}

/// Reads the kernel's refusals as they come and records them; runs for the daemon's life.
pub fn record_refusals_forever(
    enforcement: &Enforcement,
    engine: &Engine,
    mut reader: EventReader,
) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    loop {
        let ready = {
            let mut fds = [PollFd::new(reader.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::from(1000u16))
        };
        match ready {
            Ok(0) => continue,
            Ok(_) => enforcement.record_refusals(engine, reader.drain()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(err) => {
                eprintln!(
                    "agentshd: kernel events: {err}; the kernel's refusals are no longer recorded"
                );
                return;
            }
        }
    }
}

/// The transparent proxy's view: original destinations by client address.
pub struct Originals(pub Arc<Enforcement>);

impl OriginalDestinations for Originals {
    fn take(&mut self, client: SocketAddr) -> Option<Original> {
        lock(&self.0.originals).take(client)
    }
}
