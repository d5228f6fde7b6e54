//! Server ids from the names launchers run: short, stable, and safe in tool-name prefixes,
//! file names and log lines.

/// Generic affixes that say "this is an MCP server" rather than which one. Longest first, so
/// `mcp-server-` is dropped whole rather than as `mcp-`.
const PREFIXES: &[&str] = &["mcp-server-", "mcp_server_", "server-", "mcp-", "mcp_"];
const SUFFIXES: &[&str] = &["-mcp-server", "_mcp_server", "-mcp", "_mcp"];

/// `@modelcontextprotocol/server-filesystem` -> `filesystem`, `github-mcp-server` -> `github`,
/// `mcp_server_git` -> `git`, `mcp/fetch` -> `fetch`. None when nothing usable is left.
pub(super) fn from_name(name: &str) -> Option<String> {
    let short = name.rsplit('/').next().unwrap_or(name).to_lowercase();
    let core = PREFIXES
        .iter()
        .find_map(|p| short.strip_prefix(p).filter(|rest| !rest.is_empty()))
        .unwrap_or(&short);
    let core = SUFFIXES
        .iter()
        .find_map(|s| core.strip_suffix(s).filter(|rest| !rest.is_empty()))
        .unwrap_or(core);
    sanitise(core).or_else(|| sanitise(&short))
}

/// Keeps `[a-z0-9._-]` (lowercased) and trims separators from the ends, so that no id is
/// empty, `.` or `..`.
fn sanitise(text: &str) -> Option<String> {
    let kept: String = text
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let trimmed = kept.trim_matches(['.', '_', '-']);
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affixes_scopes_and_odd_characters_go() {
        for (name, id) in [
            ("@modelcontextprotocol/server-filesystem", "filesystem"),
            ("mcp-server-fetch", "fetch"),
            ("github-mcp-server", "github"),
            ("mcp_server_git", "git"),
            ("mcp/fetch", "fetch"),
            ("@upstash/context7-mcp", "context7"),
            ("mcp-foo-mcp", "foo"),
            ("Mcp-Server-Weather", "weather"),
            ("mcp-server-", "server"),
            ("weird name!", "weirdname"),
            ("..", ""),
            ("-mcp", "mcp"),
            ("ü", ""),
        ] {
            assert_eq!(from_name(name).unwrap_or_default(), id, "{name}");
        }
    }
}
