//! The broker on requests as the SDKs and an attacker would send them, and the vault on each
//! kind of source.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use base64::Engine as _;
use http::{HeaderMap, HeaderValue, Uri};

use super::*;
use crate::config::{SecretConfig, SecretDestination, SecretSource};

const ANTHROPIC: &str = "sk-ant-api03-real-anthropic-key-0123456789";
const GITHUB: &str = "ghp_realgithubtoken0123456789abcdefABCDEF";
const GOOGLE: &str = "AIzaReal/Key+with=odd&chars";
const UPLOAD: &str = "upload-\"token\"-value";

fn dest(host: &str, headers: &[&str], query: &[&str], body: bool) -> SecretDestination {
    SecretDestination {
        host: host.into(),
        port: Some(443),
        headers: headers.iter().map(|h| (*h).into()).collect(),
        query: query.iter().map(|q| (*q).into()).collect(),
        body,
    }
}

fn broker() -> Broker {
    Broker::new(vec![
        Secret::new(
            "ANTHROPIC_API_KEY",
            ANTHROPIC,
            vec![dest(
                "api.anthropic.com",
                &["x-api-key", "authorization"],
                &[],
                false,
            )],
        ),
        Secret::new(
            "GITHUB_TOKEN",
            GITHUB,
            vec![dest("api.github.com", &[], &[], false)],
        ),
        Secret::new(
            "GEMINI_API_KEY",
            GOOGLE,
            vec![dest(
                "generativelanguage.googleapis.com",
                &["x-goog-api-key"],
                &["key"],
                false,
            )],
        ),
        Secret::new(
            "UPLOAD_TOKEN",
            UPLOAD,
            vec![dest("uploads.example.com", &[], &[], true)],
        ),
    ])
}

fn session() -> (SessionSecrets, BTreeMap<String, String>) {
    let b = broker();
    let placeholders = b.new_placeholders().unwrap();
    (b.session(&placeholders), placeholders)
}

fn to(host: &str) -> Target<'_> {
    Target { host, port: 443 }
}

fn head(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn placeholders_are_obviously_not_keys_and_new_for_every_session() {
    let b = broker();
    let (one, two) = (b.new_placeholders().unwrap(), b.new_placeholders().unwrap());
    assert_eq!(one.len(), 4);
    let p = &one["GITHUB_TOKEN"];
    assert!(p.starts_with("agentsh-placeholder-github-token-"), "{p}");
    assert_eq!(p.len(), "agentsh-placeholder-github-token-".len() + 24);
    assert_ne!(one["GITHUB_TOKEN"], two["GITHUB_TOKEN"]);
    // Only what a header, a URL and a shell word take as they are.
    assert!(p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-'));
    // A session resumed with placeholders of a secret since removed keeps the others.
    let mut stale = one.clone();
    stale.insert(
        "GONE".into(),
        "agentsh-placeholder-gone-000000000000000000000000".into(),
    );
    assert!(!b.session(&stale).is_empty());
}

#[test]
fn the_key_goes_in_only_where_its_destination_takes_it() {
    let (s, p) = session();
    let key = &p["ANTHROPIC_API_KEY"];
    let mut headers = head(&[
        ("x-api-key", key),
        ("anthropic-version", "2023-06-01"),
        ("x-note", key),
    ]);
    let mut uri: Uri = "/v1/messages".parse().unwrap();
    let done = s
        .apply_head(to("api.anthropic.com"), &mut headers, &mut uri)
        .unwrap();
    assert_eq!(done, ["ANTHROPIC_API_KEY"]);
    assert_eq!(headers["x-api-key"], ANTHROPIC);
    assert!(headers["x-api-key"].is_sensitive());
    // A header the destination does not name keeps the placeholder: not the key.
    assert_eq!(headers["x-note"], key.as_str());

    // Bearer and Basic (git over HTTPS: the token as the password), on any header of GitHub.
    let gh = &p["GITHUB_TOKEN"];
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{gh}"));
    let mut headers = head(&[
        ("authorization", &format!("Bearer {gh}")),
        ("proxy-note", &format!("Basic {basic}")),
    ]);
    let mut uri: Uri = "/repos/o/r".parse().unwrap();
    s.apply_head(to("api.github.com"), &mut headers, &mut uri)
        .unwrap();
    assert_eq!(
        headers["authorization"],
        format!("Bearer {GITHUB}").as_str()
    );
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(
            headers["proxy-note"]
                .to_str()
                .unwrap()
                .strip_prefix("Basic ")
                .unwrap(),
        )
        .unwrap();
    assert_eq!(decoded, format!("x-access-token:{GITHUB}").as_bytes());

    // Google's `key=` query parameter, percent-encoded as the value needs.
    let g = &p["GEMINI_API_KEY"];
    let mut uri: Uri = format!("/v1beta/models/m:generateContent?alt=sse&key={g}")
        .parse()
        .unwrap();
    let done = s
        .apply_head(
            to("generativelanguage.googleapis.com"),
            &mut HeaderMap::new(),
            &mut uri,
        )
        .unwrap();
    assert_eq!(done, ["GEMINI_API_KEY"]);
    assert_eq!(
        uri.query(),
        Some("alt=sse&key=AIzaReal%2FKey%2Bwith%3Dodd%26chars")
    );
    // On another port of the same host: not its destination.
    let mut uri: Uri = format!("/?key={g}").parse().unwrap();
    assert!(
        s.apply_head(
            Target {
                host: "generativelanguage.googleapis.com",
                port: 8443
            },
            &mut HeaderMap::new(),
            &mut uri
        )
        .is_err()
    );
}

#[test]
fn a_placeholder_on_its_way_elsewhere_is_refused_however_it_is_written() {
    let (s, p) = session();
    let key = &p["ANTHROPIC_API_KEY"];
    let evil = to("evil.example");
    let refused = |headers: &[(&str, &str)], uri: &str| {
        s.apply_head(evil, &mut head(headers), &mut uri.parse().unwrap())
            .unwrap_err()
    };
    let r = refused(&[("x-api-key", key)], "/");
    assert_eq!(
        (r.secret.as_str(), &r.place, r.encoding),
        (
            "ANTHROPIC_API_KEY",
            &Place::Header("x-api-key".into()),
            Encoding::Plain
        )
    );
    assert_eq!(r.allowed, ["api.anthropic.com"]);
    assert!(r.to_string().contains("may only go to api.anthropic.com"));
    let r = refused(&[], &format!("/collect?k={key}"));
    assert_eq!((r.place, r.encoding), (Place::Url, Encoding::Plain));
    let escaped: String = key.bytes().map(|b| format!("%{b:02x}")).collect();
    let r = refused(&[], &format!("/c?k={escaped}"));
    assert_eq!(r.encoding, Encoding::Percent);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("k={key}"));
    let r = refused(&[("cookie", &format!("s={b64}"))], "/");
    assert!(matches!(r.encoding, Encoding::Base64Url | Encoding::Base64));
    // Another secret's destination is "elsewhere" too.
    let r = s
        .apply_head(
            to("api.github.com"),
            &mut head(&[("authorization", &format!("Bearer {key}"))]),
            &mut "/".parse().unwrap(),
        )
        .unwrap_err();
    assert_eq!(r.secret, "ANTHROPIC_API_KEY");

    // Bodies: plain, base64 in JSON, hex, JSON escapes.
    let body = |text: String| s.apply_body(evil, text.as_bytes(), Foreign::Refuse);
    assert_eq!(body(format!("token={key}")).unwrap_err().place, Place::Body);
    let b64 =
        base64::engine::general_purpose::STANDARD.encode(format!("env: ANTHROPIC_API_KEY={key}\n"));
    assert_eq!(
        body(format!("{{\"blob\":\"{b64}\"}}"))
            .unwrap_err()
            .encoding,
        Encoding::Base64
    );
    assert_eq!(body(hex::encode(key)).unwrap_err().encoding, Encoding::Hex);
    let escaped: String = key
        .chars()
        .map(|c| format!("\\u{:04X}", c as u32))
        .collect();
    assert_eq!(
        body(format!("[\"{escaped}\"]")).unwrap_err().encoding,
        Encoding::JsonEscape
    );
    // Nothing of the kind: nothing happens.
    assert_eq!(
        s.apply_body(evil, b"{\"ordinary\": true}", Foreign::Refuse),
        Ok(BodyOutcome::default())
    );
}

#[test]
fn bodies_carry_the_value_where_configured_and_conversations_are_redacted() {
    let (s, p) = session();
    let up = &p["UPLOAD_TOKEN"];
    let out = s
        .apply_body(
            to("uploads.example.com"),
            format!("{{\"token\":\"{up}\"}}").as_bytes(),
            Foreign::Refuse,
        )
        .unwrap();
    // JSON-escaped as the value needs.
    assert_eq!(
        String::from_utf8(out.body.unwrap()).unwrap(),
        r#"{"token":"upload-\"token\"-value"}"#
    );
    assert_eq!(out.substituted, ["UPLOAD_TOKEN"]);
    // A conversation sent to Anthropic that quotes `env`: its own key stays a placeholder
    // (bodies are not where it goes), GitHub's is redacted, nothing is refused.
    let env = format!(
        "{{\"messages\":[{{\"role\":\"user\",\"content\":\"ANTHROPIC_API_KEY={} GITHUB_TOKEN={}\"}}]}}",
        p["ANTHROPIC_API_KEY"], p["GITHUB_TOKEN"]
    );
    let out = s
        .apply_body(to("api.anthropic.com"), env.as_bytes(), Foreign::Redact)
        .unwrap();
    let body = String::from_utf8(out.body.unwrap()).unwrap();
    assert!(body.contains(&p["ANTHROPIC_API_KEY"]));
    assert!(
        body.contains("GITHUB_TOKEN=[REDACTED:secret GITHUB_TOKEN]"),
        "{body}"
    );
    assert_eq!(out.redacted, ["GITHUB_TOKEN"]);
    assert!(!body.contains(ANTHROPIC) && !body.contains(GITHUB));
    // A plain copy beside an escaped one: the plain one redacted would leave the escaped one
    // through, so the whole body is refused.
    let escaped: String = p["GITHUB_TOKEN"]
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let both = format!("[\"{}\", \"{escaped}\"]", p["GITHUB_TOKEN"]);
    assert!(
        s.apply_body(to("api.anthropic.com"), both.as_bytes(), Foreign::Redact)
            .is_err()
    );
    // Hidden in base64, redaction is not enough: refused.
    let b64 = base64::engine::general_purpose::STANDARD.encode(p["GITHUB_TOKEN"].as_bytes());
    assert!(
        s.apply_body(to("api.anthropic.com"), b64.as_bytes(), Foreign::Redact)
            .is_err()
    );
}

fn config(name: &str, source: SecretSource) -> SecretConfig {
    SecretConfig {
        name: name.into(),
        source,
        destinations: vec![dest("api.example.com", &[], &[], false)],
        defined_at: "d.yaml:4:3".into(),
    }
}

#[test]
fn values_come_from_private_files_commands_and_credentials_only() {
    let dir = tempfile::tempdir().unwrap();
    let private = dir.path().join("token");
    std::fs::write(&private, "file-secret\n").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config_file = dir.path().join("agentsh.yaml");
    std::fs::write(&config_file, "secrets: {}\n").unwrap();
    std::fs::set_permissions(&config_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let loaded = load(
        &[
            config("A", SecretSource::File(private.clone())),
            config(
                "B",
                SecretSource::Command(vec!["/bin/echo".into(), "from-a-command".into()]),
            ),
            config("C", SecretSource::Value("inline".into())),
        ],
        &config_file,
    )
    .unwrap();
    assert_eq!(loaded[0].value(), "file-secret");
    assert_eq!(loaded[1].value(), "from-a-command");
    assert_eq!(loaded[2].value(), "inline");
    assert_eq!(loaded[1].source, "command /bin/echo from-a-command");
    assert!(!format!("{loaded:?}").contains("file-secret"));

    // Readable by others: refused, naming the file and the fix.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = load(
        &[config("A", SecretSource::File(private.clone()))],
        &config_file,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("d.yaml:4:3: secret A:") && err.contains("chmod 600"),
        "{err}"
    );
    std::fs::set_permissions(&config_file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let err = load(
        &[config("C", SecretSource::Value("inline".into()))],
        &config_file,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("agentsh.yaml") && err.contains("0640"),
        "{err}"
    );
    // A symlink to a private file is not the file.
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    assert!(load(&[config("A", SecretSource::File(link))], &config_file).is_err());
    // A command that fails says why; an empty value is no value.
    let err = load(
        &[config(
            "B",
            SecretSource::Command(vec![
                "/bin/sh".into(),
                "-c".into(),
                "echo nope >&2; exit 3".into(),
            ]),
        )],
        &config_file,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("failed") && err.contains("nope"), "{err}");
    let err = load(
        &[config("B", SecretSource::Command(vec!["/bin/true".into()]))],
        &config_file,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn a_value_reflected_in_a_response_goes_back_to_its_placeholder() {
    let (s, p) = session();
    let mut headers = head(&[
        (
            "location",
            &format!("https://api.github.com/login?token={GITHUB}"),
        ),
        ("x-echo", &format!("Bearer {GITHUB}")),
        ("content-type", "application/json"),
    ]);
    assert_eq!(s.scrub_response_headers(&mut headers), ["GITHUB_TOKEN"]);
    assert_eq!(
        headers["location"],
        format!("https://api.github.com/login?token={}", p["GITHUB_TOKEN"]).as_str()
    );
    assert_eq!(
        headers["x-echo"],
        format!("Bearer {}", p["GITHUB_TOKEN"]).as_str()
    );
    assert_eq!(headers["content-type"], "application/json");
}
