//! Canonical forms of argument values, so a rule written for `/home/*/.ssh/**` or
//! `http://169.254.169.254/**` also catches `/home/u/project/../../u/.ssh/id`, `//etc///passwd/`
//! and `http://user@0xA9FEA9FE/`.

use std::net::Ipv4Addr;

/// The canonical form of a value, when it has one that differs from the value.
pub fn canonical(value: &str) -> Option<String> {
    // Plain words (no path or URL syntax) have no other form: skip the work.
    if !value.contains(['/', '~', ':']) {
        return None;
    }
    let trimmed = value.trim();
    let normal = if let Some(path) = trimmed.strip_prefix("file://") {
        Some(normalize_path(
            path.strip_prefix("localhost").unwrap_or(path),
        ))
    } else if looks_like_url(trimmed) {
        normalize_url(trimmed)
    } else if trimmed.contains('/') || trimmed.starts_with('~') {
        Some(normalize_path(trimmed))
    } else {
        None
    };
    normal.filter(|n| n != value)
}

fn looks_like_url(s: &str) -> bool {
    match s.find("://") {
        Some(i) if i > 0 => s[..i]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'-' || b == b'.'),
        _ => false,
    }
}

/// Lexical clean, as Go's `filepath.Clean`: one slash between components, no `.`, `..` folded
/// into its parent (never above the root), no trailing slash.
pub fn normalize_path(path: &str) -> String {
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

/// scheme and host lowercased, userinfo and default ports dropped, numeric IPv4 hosts in
/// dotted form, a trailing dot removed from the host, the path cleaned.
pub fn normalize_url(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let hostport = authority
        .rsplit_once('@')
        .map_or(authority, |(_, hostport)| hostport);
    let (host, port) = split_port(hostport);
    let mut host = host.to_ascii_lowercase();
    while host.ends_with('.') {
        host.pop();
    }
    if let Some(ip) = parse_ipv4_loose(&host) {
        host = ip.to_string();
    }
    let port = match (scheme.as_str(), port) {
        ("http", Some("80")) | ("https", Some("443")) => None,
        (_, port) => port,
    };
    let (path, query) = match tail.find(['?', '#']) {
        Some(i) => tail.split_at(i),
        None => (tail, ""),
    };
    let path = if path.is_empty() {
        String::new()
    } else {
        let clean = normalize_path(path);
        if path.ends_with('/') && clean != "/" {
            format!("{clean}/")
        } else {
            clean
        }
    };
    let port = port.map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!("{scheme}://{host}{port}{path}{query}"))
}

fn split_port(hostport: &str) -> (&str, Option<&str>) {
    if hostport.starts_with('[') {
        // [v6]:port
        return match hostport.find(']') {
            Some(i) => {
                let port = hostport[i + 1..].strip_prefix(':');
                (&hostport[..=i], port)
            }
            None => (hostport, None),
        };
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => (host, Some(port)),
        _ => (hostport, None),
    }
}

/// IPv4 in the forms `inet_aton` accepts: `a.b.c.d`, `a.b.c`, `a.b`, `a`, each part decimal,
/// `0x` hex or `0` octal. Browsers and HTTP clients resolve these to the same address.
fn parse_ipv4_loose(host: &str) -> Option<Ipv4Addr> {
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'.' || b == b'x' || b == b'X')
    {
        return None;
    }
    let parts: Vec<u64> = host
        .split('.')
        .map(parse_part)
        .collect::<Option<Vec<_>>>()?;
    let value = match parts.as_slice() {
        [a] => *a,
        [a, b] if *a < 256 && *b < (1 << 24) => (a << 24) | b,
        [a, b, c] if *a < 256 && *b < 256 && *c < (1 << 16) => (a << 24) | (b << 16) | c,
        [a, b, c, d] if [a, b, c, d].iter().all(|p| **p < 256) => {
            (a << 24) | (b << 16) | (c << 8) | d
        }
        _ => return None,
    };
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

fn parse_part(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    if part.len() > 1 && part.starts_with('0') {
        return u64::from_str_radix(&part[1..], 8).ok();
    }
    part.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn urls_are_canonical() {
        assert_eq!(
            normalize_url("HTTP://User:pw@0xA9FEA9FE:80/latest/../latest/meta-data/").unwrap(),
            "http://169.254.169.254/latest/meta-data/"
        );
        assert_eq!(
            normalize_url("http://2852039166/x").unwrap(),
            "http://169.254.169.254/x"
        );
        assert_eq!(
            normalize_url("http://metadata.google.internal./computeMetadata/v1/").unwrap(),
            "http://metadata.google.internal/computeMetadata/v1/"
        );
        assert_eq!(
            normalize_url("https://[::1]:8443/a?b=../c").unwrap(),
            "https://[::1]:8443/a?b=../c"
        );
        assert_eq!(
            normalize_url("http://0251.0376.0251.0376").unwrap(),
            "http://169.254.169.254"
        );
    }

    #[test]
    fn canonical_skips_plain_words_and_identical_forms() {
        assert_eq!(canonical("hello"), None);
        assert_eq!(canonical("/etc/passwd"), None);
        assert_eq!(canonical("/etc//passwd").as_deref(), Some("/etc/passwd"));
        assert_eq!(
            canonical("file:///root/.ssh/id_rsa").as_deref(),
            Some("/root/.ssh/id_rsa")
        );
    }
}
