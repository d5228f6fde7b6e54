//! Where an export stopped: the last exported sequence number, in a file of its own. The OTLP
//! exporter keeps one in the state dir; `agentshctl export --cursor FILE` keeps one for its
//! caller.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CursorError {
    #[error("{path}: `{text}` is not an event number (delete the file to start over)")]
    NotANumber { path: PathBuf, text: String },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The number in `path`; 0 (the start of the trail) when there is no file.
pub fn read(path: &Path) -> Result<u64, CursorError> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.trim().parse().map_err(|_| CursorError::NotANumber {
            path: path.to_owned(),
            text: text.trim().to_owned(),
        }),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(source) => Err(CursorError::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Written aside and renamed: a crash leaves the old number or the new one, never half.
pub fn write(path: &Path, seq: u64) -> std::io::Result<()> {
    let mut temp = OsString::from(path.as_os_str());
    temp.push(".new");
    let temp = PathBuf::from(temp);
    std::fs::write(&temp, format!("{seq}\n"))?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_survives_a_missing_one_starts_at_the_beginning_and_garbage_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otlp.cursor");
        assert_eq!(read(&path).unwrap(), 0);
        write(&path, 42).unwrap();
        assert_eq!(read(&path).unwrap(), 42);
        assert!(!dir.path().join("otlp.cursor.new").exists());
        std::fs::write(&path, "yesterday\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("otlp.cursor: `yesterday`"), "{err}");
    }
}
