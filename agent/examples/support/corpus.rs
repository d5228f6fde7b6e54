//! The evaluation corpus (`tests/corpus`) as the scorer and the model's trainer read it: every
//! JSON-lines record, in a fixed order.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

/// Every record under `dir`, files in path order. Records whose threat is in code, a name or a
/// schema (`*.code-only.jsonl`, `*.not-scored.jsonl`) are not a text detector's and are left
/// out.
pub fn load(dir: &Path) -> Result<Vec<Value>> {
    let mut paths = Vec::new();
    files(dir, &mut paths).with_context(|| format!("reading {}", dir.display()))?;
    paths.sort();
    let mut records = Vec::new();
    for path in &paths {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for (n, line) in text.lines().enumerate() {
            let record = serde_json::from_str::<Value>(line)
                .with_context(|| format!("{}:{}", path.display(), n + 1))?;
            records.push(record);
        }
    }
    Ok(records)
}

/// A tool result carrying a result record's text, as a server would send it.
pub fn result_value(record: &Value) -> Value {
    serde_json::json!({"content": [{"type": "text", "text": record["text"]}]})
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "jsonl")
            && ![".code-only.jsonl", ".not-scored.jsonl"]
                .iter()
                .any(|side| path.to_string_lossy().ends_with(side))
        {
            out.push(path);
        }
    }
    Ok(())
}
