//! The one decision point. Interception points (the stdio shim today; the LLM proxy and the
//! HTTP MCP path later) turn traffic into observations and ask the engine for verdicts through
//! a [`Decider`]; the engine keeps each session's registry and history, so cross-server rules
//! see every server of a session, and records every decision as an event.
//!
//! The engine runs in agentshd for sessions, and in the shim's own process for standalone use
//! (`agentsh-shim --policy FILE`); both run this code.

mod calls;
pub mod decider;
pub mod instructions;
pub mod intercept;
pub mod listing;
mod output;
mod pins;
pub mod provider;
mod unseen;
pub mod verdict;

use crate::sync::lock;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, mpsc};

use serde_json::json;

pub use decider::{DecideError, Decider, Local};
pub use intercept::Intercepted;
pub use verdict::{
    BinaryVerdict, CallVerdict, CapabilityVerdict, InstructionsVerdict, ListVerdict, OutputVerdict,
    RequestVerdict, ServerSetup,
};

use crate::analyzer::{RateLimiter, SessionHistory, look_alike};
use crate::audit::{Action, Event, EventKind, EventSink};
use crate::config::{self, Policy};
use crate::inspect::{CustomPattern, Detector, DetectorOptions, InspectError};
use crate::registry::{Hold, Registry, ToolState};
use crate::store::{Approval, PinStore, StoreError, now_secs};
use pins::Pins;

/// A policy with what is compiled from it.
#[derive(Debug)]
pub struct Rules {
    pub policy: Arc<Policy>,
    pub detector: Arc<Detector>,
}

impl Rules {
    /// Builds the detector the policy asks for (its custom patterns included).
    pub fn compile(policy: Policy) -> Result<Arc<Self>, InspectError> {
        let custom_patterns = policy
            .mcp()
            .detection
            .custom_patterns
            .iter()
            .map(|p| CustomPattern {
                id: p.id.clone(),
                pattern: p.pattern.as_str().to_owned(),
                category: p.category.clone(),
                severity: p.severity,
            })
            .collect();
        let detector = Detector::new(DetectorOptions { custom_patterns })?;
        Ok(Arc::new(Self {
            policy: Arc::new(policy),
            detector: Arc::new(detector),
        }))
    }

    pub fn mcp(&self) -> &config::McpPolicy {
        self.policy.mcp()
    }
}

/// One agent session's state in the engine.
pub struct Session {
    id: Option<String>,
    rules: RwLock<Arc<Rules>>,
    /// Whether a reload of the daemon's policy applies (false for `run --policy` sessions).
    follows_default: bool,
    registry: RwLock<Registry>,
    analysis: Mutex<Analysis>,
    watchers: Mutex<Vec<Watcher>>,
}

/// An interception point waiting to hear that a held tool of `server` was let through
/// (approve, pins trust), so that it can tell its client to list the tools again.
struct Watcher {
    server: String,
    released: mpsc::Sender<String>,
}

#[derive(Default)]
struct Analysis {
    history: SessionHistory,
    rates: RateLimiter,
}

impl Session {
    /// `None` for the standalone shim's implicit session.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&read(&self.rules))
    }

    pub fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        read(&self.registry)
    }

    /// Tells the watchers of `server` that `tool` is let through now; forgets those that hung up.
    fn released(&self, server: &str, tool: &str) {
        lock(&self.watchers)
            .retain(|w| w.server != server || w.released.send(tool.to_owned()).is_ok());
    }
}

/// The engine: the default rules, the pins, the sessions and where events go.
pub struct Engine {
    default_rules: RwLock<Arc<Rules>>,
    pins: Pins,
    sink: Arc<dyn EventSink>,
    sessions: RwLock<HashMap<String, Arc<Session>>>,
    /// Server names seen before (pins) or in any session: the references for look-alikes.
    known_servers: Mutex<BTreeSet<String>>,
}

impl Engine {
    /// `pins`: the state dir's pin store, or `None` to keep pins in memory (standalone shim
    /// without a state dir: rug pulls are then caught within one run only).
    pub fn new(rules: Arc<Rules>, pins: Option<PinStore>, sink: Arc<dyn EventSink>) -> Self {
        let mut known = BTreeSet::new();
        if let Some(store) = &pins {
            if let Ok(all) = store.all_tool_pins() {
                known.extend(all.into_iter().map(|(server, _, _)| server));
            }
            if let Ok(all) = store.all_binary_pins() {
                known.extend(all.into_iter().map(|(server, _)| server));
            }
        }
        Self {
            default_rules: RwLock::new(rules),
            pins: Pins::new(pins),
            sink,
            sessions: RwLock::default(),
            known_servers: Mutex::new(known),
        }
    }

    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&read(&self.default_rules))
    }

    pub fn pin_store(&self) -> Option<&PinStore> {
        self.pins.store()
    }

    /// Replaces the default rules; sessions that follow the default see them on their next
    /// observation.
    pub fn reload(&self, rules: Arc<Rules>) {
        *write(&self.default_rules) = Arc::clone(&rules);
        for session in read(&self.sessions).values() {
            if session.follows_default {
                *write(&session.rules) = Arc::clone(&rules);
            }
        }
    }

    /// The session `id`, created with the default rules on first use.
    pub fn session(&self, id: Option<&str>) -> Arc<Session> {
        let key = id.unwrap_or_default();
        if let Some(session) = read(&self.sessions).get(key) {
            return Arc::clone(session);
        }
        self.open_session(id, None)
    }

    /// Starts (or returns) a session; `rules` replaces the default rules for it.
    pub fn open_session(&self, id: Option<&str>, rules: Option<Arc<Rules>>) -> Arc<Session> {
        let key = id.unwrap_or_default().to_owned();
        let mut sessions = write(&self.sessions);
        Arc::clone(sessions.entry(key).or_insert_with(|| {
            Arc::new(Session {
                id: id.map(str::to_owned),
                follows_default: rules.is_none(),
                rules: RwLock::new(rules.unwrap_or_else(|| self.rules())),
                registry: RwLock::default(),
                analysis: Mutex::default(),
                watchers: Mutex::default(),
            })
        }))
    }

    /// Forgets a session's state (its events stay in the store).
    pub fn close_session(&self, id: &str) {
        write(&self.sessions).remove(id);
    }

    pub fn find_session(&self, id: &str) -> Option<Arc<Session>> {
        read(&self.sessions).get(id).cloned()
    }

    /// The names of the tools of `server` that `session` lets through from now on, after an
    /// approval or a pin trust held them back, as they happen.
    pub fn watch_releases(&self, session: &Session, server: &str) -> mpsc::Receiver<String> {
        let (released, receiver) = mpsc::channel();
        lock(&session.watchers).push(Watcher {
            server: server.to_owned(),
            released,
        });
        receiver
    }

    /// Records an event of `session`.
    pub fn record(&self, session: &Session, mut event: Event) {
        if event.session.is_none() {
            event.session = session.id.clone();
        }
        self.sink.record(event);
    }

    /// Records an event outside any session (daemon start, reloads, pin trust).
    pub fn record_global(&self, event: Event) {
        self.sink.record(event);
    }

    /// A store failure: recorded as such, never mistaken for a refused message.
    fn store_error(&self, session: &Session, server: &str, err: &StoreError) {
        self.record(
            session,
            Event::new(
                EventKind::StoreError,
                server,
                Action::Alert,
                err.to_string(),
            ),
        );
    }

    /// The server's registry entry; on its first sight in the session, the look-alike check.
    fn register_server(&self, session: &Session, rules: &Rules, server: &str) {
        if read(&session.registry).server(server).is_some() {
            return;
        }
        let mut registry = write(&session.registry);
        let (_, new) = registry.register_server(server);
        if !new {
            return;
        }
        let mut known = lock(&self.known_servers);
        let similar_cfg = &rules.mcp().cross_server.name_similarity;
        // A name seen before (pinned in an earlier run, or in another session) was checked
        // then; a flagged name never joins the known names, so it is flagged every time.
        if known.contains(server) {
            return;
        }
        if !(rules.mcp().cross_server.enabled && similar_cfg.enabled) {
            known.insert(server.to_owned());
            return;
        }
        // References: known names, the session's other servers and the declared servers.
        let candidates: BTreeSet<String> = known
            .iter()
            .cloned()
            .chain(registry.servers().map(|(name, _)| name.to_owned()))
            .chain(rules.mcp().servers.iter().map(|s| s.id.clone()))
            .filter(|name| name != server)
            .collect();
        let found = look_alike(
            server,
            candidates.iter().map(String::as_str),
            similar_cfg.threshold,
        );
        if found.is_none() {
            known.insert(server.to_owned());
        }
        drop(known);
        let Some((like, score)) = found else {
            return;
        };
        let block = similar_cfg.action == config::Action::Block;
        let enforced = block && rules.mcp().enforce_policy;
        let reason = format!(
            "server name '{server}' looks like '{like}' (similarity {score:.2}, threshold {:.2})",
            similar_cfg.threshold
        );
        if enforced {
            let (entry, _) = registry.register_server(server);
            entry.withheld = Some(("cross_server/name_similarity".into(), reason.clone()));
        }
        drop(registry);
        let (action, text) = match (block, enforced) {
            (true, true) => (Action::Block, reason),
            (true, false) => (Action::Alert, format!("audit-only, would block: {reason}")),
            (false, _) => (Action::Alert, reason),
        };
        self.record(
            session,
            Event::new(EventKind::McpServerNameSimilarity, server, action, text)
                .rule("cross_server/name_similarity")
                .details(json!({"similar_to": like, "similarity": score})),
        );
    }

    /// Lets a tool held back by a detection through, for its current definition; `tool`
    /// `None` approves every such tool of `server`. Returns what was approved.
    pub fn approve(
        &self,
        server: &str,
        tool: Option<&str>,
        by: &str,
    ) -> Result<Vec<(String, String)>, StoreError> {
        // Definitions held back by a detection, in any session, with their hashes.
        let mut held: Vec<(String, String)> = Vec::new();
        for session in read(&self.sessions).values() {
            let registry = read(&session.registry);
            let Some(entry) = registry.server(server) else {
                continue;
            };
            // Instructions are held back under their own name, like a tool.
            let instructions = entry
                .instructions
                .as_ref()
                .map(|e| (instructions::INSTRUCTIONS, e));
            let tools = entry.tools.iter().map(|(name, e)| (name.as_str(), e));
            for (name, e) in tools.chain(instructions) {
                let detection = matches!(
                    e.state,
                    ToolState::Withheld {
                        hold: Hold::Detection,
                        ..
                    }
                );
                if detection && tool.is_none_or(|t| t == name) {
                    held.push((name.to_owned(), e.hash.to_string()));
                }
            }
        }
        held.sort();
        held.dedup();
        let mut approved = Vec::new();
        for (name, hash) in held {
            let approval = Approval {
                hash: hash.clone(),
                approved_by: by.to_owned(),
                approved_at: now_secs(),
            };
            self.pins.approve(server, &name, &approval)?;
            for session in read(&self.sessions).values() {
                if let Some(entry) = write(&session.registry).get_mut(server, &name)
                    && entry.hash.to_string() == hash
                    && matches!(
                        entry.state,
                        ToolState::Withheld {
                            hold: Hold::Detection,
                            ..
                        }
                    )
                {
                    entry.state = ToolState::Trusted;
                    session.released(server, &name);
                }
            }
            self.record_global(
                Event::new(
                    EventKind::McpToolApproved,
                    server,
                    Action::Allow,
                    format!("approved by {by} despite its detection"),
                )
                .tool(&name)
                .hash(&hash)
                .details(json!({"approved_by": by})),
            );
            approved.push((name, hash));
        }
        Ok(approved)
    }

    /// Makes a changed definition waiting in the pin store the pin; sessions holding that
    /// definition back let it through. `None` when nothing was pending.
    pub fn trust(
        &self,
        server: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<crate::store::ToolPin>, StoreError> {
        let Some(pin) = self.pins.trust_pending(server, tool, by)? else {
            return Ok(None);
        };
        for session in read(&self.sessions).values() {
            if let Some(entry) = write(&session.registry).get_mut(server, tool)
                && entry.hash.to_string() == pin.hash
                && matches!(
                    entry.state,
                    ToolState::Withheld {
                        hold: Hold::Pin,
                        ..
                    }
                )
            {
                entry.state = ToolState::Trusted;
                session.released(server, tool);
            }
        }
        self.record_global(
            Event::new(
                EventKind::McpPinTrusted,
                server,
                Action::Allow,
                format!("definition trusted by {by}"),
            )
            .tool(tool)
            .hash(&pin.hash)
            .details(json!({"trusted_by": by})),
        );
        Ok(Some(pin))
    }
}

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests;
