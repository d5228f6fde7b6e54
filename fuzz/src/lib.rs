//! Shared pieces of the fuzz targets: split points taken from the fuzz input, a judge that
//! blocks a known set of tool names and remembers what it decided, an SSE reader written
//! independently of agentsh's (as a client reads a stream), and structured generators of each
//! LLM dialect's streams whose tool calls a client model then reads back from the output, and
//! the harness the dialect targets share ([`dialect`]).

pub mod anthropic;
pub mod chat;
pub mod dialect;
pub mod gemini;
pub mod responses;
pub mod shape;

use agentsh::llm::{Arguments, Judge, Judgement, ToolCall};
use arbitrary::Arbitrary;
use serde_json::{Map, Value};

/// The largest single allocation a target may make: past it the target aborts, and libFuzzer
/// keeps the input (its own `-malloc_limit_mb` needs a sanitizer's allocator hooks; the targets
/// are built without one). An input of a few KiB has no business asking for more.
pub const MAX_ALLOCATION: usize = 256 << 20;

struct BoundedAllocator;

impl BoundedAllocator {
    fn check(size: usize) {
        if size > MAX_ALLOCATION {
            use std::io::Write as _;
            // No allocation from here on: a static message, then abort.
            let _ = std::io::stderr()
                .write_all(b"==fuzz== an allocation past MAX_ALLOCATION (256 MiB): aborting\n");
            std::process::abort();
        }
    }
}

// SAFETY: every call is forwarded to the system allocator unchanged, after a size check that
// allocates nothing.
unsafe impl std::alloc::GlobalAlloc for BoundedAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        Self::check(layout.size());
        // SAFETY: as above.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        Self::check(new_size);
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: BoundedAllocator = BoundedAllocator;

/// Names (or namespaces) the fuzz judge blocks start with this.
pub const BLOCKED_PREFIX: &str = "blocked";

pub fn is_blocked_name(name: &str) -> bool {
    name.starts_with(BLOCKED_PREFIX)
}

/// Blocks every call whose name or namespace starts with [`BLOCKED_PREFIX`] and every call
/// whose arguments cannot be read (as the engine does); allows the rest. Remembers every call
/// it allowed, so the output can be checked to carry no other call.
#[derive(Default, Debug)]
pub struct FuzzJudge {
    pub allowed: Vec<ToolCall>,
    pub blocked: Vec<ToolCall>,
}

impl Judge for FuzzJudge {
    fn judge(&mut self, call: &ToolCall) -> Judgement {
        let blocked = is_blocked_name(&call.name)
            || call.namespace.as_deref().is_some_and(is_blocked_name)
            || matches!(call.arguments, Arguments::Unreadable(_));
        if blocked {
            self.blocked.push(call.clone());
            Judgement::Block {
                reason: "fuzz policy".to_owned(),
            }
        } else {
            self.allowed.push(call.clone());
            Judgement::Allow
        }
    }
}

impl FuzzJudge {
    /// Whether the judge allowed a call of this name (and namespace) with these arguments.
    pub fn allowed_call(&self, name: &str, namespace: Option<&str>, arguments: &Value) -> bool {
        self.allowed.iter().any(|call| {
            call.name == name
                && call.namespace.as_deref() == namespace
                && matches!(&call.arguments, Arguments::Object(map) if Value::Object(map.clone()) == *arguments)
        })
    }
}

/// A tool call as a client reads it back from an output.
#[derive(Debug, Clone, PartialEq)]
pub struct SeenCall {
    pub name: String,
    pub namespace: Option<String>,
    /// The arguments as the client reads them; None when the client could not read them.
    pub arguments: Option<Value>,
    /// Name pieces (clients that keep the last fragment, or the first, see these).
    pub name_pieces: Vec<String>,
    /// Where it was found, for the failure message.
    pub whence: String,
}

/// Panics when `calls` (read back from what the client gets) holds a call the judge did not
/// allow exactly: a blocked name, or a name and arguments the judge never saw together.
pub fn assert_only_allowed_calls(calls: &[SeenCall], judge: &FuzzJudge, output: &[u8]) {
    assert_no_blocked_names(calls, judge, output);
    for call in calls {
        let allowed = match &call.arguments {
            Some(arguments) => judge.allowed_call(&call.name, call.namespace.as_deref(), arguments),
            None => false,
        };
        if !allowed {
            panic!(
                "the client gets a call the judge never allowed as such: {call:?}\njudge: {judge:?}\noutput: {}",
                String::from_utf8_lossy(output)
            );
        }
    }
}

/// Panics when a call in `calls` has a blocked name (or a blocked piece of its name, or a
/// blocked namespace).
pub fn assert_no_blocked_names(calls: &[SeenCall], judge: &FuzzJudge, output: &[u8]) {
    for call in calls {
        let blocked = is_blocked_name(&call.name)
            || call.namespace.as_deref().is_some_and(is_blocked_name)
            || call.name_pieces.iter().any(|p| is_blocked_name(p));
        if blocked {
            panic!(
                "a blocked call reaches the client: {call:?}\njudge: {judge:?}\noutput: {}",
                String::from_utf8_lossy(output)
            );
        }
    }
}

/// Arguments as a client reads a JSON text of them (an empty text is no arguments).
pub fn arguments_of_text(text: &str) -> Option<Value> {
    if text.trim().is_empty() {
        return Some(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Some(value),
        _ => None,
    }
}

/// Split points in a byte string, from the fuzz input.
#[derive(Arbitrary, Debug, Clone, Default)]
pub struct Cuts(pub Vec<u16>);

impl Cuts {
    /// `bytes` in pieces at these cuts (each cut taken modulo the length + 1).
    pub fn pieces<'a>(&self, bytes: &'a [u8]) -> Vec<&'a [u8]> {
        let mut at: Vec<usize> = self
            .0
            .iter()
            .take(64)
            .map(|&c| usize::from(c) % (bytes.len() + 1))
            .collect();
        at.sort_unstable();
        at.dedup();
        let mut pieces = Vec::with_capacity(at.len() + 1);
        let mut from = 0;
        for cut in at {
            pieces.push(&bytes[from..cut]);
            from = cut;
        }
        pieces.push(&bytes[from..]);
        pieces
    }
}

/// Bounds chosen by the fuzz input: small enough that the limit paths are reached.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct SmallLimits {
    pub event: u16,
    pub held: u16,
    pub tiny: bool,
}

impl SmallLimits {
    pub fn limits(self) -> agentsh::llm::Limits {
        let (base, span) = if self.tiny { (16, 512) } else { (1024, 16384) };
        agentsh::llm::Limits {
            max_event_bytes: base + usize::from(self.event) % span,
            max_held_bytes: base + usize::from(self.held) % (2 * span),
        }
    }
}

/// A few byte changes to a rendered stream: overwrite, insert or delete at a position.
#[derive(Arbitrary, Debug, Clone)]
pub enum Mutation {
    Set(u16, u8),
    Insert(u16, u8),
    Delete(u16),
}

pub fn mutate(bytes: &mut Vec<u8>, mutations: &[Mutation]) {
    for mutation in mutations.iter().take(4) {
        let len = bytes.len();
        match *mutation {
            Mutation::Set(at, b) if len > 0 => bytes[usize::from(at) % len] = b,
            Mutation::Insert(at, b) => bytes.insert(usize::from(at) % (len + 1), b),
            Mutation::Delete(at) if len > 0 => {
                bytes.remove(usize::from(at) % len);
            }
            _ => {}
        }
    }
}

/// Runs one streamed response through the interceptor in pieces; returns what the client gets.
pub fn run_stream(
    mut stream: agentsh::llm::Stream,
    pieces: &[&[u8]],
    judge: &mut FuzzJudge,
) -> Vec<u8> {
    let mut out = Vec::new();
    for piece in pieces {
        stream.push(piece, judge, &mut out);
    }
    stream.finish(judge, &mut out);
    out
}

/// The bound on what an interceptor may write for `input` bytes: a blocked call's text and
/// the events that end a stream are small, so output is at most a few times the input.
pub fn assert_bounded_output(input_len: usize, output: &[u8]) {
    let bound = 8 * input_len + 16 * 1024;
    assert!(
        output.len() <= bound,
        "{} bytes of input made {} bytes of output (bound {bound})",
        input_len,
        output.len()
    );
}

/// Runs a stream whole and in pieces, checks both agree and are bounded; returns the output
/// and the judge of the run in pieces.
pub fn run_both(
    make: impl Fn() -> agentsh::llm::Stream,
    stream: &[u8],
    cuts: &Cuts,
) -> (Vec<u8>, FuzzJudge) {
    let mut whole_judge = FuzzJudge::default();
    let whole = run_stream(make(), &[stream], &mut whole_judge);
    let mut judge = FuzzJudge::default();
    let pieces = cuts.pieces(stream);
    let split = run_stream(make(), &pieces, &mut judge);
    assert!(
        whole == split,
        "the output depends on where the input was split ({:?})\nwhole: {}\nsplit: {}",
        pieces.iter().map(|p| p.len()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&whole),
        String::from_utf8_lossy(&split)
    );
    assert_bounded_output(stream.len(), &split);
    if std::env::var_os("FUZZ_STATS").is_some() {
        // How often the inputs reach the judge (scripts: FUZZ_STATS=1 TARGET CORPUS -runs=0).
        eprintln!(
            "fuzz-stats: allowed={} blocked={} out={}",
            judge.allowed.len(),
            judge.blocked.len(),
            split.len()
        );
    }
    (split, judge)
}

// ---------------------------------------------------------------------------------------------
// An SSE reader written from the WHATWG specification, independent of agentsh's.

/// One dispatched event as an `EventSource` (or an SDK's SSE decoder) sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientEvent {
    pub name: Option<String>,
    pub data: String,
}

/// Reads a whole stream as a client does. Lines end at CRLF, LF or CR; a leading BOM is
/// dropped; `data` lines are joined with `\n`; an event is dispatched at a blank line if it
/// has data. Conservatively, the unterminated last event is dispatched too (a lenient client
/// might), so a check over these events over-approximates what any client acts on.
pub fn client_events(bytes: &[u8]) -> Vec<ClientEvent> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut events = Vec::new();
    let mut name: Option<String> = None;
    let mut data: Option<String> = None;
    let mut dispatch = |name: &mut Option<String>, data: &mut Option<String>| {
        if let Some(d) = data.take() {
            events.push(ClientEvent {
                name: name.take(),
                data: d,
            });
        }
        *name = None;
    };
    let mut rest = text;
    loop {
        let (line, next) = match rest.find(['\r', '\n']) {
            Some(at) => {
                let skip = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
                (&rest[..at], Some(&rest[at + skip..]))
            }
            None => (rest, None),
        };
        if line.is_empty() {
            if next.is_some() {
                dispatch(&mut name, &mut data);
            }
        } else if !line.starts_with(':') {
            let (field, value) = match line.find(':') {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(' ').unwrap_or(value))
                }
                None => (line, ""),
            };
            match field {
                "event" => name = Some(value.to_owned()),
                "data" => match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(value);
                    }
                    None => data = Some(value.to_owned()),
                },
                _ => {}
            }
        }
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    dispatch(&mut name, &mut data);
    events
}

/// The JSON values of a stream's events (events whose data is not JSON are skipped: a client
/// fails on them).
pub fn client_event_values(bytes: &[u8]) -> Vec<(Option<String>, Value)> {
    client_events(bytes)
        .into_iter()
        .filter_map(|event| {
            serde_json::from_str::<Value>(&event.data)
                .ok()
                .map(|value| (event.name, value))
        })
        .collect()
}

/// The elements of a streamed JSON array (or a bare object) as a client reading it
/// incrementally gets them: each complete value, up to the first that does not parse.
pub fn client_array_elements(bytes: &[u8]) -> Vec<Value> {
    let mut values = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b' ' | b'\t' | b'\r' | b'\n' | b'[' | b',' | b']' => at += 1,
            _ => {
                let mut stream =
                    serde_json::Deserializer::from_slice(&bytes[at..]).into_iter::<Value>();
                match stream.next() {
                    Some(Ok(value)) => {
                        at += stream.byte_offset();
                        values.push(value);
                    }
                    _ => break,
                }
            }
        }
    }
    values
}

/// Whether the output of an interceptor is UTF-8, as every event it forwards was checked to be.
pub fn assert_utf8(output: &[u8]) {
    if let Err(e) = std::str::from_utf8(output) {
        panic!(
            "the output is not UTF-8 ({e}): {}",
            String::from_utf8_lossy(output)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The two ways a target reads its input.

/// How a dialect target reads its input. The first byte picks: below 0x80, the rest is raw
/// bytes after a three-byte header (limits, cut seed, number of cuts), so a seed is just a
/// stream from a test with `\0\0\0\0` before it; from 0x80 on, the rest is read with
/// `arbitrary` into a structured stream.
pub enum Input<'a> {
    Raw {
        /// The low bits of the first byte: which reading of the bytes (stream, body, ...).
        kind: u8,
        limits: agentsh::llm::Limits,
        cuts: Cuts,
        bytes: &'a [u8],
    },
    Structured(&'a [u8]),
}

impl<'a> Input<'a> {
    pub fn of(data: &'a [u8]) -> Option<Self> {
        let (&first, rest) = data.split_first()?;
        if first >= 0x80 {
            return Some(Input::Structured(rest));
        }
        let [limits, seed, count, bytes @ ..] = rest else {
            return None;
        };
        let limits = if *limits == 0 {
            agentsh::llm::Limits::default()
        } else {
            SmallLimits {
                event: u16::from(*limits) * 61,
                held: u16::from(*limits) * 97,
                tiny: limits % 2 == 1,
            }
            .limits()
        };
        // A small linear congruential sequence: cut positions spread over the stream.
        let mut state = u32::from(*seed).wrapping_mul(2_654_435_761).wrapping_add(1);
        let cuts = (0..count % 16)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (state >> 16) as u16
            })
            .collect();
        Some(Input::Raw {
            kind: first & 0x0f,
            limits,
            cuts: Cuts(cuts),
            bytes,
        })
    }
}
