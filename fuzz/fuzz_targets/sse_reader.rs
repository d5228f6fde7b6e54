//! The incremental readers of streamed responses: the SSE reader (`llm::sse`) and Google's
//! streamed JSON array reader (`llm::json_array`). Fed in pieces split anywhere, each gives
//! exactly what it gives when fed at once; what it yields is the input's own bytes; and it
//! agrees with an independent reading (the WHATWG SSE algorithm, serde_json for the array).
#![no_main]

use agentsh::llm::json_array::{self, Piece};
use agentsh::llm::sse;
use agentsh_fuzz::{Input, client_events};
use libfuzzer_sys::fuzz_target;

fn read_sse(pieces: &[&[u8]], max: usize) -> (Vec<sse::Event>, Option<sse::SseError>) {
    let mut reader = sse::Reader::new(max);
    let mut events = Vec::new();
    for piece in pieces {
        if let Err(e) = reader.push(piece, &mut events) {
            return (events, Some(e));
        }
        assert!(
            reader.pending_len() <= max + 1,
            "the reader holds past its bound"
        );
    }
    let end = reader.finish(&mut events).err();
    (events, end)
}

fn check_sse(bytes: &[u8], pieces: &[&[u8]], max: usize) {
    let whole = read_sse(&[bytes], max);
    let split = read_sse(pieces, max);
    assert_eq!(
        whole, split,
        "the SSE reader depends on where its input was split"
    );
    let (events, error) = whole;
    let raw: Vec<u8> = events.iter().flat_map(|e| e.raw().to_vec()).collect();
    assert!(
        bytes.starts_with(&raw),
        "events are not the input's own bytes"
    );
    if error.is_some() {
        return;
    }
    assert_eq!(
        raw, bytes,
        "a stream read without error is its events, byte for byte"
    );
    // The events a client dispatches (those with data), as the WHATWG algorithm reads them.
    let norm = |name: Option<&str>| name.filter(|n| !n.is_empty()).map(str::to_owned);
    let ours: Vec<(Option<String>, String)> = events
        .iter()
        .filter(|e| !e.data().is_empty())
        .map(|e| (norm(e.name()), e.data().to_owned()))
        .collect();
    let theirs: Vec<(Option<String>, String)> = client_events(bytes)
        .into_iter()
        .filter(|e| !e.data.is_empty())
        .map(|e| (norm(e.name.as_deref()), e.data))
        .collect();
    assert_eq!(
        ours, theirs,
        "agentsh's SSE reader and the WHATWG reading disagree"
    );
}

fn read_array(pieces: &[&[u8]], max: usize) -> (Vec<Piece>, Option<json_array::ArrayError>) {
    let mut reader = json_array::Reader::new(max);
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = reader.push(piece, &mut out) {
            return (merge(out), Some(e));
        }
    }
    let end = reader.finish().err();
    (merge(out), end)
}

/// Adjacent `Between` pieces joined: where they are cut depends on the pushes.
fn merge(pieces: Vec<Piece>) -> Vec<Piece> {
    let mut merged: Vec<Piece> = Vec::new();
    for piece in pieces {
        match (merged.last_mut(), piece) {
            (Some(Piece::Between(last)), Piece::Between(more)) => last.extend(more),
            (_, piece) => merged.push(piece),
        }
    }
    merged
}

fn check_array(bytes: &[u8], pieces: &[&[u8]], max: usize) {
    let whole = read_array(&[bytes], max);
    let split = read_array(pieces, max);
    // An error's position and a Between cut short by it may differ; the elements may not.
    let elements = |r: &(Vec<Piece>, Option<json_array::ArrayError>)| -> Vec<String> {
        r.0.iter()
            .filter_map(|p| match p {
                Piece::Element(e) => Some(e.clone()),
                Piece::Between(_) => None,
            })
            .collect()
    };
    assert_eq!(
        elements(&whole),
        elements(&split),
        "the array reader depends on the split"
    );
    assert_eq!(
        whole.1.is_some(),
        split.1.is_some(),
        "an error depends on the split"
    );
    if whole.1.is_none() {
        assert_eq!(whole.0, split.0, "the array reader depends on the split");
        let joined: Vec<u8> = whole
            .0
            .iter()
            .flat_map(|p| match p {
                Piece::Between(b) => b.clone(),
                Piece::Element(e) => e.as_bytes().to_vec(),
            })
            .collect();
        assert_eq!(
            joined, bytes,
            "a stream read without error is its pieces, byte for byte"
        );
    }
    for element in elements(&whole) {
        // Brackets are only counted (`{…]` is an element too): whether it is JSON is for the
        // reader of the element to find out.
        assert!(
            element.starts_with('{') && element.len() <= max,
            "an element is not one bounded object: {element:?}"
        );
    }
    // A real JSON array of objects (or one object) within the bound reads as its elements.
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
        let expected: Option<Vec<serde_json::Value>> = match value {
            serde_json::Value::Array(items) if items.iter().all(|i| i.is_object()) => Some(items),
            object @ serde_json::Value::Object(_) => Some(vec![object]),
            _ => None,
        };
        if let Some(expected) = expected {
            match &whole.1 {
                Some(json_array::ArrayError::TooLarge { .. }) => {}
                Some(other) => panic!("a JSON array of objects is refused: {other}"),
                None => {
                    let got: Vec<serde_json::Value> = elements(&whole)
                        .iter()
                        .map(|e| {
                            serde_json::from_str(e).expect("an element of a JSON array parses")
                        })
                        .collect();
                    assert_eq!(
                        got, expected,
                        "the array reader's elements differ from serde_json's"
                    );
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(Input::Raw {
        kind,
        limits,
        cuts,
        bytes,
    }) = Input::of(data)
    else {
        return;
    };
    let pieces = cuts.pieces(bytes);
    let max = limits.max_event_bytes;
    if kind % 2 == 0 {
        check_sse(bytes, &pieces, max);
    } else {
        check_array(bytes, &pieces, max);
    }
});
