//! An incremental reader of a streamed JSON array of objects, the framing Google's
//! `streamGenerateContent` uses without `alt=sse`: `[{…}\r\n,{…}\r\n]`, each element a whole
//! response chunk, written as the model produces it.
//!
//! Bytes go in split anywhere; out come the elements (their exact text) and, in order beside
//! them, the bytes between them (brackets, commas, whitespace), so a stream nothing changes is
//! forwarded byte for byte. A bare object instead of an array is read as one element. An
//! element larger than the bound, bytes that are not part of such an array, or an element that
//! is not UTF-8 are errors, never a partial pass-through.

/// One piece of the stream, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Bytes between elements: `[`, `,`, `]`, whitespace. Forwarded as they are.
    Between(Vec<u8>),
    /// One element's exact text.
    Element(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArrayError {
    #[error("a streamed JSON element grew past {limit} bytes without ending")]
    TooLarge { limit: usize },
    #[error("a streamed JSON element is not UTF-8")]
    NotUtf8,
    #[error("the stream is not a JSON array of objects: unexpected {found:?} at byte {at}")]
    Unexpected { found: char, at: u64 },
    #[error("the stream ended inside the JSON array")]
    Truncated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first `[` (or a bare `{`).
    Start,
    /// Inside the array, where an element may start.
    BeforeElement,
    /// Inside the array, after an element: a `,` or the closing `]`.
    AfterElement,
    /// Inside an element.
    Element,
    /// After the closing `]`, or after a bare object: only whitespace may follow.
    Done,
}

/// The reader. Memory is the element in progress, at most `max_element_bytes`.
#[derive(Debug)]
pub struct Reader {
    state: State,
    /// A bare object, not an array: it ends the stream.
    bare: bool,
    element: Vec<u8>,
    /// Nesting depth inside the element (0 outside it).
    depth: u32,
    in_string: bool,
    escaped: bool,
    max_element_bytes: usize,
    /// Bytes read so far, for error positions.
    offset: u64,
}

impl Reader {
    pub fn new(max_element_bytes: usize) -> Self {
        Self {
            state: State::Start,
            bare: false,
            element: Vec::new(),
            depth: 0,
            in_string: false,
            escaped: false,
            max_element_bytes,
            offset: 0,
        }
    }

    /// Reads `bytes`; the pieces completed are appended to `out`. After an error the reader
    /// reads nothing more.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Piece>) -> Result<(), ArrayError> {
        let mut between_start = 0;
        for (i, &byte) in bytes.iter().enumerate() {
            let at = self.offset + i as u64;
            if self.state == State::Element {
                self.element.push(byte);
                if self.element.len() > self.max_element_bytes {
                    return Err(ArrayError::TooLarge {
                        limit: self.max_element_bytes,
                    });
                }
                if self.element_byte(byte) {
                    let text = String::from_utf8(std::mem::take(&mut self.element))
                        .map_err(|_| ArrayError::NotUtf8)?;
                    out.push(Piece::Element(text));
                    self.state = if self.bare {
                        State::Done
                    } else {
                        State::AfterElement
                    };
                    between_start = i + 1;
                }
                continue;
            }
            let next = match (self.state, byte) {
                (_, b' ' | b'\t' | b'\r' | b'\n') => self.state,
                (State::Start, b'[') => State::BeforeElement,
                (State::Start, b'{') => {
                    self.bare = true;
                    State::Element
                }
                (State::BeforeElement, b'{') => State::Element,
                // `[]`: an empty stream.
                (State::BeforeElement | State::AfterElement, b']') => State::Done,
                (State::AfterElement, b',') => State::BeforeElement,
                _ => {
                    // What came before the byte goes out as it would had the byte come in a
                    // later push: the output does not depend on how the stream was split.
                    if between_start < i {
                        out.push(Piece::Between(bytes[between_start..i].to_vec()));
                    }
                    return Err(ArrayError::Unexpected {
                        found: char::from(byte),
                        at,
                    });
                }
            };
            if next == State::Element {
                if between_start < i {
                    out.push(Piece::Between(bytes[between_start..i].to_vec()));
                }
                self.element.push(byte);
                self.depth = 1;
            }
            self.state = next;
        }
        if self.state != State::Element && between_start < bytes.len() {
            out.push(Piece::Between(bytes[between_start..].to_vec()));
        }
        self.offset += bytes.len() as u64;
        Ok(())
    }

    /// Upstream ended: an error unless the array (or the bare object) was closed.
    pub fn finish(&mut self) -> Result<(), ArrayError> {
        match self.state {
            State::Done => Ok(()),
            State::Start | State::BeforeElement | State::AfterElement | State::Element => {
                Err(ArrayError::Truncated)
            }
        }
    }

    /// Whether the array has been closed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Follows one byte of an element; whether it closed the element.
    fn element_byte(&mut self, byte: u8) -> bool {
        if self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                (false, _) => {}
            }
            return false;
        }
        match byte {
            b'"' => self.in_string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
                return self.depth == 0;
            }
            _ => {}
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = "[{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a ]}\\\" {\"}]}}]}\r\n,\r\n{\"candidates\": []}\r\n]";

    fn read_split(bytes: &[u8], at: usize) -> Result<Vec<Piece>, ArrayError> {
        let mut reader = Reader::new(1 << 20);
        let mut out = Vec::new();
        reader.push(&bytes[..at], &mut out)?;
        reader.push(&bytes[at..], &mut out)?;
        reader.finish()?;
        Ok(out)
    }

    fn joined(pieces: &[Piece]) -> Vec<u8> {
        pieces
            .iter()
            .flat_map(|p| match p {
                Piece::Between(b) => b.clone(),
                Piece::Element(e) => e.as_bytes().to_vec(),
            })
            .collect()
    }

    #[test]
    fn every_split_position_gives_the_same_elements_and_bytes() {
        let bytes = STREAM.as_bytes();
        for at in 0..=bytes.len() {
            let pieces = read_split(bytes, at).unwrap();
            assert_eq!(joined(&pieces), bytes, "split at {at}");
            let elements: Vec<&str> = pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Element(e) => Some(e.as_str()),
                    Piece::Between(_) => None,
                })
                .collect();
            assert_eq!(elements.len(), 2, "split at {at}");
            assert!(elements[0].ends_with("\"}]}}]}"), "{}", elements[0]);
            for element in elements {
                serde_json::from_str::<serde_json::Value>(element).unwrap();
            }
        }
    }

    #[test]
    fn a_bare_object_is_one_element() {
        let pieces = read_split(b" {\"a\": [1]}\n", 3).unwrap();
        assert_eq!(
            pieces,
            [
                Piece::Between(b" ".to_vec()),
                Piece::Element("{\"a\": [1]}".into()),
                Piece::Between(b"\n".to_vec())
            ]
        );
        assert!(
            read_split(b"[]", 1)
                .unwrap()
                .iter()
                .all(|p| matches!(p, Piece::Between(_)))
        );
    }

    #[test]
    fn what_is_not_such_an_array_is_an_error() {
        assert!(matches!(
            read_split(b"[1,2]", 0),
            Err(ArrayError::Unexpected { found: '1', at: 1 })
        ));
        assert!(matches!(
            read_split(b"{} {}", 0),
            Err(ArrayError::Unexpected { found: '{', at: 3 })
        ));
        assert!(matches!(
            read_split(b"[{},{\"a\":1}", 4),
            Err(ArrayError::Truncated)
        ));
        assert!(matches!(read_split(b"[{}", 2), Err(ArrayError::Truncated)));
        let mut reader = Reader::new(8);
        assert!(matches!(
            reader.push(b"[{\"aaaaaaaaaa\":1}]", &mut Vec::new()),
            Err(ArrayError::TooLarge { limit: 8 })
        ));
        let mut reader = Reader::new(64);
        assert!(matches!(
            reader.push(b"[{\"a\":\"\xff\"}]", &mut Vec::new()),
            Err(ArrayError::NotUtf8)
        ));
    }

    #[test]
    fn the_bytes_before_an_unexpected_one_come_out_however_split() {
        // Found by fuzzing (sse_reader, llm_gemini): whole, the space before the bad byte was
        // kept back; split before the bad byte, it went out.
        let bytes = b" \x8d[]";
        for at in 0..=bytes.len() {
            let mut reader = Reader::new(64);
            let mut out = Vec::new();
            let read = reader
                .push(&bytes[..at], &mut out)
                .and_then(|()| reader.push(&bytes[at..], &mut out));
            assert!(matches!(read, Err(ArrayError::Unexpected { at: 1, .. })));
            assert_eq!(joined(&out), b" ", "split at {at}");
        }
    }

    #[test]
    fn a_multibyte_character_split_between_pushes() {
        let text = "[{\"t\":\"é😀\"}]".as_bytes();
        for at in 0..=text.len() {
            let pieces = read_split(text, at).unwrap();
            assert_eq!(joined(&pieces), text);
        }
    }
}
