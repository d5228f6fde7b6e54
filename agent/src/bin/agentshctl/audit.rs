//! `agentshctl audit`: the audit trail's evidence.
//!
//! - `audit key` prints the daemon's checkpoint public key (keep it somewhere the daemon's
//!   host cannot rewrite: a CI job's output, a ticket, a config repository).
//! - `audit head` prints the chain's head as `SEQ:HASH`: an anchor to keep where the daemon's
//!   host cannot rewrite it, for `audit verify --expect` (a cut back to an older checkpoint
//!   verifies otherwise).
//! - `audit verify [--session ID] [--expect SEQ:HASH] [FILE]` checks hashes, links, sequence
//!   and signed checkpoints: of the trail the daemon stores (as stored, byte for byte), or of
//!   an exported JSON-lines file (`agentshctl export`, `run --events`), offline with `--key`
//!   alone. Exit 0 intact, 1 problems found (each with its place), 2 could not check.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentsh::api::Client;
use agentsh::api::protocol::{AuditHead, AuditKey, AuditRecords, AuditRecordsArgs, ops};
use agentsh::api::{ApiError, ClientError, ErrorCode};
use agentsh::evidence::{
    Anchor, CHECKPOINT_KIND, Options, Problem, ProblemKind, Report, Scope, parse_record,
    verify_with,
};
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
    /// The chain's head, `SEQ:HASH`: keep it elsewhere, and `audit verify --expect` it later.
    Head {
        /// As JSON: {"seq", "hash"}.
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
    /// Also check this session: its own links, its closing checkpoint, and that it is there.
    /// The whole trail is checked with it where it can be read (the store, for an
    /// administrator; a full export); one session's records alone (`run --events`, `export
    /// --session`) are a weaker check, and the report says so.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// A record's seq and hash known from elsewhere (`audit head`, or a session report's
    /// closing checkpoint): it must be there with that hash, and a trail that ends before it
    /// was cut. May be given more than once.
    #[arg(long, value_name = "SEQ:HASH", value_parser = parse_anchor)]
    expect: Vec<Anchor>,
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
        Command::Head { json } => {
            let head: AuditHead =
                Client::connect(socket)?.call(ops::AUDIT_HEAD, &serde_json::json!({}))?;
            if *json {
                println!("{}", serde_json::to_string(&head)?);
            } else {
                println!("{}:{}", head.seq, head.hash);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Verify(args) => verify_trail(args, socket),
    }
}

fn parse_anchor(text: &str) -> Result<Anchor, String> {
    text.parse()
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
    let session = args.session.as_deref();
    let (records, source, whole) = match &args.file {
        Some(path) => {
            let (records, lines) = read_file(path)?;
            let whole = session.is_none_or(|id| holds_more_than(&records, id));
            let name = path.display().to_string();
            (records, Source::File { name, lines }, whole)
        }
        None => {
            let mut c = match client.take() {
                Some(c) => c,
                None => connect()?,
            };
            // The whole trail even for one session, where the caller may read it: the session
            // index is no part of the chain.
            match fetch_store(&mut c, None) {
                Ok(records) => (records, Source::Store, true),
                Err(err) if session.is_some() && is_forbidden(&err) => {
                    (fetch_store(&mut c, session)?, Source::Store, false)
                }
                Err(err) => return Err(err),
            }
        }
    };
    let scope = match (session, whole) {
        (None, _) => Scope::Trail,
        (Some(id), true) => Scope::Session(id),
        (Some(id), false) => Scope::SessionExport(id),
    };
    let records = records
        .into_iter()
        .filter(|r| keep_for(r, scope))
        .collect::<Vec<_>>();
    let mut report = verify_with(
        records,
        &Options {
            pubkey_hex: Some(&key),
            scope,
            anchors: &args.expect,
        },
    );
    if args.complete {
        report.require_complete();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &source, scope, args.expect.len());
    }
    if report.session_records == Some(0) && report.is_ok() {
        eprintln!(
            "agentshctl: no record of session {} in the trail: nothing to verify for it",
            session.unwrap_or_default()
        );
        return Ok(ExitCode::from(2));
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn is_forbidden(err: &anyhow::Error) -> bool {
    matches!(
        err.downcast_ref::<ClientError>(),
        Some(ClientError::Api(ApiError {
            code: ErrorCode::Forbidden,
            ..
        }))
    )
}

/// Whether `records` hold anything but `session`'s own records and checkpoints: then they are
/// (meant to be) the whole trail, and are checked as such.
fn holds_more_than(records: &[Parsed], session: &str) -> bool {
    records.iter().any(|r| match r {
        Ok(record) => {
            record.get("event").and_then(Value::as_str) != Some(CHECKPOINT_KIND)
                && record.get("session").and_then(Value::as_str) != Some(session)
        }
        Err(_) => false,
    })
}

/// One session's records are checked with the checkpoints that came with them; the whole
/// trail, whole.
fn keep_for(record: &Parsed, scope: Scope<'_>) -> bool {
    let Scope::SessionExport(session) = scope else {
        return true;
    };
    match record {
        Ok(record) => {
            record.get("session").and_then(Value::as_str) == Some(session)
                || record.get("event").and_then(Value::as_str) == Some(CHECKPOINT_KIND)
        }
        Err(_) => true,
    }
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

/// A JSON-lines file's records and their line numbers.
fn read_file(path: &Path) -> Result<(Vec<Parsed>, Vec<usize>)> {
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
        let parsed = parse_record(&line).map_err(|e| e.to_string());
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
                .map(|r| parse_record(r.as_bytes()).map_err(|e| e.to_string())),
        );
        after = page.next;
    }
}

fn print_report(report: &Report, source: &Source, scope: Scope<'_>, anchors: usize) {
    let what = match scope {
        Scope::Trail => "audit trail".to_owned(),
        Scope::Session(s) => format!(
            "audit trail, and session {s} in it ({} of its records)",
            report.session_records.unwrap_or(0)
        ),
        Scope::SessionExport(s) => format!("session {s}"),
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
            "  {} records after the last verified checkpoint: a cut there would not show{}",
            report.unsigned_tail,
            if anchors == 0 {
                " (unless --expect names a record there)"
            } else {
                ""
            }
        );
    }
    if anchors > 0 {
        println!(
            "  {} of {anchors} anchor(s) found with their hash",
            report.anchors_matched
        );
    }
    if let Scope::SessionExport(_) = scope {
        println!(
            "  checked as one session's records only: records of it deleted whole, with no \
             trace in these, would not show; verify the whole trail (the store, or a full export) \
             to be sure"
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
        _ if problem.index == 0 && problem.kind == ProblemKind::BadSignature => "key".to_owned(),
        Source::File { name, .. } if problem.index == 0 => format!("{name} (no record)"),
        Source::Store if problem.index == 0 => "the store (no record)".to_owned(),
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
        ProblemKind::Truncated { .. } => "cut short".to_owned(),
        ProblemKind::AnchorMismatch => "not the anchor's record".to_owned(),
    };
    format!("{place}{seq}: {kind}: {}", problem.detail)
}
