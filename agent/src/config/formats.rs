//! Checks for the few scalar formats the schema constrains: identifiers, digests, URLs.
//! Each returns a message fragment on failure; the caller adds the key path and position.

use std::net::Ipv6Addr;

/// Server ids end up in prefixed tool names, file names and log lines: keep them plain.
pub(crate) fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("must not be empty".into());
    }
    match id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        Some(c) => Err(format!(
            "`{id}` contains {c:?}; ids may only use letters, digits, `.`, `_` and `-`"
        )),
        None => Ok(()),
    }
}

/// Accepts `sha256:<64 hex>` or bare hex (colons between bytes allowed, as tools print them);
/// returns lowercase hex without prefix or separators.
pub(crate) fn normalize_sha256(value: &str) -> Result<String, String> {
    let trimmed = value.trim();
    let hex_part = match trimmed.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("sha256:") => &trimmed[7..],
        _ => trimmed,
    };
    let hex: String = hex_part.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "`{value}` is not a SHA-256 digest (expected `sha256:` followed by 64 hex digits)"
        ));
    }
    Ok(hex.to_ascii_lowercase())
}

/// A deliberately strict check of an absolute http(s) URL: scheme, host (name, IPv4 or
/// `[IPv6]`), optional port, optional path. Userinfo is refused: credentials do not belong in
/// a policy file.
pub(crate) fn check_http_url(url: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("`{url}` is not a valid http(s) URL: {why}"));
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("it contains whitespace or control characters");
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad("expected `http://` or `https://`");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return bad("the scheme must be http or https");
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return bad("credentials in the URL are not allowed");
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return bad("unclosed `[` in the host");
        };
        if addr.parse::<Ipv6Addr>().is_err() {
            return bad("invalid IPv6 address");
        }
        match after {
            "" => (addr, None),
            p => match p.strip_prefix(':') {
                Some(port) => (addr, Some(port)),
                None => return bad("unexpected characters after the IPv6 address"),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return bad("the host is missing");
    }
    let is_v6 = authority.starts_with('[');
    if !is_v6
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '~' | '%'))
    {
        return bad("the host contains invalid characters");
    }
    if let Some(port) = port
        && !matches!(port.parse::<u16>(), Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
    {
        return bad("the port must be a number from 1 to 65535");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(check_id("git-local_1.2").is_ok());
        assert!(check_id("").is_err());
        assert!(check_id("my server").is_err());
        assert!(check_id("a/b").is_err());
    }

    #[test]
    fn sha256() {
        let hex = "AB".repeat(32);
        let want = "ab".repeat(32);
        assert_eq!(normalize_sha256(&format!("sha256:{hex}")).unwrap(), want);
        assert_eq!(normalize_sha256(&format!("SHA256:{hex}")).unwrap(), want);
        assert_eq!(normalize_sha256(&hex).unwrap(), want);
        let colons: Vec<_> = (0..32).map(|_| "AB").collect();
        assert_eq!(normalize_sha256(&colons.join(":")).unwrap(), want);
        assert!(normalize_sha256("sha256:abc").is_err());
        assert!(normalize_sha256(&"g".repeat(64)).is_err());
        assert!(normalize_sha256("sha256:é").is_err());
    }

    #[test]
    fn urls() {
        for ok in [
            "https://mcp.example.com/mcp",
            "http://127.0.0.1:8080",
            "http://[::1]:3000/sse?x=1",
            "HTTPS://example.com",
        ] {
            assert!(check_http_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://example.com",
            "example.com",
            "https://",
            "https://user:pw@example.com/",
            "https://example.com:0/",
            "https://example.com:99999/",
            "https://exa mple.com/",
            "http://[zz]/",
            "http://[::1/",
            "https:///path",
            "http://a:b:80/",
        ] {
            assert!(check_http_url(bad).is_err(), "{bad}");
        }
    }
}
