//! `docker [global options] (run | container run) [options] IMAGE [command]`.
//!
//! Only an interactive run (`-i`) can be a stdio server: without it the container's stdin is
//! closed. The image names the server: its last path component, or Docker Hub's `mcp/`
//! namespace, where Docker publishes MCP servers (`mcp/fetch`).

use super::argv::{Scan, Syntax, scan};
use super::target::Target;

const GLOBAL: Syntax = Syntax {
    with_value: &[
        "-c",
        "--context",
        "-H",
        "--host",
        "-l",
        "--log-level",
        "--config",
        "--tlscacert",
        "--tlscert",
        "--tlskey",
    ],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &[],
};

/// `docker run`'s switches: every other option takes a value, so a new value option is
/// skipped correctly without being listed.
const RUN: Syntax = Syntax {
    with_value: &[],
    without_value: &[
        "-d",
        "--detach",
        "-i",
        "--interactive",
        "-t",
        "--tty",
        "--rm",
        "--privileged",
        "-P",
        "--publish-all",
        "--init",
        "--read-only",
        "--sig-proxy",
        "--oom-kill-disable",
        "--no-healthcheck",
        "-q",
        "--quiet",
        "--disable-content-trust",
        "--help",
        "--use-api-socket",
    ],
    unknown_takes_value: true,
    terminal: &[],
};

/// Registries that are Docker Hub under another name.
const DOCKER_HUB: &[&str] = &["docker.io", "index.docker.io", "registry-1.docker.io"];
/// Docker Hub's namespace of MCP server images.
const MCP_NAMESPACE: &str = "mcp";

pub(super) fn targets(args: &[String]) -> Vec<Target> {
    let global = scan(args, &GLOBAL);
    let run_args = match global.rest {
        [run, rest @ ..] if run == "run" => rest,
        [container, run, rest @ ..] if container == "container" && run == "run" => rest,
        _ => return Vec::new(),
    };
    let run = scan(run_args, &RUN);
    if !interactive(&run) {
        return Vec::new();
    }
    run.operand().and_then(image).into_iter().collect()
}

/// The last `-i` / `--interactive` decides; `--interactive=false` turns it off.
fn interactive(run: &Scan<'_>) -> bool {
    run.options
        .iter()
        .rev()
        .find(|o| o.name.is("-i") || o.name.is("--interactive"))
        .is_some_and(|o| o.value.is_none_or(parse_bool))
}

/// Go's `strconv.ParseBool`, which docker's flag library uses; anything else is an error
/// there, so not interactive here.
fn parse_bool(value: &str) -> bool {
    matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// `ghcr.io/github/github-mcp-server:latest` -> `ghcr.io/github/github-mcp-server`;
/// `docker.io/library/x@sha256:..` -> `x`; `mcp/fetch` -> `mcp/fetch`, known.
fn image(reference: &str) -> Option<Target> {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    let without_tag = match without_digest.rsplit_once(':') {
        // A `:` after the last `/` starts a tag; before it, a registry port.
        Some((name, tag)) if !tag.contains('/') => name,
        _ => without_digest,
    };
    let mut parts: Vec<&str> = without_tag.split('/').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let registry = match parts.first() {
        Some(first) if parts.len() > 1 && (first.contains(['.', ':']) || *first == "localhost") => {
            Some(parts.remove(0))
        }
        _ => None,
    };
    let hub = registry.is_none_or(|r| DOCKER_HUB.contains(&r));
    if hub && parts.len() == 2 && parts[0] == "library" {
        parts.remove(0);
    }
    let path = parts.join("/");
    Some(match registry {
        Some(registry) if !hub => Target::new(format!("{registry}/{path}")),
        _ => Target {
            known: parts.len() == 2 && parts[0] == MCP_NAMESPACE,
            name: path,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references() {
        let name = |r| image(r).map(|t| (t.name, t.known));
        let own = |n: &str, k| Some((n.to_owned(), k));
        assert_eq!(
            name("ghcr.io/github/github-mcp-server:latest"),
            own("ghcr.io/github/github-mcp-server", false)
        );
        assert_eq!(name("mcp/fetch"), own("mcp/fetch", true));
        assert_eq!(
            name("docker.io/mcp/fetch:1@sha256:ab"),
            own("mcp/fetch", true)
        );
        assert_eq!(name("docker.io/library/alpine"), own("alpine", false));
        assert_eq!(
            name("localhost:5000/mcp/x"),
            own("localhost:5000/mcp/x", false)
        );
        assert_eq!(name("ghcr.io/mcp/x"), own("ghcr.io/mcp/x", false));
        assert_eq!(name("localhost:5000/a:tag"), own("localhost:5000/a", false));
        assert_eq!(name("mcp/fetch/extra"), own("mcp/fetch/extra", false));
        assert_eq!(name("a//b"), None);
        assert_eq!(name(""), None);
        assert_eq!(name("@sha256:x"), None);
    }
}
