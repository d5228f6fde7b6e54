//! Shell-specific checks: obfuscated command words and recursive deletes.

use super::Severity;
use super::rules::Ctx;

/// Commands whose obfuscation means someone is hiding intent from a filter.
const DANGEROUS: &[&str] = &[
    "rm",
    "curl",
    "wget",
    "nc",
    "ncat",
    "netcat",
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "python",
    "python3",
    "perl",
    "ruby",
    "php",
    "node",
    "chmod",
    "chown",
    "dd",
    "mkfs",
    "cat",
    "base64",
    "eval",
    "exec",
    "sudo",
    "su",
    "kill",
    "pkill",
    "shred",
    "scp",
    "ssh",
    "socat",
    "telnet",
    "crontab",
    "systemctl",
    "useradd",
    "passwd",
    "openssl",
    "xxd",
    "tftp",
    "ftp",
    "powershell",
    "iex",
    "certutil",
    "bitsadmin",
    "mshta",
    "rundll",
    "regsvr",
    "nohup",
    "env",
    "printenv",
    "history",
    "whoami",
    "id",
    "sed",
    "awk",
    "tee",
    "mv",
    "cp",
    "truncate",
    "wipe",
    "srm",
];

/// Removes the obfuscation (backslashes, quotes, backticks, braces) from a command word.
fn deobfuscate(word: &str) -> String {
    let w = word.trim_matches(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '('));
    // Brace expansion `{rm,}` expands to "rm" and ""; take the non-empty alternative.
    if let Some(inner) = w.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
        return inner
            .split(',')
            .find(|s| !s.is_empty())
            .unwrap_or("")
            .to_string();
    }
    w.chars()
        .filter(|c| !matches!(c, '\\' | '\'' | '"' | '`') && !c.is_whitespace())
        .collect()
}

pub(crate) fn check_obfuscated_word(c: &Ctx) -> Option<Severity> {
    let raw = c.matched();
    let word = deobfuscate(raw);
    if word.is_empty() || !DANGEROUS.contains(&word.as_str()) {
        return None;
    }
    // A fully quoted word ('rm') is unusual but harmless quoting; quotes or backslashes
    // *inside* the word, empty quotes, backticks and braces are evasion.
    let trimmed =
        raw.trim_matches(|ch: char| ch.is_whitespace() || matches!(ch, ';' | '|' | '&' | '('));
    let fully_quoted = (trimmed.starts_with('\'') && trimmed.ends_with('\''))
        || (trimmed.starts_with('"') && trimmed.ends_with('"'));
    if fully_quoted && !trimmed.contains("''") && !trimmed.contains("\"\"") {
        return None;
    }
    Some(c.sev)
}

/// Severity of `rm -rf <target>` by target: system and home roots are high, other absolute
/// paths medium, relative paths and temp dirs are ordinary build hygiene.
pub(crate) fn check_rm_target(c: &Ctx) -> Option<Severity> {
    use super::Mode;
    let m = c.matched();
    let target = m.split_whitespace().last().unwrap_or("");
    let target = target.trim_matches(|ch: char| matches!(ch, '\'' | '"'));
    let t = target.trim_end_matches('/');
    let rootish = [
        "", "/", "/*", "~", "~/*", "$home", "${home}", "/home", "/home/*", "/etc", "/usr", "/var",
        "/root", "/boot", "/bin", "/sbin", "/lib", "/lib64", "/opt", "/srv", "/dev", "/proc",
        "/sys", "*", ".*",
    ];
    if rootish.contains(&t) || t.contains(".ssh") || t.contains(".gnupg") || t.contains(".aws") {
        return Some(Severity::High.max(c.sev));
    }
    // /home/<user> itself is as bad as /home.
    if let Some(rest) = t.strip_prefix("/home/")
        && !rest.contains('/')
    {
        return Some(Severity::High.max(c.sev));
    }
    let absolute = t.starts_with('/') || t.starts_with('~') || t.starts_with('$');
    if t.starts_with("/tmp") || t.starts_with("/var/tmp") || !absolute {
        return None;
    }
    // Install docs in fetched pages clean absolute paths all the time; only roots matter there.
    if c.mode == Mode::Output {
        return Some(Severity::Low);
    }
    Some(c.sev)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deobfuscation() {
        assert_eq!(deobfuscate(" r\\m "), "rm");
        assert_eq!(deobfuscate("r''m"), "rm");
        assert_eq!(deobfuscate("c\"a\"t"), "cat");
        assert_eq!(deobfuscate("`rm`"), "rm");
        assert_eq!(deobfuscate("{rm,}"), "rm");
        assert_eq!(deobfuscate("{,curl}"), "curl");
    }
}
