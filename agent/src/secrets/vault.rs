//! Reading the real values, once, at the daemon's start: from a systemd credential, a private
//! file, a command, or the (private) config itself. Values stay in this process's memory,
//! zeroed when dropped; they are never logged, stored or sent to a client.

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zeroize::Zeroizing;

use crate::config::{SecretConfig, SecretDestination, SecretSource};

/// How long a `command:` may take to print its secret.
const COMMAND_PATIENCE: Duration = Duration::from_secs(30);
/// A secret longer than this is not a credential (and would not fit a header).
const MAX_VALUE_BYTES: usize = 64 * 1024;

/// Why a secret's value could not be read. Names the secret and its definition, never a value.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("{at}: secret {name}: {problem}")]
    Value {
        name: String,
        at: String,
        problem: String,
    },
    #[error("{path}: {problem}")]
    Private { path: PathBuf, problem: String },
}

/// One brokered secret with its value.
pub struct Secret {
    pub name: String,
    value: Zeroizing<String>,
    pub destinations: Vec<SecretDestination>,
    /// How it was read (`credential anthropic`, `command /usr/bin/pass`): for `secrets list`.
    pub source: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("destinations", &self.destinations)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// A secret with a known value (tests, and `secrets test`).
    pub fn new(name: &str, value: &str, destinations: Vec<SecretDestination>) -> Self {
        Self {
            name: name.to_owned(),
            value: Zeroizing::new(value.to_owned()),
            destinations,
            source: "given".to_owned(),
        }
    }

    pub(super) fn value(&self) -> &str {
        &self.value
    }

    /// The value's length in bytes: what `secrets test` may say about it.
    pub fn len(&self) -> usize {
        self.value.len()
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// Whether `host:port` is one of its destinations.
    pub fn destination(&self, host: &str, port: u16) -> Option<&SecretDestination> {
        self.destinations.iter().find(|d| d.matches(host, port))
    }
}

/// Reads every secret's value. `config_file` is the file the secrets were written in (inline
/// `value:`s need it private).
pub fn load(secrets: &[SecretConfig], config_file: &Path) -> Result<Vec<Secret>, VaultError> {
    secrets
        .iter()
        .map(|secret| {
            let fail = |problem: String| VaultError::Value {
                name: secret.name.clone(),
                at: secret.defined_at.clone(),
                problem,
            };
            let (value, source) = match &secret.source {
                SecretSource::Value(value) => {
                    ensure_private(config_file)?;
                    (Zeroizing::new(value.clone()), "config".to_owned())
                }
                SecretSource::File(path) => (
                    read_private(path).map_err(|e| fail(e.to_string()))?,
                    format!("file {}", path.display()),
                ),
                SecretSource::Credential(name) => {
                    let dir = std::env::var_os("CREDENTIALS_DIRECTORY").ok_or_else(|| {
                        fail(format!(
                            "credential `{name}`: $CREDENTIALS_DIRECTORY is not set (the unit \
                             needs LoadCredential={name}:PATH or SetCredentialEncrypted=)"
                        ))
                    })?;
                    let path = PathBuf::from(dir).join(name);
                    (
                        read_file(&path).map_err(|e| fail(format!("credential `{name}`: {e}")))?,
                        format!("credential {name}"),
                    )
                }
                SecretSource::Command(argv) => (
                    run(argv).map_err(fail)?,
                    format!("command {}", argv.join(" ")),
                ),
            };
            let value = trim_newline(value);
            check_value(&value).map_err(|p| fail(p.to_owned()))?;
            Ok(Secret {
                name: secret.name.clone(),
                value,
                destinations: secret.destinations.clone(),
                source,
            })
        })
        .collect()
}

/// A file that holds secrets must be the daemon's own (or root's) and nobody else's to read.
pub fn ensure_private(path: &Path) -> Result<(), VaultError> {
    let meta = std::fs::metadata(path).map_err(|e| VaultError::Private {
        path: path.to_owned(),
        problem: e.to_string(),
    })?;
    let problem = private_problem(&meta);
    match problem {
        None => Ok(()),
        Some(problem) => Err(VaultError::Private {
            path: path.to_owned(),
            problem,
        }),
    }
}

fn private_problem(meta: &std::fs::Metadata) -> Option<String> {
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != 0 && meta.uid() != euid {
        return Some(format!(
            "holds secrets but belongs to uid {}: it must be root's (or the daemon's)",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Some(format!(
            "holds secrets but has mode {mode:04o}: others may read it (chmod 600)"
        ));
    }
    None
}

fn read_private(path: &Path) -> Result<Zeroizing<String>, String> {
    // Not following a symlink, and not blocking on a FIFO planted in its place.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    if let Some(problem) = private_problem(&meta) {
        return Err(format!("{}: {problem}", path.display()));
    }
    read_all(file).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_file(path: &Path) -> Result<Zeroizing<String>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    read_all(file).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_all(file: impl Read) -> std::io::Result<Zeroizing<String>> {
    let mut bytes = Zeroizing::new(Vec::new());
    file.take(MAX_VALUE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| std::io::Error::other("is not UTF-8 text"))?
        .to_owned();
    Ok(Zeroizing::new(text))
}

/// Runs `argv` with nothing but a fixed PATH, stdin closed; its stdout, within the patience.
fn run(argv: &[String]) -> Result<Zeroizing<String>, String> {
    run_within(argv, COMMAND_PATIENCE)
}

/// What the command's stderr may say in its error: its first line, from at most this much.
const MAX_STDERR_BYTES: u64 = 4096;

/// [`run`] within `patience`, all of it: the command's exit and the end of its output (a
/// process it left behind holding stdout open, `sleep 100 &`, holds up nothing past the
/// deadline). The command runs in a process group of its own, killed whole when time is up.
pub(super) fn run_within(argv: &[String], patience: Duration) -> Result<Zeroizing<String>, String> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc;

    let shown = argv.join(" ");
    let deadline = Instant::now() + patience;
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("command `{shown}`: {e}"))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let kill_group = || {
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    };
    let late = || {
        format!(
            "command `{shown}` did not finish within {}s (or left a process holding its output open)",
            patience.as_secs()
        )
    };
    // Both pipes are read on threads of their own, so neither can fill up and block the
    // command, and a deadline holds for each: a thread still reading past it is left behind,
    // to end when the killed group's pipes close.
    // What is past the bounds is read and dropped: a command blocked writing it would not
    // finish.
    let (out_tx, out_rx) = mpsc::channel();
    let mut stdout = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        let _ = out_tx.send(read_all(&mut stdout));
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    let (err_tx, err_rx) = mpsc::channel();
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = (&mut stderr).take(MAX_STDERR_BYTES).read_to_end(&mut text);
        let _ = err_tx.send(String::from_utf8_lossy(&text).into_owned());
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                kill_group();
                let _ = child.wait();
                return Err(late());
            }
            Err(e) => {
                kill_group();
                let _ = child.wait();
                return Err(format!("command `{shown}`: {e}"));
            }
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let value = match out_rx.recv_timeout(left) {
        Ok(read) => read.map_err(|e| format!("command `{shown}`: its output {e}"))?,
        Err(_) => {
            // The command is gone; what it started still holds its stdout.
            kill_group();
            return Err(late());
        }
    };
    if !status.success() {
        let left = deadline.saturating_duration_since(Instant::now());
        let stderr = err_rx.recv_timeout(left).unwrap_or_default();
        kill_group();
        return Err(format!(
            "command `{shown}` failed ({status}): {}",
            stderr.lines().next().unwrap_or("").trim()
        ));
    }
    Ok(value)
}

/// One trailing newline (a file or `echo`), as `$(...)` would.
fn trim_newline(value: Zeroizing<String>) -> Zeroizing<String> {
    let trimmed = value
        .strip_suffix("\r\n")
        .or_else(|| value.strip_suffix('\n'))
        .unwrap_or(&value);
    if trimmed.len() == value.len() {
        value
    } else {
        Zeroizing::new(trimmed.to_owned())
    }
}

fn check_value(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("the value is empty");
    }
    if value.len() > MAX_VALUE_BYTES {
        return Err("the value is longer than 64 KiB: not a credential");
    }
    if value.chars().any(char::is_control) {
        return Err(
            "the value holds a control character (a line break?): it could not go in a header",
        );
    }
    Ok(())
}
