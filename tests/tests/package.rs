//! The deb, built from this build's binaries and installed into a fresh Debian root (a
//! debootstrap minbase of bookworm that scripts/setup.sh keeps in /var/cache/agentsh): its
//! files and permissions, the agentsh group, the service enabled, the unit accepted by
//! systemd-analyze; removal keeps the configuration and state, purge removes them. Needs
//! root (chroot), as CI runs.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentsh_tests::packages::{build_deb, built, run, stage, unpack};
use agentsh_tests::{repo_root, run_bounded};

/// The fresh root's tarball, made by scripts/setup.sh.
const ROOT_TARBALL: &str = "/var/cache/agentsh/bookworm-minbase-ca.tar";

/// A fresh Debian root in `dir/root`.
fn fresh_root(dir: &Path) -> PathBuf {
    assert!(
        Path::new(ROOT_TARBALL).is_file(),
        "no {ROOT_TARBALL}: run scripts/setup.sh --tests (make test does)"
    );
    unpack(Path::new(ROOT_TARBALL), &dir.join("root"))
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn the_deb_installs_into_a_fresh_root_and_removes_cleanly() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: installing into a chroot needs root (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let deb = build_deb(dir.path());

    // What the archive holds, before anything is installed.
    let contents = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    for (mode, path) in [
        ("-rwxr-xr-x", "./usr/bin/agentshd"),
        ("-rwxr-xr-x", "./usr/bin/agentshctl"),
        ("-rwxr-xr-x", "./usr/bin/agentsh-shim"),
        ("-rw-r--r--", "./etc/agentsh/agentsh.yaml"),
        ("-rw-r--r--", "./etc/agentsh/policies/default.yaml"),
        ("-rw-r--r--", "/systemd/system/agentshd.service"),
    ] {
        assert!(
            contents
                .lines()
                .any(|l| l.starts_with(mode) && l.ends_with(path)),
            "{path} ({mode}) not in:\n{contents}"
        );
    }
    // Configuration is the administrator's: an upgrade never overwrites it.
    let control = dir.path().join("control");
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(&deb)
        .arg(&control));
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap_or_default();
    for file in [
        "/etc/agentsh/agentsh.yaml",
        "/etc/agentsh/policies/default.yaml",
    ] {
        assert!(
            conffiles.lines().any(|l| l == file),
            "{file} not in conffiles:\n{conffiles}"
        );
    }
    let info = run(Command::new("dpkg-deb").arg("--info").arg(&deb));
    assert!(info.contains("Package: agentsh"), "{info}");
    // agentshd does not start without system roots (upstream TLS).
    assert!(
        info.lines()
            .any(|l| l.trim_start().starts_with("Depends:") && l.contains("ca-certificates")),
        "{info}"
    );

    // A fresh root, the package installed in it.
    let root = fresh_root(dir.path());
    std::fs::copy(&deb, root.join("tmp/agentsh.deb")).unwrap();
    let chroot = |args: &[&str]| run(Command::new("chroot").arg(&root).args(args));
    chroot(&["dpkg", "-i", "/tmp/agentsh.deb"]);

    for binary in ["agentshd", "agentshctl", "agentsh-shim"] {
        assert_eq!(mode(&root.join("usr/bin").join(binary)), 0o755, "{binary}");
    }
    assert_eq!(mode(&root.join("etc/agentsh/agentsh.yaml")), 0o644);
    let group = std::fs::read_to_string(root.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l.starts_with("agentsh:")), "{group}");
    // The binaries run in the new root.
    let version = chroot(&["agentshctl", "--version"]);
    assert!(version.contains("agentshctl"), "{version}");
    // The installed policy loads.
    chroot(&[
        "agentshctl",
        "policy",
        "check",
        "/etc/agentsh/policies/default.yaml",
    ]);
    // Enabled at boot.
    let unit = ["lib/systemd/system", "usr/lib/systemd/system"]
        .iter()
        .map(|d| root.join(d).join("agentshd.service"))
        .find(|p| p.is_file())
        .expect("the unit installed");
    // (A link to the unit's path in the root: read, not followed on the host.)
    let wanted = root.join("etc/systemd/system/multi-user.target.wants/agentshd.service");
    let target = std::fs::read_link(&wanted).unwrap_or_default();
    assert!(
        target.ends_with("systemd/system/agentshd.service"),
        "the service is not enabled ({})",
        target.display()
    );
    // systemd reads the installed unit, its binary the one installed in the root (the root
    // has no systemd of its own to check against).
    let installed = std::fs::read_to_string(&unit).unwrap().replace(
        "/usr/bin/agentshd",
        &root.join("usr/bin/agentshd").display().to_string(),
    );
    let copy = dir.path().join("agentshd.service");
    std::fs::write(&copy, installed).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .expect("systemd-analyze");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );

    // Removal keeps configuration and state; purge takes them.
    std::fs::create_dir_all(root.join("var/lib/agentsh")).unwrap();
    std::fs::write(root.join("var/lib/agentsh/events.redb"), b"state").unwrap();
    chroot(&["dpkg", "-r", "agentsh"]);
    assert!(!root.join("usr/bin/agentshd").exists());
    assert!(root.join("etc/agentsh/agentsh.yaml").exists());
    assert!(root.join("var/lib/agentsh/events.redb").exists());
    chroot(&["dpkg", "-P", "agentsh"]);
    assert!(!root.join("etc/agentsh/agentsh.yaml").exists());
    assert!(!root.join("var/lib/agentsh").exists());
}

#[test]
fn the_rpm_holds_the_same_files_and_installs_with_rpm() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: installing into a chroot needs root (CI runs as root)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = stage(dir.path());
    let mut cmd = Command::new("cargo");
    cmd.args(["generate-rpm", "-p", "agent", "--target-dir"])
        .arg(&target)
        .arg("-o")
        .arg(dir.path())
        .current_dir(repo_root());
    let out = run_bounded(cmd, b"", std::time::Duration::from_secs(600));
    assert!(out.status.success(), "cargo generate-rpm: {}", out.stderr);
    let rpm = built(dir.path(), "rpm");

    let files = run(Command::new("rpm")
        .args(["-qp", "--qf", "[%{FILEMODES:perms} %{FILENAMES}\\n]"])
        .arg(&rpm));
    for line in [
        "-rwxr-xr-x /usr/bin/agentshd",
        "-rwxr-xr-x /usr/bin/agentshctl",
        "-rwxr-xr-x /usr/bin/agentsh-shim",
        "-rw-r--r-- /etc/agentsh/agentsh.yaml",
        "-rw-r--r-- /etc/agentsh/policies/default.yaml",
        "-rw-r--r-- /usr/lib/systemd/system/agentshd.service",
    ] {
        assert!(files.lines().any(|l| l == line), "{line} not in:\n{files}");
    }
    let config = run(Command::new("rpm").arg("-qcp").arg(&rpm));
    assert!(
        config.lines().any(|l| l == "/etc/agentsh/agentsh.yaml"),
        "{config}"
    );
    let requires = run(Command::new("rpm").arg("-qpR").arg(&rpm));
    assert!(
        requires.lines().any(|l| l.trim() == "ca-certificates"),
        "{requires}"
    );
    let scripts = run(Command::new("rpm").args(["-qp", "--scripts"]).arg(&rpm));
    assert!(scripts.contains("groupadd --system agentsh"), "{scripts}");

    // Installed by rpm into a fresh root (its scriptlets run there).
    let root = fresh_root(dir.path());
    let rpm_in = |args: &[&str]| run(Command::new("rpm").arg("--root").arg(&root).args(args));
    rpm_in(&["--initdb"]);
    rpm_in(&[
        "-i",
        "--nodeps",
        "--nosignature",
        &rpm.display().to_string(),
    ]);
    assert_eq!(mode(&root.join("usr/bin/agentshd")), 0o755);
    assert_eq!(mode(&root.join("etc/agentsh/agentsh.yaml")), 0o644);
    let group = std::fs::read_to_string(root.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l.starts_with("agentsh:")), "{group}");
    std::fs::create_dir_all(root.join("var/lib/agentsh")).unwrap();
    std::fs::write(root.join("var/lib/agentsh/events.redb"), b"state").unwrap();
    rpm_in(&["-e", "--nodeps", "agentsh"]);
    assert!(!root.join("usr/bin/agentshd").exists());
    // rpm leaves data behind.
    assert!(root.join("var/lib/agentsh/events.redb").exists());
}
