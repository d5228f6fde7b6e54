//! Compiled rule sets and the per-string scan.

use std::collections::HashSet;

use regex::bytes::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

use super::normalize::{self, InvisKind, Normalized};
use super::rules::{self, Check, Ctx, Sev3};
use super::{Category, DetectorOptions, Finding, InspectError, Mode, Severity, encoded};

/// Strings longer than this are scanned up to this length (and the truncation is reported).
const MAX_SCAN: usize = 8 * 1024 * 1024;
/// Decoded payloads are rescanned this many levels deep (base64 of base64).
const MAX_DEPTH: u8 = 2;
/// Matches of one rule in one string: enough to report, bounded against hostile input.
const MAX_MATCHES_PER_RULE: usize = 8;
/// Encoded runs decoded per string.
const MAX_RUNS: usize = 16;

struct Compiled {
    id: String,
    category: Category,
    sev: Sev3,
    re: Regex,
    cased: bool,
    defensive: bool,
    quoted: bool,
    check: Option<Check>,
}

/// Indexes into `Engine::rules` of the rules used by one mode, split by the text they run on.
struct ModeSet {
    lower: RegexSet,
    lower_idx: Vec<usize>,
    /// Cased rules, then the base64-run and hex-run detectors as the last two patterns (so one
    /// pass over the text also says whether decoding is worth trying).
    cased: RegexSet,
    cased_idx: Vec<usize>,
}

const B64_RUN: &str = r"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{16,}={0,2}";
const HEX_RUN: &str = r"\b(?:[0-9a-fA-F]{2}){10,}\b";

pub(crate) struct Engine {
    rules: Vec<Compiled>,
    modes: [ModeSet; 3],
    custom: Option<(RegexSet, Vec<usize>)>,
    defensive: Regex,
    quote_meta: Regex,
    b64_run: Regex,
    hex_run: Regex,
}

fn builder_limits(b: &mut RegexBuilder) -> &mut RegexBuilder {
    b.unicode(false)
        .size_limit(64 << 20)
        .dfa_size_limit(64 << 20)
}

fn compile_builtin(id: &'static str, pattern: &str) -> Result<Regex, InspectError> {
    builder_limits(&mut RegexBuilder::new(pattern))
        .build()
        .map_err(|e| InspectError::BuiltinRule {
            id,
            source: Box::new(e),
        })
}

/// The set only decides which rules to confirm, so it gets a relaxed superset of each pattern:
/// bounded repetitions `{a,N}` lose their upper bound (`{0,N}` -> `*`, `{1,N}` -> `+`). Bounded repetitions multiply lazy-DFA
/// states (every counter position is a distinct state); unbounded loops do not. The exact
/// pattern still decides the match.
pub(crate) fn relax(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    let mut rest = p;
    while let Some(c) = rest.chars().next() {
        // Escapes (`\{`) stay as they are.
        if c == '\\' {
            let n = rest.chars().take(2).map(char::len_utf8).sum::<usize>();
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        if c == '{'
            && let Some(close) = rest.find('}')
            && let Some((lo, hi)) = rest[1..close].split_once(',')
            && !lo.is_empty()
            && lo.bytes().all(|b| b.is_ascii_digit())
            && !hi.is_empty()
            && hi.bytes().all(|b| b.is_ascii_digit())
        {
            match lo {
                "0" => out.push('*'),
                "1" => out.push('+'),
                _ => out.push_str(&format!("{{{lo},}}")),
            }
            rest = &rest[close + 1..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn build_set(patterns: &[&str], unicode: bool) -> Result<RegexSet, regex::Error> {
    RegexSetBuilder::new(patterns)
        .unicode(unicode)
        .size_limit(256 << 20)
        .dfa_size_limit(256 << 20)
        .build()
}

impl Engine {
    pub(crate) fn new(opts: &DetectorOptions) -> Result<Self, InspectError> {
        let mut compiled = Vec::new();
        for r in rules::builtin() {
            let re = compile_builtin(r.id, &r.pattern)?;
            compiled.push(Compiled {
                id: r.id.to_string(),
                category: r.category,
                sev: r.sev,
                re,
                cased: r.cased,
                defensive: r.defensive,
                quoted: r.quoted,
                check: r.check,
            });
        }
        let builtin_count = compiled.len();

        let modes = [Mode::Definition, Mode::Output, Mode::Arguments].map(|mode| {
            let pick = |cased: bool| {
                compiled
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.cased == cased && c.sev[mode.index()].is_some())
                    .map(|(i, _)| i)
                    .collect::<Vec<_>>()
            };
            (pick(false), pick(true))
        });
        let mut mode_sets = Vec::with_capacity(3);
        for (lower_idx, cased_idx) in modes {
            let pats = |idx: &[usize]| -> Vec<String> {
                idx.iter()
                    .map(|&i| relax(compiled[i].re.as_str()))
                    .collect()
            };
            let lp = pats(&lower_idx);
            let mut cp = pats(&cased_idx);
            cp.push(B64_RUN.to_string());
            cp.push(HEX_RUN.to_string());
            let err = |e| InspectError::BuiltinRule {
                id: "<rule set>",
                source: Box::new(e),
            };
            let lower = build_set(&lp.iter().map(String::as_str).collect::<Vec<_>>(), false)
                .map_err(err)?;
            let cased = build_set(&cp.iter().map(String::as_str).collect::<Vec<_>>(), false)
                .map_err(err)?;
            mode_sets.push(ModeSet {
                lower,
                lower_idx,
                cased,
                cased_idx,
            });
        }
        let modes: [ModeSet; 3] = mode_sets
            .try_into()
            .map_err(|_| InspectError::BuiltinRule {
                id: "<rule set>",
                source: Box::new(regex::Error::Syntax("mode sets".into())),
            })?;

        // Operator patterns: Unicode-aware, case-insensitive, every mode.
        let mut custom_pats = Vec::new();
        for p in &opts.custom_patterns {
            let re = RegexBuilder::new(&p.pattern)
                .case_insensitive(true)
                .size_limit(16 << 20)
                .build()
                .map_err(|e| InspectError::InvalidPattern {
                    id: p.id.clone(),
                    source: Box::new(e),
                })?;
            custom_pats.push(p.pattern.clone());
            compiled.push(Compiled {
                id: p.id.clone(),
                category: Category::parse(&p.category),
                sev: [Some(p.severity); 3],
                re,
                cased: true,
                defensive: false,
                quoted: false,
                check: None,
            });
        }
        let custom = if custom_pats.is_empty() {
            None
        } else {
            let set = RegexSetBuilder::new(&custom_pats)
                .case_insensitive(true)
                .size_limit(64 << 20)
                .build()
                .map_err(|e| InspectError::InvalidPattern {
                    id: "<custom set>".into(),
                    source: Box::new(e),
                })?;
            Some((set, (builtin_count..compiled.len()).collect()))
        };

        Ok(Self {
            rules: compiled,
            modes,
            custom,
            defensive: compile_builtin("<defensive>", rules::DEFENSIVE)?,
            quote_meta: compile_builtin("<quote-meta>", rules::QUOTE_META)?,
            b64_run: compile_builtin("<base64-run>", B64_RUN)?,
            hex_run: compile_builtin("<hex-run>", HEX_RUN)?,
        })
    }

    pub(crate) fn rule_count(&self) -> usize {
        self.rules.len()
    }

    pub(crate) fn scan(&self, text: &str, field: &str, mode: Mode, out: &mut Vec<Finding>) {
        self.scan_inner(text, field, mode, false, 0, out);
    }

    /// Tool and property names: identifiers are split into words ("exfilDnsTunnel" ->
    /// "exfil dns tunnel") and a look-alike letter in a name is high on its own.
    pub(crate) fn scan_name(&self, name: &str, field: &str, out: &mut Vec<Finding>) {
        self.scan_inner(name, field, Mode::Definition, true, 0, out);
    }

    fn scan_inner(
        &self,
        text: &str,
        field: &str,
        mode: Mode,
        identifier: bool,
        depth: u8,
        out: &mut Vec<Finding>,
    ) {
        if text.is_empty() {
            return;
        }
        let text = if text.len() > MAX_SCAN {
            let mut cut = MAX_SCAN;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push(Finding {
                category: Category::EncodedPayload,
                severity: Severity::Low,
                rule: "scan.truncated".into(),
                field: field.to_string(),
                matched: format!("{} bytes", text.len()),
                context: format!("only the first {MAX_SCAN} bytes were scanned"),
                evidence: Vec::new(),
            });
            &text[..cut]
        } else {
            text
        };

        let n = normalize::normalize(text, identifier);
        let mark = out.len();
        self.report_invisibles(text, field, mode, depth, &n, out);
        self.report_homoglyphs(text, field, mode, identifier, &n, out);

        let set = &self.modes[mode.index()];
        let lower_hits = set.lower.matches(n.lower.as_bytes());
        if lower_hits.matched_any() {
            for m in lower_hits.iter() {
                let rule = &self.rules[set.lower_idx[m]];
                self.apply(rule, n.lower.as_bytes(), text, field, mode, &n, out);
            }
        }
        let cased_hits = set.cased.matches(n.text.as_bytes());
        let (mut b64, mut hex) = (false, false);
        if cased_hits.matched_any() {
            for m in cased_hits.iter() {
                match m.checked_sub(set.cased_idx.len()) {
                    None => {
                        let rule = &self.rules[set.cased_idx[m]];
                        self.apply(rule, n.text.as_bytes(), text, field, mode, &n, out);
                    }
                    Some(0) => b64 = true,
                    Some(_) => hex = true,
                }
            }
        }
        if let Some((set, idx)) = &self.custom {
            for m in set.matches(n.text.as_bytes()).iter() {
                let rule = &self.rules[idx[m]];
                self.apply(rule, n.text.as_bytes(), text, field, mode, &n, out);
            }
        }
        if mode == Mode::Arguments {
            seed_phrase(text, field, &n, out);
        }
        if depth < MAX_DEPTH {
            self.scan_encoded(text, field, mode, depth, &n, (b64, hex), out);
        }
        combine(field, mark, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        rule: &Compiled,
        hay: &[u8],
        orig: &str,
        field: &str,
        mode: Mode,
        n: &Normalized,
        out: &mut Vec<Finding>,
    ) {
        let Some(base) = rule.sev[mode.index()] else {
            return;
        };
        let hay_str = std::str::from_utf8(hay).unwrap_or("");
        for m in rule.re.find_iter(hay).take(MAX_MATCHES_PER_RULE) {
            let (s, e) = (m.start(), m.end());
            let Some(sev) = self.adjust(rule, hay_str, s, e, mode, base) else {
                continue;
            };
            let (os, oe) = n.orig_span(orig, s, e);
            out.push(finding(
                &rule.id,
                rule.category.clone(),
                sev,
                field,
                orig,
                os,
                oe,
            ));
        }
    }

    fn adjust(
        &self,
        rule: &Compiled,
        text: &str,
        s: usize,
        e: usize,
        mode: Mode,
        base: Severity,
    ) -> Option<Severity> {
        let mut sev = base;
        if let Some(check) = rule.check {
            sev = check(&Ctx {
                text,
                start: s,
                end: e,
                mode,
                sev,
            })?;
        }
        if rule.defensive && sev > Severity::Low && self.is_defensive(text, s) {
            sev = Severity::Low;
        }
        if rule.quoted && sev > Severity::Low && self.is_quoted_example(text, s, e) {
            sev = Severity::Low;
        }
        Some(sev)
    }

    /// The sentence before the match says it is about finding or preventing the thing.
    fn is_defensive(&self, text: &str, s: usize) -> bool {
        let start = sentence_start(text, s);
        self.defensive.is_match(&text.as_bytes()[start..s])
    }

    /// The match is a quoted example in a discussion: "phrases like 'ignore previous
    /// instructions'". An injection can also be quoted, so only quotes with discussion words
    /// around them count.
    pub(crate) fn is_quoted_example(&self, text: &str, s: usize, e: usize) -> bool {
        let Some((open, close)) = quoted_span(text.as_bytes(), s, e) else {
            return false;
        };
        let b = text.as_bytes();
        let before = &b[open.saturating_sub(200)..open];
        let after = &b[(close + 1).min(b.len())..(close + 120).min(b.len())];
        self.quote_meta.is_match(before) || self.quote_meta.is_match(after)
    }

    fn report_invisibles(
        &self,
        orig: &str,
        field: &str,
        mode: Mode,
        depth: u8,
        n: &Normalized,
        out: &mut Vec<Finding>,
    ) {
        if n.invisibles.is_empty() {
            return;
        }
        // Runs of consecutive tag / variation-selector characters carry hidden text.
        let mut i = 0;
        let inv = &n.invisibles;
        while i < inv.len() {
            let kind = inv[i].kind;
            let mut j = i + 1;
            while j < inv.len()
                && inv[j].kind == kind
                && inv[j].at == inv[j - 1].at + inv[j - 1].ch.len_utf8()
            {
                j += 1;
            }
            let run = &inv[i..j];
            let start = run[0].at;
            let end = run[run.len() - 1].at + run[run.len() - 1].ch.len_utf8();
            match kind {
                InvisKind::Tag => {
                    let flag_emoji = orig[..start].ends_with('\u{1F3F4}') && run.len() <= 8;
                    if !flag_emoji {
                        let hidden = encoded::tag_text(run.iter().map(|x| x.ch));
                        out.push(Finding {
                            category: Category::InvisibleText,
                            severity: Severity::Critical,
                            rule: "invisible.tag_chars".into(),
                            field: field.to_string(),
                            matched: format!(
                                "{} tag characters: {}",
                                run.len(),
                                truncate(&hidden, 120)
                            ),
                            context: context(orig, start, end),
                            evidence: Vec::new(),
                        });
                        if depth < MAX_DEPTH && !hidden.trim().is_empty() {
                            self.scan_inner(
                                &hidden,
                                &format!("{field}#tags"),
                                mode,
                                false,
                                depth + 1,
                                out,
                            );
                        }
                    }
                }
                InvisKind::VariationSelector if run.len() >= 4 => {
                    let hidden = encoded::variation_selector_text(run.iter().map(|x| x.ch));
                    out.push(Finding {
                        category: Category::InvisibleText,
                        severity: Severity::High,
                        rule: "invisible.variation_selectors".into(),
                        field: field.to_string(),
                        matched: format!(
                            "{} variation selectors{}",
                            run.len(),
                            hidden
                                .as_deref()
                                .map(|h| format!(": {}", truncate(h, 120)))
                                .unwrap_or_default()
                        ),
                        context: context(orig, start, end),
                        evidence: Vec::new(),
                    });
                    if let Some(h) = hidden
                        && depth < MAX_DEPTH
                    {
                        self.scan_inner(
                            &h,
                            &format!("{field}#variation-selectors"),
                            mode,
                            false,
                            depth + 1,
                            out,
                        );
                    }
                }
                _ => {}
            }
            i = j;
        }

        let first = |k: InvisKind, pred: &dyn Fn(&normalize::Invisible) -> bool| {
            inv.iter()
                .filter(|x| x.kind == k && pred(x))
                .collect::<Vec<_>>()
        };
        let bidi = first(InvisKind::BidiControl, &|_| true);
        if let Some(x) = bidi.first() {
            out.push(invisible_finding(
                "invisible.bidi_control",
                Severity::High,
                field,
                orig,
                x.at,
                x.ch,
                bidi.len(),
            ));
        }
        let splitters = first(InvisKind::ZeroWidth, &|x| x.splits_word);
        if let Some(x) = splitters.first() {
            out.push(invisible_finding(
                "invisible.zero_width_split",
                Severity::Medium,
                field,
                orig,
                x.at,
                x.ch,
                splitters.len(),
            ));
        } else {
            // Outside words: a leading BOM and joiners in emoji or Persian text are typography.
            let other = first(InvisKind::ZeroWidth, &|x| {
                !(matches!(x.ch, '\u{200C}' | '\u{200D}') || x.at == 0 && x.ch == '\u{FEFF}')
            });
            if let Some(x) = other.first() {
                out.push(invisible_finding(
                    "invisible.zero_width",
                    Severity::Low,
                    field,
                    orig,
                    x.at,
                    x.ch,
                    other.len(),
                ));
            }
        }
        let marks = first(InvisKind::BidiMark, &|_| true);
        if let Some(x) = marks.first() {
            out.push(invisible_finding(
                "invisible.bidi_mark",
                Severity::Low,
                field,
                orig,
                x.at,
                x.ch,
                marks.len(),
            ));
        }
    }

    fn report_homoglyphs(
        &self,
        orig: &str,
        field: &str,
        mode: Mode,
        identifier: bool,
        n: &Normalized,
        out: &mut Vec<Finding>,
    ) {
        for h in n.homoglyphs.iter().take(4) {
            let sev = match (identifier, mode, h.whole_word) {
                (true, _, _) => Severity::High,
                (_, Mode::Arguments, false) => Severity::High,
                (_, Mode::Output, true) => Severity::Low,
                _ => Severity::Medium,
            };
            let rule = if h.whole_word {
                "homoglyph.lookalike_word"
            } else {
                "homoglyph.mixed_script"
            };
            let mut f = finding(rule, Category::Homoglyph, sev, field, orig, h.start, h.end);
            let word = &orig[h.start..h.end];
            let folded: String = word
                .chars()
                .map(|c| normalize::confusable(c).unwrap_or(c))
                .collect();
            let points: Vec<String> = word
                .chars()
                .filter(|c| normalize::confusable(*c).is_some())
                .map(|c| format!("U+{:04X}", c as u32))
                .collect();
            f.matched = format!(
                "{} ({}; reads as \"{folded}\")",
                f.matched,
                points.join(" ")
            );
            out.push(f);
        }
        if n.compat_letters >= 2 {
            // Fullwidth Latin in CJK text is ordinary typesetting; in Latin text, a name or a
            // command it is a way around filters.
            let latin_context = n.ascii_letters > 3 * n.other_letters;
            let sev = if identifier || mode == Mode::Arguments || latin_context {
                Severity::Medium
            } else {
                Severity::Low
            };
            let at = n.compat_first.unwrap_or(0);
            let end = orig[at..]
                .char_indices()
                .find(|(_, c)| c.is_ascii() || c.is_whitespace())
                .map_or(orig.len(), |(i, _)| at + i);
            out.push(finding(
                "homoglyph.compat_letters",
                Category::Homoglyph,
                sev,
                field,
                orig,
                at,
                end.max(at + 1).min(orig.len()),
            ));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn scan_encoded(
        &self,
        orig: &str,
        field: &str,
        mode: Mode,
        depth: u8,
        n: &Normalized,
        (b64, hex): (bool, bool),
        out: &mut Vec<Finding>,
    ) {
        let text = n.text.as_str();
        // One pass for the whole-string encodings' markers.
        let (mut pct, mut ent, mut esc, mut named) = (0usize, 0usize, 0usize, false);
        let tb = text.as_bytes();
        for (i, &c) in tb.iter().enumerate() {
            match c {
                b'%' => pct += 1,
                b'&' => match tb.get(i + 1) {
                    Some(b'#') => ent += 1,
                    Some(b'l') | Some(b'g') => named |= tb.get(i + 2) == Some(&b't'),
                    _ => {}
                },
                b'\\' => esc += usize::from(matches!(tb.get(i + 1), Some(b'u') | Some(b'x'))),
                _ => {}
            }
        }
        if !b64 && !hex && pct < 3 && ent < 2 && !named && esc < 3 {
            return;
        }
        let mut candidates: Vec<(&'static str, usize, usize, String)> = Vec::new();
        let mut seen = HashSet::new();
        let b64_iter = b64.then(|| self.b64_run.find_iter(text.as_bytes()));
        for m in b64_iter.into_iter().flatten().take(MAX_RUNS) {
            let run = &text[m.start()..m.end()];
            if let Some(d) = encoded::base64(run)
                && seen.insert(d.clone())
            {
                candidates.push(("base64", m.start(), m.end(), d));
            }
        }
        let hex_iter = hex.then(|| self.hex_run.find_iter(text.as_bytes()));
        for m in hex_iter.into_iter().flatten().take(MAX_RUNS) {
            let run = &text[m.start()..m.end()];
            if let Some(d) = encoded::hex(run)
                && seen.insert(d.clone())
            {
                candidates.push(("hex", m.start(), m.end(), d));
            }
        }
        let whole = [
            (
                "percent",
                pct >= 3,
                encoded::percent as fn(&str) -> Option<String>,
            ),
            ("html", ent >= 2 || named, encoded::html_entities),
            ("escape", esc >= 3, encoded::escapes),
        ];
        for (name, applies, decode) in whole {
            if applies && let Some(d) = decode(text) {
                candidates.push((name, 0, text.len(), d));
            }
        }

        for (enc, s, e, decoded) in candidates {
            let mut inner = Vec::new();
            let sub_field = format!("{field}#{enc}");
            self.scan_inner(&decoded, &sub_field, mode, false, depth + 1, &mut inner);
            let Some(max) = inner.iter().map(|f| f.severity).max() else {
                continue;
            };
            let (os, oe) = n.orig_span(orig, s, e);
            let mut f = finding(
                &format!("encoded.{enc}"),
                Category::EncodedPayload,
                max,
                field,
                orig,
                os,
                oe,
            );
            f.matched = format!(
                "{} => {}",
                truncate(&f.matched, 60),
                escape_invisible(&truncate(&decoded, 100))
            );
            out.push(f);
            out.extend(inner);
        }
    }
}

/// The quoted span (opening, closing quote offsets) that contains `s..e`, if any. An apostrophe
/// counts as a quote only at a word edge ("don't" is not a quote).
fn quoted_span(b: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    let is_open = |i: usize| match b[i] {
        b'"' | b'`' => true,
        b'\'' => i == 0 || !b[i - 1].is_ascii_alphanumeric(),
        _ => false,
    };
    let is_close = |i: usize, q: u8| {
        b[i] == q && (q != b'\'' || b.get(i + 1).is_none_or(|c| !c.is_ascii_alphanumeric()))
    };
    let floor = s.saturating_sub(200);
    let open = (floor..s).rev().find(|&i| is_open(i))?;
    let q = b[open];
    // Closed before the match: not inside.
    if (open + 1..s).any(|i| is_close(i, q)) {
        return None;
    }
    let close =
        (e.saturating_sub(1).max(open + 1)..(e + 300).min(b.len())).find(|&i| is_close(i, q))?;
    Some((open, close))
}

/// A directive aimed at the model plus a dangerous payload in the same string is the shape of
/// an attack even when each part alone is only worth a look ("IMPORTANT: ... run curl ... |
/// bash", a tool result telling the model to read ~/.ssh).
fn combine(field: &str, mark: usize, out: &mut Vec<Finding>) {
    use Category::*;
    let own = |f: &&Finding| f.field == field;
    let directive = out[mark..].iter().filter(own).any(|f| {
        matches!(
            f.category,
            HiddenInstructions | InstructionTag | ToolManipulation
        ) && f.severity >= Severity::Medium
    });
    // Disguise (look-alike letters, invisible characters) on a dangerous command or a secret:
    // nobody obfuscates `rm -rf` for a good reason.
    let disguised = out[mark..]
        .iter()
        .filter(own)
        .any(|f| matches!(f.category, Homoglyph | InvisibleText) && f.severity >= Severity::Medium);
    if disguised && !directive {
        let payload = out[mark..]
            .iter()
            .filter(own)
            .filter(|f| {
                matches!(f.category, ShellInjection | Destructive | SecretExposure)
                    && f.severity >= Severity::Medium
            })
            .max_by_key(|f| f.severity)
            .cloned();
        if let Some(p) = payload
            && p.severity < Severity::High
        {
            out.push(Finding {
                category: p.category,
                severity: Severity::High,
                rule: "combo.disguised_payload".into(),
                field: field.to_string(),
                matched: p.matched,
                context: p.context,
                evidence: Vec::new(),
            });
        }
        return;
    }
    if !directive {
        return;
    }
    let payload = out[mark..]
        .iter()
        .filter(own)
        .filter(|f| {
            matches!(
                f.category,
                ShellInjection | Exfiltration | CredentialTheft | Destructive | SecretExposure
            )
        })
        .max_by_key(|f| f.severity)
        .cloned();
    if let Some(p) = payload
        && p.severity < Severity::Critical
    {
        out.push(Finding {
            category: p.category,
            severity: Severity::Critical,
            rule: "combo.directive_with_payload".into(),
            field: field.to_string(),
            matched: p.matched,
            context: p.context,
            evidence: Vec::new(),
        });
    }
}

/// Start of the sentence containing byte `s` (at most 200 bytes back).
fn sentence_start(text: &str, s: usize) -> usize {
    let b = text.as_bytes();
    let floor = s.saturating_sub(200);
    let mut i = s;
    while i > floor {
        let c = b[i - 1];
        if c == b'\n'
            || c == b';'
            || ((c == b'.' || c == b'!' || c == b'?') && b.get(i) == Some(&b' '))
        {
            break;
        }
        i -= 1;
    }
    i
}

/// A BIP-39 style mnemonic: a line of exactly 12-24 short lowercase words, no prose glue.
fn seed_phrase(orig: &str, field: &str, n: &Normalized, out: &mut Vec<Finding>) {
    const GLUE: &[&str] = &[
        "the", "and", "for", "with", "this", "that", "you", "are", "was", "from", "have", "not",
        "but", "his", "her", "she", "they", "will", "can", "has", "were", "been", "its", "our",
        "your", "which", "what", "when", "where", "then", "than", "into", "there", "these",
    ];
    let mut offset = 0;
    for line in n.lower.split('\n') {
        let words: Vec<&str> = line.split(' ').filter(|w| !w.is_empty()).collect();
        let shape = matches!(words.len(), 12 | 15 | 18 | 21 | 24)
            && words
                .iter()
                .all(|w| (3..=8).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase()))
            && !words.iter().any(|w| GLUE.contains(w));
        if shape {
            let (os, oe) = n.orig_span(orig, offset, offset + line.len());
            let mut f = finding(
                "secret.seed_phrase",
                Category::SecretExposure,
                Severity::High,
                field,
                orig,
                os,
                oe,
            );
            f.matched = format!("{} words", words.len());
            f.context = String::from("(mnemonic redacted)");
            out.push(f);
        }
        offset += line.len() + 1;
    }
}

pub(crate) fn finding(
    rule: &str,
    category: Category,
    severity: Severity,
    field: &str,
    orig: &str,
    s: usize,
    e: usize,
) -> Finding {
    let s = floor_boundary(orig, s);
    let e = floor_boundary(orig, e).max(s);
    Finding {
        category,
        severity,
        rule: rule.to_string(),
        field: field.to_string(),
        matched: escape_invisible(&truncate(&orig[s..e], 160)),
        context: context(orig, s, e),
        evidence: Vec::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn invisible_finding(
    rule: &str,
    sev: Severity,
    field: &str,
    orig: &str,
    at: usize,
    ch: char,
    count: usize,
) -> Finding {
    Finding {
        category: Category::InvisibleText,
        severity: sev,
        rule: rule.to_string(),
        field: field.to_string(),
        matched: format!("U+{:04X} x{count}", ch as u32),
        context: context(orig, at, at + ch.len_utf8()),
        evidence: Vec::new(),
    }
}

/// The largest char boundary of `s` at or before `i`.
pub(crate) fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn truncate(s: &str, max_chars: usize) -> String {
    let mut out: String = s.chars().take(max_chars).collect();
    if s.chars().nth(max_chars).is_some() {
        out.push_str("...");
    }
    out
}

/// At most `max_chars` of `s`, invisible characters shown.
pub(crate) fn excerpt(s: &str, max_chars: usize) -> String {
    escape_invisible(&truncate(s, max_chars))
}

/// Shows invisible and control characters as `\u{..}` so a reviewer can see them.
fn escape_invisible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if normalize::classify_invisible(c).is_some() || (c.is_control() && c != ' ') {
            if matches!(c, '\n' | '\r' | '\t') {
                out.push(' ');
            } else {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// 50 characters either side of the match.
fn context(orig: &str, s: usize, e: usize) -> String {
    let before: Vec<char> = orig[..s].chars().rev().take(50).collect();
    let pre: String = before.into_iter().rev().collect();
    let mid = &orig[s..e];
    let mid: String = if mid.chars().count() > 200 {
        truncate(mid, 200)
    } else {
        mid.to_string()
    };
    let post: String = orig[e..].chars().take(50).collect();
    escape_invisible(&format!("{pre}{mid}{post}"))
}

/// Dedups (same rule, field and matched text) and orders by severity, highest first.
pub(crate) fn finish(mut v: Vec<Finding>) -> Vec<Finding> {
    v.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let mut seen = HashSet::new();
    v.retain(|f| seen.insert((f.rule.clone(), f.field.clone(), f.matched.clone())));
    v
}
