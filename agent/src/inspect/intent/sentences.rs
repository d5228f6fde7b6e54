//! Sentence boundaries for the intent signals: after `.`, `!` or `?` followed by a space or a
//! capital letter (serialised text often drops the space), at line breaks, around tags (a role
//! tag is its own sentence), and before `##(label)` and `TODO:` labels, which start a new
//! directive wherever they stand.

/// A byte range of the text, never empty and never only whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sentence {
    pub start: usize,
    pub end: usize,
}

pub(crate) fn split(text: &str) -> Vec<Sentence> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut start = 0;
    let push = |s: usize, e: usize, out: &mut Vec<Sentence>| {
        if b[s..e].iter().any(|c| !c.is_ascii_whitespace()) {
            out.push(Sentence { start: s, end: e });
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' | b'!' | b'?' => {
                let next = b.get(i + 1).copied();
                if next.is_some_and(|c| c.is_ascii_whitespace()) {
                    push(start, i + 1, &mut out);
                    i += 1;
                    while i < b.len() && b[i].is_ascii_whitespace() {
                        i += 1;
                    }
                    start = i;
                    continue;
                }
                if next.is_some_and(|c| c.is_ascii_uppercase()) {
                    push(start, i + 1, &mut out);
                    start = i + 1;
                }
            }
            b'\n' => {
                push(start, i, &mut out);
                while i < b.len() && b[i] == b'\n' {
                    i += 1;
                }
                start = i;
                continue;
            }
            b'<' if opens_tag(&b[i..]) => {
                push(start, i, &mut out);
                start = i;
            }
            b'>' => {
                push(start, i + 1, &mut out);
                start = i + 1;
            }
            b'#' if (i == 0 || b[i - 1] != b'#') && opens_label(&b[i..]) => {
                push(start, i, &mut out);
                start = i;
            }
            b'T' if b[i..].starts_with(b"TODO:") && (i == 0 || !is_word(b[i - 1])) => {
                push(start, i, &mut out);
                start = i;
            }
            _ => {}
        }
        i += 1;
    }
    push(start, b.len(), &mut out);
    out
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `<name ...>` with a lower-case name and the `>` within 60 bytes.
fn opens_tag(b: &[u8]) -> bool {
    let mut i = 1;
    let skip_space = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_space(&mut i);
    if b.get(i) == Some(&b'/') {
        i += 1;
    }
    skip_space(&mut i);
    let name = i;
    while i < b.len() && (b[i].is_ascii_lowercase() || b[i] == b'_') {
        i += 1;
    }
    if i == name {
        return false;
    }
    b[i..(i + 61).min(b.len())].contains(&b'>')
}

/// `##(` or `## (`: a label such as `###(system_message)`.
fn opens_label(b: &[u8]) -> bool {
    let hashes = b.iter().take_while(|c| **c == b'#').count();
    if hashes < 2 {
        return false;
    }
    let rest = &b[hashes..];
    let spaces = rest.iter().take_while(|c| c.is_ascii_whitespace()).count();
    rest.get(spaces) == Some(&b'(')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(t: &str) -> Vec<&str> {
        split(t).iter().map(|s| &t[s.start..s.end]).collect()
    }

    #[test]
    fn splits_at_punctuation_lines_tags_and_labels() {
        assert_eq!(
            texts(
                "One. Two!Three\n\nfour <information>Five.</information> x ###(system_message) go TODO: send"
            ),
            [
                "One.",
                "Two!",
                "Three",
                "four ",
                "<information>",
                "Five.",
                "</information>",
                " x ",
                "###(system_message) go ",
                "TODO: send"
            ]
        );
    }

    #[test]
    fn keeps_decimals_and_upper_case_tags_inside_a_sentence() {
        assert_eq!(
            texts("Costs 3.5 dollars. <B>x"),
            ["Costs 3.5 dollars.", "<B>", "x"]
        );
        assert!(split("  \n ").is_empty());
    }
}
