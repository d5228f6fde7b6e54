//! Tool definition pins, pending changes, approvals and server binary pins (`pins.redb`).
//!
//! Several shims may share one state dir (one per wrapped server), and redb allows one open
//! handle per file, so each operation opens the database, runs one transaction and closes it,
//! retrying briefly while another process holds it. Pin operations happen once per tools/list,
//! never per message.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redb::{Database, DatabaseError, ReadableDatabase, TableDefinition};
use serde::{Deserialize, Serialize};
use serde_json::Value;

const TOOL_PINS: TableDefinition<&str, &[u8]> = TableDefinition::new("tool_pins");
const BINARY_PINS: TableDefinition<&str, &[u8]> = TableDefinition::new("binary_pins");
/// A definition that differs from its pin and waits for a person to trust it.
const PENDING: TableDefinition<&str, &[u8]> = TableDefinition::new("pending_definitions");
/// Tools a person let through despite a detection, for one definition hash.
const APPROVALS: TableDefinition<&str, &[u8]> = TableDefinition::new("approvals");

/// How long to wait for another process that has the database open.
const LOCK_PATIENCE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create state dir {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open {path}: {source}")]
    Open {
        path: PathBuf,
        source: Box<DatabaseError>,
    },
    #[error("{path}: {what}: {message}")]
    Database {
        path: PathBuf,
        what: &'static str,
        message: String,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Evidence(#[from] crate::evidence::EvidenceError),
    #[error("invalid request id {id:?}: {reason}")]
    RequestId { id: String, reason: &'static str },
    #[error("{path}: corrupt record for {key}: {source}")]
    Corrupt {
        path: PathBuf,
        key: String,
        source: serde_json::Error,
    },
}

/// A tool definition as first trusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolPin {
    pub hash: String,
    pub definition: Value,
    /// Seconds since the epoch.
    pub pinned_at: u64,
    /// Who trusted it: `auto` (first sight) or a user name.
    pub trusted_by: String,
}

/// A person's approval of one tool definition that a detection held back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The definition hash approved; a changed definition needs a new approval.
    pub hash: String,
    pub approved_by: String,
    pub approved_at: u64,
}

/// A server executable as first run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BinaryPin {
    pub path: String,
    pub sha256: String,
    pub pinned_at: u64,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct PinStore {
    path: PathBuf,
}

impl PinStore {
    /// Uses `<dir>/pins.redb`, creating the directory (0700) and the database.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        super::create_state_dir(dir)?;
        let store = Self {
            path: dir.join("pins.redb"),
        };
        store.write(|txn| {
            txn.open_table(TOOL_PINS)?;
            txn.open_table(BINARY_PINS)?;
            txn.open_table(PENDING)?;
            txn.open_table(APPROVALS)?;
            Ok(())
        })?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn tool_pin(&self, server: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        let key = tool_key(server, tool);
        self.get(TOOL_PINS, &key)
    }

    pub fn pin_tool(&self, server: &str, tool: &str, pin: &ToolPin) -> Result<(), StoreError> {
        self.put(TOOL_PINS, &tool_key(server, tool), pin)
    }

    /// Every pinned tool of `server`, by tool name.
    pub fn tool_pins(&self, server: &str) -> Result<Vec<(String, ToolPin)>, StoreError> {
        let prefix = tool_key(server, "");
        Ok(self
            .scan::<ToolPin>(TOOL_PINS, &prefix)?
            .into_iter()
            .map(|(key, pin)| (key[prefix.len()..].to_owned(), pin))
            .collect())
    }

    /// Every pin: (server, tool, pin).
    pub fn all_tool_pins(&self) -> Result<Vec<(String, String, ToolPin)>, StoreError> {
        Ok(self
            .scan::<ToolPin>(TOOL_PINS, "")?
            .into_iter()
            .filter_map(|(key, pin)| {
                let (server, tool) = split_tool_key(&key)?;
                Some((server.to_owned(), tool.to_owned(), pin))
            })
            .collect())
    }

    /// The changed definition of a pinned tool, waiting to be trusted.
    pub fn pending(&self, server: &str, tool: &str) -> Result<Option<ToolPin>, StoreError> {
        self.get(PENDING, &tool_key(server, tool))
    }

    pub fn set_pending(&self, server: &str, tool: &str, seen: &ToolPin) -> Result<(), StoreError> {
        self.put(PENDING, &tool_key(server, tool), seen)
    }

    /// Makes the pending definition the pin, recording who trusted it. `None` when nothing is
    /// pending for the tool.
    pub fn trust_pending(
        &self,
        server: &str,
        tool: &str,
        by: &str,
    ) -> Result<Option<ToolPin>, StoreError> {
        let key = tool_key(server, tool);
        let Some(mut pin) = self.get::<ToolPin>(PENDING, &key)? else {
            return Ok(None);
        };
        pin.trusted_by = by.to_owned();
        pin.pinned_at = now_secs();
        let bytes = self.encode(&key, &pin)?;
        self.write(|txn| {
            txn.open_table(TOOL_PINS)?
                .insert(key.as_str(), bytes.as_slice())?;
            txn.open_table(PENDING)?.remove(key.as_str())?;
            Ok(())
        })?;
        Ok(Some(pin))
    }

    /// Forgets the pins (and pending definitions) of one tool, or of every tool and the binary
    /// of `server` when `tool` is `None`; the next sight pins afresh. Returns how many went.
    pub fn reset(&self, server: &str, tool: Option<&str>) -> Result<usize, StoreError> {
        let keys: Vec<String> = match tool {
            Some(tool) => vec![tool_key(server, tool)],
            None => {
                let prefix = tool_key(server, "");
                let mut keys: Vec<String> = self
                    .scan::<ToolPin>(TOOL_PINS, &prefix)?
                    .into_iter()
                    .map(|(k, _)| k)
                    .collect();
                keys.extend(
                    self.scan::<ToolPin>(PENDING, &prefix)?
                        .into_iter()
                        .map(|(k, _)| k),
                );
                keys.sort();
                keys.dedup();
                keys
            }
        };
        let mut removed = 0;
        self.write(|txn| {
            let mut pins = txn.open_table(TOOL_PINS)?;
            let mut pending = txn.open_table(PENDING)?;
            for key in &keys {
                removed += usize::from(pins.remove(key.as_str())?.is_some());
                pending.remove(key.as_str())?;
            }
            if tool.is_none() {
                removed += usize::from(txn.open_table(BINARY_PINS)?.remove(server)?.is_some());
            }
            Ok(())
        })?;
        Ok(removed)
    }

    pub fn approval(&self, server: &str, tool: &str) -> Result<Option<Approval>, StoreError> {
        self.get(APPROVALS, &tool_key(server, tool))
    }

    pub fn approve(&self, server: &str, tool: &str, approval: &Approval) -> Result<(), StoreError> {
        self.put(APPROVALS, &tool_key(server, tool), approval)
    }

    /// Every approval, as (server, tool, approval).
    pub fn all_approvals(&self) -> Result<Vec<(String, String, Approval)>, StoreError> {
        Ok(self
            .scan::<Approval>(APPROVALS, "")?
            .into_iter()
            .filter_map(|(key, a)| {
                let (server, tool) = split_tool_key(&key)?;
                Some((server.to_owned(), tool.to_owned(), a))
            })
            .collect())
    }

    /// Every binary pin, by server.
    pub fn all_binary_pins(&self) -> Result<Vec<(String, BinaryPin)>, StoreError> {
        self.scan(BINARY_PINS, "")
    }

    /// Entries of `table` whose key starts with `prefix`, in key order.
    fn scan<T: for<'de> Deserialize<'de>>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        prefix: &str,
    ) -> Result<Vec<(String, T)>, StoreError> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(|e| self.db_err("begin read", e))?;
        let table = txn
            .open_table(table)
            .map_err(|e| self.db_err("open table", e))?;
        let mut out = Vec::new();
        let range = table.range(prefix..).map_err(|e| self.db_err("range", e))?;
        for entry in range {
            let (key, value) = entry.map_err(|e| self.db_err("read", e))?;
            let key = key.value();
            if !key.starts_with(prefix) {
                break;
            }
            let item =
                serde_json::from_slice(value.value()).map_err(|source| StoreError::Corrupt {
                    path: self.path.clone(),
                    key: key.to_owned(),
                    source,
                })?;
            out.push((key.to_owned(), item));
        }
        Ok(out)
    }

    pub fn binary_pin(&self, server: &str) -> Result<Option<BinaryPin>, StoreError> {
        self.get(BINARY_PINS, server)
    }

    pub fn pin_binary(&self, server: &str, pin: &BinaryPin) -> Result<(), StoreError> {
        self.put(BINARY_PINS, server, pin)
    }

    fn get<T: for<'de> Deserialize<'de>>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let db = self.database()?;
        let txn = db.begin_read().map_err(|e| self.db_err("begin read", e))?;
        let table = txn
            .open_table(table)
            .map_err(|e| self.db_err("open table", e))?;
        let Some(value) = table.get(key).map_err(|e| self.db_err("get", e))? else {
            return Ok(None);
        };
        serde_json::from_slice(value.value())
            .map(Some)
            .map_err(|source| StoreError::Corrupt {
                path: self.path.clone(),
                key: key.to_owned(),
                source,
            })
    }

    fn put<T: Serialize>(
        &self,
        table: TableDefinition<&str, &[u8]>,
        key: &str,
        value: &T,
    ) -> Result<(), StoreError> {
        let bytes = self.encode(key, value)?;
        self.write(|txn| {
            txn.open_table(table)?.insert(key, bytes.as_slice())?;
            Ok(())
        })
    }

    fn encode<T: Serialize>(&self, key: &str, value: &T) -> Result<Vec<u8>, StoreError> {
        serde_json::to_vec(value).map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            key: key.to_owned(),
            source,
        })
    }

    fn write(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    ) -> Result<(), StoreError> {
        let db = self.database()?;
        let txn = db
            .begin_write()
            .map_err(|e| self.db_err("begin write", e))?;
        f(&txn).map_err(|e| self.db_err("write", e))?;
        txn.commit().map_err(|e| self.db_err("commit", e))
    }

    fn database(&self) -> Result<Database, StoreError> {
        let started = Instant::now();
        let mut backoff = Duration::from_millis(2);
        loop {
            match Database::create(&self.path) {
                Ok(db) => return Ok(db),
                Err(DatabaseError::DatabaseAlreadyOpen) if started.elapsed() < LOCK_PATIENCE => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(100));
                }
                Err(source) => {
                    return Err(StoreError::Open {
                        path: self.path.clone(),
                        source: Box::new(source),
                    });
                }
            }
        }
    }

    fn db_err(&self, what: &'static str, err: impl std::fmt::Display) -> StoreError {
        StoreError::Database {
            path: self.path.clone(),
            what,
            message: err.to_string(),
        }
    }
}

/// `server` and `tool` joined by a unit separator, which neither may contain in a useful way:
/// ranges over one server's tools then need no secondary index.
fn tool_key(server: &str, tool: &str) -> String {
    format!("{server}\u{1f}{tool}")
}

fn split_tool_key(key: &str) -> Option<(&str, &str)> {
    key.split_once('\u{1f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_survive_reopen_and_are_scoped_by_server() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::open(dir.path()).unwrap();
        let pin = ToolPin {
            hash: "sha256:ab".into(),
            definition: serde_json::json!({"name": "read_file"}),
            pinned_at: 1,
            trusted_by: "auto".into(),
        };
        store.pin_tool("fs", "read_file", &pin).unwrap();
        store.pin_tool("fs2", "read_file", &pin).unwrap();
        drop(store);
        let store = PinStore::open(dir.path()).unwrap();
        assert_eq!(store.tool_pin("fs", "read_file").unwrap(), Some(pin));
        assert_eq!(store.tool_pin("fs", "write_file").unwrap(), None);
        assert_eq!(store.tool_pins("fs").unwrap().len(), 1);
        assert_eq!(store.tool_pins("f").unwrap().len(), 0);
    }

    #[test]
    fn pending_definitions_are_trusted_or_reset() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::open(dir.path()).unwrap();
        let pin = |hash: &str| ToolPin {
            hash: hash.into(),
            definition: serde_json::json!({"name": "t", "description": hash}),
            pinned_at: 1,
            trusted_by: "auto".into(),
        };
        store.pin_tool("s", "t", &pin("old")).unwrap();
        assert_eq!(store.trust_pending("s", "t", "alice").unwrap(), None);
        store.set_pending("s", "t", &pin("new")).unwrap();
        let trusted = store.trust_pending("s", "t", "alice").unwrap().unwrap();
        assert_eq!(
            (trusted.hash.as_str(), trusted.trusted_by.as_str()),
            ("new", "alice")
        );
        assert_eq!(store.tool_pin("s", "t").unwrap().unwrap().hash, "new");
        assert_eq!(store.pending("s", "t").unwrap(), None);
        store.pin_tool("s", "u", &pin("x")).unwrap();
        store.pin_tool("s2", "t", &pin("y")).unwrap();
        assert_eq!(store.all_tool_pins().unwrap().len(), 3);
        assert_eq!(store.reset("s", None).unwrap(), 2);
        assert_eq!(store.all_tool_pins().unwrap().len(), 1);
    }

    #[test]
    fn binary_pins_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = PinStore::open(dir.path()).unwrap();
        assert_eq!(store.binary_pin("fs").unwrap(), None);
        let pin = BinaryPin {
            path: "/usr/bin/node".into(),
            sha256: "00".into(),
            pinned_at: 2,
        };
        store.pin_binary("fs", &pin).unwrap();
        assert_eq!(store.binary_pin("fs").unwrap(), Some(pin));
    }
}
