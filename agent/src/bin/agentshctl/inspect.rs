//! `agentshctl mcp inspect FILE`: the detector over tool definitions from a file.
//!
//! FILE may be a tools/list response, `{"tools": [...]}`, one tool, or JSON lines of tools
//! (a line may be `{"server": .., "tool": {..}}`). The tools of the file are one session: a
//! description that directs the model to another server's tool of the file is read as such
//! (tools without a server are one server's).

use std::path::PathBuf;
use std::process::ExitCode;

use agentsh::inspect::{
    Detector, DetectorOptions, Finding, Scope, SessionTools, Severity, max_severity,
};
use agentsh::mcp::definition_hash;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to scan (`-` for standard input).
    file: PathBuf,
    /// One JSON object per tool instead of a table.
    #[arg(long)]
    json: bool,
    /// Findings at or above this severity count (low, medium, high, critical).
    #[arg(long, default_value = "medium")]
    threshold: Severity,
}

struct Item {
    server: Option<String>,
    tool: Value,
}

pub fn run(args: &Args) -> Result<ExitCode> {
    let text = if args.file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading standard input")?
    } else {
        std::fs::read_to_string(&args.file)
            .with_context(|| format!("cannot read {}", args.file.display()))?
    };
    let items = parse_items(&text).with_context(|| format!("{}", args.file.display()))?;
    let detector = Detector::new(DetectorOptions::default()).context("building the detector")?;
    let server_of = |item: &Item| item.server.clone().unwrap_or_default();
    let mut session = SessionTools::new();
    for item in &items {
        if let Some(name) = item.tool.get("name").and_then(Value::as_str) {
            session.add(&server_of(item), name);
        }
    }
    let mut flagged = false;
    for item in &items {
        let server = server_of(item);
        let scope = Scope {
            session: &session,
            server: &server,
            tool: item.tool.get("name").and_then(Value::as_str),
        };
        let findings: Vec<Finding> = detector
            .scan_tool_in(&item.tool, Some(&scope))
            .into_iter()
            .filter(|f| f.severity >= args.threshold)
            .collect();
        flagged |= !findings.is_empty();
        let name = item
            .tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>");
        let hash = definition_hash(&item.tool);
        if args.json {
            let report = json!({
                "server": item.server,
                "tool": name,
                "hash": hash.to_string(),
                "max_severity": max_severity(&findings).map(|s| s.as_str()),
                "findings": findings,
            });
            println!("{report}");
        } else {
            let label = match &item.server {
                Some(server) => format!("{server}:{name}"),
                None => name.to_owned(),
            };
            match max_severity(&findings) {
                None => println!("ok        {label}  {hash}"),
                Some(worst) => {
                    println!("{:<9} {label}  {hash}", worst.as_str().to_uppercase());
                    for f in &findings {
                        println!(
                            "  {:<8} {:<20} {} at {}: {:?}",
                            f.severity.as_str(),
                            f.category.as_str(),
                            f.rule,
                            f.field,
                            f.context
                        );
                        for e in &f.evidence {
                            println!("           {}: {:?}", e.signal, e.text);
                        }
                    }
                }
            }
        }
    }
    Ok(if flagged {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn parse_items(text: &str) -> Result<Vec<Item>> {
    let trimmed = text.trim_start();
    // A single JSON document first; JSON lines when that fails on trailing data.
    match serde_json::from_str::<Value>(trimmed) {
        Ok(doc) => from_document(doc),
        Err(whole) => {
            let mut items = Vec::new();
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let value: Value = serde_json::from_str(line).map_err(|e| {
                    if i == 0 {
                        anyhow::anyhow!("not JSON: {whole}")
                    } else {
                        anyhow::anyhow!("line {}: {e}", i + 1)
                    }
                })?;
                items.push(from_line(value).with_context(|| format!("line {}", i + 1))?);
            }
            Ok(items)
        }
    }
}

fn from_document(doc: Value) -> Result<Vec<Item>> {
    let tools = doc
        .pointer("/result/tools")
        .or_else(|| doc.get("tools"))
        .cloned();
    match tools {
        Some(Value::Array(tools)) => Ok(tools
            .into_iter()
            .map(|tool| Item { server: None, tool })
            .collect()),
        Some(_) => bail!("`tools` is not an array"),
        None => Ok(vec![from_line(doc)?]),
    }
}

fn from_line(value: Value) -> Result<Item> {
    if let Some(tool) = value.get("tool").filter(|t| t.is_object()) {
        let server = value
            .get("server")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Ok(Item {
            server,
            tool: tool.clone(),
        });
    }
    if value.get("name").is_some_and(Value::is_string) {
        return Ok(Item {
            server: None,
            tool: value,
        });
    }
    bail!("not a tool definition (no `name`, no `tool`)")
}
