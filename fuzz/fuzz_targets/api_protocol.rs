//! The control-socket protocol (`agentsh::api::protocol`), on any line a peer of agentshd
//! sends (a shim, agentshctl, any local process) and any line a client reads back: requests,
//! their arguments by operation, responses, notices. Nothing panics, and every message that
//! reads is written back to a line that reads the same (serialise, read, serialise: equal).
#![no_main]

use agentsh::api::protocol::*;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// Reads `text` as `T`; if it reads, it must survive a round trip unchanged.
fn round_trip<T: Serialize + DeserializeOwned>(text: &str) {
    let Ok(value) = serde_json::from_str::<T>(text) else {
        return;
    };
    let first = serde_json::to_string(&value).expect("a read message writes");
    let again: T = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("{first} does not read back as what it was written from: {e}"));
    let second = serde_json::to_string(&again).expect("a read message writes");
    assert_eq!(first, second, "a message changes on a round trip");
}

fn args(op: &str, text: &str) {
    match op {
        ops::HELLO => round_trip::<Hello>(text),
        ops::SERVER_SETUP => round_trip::<ServerSetupArgs>(text),
        ops::BINARY => round_trip::<BinaryArgs>(text),
        ops::TOOLS_LISTED => round_trip::<ToolsListedArgs>(text),
        ops::TOOL_CALL => round_trip::<ToolCallArgs>(text),
        ops::OUTPUT => round_trip::<OutputArgs>(text),
        ops::SERVER_REQUEST => round_trip::<ServerRequestArgs>(text),
        ops::RECORD => round_trip::<RecordArgs>(text),
        ops::WATCH => round_trip::<ServerArgs>(text),
        ops::SESSION_CREATE => round_trip::<SessionCreateArgs>(text),
        ops::SESSION_LIST => round_trip::<SessionListArgs>(text),
        ops::SESSION_REPORT => round_trip::<SessionArgs>(text),
        ops::EVENTS => round_trip::<EventsArgs>(text),
        ops::EVENTS_PAGE => round_trip::<EventsPageArgs>(text),
        ops::PINS_LIST | ops::PINS_DIFF | ops::PINS_TRUST | ops::PINS_RESET => {
            round_trip::<PinsArgs>(text)
        }
        ops::APPROVE => round_trip::<ApproveArgs>(text),
        ops::POLICY_GENERATE => round_trip::<SessionArgs>(text),
        ops::POLICY_RELOAD => round_trip::<PolicySource>(text),
        _ => {}
    }
}

/// Every answer a client reads.
fn answers(text: &str) {
    round_trip::<ApiError>(text);
    round_trip::<Notice>(text);
    round_trip::<Hello>(text);
    round_trip::<SessionCreated>(text);
    round_trip::<SessionReport>(text);
    round_trip::<Vec<PinEntry>>(text);
    round_trip::<PinDiff>(text);
    round_trip::<Approved>(text);
    round_trip::<Generated>(text);
    round_trip::<Reloaded>(text);
}

const OPS: [&str; 21] = [
    ops::HELLO,
    ops::SERVER_SETUP,
    ops::BINARY,
    ops::TOOLS_LISTED,
    ops::TOOL_CALL,
    ops::OUTPUT,
    ops::SERVER_REQUEST,
    ops::RECORD,
    ops::WATCH,
    ops::SESSION_CREATE,
    ops::SESSION_LIST,
    ops::SESSION_REPORT,
    ops::EVENTS,
    ops::EVENTS_PAGE,
    ops::PINS_LIST,
    ops::PINS_DIFF,
    ops::PINS_TRUST,
    ops::PINS_RESET,
    ops::APPROVE,
    ops::POLICY_GENERATE,
    ops::POLICY_RELOAD,
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match selector % 3 {
        // A whole request line, as the daemon reads it.
        0 => {
            if let Ok(request) = serde_json::from_str::<RawRequest>(text) {
                let args_text = request.args.map_or("null", RawValue::get);
                args(&request.op, args_text);
                let line = serde_json::to_string(&Request {
                    v: request.v,
                    id: request.id,
                    op: &request.op,
                    args: &request.args,
                })
                .expect("a request writes");
                let again: RawRequest =
                    serde_json::from_str(&line).expect("a written request reads");
                assert_eq!(
                    (again.v, again.id, &again.op),
                    (request.v, request.id, &request.op)
                );
            }
        }
        // The arguments of one operation.
        1 => args(OPS[usize::from(selector / 3) % OPS.len()], text),
        // A response line and what it carries, as a client reads them.
        _ => {
            if let Ok(response) = serde_json::from_str::<RawResponse>(text)
                && let Some(ok) = response.ok
            {
                answers(ok.get());
            }
            answers(text);
        }
    }
});
