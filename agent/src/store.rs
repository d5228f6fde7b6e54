//! Persistent state in redb: tool definition pins and server binary pins.
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
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| StoreError::StateDir {
                path: dir.to_owned(),
                source,
            })?;
        let store = Self {
            path: dir.join("pins.redb"),
        };
        store.write(|txn| {
            txn.open_table(TOOL_PINS)?;
            txn.open_table(BINARY_PINS)?;
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
        let db = self.database()?;
        let txn = db.begin_read().map_err(|e| self.db_err("begin read", e))?;
        let table = txn
            .open_table(TOOL_PINS)
            .map_err(|e| self.db_err("open table", e))?;
        let mut pins = Vec::new();
        let range = table
            .range(prefix.as_str()..)
            .map_err(|e| self.db_err("range", e))?;
        for entry in range {
            let (key, value) = entry.map_err(|e| self.db_err("read", e))?;
            let Some(tool) = key.value().strip_prefix(prefix.as_str()) else {
                break;
            };
            let pin =
                serde_json::from_slice(value.value()).map_err(|source| StoreError::Corrupt {
                    path: self.path.clone(),
                    key: key.value().to_owned(),
                    source,
                })?;
            pins.push((tool.to_owned(), pin));
        }
        Ok(pins)
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
        let bytes = serde_json::to_vec(value).map_err(|source| StoreError::Corrupt {
            path: self.path.clone(),
            key: key.to_owned(),
            source,
        })?;
        self.write(|txn| {
            txn.open_table(table)?.insert(key, bytes.as_slice())?;
            Ok(())
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
