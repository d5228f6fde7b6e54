//! The settings sections: version pinning, rate limits, cross-server detectors, detection,
//! output inspection and server-to-client requests.

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

const MAX_RPM: u64 = 1_000_000;
const MAX_WINDOW_SECONDS: u64 = 86_400;

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
            if let Some(lf) = Fields::open(r, value, &entry_path, &["rpm", "burst"]) {
                per_server.push(ServerRateLimit {
                    server,
                    limit: RateLimit {
                        rpm: u32_field(r, &lf, "rpm", MAX_RPM, default.rpm),
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
    if let Some(g) = sub(r, "shadow_tool", &["enabled", "action"]) {
        let d = &d.shadow_tool;
        out.shadow_tool = ShadowTool {
            enabled: g.bool(r, "enabled", d.enabled),
            action: g.keyword(r, "action", d.action),
        };
    }
    if let Some(g) = sub(
        r,
        "read_then_send",
        &["enabled", "window_seconds", "action"],
    ) {
        let d = &d.read_then_send;
        out.read_then_send = ReadThenSend {
            enabled: g.bool(r, "enabled", d.enabled),
            window_seconds: g.uint(
                r,
                "window_seconds",
                1..=MAX_WINDOW_SECONDS,
                d.window_seconds,
            ),
            action: g.keyword(r, "action", d.action),
        };
    }
    if let Some(g) = sub(
        r,
        "cross_server_flow",
        &["enabled", "same_turn_only", "action"],
    ) {
        let d = &d.cross_server_flow;
        out.cross_server_flow = CrossServerFlow {
            enabled: g.bool(r, "enabled", d.enabled),
            same_turn_only: g.bool(r, "same_turn_only", d.same_turn_only),
            action: g.keyword(r, "action", d.action),
        };
    }
    if let Some(g) = sub(
        r,
        "burst",
        &["enabled", "max_calls", "window_seconds", "action"],
    ) {
        let d = &d.burst;
        out.burst = Burst {
            enabled: g.bool(r, "enabled", d.enabled),
            max_calls: u32_field(r, &g, "max_calls", MAX_RPM, d.max_calls),
            window_seconds: g.uint(
                r,
                "window_seconds",
                1..=MAX_WINDOW_SECONDS,
                d.window_seconds,
            ),
            action: g.keyword(r, "action", d.action),
        };
    }
    if let Some(g) = sub(r, "name_similarity", &["enabled", "threshold", "action"]) {
        let d = &d.name_similarity;
        out.name_similarity = NameSimilarity {
            enabled: g.bool(r, "enabled", d.enabled),
            threshold: g.float(r, "threshold", 0.0..=1.0, d.threshold),
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
        "custom_patterns",
    ];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    Detection {
        enabled: f.bool(r, "enabled", d.enabled),
        alert_threshold: f.keyword(r, "alert_threshold", d.alert_threshold),
        on_detection: f.keyword(r, "on_detection", d.on_detection),
        custom_patterns: each(r, &f, "custom_patterns", custom_pattern),
    }
}

fn custom_pattern(r: &mut Report, node: &Node, path: &str) -> Option<CustomPattern> {
    let keys = ["id", "pattern", "category", "severity", "description"];
    let f = Fields::open(r, node, path, &keys)?;
    let id = f
        .required(r, "id")
        .and_then(|n| reader::nonempty_string(r, n, &f.path_of("id")));
    let pattern = f.required(r, "pattern").and_then(|n| {
        let p = f.path_of("pattern");
        let text = reader::nonempty_string(r, n, &p)?;
        Regex::new(&text)
            .map_err(|e| regex_error(r, n.loc, &p, &e))
            .ok()
    });
    let category = f
        .required(r, "category")
        .and_then(|n| reader::nonempty_string(r, n, &f.path_of("category")));
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
    let keys = ["enabled", "on_detection", "alert_threshold"];
    let Some(f) = Fields::open(r, node, path, &keys) else {
        return d;
    };
    OutputInspection {
        enabled: f.bool(r, "enabled", d.enabled),
        on_detection: f.keyword(r, "on_detection", d.on_detection),
        alert_threshold: f.keyword(r, "alert_threshold", d.alert_threshold),
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
