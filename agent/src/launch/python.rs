//! `python [options] (-m MODULE | SCRIPT | -c CODE | -) [args]`.

use super::argv::{Syntax, scan};
use super::target::{Target, python_module, script_targets};

const SYNTAX: Syntax = Syntax {
    with_value: &["-X", "-W", "--check-hash-based-pycs"],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &["-m", "-c"],
};

pub(super) fn targets(args: &[String]) -> Vec<Target> {
    let s = scan(args, &SYNTAX);
    match s.terminal(&SYNTAX) {
        Some(opt) if opt.name.is("-m") => opt
            .value
            .and_then(python_module)
            .map(Target::new)
            .into_iter()
            .collect(),
        // `-c CODE` runs no named module or file.
        Some(_) => Vec::new(),
        None => match s.operand() {
            Some(script) if script != "-" => script_targets(script),
            _ => Vec::new(),
        },
    }
}

/// `python`, `python3`, `python3.12`, `python3.13t`.
pub(super) fn is_python(program: &str) -> bool {
    match program.strip_prefix("python") {
        Some("") => true,
        Some(version) => {
            version.starts_with(|c: char| c.is_ascii_digit())
                && version
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.' || c == 't')
        }
        None => false,
    }
}
