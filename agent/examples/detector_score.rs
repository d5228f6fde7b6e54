//! Scores `agentsh::inspect` against the shared corpus.
//!
//! ```text
//! cargo run --release -p agentsh --example detector_score -- [CORPUS_DIR] [--threshold medium] [--verbose]
//! ```
//!
//! Prints per file: items, flagged, rate; the overall detection and false-positive rates; the
//! agent-egress-bench cases per input type; the held-out split (tuning half = even 1-based line
//! numbers, held-out half = odd); and throughput over the whole corpus. `--verbose` lists misses
//! and false positives with their top finding.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use agentsh::inspect::{Detector, DetectorOptions, Finding, Mode, Severity, max_severity};
use serde_json::Value;

struct Args {
    corpus: PathBuf,
    threshold: Severity,
    verbose: bool,
    /// Also list every sub-threshold finding on benign items (near misses).
    near: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut corpus = None;
    let mut threshold = Severity::Medium;
    let mut verbose = false;
    let mut near = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--threshold" => {
                let v = it.next().ok_or("--threshold needs a value")?;
                threshold = v.parse().map_err(|e| format!("{e}"))?;
            }
            "--verbose" | "-v" => verbose = true,
            "--near" => near = true,
            "-h" | "--help" => {
                return Err(
                    "usage: detector_score [CORPUS_DIR] [--threshold low|medium|high|critical] [--verbose]"
                        .into(),
                );
            }
            other if !other.starts_with('-') && corpus.is_none() => {
                corpus = Some(PathBuf::from(other))
            }
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    let corpus = match corpus {
        Some(c) => c,
        None => default_corpus().ok_or("corpus not found; pass CORPUS_DIR")?,
    };
    Ok(Args {
        corpus,
        threshold,
        verbose,
        near,
    })
}

/// `<repo>/../shared/corpus`, the repo found from CARGO_MANIFEST_DIR (agent/ or the repo root).
fn default_corpus() -> Option<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    [
        manifest.join("../shared/corpus"),
        manifest.join("../../shared/corpus"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}

struct Item {
    /// 1-based line number (or case index for the egress bench).
    line: usize,
    label: String,
    /// What gets scanned, and how.
    input: Input,
    bytes: usize,
}

enum Input {
    Tools(Vec<Value>),
    Output(Value),
    Text(String),
    Arguments(Value),
    NotApplicable,
}

fn scan(d: &Detector, input: &Input) -> Option<Vec<Finding>> {
    Some(match input {
        Input::Tools(tools) => tools.iter().flat_map(|t| d.scan_tool(t)).collect(),
        Input::Output(v) => d.scan_output(v),
        Input::Text(t) => d.scan_text(t, "$.response_body", Mode::Output),
        Input::Arguments(v) => d.scan_arguments(v),
        Input::NotApplicable => return None,
    })
}

fn load_jsonl(path: &Path) -> Result<Vec<Item>, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?;
        let tool = v.get("tool").cloned().unwrap_or(Value::Null);
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
        let tag = v
            .get("server_key")
            .or_else(|| v.get("category"))
            .and_then(Value::as_str)
            .unwrap_or("");
        items.push(Item {
            line: i + 1,
            label: format!("{tag}/{name}"),
            bytes: tool.to_string().len(),
            input: Input::Tools(vec![tool]),
        });
    }
    Ok(items)
}

struct Case {
    item: Item,
    input_type: String,
    block: bool,
}

fn load_egress(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files = Vec::new();
    collect_json(&dir.join("cases"), &mut files)?;
    files.sort();
    let mut cases = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let text = fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", f.display()))?;
        let input_type = v["input_type"].as_str().unwrap_or("?").to_string();
        let block = v["expected_verdict"].as_str() == Some("block");
        let payload = &v["payload"];
        let msgs = payload["jsonrpc_messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let input = match input_type.as_str() {
            "mcp_tool_definition" => Input::Tools(
                msgs.iter()
                    .filter_map(|m| m["result"]["tools"].as_array())
                    .flatten()
                    .cloned()
                    .collect(),
            ),
            "mcp_tool_result" => Input::Output(
                msgs.iter()
                    .find_map(|m| m.get("result").cloned())
                    .unwrap_or(Value::Null),
            ),
            "response_content" => {
                Input::Text(payload["response_body"].as_str().unwrap_or("").to_string())
            }
            "mcp_tool_call" => Input::Arguments(
                msgs.iter()
                    .find_map(|m| m["params"].get("arguments").cloned())
                    .unwrap_or(Value::Null),
            ),
            // Sequences need per-session state (the analyzer's job); URLs are the proxy's.
            _ => Input::NotApplicable,
        };
        cases.push(Case {
            item: Item {
                line: i + 1,
                label: v["id"].as_str().unwrap_or("?").to_string(),
                bytes: payload.to_string().len(),
                input,
            },
            input_type,
            block,
        });
    }
    Ok(cases)
}

fn collect_json(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let rd = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.is_dir() {
            collect_json(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    Ok(())
}

#[derive(Default, Clone, Copy)]
struct Tally {
    n: usize,
    flagged: usize,
}

impl Tally {
    fn add(&mut self, flagged: bool) {
        self.n += 1;
        self.flagged += usize::from(flagged);
    }
    fn rate(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.flagged as f64 / self.n as f64
        }
    }
    fn merge(&mut self, o: Tally) {
        self.n += o.n;
        self.flagged += o.flagged;
    }
}

fn top(findings: &[Finding]) -> String {
    findings
        .iter()
        .max_by_key(|f| f.severity)
        .map(|f| {
            format!(
                "[{} {}] {} in {}: {:?}",
                f.severity, f.rule, f.category, f.field, f.matched
            )
        })
        .unwrap_or_else(|| "(no findings)".into())
}

struct FileScore {
    name: &'static str,
    all: Tally,
    tune: Tally,
    held: Tally,
}

fn score_file(
    d: &Detector,
    name: &'static str,
    items: &[Item],
    malicious: bool,
    threshold: Severity,
    verbose: bool,
    near: bool,
) -> FileScore {
    let mut s = FileScore {
        name,
        all: Tally::default(),
        tune: Tally::default(),
        held: Tally::default(),
    };
    for it in items {
        let findings = scan(d, &it.input).unwrap_or_default();
        let flagged = max_severity(&findings).is_some_and(|m| m >= threshold);
        s.all.add(flagged);
        if it.line % 2 == 0 {
            s.tune.add(flagged)
        } else {
            s.held.add(flagged)
        }
        if verbose && flagged != malicious {
            let what = if malicious { "MISS" } else { "FP  " };
            println!(
                "  {what} {name}:{} {} -> {}",
                it.line,
                it.label,
                top(&findings)
            );
        }
        if near && !malicious && !flagged && !findings.is_empty() {
            for f in &findings {
                println!(
                    "  near {name}:{} {} -> [{} {}] {}: {:?}",
                    it.line, it.label, f.severity, f.rule, f.field, f.matched
                );
            }
        }
    }
    s
}

fn pct(x: f64) -> String {
    format!("{:5.1}%", x * 100.0)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let build = Instant::now();
    let det = match Detector::new(DetectorOptions::default()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("detector: {e}");
            return ExitCode::FAILURE;
        }
    };
    let build_ms = build.elapsed().as_secs_f64() * 1e3;
    let c = &args.corpus;
    let load = |p: &str| load_jsonl(&c.join(p));
    let (live, cben, mal, beh, egress) = match (
        load("benign/livemcpbench-tools.jsonl"),
        load("benign/cisco-benign.jsonl"),
        load("malicious/cisco-evals.jsonl"),
        load("malicious/cisco-behavioral-tools.jsonl"),
        load_egress(&c.join("agent-egress-bench")),
    ) {
        (Ok(a), Ok(b), Ok(m), Ok(h), Ok(e)) => (a, b, m, h, e),
        (a, b, m, h, e) => {
            for err in [a.err(), b.err(), m.err(), h.err(), e.err()]
                .into_iter()
                .flatten()
            {
                eprintln!("{err}");
            }
            return ExitCode::FAILURE;
        }
    };

    println!(
        "agentsh::inspect detector score  (corpus {}, threshold {}, {} rules, built in {build_ms:.0} ms)\n",
        c.display(),
        args.threshold,
        det.rule_count()
    );
    let t = args.threshold;
    let v = args.verbose;
    if v {
        println!("misses and false positives:");
    }
    let files = [
        score_file(&det, "malicious/cisco-evals.jsonl", &mal, true, t, v, false),
        score_file(
            &det,
            "benign/livemcpbench-tools.jsonl",
            &live,
            false,
            t,
            v,
            args.near,
        ),
        score_file(
            &det,
            "benign/cisco-benign.jsonl",
            &cben,
            false,
            t,
            v,
            args.near,
        ),
    ];
    let beh_score = score_file(
        &det,
        "malicious/cisco-behavioral-tools.jsonl",
        &beh,
        true,
        t,
        false,
        false,
    );

    // Egress bench, per input type.
    let mut per_type: Vec<(String, Tally, Tally, usize)> = Vec::new(); // (type, block, allow, n/a)
    let (mut eb, mut ea) = (Tally::default(), Tally::default());
    let (mut eb_tune, mut eb_held, mut ea_tune, mut ea_held) = (
        Tally::default(),
        Tally::default(),
        Tally::default(),
        Tally::default(),
    );
    for case in &egress {
        let entry = match per_type.iter_mut().position(|e| e.0 == case.input_type) {
            Some(i) => i,
            None => {
                per_type.push((
                    case.input_type.clone(),
                    Tally::default(),
                    Tally::default(),
                    0,
                ));
                per_type.len() - 1
            }
        };
        let Some(findings) = scan(&det, &case.item.input) else {
            per_type[entry].3 += 1;
            continue;
        };
        let flagged = max_severity(&findings).is_some_and(|m| m >= t);
        let tune = case.item.line % 2 == 0;
        if case.block {
            per_type[entry].1.add(flagged);
            eb.add(flagged);
            if tune {
                eb_tune.add(flagged)
            } else {
                eb_held.add(flagged)
            }
        } else {
            per_type[entry].2.add(flagged);
            ea.add(flagged);
            if tune {
                ea_tune.add(flagged)
            } else {
                ea_held.add(flagged)
            }
        }
        if (v && flagged != case.block)
            || (args.near && !case.block && !flagged && !findings.is_empty())
        {
            let what = match (flagged == case.block, case.block) {
                (true, _) => "near",
                (false, true) => "MISS",
                (false, false) => "FP  ",
            };
            println!(
                "  {what} egress {} ({}) -> {}",
                case.item.label,
                case.input_type,
                top(&findings)
            );
        }
    }
    if v {
        println!();
    }

    println!(
        "{:<42} {:>6} {:>8} {:>7}   {:>15} {:>15}",
        "file", "items", "flagged", "rate", "tune(even)", "held-out(odd)"
    );
    for f in files.iter().chain(std::iter::once(&beh_score)) {
        println!(
            "{:<42} {:>6} {:>8} {:>7}   {:>4}/{:<4}{:>7} {:>4}/{:<4}{:>7}{}",
            f.name,
            f.all.n,
            f.all.flagged,
            pct(f.all.rate()),
            f.tune.flagged,
            f.tune.n,
            pct(f.tune.rate()),
            f.held.flagged,
            f.held.n,
            pct(f.held.rate()),
            if f.name.contains("behavioral") {
                "  (code-level malice; reported only)"
            } else {
                ""
            }
        );
    }

    println!("\nagent-egress-bench (block -> detection, allow -> false positive):");
    println!(
        "{:<22} {:>14} {:>14} {:>6}",
        "input_type", "block flagged", "allow flagged", "n/a"
    );
    for (ty, b, a, na) in &per_type {
        println!(
            "{:<22} {:>8}/{:<5} {:>8}/{:<5} {:>6}{}",
            ty,
            b.flagged,
            b.n,
            a.flagged,
            a.n,
            na,
            match (ty.as_str(), *na > 0) {
                ("mcp_tool_sequence", true) =>
                    "  (not applicable: needs per-session state, the analyzer's job)",
                (_, true) => "  (not applicable: URL checks belong to the proxy, not the detector)",
                _ => "",
            }
        );
    }
    println!(
        "{:<22} {:>8}/{:<5} {:>8}/{:<5}",
        "total applicable", eb.flagged, eb.n, ea.flagged, ea.n
    );

    // Core = the three description files the test asserts on.
    let core_det = files[0].all;
    let mut core_fp = files[1].all;
    core_fp.merge(files[2].all);
    let mut all_det = core_det;
    all_det.merge(eb);
    let mut all_fp = core_fp;
    all_fp.merge(ea);
    let mut tune_det = files[0].tune;
    tune_det.merge(eb_tune);
    let mut held_det = files[0].held;
    held_det.merge(eb_held);
    let mut tune_fp = files[1].tune;
    tune_fp.merge(files[2].tune);
    tune_fp.merge(ea_tune);
    let mut held_fp = files[1].held;
    held_fp.merge(files[2].held);
    held_fp.merge(ea_held);

    println!("\nsummary (threshold {t}):");
    println!(
        "  core   (cisco-evals vs livemcpbench+cisco-benign): detection {} ({}/{})  FP {} ({}/{})",
        pct(core_det.rate()),
        core_det.flagged,
        core_det.n,
        pct(core_fp.rate()),
        core_fp.flagged,
        core_fp.n
    );
    println!(
        "  overall (+ egress-bench applicable cases):        detection {} ({}/{})  FP {} ({}/{})",
        pct(all_det.rate()),
        all_det.flagged,
        all_det.n,
        pct(all_fp.rate()),
        all_fp.flagged,
        all_fp.n
    );
    println!(
        "  tuning half (even lines):                         detection {} ({}/{})  FP {} ({}/{})",
        pct(tune_det.rate()),
        tune_det.flagged,
        tune_det.n,
        pct(tune_fp.rate()),
        tune_fp.flagged,
        tune_fp.n
    );
    println!(
        "  held-out half (odd lines):                        detection {} ({}/{})  FP {} ({}/{})",
        pct(held_det.rate()),
        held_det.flagged,
        held_det.n,
        pct(held_fp.rate()),
        held_fp.flagged,
        held_fp.n
    );

    // How much rests on tool names ("exfil_dns_tunnel")? Rescan with every name blanked.
    let mut nameless = Tally::default();
    for it in &mal {
        if let Input::Tools(ts) = &it.input {
            let findings: Vec<Finding> = ts
                .iter()
                .flat_map(|t| {
                    let mut t = t.clone();
                    t["name"] = Value::String("tool".into());
                    det.scan_tool(&t)
                })
                .collect();
            nameless.add(max_severity(&findings).is_some_and(|m| m >= t));
        }
    }
    println!(
        "  cisco-evals with tool names blanked:              detection {} ({}/{})",
        pct(nameless.rate()),
        nameless.flagged,
        nameless.n
    );

    // Throughput: every tool definition and payload in the corpus, several passes.
    let mut tools: Vec<&Value> = Vec::new();
    for items in [&live, &cben, &mal, &beh] {
        for it in items.iter() {
            if let Input::Tools(ts) = &it.input {
                tools.extend(ts.iter());
            }
        }
    }
    let tool_bytes: usize = tools.iter().map(|t| t.to_string().len()).sum();
    let egress_bytes: usize = egress.iter().map(|c| c.item.bytes).sum();
    let _ = live.iter().map(|i| i.bytes).sum::<usize>();
    let passes = 20;
    let start = Instant::now();
    let mut sink = 0usize;
    for _ in 0..passes {
        for t in &tools {
            sink += det.scan_tool(t).len();
        }
    }
    let tool_secs = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for _ in 0..passes {
        for case in &egress {
            sink += scan(&det, &case.item.input).map_or(0, |f| f.len());
        }
    }
    let egress_secs = start.elapsed().as_secs_f64();
    let n_tools = (tools.len() * passes) as f64;
    println!(
        "\nthroughput ({passes} passes, {} tool definitions, {:.2} MB + {} egress payloads, {:.2} MB; findings {sink}):",
        tools.len(),
        tool_bytes as f64 / 1e6,
        egress.len(),
        egress_bytes as f64 / 1e6
    );
    println!(
        "  scan_tool: {:.0} tools/s, {:.1} MB/s, {:.1} us per tool on average",
        n_tools / tool_secs,
        (tool_bytes * passes) as f64 / 1e6 / tool_secs,
        tool_secs / n_tools * 1e6
    );
    println!(
        "  all payloads: {:.1} MB/s",
        ((tool_bytes + egress_bytes) * passes) as f64 / 1e6 / (tool_secs + egress_secs)
    );
    results_throughput(&det);
    ExitCode::SUCCESS
}

/// Output inspection's cost: the tool results of `tests/corpus` (real servers' outputs,
/// documents, pages, attacks) through `scan_output`, and one page of 1 MB, each against a
/// plain serialisation of the same JSON (what any interception point pays anyway).
fn results_throughput(det: &Detector) {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/corpus");
    let mut results: Vec<Value> = Vec::new();
    let mut pending = vec![corpus];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = fs::read_to_string(&path).unwrap_or_default();
                for line in text.lines() {
                    let Ok(record) = serde_json::from_str::<Value>(line) else {
                        continue;
                    };
                    if record["kind"] == "result" {
                        results.push(serde_json::json!({
                            "content": [{"type": "text", "text": record["text"]}]
                        }));
                    }
                }
            }
        }
    }
    if results.is_empty() {
        println!("  scan_output: tests/corpus not found; skipped");
        return;
    }
    let bytes: usize = results.iter().map(|r| r.to_string().len()).sum();
    let time = |f: &dyn Fn(&Value) -> usize, items: &[Value], passes: usize| {
        let start = Instant::now();
        let mut sink = 0usize;
        for _ in 0..passes {
            for r in items {
                sink += f(r);
            }
        }
        (start.elapsed().as_secs_f64(), sink)
    };
    let passes = 5;
    let (scan_secs, _) = time(&|r| det.scan_output(r).len(), &results, passes);
    let (copy_secs, _) = time(&|r| r.to_string().len(), &results, passes);
    let n = (results.len() * passes) as f64;
    println!(
        "  scan_output: {} results of tests/corpus ({:.2} MB): {:.1} us per result on average, {:.1} MB/s (serialising them: {:.1} us, {:.0} MB/s)",
        results.len(),
        bytes as f64 / 1e6,
        scan_secs / n * 1e6,
        (bytes * passes) as f64 / 1e6 / scan_secs,
        copy_secs / n * 1e6,
        (bytes * passes) as f64 / 1e6 / copy_secs
    );
    let paragraph = "The quarterly report shows revenue up 4% on the year. Operating costs fell, \
        and the board approved the budget for the next period. See the appendix for details.\n";
    let page = serde_json::json!({"content": [{"type": "text", "text": paragraph.repeat((1 << 20) / paragraph.len())}]});
    let page_bytes = page.to_string().len();
    let (scan_secs, _) = time(
        &|r| det.scan_output(r).len(),
        std::slice::from_ref(&page),
        3,
    );
    let (copy_secs, _) = time(&|r| r.to_string().len(), std::slice::from_ref(&page), 3);
    println!(
        "  scan_output, one {:.1} MB page: {:.1} ms ({:.1} MB/s; serialising it: {:.2} ms)",
        page_bytes as f64 / 1e6,
        scan_secs / 3.0 * 1e3,
        (page_bytes * 3) as f64 / 1e6 / scan_secs,
        copy_secs / 3.0 * 1e3
    );
}
