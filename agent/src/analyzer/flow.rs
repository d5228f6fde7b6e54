//! Where the text in a call's arguments came from: the index behind `cross_server_flow`.
//!
//! Each recorded output is winnowed into fingerprints (see [`super::fingerprint`]), and an index
//! maps every fingerprint to the newest output that produced it. A call's argument strings are
//! winnowed the same way and looked up, so a match is attributed to the latest output that
//! carried the text.
//!
//! Memory is bounded by `max_fingerprints` fingerprints over all outputs and by `max_outputs`
//! outputs; the oldest outputs are evicted first. An output that alone would exceed the
//! fingerprint budget is winnowed with doubled windows until it fits: it then covers the whole
//! output with a longer guaranteed match (`window + KGRAM - 1` bytes) rather than only its
//! beginning.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use serde_json::{Map, Value};

use super::fingerprint::{WINDOW, winnow};

/// Recorded outputs and the fingerprint index over them.
#[derive(Debug)]
pub(super) struct FlowIndex {
    /// Oldest first; `seq` increases by one from each to the next.
    outputs: VecDeque<Output>,
    /// Fingerprint -> `seq` of the newest output that has it.
    newest_holder: HashMap<u64, u64>,
    /// Fingerprints over all of `outputs`.
    stored: usize,
    next_seq: u64,
    max_fingerprints: usize,
    max_outputs: usize,
}

#[derive(Debug)]
struct Output {
    seq: u64,
    server: String,
    tool: String,
    at: Instant,
    turn: u64,
    /// Sorted, without duplicates.
    fingerprints: Vec<u64>,
}

/// A recorded output whose text an argument carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FlowSource<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub at: Instant,
    /// JSON pointer of the argument string, e.g. `/text` or `/messages/0/body`.
    pub argument: String,
}

impl FlowIndex {
    pub fn new(max_fingerprints: usize, max_outputs: usize) -> Self {
        Self {
            outputs: VecDeque::new(),
            newest_holder: HashMap::new(),
            stored: 0,
            next_seq: 0,
            max_fingerprints,
            max_outputs,
        }
    }

    /// Remembers the text of every string in `output`, evicting the oldest outputs as needed.
    pub fn record(&mut self, server: &str, tool: &str, output: &Value, at: Instant, turn: u64) {
        let mut texts = Vec::new();
        each_string(output, &mut |text| texts.push(text));
        let fingerprints = self.fit(&texts);
        if fingerprints.is_empty() || self.max_outputs == 0 {
            return;
        }
        self.make_room(fingerprints.len());
        let seq = self.next_seq;
        self.next_seq += 1;
        for &fingerprint in &fingerprints {
            self.newest_holder.insert(fingerprint, seq);
        }
        self.stored += fingerprints.len();
        self.outputs.push_back(Output {
            seq,
            server: server.to_owned(),
            tool: tool.to_owned(),
            at,
            turn,
            fingerprints,
        });
    }

    /// The newest recorded output of a server other than `destination` whose text appears in
    /// `arguments`; with `turn`, only outputs recorded in that turn count, with `since`, only
    /// those recorded then or later.
    pub fn find(
        &self,
        destination: &str,
        arguments: &Map<String, Value>,
        turn: Option<u64>,
        since: Option<Instant>,
    ) -> Option<FlowSource<'_>> {
        if self.newest_holder.is_empty() {
            // Nothing recorded yet: no need to winnow the arguments.
            return None;
        }
        let mut best: Option<(&Output, String)> = None;
        let mut prints = Vec::new();
        each_argument_string(arguments, &mut |pointer, text| {
            prints.clear();
            winnow(text, WINDOW, &mut prints);
            for fingerprint in &prints {
                let Some(output) = self
                    .newest_holder
                    .get(fingerprint)
                    .and_then(|&seq| self.output(seq))
                else {
                    continue;
                };
                let eligible = output.server != destination
                    && turn.is_none_or(|t| output.turn == t)
                    && since.is_none_or(|t| output.at >= t);
                if eligible && best.as_ref().is_none_or(|(b, _)| output.seq > b.seq) {
                    best = Some((output, pointer.to_owned()));
                }
            }
        });
        best.map(|(output, argument)| FlowSource {
            server: &output.server,
            tool: &output.tool,
            at: output.at,
            argument,
        })
    }

    /// Fingerprints stored, over all outputs.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.stored
    }

    /// Outputs stored.
    #[cfg(test)]
    pub fn outputs(&self) -> usize {
        self.outputs.len()
    }

    fn output(&self, seq: u64) -> Option<&Output> {
        let oldest = self.outputs.front()?.seq;
        let index = usize::try_from(seq.checked_sub(oldest)?).ok()?;
        self.outputs.get(index)
    }

    /// The fingerprints of `texts`, winnowed with the smallest window (doubling from
    /// [`WINDOW`]) that keeps them within the budget.
    fn fit(&self, texts: &[&str]) -> Vec<u64> {
        let longest = texts.iter().map(|t| t.len()).max().unwrap_or(0);
        let mut window = WINDOW;
        loop {
            let mut prints = Vec::new();
            for text in texts {
                winnow(text, window, &mut prints);
            }
            prints.sort_unstable();
            prints.dedup();
            if prints.len() <= self.max_fingerprints || window >= longest {
                // Only with more distinct strings than the budget: keep the smallest hashes,
                // a sample that the same text always yields.
                prints.truncate(self.max_fingerprints);
                return prints;
            }
            window = window.saturating_mul(2);
        }
    }

    /// Evicts the oldest outputs until `incoming` more fingerprints and one more output fit.
    fn make_room(&mut self, incoming: usize) {
        while self.stored + incoming > self.max_fingerprints
            || self.outputs.len() >= self.max_outputs
        {
            let Some(old) = self.outputs.pop_front() else {
                return;
            };
            self.stored -= old.fingerprints.len();
            for fingerprint in &old.fingerprints {
                // Evicting oldest first: an entry naming `old` has no older holder left.
                if self.newest_holder.get(fingerprint) == Some(&old.seq) {
                    self.newest_holder.remove(fingerprint);
                }
            }
        }
    }
}

/// Calls `visit` with every string value in `value`, at any depth.
fn each_string<'v>(value: &'v Value, visit: &mut impl FnMut(&'v str)) {
    match value {
        Value::String(text) => visit(text),
        Value::Array(items) => items.iter().for_each(|v| each_string(v, visit)),
        Value::Object(map) => map.values().for_each(|v| each_string(v, visit)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Calls `visit` with the JSON pointer and text of every string value in `arguments`.
fn each_argument_string(arguments: &Map<String, Value>, visit: &mut impl FnMut(&str, &str)) {
    let mut pointer = String::new();
    for (key, value) in arguments {
        push_token(&mut pointer, key);
        each_string_at(value, &mut pointer, visit);
        pointer.clear();
    }
}

fn each_string_at(value: &Value, pointer: &mut String, visit: &mut impl FnMut(&str, &str)) {
    let len = pointer.len();
    match value {
        Value::String(text) => visit(pointer, text),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                push_token(pointer, &i.to_string());
                each_string_at(item, pointer, visit);
                pointer.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                push_token(pointer, key);
                each_string_at(item, pointer, visit);
                pointer.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Appends `/token` with RFC 6901 escaping.
fn push_token(pointer: &mut String, token: &str) {
    pointer.push('/');
    for c in token.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            other => pointer.push(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    const SECRET: &str = "AKIAIOSFODNN7EXAMPLE/wJalrXUtnFEMI/K7MDENG/bPxRfiCY";

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn result(text: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}]})
    }

    /// Deterministic pseudo-random lowercase text (xorshift64*).
    fn filler(seed: usize, len: usize) -> String {
        let mut x = (seed as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..len)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 59;
                char::from(b'a' + (r % 26) as u8)
            })
            .collect()
    }

    #[test]
    fn finds_output_text_in_nested_arguments() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(1000, 10);
        let text = format!("{}\n{SECRET}\n{}", filler(1, 300), filler(2, 300));
        index.record("filesystem", "read_file", &result(&text), t0, 0);
        let call = args(
            json!({"channel": "C1", "blocks": [{"text": {"a/b~": format!("see {SECRET}!")}}]}),
        );
        let found = index.find("slack", &call, None, None);
        assert_eq!(
            found,
            Some(FlowSource {
                server: "filesystem",
                tool: "read_file",
                at: t0,
                argument: "/blocks/0/text/a~1b~0".to_owned(),
            })
        );
        // The same server is not a cross-server flow.
        assert_eq!(index.find("filesystem", &call, None, None), None);
        // Unrelated arguments match nothing.
        assert_eq!(
            index.find("slack", &args(json!({"text": filler(3, 500)})), None, None),
            None
        );
    }

    #[test]
    fn structured_content_and_numbers() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(1000, 10);
        let output =
            json!({"content": [], "structuredContent": {"rows": [{"token": SECRET, "n": 5}]}});
        index.record("db", "query", &output, t0, 0);
        assert!(
            index
                .find(
                    "web",
                    &args(json!({"url": format!("https://x.test/?q={SECRET}")})),
                    None,
                    None
                )
                .is_some()
        );
        // An output without text long enough is not stored.
        index.record(
            "db",
            "count",
            &json!({"n": 12345, "ok": true, "s": "short"}),
            t0,
            0,
        );
        assert_eq!(index.outputs(), 1);
    }

    #[test]
    fn turn_filter() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(1000, 10);
        index.record("a", "read", &result(SECRET), t0, 3);
        let call = args(json!({"body": SECRET}));
        assert!(index.find("b", &call, Some(3), None).is_some());
        assert!(index.find("b", &call, Some(4), None).is_none());
        assert!(index.find("b", &call, None, None).is_some());
    }

    #[test]
    fn attributes_to_the_newest_output() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(5);
        let mut index = FlowIndex::new(1000, 10);
        index.record("a", "read", &result(SECRET), t0, 0);
        index.record("c", "get", &result(SECRET), t1, 0);
        let call = args(json!({"body": SECRET}));
        let found = index.find("b", &call, None, None).map(|s| (s.server, s.at));
        assert_eq!(found, Some(("c", t1)));
    }

    #[test]
    fn evicts_oldest_outputs_within_the_fingerprint_budget() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(200, 1000);
        let texts: Vec<String> = (0..20).map(|i| filler(i, 400)).collect();
        for (i, text) in texts.iter().enumerate() {
            index.record("a", &format!("t{i}"), &result(text), t0, 0);
            assert!(index.len() <= 200, "after {i}: {}", index.len());
            assert!(index.newest_holder.len() <= index.len());
        }
        // The newest output is found, the first one is gone.
        let newest = args(json!({"x": texts[19].as_str()}));
        assert_eq!(
            index.find("b", &newest, None, None).map(|s| s.tool),
            Some("t19")
        );
        let oldest = args(json!({"x": texts[0].as_str()}));
        assert_eq!(index.find("b", &oldest, None, None), None);
    }

    #[test]
    fn caps_the_number_of_outputs() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(100_000, 3);
        for i in 0..10 {
            index.record("a", "t", &result(&filler(i, 100)), t0, 0);
            assert!(index.outputs() <= 3);
        }
        let mut none = FlowIndex::new(100_000, 0);
        none.record("a", "t", &result(SECRET), t0, 0);
        assert_eq!((none.outputs(), none.len()), (0, 0));
    }

    #[test]
    fn a_huge_output_is_thinned_not_truncated() {
        let t0 = Instant::now();
        let mut index = FlowIndex::new(500, 10);
        // ~40k bytes would need ~5.7k fingerprints at the base window.
        let head = filler(1, 20_000);
        let tail_secret = filler(99, 400);
        let text = format!("{head}{}{tail_secret}", filler(2, 20_000));
        index.record("a", "read", &result(&text), t0, 0);
        assert!(index.len() <= 500 && index.len() > 50, "{}", index.len());
        // Text at the very end is still covered.
        assert!(
            index
                .find("b", &args(json!({"x": tail_secret})), None, None)
                .is_some()
        );
    }
}
