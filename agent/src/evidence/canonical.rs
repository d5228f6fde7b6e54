//! The one byte form every hash and signature is computed over.
//!
//! Records travel: the journal writes them one way, redb keeps them, an export may pretty-print
//! them or reorder their keys. Hashing the bytes as found would make every such copy "edited".
//! So hashes go over a canonical form instead: object keys sorted by their UTF-8 bytes, at every
//! depth; no whitespace; strings with serde_json's (and JSON's) minimal escaping; integers in
//! plain decimal, exactly (no rounding through a double, so editing a large integer shows);
//! other numbers as ECMAScript `Number.prototype.toString` prints the double (`1`, `0.1`,
//! `1e+300`, `-0` as `0`). The writer is `mcp::canonical`'s (JCS) in its exact-integer form.
//!
//! Why not serde_json's own float printing: it is not fixed. serde_json 1.0.149 moved from ryu
//! to zmij and `1e300` became `1e+300`; trails sealed before an upgrade would then fail to
//! verify. The ECMAScript rule is a specification, and also makes `1.0` and `1` hash alike, so
//! an exporter that drops the `.0` does not break a record either.

use serde_json::{Map, Value};

use crate::mcp::canonical::{Form, object_to_vec_in, to_vec_in};

/// The canonical bytes of `v` (see the module documentation).
pub fn canonical_json(v: &Value) -> Vec<u8> {
    to_vec_in(Form::ExactIntegers, v)
}

/// The canonical bytes of an object, without building a [`Value`] around it.
pub(crate) fn canonical_object(map: &Map<String, Value>) -> Vec<u8> {
    object_to_vec_in(Form::ExactIntegers, map)
}
