//! One agent session's history, and the cross-server rules evaluated over it.
//!
//! Windows are inclusive: an event exactly `window` old still counts, one nanosecond
//! older does not. Instants that arrive out of order (callers on several threads) count as
//! zero seconds old rather than being dropped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::{Burst, CrossServer, CrossServerFlow, ReadThenSend};

use super::burst::CallWindow;
use super::flow::FlowIndex;
use super::{CallContext, Categories, CrossFinding, CrossRule};

/// A turn ends after this long with no call and no output, unless
/// [`SessionHistory::start_turn`] marks it first.
pub const TURN_IDLE: Duration = Duration::from_secs(30);

/// How long a read is remembered: the longest `read_then_send.window` a policy accepts.
const READ_RETENTION: Duration = Duration::from_secs(86_400);

/// Bounds on what one [`SessionHistory`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    /// Fingerprints of recorded outputs, over all of them; the oldest outputs are evicted first.
    pub max_fingerprints: usize,
    /// Recorded outputs (each also keeps its server and tool names).
    pub max_outputs: usize,
    /// Servers whose latest read is remembered; the oldest read is forgotten first.
    pub max_read_servers: usize,
    /// Call timestamps kept for `burst`, per server; a `max_calls` above this is treated as
    /// this.
    pub max_burst_calls: usize,
    /// Servers whose recent calls are kept for `burst`; the one called least recently is
    /// forgotten first.
    pub max_burst_servers: usize,
}

impl Default for HistoryLimits {
    /// A few MiB for a session at every bound, which it reaches only by recording that much:
    /// 64 Ki fingerprints (the index and per-output lists, ~40 bytes each) covering roughly the
    /// last 450 KiB of output text, and 4 Ki burst timestamps (16 bytes each) for each of 256
    /// servers.
    fn default() -> Self {
        Self {
            max_fingerprints: 1 << 16,
            max_outputs: 1024,
            max_read_servers: 256,
            max_burst_calls: 1 << 12,
            max_burst_servers: 256,
        }
    }
}

/// What one agent session did, as far as the cross-server rules need to know.
#[derive(Debug)]
pub struct SessionHistory {
    limits: HistoryLimits,
    /// Advanced by `start_turn` and by [`TURN_IDLE`] of silence.
    turn: u64,
    last_activity: Option<Instant>,
    /// Server id -> its latest allowed READ call.
    reads: HashMap<String, Read>,
    outputs: FlowIndex,
    /// Server id -> its recent call attempts (burst counts per server).
    calls: HashMap<String, CallWindow>,
}

#[derive(Debug)]
struct Read {
    tool: String,
    at: Instant,
}

impl Default for SessionHistory {
    fn default() -> Self {
        Self::new(HistoryLimits::default())
    }
}

impl SessionHistory {
    pub fn new(limits: HistoryLimits) -> Self {
        Self {
            limits,
            turn: 0,
            last_activity: None,
            reads: HashMap::new(),
            outputs: FlowIndex::new(limits.max_fingerprints, limits.max_outputs),
            calls: HashMap::new(),
        }
    }

    /// Before a call executes: findings under `cfg`, in the order read_then_send,
    /// cross_server_flow, burst. Records the attempt for burst counting.
    pub fn check_call(&mut self, cfg: &CrossServer, call: &CallContext) -> Vec<CrossFinding> {
        self.observe(call.now);
        if !cfg.enabled {
            return Vec::new();
        }
        let attempts = cfg.burst.enabled.then(|| {
            let max = self.max_burst_calls(&cfg.burst);
            self.server_calls(call.server, call.now)
                .record(call.now, cfg.burst.window, max)
        });
        self.findings(cfg, call, self.turn, attempts)
    }

    /// What [`Self::check_call`] would find, recording nothing: for a call a model asked for,
    /// which is counted when it executes.
    pub fn preview_call(&self, cfg: &CrossServer, call: &CallContext) -> Vec<CrossFinding> {
        if !cfg.enabled {
            return Vec::new();
        }
        let attempts = cfg.burst.enabled.then(|| {
            let max = self.max_burst_calls(&cfg.burst);
            self.calls
                .get(call.server)
                .map_or(1, |calls| calls.count_with(call.now, cfg.burst.window, max))
        });
        self.findings(cfg, call, self.turn_at(call.now), attempts)
    }

    /// `attempts`: the calls within the burst window, this one included (burst enabled).
    fn findings(
        &self,
        cfg: &CrossServer,
        call: &CallContext,
        turn: u64,
        attempts: Option<usize>,
    ) -> Vec<CrossFinding> {
        let mut findings = Vec::new();
        if cfg.read_then_send.enabled {
            findings.extend(self.read_then_send(&cfg.read_then_send, call));
        }
        if cfg.cross_server_flow.enabled {
            findings.extend(self.cross_server_flow(&cfg.cross_server_flow, call, turn));
        }
        if let Some(attempts) = attempts {
            findings.extend(self.burst(&cfg.burst, call, attempts));
        }
        findings
    }

    /// After the engine allowed the call (a blocked call never counts as a read).
    pub fn record_allowed_call(&mut self, call: &CallContext) {
        self.observe(call.now);
        if !call.categories.contains(Categories::READ) || self.limits.max_read_servers == 0 {
            return;
        }
        let now = call.now;
        self.reads
            .retain(|_, read| now.saturating_duration_since(read.at) <= READ_RETENTION);
        if let Some(read) = self.reads.get_mut(call.server) {
            if now >= read.at {
                call.tool.clone_into(&mut read.tool);
                read.at = now;
            }
            return;
        }
        if self.reads.len() >= self.limits.max_read_servers
            && let Some(oldest) = self
                .reads
                .iter()
                .min_by_key(|(_, read)| read.at)
                .map(|(server, _)| server.clone())
        {
            self.reads.remove(&oldest);
        }
        self.reads.insert(
            call.server.to_owned(),
            Read {
                tool: call.tool.to_owned(),
                at: now,
            },
        );
    }

    /// A tool result (or resources/read content) the client received from `server`.
    pub fn record_output(&mut self, server: &str, tool: &str, output: &Value, now: Instant) {
        self.observe(now);
        self.outputs.record(server, tool, output, now, self.turn);
    }

    /// A new turn begins: the user asked for something new. Not called by the LLM proxy yet:
    /// a session's requests belong to several conversations (subagents, title requests), so a
    /// request's own words do not end the session's turn; that needs turns per conversation.
    /// Not for every model request: the request that carries a tool result back to the model is the
    /// same turn, or `same_turn_only` would never see a result flow into the next call.
    pub fn start_turn(&mut self, now: Instant) {
        self.turn += 1;
        self.last_activity = Some(now);
    }

    /// The turn [`Self::observe`] would put `now` in.
    fn turn_at(&self, now: Instant) -> u64 {
        match self.last_activity {
            Some(last) if now.saturating_duration_since(last) >= TURN_IDLE => self.turn + 1,
            _ => self.turn,
        }
    }

    /// Notes activity at `now`, ending the turn first after [`TURN_IDLE`] of silence.
    fn observe(&mut self, now: Instant) {
        if let Some(last) = self.last_activity {
            if now.saturating_duration_since(last) >= TURN_IDLE {
                self.turn += 1;
            }
            self.last_activity = Some(last.max(now));
        } else {
            self.last_activity = Some(now);
        }
    }

    fn read_then_send(&self, rule: &ReadThenSend, call: &CallContext) -> Option<CrossFinding> {
        if !call.categories.contains(Categories::SEND) {
            return None;
        }
        let window = rule.window;
        // The most recent read elsewhere (ties: the first server id, for stable output).
        let (server, read, ago) = self
            .reads
            .iter()
            .filter(|(server, _)| server.as_str() != call.server)
            .map(|(server, read)| (server, read, call.now.saturating_duration_since(read.at)))
            .filter(|(_, _, ago)| *ago <= window)
            .min_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(b.0)))?;
        let seconds_ago = ago.as_secs();
        Some(CrossFinding {
            rule: CrossRule::ReadThenSend,
            action: rule.action,
            reason: format!(
                "send via {}:{} {seconds_ago}s after read via {server}:{} \
                 (read_then_send, window {})",
                call.server,
                call.tool,
                read.tool,
                humantime::format_duration(rule.window)
            ),
            details: json!({
                "read": {"server": server, "tool": read.tool, "seconds_ago": seconds_ago},
                "send": {"server": call.server, "tool": call.tool},
                "window_seconds": seconds_value(rule.window),
            }),
        })
    }

    fn cross_server_flow(
        &self,
        rule: &CrossServerFlow,
        call: &CallContext,
        turn: u64,
    ) -> Option<CrossFinding> {
        let arguments = call.arguments?;
        let turn = rule.same_turn_only.then_some(turn);
        let since = rule.window.and_then(|w| call.now.checked_sub(w));
        let source = self.outputs.find(call.server, arguments, turn, since)?;
        let seconds_ago = call.now.saturating_duration_since(source.at).as_secs();
        let mut details = json!({
            "source": {"server": source.server, "tool": source.tool, "seconds_ago": seconds_ago},
            "destination": {"server": call.server, "tool": call.tool, "argument": source.argument},
            "same_turn_only": rule.same_turn_only,
        });
        if let Some(window) = rule.window {
            details["window_seconds"] = seconds_value(window);
        }
        Some(CrossFinding {
            rule: CrossRule::CrossServerFlow,
            action: rule.action,
            reason: format!(
                "argument {} of {}:{} carries text from the output of {}:{} {seconds_ago}s \
                 earlier (cross_server_flow)",
                source.argument, call.server, call.tool, source.server, source.tool
            ),
            details,
        })
    }

    /// The burst window of `server`, made room for: the server called least recently is
    /// forgotten when too many are tracked.
    fn server_calls(&mut self, server: &str, now: Instant) -> &mut CallWindow {
        if !self.calls.contains_key(server) && self.calls.len() >= self.limits.max_burst_servers {
            let stalest = self
                .calls
                .iter()
                .min_by_key(|(_, calls)| calls.latest().unwrap_or(now))
                .map(|(server, _)| server.clone());
            if let Some(stalest) = stalest {
                self.calls.remove(&stalest);
            }
        }
        self.calls.entry(server.to_owned()).or_default()
    }

    fn max_burst_calls(&self, rule: &Burst) -> usize {
        usize::try_from(rule.max_calls)
            .unwrap_or(usize::MAX)
            .min(self.limits.max_burst_calls)
    }

    fn burst(&self, rule: &Burst, call: &CallContext, calls: usize) -> Option<CrossFinding> {
        let max_calls = self.max_burst_calls(rule);
        (calls > max_calls).then(|| CrossFinding {
            rule: CrossRule::Burst,
            action: rule.action,
            reason: format!(
                "call to {}:{} makes more than {max_calls} calls to server '{}' within {} (burst)",
                call.server,
                call.tool,
                call.server,
                humantime::format_duration(rule.window)
            ),
            details: json!({
                "calls": calls,
                "max_calls": max_calls,
                "window_seconds": seconds_value(rule.window),
                "call": {"server": call.server, "tool": call.tool},
            }),
        })
    }
}

/// A window in seconds for the JSON details: whole seconds as an integer, else fractional.
fn seconds_value(window: Duration) -> Value {
    if window.subsec_nanos() == 0 {
        json!(window.as_secs())
    } else {
        json!(window.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

    use super::*;
    use crate::config::Action;

    const SECRET: &str = "-----BEGIN OPENSSH PRIVATE KEY-----b3BlbnNzaC1rZXktdjEAAAAABG5vbmU";

    const R: Categories = Categories::READ;
    const S: Categories = Categories::SEND;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Only the rule under test switched on.
    fn only(rule: CrossRule) -> CrossServer {
        let mut cfg = CrossServer::default();
        cfg.read_then_send.enabled = rule == CrossRule::ReadThenSend;
        cfg.cross_server_flow.enabled = rule == CrossRule::CrossServerFlow;
        cfg.burst.enabled = rule == CrossRule::Burst;
        cfg
    }

    fn call<'a>(
        server: &'a str,
        tool: &'a str,
        categories: Categories,
        arguments: Option<&'a Map<String, Value>>,
        now: Instant,
    ) -> CallContext<'a> {
        CallContext {
            server,
            tool,
            categories,
            arguments,
            now,
        }
    }

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn result(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}], "isError": false})
    }

    fn rules(findings: &[CrossFinding]) -> Vec<&'static str> {
        findings.iter().map(|f| f.rule.as_str()).collect()
    }

    // read_then_send

    #[test]
    fn read_then_send_names_both_sides() {
        let t0 = Instant::now();
        let cfg = only(CrossRule::ReadThenSend);
        let mut h = SessionHistory::default();
        h.record_allowed_call(&call("filesystem", "read_file", R, None, t0));
        let send = call("slack", "slack_post_message", S, None, t0 + secs(12));
        let findings = h.check_call(&cfg, &send);
        assert_eq!(
            findings,
            [CrossFinding {
                rule: CrossRule::ReadThenSend,
                action: Action::Block,
                reason:
                    "send via slack:slack_post_message 12s after read via filesystem:read_file \
                         (read_then_send, window 5m)"
                        .to_owned(),
                details: json!({
                    "read": {"server": "filesystem", "tool": "read_file", "seconds_ago": 12},
                    "send": {"server": "slack", "tool": "slack_post_message"},
                    "window_seconds": 300,
                }),
            }]
        );
    }

    #[test]
    fn read_then_send_window_is_inclusive() {
        let t0 = Instant::now();
        let mut cfg = only(CrossRule::ReadThenSend);
        cfg.read_then_send.window = Duration::from_secs(60);
        let mut h = SessionHistory::default();
        h.record_allowed_call(&call("fs", "read_file", R, None, t0));
        let at_edge = h.check_call(&cfg, &call("web", "fetch", R | S, None, t0 + secs(60)));
        assert_eq!(rules(&at_edge), ["read_then_send"]);
        let past = t0 + secs(60) + Duration::from_nanos(1);
        assert!(
            h.check_call(&cfg, &call("web", "fetch", R | S, None, past))
                .is_empty()
        );
    }

    #[test]
    fn read_then_send_needs_another_server_a_send_and_an_allowed_read() {
        let t0 = Instant::now();
        let t1 = t0 + secs(1);
        let cfg = only(CrossRule::ReadThenSend);
        let mut h = SessionHistory::default();
        // A read and a send on the same server is not cross-server.
        h.record_allowed_call(&call("github", "get_file_contents", R, None, t0));
        assert!(
            h.check_call(&cfg, &call("github", "create_issue", S, None, t1))
                .is_empty()
        );
        // A call that is not SEND does not fire.
        let write = Categories::WRITE;
        assert!(
            h.check_call(&cfg, &call("fs", "write_file", write, None, t1))
                .is_empty()
        );
        // A call that was only checked (then blocked) is not a read.
        let mut h = SessionHistory::default();
        assert!(
            h.check_call(&cfg, &call("fs", "read_file", R, None, t0))
                .is_empty()
        );
        assert!(
            h.check_call(&cfg, &call("slack", "post", S, None, t1))
                .is_empty()
        );
        // An allowed call that does not read is not a read either.
        h.record_allowed_call(&call("fs", "write_file", write, None, t0));
        assert!(
            h.check_call(&cfg, &call("slack", "post", S, None, t1))
                .is_empty()
        );
    }

    #[test]
    fn read_then_send_reports_the_latest_read_elsewhere() {
        let t0 = Instant::now();
        let cfg = only(CrossRule::ReadThenSend);
        let mut h = SessionHistory::default();
        h.record_allowed_call(&call("fs", "read_file", R, None, t0));
        h.record_allowed_call(&call("db", "query", R, None, t0 + secs(5)));
        h.record_allowed_call(&call("fs", "list_directory", R, None, t0 + secs(8)));
        h.record_allowed_call(&call("slack", "history", R, None, t0 + secs(9)));
        let findings = h.check_call(&cfg, &call("slack", "post", S, None, t0 + secs(10)));
        let read = findings.first().map(|f| f.details["read"].clone());
        assert_eq!(
            read,
            Some(json!({"server": "fs", "tool": "list_directory", "seconds_ago": 2}))
        );
    }

    #[test]
    fn remembered_reads_are_bounded() {
        let t0 = Instant::now();
        let cfg = only(CrossRule::ReadThenSend);
        let limits = HistoryLimits {
            max_read_servers: 2,
            ..HistoryLimits::default()
        };
        let mut h = SessionHistory::new(limits);
        for (i, server) in ["a", "b", "c"].into_iter().enumerate() {
            h.record_allowed_call(&call(server, "read", R, None, t0 + secs(i as u64)));
        }
        assert_eq!(h.reads.len(), 2);
        assert!(!h.reads.contains_key("a"));
        // Sending from `c` still sees the read on `b`; `a` is forgotten.
        let findings = h.check_call(&cfg, &call("c", "send", S, None, t0 + secs(3)));
        assert_eq!(
            findings
                .first()
                .map(|f| f.details["read"]["server"].clone()),
            Some(json!("b"))
        );
        let findings = h.check_call(&cfg, &call("b", "send", S, None, t0 + secs(3)));
        assert_eq!(
            findings
                .first()
                .map(|f| f.details["read"]["server"].clone()),
            Some(json!("c"))
        );
        // Reads older than a day are dropped on the next record.
        h.record_allowed_call(&call("d", "read", R, None, t0 + secs(86_403)));
        assert_eq!(h.reads.keys().collect::<Vec<_>>(), ["d"]);
        let mut none = SessionHistory::new(HistoryLimits {
            max_read_servers: 0,
            ..HistoryLimits::default()
        });
        none.record_allowed_call(&call("a", "read", R, None, t0));
        assert!(none.reads.is_empty());
    }

    // cross_server_flow

    #[test]
    fn flow_from_one_server_into_another() {
        let t0 = Instant::now();
        let cfg = only(CrossRule::CrossServerFlow);
        let mut h = SessionHistory::default();
        let file = format!("Host *\n  IdentityFile ~/.ssh/id\n{SECRET}\nmore text here");
        h.record_output("filesystem", "read_file", &result(&file), t0);
        let a = args(json!({"channel": "C1", "text": format!("here you go: {SECRET}")}));
        let findings = h.check_call(&cfg, &call("slack", "post", S, Some(&a), t0 + secs(2)));
        assert_eq!(
            findings,
            [CrossFinding {
                rule: CrossRule::CrossServerFlow,
                action: Action::Alert,
                reason: "argument /text of slack:post carries text from the output of \
                         filesystem:read_file 2s earlier (cross_server_flow)"
                    .to_owned(),
                details: json!({
                    "source": {"server": "filesystem", "tool": "read_file", "seconds_ago": 2},
                    "destination": {"server": "slack", "tool": "post", "argument": "/text"},
                    "same_turn_only": true,
                }),
            }]
        );
        // The same text going back to the server it came from is not cross-server.
        let back = call(
            "filesystem",
            "write_file",
            Categories::WRITE,
            Some(&a),
            t0 + secs(3),
        );
        assert!(h.check_call(&cfg, &back).is_empty());
        // No arguments, no flow.
        assert!(
            h.check_call(&cfg, &call("slack", "post", S, None, t0 + secs(4)))
                .is_empty()
        );
    }

    #[test]
    fn same_turn_only_ends_at_start_turn() {
        let t0 = Instant::now();
        let mut cfg = only(CrossRule::CrossServerFlow);
        let mut h = SessionHistory::default();
        h.record_output("a", "read", &result(SECRET), t0);
        h.start_turn(t0 + secs(1));
        let a = args(json!({"body": SECRET}));
        let next_turn = call("b", "send", S, Some(&a), t0 + secs(2));
        assert!(h.check_call(&cfg, &next_turn).is_empty());
        cfg.cross_server_flow.same_turn_only = false;
        assert_eq!(
            rules(&h.check_call(&cfg, &next_turn)),
            ["cross_server_flow"]
        );
    }

    #[test]
    fn same_turn_only_ends_after_idle_time() {
        let t0 = Instant::now();
        let cfg = only(CrossRule::CrossServerFlow);
        let a = args(json!({"body": SECRET}));
        // Activity just under TURN_IDLE apart keeps the turn going, however long overall.
        let mut h = SessionHistory::default();
        h.record_output("a", "read", &result(SECRET), t0);
        let step = TURN_IDLE - Duration::from_nanos(1);
        let mut now = t0;
        for _ in 0..5 {
            now += step;
            let unrelated = args(json!({"q": "x"}));
            assert!(
                h.check_call(&cfg, &call("c", "noop", S, Some(&unrelated), now))
                    .is_empty()
            );
        }
        assert!(
            !h.check_call(&cfg, &call("b", "send", S, Some(&a), now + step))
                .is_empty()
        );
        // Exactly TURN_IDLE of silence ends it.
        let mut h = SessionHistory::default();
        h.record_output("a", "read", &result(SECRET), t0);
        assert!(
            h.check_call(&cfg, &call("b", "send", S, Some(&a), t0 + TURN_IDLE))
                .is_empty()
        );
        // An output counts as activity too, and belongs to the turn it arrived in.
        let mut h = SessionHistory::default();
        h.record_output(
            "x",
            "y",
            &result("unrelated output, long enough to be kept"),
            t0,
        );
        h.record_output("a", "read", &result(SECRET), t0 + TURN_IDLE);
        let after = t0 + TURN_IDLE + secs(1);
        assert!(
            !h.check_call(&cfg, &call("b", "send", S, Some(&a), after))
                .is_empty()
        );
    }

    #[test]
    fn flow_memory_is_bounded() {
        let t0 = Instant::now();
        let limits = HistoryLimits {
            max_fingerprints: 300,
            max_outputs: 4,
            ..HistoryLimits::default()
        };
        let mut h = SessionHistory::new(limits);
        for i in 0..50u64 {
            let text: String = (0..2000u64)
                .map(|j| char::from(b'a' + ((j * j + i * 7919 + j / 3) % 26) as u8))
                .collect();
            h.record_output("a", "read", &result(&text), t0 + Duration::from_millis(i));
            assert!(h.outputs.len() <= 300 && h.outputs.outputs() <= 4);
        }
    }

    // burst

    #[test]
    fn burst_fires_past_max_calls_within_the_window() {
        let t0 = Instant::now();
        let mut cfg = only(CrossRule::Burst);
        cfg.burst.max_calls = 3;
        cfg.burst.window = Duration::from_secs(10);
        let mut h = SessionHistory::default();
        for i in 0..3 {
            let c = call("a", "t", Categories::NONE, None, t0 + secs(i));
            assert!(h.check_call(&cfg, &c).is_empty(), "call {i}");
        }
        // The 4th attempt at t0+10s: the first one is exactly 10 s old and still counts.
        let fourth = h.check_call(&cfg, &call("a", "t", Categories::NONE, None, t0 + secs(10)));
        assert_eq!(
            fourth,
            [CrossFinding {
                rule: CrossRule::Burst,
                action: Action::Alert,
                reason: "call to a:t makes more than 3 calls to server 'a' within 10s (burst)"
                    .to_owned(),
                details: json!({
                    "calls": 4, "max_calls": 3, "window_seconds": 10,
                    "call": {"server": "a", "tool": "t"},
                }),
            }]
        );
        // Past t0+11s the first two calls (t0, t0+1s) have aged out of the window.
        let later = t0 + secs(11) + Duration::from_nanos(1);
        assert!(
            h.check_call(&cfg, &call("a", "t", Categories::NONE, None, later))
                .is_empty()
        );
        assert!(h.calls["a"].len() <= 4);
    }

    #[test]
    fn burst_counts_attempts_per_server_and_bounds_memory() {
        let t0 = Instant::now();
        let mut cfg = only(CrossRule::Burst);
        cfg.burst.max_calls = 1_000_000;
        let limits = HistoryLimits {
            max_burst_calls: 5,
            max_burst_servers: 2,
            ..HistoryLimits::default()
        };
        let mut h = SessionHistory::new(limits);
        let mut fired = Vec::new();
        for i in 0..20 {
            let server = if i % 2 == 0 { "a" } else { "b" };
            let c = call(
                server,
                "t",
                Categories::NONE,
                None,
                t0 + Duration::from_millis(i),
            );
            fired.push(!h.check_call(&cfg, &c).is_empty());
            assert!(h.calls.values().all(|w| w.len() <= 6));
        }
        // Each server's count is its own, clamped to 5: each one's 6th attempt onwards fires
        // (attempts 10 and 11 overall).
        assert_eq!(fired.iter().position(|f| *f), Some(10));
        assert!(fired[10..].iter().all(|f| *f));

        // A third server makes room by forgetting the one called least recently ("a").
        let c = call("c", "t", Categories::NONE, None, t0 + secs(1));
        assert!(h.check_call(&cfg, &c).is_empty());
        assert_eq!(h.calls.len(), 2);
        assert!(h.calls.contains_key("b") && h.calls.contains_key("c"));
    }

    #[test]
    fn previews_find_what_a_check_would_and_record_nothing() {
        let t0 = Instant::now();
        let mut cfg = only(CrossRule::Burst);
        cfg.burst.max_calls = 2;
        let mut h = SessionHistory::default();
        let c = |i| {
            call(
                "a",
                "t",
                Categories::NONE,
                None,
                t0 + Duration::from_millis(i),
            )
        };
        for i in 0..2 {
            // A preview of the call about to be checked says the same, and is not counted.
            assert!(h.preview_call(&cfg, &c(i)).is_empty());
            assert!(h.check_call(&cfg, &c(i)).is_empty());
        }
        for _ in 0..3 {
            assert_eq!(rules(&h.preview_call(&cfg, &c(2))), ["burst"]);
        }
        assert_eq!(h.calls["a"].len(), 2);
        assert_eq!(rules(&h.check_call(&cfg, &c(2))), ["burst"]);
        // After TURN_IDLE the preview sees the next turn, as the check will.
        assert_eq!(h.turn_at(t0 + TURN_IDLE + secs(1)), h.turn + 1);
        assert_eq!(h.turn_at(t0 + secs(1)), h.turn);
    }

    #[test]
    fn max_calls_zero_flags_every_call() {
        let mut cfg = only(CrossRule::Burst);
        cfg.burst.max_calls = 0;
        let mut h = SessionHistory::default();
        let c = call("a", "t", Categories::NONE, None, Instant::now());
        assert_eq!(rules(&h.check_call(&cfg, &c)), ["burst"]);
    }

    // switches and actions

    #[test]
    fn switches_and_actions() {
        let t0 = Instant::now();
        let t1 = t0 + secs(1);
        let a = args(json!({"text": SECRET}));
        let setup = || {
            let mut h = SessionHistory::default();
            h.record_allowed_call(&call("fs", "read_file", R, None, t0));
            h.record_output("fs", "read_file", &result(SECRET), t0);
            h
        };
        let send = call("slack", "post", S, Some(&a), t1);

        let mut all = CrossServer::default();
        all.burst.max_calls = 0;
        assert_eq!(
            rules(&setup().check_call(&all, &send)),
            ["read_then_send", "cross_server_flow", "burst"]
        );

        let mut off = all.clone();
        off.enabled = false;
        let mut h = setup();
        assert!(h.check_call(&off, &send).is_empty());
        // Nothing was counted for burst while switched off.
        assert_eq!(h.calls.len(), 0);

        let mut actions = all.clone();
        actions.read_then_send.action = Action::Alert;
        actions.cross_server_flow.action = Action::Block;
        actions.burst.action = Action::Block;
        let got: Vec<Action> = setup()
            .check_call(&actions, &send)
            .iter()
            .map(|f| f.action)
            .collect();
        assert_eq!(got, [Action::Alert, Action::Block, Action::Block]);

        for rule in [
            CrossRule::ReadThenSend,
            CrossRule::CrossServerFlow,
            CrossRule::Burst,
        ] {
            let mut cfg = all.clone();
            match rule {
                CrossRule::ReadThenSend => cfg.read_then_send.enabled = false,
                CrossRule::CrossServerFlow => cfg.cross_server_flow.enabled = false,
                CrossRule::Burst => cfg.burst.enabled = false,
            }
            let fired = rules(&setup().check_call(&cfg, &send));
            assert_eq!(fired.len(), 2, "{rule}");
            assert!(!fired.contains(&rule.as_str()), "{rule}");
        }
    }

    #[test]
    fn rule_names() {
        assert_eq!(CrossRule::ReadThenSend.as_str(), "read_then_send");
        assert_eq!(CrossRule::CrossServerFlow.to_string(), "cross_server_flow");
        assert_eq!(CrossRule::Burst.as_str(), "burst");
    }
}
