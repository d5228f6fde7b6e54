//! The settings sections: version pinning, rate limits, cross-server detectors, detection,
//! output inspection and server-to-client requests.

use std::time::Duration;

use regex::Regex;

use super::{each, regex_error};
use crate::config::diagnostic::Report;
use crate::config::formats::check_id;
use crate::config::keywords::Severity;
use crate::config::reader::{self, Fields};
use crate::config::schema::{
    Burst, CrossServer, CrossServerFlow, CustomPattern, Detection, NameSimilarity,
    OutputInspection, RateLimit, RateLimits, ReadThenSend, ServerRateLimit, ServerRequests,
    ShadowTool, VersionPinning,
};
use crate::config::yaml::Node;
use crate::inspect::Category;

const MAX_RPM: u64 = 1_000_000;
/// The category of a custom pattern that names none.
const DEFAULT_CUSTOM_CATEGORY: &str = "custom";
/// Windows of the cross-server detectors: a millisecond to a day (reads are remembered that
/// long, `analyzer::history`).
const MAX_WINDOW: Duration = Duration::from_secs(86_400);
const WINDOWS: std::ops::RangeInclusive<Duration> = Duration::from_millis(1)..=MAX_WINDOW;

pub(super) fn version_pinning(r: &mut Report, node: &Node, path: &str) -> VersionPinning {
    let d = VersionPinning::default();
    let keys = ["enabled", "on_change", "auto_trust_first", "pin_binary"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    VersionPinning {
        enabled: f.bool(r, "enabled", d.enabled),
        on_change: f.keyword(r, "on_change", d.on_change),
        auto_trust_first: f.bool(r, "auto_trust_first", d.auto_trust_first),
        pin_binary: f.bool(r, "pin_binary", d.pin_binary),
    }
}

fn u32_field(r: &mut Report, f: &Fields<'_>, key: &str, max: u64, default: u32) -> u32 {
    // The range check keeps the value within u32.
    u32::try_from(f.uint(r, key, 1..=max, u64::from(default))).unwrap_or(default)
}

pub(super) fn rate_limits(r: &mut Report, node: &Node, path: &str) -> RateLimits {
    let d = RateLimits::default();
    let keys = ["enabled", "default_rpm", "default_burst", "per_server"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    let default = RateLimit {
        rpm: u32_field(r, &f, "default_rpm", MAX_RPM, d.default.rpm),
        burst: u32_field(r, &f, "default_burst", MAX_RPM, d.default.burst),
    };
    let mut per_server = Vec::new();
    if let Some(n) = f.get("per_server") {
        let path = f.path_of("per_server");
        for (key, value) in reader::map(r, n, &path).unwrap_or_default() {
            let server = key.as_scalar().map(|s| s.text.clone()).unwrap_or_default();
            let entry_path = format!("{path}.{server}");
            if let Err(m) = check_id(&server) {
                r.error(key.loc, format!("`{path}`: server id {m}"));
            }
            let keys = ["rpm", "calls_per_minute", "burst"];
            if let Some(lf) = Fields::open(r, value, &entry_path, &keys) {
                // `calls_per_minute` is the design documents' spelling of `rpm`.
                let rpm = lf
                    .either(r, "rpm", "calls_per_minute")
                    .and_then(|(k, n)| reader::uint(r, n, &lf.path_of(k), 1..=MAX_RPM))
                    .and_then(|v| u32::try_from(v).ok())
                    .unwrap_or(default.rpm);
                per_server.push(ServerRateLimit {
                    server,
                    limit: RateLimit {
                        rpm,
                        burst: u32_field(r, &lf, "burst", MAX_RPM, default.burst),
                    },
                    span: key.loc,
                });
            }
        }
    }
    RateLimits {
        enabled: f.bool(r, "enabled", d.enabled),
        default,
        per_server,
    }
}

pub(super) fn cross_server(r: &mut Report, node: &Node, path: &str) -> CrossServer {
    let d = CrossServer::default();
    let keys = [
        "enabled",
        "shadow_tool",
        "read_then_send",
        "cross_server_flow",
        "burst",
        "name_similarity",
    ];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    // Each detector reads into its own default; the closures keep the per-key code together.
    let sub = |r: &mut Report, key: &str, known: &[&str]| {
        f.get(key)
            .and_then(|n| Fields::open(r, n, &f.path_of(key), known))
    };
    let mut out = CrossServer {
        enabled: f.bool(r, "enabled", d.enabled),
        ..d.clone()
    };
    let similarity = sub(r, "name_similarity", &["enabled", "threshold", "action"]);
    if let Some(g) = &similarity {
        let d = &d.name_similarity;
        out.name_similarity = NameSimilarity {
            enabled: g.bool(r, "enabled", d.enabled),
            threshold: g.float(r, "threshold", 0.0..=1.0, d.threshold),
            action: g.keyword(r, "action", d.action),
        };
    }
    let shadow_keys = [
        "enabled",
        "action",
        "similarity_check",
        "similarity_threshold",
    ];
    if let Some(g) = sub(r, "shadow_tool", &shadow_keys) {
        let d = &d.shadow_tool;
        out.shadow_tool = ShadowTool {
            enabled: g.bool(r, "enabled", d.enabled),
            action: g.keyword(r, "action", d.action),
        };
        // The design documents nest the look-alike server names check under shadow_tool; it
        // is `name_similarity` here, and writing both is one setting twice.
        for (doc_key, our_key) in [
            ("similarity_check", "enabled"),
            ("similarity_threshold", "threshold"),
        ] {
            if let Some(ours) = similarity.as_ref().filter(|s| s.has(our_key)) {
                if g.has(doc_key) {
                    reader::conflict(
                        r,
                        (&g.path_of(doc_key), g.key_loc(doc_key)),
                        (&ours.path_of(our_key), ours.key_loc(our_key)),
                    );
                }
                continue;
            }
            match doc_key {
                "similarity_check" => {
                    out.name_similarity.enabled = g.bool(r, doc_key, out.name_similarity.enabled);
                }
                _ => {
                    out.name_similarity.threshold =
                        g.float(r, doc_key, 0.0..=1.0, out.name_similarity.threshold);
                }
            }
        }
    }
    let window_keys = ["enabled", "window", "window_seconds", "action"];
    if let Some(g) = sub(r, "read_then_send", &window_keys) {
        let d = &d.read_then_send;
        out.read_then_send = ReadThenSend {
            enabled: g.bool(r, "enabled", d.enabled),
            window: g.duration_or_seconds(r, "window", "window_seconds", WINDOWS, d.window),
            action: g.keyword(r, "action", d.action),
        };
    }
    let flow_keys = [
        "enabled",
        "same_turn_only",
        "window",
        "window_seconds",
        "action",
    ];
    if let Some(g) = sub(r, "cross_server_flow", &flow_keys) {
        let d = &d.cross_server_flow;
        let written = g.has("window") || g.has("window_seconds");
        out.cross_server_flow = CrossServerFlow {
            enabled: g.bool(r, "enabled", d.enabled),
            same_turn_only: g.bool(r, "same_turn_only", d.same_turn_only),
            window: written
                .then(|| g.duration_or_seconds(r, "window", "window_seconds", WINDOWS, MAX_WINDOW))
                .or(d.window),
            action: g.keyword(r, "action", d.action),
        };
    }
    let burst_keys = ["enabled", "max_calls", "window", "window_seconds", "action"];
    if let Some(g) = sub(r, "burst", &burst_keys) {
        let d = &d.burst;
        out.burst = Burst {
            enabled: g.bool(r, "enabled", d.enabled),
            max_calls: u32_field(r, &g, "max_calls", MAX_RPM, d.max_calls),
            window: g.duration_or_seconds(r, "window", "window_seconds", WINDOWS, d.window),
            action: g.keyword(r, "action", d.action),
        };
    }
    out
}

pub(super) fn detection(r: &mut Report, node: &Node, path: &str) -> Detection {
    let d = Detection::default();
    let keys = [
        "enabled",
        "alert_threshold",
        "on_detection",
        "builtin",
        "custom_patterns",
    ];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    Detection {
        enabled: f.bool(r, "enabled", d.enabled),
        alert_threshold: f.keyword(r, "alert_threshold", d.alert_threshold),
        on_detection: f.keyword(r, "on_detection", d.on_detection),
        disabled_builtin: f
            .get("builtin")
            .map(|n| disabled_builtin(r, n, &f.path_of("builtin")))
            .unwrap_or_default(),
        custom_patterns: each(r, &f, "custom_patterns", custom_pattern),
    }
}

/// `builtin: {credential_theft: false, ...}`: the built-in categories turned off. Every
/// category of the detector can be named, not only the five the design documents list.
pub(super) fn disabled_builtin(r: &mut Report, node: &Node, path: &str) -> Vec<Category> {
    let names: Vec<&str> = Category::KNOWN.iter().map(Category::as_str).collect();
    let Some(f) = Fields::open(r, node, path, &names) else {
        return Vec::new();
    };
    Category::KNOWN
        .iter()
        .filter(|c| !f.bool(r, c.as_str(), true))
        .cloned()
        .collect()
}

/// Custom patterns are named by `id` (or `name`, the design documents' spelling); a pattern
/// without a `category` is in category `custom`.
pub(super) fn custom_pattern(r: &mut Report, node: &Node, path: &str) -> Option<CustomPattern> {
    let keys = [
        "id",
        "name",
        "pattern",
        "category",
        "severity",
        "description",
    ];
    let f = Fields::open(r, node, path, &keys)?;
    let id = match f.either(r, "id", "name") {
        Some((k, n)) => reader::nonempty_string(r, n, &f.path_of(k)),
        None => {
            f.required(r, "id");
            None
        }
    };
    let pattern = f.required(r, "pattern").and_then(|n| {
        let p = f.path_of("pattern");
        let text = reader::nonempty_string(r, n, &p)?;
        Regex::new(&text)
            .map_err(|e| regex_error(r, n.loc, &p, &e))
            .ok()
    });
    let category = match f.get("category") {
        Some(n) => reader::nonempty_string(r, n, &f.path_of("category")),
        None => Some(DEFAULT_CUSTOM_CATEGORY.to_owned()),
    };
    let severity = f
        .required(r, "severity")
        .and_then(|n| reader::keyword(r, n, &f.path_of("severity"), Severity::ALL));
    let description = f.string(r, "description");
    Some(CustomPattern {
        id: id?,
        pattern: pattern?,
        category: category?,
        severity: severity?,
        description,
        span: node.loc,
    })
}

pub(super) fn output_inspection(r: &mut Report, node: &Node, path: &str) -> OutputInspection {
    let d = OutputInspection::default();
    let keys = [
        "enabled",
        "on_detection",
        "alert_threshold",
        "block_injection",
    ];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    OutputInspection {
        enabled: f.bool(r, "enabled", d.enabled),
        on_detection: f.keyword(r, "on_detection", d.on_detection),
        alert_threshold: f.keyword(r, "alert_threshold", d.alert_threshold),
        block_injection: f.keyword(r, "block_injection", d.block_injection),
    }
}

pub(super) fn server_requests(r: &mut Report, node: &Node, path: &str) -> ServerRequests {
    let d = ServerRequests::default();
    let keys = ["sampling", "elicitation", "roots"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    ServerRequests {
        sampling: f.keyword(r, "sampling", d.sampling),
        elicitation: f.keyword(r, "elicitation", d.elicitation),
        roots: f.keyword(r, "roots", d.roots),
    }
}
