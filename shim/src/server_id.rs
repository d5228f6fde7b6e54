//! A stable server id from the command line when `--server-id` is not given: the package a
//! launcher runs (`npx -y @modelcontextprotocol/server-filesystem` -> `server-filesystem`), the
//! module of `python -m`, the package directory of a script under node_modules, else the
//! program's file name.

use std::ffi::OsString;
use std::path::Path;

/// Launchers whose first non-flag argument is a package.
const PACKAGE_RUNNERS: &[&str] = &["npx", "uvx", "pipx", "bunx", "pnpx", "dlx"];

pub fn derive(program: &OsString, args: &[OsString]) -> String {
    let name = |s: &OsString| s.to_string_lossy().into_owned();
    let program_name = Path::new(program)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| name(program));
    let args: Vec<String> = args.iter().map(name).collect();
    let first_positional = || {
        args.iter()
            .filter(|a| !a.starts_with('-') && *a != "run" && *a != "dlx" && *a != "exec")
            .map(String::as_str)
            .next()
    };
    let derived = if PACKAGE_RUNNERS.contains(&program_name.as_str())
        || (program_name == "pnpm" || program_name == "yarn")
    {
        first_positional().map(package_name)
    } else if program_name.starts_with("python") || program_name == "uv" {
        args.iter()
            .position(|a| a == "-m")
            .and_then(|i| args.get(i + 1))
            .map(|m| m.to_string())
            .or_else(|| first_positional().map(script_name))
    } else if program_name == "node" || program_name == "deno" || program_name == "bun" {
        first_positional().map(script_name)
    } else {
        None
    };
    sanitize(&derived.unwrap_or(program_name))
}

/// `@scope/name@1.2.3` -> `name`; `name@latest` -> `name`.
fn package_name(spec: &str) -> String {
    let unscoped = match spec.strip_prefix('@') {
        Some(rest) => rest.split_once('/').map_or(rest, |(_, name)| name),
        None => spec,
    };
    unscoped.split('@').next().unwrap_or(unscoped).to_owned()
}

/// `.../node_modules/@scope/pkg/dist/index.js` -> `pkg`; otherwise the file stem.
fn script_name(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    if let Some(i) = parts.iter().rposition(|p| *p == "node_modules") {
        match parts.get(i + 1) {
            Some(scope) if scope.starts_with('@') => {
                if let Some(pkg) = parts.get(i + 2) {
                    return (*pkg).to_owned();
                }
            }
            Some(pkg) => return (*pkg).to_owned(),
            None => {}
        }
    }
    Path::new(path)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_owned())
}

fn sanitize(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if clean.is_empty() {
        "server".to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(cmd: &[&str]) -> String {
        let v: Vec<OsString> = cmd.iter().map(OsString::from).collect();
        derive(&v[0], &v[1..])
    }

    #[test]
    fn ids_come_from_packages_modules_and_scripts() {
        assert_eq!(
            id(&[
                "npx",
                "-y",
                "@modelcontextprotocol/server-filesystem",
                "/tmp"
            ]),
            "server-filesystem"
        );
        assert_eq!(id(&["uvx", "mcp-server-fetch@1.0"]), "mcp-server-fetch");
        assert_eq!(id(&["python3", "-m", "mcp_server_git"]), "mcp_server_git");
        assert_eq!(
            id(&[
                "node",
                "/x/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
            ]),
            "server-everything"
        );
        assert_eq!(id(&["node", "servers/poison.mjs"]), "poison");
        assert_eq!(id(&["/usr/local/bin/my-mcp", "--flag"]), "my-mcp");
        assert_eq!(id(&["weird name!"]), "weird-name-");
    }
}
