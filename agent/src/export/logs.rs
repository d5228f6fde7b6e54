//! Events as OTLP log records, and an `ExportLogsServiceRequest` of them in either encoding:
//! protobuf (gRPC and `http/protobuf`) or JSON (`http/json`). One mapping feeds both, so the
//! encodings cannot disagree about what a record holds.
//!
//! Message and field numbers: opentelemetry-proto, `collector/logs/v1/logs_service.proto`,
//! `logs/v1/logs.proto` and `common/v1/common.proto`.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::protobuf::{DecodeError, Field, Fields, Writer};
use crate::audit::{Action, Event};
use crate::config::Severity;

/// `agentsh.details` longer than this is cut (and says so): one record stays small enough for
/// a collector's default message limit whatever a tool's arguments were.
pub const MAX_DETAILS: usize = 64 * 1024;

/// `agentsh.record` (the whole record, for a collector to verify its hash) is left out past
/// this size; the chain fields still link it, and `agentsh.record_bytes` says what it was.
pub const MAX_RECORD: usize = 256 * 1024;

/// One log record, encoding-free.
pub struct Record {
    time_unix_nano: u64,
    severity_number: i64,
    severity_text: &'static str,
    body: String,
    attributes: Vec<(&'static str, AttributeValue)>,
}

enum AttributeValue {
    Str(String),
    Int(i64),
}

impl Record {
    pub fn of(seq: u64, event: &Event) -> Self {
        let (severity_number, severity_text) = severity(event);
        let time_unix_nano = event
            .timestamp
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut attributes = vec![
            (
                "agentsh.event",
                AttributeValue::Str(event.event.as_str().to_owned()),
            ),
            (
                "agentsh.action",
                AttributeValue::Str(event.action.to_string()),
            ),
            (
                "agentsh.seq",
                AttributeValue::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
            ),
        ];
        let optional = [
            (
                "agentsh.server",
                Some(event.server.as_str()).filter(|s| !s.is_empty()),
            ),
            ("agentsh.tool", event.tool.as_deref()),
            ("agentsh.session", event.session.as_deref()),
            ("agentsh.rule", event.rule.as_deref()),
            ("agentsh.hash", event.hash.as_deref()),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                attributes.push((key, AttributeValue::Str(value.to_owned())));
            }
        }
        if let Some(severity) = event.severity {
            attributes.push((
                "agentsh.severity",
                AttributeValue::Str(severity.to_string()),
            ));
        }
        if !event.details.is_null() {
            attributes.push((
                "agentsh.details",
                AttributeValue::Str(details(&event.details)),
            ));
        }
        chain_attributes(event, &mut attributes);
        Self {
            time_unix_nano,
            severity_number,
            severity_text,
            body: event.reason.clone(),
            attributes,
        }
    }
}

/// The tamper evidence: the chain fields, and the record in its canonical form so that a
/// collector can recompute the hash (`agentshctl audit verify` does the same on a file of
/// these records).
fn chain_attributes(event: &Event, attributes: &mut Vec<(&'static str, AttributeValue)>) {
    let Some(chain) = event.chain.as_ref().and_then(Value::as_object) else {
        return;
    };
    if let Some(seq) = chain.get("seq").and_then(Value::as_u64) {
        attributes.push((
            "agentsh.chain.seq",
            AttributeValue::Int(i64::try_from(seq).unwrap_or(i64::MAX)),
        ));
    }
    for (key, name) in [
        ("agentsh.chain.prev", "prev"),
        ("agentsh.chain.session_prev", "session_prev"),
        ("agentsh.chain.hash", "hash"),
    ] {
        if let Some(value) = chain.get(name).and_then(Value::as_str) {
            attributes.push((key, AttributeValue::Str(value.to_owned())));
        }
    }
    let Ok(record) = serde_json::to_value(event) else {
        return;
    };
    let canonical = crate::evidence::canonical_json(&record);
    if canonical.len() <= MAX_RECORD {
        // Canonical JSON is UTF-8 by construction.
        let text = String::from_utf8_lossy(&canonical).into_owned();
        attributes.push(("agentsh.record", AttributeValue::Str(text)));
    } else {
        attributes.push((
            "agentsh.record_bytes",
            AttributeValue::Int(i64::try_from(canonical.len()).unwrap_or(i64::MAX)),
        ));
    }
}

/// The details as JSON text, cut on a character boundary past [`MAX_DETAILS`].
fn details(details: &Value) -> String {
    let mut text = details.to_string();
    if text.len() > MAX_DETAILS {
        let total = text.len();
        let mut cut = MAX_DETAILS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(&format!("… (cut: {total} bytes; the trail has them whole)"));
    }
    text
}

/// OTLP severity: a finding's own, else what the action says.
fn severity(event: &Event) -> (i64, &'static str) {
    match (event.severity, event.action) {
        (Some(Severity::Critical), _) => (21, "FATAL"),
        (Some(Severity::High), _) => (17, "ERROR"),
        (Some(Severity::Medium), _) | (None, Action::Block | Action::Alert) => (13, "WARN"),
        (Some(Severity::Low), _) | (None, Action::Allow | Action::Audit) => (9, "INFO"),
    }
}

/// Who sends the records: the resource and the instrumentation scope of every request.
pub struct Origin {
    host_name: String,
}

const SERVICE: &str = "agentshd";
const SCOPE: &str = "agentsh.audit";
const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Origin {
    pub fn of_this_host() -> Self {
        let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_owned())
            .unwrap_or_default();
        Self { host_name }
    }

    fn resource_attributes(&self) -> [(&'static str, &str); 3] {
        [
            ("service.name", SERVICE),
            ("service.version", VERSION),
            ("host.name", &self.host_name),
        ]
    }

    /// `ExportLogsServiceRequest`, protobuf.
    pub fn protobuf(&self, records: &[Record]) -> Vec<u8> {
        let mut request = Writer::default();
        // resource_logs = 1
        request.message(1, |resource_logs| {
            // resource = 1 { attributes = 1 }
            resource_logs.message(1, |resource| {
                for (key, value) in self.resource_attributes() {
                    resource.message(1, |kv| {
                        kv.string(1, key);
                        kv.message(2, |v| v.oneof_string(1, value));
                    });
                }
            });
            // scope_logs = 2
            resource_logs.message(2, |scope_logs| {
                // scope = 1 { name = 1, version = 2 }
                scope_logs.message(1, |scope| {
                    scope.string(1, SCOPE);
                    scope.string(2, VERSION);
                });
                for record in records {
                    // log_records = 2
                    scope_logs.message(2, |w| log_record(w, record));
                }
            });
        });
        request.into_bytes()
    }

    /// `ExportLogsServiceRequest`, JSON (OTLP's JSON mapping: camelCase names, 64-bit
    /// integers as strings, enums as numbers).
    pub fn json(&self, records: &[Record]) -> Value {
        let resource: Vec<Value> = self
            .resource_attributes()
            .into_iter()
            .map(|(key, value)| json!({"key": key, "value": {"stringValue": value}}))
            .collect();
        let records: Vec<Value> = records.iter().map(record_json).collect();
        json!({"resourceLogs": [{
            "resource": {"attributes": resource},
            "scopeLogs": [{
                "scope": {"name": SCOPE, "version": VERSION},
                "logRecords": records,
            }]
        }]})
    }
}

/// `LogRecord`: time_unix_nano = 1 (fixed64), severity_number = 2, severity_text = 3,
/// body = 5, attributes = 6, observed_time_unix_nano = 11 (fixed64).
fn log_record(w: &mut Writer, record: &Record) {
    w.fixed64(1, record.time_unix_nano);
    w.int64(2, record.severity_number);
    w.string(3, record.severity_text);
    // AnyValue: string_value = 1, int_value = 3.
    w.message(5, |body| body.oneof_string(1, &record.body));
    for (key, value) in &record.attributes {
        // KeyValue: key = 1, value = 2.
        w.message(6, |kv| {
            kv.string(1, key);
            kv.message(2, |v| match value {
                AttributeValue::Str(s) => v.oneof_string(1, s),
                AttributeValue::Int(i) => v.oneof_int64(3, *i),
            });
        });
    }
    w.fixed64(11, record.time_unix_nano);
}

fn record_json(record: &Record) -> Value {
    let attributes: Vec<Value> = record
        .attributes
        .iter()
        .map(|(key, value)| {
            let value = match value {
                AttributeValue::Str(s) => json!({"stringValue": s}),
                AttributeValue::Int(i) => json!({"intValue": i.to_string()}),
            };
            json!({"key": key, "value": value})
        })
        .collect();
    json!({
        "timeUnixNano": record.time_unix_nano.to_string(),
        "observedTimeUnixNano": record.time_unix_nano.to_string(),
        "severityNumber": record.severity_number,
        "severityText": record.severity_text,
        "body": {"stringValue": record.body},
        "attributes": attributes,
    })
}

/// What a collector's `ExportLogsServiceResponse` says it did not take.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rejected {
    pub records: i64,
    pub message: String,
}

/// `ExportLogsServiceResponse { partial_success = 1 { rejected_log_records = 1,
/// error_message = 2 } }`, protobuf. An empty body means everything was taken.
pub fn rejected_protobuf(body: &[u8]) -> Result<Rejected, DecodeError> {
    let mut rejected = Rejected::default();
    for field in Fields::new(body) {
        if let (1, Field::Len(partial)) = field? {
            for field in Fields::new(partial) {
                match field? {
                    (1, Field::Varint(n)) => rejected.records = n as i64,
                    (2, Field::Len(text)) => {
                        rejected.message = String::from_utf8_lossy(text).into_owned();
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(rejected)
}

/// The same, JSON. Anything unreadable counts as nothing rejected: the collector said 2xx.
pub fn rejected_json(body: &[u8]) -> Rejected {
    let Ok(response) = serde_json::from_slice::<Value>(body) else {
        return Rejected::default();
    };
    let partial = &response["partialSuccess"];
    let records = match &partial["rejectedLogRecords"] {
        Value::String(s) => s.parse().unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    };
    Rejected {
        records,
        message: partial["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::EventKind;

    fn blocked_call() -> Event {
        Event::new(EventKind::McpToolCalled, "fs", Action::Block, "no writes")
            .session("s1")
            .tool("write_file")
            .rule("no-write")
    }

    fn attribute<'a>(record: &'a Value, key: &str) -> Option<&'a Value> {
        record["attributes"]
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| &a["value"])
    }

    #[test]
    fn events_become_json_log_records() {
        let origin = Origin::of_this_host();
        let body = origin.json(&[Record::of(7, &blocked_call())]);
        let record = &body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(record["body"]["stringValue"], "no writes");
        assert_eq!(record["severityText"], "WARN");
        assert_eq!(record["severityNumber"], 13);
        let nanos: u64 = record["timeUnixNano"].as_str().unwrap().parse().unwrap();
        assert!(nanos > 1_600_000_000_000_000_000, "{nanos}");
        assert_eq!(
            attribute(record, "agentsh.event").unwrap()["stringValue"],
            "mcp_tool_called"
        );
        assert_eq!(attribute(record, "agentsh.seq").unwrap()["intValue"], "7");
        assert_eq!(
            attribute(record, "agentsh.tool").unwrap()["stringValue"],
            "write_file"
        );
        assert_eq!(
            attribute(record, "agentsh.rule").unwrap()["stringValue"],
            "no-write"
        );
        assert!(attribute(record, "agentsh.hash").is_none());
        assert_eq!(
            body["resourceLogs"][0]["resource"]["attributes"][0]["value"]["stringValue"],
            "agentshd"
        );
    }

    /// Walks the protobuf by hand with the field numbers of the .proto files: the record's
    /// time, severity, body and attributes are where a collector looks for them.
    #[test]
    fn events_become_protobuf_log_records() {
        let event = blocked_call();
        let bytes = Origin::of_this_host().protobuf(&[Record::of(7, &event)]);
        let only = |buf: &[u8], want: u32| -> Vec<Vec<u8>> {
            Fields::new(buf)
                .map(Result::unwrap)
                .filter_map(|(n, f)| match f {
                    Field::Len(b) if n == want => Some(b.to_vec()),
                    _ => None,
                })
                .collect()
        };
        let resource_logs = only(&bytes, 1);
        assert_eq!(resource_logs.len(), 1);
        let scope_logs = only(&resource_logs[0], 2);
        let records = only(&scope_logs[0], 2);
        assert_eq!(records.len(), 1);
        let fields: Vec<(u32, Field<'_>)> = Fields::new(&records[0]).map(Result::unwrap).collect();
        let nanos = event
            .timestamp
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        assert!(fields.contains(&(1, Field::Fixed64(nanos))));
        assert!(fields.contains(&(2, Field::Varint(13))));
        assert!(fields.contains(&(3, Field::Len(b"WARN"))));
        let body = only(&records[0], 5);
        assert_eq!(
            Fields::new(&body[0]).next().unwrap().unwrap(),
            (1, Field::Len(b"no writes"))
        );
        let seq = only(&records[0], 6)
            .into_iter()
            .find(|kv| only(kv, 1).first().map(Vec::as_slice) == Some(b"agentsh.seq"))
            .expect("an agentsh.seq attribute");
        let value = only(&seq, 2);
        assert_eq!(
            Fields::new(&value[0]).next().unwrap().unwrap(),
            (3, Field::Varint(7))
        );
    }

    /// A collector holding only the OTLP records and the public key verifies the trail.
    #[test]
    fn chained_events_carry_what_a_collector_needs_to_verify_them() {
        let dir = tempfile::tempdir().unwrap();
        let log = crate::store::EventLog::open(dir.path()).unwrap();
        use crate::audit::EventSink;
        for i in 0..5 {
            log.record(blocked_call().details(json!({"i": i, "ratio": 0.1 * f64::from(i)})));
        }
        log.close();
        let events = log.query(&crate::store::EventQuery::default()).unwrap();
        let records: Vec<Record> = events
            .iter()
            .map(|e| Record::of(e.seq.unwrap(), e))
            .collect();
        let body = Origin::of_this_host().json(&records);
        let received: Vec<Value> = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let text = attribute(r, "agentsh.record").unwrap()["stringValue"]
                    .as_str()
                    .unwrap();
                serde_json::from_str(text).unwrap()
            })
            .collect();
        assert_eq!(received.len(), 6, "five events and the shutdown checkpoint");
        let first = &body["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0];
        assert_eq!(
            attribute(first, "agentsh.chain.seq").unwrap()["intValue"],
            "1"
        );
        assert_eq!(
            attribute(first, "agentsh.chain.hash").unwrap()["stringValue"],
            events[0].chain.as_ref().unwrap()["hash"]
        );
        let report = crate::evidence::verify(
            received.iter().cloned().map(Ok::<_, String>),
            Some(log.public_key_hex()),
            None,
        );
        assert!(report.is_ok(), "{:#?}", report.problems);
        assert_eq!((report.checkpoints_verified, report.unsigned_tail), (1, 0));
        // One changed attribute value shows.
        let mut edited = received;
        edited[2]["action"] = "allow".into();
        let report = crate::evidence::verify(
            edited.into_iter().map(Ok::<_, String>),
            Some(log.public_key_hex()),
            None,
        );
        assert_eq!(report.problems.len(), 1, "{:#?}", report.problems);
        assert_eq!(report.problems[0].seq, Some(3));
    }

    #[test]
    fn severities_follow_findings_then_actions() {
        let at = |finding: Option<Severity>, action| {
            let mut e = Event::new(EventKind::McpDetection, "s", action, "r");
            e.severity = finding;
            severity(&e).1
        };
        assert_eq!(at(Some(Severity::Critical), Action::Alert), "FATAL");
        assert_eq!(at(Some(Severity::High), Action::Allow), "ERROR");
        assert_eq!(at(None, Action::Block), "WARN");
        assert_eq!(at(None, Action::Allow), "INFO");
    }

    #[test]
    fn huge_details_are_cut_on_a_character_boundary() {
        let mut event = blocked_call();
        event.details = json!({"content": "é".repeat(MAX_DETAILS)});
        let text = details(&event.details);
        assert!(text.len() < MAX_DETAILS + 100, "{}", text.len());
        assert!(
            text.ends_with("the trail has them whole)"),
            "{}",
            &text[text.len() - 80..]
        );
        assert_eq!(details(&json!({"a": 1})), r#"{"a":1}"#);
    }

    #[test]
    fn partial_success_is_read_in_both_encodings() {
        let mut response = Writer::default();
        response.message(1, |p| {
            p.int64(1, 3);
            p.string(2, "too old");
        });
        assert_eq!(
            rejected_protobuf(&response.into_bytes()).unwrap(),
            Rejected {
                records: 3,
                message: "too old".into()
            }
        );
        assert_eq!(rejected_protobuf(&[]).unwrap(), Rejected::default());
        assert!(rejected_protobuf(&[0x0a, 0x05, 0x08]).is_err());
        assert_eq!(
            rejected_json(br#"{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"x"}}"#),
            Rejected {
                records: 2,
                message: "x".into()
            }
        );
        assert_eq!(rejected_json(b"{}"), Rejected::default());
        assert_eq!(rejected_json(b"not json"), Rejected::default());
    }
}
