//! A static reading of a shell command: what it runs, writes, reads and reaches, as bash would
//! run it. Quotes and backslashes are removed as the shell removes them (`c\u'r'l` runs
//! `curl`), `$'\x63'` is decoded, variables assigned earlier in the command are substituted,
//! and the scripts a command carries are read too: `bash -c`, `sh -c`, `eval`, `ssh host '…'`,
//! `find -exec`, `xargs`, `$(…)`, backticks, process substitutions, heredocs and here-strings
//! fed to a shell, and literal base64, hex and printf-escaped payloads piped into one.
//!
//! Limits, by design: what the command computes at run time (a variable read from a file, a
//! loop building a word) is not known, and stays as written (`$VAR`); functions and aliases
//! defined outside the command are not known. The reading errs towards reporting: a word that
//! looks like a path is reported as read. Pure: no I/O, bounded in input size, depth and
//! output.

use base64::Engine as _;

/// What a shell command does, as far as a static reading can tell.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandView {
    /// Every script read: the command as given first, then each inner script found.
    pub scripts: Vec<String>,
    /// Each simple command's words, wrappers removed, the program first.
    pub commands: Vec<Vec<String>>,
    /// Programs run, by basename, deduplicated.
    pub programs: Vec<String>,
    /// Each pipeline as its programs joined by ` | `.
    pub pipelines: Vec<String>,
    /// Paths written, created, deleted, moved or changed.
    pub writes: Vec<String>,
    /// Paths read.
    pub reads: Vec<String>,
    /// Network destinations.
    pub urls: Vec<String>,
    /// Whether the command reaches the network.
    pub network: bool,
    /// Data from the network run by a shell or interpreter.
    pub downloads_to_interpreter: bool,
    /// Decoded data run by a shell or interpreter.
    pub decodes_to_interpreter: bool,
    /// Why (part of) the command could not be read.
    pub unreadable: Option<String>,
}

/// Input read at most.
const MAX_INPUT: usize = 256 << 10;
/// Scripts inside scripts.
const MAX_DEPTH: usize = 8;
const MAX_SCRIPTS: usize = 64;
const MAX_ITEMS: usize = 1024;

/// Reads `command`; `home` expands `~` and `$HOME`.
pub fn analyze(command: &str, home: Option<&str>) -> CommandView {
    let mut reader = Reader {
        view: CommandView::default(),
        home: home.map(|h| h.trim_end_matches('/').to_owned()),
    };
    let text = if command.len() > MAX_INPUT {
        reader.unreadable(format!(
            "the command is longer than {} KiB; only its start was read",
            MAX_INPUT >> 10
        ));
        let mut end = MAX_INPUT;
        while !command.is_char_boundary(end) {
            end -= 1;
        }
        &command[..end]
    } else {
        command
    };
    reader.script(text, 0, &mut Vars::default());
    reader.view
}

// ---------------------------------------------------------------------------------------------
// Words and operators.

/// One word after quote removal, and what was inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Word {
    text: String,
    /// Command substitutions in it (`$(…)`, backticks), and process substitutions (`<(…)`).
    substitutions: Vec<String>,
    /// The word is a process substitution `<(…)` / `>(…)` as a whole.
    process: bool,
    /// Some of it was quoted: not an operator, not a keyword.
    quoted: bool,
    /// Where in `text` the first quoted or escaped part starts: an assignment's name must
    /// come before it.
    first_quote: Option<usize>,
}

impl Word {
    fn mark_quoted(&mut self) {
        self.quoted = true;
        self.first_quote.get_or_insert(self.text.len());
    }

    /// `NAME=value`, when the name and `=` were written plainly.
    fn assignment(&self) -> Option<(&str, &str)> {
        let (name, value) = assignment(&self.text)?;
        self.first_quote
            .is_none_or(|q| q > name.len())
            .then_some((name, value))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    /// `|`, `|&`.
    Pipe,
    /// `;`, `&`, `&&`, `||`, newline, `;;`: ends a pipeline.
    Separator,
    /// `(`, `)`, `{`, `}` as control, which end a command.
    Group,
    /// A redirection: its operator (`>`, `>>`, `<`, `<<<`, `<<`, `>&` …), the fd written, and
    /// for a heredoc its body.
    Redirect {
        op: String,
        fd: Option<u32>,
        heredoc: Option<String>,
    },
}

/// Variables assigned in the script so far.
#[derive(Debug, Clone, Default)]
struct Vars(Vec<(String, String)>);

impl Vars {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn set(&mut self, name: &str, value: &str) {
        if self.0.len() < MAX_ITEMS {
            self.0.push((name.to_owned(), value.to_owned()));
        }
    }
}

struct Lexer<'a> {
    chars: Vec<char>,
    at: usize,
    vars: &'a Vars,
    home: Option<&'a str>,
    /// Heredocs whose bodies start after the next newline: (delimiter, strip tabs, token index).
    pending_heredocs: Vec<(String, bool, usize)>,
    problem: Option<String>,
}

fn is_operator_char(c: char) -> bool {
    matches!(c, '|' | '&' | ';' | '<' | '>' | '(' | ')')
}

impl<'a> Lexer<'a> {
    fn new(text: &str, vars: &'a Vars, home: Option<&'a str>) -> Self {
        Self {
            chars: text.chars().collect(),
            at: 0,
            vars,
            home,
            pending_heredocs: Vec::new(),
            problem: None,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, n: usize) -> Option<char> {
        self.chars.get(self.at + n).copied()
    }

    fn tokens(mut self) -> (Vec<Token>, Option<String>) {
        let mut out: Vec<Token> = Vec::new();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => self.at += 1,
                '\\' if self.peek_at(1) == Some('\n') => self.at += 2,
                '\n' => {
                    self.at += 1;
                    self.read_heredocs(&mut out);
                    out.push(Token::Separator);
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                _ => {
                    if let Some(token) = self.operator() {
                        if let Token::Redirect { op, .. } = &token
                            && op.starts_with("<<")
                            && op != "<<<"
                        {
                            let strip = op == "<<-";
                            while self.peek().is_some_and(|c| c == ' ' || c == '\t') {
                                self.at += 1;
                            }
                            let delimiter = self.word();
                            let index = out.len();
                            out.push(token);
                            self.pending_heredocs.push((delimiter.text, strip, index));
                            continue;
                        }
                        out.push(token);
                        continue;
                    }
                    // `{` and `}` are control only as words of their own at a command's start.
                    let word = self.word();
                    let control = !word.quoted && matches!(word.text.as_str(), "{" | "}" | "!");
                    if control {
                        out.push(Token::Group);
                    } else {
                        out.push(Token::Word(word));
                    }
                }
            }
        }
        if !self.pending_heredocs.is_empty() {
            self.problem
                .get_or_insert_with(|| "a heredoc is not closed".to_owned());
        }
        (out, self.problem)
    }

    /// An operator at the cursor, if one starts here (a number right before `>` or `<` is the
    /// redirected fd).
    fn operator(&mut self) -> Option<Token> {
        let start = self.at;
        let mut fd = None;
        let mut digits = String::new();
        while let Some(c) = self.peek_at(digits.len())
            && c.is_ascii_digit()
        {
            digits.push(c);
        }
        if !digits.is_empty() && matches!(self.peek_at(digits.len()), Some('<' | '>')) {
            fd = digits.parse().ok();
            self.at += digits.len();
        }
        let c = self.peek()?;
        if !is_operator_char(c) {
            self.at = start;
            return None;
        }
        // Process substitution is a word.
        if matches!(c, '<' | '>') && self.peek_at(1) == Some('(') && fd.is_none() {
            return None;
        }
        let two: String = self.chars[self.at..(self.at + 2).min(self.chars.len())]
            .iter()
            .collect();
        let three: String = self.chars[self.at..(self.at + 3).min(self.chars.len())]
            .iter()
            .collect();
        let (op, len) = match () {
            _ if three == "<<<" || three == "<<-" || three == "&>>" => (three.clone(), 3),
            _ if [
                "&&", "||", ";;", "|&", ">>", "<<", ">&", "<&", ">|", "&>", "<>",
            ]
            .contains(&two.as_str()) =>
            {
                (two.clone(), 2)
            }
            _ => (c.to_string(), 1),
        };
        self.at += len;
        Some(match op.as_str() {
            "|" | "|&" => Token::Pipe,
            ";" | "&" | "&&" | "||" | ";;" => Token::Separator,
            "(" | ")" => Token::Group,
            _ => Token::Redirect {
                op,
                fd,
                heredoc: None,
            },
        })
    }

    /// Reads the bodies of the heredocs announced on the line just ended.
    fn read_heredocs(&mut self, out: &mut [Token]) {
        for (delimiter, strip, index) in std::mem::take(&mut self.pending_heredocs) {
            let mut body = String::new();
            let mut closed = false;
            while self.at < self.chars.len() {
                let line_end = self.chars[self.at..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |n| self.at + n);
                let line: String = self.chars[self.at..line_end].iter().collect();
                self.at = (line_end + 1).min(self.chars.len());
                let line = if strip {
                    line.trim_start_matches('\t').to_owned()
                } else {
                    line
                };
                if line == delimiter {
                    closed = true;
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if !closed {
                self.problem
                    .get_or_insert_with(|| format!("the heredoc `{delimiter}` is not closed"));
            }
            if let Some(Token::Redirect { heredoc, .. }) = out.get_mut(index) {
                *heredoc = Some(body);
            }
        }
    }

    /// One word: quotes removed, escapes undone, known expansions made.
    fn word(&mut self) -> Word {
        let mut word = Word::default();
        // A word beginning with `~` is a home path.
        if self.peek() == Some('~')
            && let Some(home) = self.home
            && matches!(self.peek_at(1), None | Some('/'))
        {
            word.text.push_str(home);
            self.at += 1;
        }
        // `<(…)` and `>(…)`: a process substitution.
        if matches!(self.peek(), Some('<' | '>')) && self.peek_at(1) == Some('(') {
            self.at += 2;
            let inner = self.until_close_paren();
            word.text = "/dev/fd/63".to_owned();
            word.substitutions.push(inner);
            word.process = true;
            return word;
        }
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' => break,
                c if is_operator_char(c) => break,
                '\\' => {
                    self.at += 1;
                    match self.peek() {
                        Some('\n') => self.at += 1,
                        Some(next) => {
                            word.text.push(next);
                            word.mark_quoted();
                            self.at += 1;
                        }
                        None => {}
                    }
                }
                '\'' => {
                    word.mark_quoted();
                    self.at += 1;
                    let start = self.at;
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.at += 1;
                    }
                    if self.peek().is_none() {
                        self.problem
                            .get_or_insert_with(|| "a single quote is not closed".to_owned());
                    }
                    word.text
                        .extend(self.chars[start..self.at.min(self.chars.len())].iter());
                    self.at += 1;
                }
                '"' => {
                    word.mark_quoted();
                    self.at += 1;
                    self.double_quoted(&mut word);
                }
                '`' => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek().is_some_and(|c| c != '`') {
                        if self.peek() == Some('\\') {
                            self.at += 1;
                        }
                        self.at += 1;
                    }
                    if self.peek().is_none() {
                        self.problem
                            .get_or_insert_with(|| "a backtick is not closed".to_owned());
                    }
                    let inner: String = self.chars[start..self.at.min(self.chars.len())]
                        .iter()
                        .collect();
                    self.at += 1;
                    self.substitution(&mut word, inner, format!("`{}`", "…"));
                }
                '$' => self.dollar(&mut word, false),
                _ => {
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
        word
    }

    fn double_quoted(&mut self, word: &mut Word) {
        loop {
            match self.peek() {
                None => {
                    self.problem
                        .get_or_insert_with(|| "a double quote is not closed".to_owned());
                    return;
                }
                Some('"') => {
                    self.at += 1;
                    return;
                }
                Some('\\') => {
                    self.at += 1;
                    match self.peek() {
                        Some(c @ ('"' | '\\' | '$' | '`')) => {
                            word.text.push(c);
                            self.at += 1;
                        }
                        Some('\n') => self.at += 1,
                        Some(_) | None => word.text.push('\\'),
                    }
                }
                Some('`') => {
                    self.at += 1;
                    let start = self.at;
                    while self.peek().is_some_and(|c| c != '`') {
                        self.at += 1;
                    }
                    let inner: String = self.chars[start..self.at.min(self.chars.len())]
                        .iter()
                        .collect();
                    self.at += 1;
                    self.substitution(word, inner, "`…`".to_owned());
                }
                Some('$') => self.dollar(word, true),
                Some(c) => {
                    word.text.push(c);
                    self.at += 1;
                }
            }
        }
    }

    /// `$…` at the cursor.
    fn dollar(&mut self, word: &mut Word, in_quotes: bool) {
        self.at += 1;
        match self.peek() {
            Some('\'') if !in_quotes => {
                self.at += 1;
                word.mark_quoted();
                let start = self.at;
                while let Some(c) = self.peek() {
                    if c == '\\' {
                        self.at += 2;
                        continue;
                    }
                    if c == '\'' {
                        break;
                    }
                    self.at += 1;
                }
                let raw: String = self.chars[start..self.at.min(self.chars.len())]
                    .iter()
                    .collect();
                self.at += 1;
                word.text.push_str(&ansi_c(&raw));
            }
            Some('"') if !in_quotes => {
                self.at += 1;
                word.mark_quoted();
                self.double_quoted(word);
            }
            Some('(') if self.peek_at(1) == Some('(') => {
                // Arithmetic: a number, never a command.
                self.at += 2;
                let _ = self.until_close_paren();
                if self.peek() == Some(')') {
                    self.at += 1;
                }
                word.text.push('0');
            }
            Some('(') => {
                self.at += 1;
                let inner = self.until_close_paren();
                self.substitution(word, inner, "$(…)".to_owned());
            }
            Some('{') => {
                self.at += 1;
                let start = self.at;
                while self.peek().is_some_and(|c| c != '}') {
                    self.at += 1;
                }
                let inside: String = self.chars[start..self.at.min(self.chars.len())]
                    .iter()
                    .collect();
                self.at += 1;
                let (name, default) =
                    match inside.split_once(":-").or_else(|| inside.split_once('-')) {
                        Some((name, default)) => (name.to_owned(), Some(default.to_owned())),
                        None => (inside.clone(), None),
                    };
                match (self.lookup(&name), default) {
                    (Some(value), _) => word.text.push_str(&value),
                    (None, Some(default)) => word.text.push_str(&default),
                    (None, None) => {
                        word.text.push_str("${");
                        word.text.push_str(&inside);
                        word.text.push('}');
                    }
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.at += 1;
                }
                let name: String = self.chars[start..self.at].iter().collect();
                match self.lookup(&name) {
                    Some(value) => word.text.push_str(&value),
                    None => {
                        word.text.push('$');
                        word.text.push_str(&name);
                    }
                }
            }
            _ => word.text.push('$'),
        }
    }

    fn lookup(&self, name: &str) -> Option<String> {
        if let Some(value) = self.vars.get(name) {
            return Some(value.to_owned());
        }
        (name == "HOME")
            .then(|| self.home.map(str::to_owned))
            .flatten()
    }

    /// A command substitution: its script is read; its value is known when it only prints
    /// literal text.
    fn substitution(&mut self, word: &mut Word, inner: String, shown: String) {
        match static_output(&inner, self.vars, self.home) {
            Some(value) => word.text.push_str(value.trim_end_matches('\n')),
            None => word.text.push_str(&shown),
        }
        word.substitutions.push(inner);
    }

    /// The text up to the `)` closing an opened `(`, nested parentheses and quotes followed.
    fn until_close_paren(&mut self) -> String {
        let start = self.at;
        let mut depth = 1usize;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some('"'), '\\') => self.at += 1,
                (Some(_), _) => {}
                (None, '\\') => self.at += 1,
                (None, '\'' | '"' | '`') => quote = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => {
                    depth -= 1;
                    if depth == 0 {
                        let inner: String = self.chars[start..self.at].iter().collect();
                        self.at += 1;
                        return inner;
                    }
                }
                (None, _) => {}
            }
            self.at += 1;
        }
        self.problem
            .get_or_insert_with(|| "a parenthesis is not closed".to_owned());
        self.chars[start.min(self.chars.len())..].iter().collect()
    }
}

/// `$'…'`: bash's ANSI-C escapes.
fn ansi_c(raw: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '\\' || i + 1 >= chars.len() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let c = chars[i + 1];
        i += 2;
        let radix_run = |i: &mut usize, radix: u32, max: usize| -> Option<u32> {
            let start = *i;
            while *i < chars.len() && *i - start < max && chars[*i].is_digit(radix) {
                *i += 1;
            }
            let digits: String = chars[start..*i].iter().collect();
            u32::from_str_radix(&digits, radix).ok()
        };
        match c {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'e' | 'E' => out.push('\x1b'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            'x' => match radix_run(&mut i, 16, 2) {
                Some(n) => out.extend(char::from_u32(n)),
                None => out.push_str("\\x"),
            },
            'u' => match radix_run(&mut i, 16, 4) {
                Some(n) => out.extend(char::from_u32(n)),
                None => out.push_str("\\u"),
            },
            'U' => match radix_run(&mut i, 16, 8) {
                Some(n) => out.extend(char::from_u32(n)),
                None => out.push_str("\\U"),
            },
            '0'..='7' => {
                i -= 1;
                match radix_run(&mut i, 8, 3) {
                    Some(n) => out.extend(char::from_u32(n)),
                    None => out.push('\\'),
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// What a script prints when it only prints literal text, possibly decoded on the way
/// (`echo TEXT`, `printf 'FMT'`, `echo B64 | base64 -d`, `xxd -r -p`, `rev`).
fn static_output(script: &str, vars: &Vars, home: Option<&str>) -> Option<String> {
    let (tokens, problem) = Lexer::new(script, vars, home).tokens();
    if problem.is_some() {
        return None;
    }
    let mut stages: Vec<Vec<Word>> = vec![Vec::new()];
    let mut here_string: Option<String> = None;
    let mut pending_here = false;
    for token in tokens {
        match token {
            Token::Word(w) if pending_here => {
                here_string = Some(w.text);
                pending_here = false;
            }
            Token::Word(w) => stages.last_mut()?.push(w),
            Token::Pipe => stages.push(Vec::new()),
            Token::Redirect { op, .. } if op == "<<<" => pending_here = true,
            Token::Separator | Token::Group | Token::Redirect { .. } => return None,
        }
    }
    let mut data: Option<String> = here_string.map(|s| s + "\n");
    for stage in &stages {
        let words: Vec<&str> = stage.iter().map(|w| w.text.as_str()).collect();
        let (program, args) = words.split_first()?;
        data = Some(match basename(program) {
            "echo" => {
                let escapes = args
                    .first()
                    .is_some_and(|a| a.starts_with('-') && a.contains('e'));
                let rest: Vec<&str> = args
                    .iter()
                    .copied()
                    .skip_while(|a| {
                        a.starts_with('-')
                            && a.len() > 1
                            && a[1..].chars().all(|c| "neE".contains(c))
                    })
                    .collect();
                let text = rest.join(" ");
                let text = if escapes { printf_escapes(&text) } else { text };
                text + "\n"
            }
            "printf" => {
                let format = args.first()?;
                let expanded = printf_escapes(format);
                match args.get(1) {
                    Some(arg) if expanded.contains("%s") => expanded.replacen("%s", arg, 1),
                    _ => expanded,
                }
            }
            "cat" if args.is_empty() => data?,
            "base64" | "b64" => {
                if !args
                    .iter()
                    .any(|a| matches!(*a, "-d" | "--decode" | "-D" | "-di" | "-id"))
                {
                    return None;
                }
                let input = match args.iter().find(|a| !a.starts_with('-')) {
                    Some(_) => return None,
                    None => data?,
                };
                decode_base64(&input)?
            }
            "xxd" if args.iter().any(|a| a.starts_with("-r")) => decode_hex(&data?)?,
            "rev" => data?
                .lines()
                .map(|l| l.chars().rev().collect::<String>())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => return None,
        });
    }
    data
}

/// printf's and `echo -e`'s backslash escapes.
fn printf_escapes(text: &str) -> String {
    ansi_c(text)
}

fn decode_base64(text: &str) -> Option<String> {
    let cleaned: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(cleaned.as_bytes())
        .or_else(|_| {
            base64::engine::general_purpose::STANDARD_NO_PAD
                .decode(cleaned.trim_end_matches('=').as_bytes())
        })
        .or_else(|_| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(cleaned.trim_end_matches('=').as_bytes())
        })
        .ok()?;
    printable(bytes)
}

fn decode_hex(text: &str) -> Option<String> {
    let cleaned: String = text.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    if !cleaned.len().is_multiple_of(2) || cleaned.is_empty() {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..cleaned.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&cleaned[i..i + 2], 16).ok())
        .collect();
    printable(bytes?)
}

/// Decoded bytes that read as text (a script), not binary data.
fn printable(bytes: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(bytes).ok()?;
    let ok = !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'));
    ok.then_some(text)
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

// ---------------------------------------------------------------------------------------------
// Commands.

/// Shells that run a `-c` script, a file, or their standard input.
const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "rbash", "busybox",
];
/// Interpreters that run `-c`/`-e` code, a file, or their standard input.
const INTERPRETERS: &[&str] = &[
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "deno",
    "bun",
    "lua",
    "tclsh",
    "Rscript",
    "osascript",
    "pwsh",
    "powershell",
];
/// Programs that reach the network by themselves.
const NETWORK: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "ssh", "scp", "sftp", "ftp", "tftp",
    "aria2c", "http", "https", "xh", "lynx", "w3m", "links", "dig", "nslookup", "host", "drill",
    "rsync", "sshpass", "fetch",
];
/// Network programs whose output is downloaded data.
const DOWNLOADERS: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "socat", "telnet", "aria2c", "http", "https", "xh",
    "lynx", "w3m", "links", "fetch", "ftp", "tftp",
];
/// Programs whose output is decoded input.
const DECODERS: &[&str] = &[
    "base64", "b64", "xxd", "uudecode", "gunzip", "zcat", "rev", "openssl", "gzip", "bzcat",
    "xzcat", "tr",
];
/// Code of an interpreter that reaches the network.
const NETWORK_CODE: &[&str] = &[
    "urllib",
    "requests.",
    "import requests",
    "http.client",
    "httpx",
    "socket",
    "urlopen",
    "fetch(",
    "net.connect",
    "http.get",
    "https.get",
    "http.request",
    "https.request",
    "net::http",
    "io::socket",
    "require('http",
    "require(\"http",
    "require('net')",
    "require(\"net\")",
    "from 'http",
    "import socket",
    "import urllib",
    "tcpsocket",
    "lwp::",
    "http::tiny",
    "open-uri",
    "curl_exec",
    "file_get_contents(\"http",
    "file_get_contents('http",
    "websocket",
    "aiohttp",
];
/// Code of an interpreter that decodes something and runs it.
const DECODING_CODE: &[&str] = &[
    "b64decode",
    "atob(",
    "base64_decode",
    "decode64",
    "from_base64",
    "'base64')",
    "\"base64\")",
    "frombase64string",
];
const RUNNING_CODE: &[&str] = &[
    "exec(",
    "eval(",
    "system(",
    "popen",
    "subprocess",
    "child_process",
    "spawn",
    "shell_exec",
    "passthru",
    "`",
];

struct Reader {
    view: CommandView,
    home: Option<String>,
}

/// A redirection: its operator, the fd it names, its target word, a heredoc's body.
type Redirection = (String, Option<u32>, Option<Word>, Option<String>);

/// A simple command as read.
#[derive(Default)]
struct Simple {
    words: Vec<Word>,
    /// Redirections: (operator, fd, target word or heredoc body).
    redirects: Vec<Redirection>,
    assignments: Vec<(String, String)>,
}

impl Reader {
    fn unreadable(&mut self, why: String) {
        self.view.unreadable.get_or_insert(why);
    }

    fn push(list: &mut Vec<String>, item: &str) {
        if !item.is_empty() && list.len() < MAX_ITEMS && !list.iter().any(|i| i == item) {
            list.push(item.to_owned());
        }
    }

    /// Reads one script: its pipelines, and the scripts inside them.
    fn script(&mut self, text: &str, depth: usize, vars: &mut Vars) {
        if depth > MAX_DEPTH {
            self.unreadable(format!("scripts nest deeper than {MAX_DEPTH}"));
            return;
        }
        if self.view.scripts.len() >= MAX_SCRIPTS {
            self.unreadable(format!("the command holds more than {MAX_SCRIPTS} scripts"));
            return;
        }
        Self::push(&mut self.view.scripts, text);
        let home = self.home.clone();
        // Assignments anywhere in the script are known before its words are expanded (a
        // reading does not run it in order; `a=cu; b=${a}rl` needs two rounds).
        for _ in 0..3 {
            let (tokens, _) = Lexer::new(text, vars, home.as_deref()).tokens();
            if !collect_assignments(&tokens, vars) {
                break;
            }
        }
        let (tokens, problem) = Lexer::new(text, vars, home.as_deref()).tokens();
        if let Some(problem) = problem {
            self.unreadable(problem);
        }
        let mut pipeline: Vec<Simple> = vec![Simple::default()];
        let mut tokens = tokens.into_iter().peekable();
        while let Some(token) = tokens.next() {
            match token {
                Token::Word(word) => {
                    let current = pipeline.last_mut();
                    let Some(current) = current else { continue };
                    if current.words.is_empty()
                        && let Some((name, value)) = word.assignment()
                    {
                        current
                            .assignments
                            .push((name.to_owned(), value.to_owned()));
                        for inner in &word.substitutions {
                            self.script(inner, depth + 1, &mut vars.clone());
                        }
                        continue;
                    }
                    current.words.push(word);
                }
                Token::Redirect { op, fd, heredoc } => {
                    let target = if heredoc.is_some() {
                        None
                    } else {
                        match tokens.peek() {
                            Some(Token::Word(_)) => match tokens.next() {
                                Some(Token::Word(w)) => Some(w),
                                _ => None,
                            },
                            _ => None,
                        }
                    };
                    if let Some(current) = pipeline.last_mut() {
                        current.redirects.push((op, fd, target, heredoc));
                    }
                }
                Token::Pipe => pipeline.push(Simple::default()),
                Token::Separator | Token::Group => {
                    self.pipeline(std::mem::take(&mut pipeline), depth, vars);
                    pipeline.push(Simple::default());
                }
            }
        }
        self.pipeline(pipeline, depth, vars);
    }

    /// One pipeline: each command, then what flows between them.
    fn pipeline(&mut self, stages: Vec<Simple>, depth: usize, vars: &mut Vars) {
        let stages: Vec<Simple> = stages
            .into_iter()
            .filter(|s| !s.words.is_empty() || !s.redirects.is_empty() || !s.assignments.is_empty())
            .collect();
        if stages.is_empty() {
            return;
        }
        let mut programs: Vec<String> = Vec::new();
        let mut sources: Vec<Source> = Vec::new();
        for (i, stage) in stages.iter().enumerate() {
            // Assignments alone set variables for what follows.
            if stage.words.is_empty() {
                for (name, value) in &stage.assignments {
                    vars.set(name, value);
                }
            }
            let fed = i > 0;
            let ran = self.simple(stage, depth, vars, fed, sources.last().copied());
            programs.push(ran.program.clone().unwrap_or_default());
            sources.push(ran.output);
        }
        let shown: Vec<&str> = programs
            .iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        if !shown.is_empty() {
            let line = shown.join(" | ");
            Self::push(&mut self.view.pipelines, &line);
        }
        // A literal payload decoded into a shell: read the payload as the script it is.
        if stages.len() > 1 {
            let last = &stages[stages.len() - 1];
            let last_words = words_of(last);
            if runs_stdin(&last_words) {
                let upstream: Vec<String> =
                    stages[..stages.len() - 1].iter().map(simple_text).collect();
                if let Some(payload) =
                    static_output(&upstream.join(" | "), vars, self.home.as_deref())
                {
                    self.view.decodes_to_interpreter |=
                        stages[..stages.len() - 1].iter().any(|s| {
                            words_of(s).first().is_some_and(|p| {
                                DECODERS.contains(&basename(p))
                                    || basename(p) == "printf"
                                    || basename(p) == "echo"
                            })
                        });
                    self.script(&payload, depth + 1, &mut vars.clone());
                }
            }
        }
    }

    /// One simple command: recorded, and the scripts it runs read. `input`: what its standard
    /// input carries, when it is fed by a pipe.
    fn simple(
        &mut self,
        stage: &Simple,
        depth: usize,
        vars: &mut Vars,
        fed: bool,
        input: Option<Source>,
    ) -> Ran {
        let mut input = if fed { input } else { None };
        // Redirections first: where it writes and reads, what feeds it.
        for (op, fd, target, heredoc) in &stage.redirects {
            if let Some(body) = heredoc {
                input = Some(Source::Literal);
                let words = words_of(stage);
                if runs_stdin(&words) {
                    self.run_stdin_text(&words, body, depth, vars);
                }
                continue;
            }
            let Some(target) = target else { continue };
            for inner in &target.substitutions {
                self.script(inner, depth + 1, &mut vars.clone());
            }
            let path = target.text.as_str();
            match op.as_str() {
                "<<<" => {
                    input = Some(Source::Literal);
                    let words = words_of(stage);
                    if runs_stdin(&words) {
                        self.run_stdin_text(&words, path, depth, vars);
                    }
                }
                "<" | "<>" => {
                    self.read_path(path);
                    input = Some(if is_network_path(path) {
                        Source::Network
                    } else {
                        Source::File
                    });
                }
                ">&" | "<&" if path.chars().all(|c| c.is_ascii_digit() || c == '-') => {}
                _ => {
                    let _ = fd;
                    self.write_path(path);
                }
            }
        }
        let words = words_of(stage);
        if words.is_empty() {
            return Ran::default();
        }
        // Words' own substitutions run first.
        for word in &stage.words {
            for inner in &word.substitutions {
                self.script(inner, depth + 1, &mut vars.clone());
            }
        }
        self.command(&words, &stage.words, depth, vars, input)
    }

    /// A command's words (wrappers peeled), what it runs, reads, writes and reaches.
    fn command(
        &mut self,
        words: &[String],
        raw: &[Word],
        depth: usize,
        vars: &mut Vars,
        input: Option<Source>,
    ) -> Ran {
        let mut words = unwrap(words);
        // Keywords open or close compound commands; the command follows them.
        while words.first().is_some_and(|w| {
            matches!(
                w.as_str(),
                "if" | "then"
                    | "else"
                    | "elif"
                    | "do"
                    | "while"
                    | "until"
                    | "time"
                    | "!"
                    | "{"
                    | "("
            )
        }) {
            words.remove(0);
            words = unwrap(&words);
        }
        if words.first().is_some_and(|w| {
            matches!(
                w.as_str(),
                "for"
                    | "select"
                    | "case"
                    | "function"
                    | "fi"
                    | "done"
                    | "esac"
                    | "}"
                    | "[["
                    | "]]"
                    | "in"
            )
        }) {
            return Ran::default();
        }
        let Some(program_word) = words.first() else {
            return Ran::default();
        };
        // Brace expansion of the whole command: `{curl,-s,x}`.
        if let Some(expanded) = brace_command(program_word)
            && words.len() == 1
        {
            return self.command(&expanded, raw, depth, vars, input);
        }
        let program = basename(program_word).to_owned();
        if self.view.commands.len() < MAX_ITEMS {
            self.view.commands.push(words.clone());
        }
        Self::push(&mut self.view.programs, &program);
        let args = &words[1..];
        let mut output = Source::Other;

        // Every URL anywhere in the words.
        for word in &words {
            for url in urls_in_word(word) {
                Self::push(&mut self.view.urls, &url);
            }
            if word.contains("/dev/tcp/") || word.contains("/dev/udp/") {
                self.view.network = true;
            }
        }
        // Process substitutions as arguments: their scripts' output is a file read here.
        let process_inputs: Vec<bool> = raw
            .iter()
            .filter(|w| w.process)
            .map(|w| {
                w.substitutions
                    .iter()
                    .any(|s| script_downloads(s, self.home.as_deref()))
            })
            .collect();

        if NETWORK.contains(&program.as_str()) || git_network(&program, args) {
            self.view.network = true;
            self.network_destinations(&program, args);
            if DOWNLOADERS.contains(&program.as_str()) {
                output = Source::Network;
            }
        }
        if DECODERS.contains(&program.as_str()) && decodes(&program, args) {
            output = Source::Decoded;
        }

        let is_shell = SHELLS.contains(&program.as_str());
        let is_interpreter = INTERPRETERS.iter().any(|i| {
            program == *i
                || program.starts_with(&format!("{i}."))
                || (i.starts_with("python") && program.starts_with("python"))
        });
        if is_shell {
            self.shell(&program, args, raw, depth, vars, input, &process_inputs);
        } else if is_interpreter {
            self.interpreter(args, depth, vars, input, &process_inputs);
        } else {
            match program.as_str() {
                "eval" => {
                    let script = args.join(" ");
                    self.flag_substituted_script(raw);
                    self.script(&script, depth + 1, vars);
                }
                "source" | "." => {
                    if let Some(file) = args.first() {
                        if process_inputs.first().copied().unwrap_or(false)
                            || (matches!(file.as_str(), "/dev/stdin" | "-")
                                && input == Some(Source::Network))
                        {
                            self.view.downloads_to_interpreter = true;
                        }
                        self.read_path(file);
                    }
                }
                "ssh" => {
                    // The remote command runs too (elsewhere): read it.
                    if let Some(remote) = ssh_remote_command(args) {
                        self.script(&remote, depth + 1, &mut vars.clone());
                    }
                }
                "find" => {
                    self.find_exec(args, depth, vars);
                    self.path_args(&program, args);
                }
                "watch" => {
                    let rest: Vec<String> = args
                        .iter()
                        .skip_while(|a| a.starts_with('-'))
                        .cloned()
                        .collect();
                    self.script(&rest.join(" "), depth + 1, &mut vars.clone());
                }
                "su" | "runuser" | "script" | "sg" | "flock" => {
                    if let Some(at) = args.iter().position(|a| a == "-c" || a == "--command") {
                        if let Some(script) = args.get(at + 1) {
                            self.script(script, depth + 1, &mut vars.clone());
                        }
                    } else if program == "flock" && args.len() > 1 {
                        let _ = self.command(&args[1..], &[], depth + 1, vars, input);
                    }
                }
                "export" | "local" | "declare" | "typeset" | "readonly" => {
                    for arg in args {
                        if let Some((name, value)) = assignment(arg) {
                            vars.set(name, value);
                        }
                    }
                }
                _ => {}
            }
            self.path_args(&program, args);
        }
        // A shell or interpreter found inside another command's words (`docker exec c sh -c
        // …`, `kubectl exec -- bash -c …`).
        if !is_shell
            && !is_interpreter
            && let Some(at) = args.iter().position(|a| SHELLS.contains(&basename(a)))
            && let Some(script) = dash_c_script(&args[at + 1..])
        {
            self.script(&script, depth + 1, &mut vars.clone());
        }
        Ran {
            program: Some(program),
            output,
        }
    }

    /// A shell: its `-c` script, a script file, or its standard input.
    #[allow(clippy::too_many_arguments)]
    fn shell(
        &mut self,
        _program: &str,
        args: &[String],
        raw: &[Word],
        depth: usize,
        vars: &mut Vars,
        input: Option<Source>,
        process_inputs: &[bool],
    ) {
        if let Some(script) = dash_c_script(args) {
            self.flag_substituted_script(raw);
            self.script(&script, depth + 1, &mut vars.clone());
            return;
        }
        let file = args
            .iter()
            .position(|a| !a.starts_with('-') && !a.starts_with('+'))
            .map(|i| &args[i]);
        match file {
            Some(file) if file == "/dev/fd/63" => {
                if process_inputs.iter().any(|d| *d) {
                    self.view.downloads_to_interpreter = true;
                }
            }
            Some(file) if file != "-" && file != "/dev/stdin" => self.read_path(file),
            _ => self.fed(input),
        }
    }

    /// An interpreter: its `-c`/`-e` code, a file, or its standard input.
    fn interpreter(
        &mut self,
        args: &[String],
        depth: usize,
        vars: &mut Vars,
        input: Option<Source>,
        process_inputs: &[bool],
    ) {
        let code_at = args.iter().position(|a| {
            matches!(
                a.as_str(),
                "-c" | "-e" | "-E" | "--eval" | "-r" | "-Command" | "-command" | "-p"
            )
        });
        if let Some(code) = code_at.and_then(|i| args.get(i + 1)) {
            self.code(code, depth, vars);
            return;
        }
        // Options (`-m module`, `-u`) before the file or `-`.
        let mut i = 0;
        while i < args.len() && args[i].starts_with('-') && args[i] != "-" {
            if matches!(
                args[i].as_str(),
                "-m" | "-W" | "-X" | "-r" | "--require" | "-I"
            ) {
                i += 1;
            }
            i += 1;
        }
        match args.get(i) {
            Some(file) if file == "/dev/fd/63" => {
                if process_inputs.iter().any(|d| *d) {
                    self.view.downloads_to_interpreter = true;
                }
            }
            Some(file) if file != "-" && !args.iter().any(|a| a == "-m") => self.read_path(file),
            Some(_) => {}
            None => self.fed(input),
        }
        if args.get(i).is_some_and(|a| a == "-") {
            self.fed(input);
        }
    }

    /// A shell or interpreter runs what its standard input carries.
    fn fed(&mut self, input: Option<Source>) {
        match input {
            Some(Source::Network) => self.view.downloads_to_interpreter = true,
            Some(Source::Decoded) => self.view.decodes_to_interpreter = true,
            Some(Source::Literal | Source::File | Source::Other) | None => {}
        }
    }

    /// Text on the standard input of a command that runs it (heredoc, here-string).
    fn run_stdin_text(&mut self, words: &[String], text: &str, depth: usize, vars: &mut Vars) {
        let program = words.first().map(|p| basename(p)).unwrap_or_default();
        if SHELLS.contains(&program) {
            self.script(text, depth + 1, &mut vars.clone());
        } else {
            self.code(text, depth, vars);
        }
    }

    /// `bash -c "$(curl …)"`, `eval "$(echo … | base64 -d)"`: the script is what a
    /// substitution printed.
    fn flag_substituted_script(&mut self, raw: &[Word]) {
        for word in raw {
            for inner in &word.substitutions {
                if script_downloads(inner, self.home.as_deref()) {
                    self.view.downloads_to_interpreter = true;
                }
                if script_decodes(inner, self.home.as_deref()) {
                    self.view.decodes_to_interpreter = true;
                }
            }
        }
    }

    /// An interpreter's code: where it goes, what it opens, and encoded scripts it runs.
    fn code(&mut self, code: &str, depth: usize, vars: &mut Vars) {
        let lower = code.to_ascii_lowercase();
        if NETWORK_CODE.iter().any(|n| lower.contains(n)) {
            self.view.network = true;
        }
        for url in urls_in_word(code) {
            Self::push(&mut self.view.urls, &url);
        }
        for literal in string_literals(code) {
            let literal = expand_home(&literal, self.home.as_deref());
            if looks_like_path(&literal) {
                self.read_path(&literal);
            }
        }
        let decodes = DECODING_CODE.iter().any(|d| lower.contains(d));
        let runs = RUNNING_CODE.iter().any(|r| lower.contains(r));
        if decodes {
            for literal in string_literals(code) {
                if literal.len() >= 12
                    && let Some(decoded) = decode_base64(&literal)
                {
                    if runs {
                        self.view.decodes_to_interpreter = true;
                    }
                    self.script(&decoded, depth + 1, &mut vars.clone());
                }
            }
        }
        if runs
            && (lower.contains("system(")
                || lower.contains("subprocess")
                || lower.contains("popen"))
        {
            // A command run from the code, when it is a literal.
            for literal in string_literals(code) {
                if literal.contains(' ') && !literal.contains('\n') && literal.len() < 4096 {
                    let first = literal.split_whitespace().next().unwrap_or_default();
                    if NETWORK.contains(&basename(first)) || SHELLS.contains(&basename(first)) {
                        self.script(&literal, depth + 1, &mut vars.clone());
                    }
                }
            }
        }
    }

    /// `find … -exec CMD … ;` runs CMD.
    fn find_exec(&mut self, args: &[String], depth: usize, vars: &mut Vars) {
        let mut i = 0;
        while i < args.len() {
            if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                let end = args[i + 1..]
                    .iter()
                    .position(|a| a == ";" || a == "+" || a == "\\;")
                    .map_or(args.len(), |n| i + 1 + n);
                let command: Vec<String> = args[i + 1..end].to_vec();
                if !command.is_empty() {
                    let _ = self.command(&command, &[], depth + 1, vars, None);
                }
                i = end;
            }
            i += 1;
        }
    }

    /// Where a network program goes.
    fn network_destinations(&mut self, program: &str, args: &[String]) {
        match program {
            "ssh" | "nc" | "ncat" | "netcat" | "telnet" | "sftp" | "ftp" | "tftp" | "sshpass" => {
                if let Some(host) = first_operand(program, args) {
                    let host = host.rsplit('@').next().unwrap_or(host);
                    Self::push(&mut self.view.urls, host);
                }
            }
            "scp" | "rsync" => {
                for arg in args {
                    if let Some((host, _)) = remote_spec(arg) {
                        Self::push(&mut self.view.urls, &host);
                    }
                }
            }
            "dig" | "nslookup" | "host" | "drill" => {
                for arg in args
                    .iter()
                    .filter(|a| !a.starts_with('-') && !a.starts_with('@'))
                {
                    Self::push(&mut self.view.urls, arg);
                }
            }
            _ => {}
        }
    }

    /// What a command's arguments write and read.
    fn path_args(&mut self, program: &str, args: &[String]) {
        let operands: Vec<&String> = args
            .iter()
            .filter(|a| !a.starts_with('-') || a.as_str() == "-")
            .collect();
        let mut writes: Vec<String> = Vec::new();
        match program {
            "tee" => writes.extend(operands.iter().map(|s| (*s).clone())),
            "cp" | "mv" | "install" | "rsync" | "ln" | "scp" => {
                if let Some(at) = args
                    .iter()
                    .position(|a| a == "-t" || a == "--target-directory")
                {
                    writes.extend(args.get(at + 1).cloned());
                } else if let Some(target) = args
                    .iter()
                    .find_map(|a| a.strip_prefix("--target-directory="))
                {
                    writes.push(target.to_owned());
                } else if operands.len() >= 2
                    && let Some(last) = operands.last()
                {
                    writes.push((*last).clone());
                }
            }
            "touch" | "mkdir" | "rm" | "rmdir" | "unlink" | "shred" | "truncate" | "mkfifo" => {
                writes.extend(operands.iter().map(|s| (*s).clone()));
            }
            "chmod" | "chown" | "chgrp" | "chattr" | "setfacl" => {
                writes.extend(operands.iter().skip(1).map(|s| (*s).clone()));
            }
            "dd" => {
                for arg in args {
                    if let Some(of) = arg.strip_prefix("of=") {
                        writes.push(of.to_owned());
                    }
                    if let Some(input) = arg.strip_prefix("if=") {
                        self.read_path(input);
                    }
                }
            }
            "sed" | "perl"
                if args
                    .iter()
                    .any(|a| a.starts_with("-i") || a == "--in-place" || a.starts_with("-pi")) =>
            {
                writes.extend(operands.iter().skip(1).map(|s| (*s).clone()));
            }
            "curl" => {
                for (i, arg) in args.iter().enumerate() {
                    if matches!(arg.as_str(), "-o" | "--output") {
                        writes.extend(args.get(i + 1).cloned());
                    }
                    if matches!(arg.as_str(), "-T" | "--upload-file")
                        && let Some(file) = args.get(i + 1)
                    {
                        self.read_path(file);
                    }
                    if matches!(
                        arg.as_str(),
                        "-d" | "--data"
                            | "--data-binary"
                            | "--data-raw"
                            | "--data-urlencode"
                            | "-F"
                            | "--form"
                            | "--json"
                    ) && let Some(value) = args.get(i + 1)
                        && let Some(at) = value.find('@')
                    {
                        let file = value[at + 1..].split(';').next().unwrap_or_default();
                        if file != "-" {
                            self.read_path(file);
                        }
                    }
                }
            }
            "wget" => {
                for (i, arg) in args.iter().enumerate() {
                    if matches!(arg.as_str(), "-O" | "--output-document") {
                        writes.extend(args.get(i + 1).filter(|f| f.as_str() != "-").cloned());
                    }
                    if let Some(file) = arg.strip_prefix("--post-file=") {
                        self.read_path(file);
                    }
                }
            }
            "tar" => {
                let extracting = args.iter().any(|a| {
                    (a.starts_with('-') && !a.starts_with("--") && a.contains('x'))
                        || a == "--extract"
                        || (!a.starts_with('-') && a.contains('x') && a.len() < 6 && a == &args[0])
                });
                if extracting
                    && let Some(at) = args.iter().position(|a| a == "-C" || a == "--directory")
                {
                    writes.extend(args.get(at + 1).cloned());
                }
            }
            "git" if args.first().is_some_and(|a| a == "clone") => {
                let rest: Vec<&String> = args[1..].iter().filter(|a| !a.starts_with('-')).collect();
                if rest.len() >= 2 {
                    writes.push(rest[1].clone());
                }
            }
            "crontab" if !args.iter().any(|a| a == "-l") => writes.push("crontab".to_owned()),
            _ => {}
        }
        for write in &writes {
            self.write_path(write);
        }
        // Everything else that looks like a path is read.
        for arg in args {
            let value = arg
                .split_once('=')
                .filter(|(k, _)| k.starts_with("--"))
                .map_or(arg.as_str(), |(_, v)| v);
            if writes.iter().any(|w| w == value) {
                continue;
            }
            if looks_like_path(value) && !value.contains("://") && remote_spec(value).is_none() {
                self.read_path(value);
            }
        }
    }

    fn write_path(&mut self, path: &str) {
        let path = expand_home(path, self.home.as_deref());
        if matches!(
            path.as_str(),
            "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-" | ""
        ) || path.starts_with("/dev/fd/")
        {
            return;
        }
        if is_network_path(&path) {
            self.view.network = true;
            Self::push(&mut self.view.urls, &path);
            return;
        }
        Self::push(&mut self.view.writes, &path);
    }

    fn read_path(&mut self, path: &str) {
        let path = expand_home(path, self.home.as_deref());
        if path.is_empty() || path == "-" || path.starts_with("/dev/fd/") {
            return;
        }
        if is_network_path(&path) {
            self.view.network = true;
            Self::push(&mut self.view.urls, &path);
            return;
        }
        Self::push(&mut self.view.reads, &path);
    }
}

/// What a command's output carries, for the command it pipes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Source {
    Network,
    Decoded,
    Literal,
    File,
    #[default]
    Other,
}

#[derive(Default)]
struct Ran {
    program: Option<String>,
    output: Source,
}

fn words_of(stage: &Simple) -> Vec<String> {
    stage.words.iter().map(|w| w.text.clone()).collect()
}

/// A simple command as text again, for reading what it prints.
fn simple_text(stage: &Simple) -> String {
    let mut parts: Vec<String> = stage.words.iter().map(|w| quote(&w.text)).collect();
    for (op, _, target, _) in &stage.redirects {
        if op == "<<<"
            && let Some(target) = target
        {
            parts.push(format!("<<< {}", quote(&target.text)));
        }
    }
    parts.join(" ")
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Learns the literal assignments among `tokens`; whether any was new.
fn collect_assignments(tokens: &[Token], vars: &mut Vars) -> bool {
    let mut changed = false;
    let mut at_start = true;
    let mut after_export = false;
    for token in tokens {
        match token {
            Token::Word(word) => {
                if (at_start || after_export)
                    && let Some((name, value)) = word.assignment()
                {
                    if vars.get(name) != Some(value) {
                        vars.set(name, value);
                        changed = true;
                    }
                    continue;
                }
                after_export = at_start
                    && matches!(
                        word.text.as_str(),
                        "export" | "local" | "declare" | "typeset" | "readonly"
                    );
                at_start = false;
            }
            Token::Pipe | Token::Separator | Token::Group => {
                at_start = true;
                after_export = false;
            }
            Token::Redirect { .. } => {}
        }
    }
    changed
}

/// `NAME=value`.
fn assignment(text: &str) -> Option<(&str, &str)> {
    let (name, value) = text.split_once('=')?;
    let valid = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some((name, value))
}

/// The words with the programs that only run another in front removed.
fn unwrap(words: &[String]) -> Vec<String> {
    let mut words: Vec<String> = words.to_vec();
    for _ in 0..16 {
        let Some(first) = words.first() else {
            return words;
        };
        let program = basename(first).to_owned();
        // Options that take a value, per wrapper.
        let (valued, rest_from): (&[&str], usize) = match program.as_str() {
            "sudo" | "doas" => (
                &[
                    "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group",
                ],
                1,
            ),
            "env" => (&["-u", "-C", "-S", "--unset", "--chdir"], 1),
            "nohup" | "command" | "builtin" | "exec" | "setsid" | "unbuffer" | "time"
            | "stdbuf" | "caffeinate" => (&["-a"], 1),
            "nice" | "ionice" | "chrt" | "taskset" => (&["-n", "-c", "-p"], 1),
            "timeout" => (&["-s", "-k", "--signal", "--kill-after"], 1),
            "xargs" => (
                &[
                    "-I",
                    "-i",
                    "-n",
                    "-P",
                    "-d",
                    "-L",
                    "-s",
                    "-E",
                    "-a",
                    "--max-args",
                    "--max-procs",
                    "--delimiter",
                    "--arg-file",
                ],
                1,
            ),
            "chroot" => (&[], 1),
            _ => return words,
        };
        let mut i = rest_from;
        while i < words.len() {
            let w = &words[i];
            if w == "--" {
                i += 1;
                break;
            }
            if program == "env" && assignment(w).is_some() {
                i += 1;
                continue;
            }
            if w.starts_with('-') && w.len() > 1 {
                if valued.contains(&w.as_str()) {
                    i += 1;
                }
                i += 1;
                continue;
            }
            break;
        }
        // Positional arguments some wrappers take before the command.
        match program.as_str() {
            "timeout" | "chroot" if i < words.len() => i += 1,
            "taskset" if i < words.len() && !words[i].starts_with('-') => i += 1,
            _ => {}
        }
        if i >= words.len() {
            return words;
        }
        words = words[i..].to_vec();
    }
    words
}

/// `{curl,-s,x}` as the words bash makes of it.
fn brace_command(word: &str) -> Option<Vec<String>> {
    let inner = word.strip_prefix('{')?.strip_suffix('}')?;
    if !inner.contains(',') || inner.contains(['{', '}']) {
        return None;
    }
    let words: Vec<String> = inner
        .split(',')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    (!words.is_empty()).then_some(words)
}

/// The script of `-c` (options may be grouped: `-lc`, `-ec`).
fn dash_c_script(args: &[String]) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg == "--" {
            return None;
        }
        if arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 1 {
            if arg[1..].contains('c') {
                return args.get(i + 1).cloned();
            }
            // `-o option` takes a value.
            if arg == "-o" || arg == "-O" {
                i += 1;
            }
            i += 1;
            continue;
        }
        if arg.starts_with("--") {
            i += 1;
            continue;
        }
        return None;
    }
    None
}

/// Whether the words run what their standard input carries: a shell without a script, an
/// interpreter without code or file (or with `-`), `source /dev/stdin`.
fn runs_stdin(words: &[String]) -> bool {
    let words = unwrap(words);
    let Some(program) = words.first().map(|p| basename(p)) else {
        return false;
    };
    let args = &words[1..];
    if SHELLS.contains(&program) {
        return dash_c_script(args).is_none()
            && args
                .iter()
                .all(|a| a.starts_with('-') || a.starts_with('+'));
    }
    if INTERPRETERS.contains(&program) || program.starts_with("python") {
        return args.iter().any(|a| a == "-")
            || args
                .iter()
                .all(|a| a.starts_with('-') && !matches!(a.as_str(), "-c" | "-e" | "-m"));
    }
    matches!(program, "source" | ".") && args.first().is_some_and(|a| a == "/dev/stdin" || a == "-")
}

fn decodes(program: &str, args: &[String]) -> bool {
    match program {
        "base64" | "b64" => args
            .iter()
            .any(|a| matches!(a.as_str(), "-d" | "--decode" | "-D" | "-di" | "-id")),
        "xxd" => args.iter().any(|a| a.starts_with("-r")),
        "openssl" => args
            .iter()
            .any(|a| a == "-d" || a == "-base64" || a == "base64"),
        "gzip" => args.iter().any(|a| a == "-d" || a == "-dc" || a == "-cd"),
        "tr" => true,
        _ => true,
    }
}

fn git_network(program: &str, args: &[String]) -> bool {
    program == "git"
        && args
            .iter()
            .find(|a| !a.starts_with('-'))
            .is_some_and(|sub| {
                matches!(
                    sub.as_str(),
                    "clone"
                        | "fetch"
                        | "pull"
                        | "push"
                        | "ls-remote"
                        | "remote"
                        | "submodule"
                        | "archive"
                )
            })
}

/// Whether a script's output comes from the network (`$(curl …)`).
fn script_downloads(script: &str, home: Option<&str>) -> bool {
    let view = analyze_nested(script, home);
    view.programs
        .iter()
        .any(|p| DOWNLOADERS.contains(&p.as_str()))
}

fn script_decodes(script: &str, home: Option<&str>) -> bool {
    let view = analyze_nested(script, home);
    view.commands.iter().any(|words| {
        words
            .first()
            .is_some_and(|p| DECODERS.contains(&basename(p)) && decodes(basename(p), &words[1..]))
    })
}

fn analyze_nested(script: &str, home: Option<&str>) -> CommandView {
    let mut reader = Reader {
        view: CommandView::default(),
        home: home.map(str::to_owned),
    };
    // Nested once only: the caller reads the script fully itself.
    reader.script(script, MAX_DEPTH - 1, &mut Vars::default());
    reader.view
}

/// The command an `ssh` runs on the remote host, if any.
fn ssh_remote_command(args: &[String]) -> Option<String> {
    const VALUED: &[&str] = &[
        "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-m", "-O",
        "-Q", "-S", "-W", "-w", "-B", "-I",
    ];
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        if VALUED.contains(&args[i].as_str()) {
            i += 1;
        }
        i += 1;
    }
    // args[i] is the host.
    let rest = args.get(i + 1..)?;
    (!rest.is_empty()).then(|| rest.join(" "))
}

fn first_operand<'a>(program: &str, args: &'a [String]) -> Option<&'a str> {
    let valued: &[&str] = match program {
        "ssh" => &[
            "-p", "-i", "-l", "-o", "-F", "-J", "-L", "-R", "-D", "-b", "-c", "-E", "-e", "-m",
            "-O", "-S", "-W", "-w",
        ],
        "nc" | "ncat" | "netcat" => &["-p", "-s", "-w", "-i", "-e", "-c", "-x", "-X", "-q"],
        "sshpass" => &["-p", "-f", "-e"],
        _ => &[],
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if arg.starts_with('-') {
            if valued.contains(&arg.as_str()) {
                i += 1;
            }
            i += 1;
            continue;
        }
        return Some(arg);
    }
    None
}

/// `user@host:path` or `host:path` (scp, rsync, git).
fn remote_spec(arg: &str) -> Option<(String, String)> {
    if arg.contains("://") || arg.starts_with('/') || arg.starts_with('.') {
        return None;
    }
    let (host, path) = arg.split_once(':')?;
    let host = host.rsplit('@').next().unwrap_or(host);
    let name_like = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-_".contains(c));
    // `a:b` in a word is rarely a host; a name with a dot or a user@ is.
    let valid = name_like && (host.contains('.') || arg.contains('@') || host == "localhost");
    valid.then(|| (host.to_owned(), path.to_owned()))
}

/// URLs in a word: `scheme://…` for the schemes that reach the network.
fn urls_in_word(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("://") {
        let at = from + found;
        // After the last character that cannot be in a scheme (it may be several bytes long).
        let start = lower[..at]
            .char_indices()
            .rev()
            .find(|&(_, c)| !c.is_ascii_alphanumeric() && c != '+' && c != '-' && c != '.')
            .map_or(0, |(n, c)| n + c.len_utf8());
        let scheme = &lower[start..at];
        let end = text[at..]
            .find(|c: char| c.is_whitespace() || "'\"<>`|;)(".contains(c))
            .map_or(text.len(), |n| at + n);
        if matches!(
            scheme,
            "http"
                | "https"
                | "ftp"
                | "ftps"
                | "ws"
                | "wss"
                | "tcp"
                | "udp"
                | "ssh"
                | "git"
                | "sftp"
                | "scp"
                | "rsync"
                | "telnet"
                | "ldap"
                | "smtp"
                | "dict"
                | "gopher"
        ) {
            out.push(text[start..end].to_owned());
        }
        from = end.max(at + 3);
    }
    out
}

fn is_network_path(path: &str) -> bool {
    path.starts_with("/dev/tcp/") || path.starts_with("/dev/udp/")
}

fn expand_home(path: &str, home: Option<&str>) -> String {
    match home {
        Some(home) if path == "~" => home.to_owned(),
        Some(home) if path.starts_with("~/") => format!("{home}{}", &path[1..]),
        _ => path.to_owned(),
    }
}

/// Names that are files wherever they are written.
const DOTFILES: &[&str] = &[
    ".env",
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".gitconfig",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    "authorized_keys",
    "known_hosts",
    "credentials",
];

fn looks_like_path(word: &str) -> bool {
    if word.is_empty() || word.len() > 4096 || word.contains('\n') {
        return false;
    }
    if word.contains("://") {
        return false;
    }
    word.starts_with('/')
        || word.starts_with("~/")
        || word == "~"
        || word.starts_with("./")
        || word.starts_with("../")
        || (word.contains('/') && !word.contains(' ') && !word.starts_with('-'))
        || DOTFILES.contains(&basename(word))
}

/// Quoted string literals in code (`'…'`, `"…"`).
fn string_literals(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() && out.len() < MAX_ITEMS {
        let q = chars[i];
        if q == '\'' || q == '"' {
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && chars[j] != q {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            if j <= chars.len() {
                out.push(chars[start..j.min(chars.len())].iter().collect());
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;
