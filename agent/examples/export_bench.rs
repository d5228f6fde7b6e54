//! The OTLP exporter's throughput: events per second from redb to a collector that takes
//! everything at once (an in-process HTTP/1.1 + h2c sink on loopback), for each protocol, next to
//! the rate at which the same events are only read back from the trail (the floor any exporter
//! pays). `cargo run --release -p agentsh --example export_bench [EVENTS]`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentsh::audit::{Action, Event, EventKind, EventSink};
use agentsh::config::{Compression, OtlpCollector, OtlpProtocol};
use agentsh::export::OtlpExporter;
use agentsh::store::EventLog;
use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};

const DEFAULT_EVENTS: u64 = 100_000;

fn main() -> Result<()> {
    let events: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse().context("EVENTS must be a number")?,
        None => DEFAULT_EVENTS,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let received = Arc::new(AtomicU64::new(0));
    let sink = runtime.block_on(start_sink(Arc::clone(&received)))?;

    let dir = tempfile::tempdir()?;
    let log = Arc::new(EventLog::open(dir.path())?);
    for i in 0..events {
        // What a busy session writes most: tool calls with a little detail.
        let mut event = Event::new(
            EventKind::McpToolCalled,
            "filesystem",
            Action::Allow,
            "allowed by rules/read-only",
        )
        .session("597102e008a5")
        .tool("read_file");
        event.details = serde_json::json!({"origin": "stdio", "arguments": {"path": format!("/work/src/file{i}.rs")}});
        log.record(event);
    }
    log.flush();

    println!("{events} events (tool calls, ~200 bytes of JSON each), 2 vCPUs, loopback");
    let started = Instant::now();
    let mut after = 0;
    loop {
        let batch = log.after(after, 512)?;
        let Some(&(last, _)) = batch.last() else {
            break;
        };
        after = last;
    }
    let read = started.elapsed();
    println!(
        "  read back from redb (no export)  {:>9.0} events/s",
        events as f64 / read.as_secs_f64()
    );

    for (protocol, compression) in [
        (OtlpProtocol::Grpc, Compression::None),
        (OtlpProtocol::HttpProtobuf, Compression::None),
        (OtlpProtocol::HttpJson, Compression::None),
        (OtlpProtocol::Grpc, Compression::Gzip),
    ] {
        let state = tempfile::tempdir()?;
        let config = OtlpCollector {
            endpoint: url::Url::parse(&format!("http://{sink}"))?,
            protocol,
            compression,
            headers: Vec::new(),
        };
        received.store(0, Ordering::Relaxed);
        let started = Instant::now();
        let exporter = OtlpExporter::start(Arc::clone(&log), &config, state.path(), &[])?;
        let cursor = state.path().join("otlp.cursor");
        let deadline = started + Duration::from_secs(600);
        while std::fs::read_to_string(&cursor)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            != Some(events)
        {
            anyhow::ensure!(Instant::now() < deadline, "{protocol}: no end in sight");
            std::thread::sleep(Duration::from_millis(2));
        }
        let took = started.elapsed();
        exporter.stop();
        let bytes = received.load(Ordering::Relaxed);
        println!(
            "  exported, {:<13} {:<4}      {:>9.0} events/s ({:.1} MB sent, {:.0} bytes/event)",
            protocol.as_str(),
            compression.as_str(),
            events as f64 / took.as_secs_f64(),
            bytes as f64 / 1e6,
            bytes as f64 / events as f64
        );
    }
    log.close();
    Ok(())
}

/// Takes every request whole and answers success: 200 for OTLP/HTTP, a Trailers-Only OK for
/// gRPC. Counts the bytes it got.
async fn start_sink(received: Arc<AtomicU64>) -> Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // As collectors do: small HTTP/2 frames (WINDOW_UPDATE, HEADERS) go out at once.
            let _ = stream.set_nodelay(true);
            let received = Arc::clone(&received);
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let received = Arc::clone(&received);
                    async move {
                        let grpc = request
                            .headers()
                            .get("content-type")
                            .is_some_and(|v| v.as_bytes() == b"application/grpc");
                        let body = request.into_body().collect().await?.to_bytes();
                        received.fetch_add(body.len() as u64, Ordering::Relaxed);
                        let mut response = hyper::Response::builder().status(200);
                        response = if grpc {
                            response
                                .header("content-type", "application/grpc")
                                .header("grpc-status", "0")
                        } else {
                            response.header("content-type", "application/x-protobuf")
                        };
                        Ok::<_, hyper::Error>(
                            response.body(Full::new(Bytes::new())).unwrap_or_default(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}
