//! (server, tool) -> the definition last listed, its hash, and whether it may be called.

use std::collections::HashMap;

use serde_json::Value;

use crate::mcp::ToolHash;
use crate::policy::{ToolStatus, fold_name};

/// Whether a listed tool may be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    Trusted,
    /// Removed from tools/list and refused on call, with the rule and reason that withheld it.
    Withheld {
        rule: String,
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub hash: ToolHash,
    pub definition: Value,
    pub state: ToolState,
}

#[derive(Debug, Default)]
pub struct Registry {
    tools: HashMap<String, HashMap<String, Entry>>,
}

impl Registry {
    pub fn get(&self, server: &str, tool: &str) -> Option<&Entry> {
        self.tools.get(server)?.get(tool)
    }

    pub fn insert(&mut self, server: &str, tool: &str, entry: Entry) {
        self.tools
            .entry(server.to_owned())
            .or_default()
            .insert(tool.to_owned(), entry);
    }

    /// What the policy needs to know about a call of `tool`. A name that is not listed but
    /// folds (case, NFKC, surrounding space) onto a withheld tool is that tool: a server that
    /// matches names loosely would run it.
    pub fn status(&self, server: &str, tool: &str) -> ToolStatus<'_> {
        let entry = self.get(server, tool).or_else(|| {
            let folded = fold_name(tool);
            self.tools.get(server)?.iter().find_map(|(name, entry)| {
                let withheld = matches!(entry.state, ToolState::Withheld { .. });
                (withheld && fold_name(name) == folded).then_some(entry)
            })
        });
        match entry {
            None => ToolStatus::Unlisted,
            Some(Entry {
                hash,
                state: ToolState::Trusted,
                ..
            }) => ToolStatus::Listed(hash),
            Some(Entry {
                hash,
                state: ToolState::Withheld { rule, reason },
                ..
            }) => ToolStatus::Withheld { hash, rule, reason },
        }
    }
}
