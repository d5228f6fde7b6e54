//! `agentshctl export`: the audit trail as JSON lines, every event once, in order, each with its
//! `seq`; for files, SIEMs and log shippers. `--cursor` makes it resumable (a cron job appends
//! what is new), `--follow` keeps it running like `tail -f`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use agentsh::api::Client;
use agentsh::api::protocol::{EventsPageArgs, ops};
use agentsh::export::cursor;
use agentsh::store::{EventQuery, Page};
use anyhow::{Context, Result};

/// With `--follow` and nothing new, the daemon is asked again after this.
const POLL: Duration = Duration::from_millis(500);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Start after this event number (`seq`); 0, the default, is the start of the trail.
    #[arg(long, value_name = "SEQ", conflicts_with = "cursor")]
    after: Option<u64>,
    /// Start after the number in FILE (missing: from the start) and write the last exported
    /// number there as the output is written: run again, it goes on where it stopped.
    #[arg(long, value_name = "FILE")]
    cursor: Option<PathBuf>,
    /// Only this session's events.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only events newer than this, e.g. 30m, 1h, 2d.
    #[arg(long, value_parser = crate::query::parse_since)]
    since: Option<SystemTime>,
    /// Keep going: print events as they are recorded, until interrupted.
    #[arg(long)]
    follow: bool,
}

pub fn run(args: &Args, socket: &Path) -> Result<ExitCode> {
    let mut client = Client::connect(socket)?;
    let mut after = match (&args.cursor, args.after) {
        (Some(path), _) => cursor::read(path)?,
        (None, after) => after.unwrap_or(0),
    };
    let query = EventQuery {
        sessions: args.session.clone().map(|s| vec![s]),
        since: args.since,
        ..EventQuery::default()
    };
    let stdout = std::io::stdout();
    loop {
        let page = fetch(&mut client, after, &query)?;
        if page.next == after {
            if !args.follow {
                return Ok(ExitCode::SUCCESS);
            }
            std::thread::sleep(POLL);
            continue;
        }
        // Written out before the cursor moves past it: a crash repeats lines, never skips any.
        match write_lines(&mut stdout.lock(), &page) {
            // `| head` has seen enough.
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {
                return Ok(ExitCode::SUCCESS);
            }
            other => other.context("writing the events")?,
        }
        after = page.next;
        if let Some(path) = &args.cursor {
            cursor::write(path, after).with_context(|| format!("writing {}", path.display()))?;
        }
    }
}

/// The page after `after`.
fn fetch(client: &mut Client, after: u64, query: &EventQuery) -> Result<Page> {
    Ok(client.call(
        ops::EVENTS_PAGE,
        &EventsPageArgs {
            after,
            query: query.clone(),
        },
    )?)
}

/// Every event matching `query` as JSON lines into `out`, to the end of the trail as it is.
pub fn write_all(client: &mut Client, query: &EventQuery, out: &mut impl Write) -> Result<()> {
    let mut after = 0;
    loop {
        let page = fetch(client, after, query)?;
        if page.next == after {
            return Ok(());
        }
        write_lines(out, &page)?;
        after = page.next;
    }
}

fn write_lines(out: &mut impl Write, page: &Page) -> std::io::Result<()> {
    for event in &page.events {
        serde_json::to_writer(&mut *out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}
