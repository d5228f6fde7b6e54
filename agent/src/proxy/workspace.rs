//! Where the process behind a connection works: its working directory and its user's home,
//! which the agents' own tools take relative and `~` paths from.

use std::os::unix::fs::MetadataExt;

use crate::native::Workspace;

/// The workspace of process `pid` (its cwd; the home of `uid`, or of its owner when the uid
/// is not known). What cannot be read stays unknown: rules then see paths as written.
pub fn of_process(pid: Option<u32>, uid: Option<u32>) -> Workspace {
    let Some(pid) = pid else {
        return Workspace {
            home: uid.and_then(home_of),
            cwd: None,
        };
    };
    let proc = format!("/proc/{pid}");
    let cwd = std::fs::read_link(format!("{proc}/cwd"))
        .ok()
        .and_then(|p| p.to_str().map(str::to_owned));
    let uid = uid.or_else(|| std::fs::metadata(&proc).ok().map(|m| m.uid()));
    Workspace {
        home: uid.and_then(home_of),
        cwd,
    }
}

fn home_of(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    user.dir.to_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process() {
        let me = of_process(Some(std::process::id()), None);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(me.cwd.as_deref(), cwd.to_str());
        let uid = nix::unistd::getuid().as_raw();
        assert_eq!(me.home, home_of(uid));
        assert!(me.home.is_some());
        assert_eq!(of_process(None, None), Workspace::default());
    }
}
