//! A tools/list result: per tool, pin comparison (rug pulls), poisoning detection and
//! shadowing; the session's registry learns every tool.

use serde_json::{Value, json};

use super::{Engine, ListVerdict, Session, read, write};
use crate::analyzer::{Categories, categorize};
use crate::audit::{Action, Event, EventKind};
use crate::config::{self, McpPolicy, PinAction};
use crate::inspect::{self, Detector, Finding, Scope, SessionTools};
use crate::mcp::{ToolHash, definition_hash};
use crate::registry::{Entry, Hold, ToolState};
use crate::store::{Approval, ToolPin, now_secs};

impl Engine {
    /// Decides which tools of a tools/list result from `server` the client may see.
    pub fn tools_listed(&self, session: &Session, server: &str, tools: &[Value]) -> ListVerdict {
        let rules = session.rules();
        let policy = rules.mcp();
        self.register_server(session, &rules, server);
        let server_withheld = read(&session.registry)
            .server(server)
            .is_some_and(|s| s.withheld.is_some());
        // The session as the detector sees it: every server's tools, this listing's included
        // (a description naming a sibling names its own server's tool, not another's).
        let mut session_tools = read(&session.registry).session_tools().clone();
        let names: Vec<&str> = tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        // Names the session had not seen: another server's description that named one of
        // them was judged before it existed, and is judged again below.
        let new_names: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !session_tools.knows(n))
            .collect();
        for name in &names {
            session_tools.add(server, name);
        }
        let mut keep = Vec::with_capacity(tools.len());
        for definition in tools {
            if server_withheld {
                // Its look-alike event said why; none of its tools reach the model.
                keep.push(false);
                continue;
            }
            let name = definition.get("name").and_then(Value::as_str);
            let previous = name.and_then(|n| read(&session.registry).get(server, n).cloned());
            let (pinned, approval) = match name {
                Some(name) => self.pin_and_approval(session, server, name),
                None => (None, None),
            };
            let Some(mut decision) = evaluate(
                policy,
                &rules.detector,
                Listed {
                    server,
                    definition,
                    previous: previous.as_ref(),
                    pinned: pinned.as_ref(),
                    approval: approval.as_ref(),
                    session_tools: &session_tools,
                },
            ) else {
                self.record(
                    session,
                    Event::new(
                        EventKind::McpMessageRefused,
                        server,
                        Action::Block,
                        "tool without a name removed from tools/list",
                    )
                    .details(json!({"from": "server"})),
                );
                keep.push(false);
                continue;
            };
            let owner = read(&session.registry)
                .owner_of(server, &decision.name)
                .map(str::to_owned);
            if let Some(owner) = owner {
                check_shadowing(policy, server, &owner, &mut decision);
            }
            self.settle(session, server, &mut decision);
            keep.push(decision.keep());
            write(&session.registry).insert(
                server,
                &decision.name,
                Entry {
                    hash: decision.hash,
                    definition: definition.clone(),
                    categories: decision.categories,
                    state: decision.state,
                },
            );
        }
        if !new_names.is_empty() {
            self.rejudge_naming(session, &rules, server, &new_names);
        }
        ListVerdict { keep }
    }

    /// The servers listed before `server` whose descriptions name one of its new tools: read
    /// again now that the session knows whose tool it is, so the order in which servers list
    /// does not decide whether steering to another server's tool is seen. A finding is an
    /// `mcp_detection`; under `on_detection: block` the tool is withheld from then on (its
    /// calls refused, the next listing without it).
    fn rejudge_naming(
        &self,
        session: &Session,
        rules: &super::Rules,
        server: &str,
        names: &[&str],
    ) {
        let policy = rules.mcp();
        let detection = &policy.detection;
        if !detection.enabled {
            return;
        }
        let lowered: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
        let mut found = Vec::new();
        {
            let registry = read(&session.registry);
            let tools = registry.session_tools();
            for (other, entries) in registry.servers().filter(|(s, _)| *s != server) {
                for (name, entry) in &entries.tools {
                    if entry.state != ToolState::Trusted {
                        continue;
                    }
                    let text = entry.definition.to_string().to_lowercase();
                    if !lowered.iter().any(|n| text.contains(n.as_str())) {
                        continue;
                    }
                    let scope = Scope {
                        session: tools,
                        server: other,
                        tool: Some(name),
                    };
                    let findings: Vec<Finding> = rules
                        .detector
                        .scan_tool_in(&entry.definition, Some(&scope))
                        .into_iter()
                        .filter(|f| {
                            f.rule == "intent.directs_to_other_servers_tool"
                                && f.severity >= detection.alert_threshold
                                && detection.reports(&f.category)
                        })
                        .collect();
                    if !findings.is_empty() {
                        found.push((other.to_owned(), name.clone(), entry.hash, findings));
                    }
                }
            }
        }
        for (other, name, hash, findings) in found {
            let (_, approval) = self.pin_and_approval(session, &other, &name);
            if approval.is_some_and(|a| a.hash == hash.to_string()) {
                continue; // a person let this very definition through
            }
            let first = &findings[0];
            let reason = format!(
                "tool '{name}' looks poisoned now that server '{server}' has listed its tools: {} ({}) in {}: \"{}\"",
                first.category.as_str(),
                first.severity.as_str(),
                first.field,
                first.matched
            );
            let block = detection.on_detection == config::Action::Block;
            let enforced = block && policy.enforce_policy;
            let (action, text) = match (block, enforced) {
                (true, true) => (Action::Block, reason.clone()),
                (true, false) => (Action::Alert, format!("audit-only, would block: {reason}")),
                (false, _) => (Action::Alert, reason.clone()),
            };
            let mut event = Event::new(EventKind::McpDetection, &other, action, text)
                .tool(&name)
                .hash(hash)
                .details(json!({
                    "max_severity": inspect::max_severity(&findings).map(|s| s.as_str()),
                    "findings": findings,
                    "listed_after": server,
                }));
            if let Some(severity) = inspect::max_severity(&findings) {
                event = event.severity(severity);
            }
            if block {
                event = event.rule("detection");
            }
            self.record(session, event);
            if enforced && let Some(entry) = write(&session.registry).get_mut(&other, &name) {
                entry.state = ToolState::Withheld {
                    hold: Hold::Detection,
                    rule: "detection".to_owned(),
                    reason,
                };
            }
        }
    }

    /// A definition's pin and approval, if any (a store error is recorded, and counts as none).
    pub(super) fn pin_and_approval(
        &self,
        session: &Session,
        server: &str,
        name: &str,
    ) -> (Option<ToolPin>, Option<Approval>) {
        let pinned = self.pins.tool_pin(server, name).unwrap_or_else(|err| {
            self.store_error(session, server, &err);
            None
        });
        let approval = self.pins.approval(server, name).unwrap_or_else(|err| {
            self.store_error(session, server, &err);
            None
        });
        (pinned, approval)
    }

    /// Stores what a decision pins or keeps pending, and records its events.
    pub(super) fn settle(&self, session: &Session, server: &str, decision: &mut ListingDecision) {
        let stored = match (&decision.pin_write, &decision.pending_write) {
            (Some(pin), _) => self.pins.pin_tool(server, &decision.name, pin),
            (None, Some(seen)) => self.pins.set_pending(server, &decision.name, seen),
            (None, None) => Ok(()),
        };
        if let Err(err) = stored {
            self.store_error(session, server, &err);
        }
        for event in std::mem::take(&mut decision.events) {
            self.record(session, event);
        }
    }
}

/// A second server offering a tool name the session already has: the newcomer's tool is the
/// suspect (a model picks tools by name, and the original came first).
fn check_shadowing(policy: &McpPolicy, server: &str, owner: &str, d: &mut ListingDecision) {
    let cross = &policy.cross_server;
    if !(cross.enabled && cross.shadow_tool.enabled) {
        return;
    }
    let reason = format!(
        "tool '{}' of server '{server}' shadows the tool of the same name that server '{owner}' registered first",
        d.name
    );
    let event = Event::new(EventKind::McpCrossServer, server, Action::Alert, "")
        .details(json!({"rule": "shadow_tool", "original_server": owner}));
    match cross.shadow_tool.action {
        config::Action::Block => withhold(
            policy,
            d,
            "cross_server/shadow_tool",
            Hold::Shadowed,
            reason,
            event,
        ),
        config::Action::Alert => d
            .events
            .push(finish(event, d, Action::Alert, reason).rule("cross_server/shadow_tool")),
    }
    if d.state != ToolState::Trusted {
        d.pin_write = None;
    }
}

/// The fields that make up a definition's hash, for "what changed" reports.
pub const HASHED_FIELDS: &[&str] = &[
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

pub struct Listed<'a> {
    pub server: &'a str,
    pub definition: &'a Value,
    /// This run's entry for the same name, if it was listed before.
    pub previous: Option<&'a Entry>,
    /// The pin (persistent, or this run's when there is no state dir), if any.
    pub pinned: Option<&'a ToolPin>,
    /// A person's approval despite a detection, if any (it counts for its hash only).
    pub approval: Option<&'a Approval>,
    /// Every tool of the session by server: a description that directs the model to another
    /// server's tool is read as such.
    pub session_tools: &'a SessionTools,
}

pub struct ListingDecision {
    pub name: String,
    pub hash: ToolHash,
    pub categories: Categories,
    pub state: ToolState,
    /// A pin to store (first sight with auto_trust_first, or a change accepted by `allow`).
    pub pin_write: Option<ToolPin>,
    /// A changed definition to keep until someone trusts it (`agentshctl mcp pins trust`).
    pub pending_write: Option<ToolPin>,
    pub events: Vec<Event>,
}

impl ListingDecision {
    /// Whether the tool stays in the list the client sees.
    pub fn keep(&self) -> bool {
        self.state == ToolState::Trusted
    }
}

/// Decides one listed tool. `None` for an entry without a usable name (the caller drops it).
pub fn evaluate(policy: &McpPolicy, detector: &Detector, tool: Listed) -> Option<ListingDecision> {
    let name = tool.definition.get("name")?.as_str()?.to_owned();
    let hash = definition_hash(tool.definition);
    let categories = categorize(&name, Some(tool.definition));
    let mut decision = ListingDecision {
        name,
        hash,
        categories,
        state: ToolState::Trusted,
        pin_write: None,
        pending_write: None,
        events: Vec::new(),
    };
    if policy.version_pinning.enabled {
        check_pin(policy, &tool, &mut decision);
    } else if tool.previous.is_none() {
        decision
            .events
            .push(seen(&tool, &decision, "first seen (pinning disabled)"));
    }
    if policy.detection.enabled {
        check_detection(policy, detector, &tool, &mut decision);
    }
    // A definition held back is never trusted: first sight pins only what the client may use.
    if decision.state != ToolState::Trusted {
        decision.pin_write = None;
    }
    Some(decision)
}

fn seen(tool: &Listed, d: &ListingDecision, reason: &str) -> Event {
    Event::new(EventKind::McpToolSeen, tool.server, Action::Allow, reason)
        .tool(&d.name)
        .hash(d.hash)
}

fn check_pin(policy: &McpPolicy, tool: &Listed, d: &mut ListingDecision) {
    let pinning = &policy.version_pinning;
    // The baseline is the pin, never the last sighting: after a withheld change the registry
    // holds the new definition, and comparing with it would let a second listing through.
    let baseline = tool.pinned.map(|pin| (pin.hash.clone(), &pin.definition));
    let Some((pinned_hash, pinned_definition)) = baseline else {
        if pinning.auto_trust_first {
            d.pin_write = Some(ToolPin {
                hash: d.hash.to_string(),
                definition: tool.definition.clone(),
                pinned_at: now_secs(),
                trusted_by: "auto".into(),
            });
            d.events
                .push(seen(tool, d, "first seen; definition pinned"));
        } else {
            withhold(
                policy,
                d,
                "version_pinning",
                Hold::Pin,
                format!(
                    "tool '{}' is new and not trusted yet (auto_trust_first is off); trust it with `agentshctl mcp pins trust {}:{}`",
                    d.name, tool.server, d.name
                ),
                Event::new(EventKind::McpToolSeen, tool.server, Action::Block, ""),
            );
        }
        return;
    };
    if pinned_hash == d.hash.to_string() {
        if tool.previous.is_none() {
            d.events.push(seen(tool, d, "matches its pin"));
        }
        return;
    }
    let changed = changed_fields(pinned_definition, tool.definition);
    let reason = format!(
        "definition of tool '{}' changed since it was pinned ({} -> {}; changed: {}); review it with `agentshctl mcp pins diff {server}:{name}` and accept it with `agentshctl mcp pins trust {server}:{name}`",
        d.name,
        pinned_hash,
        d.hash,
        changed.join(", "),
        server = tool.server,
        name = d.name,
    );
    let details = json!({
        "pinned_hash": pinned_hash,
        "new_hash": d.hash.to_string(),
        "changed_fields": changed,
    });
    let event =
        Event::new(EventKind::McpToolChanged, tool.server, Action::Alert, "").details(details);
    let seen = ToolPin {
        hash: d.hash.to_string(),
        definition: tool.definition.clone(),
        pinned_at: now_secs(),
        trusted_by: String::new(),
    };
    match pinning.on_change {
        PinAction::Block => {
            d.pending_write = Some(seen);
            withhold(policy, d, "version_pinning", Hold::Pin, reason, event);
        }
        PinAction::Alert => {
            d.pending_write = Some(seen);
            d.events.push(finish(event, d, Action::Alert, reason));
        }
        PinAction::Allow => {
            d.pin_write = Some(ToolPin {
                hash: d.hash.to_string(),
                definition: tool.definition.clone(),
                pinned_at: now_secs(),
                trusted_by: "auto (on_change: allow)".into(),
            });
            d.events.push(finish(event, d, Action::Allow, reason));
        }
    }
}

fn check_detection(
    policy: &McpPolicy,
    detector: &Detector,
    tool: &Listed,
    d: &mut ListingDecision,
) {
    let detection = &policy.detection;
    let scope = Scope {
        session: tool.session_tools,
        server: tool.server,
        tool: Some(&d.name),
    };
    let findings: Vec<Finding> = detector
        .scan_tool_in(tool.definition, Some(&scope))
        .into_iter()
        .filter(|f| f.severity >= detection.alert_threshold && detection.reports(&f.category))
        .collect();
    if findings.is_empty() {
        return;
    }
    let worst = inspect::max_severity(&findings).map(|s| s.as_str());
    let first = &findings[0];
    let reason = format!(
        "tool '{}' looks poisoned: {} ({}) in {}: \"{}\"{}",
        d.name,
        first.category.as_str(),
        first.severity.as_str(),
        first.field,
        first.matched,
        match findings.len() {
            1 => String::new(),
            n => format!(" and {} more finding(s)", n - 1),
        }
    );
    let mut event = Event::new(EventKind::McpDetection, tool.server, Action::Alert, "")
        .details(json!({"max_severity": worst, "findings": findings}));
    if let Some(severity) = inspect::max_severity(&findings) {
        event = event.severity(severity);
    }
    let approved = tool
        .approval
        .filter(|a| a.hash == d.hash.to_string())
        .map(|a| a.approved_by.as_str());
    match (policy.detection.on_detection, approved) {
        (config::Action::Block, Some(by)) => {
            let reason = format!("{reason}; let through: approved by {by}");
            d.events
                .push(finish(event, d, Action::Alert, reason).rule("detection"));
        }
        (config::Action::Block, None) => {
            let reason = format!(
                "{reason}; if it is safe, approve it with `agentshctl mcp approve {}:{}`",
                tool.server, d.name
            );
            withhold(policy, d, "detection", Hold::Detection, reason, event);
        }
        (config::Action::Alert, _) => d.events.push(finish(event, d, Action::Alert, reason)),
    }
}

/// Withholds the tool (or, in audit-only mode, records that it would have been).
fn withhold(
    policy: &McpPolicy,
    d: &mut ListingDecision,
    rule: &str,
    hold: Hold,
    reason: String,
    event: Event,
) {
    if !policy.enforce_policy {
        let reason = format!("audit-only, would block: {reason}");
        d.events
            .push(finish(event, d, Action::Alert, reason).rule(rule));
        return;
    }
    d.events
        .push(finish(event, d, Action::Block, reason.clone()).rule(rule));
    // The first block keeps its reason.
    if d.state == ToolState::Trusted {
        d.state = ToolState::Withheld {
            hold,
            rule: rule.to_owned(),
            reason,
        };
    }
}

fn finish(mut event: Event, d: &ListingDecision, action: Action, reason: String) -> Event {
    event.action = action;
    event.reason = reason;
    event.tool(&d.name).hash(d.hash)
}

/// Which hashed fields differ between two definitions.
pub fn changed_fields(old: &Value, new: &Value) -> Vec<&'static str> {
    let field = |v: &Value, k: &str| v.get(k).filter(|x| !x.is_null()).cloned();
    HASHED_FIELDS
        .iter()
        .copied()
        .filter(|k| field(old, k) != field(new, k))
        .collect()
}
