//! What a command line runs, named as patterns see it, and the name parsers the launchers
//! share: npm package specs, Python requirements, script paths.

/// A package, module, image or script a launcher runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    /// The full name: `@scope/name`, a Python module or distribution, a script's package
    /// directory, an image without tag or digest (`ghcr.io/github/github-mcp-server`, or
    /// `mcp/fetch` for Docker Hub, whose registry and `library/` are left out).
    pub name: String,
    /// Recognised by the launcher's own rule rather than a pattern (Docker Hub's `mcp/`).
    pub known: bool,
}

impl Target {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            known: false,
        }
    }

    /// The last `/` component: an npm name without its scope, an image without its namespace.
    pub fn short(&self) -> &str {
        self.name.rsplit('/').next().unwrap_or(&self.name)
    }
}

/// Directories that hold a package's build output or sources rather than name it:
/// `mcp-server-foo/dist/index.js` is the package `mcp-server-foo`.
const BUILD_DIRS: &[&str] = &[
    "dist", "build", "lib", "out", "src", "bin", "esm", "cjs", "dist-esm", "dist-cjs",
];

/// File stems that say nothing about what runs: the directory names it better.
const GENERIC_STEMS: &[&str] = &[
    "index", "main", "server", "cli", "app", "start", "run", "mod", "__main__", "__init__",
];

/// The name in an npm package spec: `@scope/name@1.2.3` -> `@scope/name`, `name@latest` ->
/// `name`, `npm:name@1` -> `name`; for a path, URL or `github:user/repo`, its last component.
pub(super) fn npm_package(spec: &str) -> Option<String> {
    let spec = spec.strip_prefix("npm:").unwrap_or(spec);
    let name = if let Some(scoped) = spec.strip_prefix('@') {
        let (scope, rest) = scoped.split_once('/')?;
        let name = rest.split(['@', '/']).next().unwrap_or(rest);
        if scope.is_empty() || name.is_empty() {
            return None;
        }
        format!("@{scope}/{name}")
    } else if is_path_like(spec) {
        return last_component(spec.split('#').next().unwrap_or(spec));
    } else {
        spec.split('@').next().unwrap_or(spec).to_owned()
    };
    Some(name).filter(|n| !n.is_empty())
}

/// The distribution named by a Python requirement: `mcp-server-fetch==1.0`, `pkg[extra]>=2`,
/// `pkg@1.2` (uvx), `name @ git+https://...`, or a VCS URL or path (`#egg=` or its last
/// component).
pub(super) fn python_requirement(spec: &str) -> Option<String> {
    let spec = spec.trim();
    if let Some((name, _url)) = spec.split_once(" @ ") {
        return python_requirement(name);
    }
    if is_path_like(spec) {
        if let Some((_, egg)) = spec.split_once("#egg=") {
            return python_requirement(egg);
        }
        let spec = spec.split('#').next().unwrap_or(spec);
        // `.../repo.git@v1.2` names a revision; an `@` before the last `/` is a user.
        let spec = match spec.rsplit_once('@') {
            Some((location, revision)) if !revision.contains('/') => location,
            _ => spec,
        };
        return last_component(spec);
    }
    let name: String = spec
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    Some(name).filter(|n| !n.is_empty())
}

/// The top-level module of `python -m pkg.sub`.
pub(super) fn python_module(module: &str) -> Option<String> {
    let top = module.split('.').next().unwrap_or(module);
    let valid = top
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && top.chars().all(|c| c.is_alphanumeric() || c == '_');
    valid.then(|| top.to_owned())
}

/// What a script path names: the package under the last `node_modules`, else the script's
/// file stem and its package directory (the first parent that is not a build directory),
/// the more telling first.
pub(super) fn script_targets(path: &str) -> Vec<Target> {
    let parts: Vec<&str> = path
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some((file, dirs)) = parts.split_last() else {
        return Vec::new();
    };
    if let Some(at) = dirs.iter().rposition(|d| *d == "node_modules") {
        return node_modules_package(&parts[at + 1..])
            .map(Target::new)
            .into_iter()
            .collect();
    }
    let stem = file_stem(file);
    let package_dir = dirs
        .iter()
        .rev()
        .find(|d| **d != ".." && !BUILD_DIRS.contains(d));
    let mut names: Vec<&str> = Vec::with_capacity(2);
    if GENERIC_STEMS.contains(&stem) {
        names.extend(package_dir);
        names.push(stem);
    } else {
        names.push(stem);
        names.extend(package_dir);
    }
    names
        .into_iter()
        .filter(|n| n.chars().any(|c| c != '.'))
        .map(Target::new)
        .collect()
}

/// `@scope/pkg/dist/index.js` -> `@scope/pkg`, `pkg/index.js` -> `pkg`, `.bin/tool` -> `tool`.
fn node_modules_package(after: &[&str]) -> Option<String> {
    match after {
        [".bin", file, ..] => Some(file_stem(file).to_owned()),
        [scope, name, _, ..] if scope.starts_with('@') => Some(format!("{scope}/{name}")),
        [package, _, ..] if !package.starts_with('@') => Some((*package).to_owned()),
        _ => None,
    }
    .filter(|n| !n.is_empty())
}

/// `index.js` -> `index`, `tool` -> `tool`, `.hidden` -> `.hidden`.
fn file_stem(file: &str) -> &str {
    match file.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => file,
    }
}

/// A spec that names a location rather than a registry package.
fn is_path_like(spec: &str) -> bool {
    spec.contains(['/', ':', '\\']) || spec.starts_with(['.', '~'])
}

/// The last path component, without a `.git`, `.tgz` or `.tar.gz` suffix.
fn last_component(spec: &str) -> Option<String> {
    let last = spec
        .split(['/', ':', '\\'])
        .rev()
        .find(|p| !p.is_empty() && *p != "." && *p != "..")?;
    let last = [".git", ".tgz", ".tar.gz", ".zip"]
        .iter()
        .find_map(|ext| last.strip_suffix(ext))
        .unwrap_or(last);
    Some(last.to_owned()).filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npm_specs() {
        let name = |s| npm_package(s);
        assert_eq!(
            name("@modelcontextprotocol/server-filesystem@1.2.3").as_deref(),
            Some("@modelcontextprotocol/server-filesystem")
        );
        assert_eq!(name("mcp-server-x@latest").as_deref(), Some("mcp-server-x"));
        assert_eq!(name("npm:@a/b@^1").as_deref(), Some("@a/b"));
        assert_eq!(
            name("github:acme/mcp-server-git#main").as_deref(),
            Some("mcp-server-git")
        );
        assert_eq!(
            name("./tools/mcp-server-x.tgz").as_deref(),
            Some("mcp-server-x")
        );
        for bad in ["", "@", "@scope", "@/x", "@s/", "@latest"] {
            assert_eq!(name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn python_specs() {
        let name = |s| python_requirement(s);
        assert_eq!(
            name("mcp-server-fetch==1.0").as_deref(),
            Some("mcp-server-fetch")
        );
        assert_eq!(
            name("mcp_server_git[extra]>=2").as_deref(),
            Some("mcp_server_git")
        );
        assert_eq!(
            name("mcp-server-time@latest").as_deref(),
            Some("mcp-server-time")
        );
        assert_eq!(name("foo @ git+https://x/y").as_deref(), Some("foo"));
        assert_eq!(
            name("git+https://github.com/acme/mcp-server-x.git@v1").as_deref(),
            Some("mcp-server-x")
        );
        assert_eq!(
            name("git+https://h/r.git#egg=mcp_server_y").as_deref(),
            Some("mcp_server_y")
        );
        assert_eq!(
            name("git+ssh://git@h.com/acme/mcp_server_z").as_deref(),
            Some("mcp_server_z")
        );
        assert_eq!(name("==1"), None);
        assert_eq!(
            python_module("mcp_server_git.server").as_deref(),
            Some("mcp_server_git")
        );
        assert_eq!(python_module("1x"), None);
        assert_eq!(python_module(""), None);
    }

    #[test]
    fn script_paths() {
        let names = |p| {
            script_targets(p)
                .into_iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names("/x/node_modules/@m/server-a/dist/index.js"),
            ["@m/server-a"]
        );
        assert_eq!(names("node_modules/.bin/mcp-server-b"), ["mcp-server-b"]);
        assert_eq!(names("node_modules/tool"), Vec::<String>::new());
        assert_eq!(
            names("/srv/mcp-server-c/build/index.js"),
            ["mcp-server-c", "index"]
        );
        assert_eq!(names("../weather/weather.py"), ["weather", "weather"]);
        assert_eq!(names("repo/scripts/build.js"), ["build", "scripts"]);
        assert_eq!(names("build.js"), ["build"]);
        assert!(names("").is_empty() && names("/").is_empty());
    }
}
