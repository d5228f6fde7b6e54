//! agentshd's control socket service: who is asking (peer credentials and cgroup), what they
//! may do, and the answer to each operation. The engine, the event log and the sessions are
//! shared by all connections.

pub mod enforcement;
mod handlers;
pub mod peer;
mod refusals;
pub mod report;
mod secrets;
mod server;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

pub use peer::Peer;
pub use server::{Listener, serve};

use crate::api::protocol::{LauncherSettings, ProxyEndpoints, Reloaded};
use crate::audit::{Action, Event, EventKind};
use crate::engine::{Engine, Rules};
use crate::session::trust::Trust;
use crate::session::{Placement, Sessions};
use crate::store::{EventLog, SessionRecord, now_secs};
use enforcement::Enforcement;

/// Called with the id of each session that ends.
pub type SessionEndHook = Box<dyn Fn(&str) + Send + Sync>;
/// Called once a session is open in the engine (the transparent proxy fetches declared
/// network servers' tools for it).
pub type SessionStartHook = Box<dyn Fn(&Arc<crate::engine::Session>) + Send + Sync>;

/// Who administers, and what sessions may choose.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Members of this group administer (root and the daemon's own user always do).
    pub admin_gid: Option<u32>,
    /// Whether a non-admin may start a session under its own policy.
    pub allow_user_policy: bool,
    pub launcher: LauncherSettings,
}

/// Everything a request handler needs.
pub struct Daemon {
    pub engine: Arc<Engine>,
    pub log: Arc<EventLog>,
    pub sessions: Sessions,
    pub settings: Settings,
    /// What this daemon cannot do here, in plain words (told to every client at hello).
    pub limitations: Vec<String>,
    /// The default policy's file, read again on reload.
    pub policy_path: PathBuf,
    /// Unmanaged sessions already recorded.
    pub unmanaged: Mutex<HashSet<String>>,
    /// The LLM proxy's endpoints, once it listens.
    pub proxy: OnceLock<ProxyEndpoints>,
    /// The sessions' CAs, once the transparent proxy runs (kernel enforcement).
    pub trust: OnceLock<Arc<Trust>>,
    /// The kernel programs, when they enforce.
    pub enforcement: OnceLock<Arc<Enforcement>>,
    /// What the transparent proxy reads and what it passes unread, once it runs.
    pub traffic: OnceLock<String>,
    /// Told the id of each session that ends (the transparent proxy forgets its state).
    pub on_session_end: OnceLock<SessionEndHook>,
    pub on_session_start: OnceLock<SessionStartHook>,
    /// This run of the daemon, told at hello: a shim that sees it change knows the daemon
    /// restarted and has forgotten what its servers listed.
    pub instance: String,
    /// The brokered secrets (`secrets:` in the config), once read.
    pub broker: OnceLock<Arc<crate::secrets::Broker>>,
    /// The LLM providers' upstreams (`providers`): hosts both proxies terminate.
    pub llm_upstreams: OnceLock<Vec<url::Url>>,
    /// Each live session's placeholders, ready for the proxies.
    session_secrets: Mutex<std::collections::HashMap<String, Arc<crate::secrets::SessionSecrets>>>,
}

impl Daemon {
    pub fn new(
        engine: Arc<Engine>,
        log: Arc<EventLog>,
        sessions: Sessions,
        settings: Settings,
        limitations: Vec<String>,
        policy_path: PathBuf,
    ) -> Self {
        Self {
            engine,
            log,
            sessions,
            settings,
            limitations,
            policy_path,
            unmanaged: Mutex::default(),
            proxy: OnceLock::new(),
            trust: OnceLock::new(),
            enforcement: OnceLock::new(),
            traffic: OnceLock::new(),
            on_session_end: OnceLock::new(),
            on_session_start: OnceLock::new(),
            instance: crate::session::new_id(),
            broker: OnceLock::new(),
            llm_upstreams: OnceLock::new(),
            session_secrets: Mutex::default(),
        }
    }

    /// The placeholders `session` holds, for the proxies to put the values in (or refuse).
    pub fn secrets_of(&self, session: &str) -> Option<Arc<crate::secrets::SessionSecrets>> {
        crate::sync::lock(&self.session_secrets)
            .get(session)
            .cloned()
    }

    /// Starts recognising `placeholders` as `session`'s.
    pub fn hold_secrets(
        &self,
        session: &str,
        placeholders: &std::collections::BTreeMap<String, String>,
    ) {
        let Some(broker) = self.broker.get() else {
            return;
        };
        if placeholders.is_empty() {
            return;
        }
        let secrets = Arc::new(broker.session(placeholders));
        crate::sync::lock(&self.session_secrets).insert(session.to_owned(), secrets);
    }

    /// Forgets an ended session's placeholders.
    pub fn release_secrets(&self, session: &str) {
        crate::sync::lock(&self.session_secrets).remove(session);
    }

    /// Ends the sessions whose cgroup emptied (or whose launcher exited): records their end
    /// and forgets their engine state. Called periodically by the daemon.
    pub fn reap_sessions(&self) {
        for id in self.sessions.reap() {
            handlers::end_session(self, &id, "every process of the session exited");
        }
    }

    /// At start: a session recorded as live whose cgroup still holds processes is taken back,
    /// under the policy it started with (its tools are learnt again from the shims); any
    /// other is recorded as ended. Returns what to tell the operator.
    pub fn resume_sessions(&self) -> Result<Vec<String>, crate::store::StoreError> {
        let mut said = Vec::new();
        for record in self.log.sessions()? {
            if record.ended_at.is_some() || record.id.starts_with(peer::UNMANAGED_PREFIX) {
                continue;
            }
            let id = &record.id;
            // Records from before placements were kept name the cgroup only.
            let placement = record
                .placement
                .clone()
                .or_else(|| record.cgroup.clone().map(Placement::Cgroup));
            let Some(placement) = placement.filter(|p| self.sessions.resume(id, p)) else {
                handlers::end_session(self, id, "session ended while agentshd was not running");
                continue;
            };
            let rules = record.policy_text.as_deref().and_then(|text| {
                let loaded = crate::config::load_str(text, &record.policy)
                    .map_err(|e| e.to_string())
                    .and_then(|policy| Rules::compile(policy).map_err(|e| e.to_string()));
                match loaded {
                    Ok(rules) => Some(rules),
                    Err(err) => {
                        said.push(format!(
                            "session {id}: its policy {} does not load any more ({err}); the daemon's policy applies",
                            record.policy
                        ));
                        None
                    }
                }
            });
            let session = self.engine.open_session(Some(id), rules);
            self.hold_secrets(id, &record.placeholders);
            if let Err(err) = self.enforce(id, &placement, &session.rules()) {
                said.push(format!(
                    "session {id}: the kernel cannot enforce it ({err}); its connections are not redirected"
                ));
            }
            if let Some(trust) = self.trust.get()
                && let Err(err) = trust.open(id, record.owner_uid, "")
            {
                said.push(format!(
                    "session {id}: no certificate authority ({err}); its TLS connections will be refused"
                ));
            }
            said.push(format!(
                "resumed session {id}{} under {}",
                record
                    .name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                record.policy
            ));
        }
        Ok(said)
    }

    /// The kernel learns a session's cgroup (with kernel enforcement and cgroup sessions).
    pub fn enforce(
        &self,
        id: &str,
        placement: &Placement,
        rules: &Arc<Rules>,
    ) -> Result<(), crate::kernel::KernelError> {
        let (Some(enforcement), Placement::Cgroup(cgroup)) = (self.enforcement.get(), placement)
        else {
            return Ok(());
        };
        match self.sessions.cgroup_dir(cgroup) {
            Some(dir) => enforcement.session_started(id, &dir, rules),
            None => Ok(()),
        }
    }

    /// Loads the default policy again. A policy that fails to load leaves the last good one
    /// in force; the error says why.
    pub fn reload_policy(&self) -> Result<Reloaded, String> {
        let loaded = crate::config::load_file(&self.policy_path)
            .map_err(|e| e.to_string())
            .and_then(|policy| {
                let warnings = policy.warnings.iter().map(ToString::to_string).collect();
                Rules::compile(policy)
                    .map(|rules| (rules, warnings))
                    .map_err(|e| e.to_string())
            });
        match loaded {
            Ok((rules, warnings)) => {
                let origin = rules.policy.origin.clone();
                let sha256 = rules.policy.sha256.clone();
                self.engine.reload(rules);
                self.engine.record_global(
                    Event::new(
                        EventKind::PolicyLoaded,
                        "",
                        Action::Allow,
                        format!("policy reloaded from {origin}"),
                    )
                    .details(serde_json::json!({"origin": origin, "sha256": sha256})),
                );
                if let Some(enforcement) = self.enforcement.get()
                    && let Err(err) = enforcement.replan(&self.engine)
                {
                    // The engine already judges by the new policy; the kernel's list is as far
                    // as it got. Said loudly: a denial it lacks lets connections through.
                    let reason = format!(
                        "policy reloaded from {origin}, but the kernel's deny list could not follow it: {err}"
                    );
                    self.engine.record_global(Event::new(
                        EventKind::PolicyLoaded,
                        "",
                        Action::Alert,
                        reason.clone(),
                    ));
                    return Err(reason);
                }
                Ok(Reloaded { origin, warnings })
            }
            Err(err) => {
                let reason =
                    format!("policy not reloaded, the last good one stays in force: {err}");
                self.engine.record_global(Event::new(
                    EventKind::PolicyLoaded,
                    "",
                    Action::Block,
                    reason.clone(),
                ));
                Err(reason)
            }
        }
    }

    /// The engine session a client's verdicts are for: its live session, or (outside every
    /// session) its user's unmanaged one, recorded the first time it is used.
    pub fn verdict_session(
        &self,
        session: Option<&str>,
        verdict_session: &str,
        uid: u32,
    ) -> Arc<crate::engine::Session> {
        if session.is_none() {
            self.note_unmanaged(verdict_session, uid);
        }
        self.engine.session(Some(verdict_session))
    }

    /// Records the unmanaged session of a user the first time one of their processes asks.
    fn note_unmanaged(&self, id: &str, uid: u32) {
        // Asked on every verdict of such a shim: the known case must not allocate.
        let first = self
            .unmanaged
            .lock()
            .map(|mut seen| !seen.contains(id) && seen.insert(id.to_owned()))
            .unwrap_or(false);
        if !first || matches!(self.log.session(id), Ok(Some(_))) {
            return;
        }
        let user = peer::user_name(uid);
        let record = SessionRecord {
            id: id.to_owned(),
            name: Some(format!("processes of {user} outside agentshctl run")),
            owner_uid: uid,
            owner: user,
            command: Vec::new(),
            cgroup: None,
            placement: None,
            policy: self.engine.rules().policy.origin.clone(),
            policy_text: None,
            started_at: now_secs(),
            ended_at: None,
            placeholders: Default::default(),
        };
        if let Err(err) = self.log.put_session(&record) {
            eprintln!("agentshd: cannot record session {id}: {err}");
        }
    }
}
