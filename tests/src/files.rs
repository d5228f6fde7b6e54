//! Files the tests make and look for: private secret files, and what a directory tree holds.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A private file (0600, as agentshd wants a secret's) under `dir` holding `value`; its path.
pub fn private_file(dir: &Path, name: &str, value: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{value}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

/// Every regular file under `dir` (symlinks not followed) that holds `needle`.
pub fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    walk(dir, &mut |path| {
        if std::fs::read(path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path.display().to_string());
        }
    });
    found
}

/// The first regular file named `name` under `dir`.
pub fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut found = None;
    walk(dir, &mut |path| {
        if found.is_none() && path.file_name().is_some_and(|n| n == name) {
            found = Some(path.to_owned());
        }
    });
    found
}

/// Calls `f` on every regular file under `dir`; unreadable directories are skipped.
fn walk(dir: &Path, f: &mut impl FnMut(&Path)) {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                f(&entry.path());
            }
        }
    }
}
