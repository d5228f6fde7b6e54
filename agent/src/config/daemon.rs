//! The daemon's own config file (`agentshd --config FILE`, by default [`DEFAULT_DAEMON_CONFIG`]):
//! where state lives, the control socket, the default policy, who administers, how sessions and
//! launcher shims behave. `packaging/agentsh.yaml` is the documented system default.
//!
//! Read with the policy file's machinery (YAML tree with positions, `Fields` readers, one
//! `Report`), so a mistake here is reported like one in a policy: `file:line:col`, every error
//! in one pass, unknown keys with a suggestion.

use std::path::{Component, Path, PathBuf};

use super::alerts::{self, AlertsConfig};
use super::checkpoints::{self, CheckpointsConfig};
use super::diagnostic::{ConfigError, Diagnostic, Location, Report};
use super::export::{self, OtlpConfig};
use super::formats::check_id;
use super::kernel::{self, KernelConfig};
use super::keywords::Enforcement;
use super::load::{parse_document, read_source};
use super::patterns::NameGlob;
use super::proxy::{self, ProxyConfig};
use super::reader::{self, Fields};
use super::retention::{self, RetentionConfig};
use super::secrets::{self, SecretsConfig};
use super::yaml::Node;

/// Where `agentshd` looks when `--config` is not given.
pub const DEFAULT_DAEMON_CONFIG: &str = "/etc/agentsh/agentsh.yaml";

/// `sun_path` holds 108 bytes, the terminating NUL included.
const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Where cgroup2 is usually mounted. A `cgroup_parent` under a cgroup2 mount was meant
/// relative to it: taken as written it would name `/sys/fs/cgroup/sys/fs/cgroup/...`.
const USUAL_CGROUP2_MOUNT: &str = "/sys/fs/cgroup";

/// This host's cgroup2 mount (hybrid hosts have it at `/sys/fs/cgroup/unified`), then the
/// usual place: a path under either is a mistake.
fn cgroup2_mounts() -> Vec<PathBuf> {
    let mut mounts: Vec<PathBuf> = crate::kernel::cgroup2_mount().into_iter().collect();
    mounts.push(PathBuf::from(USUAL_CGROUP2_MOUNT));
    mounts
}

const ROOT_KEYS: &[&str] = &[
    "state_dir",
    "socket",
    "policy",
    "admin_group",
    "sessions",
    "launcher",
    "proxy",
    "providers",
    "tls",
    "dlp",
    "kernel",
    "on_detection",
    "retention",
    "checkpoints",
    "otlp",
    "secrets",
];
const SESSIONS_KEYS: &[&str] = &["cgroup_parent", "allow_user_policy"];
const LAUNCHER_KEYS: &[&str] = &["enabled", "custom_servers"];
const CUSTOM_SERVER_KEYS: &[&str] = &["match", "id"];

/// The daemon config, paths already resolved against the config file's directory.
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// The file name (or other origin) given to the loader.
    pub origin: String,
    /// redb state, pins and events.
    pub state_dir: PathBuf,
    /// The control socket; None leaves the choice to the daemon at run time.
    pub socket: Option<PathBuf>,
    /// The default policy for sessions.
    pub policy: PathBuf,
    /// Members of this group administer through the socket (root always does).
    pub admin_group: Option<String>,
    pub sessions: SessionsConfig,
    pub launcher: LauncherConfig,
    /// The LLM proxy: `proxy`, `providers`, `tls`, `dlp`.
    pub proxy: ProxyConfig,
    /// `kernel`: the eBPF hooks and the transparent proxy.
    pub kernel: KernelConfig,
    /// `on_detection`: alerts sent as they happen.
    pub alerts: AlertsConfig,
    /// `retention`: how much of the audit trail is kept.
    pub retention: RetentionConfig,
    /// `checkpoints`: how often the trail's head is signed.
    pub checkpoints: CheckpointsConfig,
    /// `otlp`: where the audit trail is exported.
    pub otlp: OtlpConfig,
    /// `secrets`: credentials the sessions get placeholders for.
    pub secrets: SecretsConfig,
    /// Findings that did not stop the file from loading, in file order.
    pub warnings: Vec<Diagnostic>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionsConfig {
    pub cgroup_parent: CgroupParent,
    /// Whether users outside `admin_group` may run a session under their own `--policy`.
    pub allow_user_policy: bool,
}

/// Under which cgroup sessions are created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CgroupParent {
    /// Chosen by the daemon at run time.
    #[default]
    Auto,
    /// An absolute path inside the cgroup2 mount (`/agentsh.slice/sessions`), without `..`.
    Path(PathBuf),
}

#[derive(Clone, Debug)]
pub struct LauncherConfig {
    /// Whether `agentshctl run` puts the launcher shims (npx, uvx, node, python, python3,
    /// docker) first on the agent's PATH.
    pub enabled: bool,
    /// Server launches to guard besides the built-in patterns, tried first, in file order.
    pub custom_servers: Vec<CustomServer>,
}

impl Default for LauncherConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            custom_servers: Vec::new(),
        }
    }
}

/// `launcher.custom_servers[]`: a glob on the package, module or image name a launcher runs.
#[derive(Clone, Debug)]
pub struct CustomServer {
    pub pattern: NameGlob,
    /// The server id to use; derived from the name that matched when absent.
    pub id: Option<String>,
    pub span: Location,
}

/// Loads and validates a daemon config file; relative paths in it are taken from the file's
/// directory. Errors name `path:line:column`.
pub fn load_daemon_file(path: &Path) -> Result<DaemonConfig, ConfigError> {
    let src = read_source(path)?;
    load_daemon_str(&src, &path.display().to_string(), &directory_of(path))
}

/// Loads and validates a daemon config from text; `origin` names it in diagnostics and
/// relative paths are joined to `base_dir` (left relative if it is). Does no I/O.
pub fn load_daemon_str(
    src: &str,
    origin: &str,
    base_dir: &Path,
) -> Result<DaemonConfig, ConfigError> {
    let mut r = Report::new(origin);
    let config = parse_document(&mut r, src)
        .and_then(|root| read(&mut r, &root, origin, base_dir))
        .unwrap_or_else(|| DaemonConfig::unread(origin));
    let warnings = r.finish()?;
    // Past `finish`, every required key was read: a missing one is an error.
    Ok(DaemonConfig { warnings, ..config })
}

impl DaemonConfig {
    /// Stands in when the file could not be walked at all; an error is always reported then.
    fn unread(origin: &str) -> Self {
        Self {
            origin: origin.to_string(),
            state_dir: PathBuf::new(),
            socket: None,
            policy: PathBuf::new(),
            admin_group: None,
            sessions: SessionsConfig::default(),
            launcher: LauncherConfig::default(),
            proxy: ProxyConfig::default(),
            kernel: KernelConfig::default(),
            alerts: AlertsConfig::default(),
            retention: RetentionConfig::default(),
            checkpoints: CheckpointsConfig::default(),
            otlp: OtlpConfig::default(),
            secrets: SecretsConfig::default(),
            warnings: Vec::new(),
        }
    }
}

/// The config file's directory, made absolute so that the paths it names keep their meaning
/// whatever the daemon's working directory later is.
fn directory_of(path: &Path) -> PathBuf {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::path::absolute(dir).map_or_else(|_| dir.to_path_buf(), |d| tidy(&d))
}

fn read(r: &mut Report, root: &Node, origin: &str, base: &Path) -> Option<DaemonConfig> {
    let f = Fields::open(r, root, "", ROOT_KEYS)?;
    let state_dir = f
        .required(r, "state_dir")
        .and_then(|n| path(r, n, "state_dir", base));
    let socket = f.get("socket").and_then(|n| socket(r, n, base));
    let policy = f
        .required(r, "policy")
        .and_then(|n| path(r, n, "policy", base));
    let admin_group = f.get("admin_group").and_then(|n| group(r, n));
    let proxy = proxy::read(r, &f, base);
    let kernel = f
        .get("kernel")
        .map(|n| kernel::read(r, n))
        .unwrap_or_default();
    let alerts = f
        .get("on_detection")
        .map(|n| alerts::read(r, n))
        .unwrap_or_default();
    let retention = f
        .get("retention")
        .map(|n| retention::read(r, n))
        .unwrap_or_default();
    let checkpoints = f
        .get("checkpoints")
        .map(|n| checkpoints::read(r, n))
        .unwrap_or_default();
    let otlp = f
        .get("otlp")
        .map(|n| export::read(r, n))
        .unwrap_or_default();
    let secrets = f
        .get("secrets")
        .map(|n| secrets::read(r, n, base, &proxy))
        .unwrap_or_default();
    if proxy.listen.is_none() && kernel.enforcement == Enforcement::Off {
        for key in ["providers", "tls", "dlp"] {
            if f.has(key) {
                r.warn(
                    f.key_loc(key),
                    format!(
                        "`{key}` has no effect: neither proxy runs (`proxy.listen` is not set and `kernel.enforcement` is off)"
                    ),
                );
            }
        }
    }
    Some(DaemonConfig {
        origin: origin.to_string(),
        state_dir: state_dir.unwrap_or_default(),
        socket,
        policy: policy.unwrap_or_default(),
        admin_group,
        sessions: f
            .get("sessions")
            .map(|n| sessions(r, n))
            .unwrap_or_default(),
        launcher: f
            .get("launcher")
            .map(|n| launcher(r, n))
            .unwrap_or_default(),
        proxy,
        kernel,
        alerts,
        retention,
        checkpoints,
        otlp,
        secrets,
        warnings: Vec::new(),
    })
}

/// A filesystem path; a relative one is joined to `base`.
fn path(r: &mut Report, node: &Node, key: &str, base: &Path) -> Option<PathBuf> {
    let text = reader::string(r, node, key)?;
    if text.trim().is_empty() {
        r.error(node.loc, format!("`{key}` must not be empty"));
        return None;
    }
    if text.contains('\0') {
        r.error(
            node.loc,
            format!("`{key}` must not contain a NUL character"),
        );
        return None;
    }
    if text.trim() != text {
        r.warn(
            node.loc,
            format!("`{key}` starts or ends with whitespace, which is kept as part of the path"),
        );
    }
    Some(tidy(&base.join(text)))
}

fn socket(r: &mut Report, node: &Node, base: &Path) -> Option<PathBuf> {
    let socket = path(r, node, "socket", base)?;
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        r.error(
            node.loc,
            format!(
                "`socket`: `{}` is {len} bytes long; a Unix socket path holds at most \
                 {MAX_SOCKET_PATH_BYTES}",
                socket.display()
            ),
        );
        return None;
    }
    Some(socket)
}

fn group(r: &mut Report, node: &Node) -> Option<String> {
    let name = reader::string(r, node, "admin_group")?;
    if name.trim().is_empty() {
        r.error(node.loc, "`admin_group` must not be empty");
        return None;
    }
    // `:` separates the fields of /etc/group; no group name can hold it or a control character.
    if let Some(c) = name.chars().find(|c| *c == ':' || c.is_control()) {
        r.error(
            node.loc,
            format!("`admin_group`: `{name}` contains {c:?}, which no group name can hold"),
        );
        return None;
    }
    Some(name)
}

fn sessions(r: &mut Report, node: &Node) -> SessionsConfig {
    let d = SessionsConfig::default();
    let Some(f) = Fields::open(r, node, "sessions", SESSIONS_KEYS) else {
        return d;
    };
    SessionsConfig {
        cgroup_parent: f
            .get("cgroup_parent")
            .and_then(|n| cgroup_parent(r, n, &f.path_of("cgroup_parent")))
            .unwrap_or(d.cgroup_parent),
        allow_user_policy: f.bool(r, "allow_user_policy", d.allow_user_policy),
    }
}

fn cgroup_parent(r: &mut Report, node: &Node, key: &str) -> Option<CgroupParent> {
    let text = reader::string(r, node, key)?;
    if text == "auto" {
        return Some(CgroupParent::Auto);
    }
    let path = Path::new(&text);
    let problem = if !path.is_absolute() {
        format!(
            "`{key}` must be `auto` or an absolute path inside the cgroup2 mount (such as \
             /agentsh.slice/sessions), found {}",
            node.describe()
        )
    } else if path.components().any(|c| c == Component::ParentDir) {
        format!("`{key}` must not contain `..`: sessions stay under the cgroup it names")
    } else if tidy(path) == Path::new("/") {
        format!(
            "`{key}` must not be the root cgroup: every process below it would count as an \
             agent session; name a cgroup of its own, such as /agentsh"
        )
    } else if text.contains('\0') {
        format!("`{key}` must not contain a NUL character")
    } else if let Some(inner) = cgroup2_mounts()
        .iter()
        .find_map(|mount| path.strip_prefix(mount).ok())
    {
        format!(
            "`{key}` is a path inside the cgroup2 mount, not on the filesystem: write `{}`",
            Path::new("/").join(inner).display()
        )
    } else {
        return Some(CgroupParent::Path(tidy(path)));
    };
    r.error(node.loc, problem);
    None
}

fn launcher(r: &mut Report, node: &Node) -> LauncherConfig {
    let d = LauncherConfig::default();
    let Some(f) = Fields::open(r, node, "launcher", LAUNCHER_KEYS) else {
        return d;
    };
    let enabled = f.bool(r, "enabled", d.enabled);
    let list_path = f.path_of("custom_servers");
    let custom: Vec<(String, CustomServer)> = f
        .list(r, "custom_servers")
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            let item = format!("{list_path}[{i}]");
            custom_server(r, n, &item).map(|c| (item, c))
        })
        .collect();
    check_custom_servers(r, &custom);
    if !enabled && !custom.is_empty() {
        r.warn(
            f.key_loc("custom_servers"),
            format!(
                "`{list_path}` has no effect: `{}` is false",
                f.path_of("enabled")
            ),
        );
    }
    LauncherConfig {
        enabled,
        custom_servers: custom.into_iter().map(|(_, c)| c).collect(),
    }
}

fn custom_server(r: &mut Report, node: &Node, path: &str) -> Option<CustomServer> {
    let f = Fields::open(r, node, path, CUSTOM_SERVER_KEYS)?;
    let pattern = f
        .required(r, "match")
        .and_then(|n| reader::name_glob(r, n, &f.path_of("match")));
    let id = match f.get("id") {
        Some(n) => Some(server_id(r, n, &f.path_of("id"))?),
        None => None,
    };
    Some(CustomServer {
        pattern: pattern?,
        id,
        span: node.loc,
    })
}

fn server_id(r: &mut Report, node: &Node, key: &str) -> Option<String> {
    let id = reader::string(r, node, key)?;
    check_id(&id)
        .map_err(|m| r.error(node.loc, format!("`{key}`: {m}")))
        .ok()?;
    Some(id)
}

/// Patterns that cannot be what was meant: one matching everything, one that an earlier entry
/// already claims.
fn check_custom_servers(r: &mut Report, custom: &[(String, CustomServer)]) {
    for (i, (path, server)) in custom.iter().enumerate() {
        let glob = server.pattern.as_str();
        if glob.chars().all(|c| c == '*') {
            r.warn(
                server.span,
                format!(
                    "`{path}.match` is `{glob}`, which matches every package, module and image: \
                     every npx, uvx, node, python and docker launch would run under agentsh-shim"
                ),
            );
        }
        if let Some((first, earlier)) = custom[..i].iter().find(|(_, c)| c.pattern.as_str() == glob)
        {
            r.warn(
                server.span,
                format!(
                    "`{path}` never applies: `{first}` (line {}) has the same pattern and is \
                     tried first",
                    earlier.span.line
                ),
            );
        }
    }
}

/// Drops `.` components, repeated and trailing slashes. `..` stays: resolving it without the
/// filesystem would be wrong across symlinks.
fn tidy(path: &Path) -> PathBuf {
    path.components().collect()
}
