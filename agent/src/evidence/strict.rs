//! Reading records for verification: JSON that means one thing only.
//!
//! serde_json keeps the last of two equal keys in an object. A record with `"action": "block"`
//! put in front of its own `"action": "allow"` hashes as the original (the first is dropped),
//! yet a reader that keeps the first key (jq's `--stream`, some log tools) sees `block`. A
//! record that reads two ways is not the record that was signed: it is refused as unreadable.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses one record; an object anywhere in it with a key twice is an error naming the key.
pub fn parse_record(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A `Value` seed that refuses duplicate keys at every depth.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue)?;
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!(
                    "the key {key:?} twice in one object (readers disagree on which counts)"
                )));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_serde_json_parses() {
        let text =
            r#"{"a": [1, -2, 3.5, "x\u00e9", null, true, {"b": {}}], "c": 18446744073709551615}"#;
        assert_eq!(
            parse_record(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
    }

    #[test]
    fn refuses_a_key_twice_at_any_depth() {
        for text in [
            r#"{"action": "block", "action": "allow"}"#,
            r#"{"details": {"n": 1, "n": 2}}"#,
            r#"[{"a": 1, "a": 1}]"#,
        ] {
            let err = parse_record(text.as_bytes()).unwrap_err();
            assert!(err.to_string().contains("twice"), "{text}: {err}");
        }
        assert!(
            parse_record(br#"{"a": 1} {"b": 2}"#).is_err(),
            "trailing data"
        );
    }
}
