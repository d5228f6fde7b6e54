//! The one byte form every hash and signature is computed over.
//!
//! Records travel: the journal writes them one way, redb keeps them, an export may pretty-print
//! them or reorder their keys. Hashing the bytes as found would make every such copy "edited".
//! So hashes go over a canonical form instead: object keys sorted by their UTF-8 bytes, at every
//! depth; no whitespace; strings with serde_json's (and JSON's) minimal escaping; integers in
//! plain decimal, exactly (no rounding through a double, so editing a large integer shows);
//! other numbers as ECMAScript `Number.prototype.toString` prints the double (`1`, `0.1`,
//! `1e+300`, `-0` as `0`), the rule `mcp::canonical` (JCS) uses too.
//!
//! Why not serde_json's own float printing: it is not fixed. serde_json 1.0.149 moved from ryu
//! to zmij and `1e300` became `1e+300`; trails sealed before an upgrade would then fail to
//! verify. The ECMAScript rule is a specification, and also makes `1.0` and `1` hash alike, so
//! an exporter that drops the `.0` does not break a record either.

use serde_json::{Map, Number, Value};

/// The canonical bytes of `v` (see the module documentation).
pub fn canonical_json(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_value(v, &mut out);
    out
}

/// The canonical bytes of an object, without building a [`Value`] around it.
pub(crate) fn canonical_object(map: &Map<String, Value>) -> Vec<u8> {
    let mut out = Vec::new();
    write_object(map, &mut out);
    out
}

fn write_value(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, out),
    }
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    // The workspace builds serde_json with `preserve_order`: maps keep insertion order, which
    // is exactly what must not matter here. `str` ordering is byte ordering.
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(key, out);
        out.push(b':');
        write_value(value, out);
    }
    out.push(b'}');
}

fn write_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else {
        // Without `arbitrary_precision` every other number is a finite f64.
        let f = n.as_f64().unwrap_or(0.0);
        out.extend_from_slice(ryu_js::Buffer::new().format(f).as_bytes());
    }
}

/// serde_json's escaping: `"` and `\`, the short forms for \b \t \n \f \r, `\u00xx` (lower-case
/// hex) for the other control characters, everything else (non-ASCII included) as UTF-8.
fn write_string(s: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            0x09 => b't',
            0x0a => b'n',
            0x0c => b'f',
            0x0d => b'r',
            0x00..=0x1f => b'u',
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.push(b'\\');
        out.push(short);
        if short == b'u' {
            out.extend_from_slice(b"00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0f)]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}
