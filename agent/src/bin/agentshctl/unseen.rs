//! Policy server names that no server on this machine has: `policy check` and `doctor` say
//! so, with the place in the file, since a rule that names a server the agents call something
//! else applies to nothing.

use agentsh::config::Policy;
use agentsh::hosts::{self, Environment};

/// One `FILE:LINE:COL: warning: ...` line per policy server name that matches none of the
/// policy's declared servers, the servers the agents' configurations on this machine name
/// (as `home`'s user sees them), and `also` (servers agentsh has pinned).
pub fn warnings(policy: &Policy, home: Option<&std::path::Path>, also: &[String]) -> Vec<String> {
    let mut names: Vec<String> = also.to_vec();
    names.extend(policy.mcp().servers.iter().map(|s| s.id.clone()));
    if let Some(mut env) = Environment::current() {
        if let Some(home) = home {
            env.home = home.to_path_buf();
        }
        names.extend(
            hosts::discover_all(&env)
                .servers
                .into_iter()
                .map(|s| s.name),
        );
    }
    policy
        .mcp()
        .server_references()
        .into_iter()
        .filter(|r| !names.iter().any(|n| r.glob.matches(n)))
        .map(|r| {
            // The warning sits after the place, as the loader's own warnings do.
            let described = r.describe(&policy.origin);
            let (place, rest) = described.split_once(": ").unwrap_or(("", &described));
            format!(
                "{place}: warning: {rest}, which no agent configuration on this machine names and the policy does not declare: it applies to nothing until a server of that name runs (agents' names: ~/.claude.json, .mcp.json, ~/.codex/config.toml, ~/.gemini/settings.json)"
            )
        })
        .collect()
}
