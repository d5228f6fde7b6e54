//! A server's instructions (the `instructions` of its initialize and server/discover results):
//! hosts put them in the model's context like tool descriptions, so they are judged as one, by
//! the same definition detector and the same pins, under the name [`INSTRUCTIONS`]. A changed
//! text is a rug pull like a changed description; `agentshctl mcp pins diff|trust` and
//! `mcp approve` take `SERVER:(instructions)` as they take a tool.

use serde_json::json;

use super::listing::{Listed, evaluate};
use super::{Engine, InstructionsVerdict, Session, read, write};
use crate::registry::{Entry, ToolState};

/// What instructions are pinned and approved as: no tool can have this name (MCP tool names
/// are letters, digits, `_`, `-` and `.`).
pub const INSTRUCTIONS: &str = "(instructions)";

impl Engine {
    /// Judges `server`'s instructions; withheld ones are replaced by a notice.
    pub fn instructions(&self, session: &Session, server: &str, text: &str) -> InstructionsVerdict {
        let rules = session.rules();
        let policy = rules.mcp();
        self.register_server(session, &rules, server);
        let definition = json!({"name": INSTRUCTIONS, "description": text});
        let previous = read(&session.registry)
            .server(server)
            .and_then(|s| s.instructions.clone());
        let (pinned, approval) = self.pin_and_approval(session, server, INSTRUCTIONS);
        let session_tools = read(&session.registry).session_tools().clone();
        let listed = Listed {
            server,
            definition: &definition,
            previous: previous.as_ref(),
            pinned: pinned.as_ref(),
            approval: approval.as_ref(),
            session_tools: &session_tools,
        };
        let Some(mut decision) = evaluate(policy, &rules.detector, listed) else {
            unreachable!("the definition has a name");
        };
        for event in &mut decision.events {
            event.reason = in_words_of_instructions(&event.reason);
        }
        if let ToolState::Withheld { reason, .. } = &mut decision.state {
            *reason = in_words_of_instructions(reason);
        }
        self.settle(session, server, &mut decision);
        let verdict = match &decision.state {
            ToolState::Trusted => InstructionsVerdict::default(),
            ToolState::Withheld { reason, .. } => InstructionsVerdict {
                withhold: true,
                reason: reason.clone(),
            },
        };
        let mut registry = write(&session.registry);
        registry.register_server(server).0.instructions = Some(Entry {
            hash: decision.hash,
            definition,
            categories: decision.categories,
            state: decision.state,
        });
        verdict
    }
}

/// A reason the listing wrote about a tool, said of the instructions.
fn in_words_of_instructions(reason: &str) -> String {
    let tool = format!("tool '{INSTRUCTIONS}'");
    reason
        .replace(
            &format!("definition of {tool} changed"),
            "the instructions changed",
        )
        .replace(&format!("{tool} looks"), "the instructions look")
        .replace(&format!("{tool} is new"), "the instructions are new")
        .replace(&tool, "the instructions")
        .replace("in $.description", "in the text")
}

/// What the client reads in place of withheld instructions.
pub fn withheld_notice(server: &str, reason: &str) -> String {
    format!("[agentsh] The instructions of server '{server}' were withheld: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_speak_of_the_instructions() {
        let said = |reason: &str| in_words_of_instructions(reason);
        assert_eq!(
            said("tool '(instructions)' looks poisoned: x (high) in $.description: \"y\""),
            "the instructions look poisoned: x (high) in the text: \"y\""
        );
        assert_eq!(
            said("definition of tool '(instructions)' changed since it was pinned"),
            "the instructions changed since it was pinned"
        );
        assert_eq!(
            said("tool '(instructions)' is new and not trusted yet"),
            "the instructions are new and not trusted yet"
        );
    }
}
