//! The agents' own tools, by the names they give the model, and where each keeps what it acts
//! on. Checked against the tools lists of Claude Code 2.1, Codex CLI 0.169 and Gemini CLI 0.61
//! as they send them, and the Responses API's built-in tools.

use super::Category;

/// Where a tool's subject is in its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// A shell script: the first of these string arguments present.
    Script(&'static [&'static str]),
    /// A command as an argument vector, at this dotted path.
    Argv(&'static str),
    /// Paths: each of these arguments (a string or a list of strings).
    Paths(&'static [&'static str]),
    /// A path the tool always writes, whatever its arguments say.
    FixedPath(&'static str),
    /// Codex's `apply_patch`: a patch body (`input`), or the Responses API's operation
    /// (`operation.path`).
    Patch,
    /// A URL argument.
    Url(&'static str),
    /// URLs written inside a text argument (Gemini CLI's `web_fetch` takes a prompt).
    UrlsIn(&'static str),
    /// A search query.
    Query(&'static str),
    /// Nothing agentsh reads.
    Nothing,
}

/// One tool of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tool {
    pub name: &'static str,
    pub category: Category,
    pub subject: Subject,
    /// The argument that holds the text written, if any.
    pub content: Option<&'static str>,
    /// The argument naming the directory the tool works in, if any.
    pub workdir: Option<&'static str>,
    /// Which agents have it.
    pub hosts: &'static str,
}

const fn tool(
    name: &'static str,
    category: Category,
    subject: Subject,
    hosts: &'static str,
) -> Tool {
    Tool {
        name,
        category,
        subject,
        content: None,
        workdir: None,
        hosts,
    }
}

const fn with_content(mut t: Tool, key: &'static str) -> Tool {
    t.content = Some(key);
    t
}

const fn in_dir(mut t: Tool, key: &'static str) -> Tool {
    t.workdir = Some(key);
    t
}

use Category::{Edit, Fetch, Other, Read, Search, Shell, Write};

const CLAUDE: &str = "Claude Code";
const CODEX: &str = "Codex CLI";
const GEMINI: &str = "Gemini CLI";
const RESPONSES: &str = "the OpenAI Responses API";

/// Every tool agentsh knows, by name. Names are case-sensitive, as the agents send them.
pub const TOOLS: &[Tool] = &[
    // Claude Code.
    tool("Bash", Shell, Subject::Script(&["command"]), CLAUDE),
    tool("Monitor", Shell, Subject::Script(&["command"]), CLAUDE),
    with_content(
        tool("Write", Write, Subject::Paths(&["file_path"]), CLAUDE),
        "content",
    ),
    with_content(
        tool("Edit", Edit, Subject::Paths(&["file_path"]), CLAUDE),
        "new_string",
    ),
    tool("MultiEdit", Edit, Subject::Paths(&["file_path"]), CLAUDE),
    with_content(
        tool(
            "NotebookEdit",
            Edit,
            Subject::Paths(&["notebook_path"]),
            CLAUDE,
        ),
        "new_source",
    ),
    tool("Read", Read, Subject::Paths(&["file_path"]), CLAUDE),
    tool("Glob", Read, Subject::Paths(&["path"]), CLAUDE),
    tool("Grep", Read, Subject::Paths(&["path"]), CLAUDE),
    tool("LS", Read, Subject::Paths(&["path"]), CLAUDE),
    tool("WebFetch", Fetch, Subject::Url("url"), CLAUDE),
    tool("WebSearch", Search, Subject::Query("query"), CLAUDE),
    // Codex CLI (and the Responses API's built-in tools it may be offered).
    in_dir(
        tool("exec_command", Shell, Subject::Script(&["cmd"]), CODEX),
        "workdir",
    ),
    in_dir(
        tool("shell", Shell, Subject::Argv("command"), CODEX),
        "workdir",
    ),
    in_dir(
        tool("shell_command", Shell, Subject::Script(&["command"]), CODEX),
        "workdir",
    ),
    // Keys typed into a running terminal session are commands too.
    tool("write_stdin", Shell, Subject::Script(&["chars"]), CODEX),
    in_dir(
        tool(
            "local_shell",
            Shell,
            Subject::Argv("action.command"),
            RESPONSES,
        ),
        "action.working_directory",
    ),
    tool("apply_patch", Edit, Subject::Patch, CODEX),
    tool("view_image", Read, Subject::Paths(&["path"]), CODEX),
    // Gemini CLI.
    in_dir(
        tool(
            "run_shell_command",
            Shell,
            Subject::Script(&["command"]),
            GEMINI,
        ),
        "dir_path",
    ),
    with_content(
        tool("write_file", Write, Subject::Paths(&["file_path"]), GEMINI),
        "content",
    ),
    with_content(
        tool("replace", Edit, Subject::Paths(&["file_path"]), GEMINI),
        "new_string",
    ),
    tool(
        "read_file",
        Read,
        Subject::Paths(&["file_path", "absolute_path"]),
        GEMINI,
    ),
    tool(
        "read_many_files",
        Read,
        Subject::Paths(&["paths", "include"]),
        GEMINI,
    ),
    tool(
        "list_directory",
        Read,
        Subject::Paths(&["dir_path", "path"]),
        GEMINI,
    ),
    tool("glob", Read, Subject::Paths(&["dir_path", "path"]), GEMINI),
    tool(
        "grep_search",
        Read,
        Subject::Paths(&["dir_path", "path"]),
        GEMINI,
    ),
    tool(
        "search_file_content",
        Read,
        Subject::Paths(&["dir_path", "path"]),
        GEMINI,
    ),
    tool("web_fetch", Fetch, Subject::UrlsIn("prompt"), GEMINI),
    tool("google_web_search", Search, Subject::Query("query"), GEMINI),
    // Saved memories go into the context of every later session.
    with_content(
        tool(
            "save_memory",
            Write,
            Subject::FixedPath("~/.gemini/GEMINI.md"),
            GEMINI,
        ),
        "fact",
    ),
    tool("write_todos", Other, Subject::Nothing, GEMINI),
];

/// The tool called `name`, if agentsh knows it.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|t| t.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, a) in TOOLS.iter().enumerate() {
            assert!(
                TOOLS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
        }
    }

    #[test]
    fn each_agent_s_shell_write_edit_and_read() {
        for (name, category) in [
            ("Bash", Shell),
            ("exec_command", Shell),
            ("run_shell_command", Shell),
            ("Write", Write),
            ("write_file", Write),
            ("Edit", Edit),
            ("apply_patch", Edit),
            ("replace", Edit),
            ("Read", Read),
            ("read_file", Read),
            ("WebFetch", Fetch),
            ("web_fetch", Fetch),
        ] {
            assert_eq!(find(name).map(|t| t.category), Some(category), "{name}");
        }
        assert_eq!(find("bash"), None, "names are the agents' own spelling");
    }
}
