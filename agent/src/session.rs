//! Agent sessions: where they live in the kernel, and which session a process belongs to.
//!
//! With cgroup v2 write access (root), each session is a cgroup directory under a parent the
//! daemon owns; the launcher's child is moved there before it execs, and everything it starts
//! inherits the cgroup. The session directory is delegated to the agent's user (like systemd's
//! `Delegate=yes`): it may make sub-cgroups, but moving a process out needs write access to
//! the parent, which stays root's, so a process that moves itself into a sub-cgroup is still
//! in its session. A session ends when its cgroup empties.
//!
//! Without that access (an unprivileged daemon), sessions are tracked by process ancestry
//! instead: the launcher is a child subreaper, so orphaned descendants re-parent to it and stay
//! below it; a session ends when the launcher exits. Weaker (a process cannot leave its
//! ancestry, but nothing stops it from asking a process outside to act for it) and said so.

use crate::sync::lock;
use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::kernel;

pub mod ca;
pub mod isolation;
pub mod trust;

pub use crate::config::CgroupParent;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("process {pid} is not a child of the requesting process")]
    NotYourChild { pid: u32 },
    #[error("cannot read process {pid}: {source}")]
    Proc { pid: u32, source: std::io::Error },
    #[error("cannot create the session cgroup {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot move process {pid} into {path}: {source}")]
    Place {
        pid: u32,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("process {pid} is in {found}, not in the session cgroup {expected} it was moved to")]
    Misplaced {
        pid: u32,
        found: String,
        expected: String,
    },
}

/// How the daemon tells sessions apart on this host.
#[derive(Debug, Clone)]
pub enum Tracking {
    Cgroup {
        /// The cgroup2 mount point.
        mount: PathBuf,
        /// The parent of session cgroups, as a cgroup path (`/agentsh`).
        parent: String,
    },
    Process,
}

/// Where a session's processes are: what a daemon keeps to recognise them, and to take the
/// session back after a restart.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// The session's cgroup path (`/agentsh/<id>`).
    Cgroup(String),
    /// The launcher and its descendants: pid and start time (so a reused pid is not mistaken
    /// for it).
    Process { pid: u32, start_time: u64 },
}

/// The live sessions of this daemon.
pub struct Sessions {
    tracking: Tracking,
    limitations: Vec<String>,
    live: Mutex<HashMap<String, Placement>>,
}

impl Sessions {
    /// Chooses cgroup tracking when the parent can be created here, else process tracking;
    /// `limitations` says in plain words what that costs.
    pub fn new(parent: &CgroupParent) -> Self {
        let mut limitations = Vec::new();
        let tracking = match cgroup_parent(parent) {
            Ok((mount, parent)) => Tracking::Cgroup { mount, parent },
            Err(why) => {
                limitations.push(format!(
                    "sessions are tracked by process ancestry, not cgroups ({why}); run agentshd as root for cgroup sessions and kernel enforcement"
                ));
                Tracking::Process
            }
        };
        Self {
            tracking,
            limitations,
            live: Mutex::default(),
        }
    }

    pub fn tracking(&self) -> &Tracking {
        &self.tracking
    }

    pub fn limitations(&self) -> &[String] {
        &self.limitations
    }

    /// Starts session `id`: `pid` (the launcher's child, waiting to exec) is placed in it.
    /// `launcher` is the requesting process; `owner` the agent's uid.
    pub fn create(
        &self,
        id: &str,
        pid: u32,
        launcher: u32,
        owner: u32,
    ) -> Result<Placement, SessionError> {
        if parent_of(pid)? != launcher {
            return Err(SessionError::NotYourChild { pid });
        }
        let placement = match &self.tracking {
            Tracking::Cgroup { mount, parent } => {
                let rel = format!("{}/{id}", parent.trim_end_matches('/'));
                let dir = mount.join(rel.trim_start_matches('/'));
                place_in_new_cgroup(&dir, pid, owner)?;
                let found = cgroup_of(pid)?;
                if found != rel {
                    let _ = fs::remove_dir(&dir);
                    return Err(SessionError::Misplaced {
                        pid,
                        found,
                        expected: rel,
                    });
                }
                Placement::Cgroup(rel)
            }
            Tracking::Process => Placement::Process {
                pid: launcher,
                start_time: start_time(launcher)?,
            },
        };
        lock(&self.live).insert(id.to_owned(), placement.clone());
        Ok(placement)
    }

    /// After a restart of the daemon: takes session `id` back when its processes are still
    /// there (its cgroup under this daemon's parent holds some, or its launcher runs).
    /// Returns whether it did; an emptied cgroup of the session is removed.
    pub fn resume(&self, id: &str, placement: &Placement) -> bool {
        let alive = match (placement, &self.tracking) {
            (Placement::Cgroup(cgroup), Tracking::Cgroup { mount, parent }) => {
                let ours = cgroup
                    .strip_prefix(parent.trim_end_matches('/'))
                    .is_some_and(|rest| rest == format!("/{id}"));
                let dir = mount.join(cgroup.trim_start_matches('/'));
                let populated = ours && populated(&dir);
                if ours && !populated {
                    // Ended while no daemon watched: nobody else removes it.
                    remove_tree(&dir);
                }
                populated
            }
            (Placement::Process { pid, start_time: t }, Tracking::Process) => {
                start_time(*pid).is_ok_and(|now| now == *t)
            }
            // Tracked the other way in the last run: nothing to recognise them by now.
            (Placement::Cgroup(_), Tracking::Process)
            | (Placement::Process { .. }, Tracking::Cgroup { .. }) => false,
        };
        if alive {
            lock(&self.live).insert(id.to_owned(), placement.clone());
        }
        alive
    }

    /// The session `pid` belongs to, from the kernel's view of it. With cgroups, any process
    /// below the session parent is in the session its first level names, live or not: a
    /// session the daemon lost track of never makes its processes anything more than that.
    pub fn session_of(&self, pid: u32) -> Option<String> {
        match &self.tracking {
            Tracking::Cgroup { parent, .. } => {
                let path = cgroup_of(pid).ok()?;
                let parent = parent.trim_end_matches('/');
                let below = path.strip_prefix(parent)?.strip_prefix('/')?;
                let id = below.split('/').next().filter(|id| !id.is_empty())?;
                // One this run did not start or resume is tracked from now on, so that it
                // ends (and its engine state goes) when it empties.
                lock(&self.live)
                    .entry(id.to_owned())
                    .or_insert_with(|| Placement::Cgroup(format!("{parent}/{id}")));
                Some(id.to_owned())
            }
            Tracking::Process => self.session_by_ancestry(pid),
        }
    }

    /// The live session whose launcher is `pid` or one of its ancestors.
    fn session_by_ancestry(&self, pid: u32) -> Option<String> {
        let live = lock(&self.live);
        if live.is_empty() {
            return None;
        }
        let mut current = pid;
        // Ancestry is short; the bound only guards against a loop in a racing /proc.
        for _ in 0..256 {
            let start = start_time(current).ok()?;
            let found = live.iter().find_map(|(id, root)| match root {
                Placement::Process { pid, start_time }
                    if *pid == current && *start_time == start =>
                {
                    Some(id.clone())
                }
                _ => None,
            });
            if found.is_some() {
                return found;
            }
            current = parent_of(current).ok()?;
            if current <= 1 {
                return None;
            }
        }
        None
    }

    /// Every process that may belong to a session: those in the cgroups below the session
    /// parent, or (tracking by ancestry) every process of the host.
    pub fn candidate_pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        match &self.tracking {
            Tracking::Cgroup { mount, parent } => {
                collect_cgroup_pids(&mount.join(parent.trim_start_matches('/')), &mut pids, 0);
            }
            Tracking::Process => {
                if let Ok(entries) = fs::read_dir("/proc") {
                    pids.extend(
                        entries
                            .flatten()
                            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()),
                    );
                }
            }
        }
        pids
    }

    /// The live session whose cgroup, or a cgroup below it, has cgroup id `id`: on cgroup2
    /// a directory's inode number is its cgroup id (64-bit hosts). Costs a stat of each
    /// session's directory, then (only when none matches) a walk of the directories below
    /// them, bounded in depth and in number (a session may make sub-cgroups at will);
    /// `d_ino` and `d_type` come with the directory entries, so no further stat. Nothing
    /// with process tracking.
    pub fn session_of_cgroup_id(&self, id: u64) -> CgroupLookup {
        use std::os::unix::fs::{DirEntryExt, MetadataExt};

        let Tracking::Cgroup { mount, .. } = &self.tracking else {
            return CgroupLookup::NotInSessions;
        };
        let roots: Vec<(String, PathBuf)> = lock(&self.live)
            .iter()
            .filter_map(|(session, placement)| match placement {
                Placement::Cgroup(rel) => {
                    Some((session.clone(), mount.join(rel.trim_start_matches('/'))))
                }
                Placement::Process { .. } => None,
            })
            .collect();
        let hit = |index: usize, dir: PathBuf| {
            roots
                .get(index)
                .map_or(CgroupLookup::NotInSessions, |(session, session_dir)| {
                    CgroupLookup::Found(CgroupHit {
                        session: session.clone(),
                        session_dir: session_dir.clone(),
                        dir,
                    })
                })
        };
        // Breadth first: most sockets are made in the session's own cgroup.
        let mut level = Vec::new();
        for (index, (_, dir)) in roots.iter().enumerate() {
            match fs::metadata(dir) {
                Ok(meta) if meta.ino() == id => return hit(index, dir.clone()),
                Ok(_) => level.push((index, dir.clone())),
                Err(_) => {}
            }
        }
        // Each session's own budget: one session's many sub-cgroups cannot hide another's.
        let mut visited = vec![0usize; roots.len()];
        for _ in 0..MAX_SUB_CGROUP_DEPTH {
            let mut next = Vec::new();
            for (index, dir) in level {
                let Ok(entries) = fs::read_dir(&dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    if entry.ino() == id {
                        return hit(index, entry.path());
                    }
                    visited[index] += 1;
                    if visited[index] > MAX_SUB_CGROUPS {
                        return CgroupLookup::Unknown;
                    }
                    next.push((index, entry.path()));
                }
            }
            if next.is_empty() {
                return CgroupLookup::NotInSessions;
            }
            level = next;
        }
        // Deeper than the session limits allow (see `place_in_new_cgroup`): not searched, so
        // not known to be outside the sessions.
        CgroupLookup::Unknown
    }

    /// The directory of a session's cgroup (`/agentsh/<id>` as a placement names it).
    pub fn cgroup_dir(&self, cgroup: &str) -> Option<PathBuf> {
        match &self.tracking {
            Tracking::Cgroup { mount, .. } => Some(mount.join(cgroup.trim_start_matches('/'))),
            Tracking::Process => None,
        }
    }

    pub fn is_live(&self, id: &str) -> bool {
        lock(&self.live).contains_key(id)
    }

    /// Sessions that ended since the last call (cgroup empty, or launcher gone); their cgroups
    /// are removed.
    pub fn reap(&self) -> Vec<String> {
        let mut live = lock(&self.live);
        let ended: Vec<String> = live
            .iter()
            .filter(|(_, root)| match (root, &self.tracking) {
                (Placement::Cgroup(rel), Tracking::Cgroup { mount, .. }) => {
                    !populated(&mount.join(rel.trim_start_matches('/')))
                }
                (Placement::Process { pid, start_time: t }, _) => {
                    start_time(*pid).map_or(true, |now| now != *t)
                }
                (Placement::Cgroup(_), Tracking::Process) => true,
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &ended {
            if let (Some(Placement::Cgroup(rel)), Tracking::Cgroup { mount, .. }) =
                (live.remove(id), &self.tracking)
            {
                remove_tree(&mount.join(rel.trim_start_matches('/')));
            }
        }
        ended
    }
}

/// How deep a session may nest sub-cgroups, and how many it may have: set on its cgroup
/// (`cgroup.max.depth`, `cgroup.max.descendants`, which stay root's), so that its
/// sub-cgroups can always be searched whole.
const SESSION_MAX_DEPTH: usize = 8;
const SESSION_MAX_DESCENDANTS: usize = 1024;
/// How deep below a session's cgroup its sub-cgroups are searched for a cgroup id, and how
/// many of each session's at most: past the session limits, so a search that runs out means
/// the limits failed, and the answer is "unknown", never "not a session's".
const MAX_SUB_CGROUP_DEPTH: usize = SESSION_MAX_DEPTH + 1;
const MAX_SUB_CGROUPS: usize = 4 * SESSION_MAX_DESCENDANTS;

/// What [`Sessions::session_of_cgroup_id`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLookup {
    Found(CgroupHit),
    /// No live session's cgroup tree has that id.
    NotInSessions,
    /// A session's tree was larger than can be searched.
    Unknown,
}

/// Where [`Sessions::session_of_cgroup_id`] found a cgroup id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupHit {
    pub session: String,
    /// The session's cgroup directory.
    pub session_dir: PathBuf,
    /// The directory with that id: `session_dir` or one below it.
    pub dir: PathBuf,
}

/// The processes of cgroup `dir` and of the cgroups below it.
pub fn cgroup_tree_pids(dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    collect_cgroup_pids(dir, &mut pids, 0);
    pids
}

/// The sub-cgroup agentshd moves itself into when systemd delegated its unit's cgroup to it
/// (see [`enter_daemon_subgroup`]).
pub const DAEMON_SUBGROUP: &str = "daemon";

/// The sessions' parent for `cgroup_parent: auto`, from agentshd's own cgroup: `sessions`
/// beside the daemon's sub-cgroup (or under its cgroup, when it has none), `/agentsh` when it
/// runs at the root.
pub fn auto_cgroup_parent(own: &str) -> String {
    if own == "/" {
        return "/agentsh".to_owned();
    }
    let unit = own
        .strip_suffix(DAEMON_SUBGROUP)
        .and_then(|rest| rest.strip_suffix('/'))
        .filter(|unit| !unit.is_empty())
        .unwrap_or(own);
    format!("{unit}/sessions")
}

/// Under systemd (`Delegate=yes`; `$INVOCATION_ID` is set for services) agentshd moves itself
/// from its unit's cgroup into `<unit>/daemon`, so that its sessions sit beside it in
/// `<unit>/sessions` and the unit's own cgroup holds no process (cgroup v2 lets only such a
/// cgroup hand controllers down). Elsewhere it stays where it is. Its new cgroup, if it moved.
pub fn enter_daemon_subgroup() -> Result<Option<String>, String> {
    if std::env::var_os("INVOCATION_ID").is_none() {
        return Ok(None);
    }
    let own = cgroup_of(std::process::id()).map_err(|e| e.to_string())?;
    if own == "/" || own.ends_with(&format!("/{DAEMON_SUBGROUP}")) {
        return Ok(None);
    }
    let mount = kernel::cgroup2_mount().map_err(|e| e.to_string())?;
    let dir = mount
        .join(own.trim_start_matches('/'))
        .join(DAEMON_SUBGROUP);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // "0": the writing process, all its threads.
    fs::write(dir.join("cgroup.procs"), "0")
        .map_err(|e| format!("cannot move into {}: {e}", dir.display()))?;
    Ok(Some(format!("{own}/{DAEMON_SUBGROUP}")))
}

/// Finds the cgroup2 mount and makes sure the session parent exists and is ours.
fn cgroup_parent(parent: &CgroupParent) -> Result<(PathBuf, String), String> {
    let mount = kernel::cgroup2_mount().map_err(|e| e.to_string())?;
    let rel = match parent {
        CgroupParent::Path(path) => path.display().to_string(),
        CgroupParent::Auto => {
            auto_cgroup_parent(&cgroup_of(std::process::id()).map_err(|e| e.to_string())?)
        }
    };
    let dir = mount.join(rel.trim_start_matches('/'));
    match fs::create_dir_all(&dir) {
        Ok(()) => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    // Creating is not enough: moving processes needs write access to cgroup.procs files.
    let probe = dir.join("cgroup.procs");
    fs::OpenOptions::new()
        .write(true)
        .open(&probe)
        .map_err(|e| format!("cannot write {}: {e}", probe.display()))?;
    Ok((mount, rel))
}

fn place_in_new_cgroup(dir: &Path, pid: u32, owner: u32) -> Result<(), SessionError> {
    fs::create_dir(dir).map_err(|source| SessionError::Create {
        path: dir.to_owned(),
        source,
    })?;
    // Bounds on what the agent may build below its session, so that a socket's cgroup can
    // always be traced to it. Root's files: the agent cannot raise them.
    for (name, value) in [
        ("cgroup.max.depth", SESSION_MAX_DEPTH),
        ("cgroup.max.descendants", SESSION_MAX_DESCENDANTS),
    ] {
        let path = dir.join(name);
        if let Err(source) = fs::write(&path, value.to_string()) {
            let _ = fs::remove_dir(dir);
            return Err(SessionError::Create { path, source });
        }
    }
    // The process first, then the delegation: under systemd agentshd has no CAP_DAC_OVERRIDE,
    // and a cgroup.procs already given to the agent's user would refuse root's write.
    let procs = dir.join("cgroup.procs");
    if let Err(source) = fs::write(&procs, pid.to_string()) {
        let _ = fs::remove_dir(dir);
        return Err(SessionError::Place {
            pid,
            path: procs,
            source,
        });
    }
    // Delegation: the agent's user may organise its own processes below the session.
    if owner != 0 {
        let uid = Some(nix::unistd::Uid::from_raw(owner));
        for name in [
            "",
            "cgroup.procs",
            "cgroup.threads",
            "cgroup.subtree_control",
        ] {
            let path = if name.is_empty() {
                dir.to_owned()
            } else {
                dir.join(name)
            };
            // (The process is placed: the caller's failure path ends it, and the empty
            // cgroup goes with the session.)
            nix::unistd::chown(&path, uid, None).map_err(|err| SessionError::Create {
                path,
                source: err.into(),
            })?;
        }
    }
    Ok(())
}

/// Whether a cgroup (or any below it) still has processes.
fn populated(dir: &Path) -> bool {
    match fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l.trim() == "populated 1"),
        // Gone (removed by someone else) means empty.
        Err(_) => false,
    }
}

/// Removes a cgroup and its empty descendants, deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// The processes of `dir` and of the cgroups below it (depth-bounded against a loop).
fn collect_cgroup_pids(dir: &Path, pids: &mut Vec<u32>, depth: usize) {
    if depth > 32 {
        return;
    }
    if let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            collect_cgroup_pids(&entry.path(), pids, depth + 1);
        }
    }
}

/// The cgroup v2 path of a process (`0::/path` in /proc/PID/cgroup).
pub fn cgroup_of(pid: u32) -> Result<String, SessionError> {
    let text = read_proc(pid, "cgroup")?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim().to_owned())
        .ok_or_else(|| SessionError::Proc {
            pid,
            source: std::io::Error::other("no cgroup v2 entry"),
        })
}

/// The parent pid of a process.
pub fn parent_of(pid: u32) -> Result<u32, SessionError> {
    stat_field(pid, 4)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| SessionError::Proc {
            pid,
            source: std::io::Error::other("unreadable stat"),
        })
}

/// The start time of a process, in clock ticks since boot.
pub fn start_time(pid: u32) -> Result<u64, SessionError> {
    stat_field(pid, 22)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| SessionError::Proc {
            pid,
            source: std::io::Error::other("unreadable stat"),
        })
}

/// Field `n` (1-based, as in proc(5)) of /proc/PID/stat. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let text = read_proc(pid, "stat").ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace()
        .nth(n.checked_sub(3)?)
        .map(str::to_owned)
}

fn read_proc(pid: u32, file: &str) -> Result<String, SessionError> {
    let mut text = String::new();
    fs::File::open(format!("/proc/{pid}/{file}"))
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|source| SessionError::Proc { pid, source })?;
    Ok(text)
}

/// A new session id: 12 hex digits from the kernel's random pool.
pub fn new_id() -> String {
    let mut bytes = [0u8; 6];
    let filled = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        // No urandom: time and pid still make a collision within one daemon unlikely.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mixed = nanos ^ (u128::from(std::process::id()) << 64);
        bytes.copy_from_slice(&mixed.to_le_bytes()[..6]);
    }
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auto_parent_is_beside_the_daemon_or_agentsh_at_the_root() {
        assert_eq!(auto_cgroup_parent("/"), "/agentsh");
        assert_eq!(
            auto_cgroup_parent("/system.slice/agentshd.service"),
            "/system.slice/agentshd.service/sessions"
        );
        // Moved into its sub-cgroup: the sessions beside it.
        assert_eq!(
            auto_cgroup_parent("/system.slice/agentshd.service/daemon"),
            "/system.slice/agentshd.service/sessions"
        );
        assert_eq!(auto_cgroup_parent("/daemon"), "/daemon/sessions");
    }

    #[test]
    fn proc_fields_of_this_process() {
        let me = std::process::id();
        assert_eq!(
            parent_of(me).unwrap(),
            nix::unistd::getppid().as_raw() as u32
        );
        assert!(start_time(me).unwrap() > 0);
        assert!(cgroup_of(me).unwrap().starts_with('/'));
    }

    /// A daemon run that tracks sessions by process ancestry.
    fn by_ancestry() -> Sessions {
        Sessions {
            tracking: Tracking::Process,
            limitations: Vec::new(),
            live: Mutex::default(),
        }
    }

    #[test]
    fn process_tracking_follows_ancestry_and_ends_with_the_launcher() {
        let sessions = by_ancestry();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        sessions.create("s1", child.id(), me, 0).unwrap();
        // This process is the launcher: it and its children are in the session.
        assert_eq!(sessions.session_of(child.id()).as_deref(), Some("s1"));
        assert_eq!(sessions.session_of(me).as_deref(), Some("s1"));
        assert_eq!(sessions.session_of(1), None);
        assert!(sessions.reap().is_empty());
        // A pid that is not our child is refused.
        assert!(matches!(
            sessions.create("s2", 1, me, 0),
            Err(SessionError::NotYourChild { .. })
        ));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_process_tracked_session_is_resumed_while_its_launcher_runs() {
        let tracker = by_ancestry;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = std::process::id();
        let placement = tracker().create("s1", child.id(), me, 0).unwrap();
        // A new daemon run: nothing is known until the session is resumed.
        let restarted = tracker();
        assert_eq!(restarted.session_of(child.id()), None);
        assert!(restarted.resume("s1", &placement));
        assert_eq!(restarted.session_of(child.id()).as_deref(), Some("s1"));
        // A launcher that is gone (or a pid reused since) is not taken back.
        let gone = Placement::Process {
            pid: me,
            start_time: start_time(me).unwrap() + 1,
        };
        assert!(!tracker().resume("s2", &gone));
        // Nor a cgroup placement under process tracking.
        assert!(!tracker().resume("s3", &Placement::Cgroup("/agentsh/s3".into())));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn ids_are_distinct_hex() {
        let a = new_id();
        let b = new_id();
        assert_eq!(a.len(), 12);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
