//! Resolve the server command once, hash it, and run exactly that file.
//!
//! A script is only as trustworthy as its interpreter, so for `#!` files the interpreter (after
//! `/usr/bin/env NAME` lookup) is resolved and hashed too, and both go into the fingerprint.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("`{0}` not found on PATH")]
    NotFound(String),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
}

/// The file that will be executed and its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBinary {
    /// Canonical path (symlinks resolved): what is executed.
    pub path: PathBuf,
    /// sha256 over the file, and over the interpreter of a `#!` script, hex.
    pub sha256: String,
    /// The interpreter of a `#!` script, canonical.
    pub interpreter: Option<PathBuf>,
}

/// Finds `command` the way execvp would (a name with a slash is a path; otherwise the first
/// executable regular file on `path_var`), then canonicalises and hashes it.
pub fn resolve(command: &OsStr, path_var: Option<&OsStr>) -> Result<ResolvedBinary, ResolveError> {
    let found = find_executable(command, path_var)
        .ok_or_else(|| ResolveError::NotFound(command.to_string_lossy().into_owned()))?;
    let path = canonical(&found)?;
    let mut hasher = Sha256::new();
    hash_file(&path, &mut hasher)?;
    let interpreter = match shebang_interpreter(&path)? {
        Some(interp) => {
            let interp = canonical(&interp)?;
            hasher.update(b"\0interpreter\0");
            hasher.update(interp.as_os_str().as_encoded_bytes());
            hash_file(&interp, &mut hasher)?;
            Some(interp)
        }
        None => None,
    };
    Ok(ResolvedBinary {
        path,
        sha256: hex::encode(hasher.finalize()),
        interpreter,
    })
}

fn find_executable(command: &OsStr, path_var: Option<&OsStr>) -> Option<PathBuf> {
    if command.as_encoded_bytes().contains(&b'/') {
        let p = PathBuf::from(command);
        return is_executable(&p).then_some(p);
    }
    if command.is_empty() {
        return None;
    }
    let path_var = path_var
        .map(OsString::from)
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path_var)
        .map(|dir| {
            // An empty PATH entry means the current directory, as in execvp.
            if dir.as_os_str().is_empty() {
                PathBuf::from(".").join(command)
            } else {
                dir.join(command)
            }
        })
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn canonical(path: &Path) -> Result<PathBuf, ResolveError> {
    std::fs::canonicalize(path).map_err(|source| ResolveError::Read {
        path: path.to_owned(),
        source,
    })
}

fn hash_file(path: &Path, hasher: &mut Sha256) -> Result<(), ResolveError> {
    let err = |source| ResolveError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(err)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(err)?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

/// The program a `#!` line runs; `/usr/bin/env [-S] NAME` is followed to NAME on PATH.
fn shebang_interpreter(path: &Path) -> Result<Option<PathBuf>, ResolveError> {
    let err = |source| ResolveError::Read {
        path: path.to_owned(),
        source,
    };
    let mut line = Vec::new();
    BufReader::new(File::open(path).map_err(err)?)
        .take(256)
        .read_until(b'\n', &mut line)
        .map_err(err)?;
    let Some(rest) = line.strip_prefix(b"#!") else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(rest);
    let mut words = text.split_whitespace();
    let Some(program) = words.next() else {
        return Ok(None);
    };
    let program = PathBuf::from(program);
    if program.file_name() == Some(OsStr::new("env")) {
        let name = words.find(|w| !w.starts_with('-'));
        if let Some(name) = name {
            let path_var = std::env::var_os("PATH");
            return Ok(find_executable(OsStr::new(name), path_var.as_deref()));
        }
    }
    Ok(Some(program))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        let mut f = File::create(&path).unwrap();
        f.write_all(body.as_bytes()).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn finds_on_path_and_follows_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let real = script(dir.path(), "real-server", "#!/bin/sh\necho hi\n");
        std::os::unix::fs::symlink(&real, dir.path().join("srv")).unwrap();
        let resolved = resolve(OsStr::new("srv"), Some(dir.path().as_os_str())).unwrap();
        assert_eq!(resolved.path, std::fs::canonicalize(&real).unwrap());
        assert!(resolved.interpreter.is_some());
        assert_eq!(resolved.sha256.len(), 64);
    }

    #[test]
    fn hash_changes_with_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = script(dir.path(), "srv", "#!/bin/sh\necho one\n");
        let first = resolve(path.as_os_str(), None).unwrap();
        script(dir.path(), "srv", "#!/bin/sh\necho two\n");
        let second = resolve(path.as_os_str(), None).unwrap();
        assert_ne!(first.sha256, second.sha256);
    }

    #[test]
    fn missing_and_non_executable_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain");
        std::fs::write(&path, "data").unwrap();
        assert!(matches!(
            resolve(OsStr::new("plain"), Some(dir.path().as_os_str())),
            Err(ResolveError::NotFound(_))
        ));
        assert!(matches!(
            resolve(OsStr::new("nope-nope"), Some(dir.path().as_os_str())),
            Err(ResolveError::NotFound(_))
        ));
    }

    #[test]
    fn env_shebang_resolves_the_named_program() {
        let dir = tempfile::tempdir().unwrap();
        let path = script(dir.path(), "srv", "#!/usr/bin/env -S sh -e\necho hi\n");
        let resolved = resolve(path.as_os_str(), None).unwrap();
        let interp = resolved.interpreter.unwrap();
        assert!(interp.ends_with("sh") || interp.ends_with("dash") || interp.ends_with("bash"));
    }
}
