//! Finding the launcher directory of the session this process runs in, and its manifest,
//! whatever the agent did to the environment: `$AGENTSH_LAUNCHER_DIR`, else the PATH entry
//! that is a launcher directory (agents keep PATH, or they could not start `npx`), else the
//! directory named after the session of this process's cgroup. A directory counts only when
//! it is this user's (or root's) and no one else may write to it.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use agentsh::launch::manifest::{self, Manifest};

/// The session's launcher directory and what it says.
pub struct Found {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

pub fn find() -> Option<Found> {
    let from_env = std::env::var_os(manifest::DIR_VAR).map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|dir| {
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(manifest::DIR_PREFIX))
        });
    from_env
        .into_iter()
        .chain(on_path)
        .chain(by_cgroup())
        .find_map(|dir| read(&dir).map(|manifest| Found { dir, manifest }))
}

fn read(dir: &Path) -> Option<Manifest> {
    if !trusted(dir) {
        return None;
    }
    let bytes = std::fs::read(dir.join(manifest::FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Owned by this user or root, and writable by no one else.
fn trusted(dir: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    let me = nix::unistd::geteuid().as_raw();
    meta.is_dir() && (meta.uid() == me || meta.uid() == 0) && meta.mode() & 0o022 == 0
}

/// Where `agentshctl run` puts the directory of the session this process's cgroup belongs to.
fn by_cgroup() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    // cgroup2: the line `0::/path`.
    let Some(session) = text
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(manifest::session_of_cgroup)
    else {
        return Vec::new();
    };
    let name = format!("{}{session}", manifest::DIR_PREFIX);
    let uid = nix::unistd::geteuid().as_raw();
    vec![
        PathBuf::from(format!("/run/user/{uid}")).join(&name),
        std::env::temp_dir().join(&name),
        Path::new("/tmp").join(&name),
    ]
}
