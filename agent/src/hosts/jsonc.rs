//! JSON with comments and trailing commas, as VS Code and Gemini CLI accept in settings files:
//! comments and trailing commas are blanked out (offsets stay the same), then the text is
//! plain JSON.

/// `text` without `//` and `/* */` comments outside strings, and without commas that only
/// precede a `}` or `]`.
pub fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    // Where the last comma outside strings is, while only whitespace or comments follow it.
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                pending_comma = None;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
                for byte in &mut out[i..end] {
                    if *byte != b'\n' {
                        *byte = b' ';
                    }
                }
                i = end;
                continue;
            }
            b',' => pending_comma = Some(i),
            b'}' | b']' => {
                if let Some(at) = pending_comma.take() {
                    out[at] = b' ';
                }
            }
            b if b.is_ascii_whitespace() => {}
            _ => pending_comma = None,
        }
        i += 1;
    }
    // Only ASCII bytes outside strings were replaced by spaces: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas() {
        let text = "{\n  // the servers\n  \"a\": \"http://x//y\", /* c */\n  \"b\": [1, 2,],\n}\n";
        let value: serde_json::Value = serde_json::from_str(&strip(text)).unwrap();
        assert_eq!(value["a"], "http://x//y");
        assert_eq!(value["b"], serde_json::json!([1, 2]));
        assert_eq!(strip(r#"{"s": "a\"//b"}"#), r#"{"s": "a\"//b"}"#);
        // Line numbers are kept for error messages.
        assert_eq!(strip("/* x\ny */{}").lines().count(), 2);
    }
}
