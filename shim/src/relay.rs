//! The two relay directions, one thread each, over blocking pipes.
//!
//! A message is read, judged and forwarded on the same thread: no hand-off between threads or
//! tasks on the hot path. Output is buffered and flushed when the input has nothing more
//! buffered, so a burst costs one write and a lone message is sent at once.
//!
//! Replies (errors for refused messages) go the other way, to the sender, from a small writer
//! thread: a direction blocked on a full pipe must never hold up the other direction, or a
//! client and server that both stop reading would deadlock us.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::fd::AsFd;
use std::process::Child;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};

use agentsh::guard::{Forward, Guard, Outcome};
use agentsh::mcp::message::error_response;
use agentsh::mcp::{Frame, FrameItem, FrameReader, Kind, parse};
use anyhow::{Context as _, Result};

type Sink<W> = Arc<Mutex<Option<BufWriter<W>>>>;

/// How long a client's hang-up waits for calls parked for the guard's own listing.
const PARKED_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Relays until the server closes its stdout. The client's EOF closes the server's stdin.
/// Each batch of tool names from `releases` (tools let through after being held back) tells
/// the client to list the tools again.
pub fn run(
    child: &mut Child,
    guard: Guard,
    max_message_bytes: usize,
    releases: Option<mpsc::Receiver<String>>,
) -> Result<()> {
    let server_in = child.stdin.take().context("server stdin")?;
    let server_out = child.stdout.take().context("server stdout")?;
    let client_in = own_fd(std::io::stdin().as_fd()).context("stdin")?;
    let client_out = own_fd(std::io::stdout().as_fd()).context("stdout")?;

    let guard = Arc::new(guard);
    let to_server: Sink<std::process::ChildStdin> = Arc::new(Mutex::new(Some(
        BufWriter::with_capacity(1 << 16, server_in),
    )));
    let to_client: Sink<File> = Arc::new(Mutex::new(Some(BufWriter::with_capacity(
        1 << 16,
        client_out,
    ))));
    let reply_to_client = replier(Arc::clone(&to_client));
    let reply_to_server = replier(Arc::clone(&to_server));
    // Held by the server direction from reading a message to queueing what it sends: the
    // client direction's hang-up checks for parked calls under it, so a call the guard just
    // released is queued before the server's input is closed behind it.
    let handover = Arc::new(Mutex::new(()));
    if let Some(releases) = releases {
        announce_releases(releases, reply_to_client.clone());
    }

    {
        let guard = Arc::clone(&guard);
        let to_server = Arc::clone(&to_server);
        let close_server = reply_to_server.clone();
        let handover = Arc::clone(&handover);
        std::thread::Builder::new()
            .name("client-to-server".into())
            .spawn(move || {
                let mut reader = FrameReader::new(client_in, max_message_bytes);
                loop {
                    let (outcome, line) = match reader.next_frame() {
                        Ok(Some(FrameItem::Line(line))) => {
                            let outcome = guard.from_client(line.content());
                            (outcome, Some(line.into_bytes()))
                        }
                        Ok(Some(FrameItem::Oversize {
                            len_so_far,
                            id_hint,
                        })) => (guard.client_oversize(len_so_far, id_hint.as_ref()), None),
                        Ok(None) => break,
                        Err(err) => {
                            eprintln!("agentsh-shim: reading from the client: {err}");
                            break;
                        }
                    };
                    let more = reader.has_buffered();
                    if !apply(outcome, line, &to_server, more, &reply_to_client) {
                        break;
                    }
                }
                // A call parked for the guard's own listing goes on once the server lists;
                // a server that never answers cannot hold the shim open for long.
                let deadline = std::time::Instant::now() + PARKED_PATIENCE;
                loop {
                    let turn = lock(&handover);
                    if !guard.has_parked_calls() || std::time::Instant::now() >= deadline {
                        // The client hung up: the server sees EOF on its stdin, after
                        // whatever was queued for it.
                        if close_server.send(CLOSE).is_err()
                            && let Some(mut writer) = lock(&to_server).take()
                        {
                            let _ = writer.flush();
                        }
                        break;
                    }
                    drop(turn);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            })
            .context("starting the relay thread")?;
    }

    let mut reader = FrameReader::new(server_out, max_message_bytes);
    loop {
        let frame = reader.next_frame();
        let _turn = lock(&handover);
        let (outcome, line) = match frame {
            Ok(Some(FrameItem::Line(line))) => {
                let outcome = guard.from_server(line.content());
                (outcome, Some(line.into_bytes()))
            }
            Ok(Some(FrameItem::Oversize {
                len_so_far,
                id_hint,
            })) => (guard.server_oversize(len_so_far, id_hint.as_ref()), None),
            Ok(None) => break,
            Err(err) => {
                eprintln!("agentsh-shim: reading from the server: {err}");
                break;
            }
        };
        let more = reader.has_buffered();
        if !apply(outcome, line, &to_client, more, &reply_to_server) {
            break;
        }
    }
    // The server is done: what the client is owed goes out before we exit.
    drop(reply_to_server);
    if let Some(writer) = lock(&to_client).as_mut() {
        let _ = writer.flush();
    }
    Ok(())
}

/// Forwards (flushing unless more input is already buffered) and queues the reply. False when
/// the onward side is gone.
fn apply<W: Write>(
    outcome: Outcome,
    line: Option<Vec<u8>>,
    onward: &Sink<W>,
    more_input: bool,
    reply_back: &mpsc::Sender<Vec<u8>>,
) -> bool {
    let Outcome { forward, reply } = outcome;
    if !reply.is_empty() {
        let _ = reply_back.send(reply);
    }
    let bytes = match (forward, line) {
        (Forward::Original, Some(line)) => line,
        (Forward::Replaced(bytes), _) => bytes,
        (Forward::Original, None) | (Forward::Drop, _) => return true,
    };
    let mut sink = lock(onward);
    let Some(writer) = sink.as_mut() else {
        return false;
    };
    writer.write_all(&bytes).is_ok() && (more_input || writer.flush().is_ok())
}

/// The notification that makes an MCP client fetch tools/list again.
const TOOLS_LIST_CHANGED: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n";

/// A thread that sends the client one tools/list_changed per batch of releases (an approval
/// of every tool of a server arrives as several at once).
fn announce_releases(releases: mpsc::Receiver<String>, to_client: mpsc::Sender<Vec<u8>>) {
    let spawned = std::thread::Builder::new()
        .name("release-notices".into())
        .spawn(move || {
            while releases.recv().is_ok() {
                while releases.try_recv().is_ok() {}
                if to_client.send(TOOLS_LIST_CHANGED.to_vec()).is_err() {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("agentsh-shim: cannot start the release announcer: {err}");
    }
}

/// What a replier is sent to close its side once what was queued before is written.
const CLOSE: Vec<u8> = Vec::new();

/// A thread that writes replies to `sink`, so the thread that produced them never blocks on it.
/// [`CLOSE`] flushes and closes the sink.
fn replier<W: Write + Send + 'static>(sink: Sink<W>) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let spawned = std::thread::Builder::new()
        .name("replies".into())
        .spawn(move || {
            while let Ok(reply) = rx.recv() {
                if reply.is_empty() {
                    if let Some(mut writer) = lock(&sink).take() {
                        let _ = writer.flush();
                    }
                    continue;
                }
                let mut sink = lock(&sink);
                let Some(writer) = sink.as_mut() else { return };
                if writer
                    .write_all(&reply)
                    .and_then(|()| writer.flush())
                    .is_err()
                {
                    return;
                }
            }
        });
    if let Err(err) = spawned {
        eprintln!("agentsh-shim: cannot start the reply writer: {err}");
    }
    tx
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a lock ends that relay direction; the data is still the last
    // consistent state, so the other direction may go on using it.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Our own handle on a standard stream, bypassing std's line-buffered, locked wrappers.
fn own_fd(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<File> {
    Ok(File::from(fd.try_clone_to_owned()?))
}

/// When the server must not start: answer every request with `message` until the client hangs up.
pub fn refuse_all(message: &str) {
    eprintln!("{message}");
    let Ok(stdin) = own_fd(std::io::stdin().as_fd()) else {
        return;
    };
    let mut reader = FrameReader::new(stdin, 1 << 20);
    let mut stdout = std::io::stdout().lock();
    while let Ok(Some(item)) = reader.next_frame() {
        let FrameItem::Line(line) = item else {
            continue;
        };
        let Ok(frame) = parse(line.content()) else {
            continue;
        };
        let messages = match &frame {
            Frame::Single(m) => std::slice::from_ref(m),
            Frame::Batch(ms) => ms.as_slice(),
        };
        for m in messages {
            if let Kind::Request { id, .. } = m.kind() {
                let reply = error_response(id, agentsh::guard::codes::REFUSED, message, None);
                if stdout
                    .write_all(&reply)
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
