//! Policy and daemon config loading (`agentsh::config`), on any text a user or a repository
//! can put in a policy or config file: never panics; a file that does not load says why with
//! at least one diagnostic, each at a position inside the file (1-based line and column, the
//! line at most one past the last); a policy that loads compiles or fails cleanly.
#![no_main]

use std::path::Path;

use agentsh::config::{ConfigError, load_daemon_str, load_str};
use libfuzzer_sys::fuzz_target;

fn check_error(src: &str, error: &ConfigError) {
    let diagnostics = error.diagnostics();
    assert!(
        !diagnostics.is_empty(),
        "an error without a diagnostic: {error}"
    );
    // Lines by any convention a YAML reader may count (an upper bound).
    let lines = 1 + src
        .matches(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
        .count();
    for d in diagnostics {
        assert!(
            d.line >= 1 && d.column >= 1,
            "a diagnostic without a position: {d}"
        );
        assert!(
            d.line <= lines + 1,
            "a diagnostic past the end of the file ({lines} lines): {d}"
        );
        assert!(!d.message.is_empty());
    }
    let _ = error.to_string();
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let src = String::from_utf8_lossy(rest);
    if selector % 2 == 0 {
        match load_str(&src, "policy.yaml") {
            Ok(policy) => {
                for warning in &policy.warnings {
                    assert!(warning.line >= 1 && warning.column >= 1, "{warning}");
                }
                let _ = agentsh::engine::Rules::compile(policy);
            }
            Err(error) => check_error(&src, &error),
        }
    } else {
        match load_daemon_str(&src, "agentsh.yaml", Path::new("/etc/agentsh")) {
            Ok(config) => {
                for warning in &config.warnings {
                    assert!(warning.line >= 1 && warning.column >= 1, "{warning}");
                }
            }
            Err(error) => check_error(&src, &error),
        }
    }
});
