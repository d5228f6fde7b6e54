//! What a tool does, guessed from its name and MCP definition.
//!
//! Cross-server rules need to know which tools read private data and which can carry data out
//! of the machine. Servers do not say so reliably, so every signal counts: the words of the
//! name and title, the annotations, the description and the argument names. A category is
//! never removed once a signal gave it, except WRITE under `readOnlyHint: true`: a guess errs
//! towards seeing a flow, never towards missing one.

use std::collections::HashMap;
use std::ops::{BitOr, BitOrAssign};
use std::sync::LazyLock;

use regex::{RegexSet, RegexSetBuilder};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::inspect::skeleton;

/// A set of capabilities of one tool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Categories(u8);

impl Categories {
    /// No capability the cross-server rules care about (`echo`, `add`).
    pub const NONE: Self = Self(0);
    /// Reads private or local data: files, databases, secrets, mail, repositories...
    pub const READ: Self = Self(1);
    /// Changes state: write, edit, delete, create, move, update...
    pub const WRITE: Self = Self(1 << 1);
    /// Can carry data out of the machine: HTTP requests (fetching a URL too), email, chat,
    /// webhooks, uploads, publishing, issue comments...
    pub const SEND: Self = Self(1 << 2);
    /// Runs commands or code.
    pub const EXECUTE: Self = Self(1 << 3);

    const NAMED: [(Self, &'static str); 4] = [
        (Self::READ, "read"),
        (Self::WRITE, "write"),
        (Self::SEND, "send"),
        (Self::EXECUTE, "execute"),
    ];

    /// Whether every capability of `other` is in `self`.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    fn without(self, other: Self) -> Self {
        Self(self.0 & !other.0)
    }

    /// The capabilities as lowercase words, e.g. `["read", "send"]`, for audit details.
    pub fn names(self) -> Vec<&'static str> {
        Self::NAMED
            .iter()
            .filter(|(category, _)| self.contains(*category))
            .map(|(_, name)| *name)
            .collect()
    }
}

impl BitOr for Categories {
    type Output = Self;

    fn bitor(self, other: Self) -> Self {
        self.union(other)
    }
}

impl BitOrAssign for Categories {
    fn bitor_assign(&mut self, other: Self) {
        *self = self.union(other);
    }
}

/// The categories of tool `name`, with its MCP tool definition when there is one.
pub fn categorize(name: &str, definition: Option<&Value>) -> Categories {
    let mut categories = from_words(&words(name));
    let Some(definition) = definition else {
        return categories;
    };
    let annotations = definition.get("annotations");

    // Titles are names written for people ("Read File"): same vocabulary.
    for title in [
        string_at(Some(definition), "title"),
        string_at(annotations, "title"),
    ] {
        categories |= from_words(&words(title));
    }
    categories |= from_description(string_at(Some(definition), "description"));
    categories |= from_schema(definition.get("inputSchema"));

    let hint = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    if hint("destructiveHint") == Some(true) {
        categories |= Categories::WRITE;
    }
    // Whatever goes into the arguments of an open-world tool reaches the outside world.
    if hint("openWorldHint") == Some(true) {
        categories |= Categories::SEND;
    }
    if hint("readOnlyHint") == Some(true) {
        categories = categories.without(Categories::WRITE) | Categories::READ;
    }
    categories
}

/// The string at `key` in `object`; empty when absent or not a string.
fn string_at<'v>(object: Option<&'v Value>, key: &str) -> &'v str {
    object
        .and_then(|o| o.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// How one word of a name contributes.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// Always gives its categories (`read`, `write`, `send`, `run`).
    Verb(Categories),
    /// Gives its categories only beside another word: `add` alone adds numbers,
    /// `add_observations` writes.
    Weak(Categories),
    /// A verb that is also a noun: `post_message` sends, `get_post` reads.
    /// Gives its categories unless a read verb is present.
    NounVerb(Categories),
    /// Something that leaves the machine once made (`issue`, `message`, `email`): SEND when a
    /// creating verb is present (`create_issue`), nothing otherwise (`get_issue`).
    Outward,
    /// Private data: READ when no other word gives a category (`printEnv`, `git_status`).
    Private,
}

/// Verbs that make an [`Role::Outward`] object go out.
const CREATING: &str = "create add update edit write submit new make compose";

/// The name vocabulary, one group of space-separated words per role. Words are matched by
/// confusable skeleton, so `rеad` with a Cyrillic `е` or `fi1e` still count.
const VOCABULARY: &[(&str, Role)] = {
    use Categories as C;
    use Role::*;
    const READ_SEND: Categories = Categories(C::READ.0 | C::SEND.0);
    const WRITE_SEND: Categories = Categories(C::WRITE.0 | C::SEND.0);
    &[
        (
            "read get list search query find view show cat open load retrieve lookup \
             inspect describe export dump grep glob scan select head tail stat tree recall \
             peek diff log logs screenshot",
            Verb(C::READ),
        ),
        (
            "env envs environment secret secrets password passwords credential credentials \
             cookie cookies clipboard keychain history status contents token tokens",
            Private,
        ),
        // Reaching the network reads what comes back and sends what the request carries.
        (
            "fetch download browse navigate scrape crawl curl wget http https",
            Verb(READ_SEND),
        ),
        (
            "send publish upload notify forward tweet broadcast url urls web internet \
             webhook webhooks",
            Verb(C::SEND),
        ),
        ("push", Verb(WRITE_SEND)),
        ("post reply share comment", NounVerb(C::SEND)),
        (
            "issue issues message messages email emails mail gist pull review notification \
             notifications sms chat",
            Outward,
        ),
        (
            "write edit delete remove rm create move mv rename update modify put patch \
             insert upsert append save store drop truncate replace copy cp mkdir rmdir \
             touch chmod chown merge commit install uninstall clear reset fork apply import \
             restore deploy destroy erase purge wipe kill checkout init archive lock unlock \
             assign close reopen approve enable disable configure rollback revert rebase",
            Verb(C::WRITE),
        ),
        ("add set", Weak(C::WRITE)),
        (
            "run exec execute eval evaluate shell bash sh zsh powershell cmd command \
             commands terminal script spawn subprocess launch python repl",
            Verb(C::EXECUTE),
        ),
    ]
};

/// Skeleton of a vocabulary word -> its role.
static ROLES: LazyLock<HashMap<String, Role>> = LazyLock::new(|| {
    VOCABULARY
        .iter()
        .flat_map(|(words, role)| words.split_whitespace().map(move |w| (skeleton(w), *role)))
        .collect()
});

static CREATING_SKELETONS: LazyLock<Vec<String>> =
    LazyLock::new(|| CREATING.split_whitespace().map(skeleton).collect());

/// Splits a name into lowercase words at separators and camelCase boundaries:
/// `createIssueComment`, `HTTPRequest`, `slack_post_message`, `read-file.v2`.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.nfkc().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if c.is_uppercase() && !word.is_empty() {
            let previous = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let previous_is_upper = previous.is_some_and(char::is_uppercase);
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            // `fileName` splits before `N`; `HTTPRequest` splits before the `R` of `Request`.
            if !previous_is_upper || next_is_lower {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

fn from_words(words: &[String]) -> Categories {
    let keys: Vec<String> = words.iter().map(|w| skeleton(w)).collect();
    let roles: Vec<Role> = keys.iter().filter_map(|k| ROLES.get(k).copied()).collect();
    let has_read_verb = roles
        .iter()
        .any(|role| matches!(role, Role::Verb(c) if c.contains(Categories::READ)));
    let has_creating_verb = keys.iter().any(|k| CREATING_SKELETONS.contains(k));
    let mut categories = Categories::NONE;
    let mut private = false;
    for role in roles {
        match role {
            Role::Verb(c) => categories |= c,
            Role::Weak(c) if words.len() > 1 => categories |= c,
            Role::Weak(_) => {}
            Role::NounVerb(c) if !has_read_verb => categories |= c,
            Role::NounVerb(_) => {}
            Role::Outward if has_creating_verb => categories |= Categories::SEND,
            Role::Outward => {}
            Role::Private => private = true,
        }
    }
    if private && categories.is_empty() {
        categories = Categories::READ;
    }
    categories
}

/// Description phrases, matched on the NFKC-lowercased text (verbose syntax: whitespace in a
/// pattern is ignored, `\s` matches it). Most are a verb with the kind of thing it acts on, so
/// capability nouns in passing ("progress updates", "list of commits", "error messages") do
/// not count.
const DESCRIPTION_PATTERNS: &[(&str, Categories)] = &[
    (
        r"\b(?: reads? | reading | gets? | retriev(?:e|es|ing) | lists? | listing | search(?:es|ing)?
              | views? | shows? | opens? | loads? | quer(?:y|ies) | finds? | dumps? | exports?
              | prints? | inspects? )\b
          [^.]{0,40}?
          \b(?: files? | director(?:y|ies) | folders? | contents? | database | db | tables? | rows?
              | records? | secrets? | passwords? | credentials? | tokens? | keys? | environment
              | env | variables? | e?mails? | inbox | messages? | history | repositor(?:y|ies)
              | repos? | issues? | commits? | branches | code | documents? | notes? | graph
              | nodes | entities | knowledge | memor(?:y|ies) | channels? | threads? | logs?
              | clipboard | cookies? | screenshots? )\b",
        Categories::READ,
    ),
    (
        r"\b(?: writes? | writing | edits? | editing | deletes? | deleting | removes? | removing
              | creates? | creating | overwrites? | overwriting | modif(?:y|ies|ying)
              | renames? | moves? | inserts? | appends? | truncates? | installs? | uninstalls? )\b",
        Categories::WRITE,
    ),
    (
        r"\b(?: updates? | commits? | saves? )\s+
          (?: a | an | the | one | multiple | existing | new | changes | files? | content )\b",
        Categories::WRITE,
    ),
    (
        r"\b(?: send(?:s|ing)? | publish(?:es|ing)? | upload(?:s|ing)? | webhooks? | internet
              | http\s+requests? | web\s+search(?:es)? | search(?:es)?\s+the\s+web )\b",
        Categories::SEND,
    ),
    (
        r"\bpost(?:s|ing)?\s+ (?:(?: a | an | the | new )\s+)*
          (?: message | comment | reply | update | tweet | status | note )",
        Categories::SEND,
    ),
    (
        r"\b(?: comments?\s+on | adds?\s+(?:a\s+)?comment )\b",
        Categories::SEND,
    ),
    (
        r"\b(?: fetch(?:es|ing)? | download(?:s|ing)? | requests? | retriev(?:e|es|ing) | gets?
              | opens? | navigat(?:e|es|ing) | visits? )\s+
          (?:(?: a | an | the | any | given | specified | remote )\s+)*
          (?: urls? | web\s?pages? | websites? )\b",
        Categories(Categories::READ.0 | Categories::SEND.0),
    ),
    (
        r"\b(?: execut(?:e|es|ing) | run(?:s|ning)? | eval(?:uate|uates|uating)? | invokes?
              | spawns? | launch(?:es)? )\b
          [^.]{0,30}?
          \b(?: commands? | shell | scripts? | code | programs? | process(?:es)? | binar(?:y|ies)
              | python | javascript | bash | sql | quer(?:y|ies) | snippets? | expressions? )\b",
        Categories::EXECUTE,
    ),
    (
        r"\b(?: (?: shell | terminal | system )\s+commands? | command\s+line )\b",
        Categories::EXECUTE,
    ),
];

/// The compiled [`DESCRIPTION_PATTERNS`]; `None` only if one of them is invalid, which the
/// tests rule out.
static DESCRIPTION_SET: LazyLock<Option<RegexSet>> = LazyLock::new(|| {
    RegexSetBuilder::new(DESCRIPTION_PATTERNS.iter().map(|(pattern, _)| pattern))
        .ignore_whitespace(true)
        .build()
        .ok()
});

fn from_description(description: &str) -> Categories {
    let Some(set) = DESCRIPTION_SET.as_ref() else {
        return Categories::NONE;
    };
    if description.is_empty() {
        return Categories::NONE;
    }
    let text: String = description.nfkc().flat_map(char::to_lowercase).collect();
    set.matches(&text)
        .iter()
        .filter_map(|i| DESCRIPTION_PATTERNS.get(i))
        .fold(Categories::NONE, |acc, (_, c)| acc | *c)
}

/// Argument names that say what the tool does with them.
fn from_schema(schema: Option<&Value>) -> Categories {
    let Some(properties) = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object)
    else {
        return Categories::NONE;
    };
    properties
        .keys()
        .map(|key| match key.to_lowercase().as_str() {
            "url" | "urls" | "endpoint" | "webhook" | "webhook_url" | "webhookurl" => {
                Categories::SEND
            }
            "command" | "cmd" | "shell_command" => Categories::EXECUTE,
            _ => Categories::NONE,
        })
        .fold(Categories::NONE, BitOr::bitor)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const R: Categories = Categories::READ;
    const W: Categories = Categories::WRITE;
    const S: Categories = Categories::SEND;
    const X: Categories = Categories::EXECUTE;
    const NONE: Categories = Categories::NONE;

    #[test]
    fn set_operations() {
        let rs = R | S;
        assert!(rs.contains(R) && rs.contains(S) && rs.contains(R | S));
        assert!(!rs.contains(W) && !rs.contains(R | W));
        assert!(rs.contains(NONE));
        assert!(NONE.is_empty() && !R.is_empty());
        assert_eq!(R.union(S), rs);
        let mut c = W;
        c |= X;
        assert_eq!(c.names(), ["write", "execute"]);
        assert_eq!(
            (R | W | S | X).names(),
            ["read", "write", "send", "execute"]
        );
        assert!(NONE.names().is_empty());
    }

    #[test]
    fn description_patterns_compile() {
        let compiled = DESCRIPTION_SET.as_ref().map(RegexSet::len);
        assert_eq!(compiled, Some(DESCRIPTION_PATTERNS.len()));
    }

    #[test]
    fn splits_names_into_words() {
        let cases: &[(&str, &[&str])] = &[
            ("get_file_contents", &["get", "file", "contents"]),
            ("createIssueComment", &["create", "issue", "comment"]),
            ("HTTPRequest", &["http", "request"]),
            ("longRunningOperation", &["long", "running", "operation"]),
            ("read-file.v2", &["read", "file", "v2"]),
            ("ｒｅａｄ_file", &["read", "file"]),
            ("printEnv", &["print", "env"]),
            ("", &[]),
        ];
        for (name, want) in cases {
            assert_eq!(words(name), *want, "{name}");
        }
    }

    /// Real servers' tools, one per line: `name | expected categories | definition (JSON)`,
    /// where a definition that is only a string stands for `{"description": ...}`.
    const REAL_TOOLS: &str = r#"
        # @modelcontextprotocol/server-filesystem
        read_file | read | "Read the complete contents of a file from the file system."
        read_text_file | read | "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read."
        read_multiple_files | read | "Read the contents of multiple files simultaneously."
        write_file | write | "Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning."
        edit_file | write | "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made."
        create_directory | write | "Create a new directory or ensure a directory exists."
        list_directory | read | "Get a detailed listing of all files and directories in a specified path."
        directory_tree | read | "Get a recursive tree view of files and directories as a JSON structure."
        move_file | write | "Move or rename files and directories."
        search_files | read | "Recursively search for files and directories matching a pattern."
        get_file_info | read | "Retrieve detailed metadata about a file or directory. Returns comprehensive information including size, creation time, last modified time, permissions, and type."
        list_allowed_directories | read |
        # server-memory
        create_entities | write | "Create multiple new entities in the knowledge graph"
        add_observations | write | "Add new observations to existing entities in the knowledge graph"
        delete_relations | write |
        read_graph | read | "Read the entire knowledge graph"
        search_nodes | read | "Search for nodes in the knowledge graph based on a query"
        open_nodes | read | "Open specific nodes in the knowledge graph by their names"
        # mcp-server-fetch
        fetch | read send | {"description": "Fetches a URL from the internet and optionally extracts its contents as markdown.", "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}, "max_length": {"type": "integer"}}}}
        fetch | read send |
        # server-everything
        echo | | "Echoes back the input"
        add | | "Adds two numbers"
        longRunningOperation | | "Demonstrates a long running operation with progress updates"
        printEnv | read | "Prints all environment variables, helpful for debugging MCP server configuration"
        sampleLLM | | "Samples from an LLM using MCP's sampling feature"
        # github
        create_issue | write send | "Create a new issue in a GitHub repository"
        add_issue_comment | write send | "Add a comment to an existing issue"
        createIssueComment | write send |
        push_files | write send | "Push multiple files to a GitHub repository in a single commit"
        get_file_contents | read | "Get the contents of a file or directory from a GitHub repository"
        list_issues | read | "List issues in a GitHub repository with filtering options"
        list_commits | read | "Get list of commits of a branch in a GitHub repository"
        create_pull_request | write send |
        # slack
        slack_post_message | send | "Post a new message to a Slack channel"
        slack_reply_to_thread | send | "Reply to a specific message thread in Slack"
        slack_get_channel_history | read | "Get recent messages from a channel"
        slack_add_reaction | write | "Add a reaction emoji to a message"
        # others
        http_request | read send |
        send_email | send | "Sends an email"
        run_command | execute | "Execute a shell command"
        execute | execute | {"description": "Runs the given code", "inputSchema": {"properties": {"code": {}}}}
        git_status | read |
        git_commit | write | "Records changes to the repository"
        brave_web_search | read send | "Performs a web search using the Brave Search API"
        puppeteer_navigate | read send | "Navigate to a URL"
        puppeteer_evaluate | execute | "Execute JavaScript in the browser console"
        get_post | read |
        notify | send | "Notify the user"
        query | read execute | {"description": "Run a read-only SQL query", "annotations": {"readOnlyHint": true}}
        # A guess errs towards reading: the time server's clock is not private, but `get` is.
        get_current_time | read |
        # Homoglyphs (Cyrillic е and і) do not hide a verb.
        sеnd_message | send |
        wrіte_fіle | write |
    "#;

    #[test]
    fn real_server_tools() {
        let mut checked = 0;
        for line in REAL_TOOLS.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.splitn(3, '|').map(str::trim);
            let (name, want, definition) = (
                fields.next().unwrap_or(""),
                fields.next().unwrap_or(""),
                fields.next().unwrap_or(""),
            );
            let definition: Option<Value> = match serde_json::from_str(definition) {
                Ok(Value::String(description)) => Some(json!({ "description": description })),
                Ok(object) => Some(object),
                Err(_) if definition.is_empty() => None,
                Err(e) => panic!("{name}: bad definition: {e}"),
            };
            let got = categorize(name, definition.as_ref());
            assert_eq!(got.names().join(" "), want, "{name}");
            checked += 1;
        }
        assert!(checked >= 30, "{checked}");
    }

    #[test]
    fn vocabulary_words_have_distinct_skeletons() {
        let words = VOCABULARY
            .iter()
            .flat_map(|(words, _)| words.split_whitespace())
            .count();
        assert_eq!(ROLES.len(), words);
    }

    #[test]
    fn annotations() {
        let def = |a: Value| json!({ "annotations": a });
        // readOnlyHint wins over a destructive-sounding name.
        let ro = def(json!({"readOnlyHint": true, "destructiveHint": true}));
        assert_eq!(categorize("delete_cache", Some(&ro)), R);
        assert_eq!(
            categorize("frobnicate", Some(&def(json!({"destructiveHint": true})))),
            W
        );
        assert_eq!(
            categorize("frobnicate", Some(&def(json!({"openWorldHint": true})))),
            S
        );
        // Only explicit `true` counts; false, absent and non-booleans add nothing.
        let quiet =
            def(json!({"openWorldHint": false, "destructiveHint": "yes", "readOnlyHint": 1}));
        assert_eq!(categorize("frobnicate", Some(&quiet)), NONE);
        assert_eq!(
            categorize(
                "search",
                Some(&def(json!({"readOnlyHint": true, "openWorldHint": true})))
            ),
            R | S
        );
    }

    #[test]
    fn title_and_schema() {
        let titled = json!({"title": "Send Message"});
        assert_eq!(categorize("do_it", Some(&titled)), S);
        let old_style = json!({"annotations": {"title": "Run Command"}});
        assert_eq!(categorize("do_it", Some(&old_style)), X);
        let with_url = json!({"inputSchema": {"properties": {"URL": {"type": "string"}}}});
        assert_eq!(categorize("do_it", Some(&with_url)), S);
        let with_cmd = json!({"inputSchema": {"properties": {"command": {}}}});
        assert_eq!(categorize("do_it", Some(&with_cmd)), X);
        let odd = json!({"inputSchema": {"properties": ["url"]}, "description": 7});
        assert_eq!(categorize("do_it", Some(&odd)), NONE);
    }

    #[test]
    fn description_nouns_in_passing_do_not_count() {
        for d in [
            "Returns the list of commits",
            "Shows progress updates",
            "Provides detailed error messages",
            "Demonstrates a long running operation",
        ] {
            let got = categorize("frobnicate", Some(&json!({ "description": d })));
            assert!(
                !got.contains(W) && !got.contains(S) && !got.contains(X),
                "{d}: {:?}",
                got.names()
            );
        }
    }
}
