//! The two relay directions and their writers.
//!
//! Readers parse lines and ask the guard; writers own the pipes, write whatever is queued and
//! flush when the queue runs dry (one flush per burst, not per message). Queues are bounded so
//! a side that stops reading slows the other down instead of growing memory.

use std::sync::{Arc, Mutex};

use agentsh::guard::{Forward, Guard, Outcome};
use agentsh::mcp::message::error_response;
use agentsh::mcp::{Frame, FrameItem, FrameReader, Kind, parse};
use anyhow::{Context as _, Result};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::process::Child;
use tokio::sync::mpsc;

const QUEUE: usize = 256;

enum Out {
    Bytes(Vec<u8>),
    /// Close the pipe (the client hung up: the server sees EOF).
    Close,
}

/// Relays until the server closes its stdout. The client's EOF closes the server's stdin.
pub async fn run(child: &mut Child, guard: Guard, max_message_bytes: usize) -> Result<()> {
    let server_in = child.stdin.take().context("server stdin")?;
    let server_out = child.stdout.take().context("server stdout")?;
    let guard = Arc::new(Mutex::new(guard));

    let (to_server, server_rx) = mpsc::channel::<Out>(QUEUE);
    let (to_client, client_rx) = mpsc::channel::<Out>(QUEUE);
    let server_writer = tokio::spawn(write_loop(server_in, server_rx));
    let client_writer = tokio::spawn(write_loop(tokio::io::stdout(), client_rx));

    let client_reader = {
        let guard = Arc::clone(&guard);
        let to_server = to_server.clone();
        let to_client = to_client.clone();
        tokio::spawn(async move {
            let mut reader = FrameReader::new(tokio::io::stdin(), max_message_bytes);
            loop {
                let outcome_and_line = match reader.next_frame().await {
                    Ok(Some(FrameItem::Line(line))) => {
                        let outcome = lock(&guard).from_client(line.content());
                        (outcome, Some(line.into_bytes()))
                    }
                    Ok(Some(FrameItem::Oversize {
                        len_so_far,
                        id_hint,
                    })) => (
                        lock(&guard).client_oversize(len_so_far, id_hint.as_ref()),
                        None,
                    ),
                    Ok(None) => break,
                    Err(err) => {
                        eprintln!("agentsh-shim: reading from the client: {err}");
                        break;
                    }
                };
                if !apply(outcome_and_line, &to_server, &to_client).await {
                    break;
                }
            }
            let _ = to_server.send(Out::Close).await;
        })
    };

    let mut reader = FrameReader::new(server_out, max_message_bytes);
    loop {
        let outcome_and_line = match reader.next_frame().await {
            Ok(Some(FrameItem::Line(line))) => {
                let outcome = lock(&guard).from_server(line.content());
                (outcome, Some(line.into_bytes()))
            }
            Ok(Some(FrameItem::Oversize {
                len_so_far,
                id_hint,
            })) => (
                lock(&guard).server_oversize(len_so_far, id_hint.as_ref()),
                None,
            ),
            Ok(None) => break,
            Err(err) => {
                eprintln!("agentsh-shim: reading from the server: {err}");
                break;
            }
        };
        if !apply(outcome_and_line, &to_client, &to_server).await {
            break;
        }
    }

    // The server is done: deliver what is queued for the client, then stop.
    client_reader.abort();
    drop(to_server);
    drop(to_client);
    let _ = client_writer.await;
    server_writer.abort();
    Ok(())
}

/// Sends the forwarded line onward and the reply back. False when the onward side is gone.
async fn apply(
    (outcome, line): (Outcome, Option<Vec<u8>>),
    onward: &mpsc::Sender<Out>,
    back: &mpsc::Sender<Out>,
) -> bool {
    let Outcome { forward, reply } = outcome;
    if !reply.is_empty() {
        let _ = back.send(Out::Bytes(reply)).await;
    }
    let bytes = match (forward, line) {
        (Forward::Original, Some(line)) => line,
        (Forward::Replaced(bytes), _) => bytes,
        (Forward::Original, None) | (Forward::Drop, _) => return true,
    };
    onward.send(Out::Bytes(bytes)).await.is_ok()
}

fn lock(guard: &Mutex<Guard>) -> std::sync::MutexGuard<'_, Guard> {
    // A panic while holding the guard would already have ended the relay task; the state is
    // still the last consistent one.
    guard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn write_loop<W: AsyncWrite + Unpin>(writer: W, mut rx: mpsc::Receiver<Out>) {
    let mut out = BufWriter::with_capacity(64 * 1024, writer);
    while let Some(item) = rx.recv().await {
        let mut close = false;
        let mut ok = match item {
            Out::Bytes(bytes) => out.write_all(&bytes).await.is_ok(),
            Out::Close => {
                close = true;
                true
            }
        };
        while ok && !close {
            match rx.try_recv() {
                Ok(Out::Bytes(bytes)) => ok = out.write_all(&bytes).await.is_ok(),
                Ok(Out::Close) => close = true,
                Err(_) => break,
            }
        }
        if !ok || out.flush().await.is_err() {
            return;
        }
        if close {
            let _ = out.shutdown().await;
            return;
        }
    }
    let _ = out.flush().await;
}

/// When the server must not start: answer every request with `message` until the client hangs up.
pub async fn refuse_all(message: &str) {
    eprintln!("{message}");
    let mut reader = FrameReader::new(tokio::io::stdin(), 1 << 20);
    let mut stdout = tokio::io::stdout();
    while let Ok(Some(item)) = reader.next_frame().await {
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
                if stdout.write_all(&reply).await.is_err() || stdout.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}
