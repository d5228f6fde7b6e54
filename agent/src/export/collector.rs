//! One OTLP collector and how requests reach it: OTLP/gRPC, or OTLP/HTTP with protobuf or
//! JSON bodies, optionally gzipped.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use flate2::Compression as Level;
use flate2::write::GzEncoder;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use super::logs::{Origin, Record, Rejected, rejected_json, rejected_protobuf};
use super::protobuf::{Field, Fields};
use crate::config::{Compression, OtlpCollector, OtlpProtocol};
use crate::proxy::upstream::{self, Answer, Upstream, UpstreamError};

/// The gRPC method (`LogsService.Export`), as a path.
const GRPC_EXPORT: &str = "opentelemetry.proto.collector.logs.v1.LogsService/Export";

/// An encoded request past this is split: 4 MiB is gRPC's (and the OpenTelemetry Collector's)
/// default message limit; the margin covers framing.
pub const MAX_MESSAGE: usize = 4 * 1024 * 1024 - 64 * 1024;

/// Why a request was not taken.
#[derive(Debug)]
pub struct Failure {
    pub why: String,
    /// What the collector asked for (HTTP `Retry-After`), when it did.
    pub retry_after: Option<Duration>,
}

impl Failure {
    fn new(why: impl Into<String>) -> Self {
        Self {
            why: why.into(),
            retry_after: None,
        }
    }
}

pub struct Collector {
    protocol: OtlpProtocol,
    compression: Compression,
    url: String,
    headers: HeaderMap,
    client: Upstream,
    origin: Origin,
}

impl Collector {
    pub fn new(config: &OtlpCollector, extra_roots: &[PathBuf]) -> Result<Self, UpstreamError> {
        let base = config.endpoint.as_str().trim_end_matches('/');
        let (url, client) = match config.protocol {
            OtlpProtocol::Grpc => (
                format!("{base}/{GRPC_EXPORT}"),
                upstream::http2_client(extra_roots)?,
            ),
            OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => {
                (format!("{base}/v1/logs"), upstream::client(extra_roots)?)
            }
        };
        let mut headers: HeaderMap = config.headers.iter().cloned().collect();
        let content_type = match config.protocol {
            OtlpProtocol::Grpc => {
                headers.insert(header::TE, HeaderValue::from_static("trailers"));
                "application/grpc"
            }
            OtlpProtocol::HttpProtobuf => "application/x-protobuf",
            OtlpProtocol::HttpJson => "application/json",
        };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        match (config.compression, config.protocol) {
            (Compression::None, _) => {}
            (Compression::Gzip, OtlpProtocol::Grpc) => {
                headers.insert("grpc-encoding", HeaderValue::from_static("gzip"));
            }
            (Compression::Gzip, OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson) => {
                headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
        }
        Ok(Self {
            protocol: config.protocol,
            compression: config.compression,
            url,
            headers,
            client,
            origin: Origin::of_this_host(),
        })
    }

    /// Where requests go, for messages.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `ExportLogsServiceRequest` of `records`, uncompressed.
    pub fn encode(&self, records: &[Record]) -> Vec<u8> {
        match self.protocol {
            OtlpProtocol::Grpc | OtlpProtocol::HttpProtobuf => self.origin.protobuf(records),
            OtlpProtocol::HttpJson => self.origin.json(records).to_string().into_bytes(),
        }
    }

    /// Sends one encoded request; Ok says what the collector did not take (usually nothing).
    pub async fn send(&self, message: Vec<u8>, limit: Duration) -> Result<Rejected, Failure> {
        let compressed = match self.compression {
            Compression::None => message,
            Compression::Gzip => gzip(&message).map_err(|e| Failure::new(format!("gzip: {e}")))?,
        };
        let body = match self.protocol {
            OtlpProtocol::Grpc => grpc_frame(&compressed, self.compression == Compression::Gzip),
            OtlpProtocol::HttpProtobuf | OtlpProtocol::HttpJson => Bytes::from(compressed),
        };
        let mut request = http::Request::post(self.url.as_str())
            .body(crate::proxy::whole_request(body))
            .map_err(|e| Failure::new(e.to_string()))?;
        *request.headers_mut() = self.headers.clone();
        if self.protocol == OtlpProtocol::Grpc {
            // The collector gives up when we would, and says so with DEADLINE_EXCEEDED.
            let timeout = format!("{}m", limit.as_millis().min(99_999_999));
            if let Ok(value) = HeaderValue::from_str(&timeout) {
                request.headers_mut().insert("grpc-timeout", value);
            }
        }
        let answer = upstream::exchange(&self.client, request, limit)
            .await
            .map_err(Failure::new)?;
        match self.protocol {
            OtlpProtocol::Grpc => grpc_answer(&answer),
            OtlpProtocol::HttpProtobuf => http_answer(&answer, |body| {
                rejected_protobuf(body).map_err(|e| e.to_string())
            }),
            OtlpProtocol::HttpJson => http_answer(&answer, |body| Ok(rejected_json(body))),
        }
    }
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Level::fast());
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// gRPC's length-prefixed message: a compressed flag, the length (big-endian), the message.
fn grpc_frame(message: &[u8], compressed: bool) -> Bytes {
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.push(u8::from(compressed));
    // MAX_MESSAGE keeps it far below 4 GiB.
    frame.extend_from_slice(
        &u32::try_from(message.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    frame.extend_from_slice(message);
    Bytes::from(frame)
}

fn http_answer(
    answer: &Answer,
    rejected: impl FnOnce(&[u8]) -> Result<Rejected, String>,
) -> Result<Rejected, Failure> {
    if answer.status.is_success() {
        return rejected(&answer.body).map_err(|e| Failure::new(format!("the answer: {e}")));
    }
    let mut failure = Failure::new(format!("HTTP {}{}", answer.status, status_message(answer)));
    if matches!(
        answer.status,
        StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
    ) {
        failure.retry_after = answer
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
    }
    Err(failure)
}

/// The message of an error answer's `google.rpc.Status` (protobuf field 2, or JSON
/// `message`), as ": message"; empty when there is none.
fn status_message(answer: &Answer) -> String {
    let json = || {
        serde_json::from_slice::<serde_json::Value>(&answer.body)
            .ok()?
            .get("message")?
            .as_str()
            .map(str::to_owned)
    };
    let protobuf = || {
        Fields::new(&answer.body).find_map(|field| match field {
            Ok((2, Field::Len(text))) => std::str::from_utf8(text).ok().map(str::to_owned),
            _ => None,
        })
    };
    let content_type = answer
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let message = if content_type.starts_with("application/json") {
        json()
    } else if content_type.starts_with("application/x-protobuf") {
        protobuf()
    } else {
        None
    };
    message
        .filter(|m| !m.is_empty())
        .map(|m| format!(": {}", m.chars().take(200).collect::<String>()))
        .unwrap_or_default()
}

/// A unary gRPC answer: `grpc-status` in the trailers (or, for a Trailers-Only answer, the
/// headers); on OK the body holds one framed `ExportLogsServiceResponse`.
fn grpc_answer(answer: &Answer) -> Result<Rejected, Failure> {
    if answer.status != StatusCode::OK {
        return Err(Failure::new(format!(
            "HTTP {} (not a gRPC answer)",
            answer.status
        )));
    }
    let metadata = |name: &str| {
        answer
            .trailers
            .as_ref()
            .and_then(|t| t.get(name))
            .or_else(|| answer.headers.get(name))
            .and_then(|v| v.to_str().ok())
    };
    let Some(status) = metadata("grpc-status") else {
        return Err(Failure::new("the answer has no grpc-status"));
    };
    match status.parse::<u32>() {
        Ok(0) => {}
        Ok(code) => {
            let message = metadata("grpc-message")
                .map(percent_decode)
                .unwrap_or_default();
            let separator = if message.is_empty() { "" } else { ": " };
            return Err(Failure::new(format!(
                "gRPC {} ({code}){separator}{message}",
                grpc_code_name(code)
            )));
        }
        Err(_) => return Err(Failure::new(format!("grpc-status `{status}`"))),
    }
    match answer.body.split_first() {
        None => Ok(Rejected::default()),
        // We ask for no compression; a compressed answer has nothing we need.
        Some((1, _)) => Ok(Rejected::default()),
        Some((_, rest)) if rest.len() >= 4 => {
            let length = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let message = rest[4..].get(..length).ok_or_else(|| {
                Failure::new("the answer's message is shorter than its length prefix")
            })?;
            rejected_protobuf(message).map_err(|e| Failure::new(format!("the answer: {e}")))
        }
        Some(_) => Err(Failure::new("the answer's frame is cut short")),
    }
}

fn grpc_code_name(code: u32) -> &'static str {
    match code {
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        6 => "ALREADY_EXISTS",
        7 => "PERMISSION_DENIED",
        8 => "RESOURCE_EXHAUSTED",
        9 => "FAILED_PRECONDITION",
        10 => "ABORTED",
        11 => "OUT_OF_RANGE",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        15 => "DATA_LOSS",
        16 => "UNAUTHENTICATED",
        _ => "status",
    }
}

/// grpc-message is percent-encoded (`%20` and friends); bad escapes stay as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) if hex(hi).is_some() && hex(lo).is_some() => {
                out.push((hex(hi).unwrap_or(0) * 16 + hex(lo).unwrap_or(0)) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(
        status: u16,
        headers: &[(&str, &str)],
        trailers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        let map = |pairs: &[(&str, &str)]| -> HeaderMap {
            pairs
                .iter()
                .map(|(k, v)| {
                    (
                        http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                        HeaderValue::from_str(v).unwrap(),
                    )
                })
                .collect()
        };
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            headers: map(headers),
            body: Bytes::copy_from_slice(body),
            trailers: (!trailers.is_empty()).then(|| map(trailers)),
        }
    }

    #[test]
    fn grpc_status_comes_from_trailers_or_a_trailers_only_answer() {
        let ok = answer(200, &[], &[("grpc-status", "0")], &[0, 0, 0, 0, 0]);
        assert_eq!(grpc_answer(&ok).unwrap(), Rejected::default());
        let unavailable = answer(
            200,
            &[
                ("grpc-status", "14"),
                ("grpc-message", "down%20for%20upgrade"),
            ],
            &[],
            b"",
        );
        assert_eq!(
            grpc_answer(&unavailable).unwrap_err().why,
            "gRPC UNAVAILABLE (14): down for upgrade"
        );
        assert!(
            grpc_answer(&answer(200, &[], &[], b""))
                .unwrap_err()
                .why
                .contains("no grpc-status")
        );
        assert!(
            grpc_answer(&answer(404, &[], &[], b""))
                .unwrap_err()
                .why
                .contains("not a gRPC answer")
        );
        // partial_success { rejected_log_records: 2 }
        let partial = [0, 0, 0, 0, 4, 0x0a, 0x02, 0x08, 0x02];
        assert_eq!(
            grpc_answer(&answer(200, &[], &[("grpc-status", "0")], &partial))
                .unwrap()
                .records,
            2
        );
        let cut = [0, 0, 0, 0, 9, 0x0a];
        assert!(grpc_answer(&answer(200, &[], &[("grpc-status", "0")], &cut)).is_err());
    }

    #[test]
    fn http_errors_say_why_and_when_to_come_back() {
        let busy = answer(
            503,
            &[("retry-after", "7"), ("content-type", "application/json")],
            &[],
            br#"{"code":14,"message":"overloaded"}"#,
        );
        let failure = http_answer(&busy, |_| Ok(Rejected::default())).unwrap_err();
        assert_eq!(failure.why, "HTTP 503 Service Unavailable: overloaded");
        assert_eq!(failure.retry_after, Some(Duration::from_secs(7)));
        let bad = answer(
            400,
            &[("content-type", "application/x-protobuf")],
            &[],
            &[0x12, 0x03, b'b', b'a', b'd'],
        );
        let failure = http_answer(&bad, |_| Ok(Rejected::default())).unwrap_err();
        assert_eq!(failure.why, "HTTP 400 Bad Request: bad");
        assert_eq!(failure.retry_after, None);
    }

    #[test]
    fn frames_and_escapes() {
        assert_eq!(
            &grpc_frame(b"abc", false)[..],
            &[0, 0, 0, 0, 3, b'a', b'b', b'c']
        );
        assert_eq!(grpc_frame(b"", true)[0], 1);
        assert_eq!(percent_decode("a%2Fb%zz%"), "a/b%zz%");
        let packed = gzip(b"hello hello hello").unwrap();
        let mut out = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&packed[..]), &mut out)
            .unwrap();
        assert_eq!(out, "hello hello hello");
    }
}
