//! JavaScript runtimes: `node [options] SCRIPT [args]`, and the `bun` and `deno` forms the
//! shim's default id should also understand.

use super::argv::{Syntax, scan};
use super::npm;
use super::target::{Target, npm_package, script_targets};

/// Node's options that take a value as the next argument. Those whose value is optional
/// (`--inspect[=port]`) only take one after `=`, so they are switches here.
const NODE: Syntax = Syntax {
    with_value: &[
        "-r",
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "-C",
        "--conditions",
        "--title",
        "--input-type",
        "--env-file",
        "--env-file-if-exists",
        "--watch-path",
        "--disable-warning",
        "--redirect-warnings",
        "--diagnostic-dir",
        "--report-dir",
        "--report-directory",
        "--report-filename",
        "--report-signal",
        "--cpu-prof-dir",
        "--cpu-prof-name",
        "--cpu-prof-interval",
        "--heap-prof-dir",
        "--heap-prof-name",
        "--heap-prof-interval",
        "--icu-data-dir",
        "--openssl-config",
        "--tls-cipher-list",
        "--tls-keylog",
        "--unhandled-rejections",
        "--secure-heap",
        "--secure-heap-min",
        "--experimental-policy",
        "--policy-integrity",
        "--dns-result-order",
        "--trace-event-categories",
        "--trace-event-file-pattern",
        "--test-reporter",
        "--test-reporter-destination",
        "--test-name-pattern",
        "--test-skip-pattern",
        "--test-shard",
        "--localstorage-file",
        "--max-http-header-size",
        "--experimental-sea-config",
        "--snapshot-blob",
        "--run",
    ],
    without_value: &[],
    unknown_takes_value: false,
    // Code on the command line runs no named script.
    terminal: &["-e", "--eval", "-p", "--print"],
};

const DENO: Syntax = Syntax {
    with_value: &[
        "-c",
        "--config",
        "--import-map",
        "--lock",
        "--cert",
        "--location",
        "--seed",
        "--env-file",
        "-L",
        "--log-level",
    ],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &[],
};

/// Bun's flags before the script are switches or `--flag=value`.
const BUN: Syntax = Syntax {
    with_value: &["-r", "--preload", "--cwd", "--env-file", "--config", "-c"],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &["-e", "--eval", "-p", "--print"],
};

pub(super) fn node(args: &[String]) -> Vec<Target> {
    script(args, &NODE)
}

pub(super) fn bun(args: &[String]) -> Vec<Target> {
    match args.split_first() {
        Some((x, rest)) if x == "x" => npm::exec(rest),
        Some((run, rest)) if run == "run" => script(rest, &BUN),
        _ => script(args, &BUN),
    }
}

pub(super) fn deno(args: &[String]) -> Vec<Target> {
    match args.split_first() {
        Some((run, rest)) if run == "run" => script(rest, &DENO),
        _ => Vec::new(),
    }
}

fn script(args: &[String], syntax: &Syntax) -> Vec<Target> {
    let s = scan(args, syntax);
    if s.terminal(syntax).is_some() {
        return Vec::new();
    }
    let Some(operand) = s.operand().filter(|o| *o != "-") else {
        return Vec::new();
    };
    // Deno runs registry packages directly: `deno run npm:@scope/pkg`, `jsr:@scope/pkg`.
    match operand
        .strip_prefix("npm:")
        .or_else(|| operand.strip_prefix("jsr:"))
    {
        Some(spec) => npm_package(spec).map(Target::new).into_iter().collect(),
        None => script_targets(operand),
    }
}
