//! Environment variables in configuration values, expanded as each agent expands them.

use super::Environment;

/// Claude Code's `${VAR}` and `${VAR:-default}`. A variable that is not set and has no default
/// stays as written (Claude Code reports it and starts the server with the text as it is).
pub fn braces_with_default(text: &str, env: &Environment) -> String {
    expand(text, |name| with_default(name, env), false)
}

/// Gemini CLI's `$VAR`, `${VAR}` and `${VAR:-default}`; unset variables without a default stay
/// as written.
pub fn dollar(text: &str, env: &Environment) -> String {
    expand(text, |name| with_default(name, env), true)
}

fn with_default(name: &str, env: &Environment) -> Option<String> {
    let (name, default) = match name.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (name, None),
    };
    env.vars
        .get(name)
        .cloned()
        .or_else(|| default.map(str::to_owned))
}

/// Replaces `${NAME}` (and, with `bare`, `$NAME` of word characters) by `lookup(NAME)`;
/// anything `lookup` does not know stays as written.
fn expand(text: &str, lookup: impl Fn(&str) -> Option<String>, bare: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(inner) = after.strip_prefix('{')
            && let Some(end) = inner.find('}')
        {
            let name = &inner[..end];
            match lookup(name) {
                Some(value) if !name.is_empty() => out.push_str(&value),
                _ => out.push_str(&rest[at..at + 2 + end + 1]),
            }
            rest = &inner[end + 1..];
            continue;
        }
        let word = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        match (bare && word > 0).then(|| lookup(&after[..word])).flatten() {
            Some(value) => {
                out.push_str(&value);
                rest = &after[word..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_files::env;
    use super::*;

    #[test]
    fn claude_braces() {
        let e = env("/h", "/w", &[("ROOT", "/srv"), ("EMPTY", "")]);
        assert_eq!(braces_with_default("${ROOT}/x", &e), "/srv/x");
        assert_eq!(braces_with_default("${NOPE:-/tmp}/x", &e), "/tmp/x");
        assert_eq!(braces_with_default("${NOPE}/x", &e), "${NOPE}/x");
        assert_eq!(braces_with_default("$ROOT ${EMPTY}", &e), "$ROOT ");
        assert_eq!(braces_with_default("a$", &e), "a$");
        assert_eq!(braces_with_default("${unclosed", &e), "${unclosed");
    }

    #[test]
    fn gemini_dollar() {
        let e = env("/h", "/w", &[("ROOT", "/srv"), ("A_1", "v")]);
        assert_eq!(dollar("$ROOT/x:${A_1}", &e), "/srv/x:v");
        assert_eq!(dollar("$NOPE/${NOPE}", &e), "$NOPE/${NOPE}");
        assert_eq!(dollar("${NOPE:-d}", &e), "d");
        assert_eq!(dollar("cost $5", &e), "cost $5");
    }
}
