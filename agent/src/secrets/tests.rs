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

#[test]
fn placeholders_are_recognised_only_whole_and_for_their_own_variable() {
    let b = broker();
    let made = b.new_placeholders().unwrap();
    for (name, placeholder) in &made {
        assert!(
            is_placeholder_for(name, placeholder),
            "{name}: {placeholder}"
        );
    }
    let gh = &made["GITHUB_TOKEN"];
    assert!(!is_placeholder_for("NPM_TOKEN", gh));
    assert!(!is_placeholder_for("GITHUB_TOKEN", &format!("{gh}0")));
    assert!(!is_placeholder_for("GITHUB_TOKEN", &gh[..gh.len() - 1]));
    assert!(!is_placeholder_for(
        "GITHUB_TOKEN",
        &gh.to_ascii_uppercase()
    ));
    assert!(!is_placeholder_for(
        "GITHUB_TOKEN",
        "agentsh-placeholder-github-token-0123456789abcdef0123456g"
    ));
    assert!(!is_placeholder_for(
        "GITHUB_TOKEN",
        "agentsh-placeholder-ghp_real"
    ));
}

/// A broker of one secret whose destination takes it in the body and the `key` parameter.
fn broker_of(value: &str) -> (SessionSecrets, String) {
    let b = Broker::new(vec![Secret::new(
        "FORM_TOKEN",
        value,
        vec![dest("forms.example.com", &[], &["key"], true)],
    )]);
    let p = b.new_placeholders().unwrap();
    (b.session(&p), p["FORM_TOKEN"].clone())
}

#[test]
fn values_go_into_forms_and_queries_encoded_for_them() {
    let value = "p@ss w+rd&x=1/\"é\"";
    let (s, p) = broker_of(value);
    let form = format!("user=me&token={p}&next=%2F");
    let out = s
        .apply_body_as(
            to("forms.example.com"),
            form.as_bytes(),
            Foreign::Refuse,
            Some("application/x-www-form-urlencoded; charset=utf-8"),
        )
        .unwrap();
    let sent = String::from_utf8(out.body.unwrap()).unwrap();
    assert_eq!(
        sent,
        "user=me&token=p%40ss+w%2Brd%26x%3D1%2F%22%C3%A9%22&next=%2F"
    );
    // Read back as a form, it is the value.
    let token = url::form_urlencoded::parse(sent.as_bytes())
        .find(|(k, _)| k == "token")
        .unwrap()
        .1;
    assert_eq!(token, value);
    // A query parameter: percent-encoded for a query component (a space is %20, not `+`).
    let mut uri: Uri = format!("/submit?key={p}&x=1").parse().unwrap();
    s.apply_head(to("forms.example.com"), &mut HeaderMap::new(), &mut uri)
        .unwrap();
    assert_eq!(
        uri.query(),
        Some("key=p%40ss%20w%2Brd%26x%3D1%2F%22%C3%A9%22&x=1")
    );
    // Any other body takes it as it is.
    let out = s
        .apply_body_as(
            to("forms.example.com"),
            format!("token: {p}\n").as_bytes(),
            Foreign::Refuse,
            Some("text/plain"),
        )
        .unwrap();
    assert_eq!(out.body.unwrap(), format!("token: {value}\n").into_bytes());
}

#[test]
fn json_bodies_get_the_value_escaped_however_they_start() {
    let (s, p) = broker_of("a\"b\\c");
    let escaped = r#"a\"b\\c"#;
    for (body, content_type) in [
        // A byte order mark first.
        (format!("\u{feff}{{\"token\":\"{p}\"}}"), None),
        // A JSON string, told by its Content-Type.
        (format!("\"{p}\""), Some("application/json")),
        (format!("\"{p}\""), Some("application/vnd.api+json")),
    ] {
        let out = s
            .apply_body_as(
                to("forms.example.com"),
                body.as_bytes(),
                Foreign::Refuse,
                content_type,
            )
            .unwrap();
        let sent = String::from_utf8(out.body.unwrap()).unwrap();
        assert_eq!(sent, body.replace(&p, escaped), "{content_type:?}");
        let json = sent.trim_start_matches('\u{feff}');
        assert!(
            serde_json::from_str::<serde_json::Value>(json).is_ok(),
            "{sent}"
        );
    }
}

#[test]
fn a_value_echoed_in_a_response_body_goes_back_to_its_placeholder() {
    let (s, p) = session();
    let body = format!("{{\"stored\":\"{UPLOAD}\",\"also\":\"{GITHUB} {GITHUB}\"}}");
    let (scrubbed, seen) = s.scrub_response_body(body.as_bytes()).unwrap();
    assert_eq!(
        String::from_utf8(scrubbed).unwrap(),
        format!(
            "{{\"stored\":\"{}\",\"also\":\"{} {}\"}}",
            p["UPLOAD_TOKEN"], p["GITHUB_TOKEN"], p["GITHUB_TOKEN"]
        )
    );
    assert_eq!(seen, ["UPLOAD_TOKEN", "GITHUB_TOKEN"]);
    assert_eq!(s.scrub_response_body(b"{\"ok\":true}"), None);
}

#[test]
fn a_streamed_response_has_values_put_back_wherever_the_chunks_break() {
    let (s, p) = session();
    let body =
        format!("data: {{\"a\":\"{ANTHROPIC}\"}}\n\ndata: {GITHUB}{GITHUB}x{GOOGLE}\n\n{UPLOAD}");
    let expected = body
        .replace(ANTHROPIC, &p["ANTHROPIC_API_KEY"])
        .replace(GITHUB, &p["GITHUB_TOKEN"])
        .replace(GOOGLE, &p["GEMINI_API_KEY"])
        .replace(UPLOAD, &p["UPLOAD_TOKEN"]);
    let longest = [ANTHROPIC, GITHUB, GOOGLE, UPLOAD]
        .iter()
        .map(|v| v.len())
        .max()
        .unwrap();
    let bytes = body.as_bytes();
    // Cut in two at every place, and in three.
    for cut in 0..=bytes.len() {
        for second in [cut, (cut + 7).min(bytes.len())] {
            let mut scrubber = s.response_scrubber();
            let mut out = Vec::new();
            for chunk in [&bytes[..cut], &bytes[cut..second], &bytes[second..]] {
                scrubber.push(chunk, &mut out);
                assert!(scrubber.held() < longest, "held {}", scrubber.held());
                // What went out never holds a value, not even its start at the end.
                let text = String::from_utf8_lossy(&out);
                assert!(!text.contains(GITHUB) && !text.contains(ANTHROPIC));
            }
            scrubber.finish(&mut out);
            assert_eq!(String::from_utf8(out).unwrap(), expected, "cut at {cut}");
        }
    }
    // Byte by byte.
    let mut scrubber = s.response_scrubber();
    let mut out = Vec::new();
    for b in bytes {
        scrubber.push(std::slice::from_ref(b), &mut out);
    }
    scrubber.finish(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), expected);
    assert_eq!(
        scrubber.seen(),
        [
            "ANTHROPIC_API_KEY",
            "GITHUB_TOKEN",
            "GEMINI_API_KEY",
            "UPLOAD_TOKEN"
        ]
    );
    // An event ends with a line break: nothing of it is held back.
    let mut scrubber = s.response_scrubber();
    let mut out = Vec::new();
    scrubber.push(b"data: {\"delta\":\"hello\"}\n\n", &mut out);
    assert_eq!(scrubber.held(), 0);
    assert_eq!(out, b"data: {\"delta\":\"hello\"}\n\n");
}

#[test]
fn a_command_that_leaves_its_output_open_is_stopped_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("sleep 100 & echo $! > {}; echo value", pid_file.display());
    let argv: Vec<String> = ["/bin/sh", "-c", &script].map(str::to_owned).into();
    let err = vault::run_within(&argv, std::time::Duration::from_secs(1)).unwrap_err();
    assert!(err.contains("did not finish within 1s"), "{err}");
    // What it left behind was killed with its process group.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    let gone = || {
        std::fs::read_to_string(&stat).map_or(true, |s| {
            s.rsplit(')').next().unwrap_or("").trim().starts_with('Z')
        })
    };
    let mut waited = 0;
    while !gone() && waited < 200 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        waited += 1;
    }
    assert!(gone(), "the left-behind sleep still runs");
    // One that finishes within the patience still gives its value.
    let argv: Vec<String> = ["/bin/sh", "-c", "echo value"].map(str::to_owned).into();
    let value = vault::run_within(&argv, std::time::Duration::from_secs(10)).unwrap();
    assert_eq!(value.as_str(), "value\n");
}
