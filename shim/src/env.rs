//! The server's environment: what a wrapped MCP server may see of ours.
//!
//! Order of rules: `env_deny` always removes; with a non-empty `env_allow` only the standard
//! variables and the allowed ones pass; with only `env_deny`, everything else passes (the
//! policy chose what to remove: the design documents' "strip these, pass all others"); with
//! neither, everything passes except credentials (sensitive names and suffixes), unless the
//! value is the brokered secret's placeholder agentsh made for that very variable
//! (`agentsh-placeholder-<name>-<24 hex digits>`, nothing more): not a credential, and what the
//! server needs to reach its API through agentsh (which puts the real value in on the way).

use std::ffi::OsString;

/// Variables a process needs to run at all (and CA bundles agentsh itself sets).
const STANDARD: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PWD",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CODEX_CA_CERTIFICATE",
];

/// Names that are credentials whatever their suffix.
const SENSITIVE_NAMES: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "KUBECONFIG",
    "DATABASE_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_PROFILE",
    "NETRC",
    "PGPASSFILE",
];

/// Suffixes (after an underscore, or the whole name) that mark a credential.
const SENSITIVE_SUFFIXES: &[&str] = &[
    "TOKEN",
    "SECRET",
    "KEY",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "AUTH",
    "COOKIE",
    "APIKEY",
    "PAT",
];

pub fn is_standard(name: &str) -> bool {
    STANDARD.contains(&name) || name.starts_with("LC_")
}

/// Case-insensitive: `github_token` is as secret as `GITHUB_TOKEN`.
pub fn is_sensitive(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SENSITIVE_NAMES.contains(&upper.as_str()) {
        return true;
    }
    let last = upper.rsplit(['_', '-']).next().unwrap_or(&upper);
    SENSITIVE_SUFFIXES.contains(&last)
        || upper.ends_with("APIKEY")
        || upper.ends_with("API_KEY")
        || upper.ends_with("PRIVATE_KEY")
}

/// The server's policy on variables: name matchers from config.
pub struct EnvRules<'a> {
    pub allow: &'a dyn Fn(&str) -> bool,
    pub allow_is_set: bool,
    pub deny: &'a dyn Fn(&str) -> bool,
    pub deny_is_set: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Filtered {
    pub kept: Vec<(OsString, OsString)>,
    /// Names only: values never leave this module.
    pub removed: Vec<String>,
}

/// The variable `agentshctl run` sets to the directory of its launcher shims.
pub const LAUNCHER_DIR_VAR: &str = agentsh::launch::manifest::DIR_VAR;

/// Takes the launcher shims' directories out of the server's PATH (and the variable naming
/// one): the server is already guarded, and its own `node` or `python` must not be wrapped
/// again. Found by name as well, for agents that dropped the variable and kept PATH.
pub fn drop_launcher_dir(vars: &mut Vec<(OsString, OsString)>) {
    let named = vars
        .iter()
        .find(|(k, _)| k == LAUNCHER_DIR_VAR)
        .map(|(_, v)| v.clone());
    vars.retain(|(k, _)| k != LAUNCHER_DIR_VAR);
    let is_launcher_dir = |p: &std::path::Path| {
        named.as_deref() == Some(p.as_os_str())
            || p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(agentsh::launch::manifest::DIR_PREFIX))
    };
    for (name, value) in vars.iter_mut() {
        if name == "PATH" {
            let kept: Vec<std::path::PathBuf> = std::env::split_paths(value)
                .filter(|p| !is_launcher_dir(p))
                .collect();
            if let Ok(joined) = std::env::join_paths(kept) {
                *value = joined;
            }
        }
    }
}

pub fn filter(vars: impl IntoIterator<Item = (OsString, OsString)>, rules: &EnvRules) -> Filtered {
    let mut out = Filtered::default();
    for (name, value) in vars {
        // A name that is not UTF-8 cannot be matched against policy: it does not pass.
        let Some(text) = name.to_str() else {
            out.removed.push(name.to_string_lossy().into_owned());
            continue;
        };
        // Exactly the placeholder agentsh made for this variable: anything else under a
        // credential's name (a real key that merely starts like one) is a credential.
        let placeholder = value
            .to_str()
            .is_some_and(|v| agentsh::secrets::is_placeholder_for(text, v));
        let keep = if (rules.deny)(text) {
            false
        } else if rules.allow_is_set {
            is_standard(text) || (rules.allow)(text)
        } else {
            rules.deny_is_set || placeholder || !is_sensitive(text)
        };
        if keep {
            out.kept.push((name, value));
        } else {
            out.removed.push(text.to_owned());
        }
    }
    out.removed.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launcher_dirs_leave_the_servers_path() {
        let path =
            "/run/user/1/agentsh-launchers-0a1b2c3d4e5f:/usr/bin:/tmp/agentsh-launchers-x:/bin";
        let mut named = vec![
            (OsString::from("PATH"), OsString::from(path)),
            (
                OsString::from(LAUNCHER_DIR_VAR),
                OsString::from("/run/user/1/agentsh-launchers-0a1b2c3d4e5f"),
            ),
        ];
        drop_launcher_dir(&mut named);
        assert_eq!(
            named,
            [(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))]
        );
        // Codex keeps PATH and drops the variable: the directory is known by its name.
        let mut scrubbed = vec![(OsString::from("PATH"), OsString::from(path))];
        drop_launcher_dir(&mut scrubbed);
        assert_eq!(scrubbed[0].1, "/usr/bin:/bin");
    }

    fn vars(names: &[&str]) -> Vec<(OsString, OsString)> {
        names
            .iter()
            .map(|n| (OsString::from(n), OsString::from("v")))
            .collect()
    }

    fn kept(f: &Filtered) -> Vec<String> {
        f.kept
            .iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_brokered_placeholder_is_not_a_credential() {
        let none = |_: &str| false;
        let rules = EnvRules {
            allow: &none,
            allow_is_set: false,
            deny: &none,
            deny_is_set: false,
        };
        let vars = vec![
            (
                OsString::from("GITHUB_TOKEN"),
                OsString::from("agentsh-placeholder-github-token-0123456789abcdef01234567"),
            ),
            (OsString::from("NPM_TOKEN"), OsString::from("npm_real")),
        ];
        let f = filter(vars, &rules);
        assert_eq!(kept(&f), ["GITHUB_TOKEN"]);
        assert_eq!(f.removed, ["NPM_TOKEN"]);
        // The policy's own deny still removes it.
        let github = |n: &str| n == "GITHUB_TOKEN";
        let denying = EnvRules {
            deny: &github,
            deny_is_set: true,
            ..rules
        };
        let vars = vec![(
            OsString::from("GITHUB_TOKEN"),
            OsString::from("agentsh-placeholder-github-token-0123456789abcdef01234567"),
        )];
        assert!(filter(vars, &denying).kept.is_empty());
    }

    #[test]
    fn only_the_variable_s_own_placeholder_passes_as_one() {
        let none = |_: &str| false;
        let rules = EnvRules {
            allow: &none,
            allow_is_set: false,
            deny: &none,
            deny_is_set: false,
        };
        let var = |name: &str, value: &str| (OsString::from(name), OsString::from(value));
        let f = filter(
            vec![
                // Its own: passes.
                var(
                    "GITHUB_TOKEN",
                    "agentsh-placeholder-github-token-0123456789abcdef01234567",
                ),
                // A real key behind the prefix.
                var("NPM_TOKEN", "agentsh-placeholder-npm_realsecretvalue"),
                // Another variable's placeholder, or a suffix smuggled after one.
                var(
                    "OPENAI_API_KEY",
                    "agentsh-placeholder-github-token-0123456789abcdef01234567",
                ),
                var(
                    "ANTHROPIC_API_KEY",
                    "agentsh-placeholder-anthropic-api-key-0123456789abcdef01234567sk-ant-real",
                ),
                // Upper-case hex, too few digits: not what agentsh makes.
                var(
                    "GEMINI_API_KEY",
                    "agentsh-placeholder-gemini-api-key-0123456789ABCDEF01234567",
                ),
                var(
                    "HF_TOKEN",
                    "agentsh-placeholder-hf-token-0123456789abcdef0123456",
                ),
            ],
            &rules,
        );
        assert_eq!(kept(&f), ["GITHUB_TOKEN"]);
        assert_eq!(
            f.removed,
            [
                "ANTHROPIC_API_KEY",
                "GEMINI_API_KEY",
                "HF_TOKEN",
                "NPM_TOKEN",
                "OPENAI_API_KEY"
            ]
        );
    }

    #[test]
    fn default_strips_credentials_keeps_the_rest() {
        let none = |_: &str| false;
        let rules = EnvRules {
            allow: &none,
            allow_is_set: false,
            deny: &none,
            deny_is_set: false,
        };
        let f = filter(
            vars(&[
                "PATH",
                "HOME",
                "EDITOR",
                "GITHUB_TOKEN",
                "AWS_SECRET_ACCESS_KEY",
                "OPENAI_API_KEY",
                "SSH_AUTH_SOCK",
                "db_password",
                "KEYBOARD",
                "MONKEY",
            ]),
            &rules,
        );
        assert_eq!(kept(&f), ["PATH", "HOME", "EDITOR", "KEYBOARD", "MONKEY"]);
        assert_eq!(
            f.removed,
            [
                "AWS_SECRET_ACCESS_KEY",
                "GITHUB_TOKEN",
                "OPENAI_API_KEY",
                "SSH_AUTH_SOCK",
                "db_password"
            ]
        );
    }

    #[test]
    fn explicit_allow_passes_a_credential_but_deny_wins() {
        let allow = |n: &str| n == "GITHUB_TOKEN" || n == "NPM_TOKEN";
        let deny = |n: &str| n == "NPM_TOKEN";
        let rules = EnvRules {
            allow: &allow,
            allow_is_set: true,
            deny: &deny,
            deny_is_set: true,
        };
        let f = filter(
            vars(&["PATH", "LC_ALL", "GITHUB_TOKEN", "NPM_TOKEN", "EDITOR"]),
            &rules,
        );
        assert_eq!(kept(&f), ["PATH", "LC_ALL", "GITHUB_TOKEN"]);
        assert_eq!(f.removed, ["EDITOR", "NPM_TOKEN"]);
    }

    #[test]
    fn a_deny_list_alone_removes_what_it_names_and_passes_the_rest() {
        let none = |_: &str| false;
        let deny = |n: &str| n.starts_with("AWS_") || n == "ANTHROPIC_API_KEY";
        let rules = EnvRules {
            allow: &none,
            allow_is_set: false,
            deny: &deny,
            deny_is_set: true,
        };
        let f = filter(
            vars(&[
                "PATH",
                "GITHUB_TOKEN",
                "AWS_SECRET_ACCESS_KEY",
                "ANTHROPIC_API_KEY",
                "EDITOR",
            ]),
            &rules,
        );
        assert_eq!(kept(&f), ["PATH", "GITHUB_TOKEN", "EDITOR"]);
        assert_eq!(f.removed, ["ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY"]);
    }

    #[test]
    fn non_utf8_names_are_removed() {
        use std::os::unix::ffi::OsStringExt;
        let none = |_: &str| false;
        let rules = EnvRules {
            allow: &none,
            allow_is_set: false,
            deny: &none,
            deny_is_set: false,
        };
        let f = filter(
            vec![(OsString::from_vec(vec![0xff, b'A']), OsString::from("x"))],
            &rules,
        );
        assert!(f.kept.is_empty());
        assert_eq!(f.removed.len(), 1);
    }
}
