//! Scores `agentsh::inspect` on the public evaluation sets in `tests/corpus`: tool definitions
//! through `scan_tool`, tool results through `scan_output`, each flagged when a finding reaches
//! the threshold. Detection (attacks flagged) and false positives (benign flagged) per source,
//! kind and split (`tune`, `evaluate`, `holdout`), then the totals the detector's goals are
//! stated on: the `evaluate` half and the held-out sources.
//!
//! ```text
//! cargo run --release -p agentsh --example corpus_score -- [CORPUS_DIR] [--threshold high]
//!     [--by KEY] [--misses SOURCE] [--false-positives SOURCE] [--split SPLIT]
//! ```
//!
//! `--by attack` (or `probe`, `attack_category`, `injection_type`, `lang`, `server`) also
//! breaks each source down by that `meta` field. `--misses` and `--false-positives` list a
//! source's items (`all` for every source) with their top finding, `--split` only those of one
//! split (list `tune` while tuning; `evaluate` and `holdout` are for counting).
//!
//! Each item is judged in the session of its server: the definitions in the corpus that share
//! its server (an AgentDojo suite, an npm package, a LiveMCPBench server), so a description or
//! result that names another tool of its own server is read as such.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use agentsh::inspect::{
    Detector, DetectorOptions, Finding, Scope, SessionTools, Severity, max_severity,
};
use serde_json::Value;

mod support;

struct Args {
    corpus: PathBuf,
    threshold: Severity,
    by: Option<String>,
    misses: Option<String>,
    false_positives: Option<String>,
    split: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        corpus: Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus"),
        threshold: Severity::High,
        by: None,
        misses: None,
        false_positives: None,
        split: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--threshold" => {
                args.threshold = value("--threshold")?.parse().map_err(|e| format!("{e}"))?
            }
            "--by" => args.by = Some(value("--by")?),
            "--misses" => args.misses = Some(value("--misses")?),
            "--false-positives" => args.false_positives = Some(value("--false-positives")?),
            "--split" => args.split = Some(value("--split")?),
            "-h" | "--help" => {
                return Err("usage: corpus_score [CORPUS_DIR] [--threshold low|medium|high|critical] [--by META_KEY] [--misses SOURCE|all] [--false-positives SOURCE|all] [--split tune|evaluate|holdout]".into());
            }
            other if !other.starts_with('-') => args.corpus = PathBuf::from(other),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(args)
}

/// One scored record.
struct Scored {
    source: String,
    kind: String,
    attack: bool,
    split: String,
    flagged: bool,
    id: String,
    top: Option<Finding>,
    meta: Value,
}

/// Attacks flagged of attacks, benign flagged of benign.
#[derive(Default, Clone, Copy)]
struct Tally {
    attacks: usize,
    detected: usize,
    benign: usize,
    false_positives: usize,
}

impl Tally {
    fn add(&mut self, s: &Scored) {
        if s.attack {
            self.attacks += 1;
            self.detected += usize::from(s.flagged);
        } else {
            self.benign += 1;
            self.false_positives += usize::from(s.flagged);
        }
    }

    fn cells(&self) -> String {
        let rate = |n: usize, d: usize| {
            if d == 0 {
                "      –".to_owned()
            } else {
                format!("{:6.1}%", 100.0 * n as f64 / d as f64)
            }
        };
        format!(
            "detection {} ({:>4}/{:<4})  FP {} ({:>3}/{:<4})",
            rate(self.detected, self.attacks),
            self.detected,
            self.attacks,
            rate(self.false_positives, self.benign),
            self.false_positives,
            self.benign
        )
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let detector = Detector::new(DetectorOptions::default()).expect("built-in rules compile");
    let records = match support::corpus::load(&args.corpus) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e:#}");
            return ExitCode::from(2);
        }
    };
    let mut sessions: BTreeMap<String, SessionTools> = BTreeMap::new();
    for r in records.iter().filter(|r| r["kind"] == "definition") {
        if let Some(name) = r["tool"]["name"].as_str() {
            let server = server_of(r);
            sessions
                .entry(server.clone())
                .or_default()
                .add(&server, name);
        }
    }
    let empty = SessionTools::new();
    let mut scored = Vec::new();
    let started = Instant::now();
    for record in &records {
        let field = |k: &str| record[k].as_str().unwrap_or_default().to_owned();
        let kind = field("kind");
        let server = server_of(record);
        let scope = Scope {
            session: sessions.get(&server).unwrap_or(&empty),
            server: &server,
            tool: record["meta"]["tool"]
                .as_str()
                .or_else(|| record["tool"]["name"].as_str()),
        };
        let findings = match kind.as_str() {
            "definition" => detector.scan_tool_in(&record["tool"], Some(&scope)),
            "result" => {
                detector.scan_output_in(&support::corpus::result_value(record), Some(&scope))
            }
            other => {
                eprintln!("{}: unknown kind `{other}`", field("id"));
                return ExitCode::from(2);
            }
        };
        let flagged = max_severity(&findings).is_some_and(|s| s >= args.threshold);
        let top = findings.iter().max_by_key(|f| f.severity).cloned();
        scored.push(Scored {
            source: field("source"),
            kind,
            attack: field("label") == "attack",
            split: field("split"),
            flagged,
            id: field("id"),
            top,
            meta: record["meta"].clone(),
        });
    }
    let elapsed = started.elapsed();

    println!(
        "tests/corpus at threshold {}: {} items in {:.2}s",
        args.threshold.as_str(),
        scored.len(),
        elapsed.as_secs_f64()
    );
    let mut by_source: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
    let mut by_meta: BTreeMap<(String, String, String), Tally> = BTreeMap::new();
    let mut totals: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for s in &scored {
        by_source
            .entry((s.kind.clone(), s.source.clone(), s.split.clone()))
            .or_default()
            .add(s);
        totals
            .entry((s.kind.clone(), s.split.clone()))
            .or_default()
            .add(s);
        if let Some(key) = &args.by
            && let Some(value) = s.meta.get(key)
        {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            by_meta
                .entry((s.kind.clone(), s.source.clone(), value))
                .or_default()
                .add(s);
        }
    }
    let mut kind_shown = String::new();
    for ((kind, source, split), tally) in &by_source {
        if *kind != kind_shown {
            println!("\n{kind}s, per source and split:");
            kind_shown.clone_from(kind);
        }
        println!("  {source:<22} {split:<9} {}", tally.cells());
    }
    if let Some(key) = &args.by {
        println!("\nby meta.{key}:");
        for ((kind, source, value), tally) in &by_meta {
            println!("  {kind:<10} {source:<18} {value:<32} {}", tally.cells());
        }
    }
    println!("\ntotals (the goals are stated on `evaluate` and `holdout`):");
    for ((kind, split), tally) in &totals {
        println!("  {kind:<10} {split:<9} {}", tally.cells());
    }
    // The goal on results is about injected content; a direct injection is the user's own
    // turn, which some sources hold beside it (CyberSecEval's direct cases, jailbreak prompts).
    let mut by_channel: BTreeMap<(&str, &str), Tally> = BTreeMap::new();
    for s in scored.iter().filter(|s| s.kind == "result") {
        let channel = if s.attack && is_direct(&s.meta) {
            "direct"
        } else {
            "injected"
        };
        by_channel
            .entry((channel, s.split.as_str()))
            .or_default()
            .add(s);
    }
    println!(
        "\nresults, injected into content apart from direct injections (the user's own turn, \
         meta.kind or meta.injection_type `direct`; benign results count with injected):"
    );
    for ((channel, split), tally) in &by_channel {
        println!("  {channel:<10} {split:<9} {}", tally.cells());
    }

    let wanted = |filter: &Option<String>, s: &Scored| {
        filter
            .as_deref()
            .is_some_and(|f| f == "all" || f == s.source)
            && args.split.as_ref().is_none_or(|split| *split == s.split)
    };
    for s in &scored {
        let miss = s.attack && !s.flagged && wanted(&args.misses, s);
        let false_positive = !s.attack && s.flagged && wanted(&args.false_positives, s);
        if miss || false_positive {
            let top = s.top.as_ref().map_or_else(
                || "no finding".to_owned(),
                |f| {
                    let evidence: Vec<String> = f
                        .evidence
                        .iter()
                        .map(|e| format!("{}={:?}", e.signal, e.text))
                        .collect();
                    format!(
                        "{} {} {}: {:?} {}",
                        f.severity.as_str(),
                        f.rule,
                        f.field,
                        f.matched,
                        evidence.join(" ")
                    )
                },
            );
            let what = if miss { "MISS" } else { "FP  " };
            println!("{what} {} [{}]: {top}", s.id, s.split);
        }
    }
    ExitCode::SUCCESS
}

/// The server an item belongs to: the unit whose tools form its session.
fn server_of(r: &Value) -> String {
    let meta = &r["meta"];
    let server = ["suite", "package", "server_key", "server"]
        .iter()
        .find_map(|k| meta[*k].as_str())
        .unwrap_or_default();
    format!("{}:{server}", r["source"].as_str().unwrap_or_default())
}

/// A direct injection: written as the user's own message, not carried by content the model
/// reads.
fn is_direct(meta: &Value) -> bool {
    ["kind", "injection_type"]
        .iter()
        .any(|k| meta.get(*k).and_then(Value::as_str) == Some("direct"))
}
