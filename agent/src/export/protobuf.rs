//! The protobuf wire format, as much as OTLP's logs messages need: a writer for the request
//! and a field walker for the response. Hand-written because the messages are few and fixed,
//! and generated code would bring a build-time protoc or a dozen crates for them.

/// Wire types (<https://protobuf.dev/programming-guides/encoding/#structure>).
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

/// Appends fields to a message. Fields at their default value are left out, as proto3 does.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            // Seven bits at a time, low first, the high bit saying "more".
            self.buf.push((value as u8 & 0x7f) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    pub fn uint64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, VARINT);
            self.varint(value);
        }
    }

    /// int64 and enums: negative values take ten bytes (two's complement), as protobuf says.
    pub fn int64(&mut self, field: u32, value: i64) {
        self.uint64(field, value as u64);
    }

    /// A oneof member: written even at its default, which is how a reader knows it is set.
    pub fn oneof_int64(&mut self, field: u32, value: i64) {
        self.key(field, VARINT);
        self.varint(value as u64);
    }

    /// A oneof member: written even when empty.
    pub fn oneof_string(&mut self, field: u32, value: &str) {
        self.bytes_field(field, value.as_bytes());
    }

    pub fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.key(field, FIXED64);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    pub fn string(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.bytes_field(field, value.as_bytes());
        }
    }

    fn bytes_field(&mut self, field: u32, value: &[u8]) {
        self.key(field, LEN);
        self.varint(value.len() as u64);
        self.buf.extend_from_slice(value);
    }

    /// An embedded message, written by `fill`. Always present, even when empty: presence
    /// matters for message fields (an `AnyValue` holding "" is not an absent body).
    pub fn message(&mut self, field: u32, fill: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        fill(&mut inner);
        self.bytes_field(field, &inner.buf);
    }
}

/// A field's value as read off the wire.
#[derive(Debug, PartialEq, Eq)]
pub enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Len(&'a [u8]),
    Fixed32(u32),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed protobuf at byte {at}: {what}")]
pub struct DecodeError {
    pub at: usize,
    pub what: &'static str,
}

/// The fields of one message, in wire order; unknown ones are the caller's to skip.
pub struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    fn fail<T>(&self, what: &'static str) -> Option<Result<T, DecodeError>> {
        Some(Err(DecodeError { at: self.at, what }))
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.buf.get(self.at) else {
                return Err(DecodeError {
                    at: self.at,
                    what: "a varint runs past the end",
                });
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError {
            at: self.at,
            what: "a varint longer than ten bytes",
        })
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(DecodeError {
                at: self.at,
                what: "a field runs past the end",
            })?;
        let bytes = &self.buf[self.at..end];
        self.at = end;
        Ok(bytes)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Field<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let key = match self.varint() {
            Ok(key) => key,
            Err(err) => return Some(Err(err)),
        };
        let Ok(field) = u32::try_from(key >> 3) else {
            return self.fail("a field number out of range");
        };
        let value = match (key & 7) as u8 {
            VARINT => self.varint().map(Field::Varint),
            FIXED64 => self
                .take(8)
                .map(|b| Field::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or_default()))),
            LEN => self
                .varint()
                .and_then(|n| {
                    usize::try_from(n).map_err(|_| DecodeError {
                        at: self.at,
                        what: "a length out of range",
                    })
                })
                .and_then(|n| self.take(n))
                .map(Field::Len),
            FIXED32 => self
                .take(4)
                .map(|b| Field::Fixed32(u32::from_le_bytes(b.try_into().unwrap_or_default()))),
            _ => return self.fail("a group or an unknown wire type"),
        };
        Some(value.map(|v| (field, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_round_trip() {
        let mut w = Writer::default();
        w.uint64(1, 300);
        w.int64(2, -1);
        w.fixed64(3, 0x0102_0304_0506_0708);
        w.string(4, "hé");
        w.message(5, |inner| inner.uint64(1, 1));
        w.uint64(6, 0); // default: absent
        w.string(7, ""); // default: absent
        w.message(8, |_| {}); // present, empty
        w.oneof_int64(9, 0);
        w.oneof_string(10, "");
        let bytes = w.into_bytes();
        // 300 is 0xac 0x02 after the key 0x08 (field 1, varint).
        assert_eq!(&bytes[..3], &[0x08, 0xac, 0x02]);
        let fields: Vec<_> = Fields::new(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            vec![
                (1, Field::Varint(300)),
                (2, Field::Varint(u64::MAX)),
                (3, Field::Fixed64(0x0102_0304_0506_0708)),
                (4, Field::Len("hé".as_bytes())),
                (5, Field::Len(&[0x08, 0x01])),
                (8, Field::Len(&[])),
                (9, Field::Varint(0)),
                (10, Field::Len(&[])),
            ]
        );
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        let mut w = Writer::default();
        w.string(1, "hello");
        let bytes = w.into_bytes();
        for cut in 1..bytes.len() {
            let result: Result<Vec<_>, _> = Fields::new(&bytes[..cut]).collect();
            assert!(result.is_err(), "cut at {cut}");
        }
        let err = Fields::new(&[0xff; 11]).next().unwrap().unwrap_err();
        assert_eq!(err.what, "a varint longer than ten bytes");
        assert!(Fields::new(&[0x0b]).next().unwrap().is_err()); // wire type 3: a group
    }
}
