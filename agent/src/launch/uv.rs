//! uv and pipx: `uvx [options] PKG[@VERSION] [args]`, `uvx --from PKG CMD [args]`,
//! `uv [options] tool run ...`, `uv [options] run [options] (SCRIPT | CMD | -m MODULE)`,
//! `pipx run [--spec PKG] APP [args]`.

use super::argv::{Syntax, scan};
use super::python;
use super::target::{Target, python_module, python_requirement, script_targets};

/// uv's options that take a value (global ones included: clap accepts them anywhere before
/// the command). Everything else is a switch.
const UV_VALUE_OPTIONS: &[&str] = &[
    "--from",
    "--with",
    "--with-editable",
    "--with-requirements",
    "-p",
    "--python",
    "-i",
    "--index",
    "--index-url",
    "--default-index",
    "--extra-index-url",
    "-f",
    "--find-links",
    "--index-strategy",
    "--keyring-provider",
    "--resolution",
    "--prerelease",
    "--exclude-newer",
    "--exclude-newer-package",
    "--link-mode",
    "-C",
    "--config-setting",
    "--config-settings-package",
    "-P",
    "--upgrade-package",
    "--reinstall-package",
    "--refresh-package",
    "--no-build-package",
    "--no-binary-package",
    "--no-build-isolation-package",
    "-c",
    "--constraints",
    "--overrides",
    "-b",
    "--build-constraints",
    "--cache-dir",
    "--directory",
    "--project",
    "--config-file",
    "--color",
    "--env-file",
    "--allow-insecure-host",
    "--python-platform",
    "--torch-backend",
    "--package",
    "--extra",
    "--group",
    "--only-group",
    "--no-group",
    "--no-extra",
];

const UVX: Syntax = Syntax {
    with_value: UV_VALUE_OPTIONS,
    without_value: &[],
    unknown_takes_value: false,
    terminal: &[],
};

/// `uv run` also takes `-m MODULE`.
const UV_RUN: Syntax = Syntax {
    with_value: UV_VALUE_OPTIONS,
    without_value: &[],
    unknown_takes_value: false,
    terminal: &["-m", "--module"],
};

const PIPX: Syntax = Syntax {
    with_value: &[
        "--spec",
        "--python",
        "--pip-args",
        "--index-url",
        "--backend",
    ],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &[],
};

/// `uvx ARGS` (`uv tool run ARGS`).
pub(super) fn uvx(args: &[String]) -> Vec<Target> {
    let s = scan(args, &UVX);
    tool(s.value(&["--from"]), s.operand())
}

/// The package a tool comes from, then the tool (itself a package name without `--from`).
fn tool(from: Option<&str>, command: Option<&str>) -> Vec<Target> {
    from.into_iter()
        .chain(command)
        .filter_map(python_requirement)
        .map(Target::new)
        .collect()
}

pub(super) fn uv(args: &[String]) -> Vec<Target> {
    let global = scan(args, &UVX);
    match global.rest {
        [tool, run, rest @ ..] if tool == "tool" && run == "run" => uvx(rest),
        [run, rest @ ..] if run == "run" => uv_run(rest),
        _ => Vec::new(),
    }
}

fn uv_run(args: &[String]) -> Vec<Target> {
    let s = scan(args, &UV_RUN);
    if let Some(module) = s.terminal(&UV_RUN) {
        return module
            .value
            .and_then(python_module)
            .map(Target::new)
            .into_iter()
            .collect();
    }
    match s.rest {
        [program, rest @ ..] if python::is_python(basename(program)) => python::targets(rest),
        [script, ..] if script.ends_with(".py") || script.contains('/') => script_targets(script),
        [command, ..] => tool(None, Some(command)),
        [] => Vec::new(),
    }
}

pub(super) fn pipx(args: &[String]) -> Vec<Target> {
    let [run, rest @ ..] = args else {
        return Vec::new();
    };
    if run != "run" {
        return Vec::new();
    }
    let s = scan(rest, &PIPX);
    tool(s.value(&["--spec"]), s.operand())
}

fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}
