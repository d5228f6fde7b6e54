//! Canonical forms of argument values, so a rule written for `/home/*/.ssh/**` or
//! `http://169.254.169.254/**` also catches `/home/u/project/../../u/.ssh/id`, `//etc///passwd/`,
//! `FILE:///%65tc/passwd` and `http://%31%36%39.254.169.254\latest`.
//!
//! URLs are read the way servers read them: with a WHATWG URL parser (the `url` crate follows
//! the same standard as Node's `URL` and undici's `fetch`), so tabs, backslashes, missing
//! slashes, percent-encoded or fullwidth hosts and numeric IPv4 forms all resolve to the host
//! the server would connect to.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// The spellings of one argument value that rules are matched against.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Forms {
    /// The value as a server most likely acts on it, when that differs from the raw value.
    /// Allow and audit rules judge only this (or the raw value when it is `None`).
    pub canonical: Option<String>,
    /// Further spellings that only block rules try: a trailing-slash variant, a `/proc/self/root`
    /// alias removed, a relative `..` path anchored at `/`.
    pub block_only: Vec<String>,
}

/// The forms of `value`. Plain words (no path or URL syntax) have none: nothing to compute.
pub fn forms(value: &str) -> Forms {
    if !value.contains(['/', '\\', '~', ':', '%']) {
        return Forms::default();
    }
    let mut forms = Forms::default();
    let canonical = match url_of(value) {
        Some(url) if url.scheme() == "file" => url
            .to_file_path()
            .ok()
            .and_then(|p| p.to_str().map(normalize_path)),
        Some(url) => Some(canonical_url(&url)),
        None if value.contains('/') || value.starts_with('~') => Some(normalize_path(value.trim())),
        None => None,
    };
    if let Some(canonical) = canonical {
        for extra in block_variants(&canonical) {
            if extra != value && extra != canonical && !forms.block_only.contains(&extra) {
                forms.block_only.push(extra);
            }
        }
        if canonical != value {
            forms.canonical = Some(canonical);
        }
    }
    forms
}

/// A value that a WHATWG parser reads as a URL with a special scheme (http, https, ws, wss,
/// ftp) or `file`. Anything else (`mailto:`, `C:/x`, plain text) is not a URL here.
fn url_of(value: &str) -> Option<Url> {
    let url = Url::parse(value).ok()?;
    match url.scheme() {
        "http" | "https" | "ws" | "wss" | "ftp" => url.host().is_some().then_some(url),
        "file" => Some(url),
        _ => None,
    }
}

/// scheme://host[:port]/path[?query]: no userinfo, no fragment, default ports dropped (the
/// parser does that), IPv4-mapped and NAT64 IPv6 hosts written as the IPv4 address they reach.
fn canonical_url(url: &Url) -> String {
    let host = match url.host() {
        Some(Host::Ipv6(v6)) => match embedded_ipv4(v6) {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
        Some(Host::Ipv4(v4)) => v4.to_string(),
        Some(Host::Domain(d)) => d.trim_end_matches('.').to_owned(),
        None => String::new(),
    };
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    format!("{}://{host}{port}{}{query}", url.scheme(), url.path())
}

/// `::ffff:a.b.c.d` and `64:ff9b::a.b.c.d` reach the IPv4 address they embed.
fn embedded_ipv4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return Some(Ipv4Addr::new(a, b, c, d));
    }
    None
}

/// Spellings of a canonical value that reach the same place.
fn block_variants(canonical: &str) -> Vec<String> {
    let mut out = Vec::new();
    if canonical.contains("://") {
        // `http://h/` and `http://h` name the same resource; patterns are written either way.
        match canonical.strip_suffix('/') {
            Some(bare) if !bare.ends_with(':') && !bare.ends_with('/') => out.push(bare.to_owned()),
            _ if !canonical.contains('?') => out.push(format!("{canonical}/")),
            _ => {}
        }
        return out;
    }
    if let Some(rest) = strip_proc_root(canonical) {
        out.push(rest);
    }
    // `../../../etc/x` escapes the server's working directory; wherever that is, enough `..`
    // reach `/`, so block rules also see the path anchored there.
    if canonical.starts_with("../") {
        let anchored = canonical.trim_start_matches("../");
        out.push(normalize_path(&format!("/{anchored}")));
    }
    out
}

/// `/proc/self/root/etc/x` (also `thread-self` and numeric pids) is `/etc/x`.
fn strip_proc_root(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/proc/")?;
    let (pid, rest) = rest.split_once('/')?;
    let pid_ok = pid == "self" || pid == "thread-self" || pid.bytes().all(|b| b.is_ascii_digit());
    let rest = rest.strip_prefix("root")?;
    (pid_ok && (rest.is_empty() || rest.starts_with('/')))
        .then(|| normalize_path(if rest.is_empty() { "/" } else { rest }))
}

/// Lexical clean, as Go's `filepath.Clean`: one slash between components, no `.`, `..` folded
/// into its parent (never above the root), no trailing slash.
pub fn normalize_path(path: &str) -> String {
    if is_clean(path) {
        // Most paths an agent sends are clean already; skip the split and join.
        return path.to_owned();
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Whether `normalize_path` would return `path` unchanged: no empty, `.` or `..` component
/// (the leading empty one of an absolute path aside), and not empty.
fn is_clean(path: &str) -> bool {
    let rest = path.strip_prefix('/').unwrap_or(path);
    !rest.is_empty() && rest.split('/').all(|part| !matches!(part, "" | "." | ".."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(value: &str) -> Option<String> {
        forms(value).canonical
    }

    fn all(value: &str) -> Vec<String> {
        let f = forms(value);
        f.canonical.into_iter().chain(f.block_only).collect()
    }

    #[test]
    fn paths_are_cleaned() {
        assert_eq!(
            normalize_path("/home/user/project/../../user/.ssh/id_ed25519"),
            "/home/user/.ssh/id_ed25519"
        );
        assert_eq!(normalize_path("//etc///passwd/"), "/etc/passwd");
        assert_eq!(normalize_path("/../../etc/./shadow"), "/etc/shadow");
        assert_eq!(normalize_path("a/../../b"), "../b");
        assert_eq!(normalize_path("./"), ".");
        assert_eq!(normalize_path("~/.aws/credentials/"), "~/.aws/credentials");
        // Already clean: returned as is.
        for clean in ["/home/u/src/main.rs", "src/lib.rs", "/a", "~/.ssh/id_rsa"] {
            assert_eq!(normalize_path(clean), clean);
        }
        assert_eq!(normalize_path("/"), "/");
        assert_eq!(normalize_path(""), ".");
    }

    #[test]
    fn urls_resolve_to_the_host_a_server_would_reach() {
        let metadata = "http://169.254.169.254/latest";
        for spelling in [
            "HTTP://User:pw@0xA9FEA9FE:80/latest",
            "http://2852039166/latest",
            "http://0251.0376.0251.0376/latest",
            "http://%31%36%39.254.169.254/latest",
            "http://\u{ff11}\u{ff16}\u{ff19}\u{3002}\u{ff12}\u{ff15}\u{ff14}\u{3002}\u{ff11}\u{ff16}\u{ff19}\u{3002}\u{ff12}\u{ff15}\u{ff14}/latest",
            "http://169.254.169.254\\latest",
            "http:169.254.169.254/latest",
            "http:/169.254.169.254/latest",
            "http://[::ffff:169.254.169.254]/latest",
            "http://[::ffff:a9fe:a9fe]/latest",
            "http://169.254.16\t9.254/latest",
            "\u{1}http://169.254.169.254/latest",
            "http://169.254.169.254/x/../latest#frag",
        ] {
            assert_eq!(
                canonical(spelling).as_deref(),
                Some(metadata),
                "{spelling:?}"
            );
        }
        assert_eq!(
            canonical("http://metadata.google.internal./computeMetadata/v1/").as_deref(),
            Some("http://metadata.google.internal/computeMetadata/v1/")
        );
        // The raw value is always tried; the other slash spelling is added for block rules.
        assert!(all("http://169.254.169.254/").contains(&"http://169.254.169.254".to_owned()));
        assert!(all("http://169.254.169.254").contains(&"http://169.254.169.254/".to_owned()));
        assert_eq!(canonical("mailto:someone@example.com"), None);
    }

    #[test]
    fn file_urls_and_path_aliases() {
        for spelling in [
            "file:/etc/cron.d/x",
            "FILE:///etc/cron.d/x",
            "file://LOCALHOST/etc/cron.d/x",
            "file:///%65tc/cron.d/x",
            "file:///etc/./cron.d//x",
        ] {
            assert_eq!(
                canonical(spelling).as_deref(),
                Some("/etc/cron.d/x"),
                "{spelling:?}"
            );
        }
        assert_eq!(
            canonical("file:///home/u/%2essh/id_rsa").as_deref(),
            Some("/home/u/.ssh/id_rsa")
        );
        assert!(all("/proc/self/root/etc/cron.d/x").contains(&"/etc/cron.d/x".to_owned()));
        assert!(all("/proc/1/root").contains(&"/".to_owned()));
        assert!(all("../../../../etc/cron.d/x").contains(&"/etc/cron.d/x".to_owned()));
        assert_eq!(forms("hello"), Forms::default());
        assert_eq!(canonical("/etc/passwd"), None);
        assert_eq!(canonical("/etc//passwd").as_deref(), Some("/etc/passwd"));
    }
}
