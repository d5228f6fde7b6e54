//! One session's servers and tools: (server, tool) -> the definition last listed, its hash,
//! what it does, and whether it may be called.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analyzer::Categories;
use crate::inspect::SessionTools;
use crate::mcp::ToolHash;
use crate::policy::fold_name;

/// Why a listed tool (or a whole server) is held back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The detector found poisoning and `detection.on_detection` is block.
    Detection,
    /// Another server of the session registered this tool name first (`shadow_tool`).
    Shadowed,
    /// The definition differs from its pin, or is new and not trusted (`version_pinning`).
    Pin,
    /// The server's name looks like another known server's (`name_similarity`).
    LookAlike,
}

/// Whether a listed tool may be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    Trusted,
    /// Removed from tools/list and refused on call, with the rule and reason that withheld it.
    Withheld {
        hold: Hold,
        rule: String,
        reason: String,
    },
}

#[derive(Debug, Clone)]
pub struct Entry {
    pub hash: ToolHash,
    pub definition: Value,
    pub categories: Categories,
    pub state: ToolState,
}

/// Where a server comes from: what it runs, and the agent configuration that names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerOrigin {
    /// The npm or Python package, image or script it runs (`match.package` in rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The agent whose configuration names the server (`claude-code`, `codex` ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Where that configuration entry is (`~/.claude.json (user)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_source: Option<String>,
    /// Other configured names that start the same command line.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_named: Vec<String>,
    /// The command line the server was started with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// One server of the session.
#[derive(Debug, Clone, Default)]
pub struct Server {
    /// The origin of its first start in the session.
    pub origin: ServerOrigin,
    /// Every package it was started from in the session: a later start that says otherwise
    /// adds to them, it does not replace them.
    pub packages: std::collections::BTreeSet<String>,
    /// `Some` when every call to the server is refused (a look-alike name under `block`).
    pub withheld: Option<(String, String)>,
    pub tools: HashMap<String, Entry>,
    /// Its instructions (initialize, server/discover) as last judged.
    pub instructions: Option<Entry>,
}

#[derive(Debug, Default)]
pub struct Registry {
    servers: HashMap<String, Server>,
    /// Every tool name the session has seen, by server: what the detector reads a
    /// description or a result against.
    tools: SessionTools,
}

impl Registry {
    pub fn server(&self, server: &str) -> Option<&Server> {
        self.servers.get(server)
    }

    /// The server's entry, created empty on first sight; `true` when it was new.
    pub fn register_server(&mut self, server: &str) -> (&mut Server, bool) {
        let new = !self.servers.contains_key(server);
        (self.servers.entry(server.to_owned()).or_default(), new)
    }

    pub fn servers(&self) -> impl Iterator<Item = (&str, &Server)> {
        self.servers.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn get(&self, server: &str, tool: &str) -> Option<&Entry> {
        self.servers.get(server)?.tools.get(tool)
    }

    pub fn get_mut(&mut self, server: &str, tool: &str) -> Option<&mut Entry> {
        self.servers.get_mut(server)?.tools.get_mut(tool)
    }

    pub fn insert(&mut self, server: &str, tool: &str, entry: Entry) {
        self.tools.add(server, tool);
        self.register_server(server)
            .0
            .tools
            .insert(tool.to_owned(), entry);
    }

    /// Every tool the session has listed, by server (a tool a server stopped listing stays:
    /// a description naming it still names a tool of the session).
    pub fn session_tools(&self) -> &SessionTools {
        &self.tools
    }

    /// The server (other than `server`) that registered a tool of this name first, if any.
    /// Names are compared folded: `Read_File` shadows `read_file` for a model as well.
    pub fn owner_of(&self, server: &str, tool: &str) -> Option<&str> {
        let folded = fold_name(tool);
        self.servers
            .iter()
            .filter(|(name, _)| name.as_str() != server)
            .find(|(_, s)| {
                s.tools.iter().any(|(name, entry)| {
                    fold_name(name) == folded
                        && !matches!(
                            entry.state,
                            ToolState::Withheld {
                                hold: Hold::Shadowed,
                                ..
                            }
                        )
                })
            })
            .map(|(name, _)| name.as_str())
    }

    /// The entry a call of `tool` refers to. A name that is not listed but folds (case, NFKC,
    /// surrounding space) onto a withheld tool is that tool: a server that matches names
    /// loosely would run it.
    pub fn lookup(&self, server: &str, tool: &str) -> Option<&Entry> {
        self.get(server, tool).or_else(|| {
            let folded = fold_name(tool);
            self.servers
                .get(server)?
                .tools
                .iter()
                .find_map(|(name, entry)| {
                    let withheld = matches!(entry.state, ToolState::Withheld { .. });
                    (withheld && fold_name(name) == folded).then_some(entry)
                })
        })
    }
}
