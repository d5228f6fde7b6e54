//! `agentshctl audit`: the audit trail's evidence.
//!
//! - `audit key` prints the daemon's checkpoint public key (keep it somewhere the daemon's
//!   host cannot rewrite: a CI job's output, a ticket, a config repository).
//! - `audit verify [--session ID] [FILE]` checks hashes, links, sequence and signed
//!   checkpoints: of the trail the daemon stores (as stored, byte for byte), or of an exported
//!   JSON-lines file (`agentshctl export`, `run --events`), offline with `--key` alone.
//!   Exit 0 intact, 1 problems found (each with its place), 2 could not check.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::api::Client;
use agentsh::api::protocol::{AuditKey, AuditRecords, AuditRecordsArgs, ops};
use agentsh::evidence::{Problem, ProblemKind, Report, verify};
use anyhow::{Context, Result, bail};
use serde_json::Value;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// The daemon's checkpoint public key (Ed25519, hex) and its id.
    Key {
        /// As JSON: {"public_key", "key_id"}.
        #[arg(long)]
        json: bool,
    },
    /// Check the trail's hash chain and signed checkpoints: the daemon's store, or FILE.
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// An exported trail (JSON lines; `-` for stdin). Without it, the daemon's store.
    file: Option<PathBuf>,
    /// Only this session's records (its links and its closing checkpoint; gaps between its
    /// records are other sessions'). A file is filtered to the session's records.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// The public key to check signatures with: 64 hex digits, or a file holding them. Without
    /// it, the daemon is asked for its key (offline checks of a file need it).
    #[arg(long, value_name = "HEX|FILE")]
    key: Option<String>,
    /// The trail must end with a checkpoint that verifies (an ended session's does; a running
    /// daemon's trail has a tail not yet signed): records after it fail the check, since a cut
    /// there would not show otherwise.
    #[arg(long)]
    complete: bool,
    /// The report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(command: &Command, socket: &Path) -> Result<ExitCode> {
    match command {
        Command::Key { json } => {
            let key = daemon_key(&mut Client::connect(socket)?)?;
            if *json {
                println!("{}", serde_json::to_string(&key)?);
            } else {
                println!("{}", key.public_key);
                eprintln!(
                    "key id {} (checkpoints name it); verify offline with \
                     `agentshctl audit verify --key {} FILE`",
                    key.key_id, key.public_key
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify(args) => verify_trail(args, socket),
    }
}

fn daemon_key(client: &mut Client) -> Result<AuditKey> {
    Ok(client.call(ops::AUDIT_KEY, &serde_json::json!({}))?)
}

/// Where each record came from, to name it in a problem.
enum Source {
    /// Line numbers of a file's records (blank lines skipped).
    File {
        name: String,
        lines: Vec<usize>,
    },
    Store,
}

fn verify_trail(args: &VerifyArgs, socket: &Path) -> Result<ExitCode> {
    let mut client = None;
    let connect = || -> Result<Client> {
        Client::connect(socket).context(
            "the daemon is not reachable: give the public key with --key (`agentshctl audit key` \
             prints it)",
        )
    };
    let key = match &args.key {
        Some(key) => read_key(key)?,
        None => {
            let mut c = connect()?;
            let key = daemon_key(&mut c)?.public_key;
            client = Some(c);
            key
        }
    };
    let (records, source) = match &args.file {
        Some(path) => {
            let (records, lines) = read_file(path, args.session.as_deref())?;
            let name = path.display().to_string();
            (records, Source::File { name, lines })
        }
        None => {
            let mut c = match client.take() {
                Some(c) => c,
                None => connect()?,
            };
            (fetch_store(&mut c, args.session.as_deref())?, Source::Store)
        }
    };
    let mut report = verify(records, Some(&key), args.session.as_deref());
    if args.complete {
        report.require_complete();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &source, args.session.as_deref());
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// 64 hex digits, given or in a file.
fn read_key(given: &str) -> Result<String> {
    let text = if given.len() == 64 && given.bytes().all(|b| b.is_ascii_hexdigit()) {
        given.to_owned()
    } else {
        std::fs::read_to_string(given)
            .with_context(|| format!("--key {given}: not 64 hex digits, nor a readable file"))?
    };
    let key = text.trim().to_owned();
    if key.len() != 64 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("--key {given}: a public key is 64 hex digits (`agentshctl audit key` prints it)");
    }
    Ok(key)
}

type Parsed = std::result::Result<Value, String>;

/// A JSON-lines file's records and their line numbers; with `session`, that session's records
/// only (and checkpoints, which name no session unless they close it).
fn read_file(path: &Path, session: Option<&str>) -> Result<(Vec<Parsed>, Vec<usize>)> {
    let input: Box<dyn Read> = if path == Path::new("-") {
        Box::new(std::io::stdin())
    } else {
        Box::new(std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?)
    };
    let (mut records, mut lines) = (Vec::new(), Vec::new());
    for (n, line) in BufReader::new(input).split(b'\n').enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        if line.trim_ascii().is_empty() {
            continue;
        }
        let parsed = serde_json::from_slice::<Value>(&line).map_err(|e| e.to_string());
        if let (Some(session), Ok(record)) = (session, &parsed)
            && record.get("session").and_then(Value::as_str) != Some(session)
            && record.get("event").and_then(Value::as_str)
                != Some(agentsh::evidence::CHECKPOINT_KIND)
        {
            continue;
        }
        records.push(parsed);
        lines.push(n + 1);
    }
    Ok((records, lines))
}

/// Every stored record (of `session`), oldest first, as redb holds it.
fn fetch_store(client: &mut Client, session: Option<&str>) -> Result<Vec<Parsed>> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page: AuditRecords = client.call(
            ops::AUDIT_RECORDS,
            &AuditRecordsArgs {
                after,
                session: session.map(str::to_owned),
            },
        )?;
        if page.next == after || page.records.is_empty() {
            return Ok(out);
        }
        out.extend(
            page.records
                .iter()
                .map(|r| serde_json::from_str::<Value>(r).map_err(|e| e.to_string())),
        );
        after = page.next;
    }
}

fn print_report(report: &Report, source: &Source, session: Option<&str>) {
    let what = match session {
        Some(s) => format!("session {s}"),
        None => "audit trail".to_owned(),
    };
    let range = match (report.first_seq, report.last_seq) {
        (Some(first), Some(last)) => format!(" (#{first}..#{last})"),
        _ => String::new(),
    };
    println!(
        "{what}: {} records{range}, {} of {} checkpoints verified",
        report.records, report.checkpoints_verified, report.checkpoints
    );
    if report.unchained > 0 {
        println!(
            "  {} older records before the chain starts (written before the trail was chained; \
             not vouched for)",
            report.unchained
        );
    }
    if report.retention_deleted > 0 {
        println!(
            "  {} records deleted by retention, as its signed checkpoints say",
            report.retention_deleted
        );
    }
    if report.unsigned_tail > 0 {
        println!(
            "  {} records after the last verified checkpoint: a cut there would not show",
            report.unsigned_tail
        );
    }
    for problem in &report.problems {
        println!("{}", describe(problem, source));
    }
    if report.is_ok() {
        println!("OK: no record was edited, deleted, reordered or inserted");
    } else {
        println!("FAILED: {} problem(s)", report.problems.len());
    }
}

/// `FILE:LINE (#seq): what`, or `record N (#seq): what` for the store.
fn describe(problem: &Problem, source: &Source) -> String {
    let place = match source {
        _ if problem.index == 0 => "key".to_owned(),
        Source::File { name, lines } => match lines.get(problem.index - 1) {
            Some(line) => format!("{name}:{line}"),
            None => format!("{name}: record {}", problem.index),
        },
        Source::Store => format!("record {}", problem.index),
    };
    let seq = problem.seq.map(|s| format!(" (#{s})")).unwrap_or_default();
    let kind = match &problem.kind {
        ProblemKind::Unparsable => "unreadable".to_owned(),
        ProblemKind::Edited => "edited".to_owned(),
        ProblemKind::Missing {
            expected_seq,
            found_seq,
        } => format!("missing #{expected_seq}..#{}", found_seq - 1),
        ProblemKind::Reordered => "out of order".to_owned(),
        ProblemKind::BrokenLink => "broken link".to_owned(),
        ProblemKind::StartsMidTrail => "starts mid-trail".to_owned(),
        ProblemKind::BadSignature => "bad signature".to_owned(),
        ProblemKind::CheckpointMismatch => "checkpoint mismatch".to_owned(),
        ProblemKind::UnsignedTail => "not signed".to_owned(),
    };
    format!("{place}{seq}: {kind}: {}", problem.detail)
}
