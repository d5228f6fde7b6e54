//! Building the packages from this build's binaries, for the tests that install them
//! (`package`, `systemd_boot`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{bin, repo_root, run_bounded};

/// Runs `cmd`, which must succeed; its stdout.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// This build's binaries (the debug ones `make test` built), stripped into `dir/target/release`
/// as `make packages` stages its own (the tools take minutes over half a gigabyte of debug
/// information); the staging target directory.
pub fn stage(dir: &Path) -> PathBuf {
    let target = dir.join("target");
    std::fs::create_dir_all(target.join("release")).unwrap();
    for binary in ["agentshd", "agentshctl", "agentsh-shim"] {
        run(Command::new("strip")
            .arg("-o")
            .arg(target.join("release").join(binary))
            .arg(bin(binary)));
    }
    target
}

/// The one file with `extension` in `dir`.
pub fn built(dir: &Path, extension: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == extension))
        .unwrap_or_else(|| panic!("no .{extension} in {}", dir.display()))
}

/// `cargo deb` of the staged binaries into `dir`; the .deb's path.
pub fn build_deb(dir: &Path) -> PathBuf {
    let target = stage(dir);
    let mut cmd = Command::new("cargo");
    cmd.args(["deb", "-p", "agentsh", "--no-build", "--no-strip", "--fast"])
        .arg("--output")
        .arg(dir)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(repo_root());
    let out = run_bounded(cmd, b"", std::time::Duration::from_secs(600));
    assert!(out.status.success(), "cargo deb: {}", out.stderr);
    built(dir, "deb")
}

/// `tarball` unpacked into `root` (made here): a fresh Debian root.
pub fn unpack(tarball: &Path, root: &Path) -> PathBuf {
    std::fs::create_dir(root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    run(Command::new("tar")
        .arg("-xf")
        .arg(tarball)
        .arg("-C")
        .arg(root));
    root.to_owned()
}
