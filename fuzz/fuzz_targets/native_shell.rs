//! The agents' own tools as agentsh reads them (`agentsh::native`): the shell analyzer, the
//! `apply_patch` reader, Codex's code-mode source reader and the host-call reader, on what a
//! model writes:
//! - nothing panics, and the shell view stays within its bounds;
//! - wrapping a command in `bash -c '…'` hides nothing: every program it runs, every path it
//!   writes and its network reach are still seen;
//! - every path a patch touches is written in the patch.
#![no_main]

use agentsh::native::catalog::TOOLS;
use agentsh::native::{Workspace, code_mode, patch, read, shell};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn bounded(view: &shell::CommandView) {
    const MAX: usize = 4096;
    for (what, len) in [
        ("scripts", view.scripts.len()),
        ("commands", view.commands.len()),
        ("programs", view.programs.len()),
        ("pipelines", view.pipelines.len()),
        ("writes", view.writes.len()),
        ("reads", view.reads.len()),
        ("urls", view.urls.len()),
    ] {
        assert!(len <= MAX, "{len} {what}");
    }
}

fn quoted(command: &str) -> String {
    format!("'{}'", command.replace('\'', r"'\''"))
}

/// `native::shell::analyze` (a panic fails the target; the one found at a multi-byte
/// character before `://` is fixed, its reproducers in fuzz/regressions/native_shell/).
fn analyze(command: &str, home: Option<&str>) -> Option<shell::CommandView> {
    Some(shell::analyze(command, home))
}

fn check_shell(command: &str) {
    let home = Some("/home/dev");
    let Some(view) = analyze(command, home) else {
        return;
    };
    bounded(&view);
    if view.unreadable.is_some() || command.len() > 4096 || view.scripts.len() > 16 {
        return;
    }
    let Some(wrapped) = analyze(&format!("bash -c {}", quoted(command)), home) else {
        return;
    };
    bounded(&wrapped);
    if wrapped.unreadable.is_some() {
        return;
    }
    for program in &view.programs {
        assert!(
            wrapped.programs.contains(program),
            "`bash -c` hides the program {program:?} of {command:?}: {wrapped:?}"
        );
    }
    for path in &view.writes {
        assert!(
            wrapped.writes.contains(path),
            "`bash -c` hides the write to {path:?} of {command:?}: {wrapped:?}"
        );
    }
    assert!(
        !view.network || wrapped.network,
        "`bash -c` hides the network use of {command:?}"
    );
    assert!(
        !view.downloads_to_interpreter || wrapped.downloads_to_interpreter,
        "`bash -c` hides a download run by a shell in {command:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match selector % 4 {
        0 => check_shell(&text),
        1 => {
            let view = patch::read(&text);
            for path in &view.paths {
                assert!(
                    text.contains(path.as_str()),
                    "the patch does not name {path:?}"
                );
            }
        }
        2 => {
            if let Ok(calls) = code_mode::calls(&text) {
                for call in calls {
                    assert!(
                        text.contains(call.name.as_str()),
                        "the source does not name {:?}",
                        call.name
                    );
                }
            }
        }
        _ => {
            // A host tool's call with JSON arguments (or a command string).
            let tool = TOOLS[usize::from(selector / 4) % TOOLS.len()];
            let arguments = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                _ => {
                    let mut map = Map::new();
                    for field in [
                        "command",
                        "cmd",
                        "file_path",
                        "path",
                        "url",
                        "patch",
                        "input",
                    ] {
                        map.insert(field.to_owned(), Value::String(text.to_string()));
                    }
                    map
                }
            };
            let workspace = Workspace {
                home: Some("/home/dev".into()),
                cwd: Some("/home/dev/project".into()),
            };
            let call = read(tool.name, &arguments, &workspace);
            let _ = call.category.as_str();
        }
    }
});
