//! The agents' own tools (a shell, file writes and edits, reads, fetches): what a call of one
//! acts on, in one vocabulary whatever the agent, so that one policy rule covers Claude Code's
//! `Bash`, Codex's `exec_command` and Gemini CLI's `run_shell_command` alike.
//!
//! A call is read into a *view*, the arguments policy rules match (`match.host` rules):
//!
//! | category | fields |
//! |---|---|
//! | `shell` | `command` (the command, and each script found inside it), `program`, `pipeline`, `writes`, `reads`, `urls`, `network`, `downloads_to_interpreter`, `decodes_to_interpreter`, `workdir`, `detected` (the detector's shell rules that fire, filled in by the engine) |
//! | `write`, `edit` | `path`, `content` |
//! | `read` | `path` |
//! | `fetch` | `url` |
//! | `search` | `query` |
//!
//! beside the call's own arguments under their own names. Paths are as the tool will take
//! them: relative ones joined to the directory the tool works in (its own argument, else the
//! agent's), `~` and `$HOME` expanded; a path inside the home directory is also given as
//! `~/…`, so rules can say `~/.ssh/**` for every user. Pure: no I/O.

pub mod catalog;
pub mod code_mode;
pub mod patch;
pub mod shell;

use std::fmt;

use serde_json::{Map, Value};

use catalog::Subject;

/// What kind of thing a host tool does: the shared vocabulary of `match.host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    Shell,
    Write,
    Edit,
    Read,
    Fetch,
    Search,
    /// A tool agentsh knows does none of the above, or one it does not know.
    Other,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Self::Shell,
        Self::Write,
        Self::Edit,
        Self::Read,
        Self::Fetch,
        Self::Search,
        Self::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shell => "shell",
            Self::Write => "write",
            Self::Edit => "edit",
            Self::Read => "read",
            Self::Fetch => "fetch",
            Self::Search => "search",
            Self::Other => "other",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// The view fields a call of this category has (besides its own arguments).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Self::Shell => &[
                "command",
                "program",
                "pipeline",
                "writes",
                "reads",
                "urls",
                "network",
                "downloads_to_interpreter",
                "decodes_to_interpreter",
                "workdir",
                "detected",
            ],
            Self::Write | Self::Edit => &["path", "content"],
            Self::Read => &["path"],
            Self::Fetch => &["url"],
            Self::Search => &["query"],
            Self::Other => &[],
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the agent is: its home directory and working directory, as the kernel told them
/// when its connection was made. Either may be unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspace {
    pub home: Option<String>,
    pub cwd: Option<String>,
}

/// A host tool's call, read.
#[derive(Debug, Clone, PartialEq)]
pub struct HostCall {
    pub category: Category,
    /// What rules match: the call's own arguments and the shared fields.
    pub view: Map<String, Value>,
    /// What it acts on, for the record (the command, the first path or URL), cut short.
    pub subject: Option<String>,
    /// Why what it acts on could not be read (a command cut short, a patch that is not one).
    pub unreadable: Option<String>,
}

/// Longest subject kept in the record.
const SUBJECT_CHARS: usize = 300;

/// Reads a call of the host tool `name` (a tool no MCP server of the session has).
pub fn read(name: &str, arguments: &Map<String, Value>, workspace: &Workspace) -> HostCall {
    let Some(tool) = catalog::find(name) else {
        return HostCall {
            category: Category::Other,
            view: arguments.clone(),
            subject: None,
            unreadable: None,
        };
    };
    let mut view = arguments.clone();
    let workdir = tool
        .workdir
        .and_then(|key| string_at(arguments, key))
        .map(|dir| expand(dir, workspace, workspace.cwd.as_deref()))
        .or_else(|| workspace.cwd.clone());
    let place = Place {
        workspace,
        workdir: workdir.as_deref(),
    };
    let mut subject = None;
    let mut unreadable = None;
    match tool.subject {
        Subject::Script(keys) => match keys.iter().find_map(|k| string_at(arguments, k)) {
            Some(script) => {
                subject = Some(script.to_owned());
                unreadable = shell_view(script, &place, &mut view);
            }
            None => unreadable = Some(format!("it has no `{}` to read", keys.join("` or `"))),
        },
        Subject::Argv(path) => match argv_at(arguments, path) {
            Some(argv) => {
                let script = shell_words(&argv);
                subject = Some(script.clone());
                unreadable = shell_view(&script, &place, &mut view);
            }
            None => unreadable = Some(format!("its `{path}` is not a list of words")),
        },
        Subject::Paths(keys) => {
            let paths: Vec<&str> = keys.iter().flat_map(|k| strings_at(arguments, k)).collect();
            subject = paths.first().map(|p| (*p).to_owned());
            insert_paths(&mut view, "path", paths, &place);
        }
        Subject::FixedPath(path) => {
            subject = Some(path.to_owned());
            insert_paths(&mut view, "path", vec![path], &place);
        }
        Subject::Patch => {
            let (paths, content, problem) = patch_subject(arguments);
            subject = paths.first().cloned();
            unreadable = problem;
            insert_paths(
                &mut view,
                "path",
                paths.iter().map(String::as_str).collect(),
                &place,
            );
            if let Some(content) = content {
                view.insert("content".into(), Value::String(content));
            }
        }
        Subject::Url(key) => {
            let url = string_at(arguments, key).unwrap_or_default();
            subject = Some(url.to_owned());
            view.insert("url".into(), Value::String(url.to_owned()));
        }
        Subject::UrlsIn(key) => {
            let urls = urls_in(string_at(arguments, key).unwrap_or_default());
            subject = urls.first().cloned();
            view.insert("url".into(), strings(urls));
        }
        Subject::Query(key) => {
            let query = string_at(arguments, key).unwrap_or_default();
            subject = Some(query.to_owned());
            view.insert("query".into(), Value::String(query.to_owned()));
        }
        Subject::Nothing => {}
    }
    if let Some(key) = tool.content
        && let Some(content) = string_at(arguments, key)
    {
        view.insert("content".into(), Value::String(content.to_owned()));
    }
    HostCall {
        category: tool.category,
        view,
        subject: subject.map(|s| cut(&s)),
        unreadable,
    }
}

/// The directory paths are relative to, and the home `~` means.
struct Place<'a> {
    workspace: &'a Workspace,
    workdir: Option<&'a str>,
}

/// Fills the shell fields of `view` from `script`; why it could not be read whole, if not.
fn shell_view(script: &str, place: &Place, view: &mut Map<String, Value>) -> Option<String> {
    let home = place.workspace.home.as_deref();
    let read = shell::analyze(script, home);
    view.insert("command".into(), strings(read.scripts));
    view.insert("program".into(), strings(read.programs));
    view.insert("pipeline".into(), strings(read.pipelines));
    insert_paths(
        view,
        "writes",
        read.writes.iter().map(String::as_str).collect(),
        place,
    );
    insert_paths(
        view,
        "reads",
        read.reads.iter().map(String::as_str).collect(),
        place,
    );
    view.insert("urls".into(), strings(read.urls));
    view.insert("network".into(), flag(read.network));
    view.insert(
        "downloads_to_interpreter".into(),
        flag(read.downloads_to_interpreter),
    );
    view.insert(
        "decodes_to_interpreter".into(),
        flag(read.decodes_to_interpreter),
    );
    if let Some(dir) = place.workdir {
        view.insert("workdir".into(), Value::String(dir.to_owned()));
    }
    read.unreadable
}

fn flag(on: bool) -> Value {
    Value::String(if on { "true" } else { "false" }.to_owned())
}

fn strings(items: Vec<String>) -> Value {
    Value::Array(items.into_iter().map(Value::String).collect())
}

/// Each path as the tool takes it, and its `~/…` spelling when it is in the home directory.
fn insert_paths(view: &mut Map<String, Value>, key: &str, paths: Vec<&str>, place: &Place) {
    let mut out: Vec<String> = Vec::new();
    for path in paths {
        let full = expand(path, place.workspace, place.workdir);
        let resolved = lexical(&full);
        let tilde = place
            .workspace
            .home
            .as_deref()
            .and_then(|home| in_home(&resolved, home));
        for form in [Some(full), Some(resolved), tilde].into_iter().flatten() {
            if !out.contains(&form) {
                out.push(form);
            }
        }
    }
    view.insert(key.to_owned(), strings(out));
}

/// `path` with `~` and `$HOME` expanded and, when relative, joined to `base`.
fn expand(path: &str, workspace: &Workspace, base: Option<&str>) -> String {
    let home = workspace.home.as_deref();
    let expanded = match home {
        Some(home) if path == "~" || path == "$HOME" || path == "${HOME}" => home.to_owned(),
        Some(home) => ["~/", "$HOME/", "${HOME}/"]
            .iter()
            .find_map(|p| path.strip_prefix(p))
            .map_or_else(
                || path.to_owned(),
                |rest| format!("{}/{rest}", home.trim_end_matches('/')),
            ),
        None => path.to_owned(),
    };
    if expanded.starts_with('/') || expanded.starts_with('~') || expanded.starts_with('$') {
        return expanded;
    }
    match base {
        Some(base) if base.starts_with('/') => {
            let rest = expanded.strip_prefix("./").unwrap_or(&expanded);
            format!("{}/{rest}", base.trim_end_matches('/'))
        }
        _ => expanded,
    }
}

/// An absolute path with its `.` and `..` segments and repeated slashes resolved, as the
/// kernel walks it (symbolic links aside); other paths as they are.
fn lexical(path: &str) -> String {
    if !path.starts_with('/') {
        return path.to_owned();
    }
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    format!("/{}", parts.join("/"))
}

/// `~/rest` for a path below `home` (or `~` for home itself).
fn in_home(path: &str, home: &str) -> Option<String> {
    let home = home.trim_end_matches('/');
    if home.is_empty() {
        return None;
    }
    if path == home {
        return Some("~".to_owned());
    }
    path.strip_prefix(home)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(|rest| format!("~/{rest}"))
}

/// The value at a dotted path, when it is a string.
fn string_at<'a>(arguments: &'a Map<String, Value>, path: &str) -> Option<&'a str> {
    value_at(arguments, path).and_then(Value::as_str)
}

fn value_at<'a>(arguments: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut keys = path.split('.');
    let mut value = arguments.get(keys.next()?)?;
    for key in keys {
        value = value.get(key)?;
    }
    Some(value)
}

/// A string, or each string of a list.
fn strings_at<'a>(arguments: &'a Map<String, Value>, key: &str) -> Vec<&'a str> {
    match value_at(arguments, key) {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn argv_at(arguments: &Map<String, Value>, path: &str) -> Option<Vec<String>> {
    match value_at(arguments, path)? {
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect(),
        // Some tools take the command as one line.
        Value::String(line) => Some(vec![line.clone()]),
        _ => None,
    }
}

/// An argument vector as a shell line that runs it: each word quoted unless plain. A single
/// word is taken as the line it is (`shell` given `["ls -la | wc"]`: its runner would run
/// that word as a program, a shell reading would not).
fn shell_words(argv: &[String]) -> String {
    if let [only] = argv {
        return only.clone();
    }
    argv.iter()
        .map(|word| {
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The paths and added text of Codex's patch (`input`), or of the Responses API's
/// `apply_patch_call` operation; why it cannot be read, if not.
fn patch_subject(arguments: &Map<String, Value>) -> (Vec<String>, Option<String>, Option<String>) {
    if let Some(body) = string_at(arguments, "input") {
        let view = patch::read(body);
        return (view.paths, Some(view.added), view.problem);
    }
    if let Some(path) = string_at(arguments, "operation.path") {
        let diff = string_at(arguments, "operation.diff").map(str::to_owned);
        return (vec![path.to_owned()], diff, None);
    }
    (
        Vec::new(),
        None,
        Some("it carries neither a patch (`input`) nor an operation with a path".to_owned()),
    )
}

/// `http(s)://…` URLs written in a text.
fn urls_in(text: &str) -> Vec<String> {
    let mut urls: Vec<String> = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| lower[from..].find(scheme))
        .min()
    {
        let start = from + at;
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || "<>\"'`)]}".contains(c))
            .map_or(text.len(), |n| start + n);
        let url = text[start..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
        if !urls.iter().any(|u| u == url) {
            urls.push(url.to_owned());
        }
        from = end.max(start + 1);
    }
    urls
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(SUBJECT_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;
