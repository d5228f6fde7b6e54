//! The launch table: real command lines, servers and not, through each launcher's syntax.

use super::*;
use crate::config::Location;

fn words(line: &str) -> (String, Vec<String>) {
    let mut parts = line.split(' ').filter(|w| !w.is_empty()).map(str::to_owned);
    let program = parts.next().unwrap_or_default();
    (program, parts.collect())
}

fn recognised(line: &str, custom: &[CustomServer]) -> Option<(String, String)> {
    let (program, args) = words(line);
    recognise(&program, &args, custom).map(|l| (l.package, l.server_id))
}

/// (command line, package that matched and server id) for servers; None for everything else.
const TABLE: &[(&str, Option<(&str, &str)>)] = &[
    // npx
    (
        "npx -y @modelcontextprotocol/server-filesystem /tmp",
        Some(("@modelcontextprotocol/server-filesystem", "filesystem")),
    ),
    (
        "npx @modelcontextprotocol/server-github@2025.1.0",
        Some(("@modelcontextprotocol/server-github", "github")),
    ),
    (
        "npx --yes -- @modelcontextprotocol/server-everything stdio",
        Some(("@modelcontextprotocol/server-everything", "everything")),
    ),
    (
        "npx -p @modelcontextprotocol/server-memory mcp-server-memory",
        Some(("@modelcontextprotocol/server-memory", "memory")),
    ),
    (
        "npx --package=typescript -p mcp-server-kb kb-serve",
        Some(("mcp-server-kb", "kb")),
    ),
    (
        "npx -y @supabase/mcp-server-supabase@latest --read-only",
        Some(("@supabase/mcp-server-supabase", "supabase")),
    ),
    (
        "npx -y @notionhq/notion-mcp-server",
        Some(("@notionhq/notion-mcp-server", "notion")),
    ),
    (
        "npx --registry https://r.example.com mcp-server-db@1.0.0 --ro",
        Some(("mcp-server-db", "db")),
    ),
    (
        "npx -p mcp-tools -c mcp-server-tools --port 1",
        Some(("mcp-server-tools", "tools")),
    ),
    (
        "npm exec --yes -- @modelcontextprotocol/server-memory",
        Some(("@modelcontextprotocol/server-memory", "memory")),
    ),
    ("pnpm dlx mcp-server-x", Some(("mcp-server-x", "x"))),
    ("npx prettier --write .", None),
    ("npx -y tsx script.ts", None),
    ("npx --package=typescript tsc --noEmit", None),
    ("npx --registry mcp-server-x prettier", None),
    (
        "npx @modelcontextprotocol/inspector node build/index.js",
        None,
    ),
    (
        "npx -p @modelcontextprotocol/sdk -p tsx tsx server.ts",
        None,
    ),
    ("npx eslint mcp-server-x/", None),
    ("npx -y", None),
    // uvx, uv, pipx
    ("uvx mcp-server-fetch", Some(("mcp-server-fetch", "fetch"))),
    (
        "uvx --from mcp-server-git mcp-server-git --repository .",
        Some(("mcp-server-git", "git")),
    ),
    (
        "uvx -q --python 3.12 --with requests mcp-server-time@latest --local-timezone=UTC",
        Some(("mcp-server-time", "time")),
    ),
    (
        "uvx --from git+https://github.com/acme/mcp-server-wiki@main wiki",
        Some(("mcp-server-wiki", "wiki")),
    ),
    (
        "uv tool run mcp-server-sqlite --db-path x.db",
        Some(("mcp-server-sqlite", "sqlite")),
    ),
    (
        "uv run --with mcp python -m mcp_server_notes",
        Some(("mcp_server_notes", "notes")),
    ),
    (
        "pipx run --spec mcp-server-fetch mcp-server-fetch",
        Some(("mcp-server-fetch", "fetch")),
    ),
    ("uvx ruff check .", None),
    ("uvx --with mcp-server-fetch jupyter lab", None),
    ("uvx --python mcp-server-x black .", None),
    ("uv run pytest", None),
    ("uv --directory /srv/weather run weather.py", None),
    // node
    (
        "node /x/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /tmp",
        Some(("@modelcontextprotocol/server-filesystem", "filesystem")),
    ),
    (
        "node --inspect -r dotenv/config /srv/mcp-server-weather/build/index.js",
        Some(("mcp-server-weather", "weather")),
    ),
    (
        "node ./node_modules/.bin/mcp-server-redis --url x",
        Some(("mcp-server-redis", "redis")),
    ),
    (
        "node /opt/github-mcp-server.js",
        Some(("github-mcp-server", "github")),
    ),
    ("node build.js", None),
    (
        "node --experimental-vm-modules node_modules/.bin/jest",
        None,
    ),
    ("node /home/u/mcp-server-x/scripts/build.js", None),
    ("node --require ./mcp-server-hook.js app.js", None),
    ("node -e require('mcp-server-x') mcp-server-x", None),
    (
        "node /usr/lib/node_modules/npm/bin/npx-cli.js -y @modelcontextprotocol/server-memory",
        None,
    ),
    // python
    (
        "python -m mcp_server_fetch",
        Some(("mcp_server_fetch", "fetch")),
    ),
    (
        "python3 -u -X utf8 -m mcp_server_git.server --repository .",
        Some(("mcp_server_git", "git")),
    ),
    (
        "python3.12 -Wignore -um mcp_server_time",
        Some(("mcp_server_time", "time")),
    ),
    (
        "python /venv/lib/python3.12/site-packages/mcp_server_fetch/__main__.py",
        Some(("mcp_server_fetch", "fetch")),
    ),
    ("python -m pytest", None),
    ("python3 manage.py runserver", None),
    ("python script.py mcp_server_x", None),
    ("python -c import mcp_server_fetch", None),
    ("python -X mcp_server_x tool.py", None),
    ("python3 - mcp_server_x", None),
    ("python3 -m http.server 8000", None),
    // docker
    (
        "docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server",
        Some(("ghcr.io/github/github-mcp-server", "github")),
    ),
    ("docker run --rm -i mcp/fetch", Some(("mcp/fetch", "fetch"))),
    (
        "docker run -it --name x -v /a:/projects mcp/filesystem /projects",
        Some(("mcp/filesystem", "filesystem")),
    ),
    (
        "docker run -ie A=1 --network=host acme/mcp-server-db:1.2@sha256:00",
        Some(("acme/mcp-server-db", "db")),
    ),
    (
        "docker --context prod container run --interactive mcp/time",
        Some(("mcp/time", "time")),
    ),
    ("docker run -i alpine", None),
    ("docker run nginx", None),
    ("docker run -d mcp/fetch", None),
    ("docker run --interactive=false mcp/fetch", None),
    ("docker run -i -e mcp/fetch alpine", None),
    ("docker run -i busybox mcp-server-echo", None),
    (
        "docker run -i mcp-server-registry.example.com/tools/nginx",
        None,
    ),
    ("docker build -t mcp/fetch .", None),
    ("docker exec -i mcp/fetch sh", None),
    // anything else
    ("bash -c mcp-server-fetch", None),
    ("mcp-server-fetch", None),
];

#[test]
fn the_launch_table() {
    assert!(TABLE.len() >= 40);
    let mut wrong = Vec::new();
    for (line, expected) in TABLE {
        let got = recognised(line, &[]);
        let expected = expected.map(|(p, id)| (p.to_owned(), id.to_owned()));
        if got != expected {
            wrong.push(format!(
                "{line}\n    expected {expected:?}\n    got      {got:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

fn custom(pattern: &str, id: Option<&str>) -> CustomServer {
    CustomServer {
        pattern: NameGlob::new(pattern).unwrap(),
        id: id.map(str::to_owned),
        span: Location::new(1, 1),
    }
}

#[test]
fn custom_servers_come_first_and_their_id_wins() {
    let acme = [custom("@acme/*", Some("acme")), custom("tools-*", None)];
    assert_eq!(
        recognised("npx -y @acme/tools@2 --x", &acme),
        Some(("@acme/tools".into(), "acme".into()))
    );
    // A pattern without `/` matches the last component: the scope, namespace or path is left.
    assert_eq!(
        recognised("npx @other/tools-db", &acme),
        Some(("@other/tools-db".into(), "tools-db".into()))
    );
    assert_eq!(
        recognised("docker run -i registry.acme.com/team/tools-git:1", &acme),
        Some((
            "registry.acme.com/team/tools-git".into(),
            "tools-git".into()
        ))
    );
    let images = [custom("ghcr.io/acme/*", Some("acme-img"))];
    assert_eq!(
        recognised("docker run -i ghcr.io/acme/anything", &images),
        Some(("ghcr.io/acme/anything".into(), "acme-img".into()))
    );
    let fetch = [custom("mcp-server-fetch", Some("web"))];
    assert_eq!(
        recognised("uvx mcp-server-fetch", &fetch),
        Some(("mcp-server-fetch".into(), "web".into()))
    );
    // Explicit patterns reach what the defaults leave out, but not non-launches.
    let inspector = [custom("@modelcontextprotocol/inspector", None)];
    assert_eq!(
        recognised("npx @modelcontextprotocol/inspector", &inspector),
        Some(("@modelcontextprotocol/inspector".into(), "inspector".into()))
    );
    assert_eq!(recognised("npx prettier", &acme), None);
    assert_eq!(recognised("docker run @acme/x", &acme), None);
}

#[test]
fn derived_ids_for_any_command_line() {
    for (line, id) in [
        (
            "npx -y @modelcontextprotocol/server-filesystem /tmp",
            "filesystem",
        ),
        ("uvx mcp-server-fetch@1.0", "fetch"),
        ("python3 -m mcp_server_git", "git"),
        (
            "node /x/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            "everything",
        ),
        ("node servers/poison.mjs", "poison"),
        ("node /srv/weather/build/index.js", "weather"),
        ("uv --directory /srv/weather run weather.py", "weather"),
        ("npx prettier --write .", "prettier"),
        ("/usr/local/bin/my-tool --flag", "my-tool"),
        ("/usr/local/bin/mcp-server-notes", "notes"),
        ("weird name!", "weird"),
        ("docker run nginx", "docker"),
        (
            "deno run -A npm:@modelcontextprotocol/server-memory",
            "memory",
        ),
        ("bun x mcp-server-y", "y"),
        ("", "server"),
        ("/", "server"),
        ("!!!", "server"),
    ] {
        let (program, args) = words(line);
        assert_eq!(derive_server_id(&program, &args), id, "{line:?}");
    }
    let odd = |program: &str, args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        derive_server_id(program, &args)
    };
    assert_eq!(odd("weird name!", &[]), "weirdname");
    assert_eq!(odd("node", &["/tmp/..", "x"]), "tmp");
}

#[test]
fn defaults_compile() {
    assert_eq!(DEFAULTS.len(), DEFAULT_PATTERNS.len());
}

/// Every short sequence of awkward arguments, for every launcher: no panic, and any id is
/// one the policy would accept.
#[test]
fn odd_input_never_panics() {
    const PROGRAMS: &[&str] = &[
        "npx", "npm", "pnpm", "uvx", "uv", "pipx", "node", "bun", "deno", "python3", "docker", "",
    ];
    const TOKENS: &[&str] = &[
        "",
        "-",
        "--",
        "-i",
        "-it",
        "-e",
        "-e=",
        "--x=",
        "-m",
        "-c",
        "-p",
        "@",
        "@/",
        "@a/",
        "a@",
        "/",
        ":",
        "a/b:c@d",
        "é",
        "-é",
        "run",
        "container",
        "tool",
        "x",
        "exec",
        "dlx",
        "node_modules",
        ".bin",
        "npm:",
        "mcp/",
        "mcp-server-",
        "#egg=",
    ];
    let custom = [custom("*", Some("all"))];
    for program in PROGRAMS {
        for a in TOKENS {
            for b in TOKENS {
                for c in [&"", &"mcp-server-x", &"-i"] {
                    let args: Vec<String> = [a, b, c].iter().map(|s| s.to_string()).collect();
                    let id = derive_server_id(program, &args);
                    assert!(is_valid_id(&id), "{program} {args:?} -> {id:?}");
                    let _ = recognise(program, &args, &custom);
                }
            }
        }
    }
}

/// What the policy's `servers[].id` accepts, and no `.` or `..`.
fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().any(|c| c != '.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

mod configured_names {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::super::{LaunchAs, guard};
    use crate::hosts::{ConfiguredServer, Host, Transport};
    use crate::launch::configured::Invocation;

    fn entry(host: Host, name: &str, args: &[&str]) -> ConfiguredServer {
        ConfiguredServer {
            host,
            name: name.into(),
            transport: Transport::Stdio {
                command: "npx".into(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
            source: "test".into(),
            enabled: true,
        }
    }

    fn launch(host: Option<Host>, args: &[&str], servers: &[ConfiguredServer]) -> LaunchAs {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let env = |_: &str| None;
        guard(
            &Invocation {
                program: "npx",
                args: &args,
                cwd: Path::new("/w"),
                env: &env,
                host,
            },
            servers,
            &[],
        )
    }

    #[test]
    fn configured_names_win_and_one_agent_s_twins_are_refused() {
        let line = ["-y", "@modelcontextprotocol/server-filesystem", "/w"];
        let servers = [entry(Host::ClaudeCode, "fs", &line)];
        let LaunchAs::Server(guarded) = launch(Some(Host::ClaudeCode), &line, &servers) else {
            panic!("a server")
        };
        assert_eq!(guarded.server_id, "fs");
        assert_eq!(
            guarded.package.as_deref(),
            Some("@modelcontextprotocol/server-filesystem")
        );
        // Not configured: the recognised package's id, as before.
        let LaunchAs::Server(guarded) = launch(Some(Host::ClaudeCode), &line, &[]) else {
            panic!("a server")
        };
        assert_eq!(guarded.server_id, "filesystem");
        // Two names in one agent's configuration for the same command line: no guess.
        let twins = [
            entry(Host::ClaudeCode, "fs", &line),
            entry(Host::ClaudeCode, "notes", &line),
        ];
        assert_eq!(
            launch(Some(Host::ClaudeCode), &line, &twins),
            LaunchAs::Ambiguous {
                host: Host::ClaudeCode,
                names: vec!["fs".into(), "notes".into()]
            }
        );
        // In two agents' configurations, the agent unknown: the first, the other reported.
        let cross = [
            entry(Host::GeminiCli, "filesystem", &line),
            entry(Host::ClaudeCode, "fs", &line),
        ];
        let LaunchAs::Server(guarded) = launch(None, &line, &cross) else {
            panic!("a server")
        };
        assert_eq!(
            (guarded.server_id.as_str(), guarded.also_named.as_slice()),
            ("filesystem", ["fs".to_owned()].as_slice())
        );
        // Not a server at all.
        assert_eq!(launch(None, &["prettier"], &servers), LaunchAs::Program);
    }
}
