//! Kernel enforcement as the daemon runs it: the loaded programs, which session cgroup ids the
//! kernel knows, the deny list, and the kernel's refusals turned into events.

use crate::sync::lock;
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;

use crate::audit::{Action, Event, EventKind};
use crate::engine::{Engine, Rules};
use crate::kernel::{self, EventReader, KernelError, KernelPrograms, Original, Refusal};
use crate::net::front::OriginalDestinations;

use super::refusals::{RefusalDigest, Summary, Target};

/// The kernel side of enforcement, shared by the control socket's handlers (sessions come
/// and go) and the transparent proxy (original destinations).
pub struct Enforcement {
    programs: Mutex<KernelPrograms>,
    originals: Mutex<kernel::Originals>,
    events: Mutex<Option<EventReader>>,
    /// Session id -> how the kernel knows it (kept: the cgroup is gone by the time its
    /// session is ended).
    sessions: Mutex<HashMap<String, KernelSession>>,
    next_session_number: Mutex<u32>,
    /// The deny entries in the kernel's maps now.
    denials: Mutex<BTreeSet<Denial>>,
    /// What each policy denies in the kernel, once the transparent proxy can tell.
    planner: OnceLock<DenialPlanner>,
    /// The kernel's refusals, aggregated per session before they are recorded.
    digest: Mutex<RefusalDigest>,
    /// Per session cgroup, the refusals the kernel could not report that are counted in.
    unreported_seen: Mutex<HashMap<u64, u64>>,
}

#[derive(Debug, Clone, Copy)]
struct KernelSession {
    cgroup_id: u64,
    /// The number its deny entries carry.
    number: u32,
}

/// One entry of the kernel's deny list: `session` (a session's number, or
/// [`kernel::EVERY_SESSION`]) may not reach `addr:port` (`port` 0: any port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Denial {
    pub addr: IpAddr,
    pub port: u16,
    pub session: u32,
}

/// What the kernel denies: `fixed` to every session (`kernel.deny`), and to each session what
/// `by_policy` finds its policy denies (the addresses of the network servers it denies).
pub struct DenialPlanner {
    pub fixed: Vec<(IpAddr, u16)>,
    pub by_policy: PolicyDenials,
}

/// The addresses (and ports, 0: all) a policy denies in the kernel.
pub type PolicyDenials = Box<dyn Fn(&Arc<Rules>) -> Vec<(IpAddr, u16)> + Send + Sync>;

/// The number no session is given: the start-up self-test's canary.
pub const CANARY_SESSION: u32 = u32::MAX;

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
            denials: Mutex::default(),
            planner: OnceLock::new(),
            digest: Mutex::default(),
            unreported_seen: Mutex::default(),
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

    /// From now on the kernel's deny list follows `planner`; the list is made so at once.
    pub fn plan_denials(&self, planner: DenialPlanner, engine: &Engine) -> Result<(), KernelError> {
        let _ = self.planner.set(planner);
        self.replan(engine)
    }

    /// The kernel learns session `id`'s cgroup (`dir`): from now on its connections are
    /// redirected and what `rules` deny is denied to it. Called before the agent runs.
    pub fn session_started(
        &self,
        id: &str,
        dir: &Path,
        rules: &Arc<Rules>,
    ) -> Result<(), KernelError> {
        let cgroup_id = kernel::cgroup_id(dir)?;
        let number = {
            let mut next = lock(&self.next_session_number);
            let number = *next;
            // 0 is every session's, the last the canary's.
            *next = next.wrapping_add(1).clamp(1, CANARY_SESSION - 1);
            number
        };
        let session = KernelSession { cgroup_id, number };
        // Its denials before the session: the moment the kernel knows it, they hold.
        let mut wanted = lock(&self.denials).clone();
        wanted.extend(self.session_denials(session, rules));
        self.set_denials(wanted)?;
        lock(&self.programs).add_session(cgroup_id, number)?;
        lock(&self.sessions).insert(id.to_owned(), session);
        Ok(())
    }

    /// The kernel forgets session `id`, and its denials.
    pub fn session_ended(&self, id: &str) {
        let Some(session) = lock(&self.sessions).remove(id) else {
            return;
        };
        if let Err(err) = lock(&self.programs).remove_session(session.cgroup_id) {
            eprintln!("agentshd: kernel: cannot forget session {id}: {err}");
        }
        lock(&self.unreported_seen).remove(&session.cgroup_id);
        let mut wanted = lock(&self.denials).clone();
        wanted.retain(|d| d.session != session.number);
        if let Err(err) = self.set_denials(wanted) {
            eprintln!("agentshd: kernel: cannot lift the denials of session {id}: {err}");
        }
    }

    /// Makes the kernel's deny list what the policies in force deny now: after a reload,
    /// sessions that follow the daemon's policy get its denials.
    pub fn replan(&self, engine: &Engine) -> Result<(), KernelError> {
        let Some(planner) = self.planner.get() else {
            return Ok(());
        };
        let mut wanted: BTreeSet<Denial> = planner
            .fixed
            .iter()
            .map(|&(addr, port)| Denial {
                addr,
                port,
                session: kernel::EVERY_SESSION,
            })
            .collect();
        let sessions: Vec<(String, KernelSession)> = lock(&self.sessions)
            .iter()
            .map(|(id, s)| (id.clone(), *s))
            .collect();
        for (id, session) in sessions {
            let rules = engine
                .find_session(&id)
                .map_or_else(|| engine.rules(), |s| s.rules());
            wanted.extend(self.session_denials(session, &rules));
        }
        self.set_denials(wanted)
    }

    fn session_denials(&self, session: KernelSession, rules: &Arc<Rules>) -> Vec<Denial> {
        let Some(planner) = self.planner.get() else {
            return Vec::new();
        };
        (planner.by_policy)(rules)
            .into_iter()
            .map(|(addr, port)| Denial {
                addr,
                port,
                session: session.number,
            })
            .collect()
    }

    /// Puts `wanted` in the kernel's maps: the new entries first, then the lifted ones go, so
    /// that nothing denied before and after is let through in between.
    fn set_denials(&self, wanted: BTreeSet<Denial>) -> Result<(), KernelError> {
        let mut programs = lock(&self.programs);
        let mut installed = lock(&self.denials);
        for denial in wanted.difference(&installed) {
            programs.deny(denial.addr, denial.port, denial.session)?;
        }
        for denial in installed.difference(&wanted) {
            programs.undeny(denial.addr, denial.port, denial.session)?;
        }
        *installed = wanted;
        Ok(())
    }

    /// What the kernel denies now.
    pub fn denials(&self) -> BTreeSet<Denial> {
        lock(&self.denials).clone()
    }

    /// The session whose cgroup id the kernel reported.
    pub fn session_of_cgroup(&self, cgroup_id: u64) -> Option<String> {
        lock(&self.sessions)
            .iter()
            .find(|(_, s)| s.cgroup_id == cgroup_id)
            .map(|(session, _)| session.clone())
    }

    /// Records what the kernel refused, as events of the sessions: the first refusal to each
    /// destination of a window as it comes, the rest as counts when the window closes (so also
    /// call it with nothing, now and then).
    pub fn record_refusals(&self, engine: &Engine, refusals: Vec<kernel::Event>) {
        let now = std::time::Instant::now();
        let lost = lock(&self.programs).lost_reports().unwrap_or_default();
        let (recorded, summaries) = {
            let mut digest = lock(&self.digest);
            let mut seen = lock(&self.unreported_seen);
            for (cgroup, total) in lost {
                let before = seen.insert(cgroup, total).unwrap_or(0);
                if total > before {
                    digest.unreported(cgroup, total - before, now, || {
                        self.session_of_cgroup(cgroup)
                    });
                }
            }
            let recorded: Vec<kernel::Event> = refusals
                .into_iter()
                .filter(|refusal| {
                    digest.observe(refusal, now, || {
                        self.session_of_cgroup(refusal.session_cgroup)
                    })
                })
                .collect();
            (recorded, digest.close_due(now))
        };
        for refusal in recorded {
            let (rule, what) = refusal_words(refusal.refusal);
            let event = Event::new(
                EventKind::McpNetworkConnection,
                "",
                Action::Block,
                format!(
                    "{} to {} refused by the kernel ({what})",
                    kind_of(refusal.refusal),
                    refusal.destination
                ),
            )
            .rule(rule)
            .details(json!({
                "pid": refusal.pid,
                "address": refusal.destination.to_string(),
                "cgroup_id": refusal.session_cgroup,
            }));
            let session = self.session_of_cgroup(refusal.session_cgroup);
            record_for(engine, session, event);
        }
        for summary in summaries {
            Self::record_summary(engine, &summary);
        }
    }

    fn record_summary(engine: &Engine, summary: &Summary) {
        let (rule, what) = refusal_words(summary.refusal);
        let seconds = summary.window.as_secs();
        let reason = match summary.target {
            Target::One(destination) => format!(
                "{} more {} to {destination} refused by the kernel in {seconds} s ({what})",
                summary.count,
                plural(kind_of(summary.refusal), summary.count),
            ),
            Target::Unreported => format!(
                "{} more refusals by the kernel in {seconds} s that it could not report one by one (its event buffer was full)",
                summary.count
            ),
            Target::Others => format!(
                "{} {} to {} other destinations refused by the kernel in {seconds} s ({what}); counted, not recorded one by one",
                summary.count,
                plural(kind_of(summary.refusal), summary.count),
                summary.destinations,
            ),
        };
        let event = Event::new(EventKind::McpNetworkConnection, "", Action::Block, reason)
            .rule(rule)
            .details(json!({
                "address": match summary.target {
                    Target::One(destination) => Some(destination.to_string()),
                    Target::Others | Target::Unreported => None,
                },
                "count": summary.count,
                "destinations": summary.destinations,
                "window_seconds": seconds,
                "aggregated": true,
                "cgroup_id": summary.session_cgroup,
            }));
        record_for(engine, summary.session.clone(), event);
    }
}

/// Records `event` as `session`'s, also once the session has ended (a window's counts come
/// after its last refusal).
fn record_for(engine: &Engine, session: Option<String>, mut event: Event) {
    match session.as_deref().and_then(|id| engine.find_session(id)) {
        Some(live) => engine.record(&live, event),
        None => {
            event.session = session;
            engine.record_global(event);
        }
    }
}

/// The rule and the words of a kind of refusal.
fn refusal_words(refusal: Refusal) -> (&'static str, String) {
    match refusal {
        Refusal::Denied => ("kernel_deny", "denied destination".to_owned()),
        Refusal::Quic => ("kernel_quic", "QUIC; clients fall back to TCP".to_owned()),
        Refusal::Other(code) => ("kernel", format!("action {code}")),
    }
}

fn kind_of(refusal: Refusal) -> &'static str {
    match refusal {
        Refusal::Quic => "UDP",
        Refusal::Denied | Refusal::Other(_) => "connect",
    }
}

fn plural(kind: &str, count: u64) -> String {
    match (kind, count) {
        ("UDP", 1) => "UDP datagram".to_owned(),
        ("UDP", _) => "UDP datagrams".to_owned(),
        (_, 1) => "connect".to_owned(),
        _ => "connects".to_owned(),
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
            // Nothing new: windows may still close.
            Ok(0) => enforcement.record_refusals(engine, Vec::new()),
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
