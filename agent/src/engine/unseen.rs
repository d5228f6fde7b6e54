//! Policy server names that have never named a server: a rule whose `match.server` no server
//! has, or a list entry no server matches, applies to nothing, and silently so. They are
//! found against every server agentsh has seen (pins, any session of this run, the policy's
//! declared servers) and the names an agent's configuration gives, and reported: when a
//! session starts (to the user), and when it ends (as an event).

use serde_json::json;

use super::{Engine, Rules, Session, lock, read};
use crate::audit::{Action, Event, EventKind};
use crate::config::ServerReference;

impl Engine {
    /// The places `rules` names servers that match none of the servers agentsh knows, nor
    /// any of `also` (an agent's configured names).
    pub fn unseen_server_references(&self, rules: &Rules, also: &[String]) -> Vec<ServerReference> {
        let known = lock(&self.known_servers);
        let declared = rules.mcp().servers.iter().map(|s| &s.id);
        let names: Vec<&String> = known.iter().chain(declared).chain(also).collect();
        rules
            .mcp()
            .server_references()
            .into_iter()
            .filter(|r| !names.iter().any(|n| r.glob.matches(n)))
            .collect()
    }

    /// At a session's end: one event for each policy server name that matched none of the
    /// session's servers and no server agentsh has ever seen.
    pub fn report_unseen_servers(&self, session: &Session) {
        let rules = session.rules();
        let ran: Vec<String> = read(&session.registry)
            .servers()
            .map(|(name, _)| name.to_owned())
            .collect();
        for reference in self.unseen_server_references(&rules, &ran) {
            let event = Event::new(
                EventKind::PolicyServerUnseen,
                "",
                Action::Alert,
                format!(
                    "{}, which no session has run: it applied to nothing",
                    reference.describe(&rules.policy.origin)
                ),
            )
            .details(json!({
                "policy": rules.policy.origin,
                "reference": reference.context,
                "server": reference.glob.as_str(),
                "line": reference.at.map(|a| a.line),
                "column": reference.at.map(|a| a.column),
                "servers_run": ran,
            }));
            self.record(session, event);
        }
    }
}
