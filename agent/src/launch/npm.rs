//! npx and its kin (`npm exec`, `pnpm dlx`, `yarn dlx`, `bunx`):
//! `npx [options] PKG[@VERSION] [args]`, `npx -p PKG [-p PKG]... CMD [args]`,
//! `npx -p PKG -c 'CMD args'`.

use super::argv::{Syntax, scan};
use super::target::{Target, npm_package};

/// npm's options that take a value; any other `--flag` is a switch (npm reads unknown config
/// flags as booleans unless written `--flag=value`).
const SYNTAX: Syntax = Syntax {
    with_value: &[
        "-p",
        "--package",
        "-c",
        "--call",
        "-w",
        "--workspace",
        "--registry",
        "--cache",
        "--prefix",
        "--userconfig",
        "--globalconfig",
        "--loglevel",
        "--shell",
        "--script-shell",
        "--node-options",
        "--scope",
        "--tag",
        "--proxy",
        "--https-proxy",
        "--noproxy",
        "--ca",
        "--cafile",
        "--cert",
        "--key",
        "--fetch-timeout",
        "--fetch-retries",
        "--before",
        "--otp",
        // npx 6 options that npm 7+ still consumes (and ignores).
        "--npm",
        "--node-arg",
        "-n",
    ],
    without_value: &[],
    unknown_takes_value: false,
    terminal: &[],
};

/// What `npx ARGS` runs: the `-p` packages and the command, or else the package operand.
pub(super) fn exec(args: &[String]) -> Vec<Target> {
    let s = scan(args, &SYNTAX);
    let packages = s
        .values(&["-p", "--package"])
        .filter_map(npm_package)
        .map(Target::new);
    // With `-c` the operand-free shell line names a bin; with `-p` the operand does.
    let call = s
        .value(&["-c", "--call"])
        .and_then(|line| line.split_whitespace().next());
    let has_packages = s.values(&["-p", "--package"]).next().is_some();
    let command = match (call, s.operand()) {
        (Some(bin), _) => bin_name(bin),
        (None, Some(bin)) if has_packages => bin_name(bin),
        (None, Some(spec)) => npm_package(spec),
        (None, None) => None,
    };
    packages.chain(command.map(Target::new)).collect()
}

/// A bin is run by name; a path to one names it by its file.
fn bin_name(bin: &str) -> Option<String> {
    let name = bin.rsplit('/').next().unwrap_or(bin);
    (!name.is_empty()).then(|| name.to_owned())
}

/// `npm exec ...` / `npm x ...`, `pnpm dlx ...`, `yarn dlx ...`: the npx part, if any.
pub(super) fn subcommand<'a>(args: &'a [String], names: &[&str]) -> Option<&'a [String]> {
    let (first, rest) = args.split_first()?;
    names.contains(&first.as_str()).then_some(rest)
}
