//! Codex's `apply_patch` body: which files it adds, changes, deletes and moves, and the text
//! it adds.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: src/new.rs
//! +fn main() {}
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ fn old()
//! -a
//! +b
//! *** Delete File: src/gone.rs
//! *** End Patch
//! ```
//!
//! Read as Codex's own parser reads it: file headers at the start of a line (surrounding
//! whitespace trimmed, as Codex's lenient mode does), anything else belongs to the hunk it is
//! in. A body that is not a patch has no files, and says so.

/// What a patch touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchView {
    /// Every path added, updated, deleted or moved to (in order, deduplicated).
    pub paths: Vec<String>,
    /// The lines the patch adds (`+` lines), joined by newlines.
    pub added: String,
    /// Why the body is not a patch Codex would apply, if it is not.
    pub problem: Option<String>,
}

const HEADERS: [&str; 4] = [
    "*** Add File:",
    "*** Update File:",
    "*** Delete File:",
    "*** Move to:",
];

/// Reads an `apply_patch` body.
pub fn read(body: &str) -> PatchView {
    let mut view = PatchView::default();
    let mut begun = false;
    let mut ended = false;
    for line in body.lines() {
        let trimmed = line.trim();
        if trimmed == "*** Begin Patch" {
            begun = true;
            continue;
        }
        if trimmed == "*** End Patch" {
            ended = true;
            continue;
        }
        if let Some(path) = HEADERS
            .iter()
            .find_map(|h| trimmed.strip_prefix(h))
            .map(str::trim)
        {
            if !path.is_empty() && !view.paths.iter().any(|p| p == path) {
                view.paths.push(path.to_owned());
            }
            continue;
        }
        if let Some(added) = line.strip_prefix('+') {
            if !view.added.is_empty() {
                view.added.push('\n');
            }
            view.added.push_str(added);
        }
    }
    view.problem = match (begun, ended, view.paths.is_empty()) {
        (false, _, _) => Some("the patch has no `*** Begin Patch` line".to_owned()),
        (true, false, _) => Some("the patch has no `*** End Patch` line".to_owned()),
        (true, true, true) => Some("the patch names no file".to_owned()),
        (true, true, false) => None,
    };
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_header() {
        let view = read(
            "*** Begin Patch\n*** Add File: src/new.rs\n+fn main() {}\n+// x\n*** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn old()\n-a\n+b\n*** Delete File: /home/u/.ssh/authorized_keys\n*** End Patch\n",
        );
        assert_eq!(
            view.paths,
            [
                "src/new.rs",
                "src/lib.rs",
                "src/core.rs",
                "/home/u/.ssh/authorized_keys"
            ]
        );
        assert_eq!(view.added, "fn main() {}\n// x\nb");
        assert_eq!(view.problem, None);
    }

    #[test]
    fn lenient_whitespace_and_repeats() {
        let view = read(
            "  *** Begin Patch\n  *** Update File:   ~/.bashrc  \n+echo hi\n*** Update File: ~/.bashrc\n*** End Patch",
        );
        assert_eq!(view.paths, ["~/.bashrc"]);
    }

    #[test]
    fn what_is_not_a_patch() {
        assert!(read("rm -rf /").problem.is_some());
        assert!(
            read("*** Begin Patch\n*** Add File: a\n")
                .problem
                .unwrap()
                .contains("End Patch")
        );
        assert!(
            read("*** Begin Patch\n*** End Patch")
                .problem
                .unwrap()
                .contains("no file")
        );
        // A header inside a hunk's text is still a header to Codex.
        let view =
            read("*** Begin Patch\n*** Update File: a\n+x\n*** Add File: b\n+y\n*** End Patch");
        assert_eq!(view.paths, ["a", "b"]);
    }
}
