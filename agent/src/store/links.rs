//! The link between a tool call a model asked for (`mcp_tool_call_intercepted`, from the LLM
//! proxy) and the tools/call that executed it (`mcp_tool_called`, from the shim): the same
//! session, server, tool and arguments (their JCS digest), the execution after the intent.
//! Each intent links to at most one execution, the earliest; a second identical call is its
//! own intent's, or has none.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use crate::audit::{Action, Event, EventKind};

/// An execution this long after the intent is not its consequence.
pub const LINK_WINDOW: Duration = Duration::from_secs(15 * 60);

/// For each event (oldest first), the index of the event it links to.
pub fn link_calls(events: &[Event]) -> Vec<Option<usize>> {
    let mut links = vec![None; events.len()];
    let mut waiting: HashMap<Key<'_>, VecDeque<(usize, SystemTime)>> = HashMap::new();
    for (index, event) in events.iter().enumerate() {
        let Some(key) = Key::of(event) else {
            continue;
        };
        match event.event {
            // A blocked intent never reached the agent: what executes later is another's.
            EventKind::McpToolCallIntercepted if event.action == Action::Block => {}
            EventKind::McpToolCallIntercepted => {
                waiting
                    .entry(key)
                    .or_default()
                    .push_back((index, event.timestamp));
            }
            EventKind::McpToolCalled => {
                let Some(queue) = waiting.get_mut(&key) else {
                    continue;
                };
                while let Some(&(intent, at)) = queue.front() {
                    queue.pop_front();
                    let after = event.timestamp.duration_since(at).unwrap_or_default();
                    if after <= LINK_WINDOW {
                        links[index] = Some(intent);
                        links[intent] = Some(index);
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    links
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key<'a> {
    session: Option<&'a str>,
    server: &'a str,
    tool: &'a str,
    arguments: &'a str,
}

impl<'a> Key<'a> {
    fn of(event: &'a Event) -> Option<Self> {
        Some(Self {
            session: event.session.as_deref(),
            server: &event.server,
            tool: event.tool.as_deref()?,
            arguments: event.details.get("arguments_sha256")?.as_str()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: EventKind, tool: &str, args: &str, secs: u64) -> Event {
        let mut event = Event::new(kind, "fs", Action::Allow, "")
            .session("s1")
            .tool(tool)
            .details(json!({"arguments_sha256": args}));
        event.timestamp = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        event
    }

    fn blocked(mut event: Event) -> Event {
        event.action = Action::Block;
        event
    }

    #[test]
    fn intents_link_to_their_first_execution() {
        use EventKind::{McpToolCallIntercepted as Intent, McpToolCalled as Exec};
        let events = [
            event(Intent, "write", "a", 10),
            event(Intent, "write", "b", 11),
            event(Exec, "write", "b", 12),
            event(Exec, "write", "a", 13),
            // The same call again, with no intent of its own.
            event(Exec, "write", "a", 14),
            // Another tool with the same arguments is another call.
            event(Intent, "read", "a", 15),
            // An intent never executed (the agent changed its mind).
            event(Intent, "write", "c", 16),
            // A blocked intent, then the same call allowed (after an approval) and run: the
            // run is the allowed intent's.
            blocked(event(Intent, "write", "d", 17)),
            event(Intent, "write", "d", 18),
            event(Exec, "write", "d", 19),
        ];
        assert_eq!(
            link_calls(&events),
            [
                Some(3),
                Some(2),
                Some(1),
                Some(0),
                None,
                None,
                None,
                None,
                Some(9),
                Some(8)
            ]
        );
    }

    #[test]
    fn stale_intents_and_other_sessions_do_not_link() {
        use EventKind::{McpToolCallIntercepted as Intent, McpToolCalled as Exec};
        let late = LINK_WINDOW.as_secs() + 11;
        let mut other = event(Exec, "write", "a", 12);
        other.session = Some("s2".into());
        let no_digest = Event::new(Exec, "fs", Action::Allow, "").tool("write");
        let events = [
            event(Intent, "write", "a", 10),
            other,
            no_digest,
            event(Exec, "write", "a", late),
        ];
        assert_eq!(link_calls(&events), [None, None, None, None]);
    }
}
