//! Text normalisation with an offset map back to the original string.
//!
//! Attackers hide words from pattern matchers with zero-width characters ("ig\u{200b}nore"),
//! fullwidth or mathematical letters ("ｉｇｎｏｒｅ"), Cyrillic look-alikes inside Latin words
//! ("reаd_file" with U+0430) and diacritics. The normaliser undoes all of these for matching and
//! records what it undid, so the engine can report the evasion itself.

use unicode_normalization::char::{decompose_compatible, is_combining_mark};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InvisKind {
    /// Zero-width space/joiners, word joiner, BOM, soft hyphen, Hangul fillers...
    ZeroWidth,
    /// Bidi embeddings, overrides and isolates (Trojan Source).
    BidiControl,
    /// LRM / RLM / ALM: legitimate in right-to-left text, suspicious elsewhere.
    BidiMark,
    /// U+E0000 block: invisible ASCII ("ASCII smuggling").
    Tag,
    /// Variation selectors: one after an emoji is normal, long runs smuggle bytes.
    VariationSelector,
}

pub(crate) fn classify_invisible(c: char) -> Option<InvisKind> {
    use InvisKind::*;
    Some(match c {
        '\u{200B}'
        | '\u{200C}'
        | '\u{200D}'
        | '\u{2060}'
        | '\u{FEFF}'
        | '\u{180E}'
        | '\u{00AD}'
        | '\u{034F}'
        | '\u{115F}'
        | '\u{1160}'
        | '\u{3164}'
        | '\u{FFA0}'
        | '\u{17B4}'
        | '\u{17B5}'
        | '\u{2061}'..='\u{2064}'
        | '\u{206A}'..='\u{206F}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{1D173}'..='\u{1D17A}' => ZeroWidth,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => BidiControl,
        '\u{200E}' | '\u{200F}' | '\u{061C}' => BidiMark,
        '\u{E0000}'..='\u{E007F}' => Tag,
        '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}' => VariationSelector,
        _ => return None,
    })
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Invisible {
    /// Byte offset in the original string.
    pub at: usize,
    pub ch: char,
    pub kind: InvisKind,
    /// Sits between two ASCII letters or digits, i.e. splits a word.
    pub splits_word: bool,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Homoglyph {
    pub start: usize,
    pub end: usize,
    /// The whole word is non-Latin look-alikes inside otherwise Latin text.
    pub whole_word: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Normalized {
    /// NFKC, invisibles removed, look-alikes folded, whitespace collapsed; case kept.
    pub text: String,
    /// `text` with ASCII lower-cased (same byte offsets).
    pub lower: String,
    /// For each byte of `text`, the byte offset of its source character in the original.
    map: Vec<u32>,
    pub invisibles: Vec<Invisible>,
    pub homoglyphs: Vec<Homoglyph>,
    /// Fullwidth / mathematical / enclosed letters and digits that NFKC turned into ASCII.
    pub compat_letters: usize,
    pub compat_first: Option<usize>,
    pub ascii_letters: usize,
    pub other_letters: usize,
}

impl Normalized {
    /// Maps a byte range of `text`/`lower` back to a byte range of `orig`.
    pub fn orig_span(&self, orig: &str, start: usize, end: usize) -> (usize, usize) {
        if self.map.is_empty() {
            return (0, 0);
        }
        let start = start.min(self.map.len() - 1);
        let end = end.clamp(start + 1, self.map.len());
        let s = self.map[start] as usize;
        let last = self.map[end - 1] as usize;
        let e = last + orig[last..].chars().next().map_or(0, char::len_utf8);
        (s.min(orig.len()), e.min(orig.len()))
    }
}

/// Strong look-alikes only: letters that render (nearly) identically to a Latin letter.
pub(crate) fn confusable(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic lower
        'а' => 'a',
        'е' | 'ё' | 'ҽ' => 'e',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'у' | 'ү' => 'y',
        'х' => 'x',
        'і' | 'ї' => 'i',
        'ј' => 'j',
        'ѕ' => 's',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'һ' => 'h',
        'ӏ' => 'l',
        'к' => 'k',
        // Cyrillic upper
        'А' => 'A',
        'В' => 'B',
        'Е' | 'Ё' => 'E',
        'К' => 'K',
        'М' => 'M',
        'Н' => 'H',
        'О' => 'O',
        'Р' => 'P',
        'С' => 'C',
        'Т' => 'T',
        'У' | 'Ү' => 'Y',
        'Х' => 'X',
        'І' | 'Ї' => 'I',
        'Ј' => 'J',
        'Ѕ' => 'S',
        'Ԁ' => 'D',
        'Ԛ' => 'Q',
        'Ԝ' => 'W',
        'Ӏ' => 'I',
        'Һ' => 'H',
        // Greek lower
        'α' => 'a',
        'ο' => 'o',
        'ρ' => 'p',
        'ν' => 'v',
        'υ' => 'u',
        'ι' => 'i',
        'κ' => 'k',
        'χ' => 'x',
        'ϲ' => 'c',
        'ϳ' => 'j',
        // Greek upper
        'Α' => 'A',
        'Β' => 'B',
        'Ε' => 'E',
        'Ζ' => 'Z',
        'Η' => 'H',
        'Ι' => 'I',
        'Κ' => 'K',
        'Μ' => 'M',
        'Ν' => 'N',
        'Ο' => 'O',
        'Ρ' => 'P',
        'Τ' => 'T',
        'Υ' => 'Y',
        'Χ' => 'X',
        'Ϲ' => 'C',
        // Armenian and Latin extensions
        'օ' => 'o',
        'ս' => 'u',
        'հ' => 'h',
        'ո' => 'n',
        'ı' => 'i',
        'ȷ' => 'j',
        'ɑ' => 'a',
        'ɡ' => 'g',
        _ => return None,
    })
}

fn is_compat_alnum(c: char) -> bool {
    matches!(c,
        '\u{FF10}'..='\u{FF19}' | '\u{FF21}'..='\u{FF3A}' | '\u{FF41}'..='\u{FF5A}'
        | '\u{1D400}'..='\u{1D7FF}' | '\u{24B6}'..='\u{24E9}' | '\u{1F130}'..='\u{1F189}')
}

fn fold_punct(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{00AB}'
        | '\u{00BB}' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        _ => c,
    }
}

/// Stage 1 output: characters after invisible removal and NFKC, each with its source offset.
struct Unit {
    ch: char,
    orig: u32,
}

/// Normalises `orig`. `identifier` also splits snake_case, kebab-case and camelCase into words
/// (for tool names and property names).
pub(crate) fn normalize(orig: &str, identifier: bool) -> Normalized {
    if orig.is_ascii() {
        return normalize_ascii(orig, identifier);
    }
    let mut n = Normalized::default();
    let mut units: Vec<Unit> = Vec::with_capacity(orig.len());

    for (i, c) in orig.char_indices() {
        let o = i as u32;
        if c.is_ascii() {
            if c.is_ascii_alphabetic() {
                n.ascii_letters += 1;
            }
            units.push(Unit { ch: c, orig: o });
            continue;
        }
        if let Some(kind) = classify_invisible(c) {
            n.invisibles.push(Invisible {
                at: i,
                ch: c,
                kind,
                splits_word: false,
            });
            continue;
        }
        if is_compat_alnum(c) {
            n.compat_letters += 1;
            n.compat_first.get_or_insert(i);
        }
        // Hangul syllables and CJK ideographs need no compatibility decomposition; skipping
        // them keeps CJK descriptions cheap.
        if matches!(c, '\u{AC00}'..='\u{D7A3}' | '\u{4E00}'..='\u{9FFF}') {
            n.other_letters += 1;
            units.push(Unit { ch: c, orig: o });
            continue;
        }
        decompose_compatible(c, |d| {
            // Diacritics on Latin letters are dropped ("ignóre"); other scripts keep theirs.
            if is_combining_mark(d) && units.last().is_some_and(|u| u.ch.is_ascii_alphabetic()) {
                return;
            }
            let d = fold_punct(d);
            if d.is_ascii_alphabetic() {
                n.ascii_letters += 1;
            } else if d.is_alphabetic() {
                n.other_letters += 1;
            }
            units.push(Unit { ch: d, orig: o });
        });
    }

    mark_word_splitters(orig, &mut n.invisibles);
    fold_lookalikes(&mut units, &mut n, orig);
    build_output(&units, identifier, &mut n);
    n
}

/// Fast path for pure-ASCII text (most tool definitions): nothing to strip, decompose or fold,
/// only whitespace collapsing and identifier splitting.
fn normalize_ascii(orig: &str, identifier: bool) -> Normalized {
    let b = orig.as_bytes();
    let mut text = Vec::with_capacity(b.len() + 8);
    let mut map: Vec<u32> = Vec::with_capacity(b.len() + 8);
    let mut ascii_letters = 0;
    let mut pending_ws = false;
    let mut pending_nl = false;
    let mut prev: Option<u8> = None;
    for (i, &c0) in b.iter().enumerate() {
        let mut c = c0;
        if c.is_ascii_alphabetic() {
            ascii_letters += 1;
        }
        if identifier && matches!(c, b'_' | b'-' | b'.' | b'/' | b':') {
            c = b' ';
        }
        if c.is_ascii_whitespace() || c.is_ascii_control() {
            pending_ws = true;
            if c == b'\n' || c == b'\r' {
                pending_nl = true;
            }
            prev = None;
            continue;
        }
        if identifier && let Some(p) = prev {
            let next = b.get(i + 1).copied();
            let camel = (p.is_ascii_lowercase() || p.is_ascii_digit()) && c.is_ascii_uppercase()
                || p.is_ascii_uppercase()
                    && c.is_ascii_uppercase()
                    && next.is_some_and(|n| n.is_ascii_lowercase());
            if camel {
                pending_ws = true;
            }
        }
        if pending_ws && !text.is_empty() {
            text.push(if pending_nl { b'\n' } else { b' ' });
            map.push(i as u32);
        }
        pending_ws = false;
        pending_nl = false;
        text.push(c);
        map.push(i as u32);
        prev = Some(c);
    }
    // Only ASCII bytes were pushed.
    let text = String::from_utf8(text).unwrap_or_default();
    Normalized {
        lower: text.to_ascii_lowercase(),
        text,
        map,
        ascii_letters,
        ..Normalized::default()
    }
}

/// An invisible between two ASCII alphanumerics splits a word: that is an evasion, whereas a
/// ZWJ inside an emoji sequence or a ZWNJ in Persian text is ordinary typography.
fn mark_word_splitters(orig: &str, invisibles: &mut [Invisible]) {
    for inv in invisibles.iter_mut() {
        let before = orig[..inv.at]
            .chars()
            .rev()
            .find(|c| classify_invisible(*c).is_none());
        let after = orig[inv.at..]
            .chars()
            .find(|c| classify_invisible(*c).is_none());
        inv.splits_word = matches!((before, after), (Some(b), Some(a))
            if b.is_ascii_alphanumeric() && a.is_ascii_alphanumeric());
    }
}

fn fold_lookalikes(units: &mut [Unit], n: &mut Normalized, orig: &str) {
    if n.other_letters == 0 {
        return;
    }
    let mostly_latin = n.ascii_letters > 3 * n.other_letters;
    let mut i = 0;
    while i < units.len() {
        if !units[i].ch.is_alphanumeric() {
            i += 1;
            continue;
        }
        let start = i;
        let (mut ascii, mut conf, mut len) = (0usize, 0usize, 0usize);
        while i < units.len() && units[i].ch.is_alphanumeric() {
            let c = units[i].ch;
            if c.is_ascii_alphabetic() {
                ascii += 1;
            } else if confusable(c).is_some() {
                conf += 1;
            }
            len += 1;
            i += 1;
        }
        let mixed = ascii > 0 && conf > 0;
        let whole = ascii == 0 && conf == len && len >= 3 && mostly_latin;
        if mixed || whole {
            for u in &mut units[start..i] {
                if let Some(l) = confusable(u.ch) {
                    u.ch = l;
                }
            }
            let s = units[start].orig as usize;
            let last = units[i - 1].orig as usize;
            let e = last + orig[last..].chars().next().map_or(0, char::len_utf8);
            n.homoglyphs.push(Homoglyph {
                start: s,
                end: e,
                whole_word: whole,
            });
        }
    }
}

fn build_output(units: &[Unit], identifier: bool, n: &mut Normalized) {
    let mut text = String::with_capacity(units.len() + 8);
    let mut map: Vec<u32> = Vec::with_capacity(units.len() + 8);
    let mut pending_ws = false;
    let mut pending_nl = false;
    let mut prev: Option<char> = None;

    for (idx, u) in units.iter().enumerate() {
        let mut c = u.ch;
        if identifier && matches!(c, '_' | '-' | '.' | '/' | ':') {
            c = ' ';
        }
        if c.is_whitespace() || c.is_control() {
            pending_ws = true;
            if c == '\n' || c == '\r' {
                pending_nl = true;
            }
            prev = None;
            continue;
        }
        if identifier && let Some(p) = prev {
            let next = units.get(idx + 1).map(|u| u.ch);
            let camel = (p.is_lowercase() || p.is_ascii_digit()) && c.is_uppercase()
                || p.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase);
            if camel {
                pending_ws = true;
            }
        }
        if pending_ws && !text.is_empty() {
            text.push(if pending_nl { '\n' } else { ' ' });
            map.push(u.orig);
        }
        pending_ws = false;
        pending_nl = false;
        let before = text.len();
        text.push(c);
        map.extend(std::iter::repeat_n(u.orig, text.len() - before));
        prev = Some(c);
    }
    n.lower = text.to_ascii_lowercase();
    n.text = text;
    n.map = map;
}

/// Confusable skeleton for comparing names: NFKC, invisibles dropped, every look-alike folded
/// to Latin, lower-cased, separators removed, and the classic digit/letter pairs merged
/// (`0`/`o`, `1`/`l`/`i`, `rn`/`m`, `vv`/`w`). Two names with the same skeleton look alike.
pub fn skeleton(name: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for c in name.chars() {
        if classify_invisible(c).is_some() {
            continue;
        }
        decompose_compatible(c, |d| {
            if is_combining_mark(d) {
                return;
            }
            let d = confusable(d).unwrap_or(d);
            for l in d.to_lowercase() {
                match l {
                    '_' | '-' | '.' | ' ' | ':' | '/' => {}
                    '0' => s.push('o'),
                    '1' | 'i' | '|' | '!' => s.push('l'),
                    '5' => s.push('s'),
                    _ => s.push(l),
                }
            }
        });
    }
    s.replace("rn", "m").replace("vv", "w")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_zero_width_and_maps_offsets() {
        let orig = "ig\u{200b}nore previous";
        let n = normalize(orig, false);
        assert_eq!(n.lower, "ignore previous");
        assert_eq!(n.invisibles.len(), 1);
        assert!(n.invisibles[0].splits_word);
        let (s, e) = n.orig_span(orig, 0, 6);
        assert_eq!(&orig[s..e], "ig\u{200b}nore");
    }

    #[test]
    fn nfkc_fullwidth_and_diacritics() {
        let n = normalize("ｉｇｎｏｒｅ prévious", false);
        assert_eq!(n.lower, "ignore previous");
        assert_eq!(n.compat_letters, 6);
    }

    #[test]
    fn folds_cyrillic_inside_latin_words_only() {
        let n = normalize("reаd_file", false);
        assert_eq!(n.text, "read_file");
        assert_eq!(n.homoglyphs.len(), 1);
        // A Russian sentence is left alone.
        let n = normalize("Получить данные о погоде", false);
        assert!(n.homoglyphs.is_empty());
        assert_eq!(n.text, "Получить данные о погоде");
    }

    #[test]
    fn ascii_and_general_paths_agree() {
        for s in [
            "Read  the\n\n file\tnow",
            "exfil_dnsTunnel",
            "HTTPServer-probe x",
        ] {
            for ident in [false, true] {
                let a = normalize_ascii(s, ident);
                // Force the general path with a trailing non-ASCII char.
                let g = normalize(&format!("{s}中"), ident);
                assert_eq!(format!("{}中", a.text), g.text, "{s} {ident}");
            }
        }
    }

    #[test]
    fn identifier_split() {
        assert_eq!(normalize("exfil_dnsTunnel", true).lower, "exfil dns tunnel");
        assert_eq!(
            normalize("HTTPServer-probe", true).lower,
            "http server probe"
        );
    }

    #[test]
    fn emoji_zwj_does_not_split_words() {
        let n = normalize("family \u{1F468}\u{200D}\u{1F469} ok", false);
        assert_eq!(n.invisibles.len(), 1);
        assert!(!n.invisibles[0].splits_word);
    }

    #[test]
    fn skeletons() {
        assert_eq!(skeleton("reаd_file"), skeleton("read-file"));
        assert_eq!(skeleton("paypa1"), skeleton("paypal"));
        assert_eq!(skeleton("ｒｅａｄ"), "read");
    }
}
