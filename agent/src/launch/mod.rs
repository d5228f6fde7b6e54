//! Recognising MCP server launches on a command line.
//!
//! `agentshctl run` puts launcher shims named npx, uvx, node, python, python3 and docker first
//! on the agent's PATH. Each asks [`recognise`] whether its command line starts an MCP server:
//! if so it runs the command under agentsh-shim with the server id returned, otherwise it runs
//! it untouched. Wrapping `npx prettier` in a JSON-RPC guard would break it, so each launcher's
//! real syntax is parsed (`argv` and one file per launcher family) to find what it runs, and
//! only that name is matched.
//!
//! Patterns are [`NameGlob`]s. One with a `/` is matched against the full name (`@scope/name`,
//! `ghcr.io/org/image`); one without, against the last component (`name`, `image`), so
//! `mcp-server-*` finds `@supabase/mcp-server-supabase` but not an image whose namespace happens
//! to start with `mcp-server-`.
//!
//! No I/O: the shims call this before deciding what to exec.

mod argv;
pub mod configured;
mod docker;
mod id;
pub mod manifest;
mod node;
mod npm;
mod python;
mod target;
mod uv;

#[cfg(test)]
mod tests;

use std::sync::LazyLock;

use crate::config::{CustomServer, NameGlob};
use crate::hosts::ConfiguredServer;
use configured::{Identified, Invocation};
use target::Target;

/// The launchers `agentshctl run` always puts first on an agent's PATH (each a link to
/// agentsh-shim, which acts by the name it was run as).
pub const BUILT_IN_LAUNCHERS: &[&str] = &["npx", "uvx", "node", "python", "python3", "docker"];

/// Names that MCP servers are published under, besides Docker Hub's `mcp/` namespace.
pub const DEFAULT_PATTERNS: &[&str] = &[
    "@modelcontextprotocol/*",
    "mcp-server-*",
    "*-mcp-server",
    "mcp_server_*",
];

/// Packages under a default pattern that are not servers: the inspector is a client with a
/// web UI, the SDK a library, `create-server` a scaffolding tool. Custom patterns still match
/// them.
const NOT_SERVERS: &[&str] = &[
    "@modelcontextprotocol/inspector",
    "@modelcontextprotocol/sdk",
    "@modelcontextprotocol/create-server",
];

/// The id when nothing on the command line yields one.
const FALLBACK_ID: &str = "server";

static DEFAULTS: LazyLock<Vec<NameGlob>> = LazyLock::new(|| {
    DEFAULT_PATTERNS
        .iter()
        .filter_map(|p| NameGlob::new(p).ok())
        .collect()
});

/// An MCP server launch: run it under agentsh-shim with this id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// A custom server's `id`, else derived from `package`.
    pub server_id: String,
    /// The full name that matched: `@modelcontextprotocol/server-filesystem`, `mcp_server_git`,
    /// `ghcr.io/github/github-mcp-server`, `mcp/fetch`.
    pub package: String,
}

/// A command line a launcher runs under agentsh-shim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Guarded {
    /// The name the agent's configuration gives the server, else the recognised one's id.
    pub server_id: String,
    /// What the server runs from: the npm or Python package, the image, the script.
    pub package: Option<String>,
    /// The configuration entry the server is named after.
    pub configured: Option<ConfiguredServer>,
    /// Other configured names that start the very same command line.
    pub also_named: Vec<String>,
}

/// What a launcher does with a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchAs {
    /// An MCP server: run it under agentsh-shim, named so.
    Server(Guarded),
    /// One agent's configuration starts this very command line under several names, and
    /// nothing tells which entry this is: rules naming either would be a guess. Refused.
    Ambiguous {
        host: crate::hosts::Host,
        names: Vec<String>,
    },
    /// Not a server: run it untouched.
    Program,
}

/// Whether a launcher must run this command line under the shim, and as what: an entry of
/// the agent's configuration (`servers`) that starts it, else a recognised MCP server launch.
pub fn guard(
    invocation: &Invocation,
    servers: &[ConfiguredServer],
    custom: &[CustomServer],
) -> LaunchAs {
    let (configured, also_named) = match configured::identify(invocation, servers) {
        Identified::None => (None, Vec::new()),
        Identified::One(server) => (Some(server), Vec::new()),
        Identified::Ambiguous(server, others) if others.iter().all(|o| o.host == server.host) => {
            let mut names: Vec<String> = std::iter::once(server)
                .chain(others)
                .map(|s| s.name.clone())
                .collect();
            names.sort();
            names.dedup();
            return LaunchAs::Ambiguous {
                host: server.host,
                names,
            };
        }
        Identified::Ambiguous(server, others) => (
            Some(server),
            others.into_iter().map(|s| s.name.clone()).collect(),
        ),
    };
    let recognised = recognise(invocation.program, invocation.args, custom);
    let package = recognised
        .as_ref()
        .map(|l| l.package.clone())
        .or_else(|| package_of(invocation.program, invocation.args));
    match (configured, recognised) {
        (Some(server), _) => LaunchAs::Server(Guarded {
            server_id: server.name.clone(),
            package,
            configured: Some(server.clone()),
            also_named,
        }),
        (None, Some(launch)) => LaunchAs::Server(Guarded {
            server_id: launch.server_id,
            package,
            configured: None,
            also_named,
        }),
        (None, None) => LaunchAs::Program,
    }
}

/// What a command line runs, named as a rule's `match.package` sees it: the package, module,
/// image or script it runs, else the program's own name.
pub fn package_of(program: &str, args: &[String]) -> Option<String> {
    targets(program, args)
        .into_iter()
        .next()
        .map(|t| t.name)
        .or_else(|| Some(basename(program).to_owned()).filter(|n| !n.is_empty()))
}

/// Whether `program args` starts an MCP server. `program` is the name as invoked (a path is
/// reduced to its file name); `custom` servers are tried first, in order, then the defaults.
pub fn recognise(program: &str, args: &[String], custom: &[CustomServer]) -> Option<Launch> {
    let targets = targets(program, args);
    let custom_match = custom.iter().find_map(|server| {
        let target = targets.iter().find(|t| matches(&server.pattern, t))?;
        Some(launch(target, server.id.clone()))
    });
    custom_match.or_else(|| {
        targets
            .iter()
            .find(|t| is_default_server(t))
            .map(|t| launch(t, None))
    })
}

/// A server id for any command line: the recognised server's, else one from what the launcher
/// runs (`node servers/poison.mjs` -> `poison`), else from the program's name.
pub fn derive_server_id(program: &str, args: &[String]) -> String {
    if let Some(launch) = recognise(program, args, &[]) {
        return launch.server_id;
    }
    targets(program, args)
        .iter()
        .find_map(|t| id::from_name(&t.name))
        .or_else(|| id::from_name(basename(program)))
        .unwrap_or_else(|| FALLBACK_ID.to_owned())
}

fn launch(target: &Target, id: Option<String>) -> Launch {
    Launch {
        server_id: id
            .or_else(|| id::from_name(&target.name))
            .unwrap_or_else(|| FALLBACK_ID.to_owned()),
        package: target.name.clone(),
    }
}

fn is_default_server(target: &Target) -> bool {
    target.known
        || (!NOT_SERVERS.contains(&target.name.as_str())
            && DEFAULTS.iter().any(|glob| matches(glob, target)))
}

fn matches(glob: &NameGlob, target: &Target) -> bool {
    if glob.as_str().contains('/') {
        glob.matches(&target.name)
    } else {
        glob.matches(target.short())
    }
}

/// What `program args` runs, most telling name first; empty when it runs nothing we can name.
fn targets(program: &str, args: &[String]) -> Vec<Target> {
    match basename(program) {
        "npx" | "bunx" | "pnpx" => npm::exec(args),
        "npm" => npm::subcommand(args, &["exec", "x"]).map_or_else(Vec::new, npm::exec),
        "pnpm" | "yarn" => npm::subcommand(args, &["dlx"]).map_or_else(Vec::new, npm::exec),
        "uvx" => uv::uvx(args),
        "uv" => uv::uv(args),
        "pipx" => uv::pipx(args),
        "node" | "nodejs" => node::node(args),
        "bun" => node::bun(args),
        "deno" => node::deno(args),
        "docker" | "podman" => docker::targets(args),
        name if python::is_python(name) => python::targets(args),
        _ => Vec::new(),
    }
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}
