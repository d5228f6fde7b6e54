//! The daemon config loader: a full file, defaults, path resolution, every error kind with its
//! position, warnings, and the two shipped files.

use std::path::{Path, PathBuf};

use super::*;
use crate::config::{Compression, OtlpProtocol};

const BASE: &str = "/etc/agentsh";

fn ok(src: &str) -> DaemonConfig {
    load_daemon_str(src, "d.yaml", Path::new(BASE))
        .unwrap_or_else(|e| panic!("expected a valid config, got:\n{e}"))
}

fn errors(src: &str) -> Vec<String> {
    match load_daemon_str(src, "d.yaml", Path::new(BASE)) {
        Ok(_) => panic!("expected errors for:\n{src}"),
        Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
    }
}

fn warnings(src: &str) -> Vec<String> {
    ok(src).warnings.iter().map(ToString::to_string).collect()
}

const MINIMAL: &str = "state_dir: /var/lib/agentsh\npolicy: /etc/agentsh/p.yaml\n";

#[test]
fn full_file() {
    let c = ok(r#"
state_dir: /var/lib/agentsh
socket: /run/agentsh/agentsh.sock
policy: /etc/agentsh/policies/default.yaml
admin_group: agentsh
sessions:
  cgroup_parent: /agentsh.slice/sessions
  allow_user_policy: true
launcher:
  enabled: false
  custom_servers:
    - match: "@acme/*"
      id: acme
    - match: "*-tools-server"
"#);
    assert_eq!(c.origin, "d.yaml");
    assert_eq!(c.state_dir, Path::new("/var/lib/agentsh"));
    assert_eq!(
        c.socket.as_deref(),
        Some(Path::new("/run/agentsh/agentsh.sock"))
    );
    assert_eq!(c.policy, Path::new("/etc/agentsh/policies/default.yaml"));
    assert_eq!(c.admin_group.as_deref(), Some("agentsh"));
    assert_eq!(
        c.sessions,
        SessionsConfig {
            cgroup_parent: CgroupParent::Path("/agentsh.slice/sessions".into()),
            allow_user_policy: true,
        }
    );
    assert!(!c.launcher.enabled);
    let custom = &c.launcher.custom_servers;
    assert_eq!(custom.len(), 2);
    assert_eq!(custom[0].pattern.as_str(), "@acme/*");
    assert!(custom[0].pattern.matches("@acme/server-x"));
    assert_eq!(custom[0].id.as_deref(), Some("acme"));
    assert_eq!(custom[0].span, Location::new(12, 7));
    assert_eq!(custom[1].id, None);
    // Custom servers with the launcher off are legal, but said to do nothing.
    assert_eq!(
        c.warnings
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "d.yaml:11:3: warning: `launcher.custom_servers` has no effect: `launcher.enabled` is false"
        ]
    );
}

#[test]
fn defaults() {
    let c = ok(MINIMAL);
    assert_eq!(c.socket, None);
    assert_eq!(c.admin_group, None);
    assert_eq!(c.sessions.cgroup_parent, CgroupParent::Auto);
    assert!(!c.sessions.allow_user_policy);
    assert!(c.launcher.enabled);
    assert!(c.launcher.custom_servers.is_empty());
    assert!(c.warnings.is_empty());
    // Null sections and values mean "the default" too.
    let c = ok(&format!(
        "{MINIMAL}socket:\nsessions:\nlauncher: {{custom_servers: ~, enabled: ~}}\n"
    ));
    assert_eq!(
        (c.socket, c.sessions.cgroup_parent, c.launcher.enabled),
        (None, CgroupParent::Auto, true)
    );
}

#[test]
fn relative_paths_are_taken_from_the_base_dir() {
    let c = ok("state_dir: state\nsocket: ./run//a.sock\npolicy: ../shared/p.yaml\n");
    assert_eq!(c.state_dir, Path::new("/etc/agentsh/state"));
    assert_eq!(
        c.socket.as_deref(),
        Some(Path::new("/etc/agentsh/run/a.sock"))
    );
    // `..` is kept: resolving it without the filesystem would be wrong across symlinks.
    assert_eq!(c.policy, Path::new("/etc/agentsh/../shared/p.yaml"));
    let c = load_daemon_str("state_dir: s/\npolicy: p.yaml\n", "x", Path::new("conf")).unwrap();
    assert_eq!(
        (c.state_dir, c.policy),
        (PathBuf::from("conf/s"), PathBuf::from("conf/p.yaml"))
    );
}

#[test]
fn every_error_in_one_pass_with_its_position() {
    let src = r#"state_dir: ""
socket: [a]
admin_group: "wheel:x"
sessions:
  cgroup_parent: agentsh.slice
  allow_user_policy: yes
launcher:
  enabled: 1
  custom_servers:
    - match: "[a"
    - id: "bad id"
    - match: ok
      idd: x
"#;
    assert_eq!(
        errors(src),
        [
            "d.yaml:1:1: error: missing required key `policy` in the top level",
            "d.yaml:1:12: error: `state_dir` must not be empty",
            "d.yaml:2:9: error: `socket` must be a string, found a list",
            "d.yaml:3:14: error: `admin_group`: `wheel:x` contains ':', which no group name can hold",
            "d.yaml:5:18: error: `sessions.cgroup_parent` must be `auto` or an absolute path inside the cgroup2 mount (such as /agentsh.slice/sessions), found the string \"agentsh.slice\"",
            "d.yaml:6:22: error: `sessions.allow_user_policy` must be true or false, found the string \"yes\"",
            "d.yaml:8:12: error: `launcher.enabled` must be true or false, found the number `1`",
            "d.yaml:10:14: error: `launcher.custom_servers[0].match`: invalid glob `[a`: unclosed character class; missing ']'",
            "d.yaml:11:7: error: missing required key `match` in `launcher.custom_servers[1]`",
            "d.yaml:11:11: error: `launcher.custom_servers[1].id`: `bad id` contains ' '; ids may only use letters, digits, `.`, `_` and `-`",
            "d.yaml:13:7: error: unknown key `idd` in `launcher.custom_servers[2]`; did you mean `id`?",
        ]
    );
}

#[test]
fn misspelt_keys_get_a_suggestion() {
    assert_eq!(
        errors("stat_dir: /s\npolicy: p\nsessions: {cgroup_parnet: auto}\nlaunchr: {}\n"),
        [
            "d.yaml:1:1: error: unknown key `stat_dir` at the top level; did you mean `state_dir`?",
            "d.yaml:1:1: error: missing required key `state_dir` in the top level",
            "d.yaml:3:12: error: unknown key `cgroup_parnet` in `sessions`; did you mean `cgroup_parent`?",
            "d.yaml:4:1: error: unknown key `launchr` at the top level; did you mean `launcher`?",
        ]
    );
    assert_eq!(
        errors(&format!("{MINIMAL}logging: x\n")),
        [
            "d.yaml:3:1: error: unknown key `logging` at the top level (known keys: state_dir, socket, policy, admin_group, sessions, launcher, proxy, providers, tls, dlp, kernel, on_detection, retention, checkpoints, otlp, secrets)"
        ]
    );
}

#[test]
fn cgroup_parent_must_stay_inside_the_mount() {
    let at = |value: &str| {
        errors(&format!("{MINIMAL}sessions:\n  cgroup_parent: {value}\n"))
            .into_iter()
            .map(|e| e.trim_start_matches("d.yaml:4:18: error: ").to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at("/agentsh.slice/../../x"),
        ["`sessions.cgroup_parent` must not contain `..`: sessions stay under the cgroup it names"]
    );
    assert_eq!(
        at("/sys/fs/cgroup/agentsh.slice"),
        [
            "`sessions.cgroup_parent` is a path inside the cgroup2 mount, not on the filesystem: write `/agentsh.slice`"
        ]
    );
    // This host's own mount, wherever it is (`/sys/fs/cgroup/unified` on hybrid hosts).
    if let Ok(mount) = crate::kernel::cgroup2_mount() {
        assert_eq!(
            at(&format!("{}/agentsh.slice", mount.display())),
            [
                "`sessions.cgroup_parent` is a path inside the cgroup2 mount, not on the filesystem: write `/agentsh.slice`"
            ]
        );
    }
    assert!(at("\"  \"")[0].contains("must be `auto` or an absolute path"));
    assert!(at("Auto")[0].contains("found the string \"Auto\""));
    assert!(at("[a]")[0].contains("must be a string, found a list"));
    let c = ok(&format!(
        "{MINIMAL}sessions:\n  cgroup_parent: //agentsh.slice/./s/\n"
    ));
    assert_eq!(
        c.sessions.cgroup_parent,
        CgroupParent::Path("/agentsh.slice/s".into())
    );
}

#[test]
fn paths_must_say_something() {
    assert_eq!(
        errors("state_dir: \"  \"\npolicy: \"a\\0b\"\nsocket: ''\n"),
        [
            "d.yaml:1:12: error: `state_dir` must not be empty",
            "d.yaml:2:9: error: `policy` must not contain a NUL character",
            "d.yaml:3:9: error: `socket` must not be empty",
        ]
    );
    assert_eq!(
        errors("state_dir: ~\npolicy:\n"),
        [
            "d.yaml:1:1: error: missing required key `state_dir` in the top level",
            "d.yaml:2:1: error: missing required key `policy` in the top level",
        ]
    );
    assert_eq!(
        warnings("state_dir: '/s '\npolicy: p\n"),
        [
            "d.yaml:1:12: warning: `state_dir` starts or ends with whitespace, which is kept as part of the path"
        ]
    );
}

#[test]
fn socket_paths_must_fit_sun_path() {
    let long = format!("/{}", "s".repeat(106));
    assert_eq!(
        ok(&format!("{MINIMAL}socket: {long}\n")).socket,
        Some(PathBuf::from(&long))
    );
    let msgs = errors(&format!("{MINIMAL}socket: {long}x\n"));
    assert_eq!(msgs.len(), 1);
    assert!(
        msgs[0].starts_with("d.yaml:3:9: error: `socket`: `/sss")
            && msgs[0].ends_with("` is 108 bytes long; a Unix socket path holds at most 107"),
        "{}",
        msgs[0]
    );
}

#[test]
fn documents_that_are_not_a_config() {
    assert_eq!(
        errors(""),
        [
            "d.yaml:1:1: error: missing required key `state_dir` in the top level",
            "d.yaml:1:1: error: missing required key `policy` in the top level",
        ]
    );
    assert_eq!(
        errors("- a\n"),
        ["d.yaml:1:1: error: the file must be a mapping, found a list"]
    );
    assert_eq!(
        errors(&format!(
            "{MINIMAL}sessions: true\nlauncher: {{custom_servers: x}}\n"
        )),
        [
            "d.yaml:3:11: error: `sessions` must be a mapping, found the boolean `true`",
            "d.yaml:4:28: error: `launcher.custom_servers` must be a list, found the string \"x\"",
        ]
    );
    let msgs = errors("state_dir: [\n");
    assert!(msgs[0].contains("invalid YAML"), "{msgs:?}");
    assert_eq!(msgs.len(), 1, "a broken file is not also missing its keys");
}

#[test]
fn custom_server_warnings() {
    let src = format!(
        "{MINIMAL}launcher:\n  custom_servers:\n    - match: '**'\n    - match: x-*\n    - {{match: x-*, id: other}}\n"
    );
    assert_eq!(
        warnings(&src),
        [
            "d.yaml:5:7: warning: `launcher.custom_servers[0].match` is `**`, which matches every package, module and image: every npx, uvx, node, python and docker launch would run under agentsh-shim",
            "d.yaml:7:7: warning: `launcher.custom_servers[2]` never applies: `launcher.custom_servers[1]` (line 6) has the same pattern and is tried first",
        ]
    );
}

#[test]
fn load_daemon_file_reads_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentsh.yaml");
    std::fs::write(&path, "state_dir: state\npolicy: /p.yaml\n").unwrap();
    let c = load_daemon_file(&path).unwrap();
    assert_eq!(c.state_dir, dir.path().join("state"));
    assert_eq!(c.origin, path.display().to_string());

    std::fs::write(&path, b"state_dir: \xff\n").unwrap();
    let err = load_daemon_file(&path).unwrap_err();
    let d = &err.diagnostics()[0];
    assert_eq!((d.line, d.column, d.origin.clone()), (1, 12, c.origin));
    assert!(d.message.contains("UTF-8"));

    let err = load_daemon_file(&dir.path().join("missing.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(
        err.to_string().contains("missing.yaml: cannot read"),
        "{err}"
    );
}

fn repo_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

#[test]
fn shipped_configs_load_cleanly() {
    let system =
        load_daemon_file(&repo_file("packaging/agentsh.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(system.warnings.is_empty(), "{:?}", system.warnings);
    assert_eq!(system.state_dir, Path::new("/var/lib/agentsh"));
    assert_eq!(
        system.socket.as_deref(),
        Some(Path::new("/run/agentsh/agentsh.sock"))
    );
    assert_eq!(
        system.policy,
        Path::new("/etc/agentsh/policies/default.yaml")
    );
    assert_eq!(system.admin_group.as_deref(), Some("agentsh"));
    assert_eq!(system.sessions, SessionsConfig::default());
    assert!(system.launcher.enabled && system.launcher.custom_servers.is_empty());
    assert_eq!(system.proxy.listen, Some("127.0.0.1:8877".parse().unwrap()));
    assert_eq!(system.proxy.mode, crate::config::ProxyMode::McpOnly);
    assert_eq!(
        system.proxy.anthropic_upstream.as_str(),
        "https://api.anthropic.com/"
    );

    let dev = load_daemon_file(&repo_file("agentsh.dev.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(dev.warnings.is_empty(), "{:?}", dev.warnings);
    let root = std::path::absolute(repo_file(".")).unwrap();
    let root: PathBuf = root.components().collect();
    assert_eq!(dev.state_dir, root.join(".state"));
    assert_eq!(dev.policy, root.join("policies/default.yaml"));
    assert!(dev.policy.is_file(), "{}", dev.policy.display());
    assert_eq!((dev.socket, dev.admin_group), (None, None));
    assert_eq!(dev.proxy.listen, Some("127.0.0.1:0".parse().unwrap()));
}

#[test]
fn the_root_cgroup_is_no_session_parent() {
    for root in ["/", "//", "/."] {
        let src = format!("state_dir: s\npolicy: p.yaml\nsessions:\n  cgroup_parent: \"{root}\"\n");
        let found = errors(&src);
        assert_eq!(found.len(), 1, "{root}: {found:?}");
        assert!(
            found[0].starts_with(
                "d.yaml:4:18: error: `sessions.cgroup_parent` must not be the root cgroup"
            ),
            "{found:?}"
        );
    }
}

#[test]
fn the_llm_proxy_sections() {
    let c = ok(&format!(
        "{MINIMAL}proxy:
  listen: 127.0.0.1:8765
  mode: embedded
  tool_names: [\"mcp__{{server}}__{{tool}}\", \"{{server}}.{{tool}}\"]
  bodies: {{store: false, max_bytes: 4096, retention_days: 7}}
providers:
  anthropic: {{upstream: \"http://127.0.0.2:9000/anthropic\"}}
  openai: {{upstream: \"https://gateway.example/openai\"}}
tls:
  extra_roots: [certs/test-ca.pem]
dlp:
  mode: redact
  custom_patterns:
    - {{name: internal-token, regex: \"itk_[A-Za-z0-9]{{32}}\"}}
"
    ));
    let p = &c.proxy;
    assert_eq!(p.listen, Some("127.0.0.1:8765".parse().unwrap()));
    assert_eq!(p.mode, ProxyMode::Embedded);
    let names: Vec<&str> = p.tool_names.iter().map(|t| t.as_str()).collect();
    assert_eq!(names, ["mcp__{server}__{tool}", "{server}.{tool}"]);
    assert_eq!(
        p.bodies,
        BodyStorage {
            store: false,
            max_bytes: 4096,
            retention_days: 7
        }
    );
    assert_eq!(
        p.anthropic_upstream.as_str(),
        "http://127.0.0.2:9000/anthropic"
    );
    assert_eq!(p.openai_upstream.as_str(), "https://gateway.example/openai");
    assert_eq!(
        p.extra_roots,
        [PathBuf::from("/etc/agentsh/certs/test-ca.pem")]
    );
    assert_eq!(p.dlp.mode, DlpMode::Redact);
    assert!(
        p.dlp.custom_patterns[0]
            .regex
            .is_match(&format!("itk_{}", "a".repeat(32)))
    );

    // Off by default, with the public upstreams and Claude Code's tool naming.
    let d = ok(MINIMAL).proxy;
    assert_eq!(d.listen, None);
    assert_eq!(d.mode, ProxyMode::McpOnly);
    assert_eq!(d.anthropic_upstream.as_str(), "https://api.anthropic.com/");
    assert_eq!(d.openai_upstream.as_str(), "https://api.openai.com/");
    assert_eq!(
        d.tool_names[0].split("mcp__github__create_issue"),
        Some(("github", "create_issue"))
    );
}

#[test]
fn llm_proxy_errors_with_their_positions() {
    let src = format!(
        "{MINIMAL}proxy:
  listen: 0.0.0.0:8765
  mode: embeded
  tool_names: [\"mcp_{{tool}}\"]
providers:
  anthropic: {{upstream: \"ftp://x\"}}
  openai: {{upstream: \"https://user:key@api.openai.com\"}}
dlp:
  custom_patterns:
    - {{name: x, regex: \"(\"}}
"
    );
    assert_eq!(
        errors(&src),
        [
            "d.yaml:4:11: error: `proxy.listen`: `0.0.0.0:8765` is not a loopback address; the proxy only serves processes of this host",
            "d.yaml:5:9: error: `proxy.mode`: unknown value `embeded` (expected one of: mcp-only, embedded, disabled); did you mean `embedded`?",
            "d.yaml:6:16: error: `proxy.tool_names[0]`: `mcp_{tool}` needs both `{server}` and `{tool}`",
            "d.yaml:8:25: error: `providers.anthropic.upstream`: `ftp://x` must be https (or http, for tests), not ftp",
            "d.yaml:9:22: error: `providers.openai.upstream`: `https://user:key@api.openai.com` must not hold credentials (the agent's own API key is sent)",
            "d.yaml:12:24: error: `dlp.custom_patterns[0].regex`: invalid regex: unclosed group",
        ]
    );
    // The transparent path (kernel enforcement, on unless turned off) uses providers too.
    let providers = "providers:\n  openai: {upstream: \"https://x.example\"}\n";
    assert!(warnings(&format!("{MINIMAL}{providers}")).is_empty());
    assert_eq!(
        warnings(&format!(
            "{MINIMAL}{providers}kernel:\n  enforcement: off\n"
        )),
        [
            "d.yaml:3:1: warning: `providers` has no effect: neither proxy runs (`proxy.listen` is not set and `kernel.enforcement` is off)"
        ]
    );
}

#[test]
fn kernel_section() {
    let config = ok(&format!(
        "{MINIMAL}kernel:\n  enforcement: required\n  listen: 127.0.0.1:9915\n  listen6: off\n  intercept_loopback: [127.0.0.2, \"::1\"]\n  other_traffic: refuse\n  deny: [169.254.169.254, \"10.0.0.5:5432\"]\n"
    ));
    let k = &config.kernel;
    assert_eq!(k.enforcement, crate::config::Enforcement::Required);
    assert_eq!(k.listen, "127.0.0.1:9915".parse().unwrap());
    assert_eq!(k.listen6, None);
    assert_eq!(k.intercept_loopback.len(), 2);
    assert_eq!(k.other_traffic, crate::config::OtherTraffic::Refuse);
    assert_eq!(k.deny[1], ("10.0.0.5".parse().unwrap(), 5432));
    assert_eq!(
        errors(&format!(
            "{MINIMAL}kernel:\n  listen: 10.0.0.1:915\n  intercept_loopback: [10.0.0.2, nope]\n  deny: [example.com]\n  enforcement: maybe\n"
        )),
        [
            "d.yaml:4:11: error: `kernel.listen` must be an IPv4 loopback address with a port, such as 127.0.0.1:915; found `10.0.0.1:915`",
            "d.yaml:5:24: error: `kernel.intercept_loopback[0]`: `10.0.0.2` is not a loopback address (127.0.0.0/8 or ::1); other addresses are intercepted anyway",
            "d.yaml:5:34: error: `kernel.intercept_loopback[1]`: `nope` is not an IP address",
            "d.yaml:6:10: error: `kernel.deny[0]`: `example.com` is not an address or address:port (169.254.169.254, 10.0.0.5:5432, [2001:db8::1]:443)",
            "d.yaml:7:16: error: `kernel.enforcement`: unknown value `maybe` (expected one of: auto, required, off)",
        ]
    );
}

#[test]
fn on_detection_names_a_webhook_and_bad_ones_are_located() {
    let c = ok(&format!(
        "{MINIMAL}on_detection:\n  webhook_url: https://hooks.example.com/agentsh\n"
    ));
    assert_eq!(
        c.alerts.webhook_url.map(String::from).as_deref(),
        Some("https://hooks.example.com/agentsh")
    );
    assert_eq!(ok(MINIMAL).alerts.webhook_url, None);
    assert_eq!(
        errors(&format!(
            "{MINIMAL}on_detection:\n  webhook_url: ftp://hooks.example.com/\n"
        )),
        [
            "d.yaml:4:16: error: `on_detection.webhook_url`: `ftp://hooks.example.com/` must be https (or http), not ftp"
        ]
    );
    assert!(errors(&format!("{MINIMAL}on_detection:\n  webhook: x\n"))[0].contains("webhook"),);
    assert!(
        errors(&format!(
            "{MINIMAL}on_detection:\n  webhook_url: not a url\n"
        ))[0]
            .contains("is not a URL")
    );
}

#[test]
fn retention_bounds_the_trail_by_default_and_takes_days_and_megabytes() {
    let d = ok(MINIMAL).retention;
    assert_eq!(d.max_age, std::time::Duration::from_secs(90 * 86_400));
    assert_eq!(d.max_bytes, 1024 << 20);
    let c = ok(&format!(
        "{MINIMAL}retention:\n  max_age_days: 7\n  max_megabytes: 64\n"
    ))
    .retention;
    assert_eq!(c.max_age, std::time::Duration::from_secs(7 * 86_400));
    assert_eq!(c.max_bytes, 64 << 20);
    let bad = errors(&format!("{MINIMAL}retention:\n  max_age_days: 0\n"));
    assert!(
        bad[0].starts_with("d.yaml:4:17: error:") && bad[0].contains("max_age_days"),
        "{bad:?}"
    );
    assert!(errors(&format!("{MINIMAL}retention:\n  max_days: 3\n"))[0].contains("max_days"));
}

#[test]
fn otlp_names_a_collector_and_bad_endpoints_are_located() {
    let c = ok(&format!(
        "{MINIMAL}otlp:\n  endpoint: http://127.0.0.1:4318\n"
    ));
    let collector = c.otlp.collector.unwrap();
    assert_eq!(collector.endpoint.as_str(), "http://127.0.0.1:4318/");
    assert_eq!(collector.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(collector.compression, Compression::None);
    assert!(collector.headers.is_empty());
    assert_eq!(ok(MINIMAL).otlp.collector, None);
    assert_eq!(
        errors(&format!(
            "{MINIMAL}otlp:\n  endpoint: grpc://collector:4317\n"
        )),
        [
            "d.yaml:4:13: error: `otlp.endpoint`: `grpc://collector:4317` must be http or https (`otlp.protocol` chooses OTLP/HTTP or gRPC), not grpc"
        ]
    );
    assert!(errors(&format!("{MINIMAL}otlp: {{}}\n"))[0].contains("endpoint"));
}

#[test]
fn otlp_takes_a_protocol_compression_and_headers() {
    let c = ok(&format!(
        "{MINIMAL}otlp:\n  endpoint: https://collector:4317\n  protocol: grpc\n  compression: gzip\n  headers:\n    Authorization: Bearer t0ken\n    x-scope-orgid: ci\n"
    ));
    let collector = c.otlp.collector.unwrap();
    assert_eq!(collector.protocol, OtlpProtocol::Grpc);
    assert_eq!(collector.compression, Compression::Gzip);
    let headers: Vec<(String, String)> = collector
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        headers,
        [
            ("authorization".to_owned(), "Bearer t0ken".to_owned()),
            ("x-scope-orgid".to_owned(), "ci".to_owned())
        ]
    );
    assert_eq!(
        errors(&format!(
            "{MINIMAL}otlp:\n  endpoint: http://c:4317/v1/logs\n  protocol: grpc\n"
        )),
        [
            "d.yaml:4:13: error: `otlp.endpoint`: `http://c:4317/v1/logs` must not have a path with `protocol: grpc` (the gRPC method is the path)"
        ]
    );
    assert_eq!(
        errors(&format!(
            "{MINIMAL}otlp:\n  endpoint: http://c:4318\n  protocol: http/protobuff\n"
        )),
        [
            "d.yaml:5:13: error: `otlp.protocol`: unknown value `http/protobuff` (expected one of: grpc, http/protobuf, http/json); did you mean `http/protobuf`?"
        ]
    );
    assert_eq!(
        errors(&format!(
            "{MINIMAL}otlp:\n  endpoint: http://c:4318\n  headers:\n    Content-Type: text/plain\n    bad name: x\n    x-ok: \"a\\nb\"\n"
        )),
        [
            "d.yaml:6:5: error: `otlp.headers.Content-Type`: the exporter sets `content-type` itself",
            "d.yaml:7:5: error: `otlp.headers.bad name`: `bad name` is not a header name",
            "d.yaml:8:11: error: `otlp.headers.x-ok`: the value must be visible ASCII (no line breaks)",
        ]
    );
}

#[test]
fn secrets_name_their_source_and_destinations_with_the_providers_built_in() {
    let c = ok(&format!(
        r#"{MINIMAL}providers:
  anthropic:
    upstream: https://127.0.0.2:8443
secrets:
  ANTHROPIC_API_KEY:
    credential: anthropic
  OPENAI_API_KEY:
    file: /etc/agentsh/openai.key
  GITHUB_TOKEN:
    command: [/usr/bin/pass, show, github]
    destinations:
      - host: api.github.com
        headers: [Authorization]
      - host: "*.githubusercontent.com"
        port: 443
        query: [token]
        body: true
"#
    ));
    let secrets = &c.secrets.secrets;
    assert_eq!(secrets.len(), 3);
    let anthropic = &secrets[0];
    assert_eq!(
        anthropic.source,
        SecretSource::Credential("anthropic".into())
    );
    assert_eq!(anthropic.destinations[0].host, "127.0.0.2");
    assert_eq!(anthropic.destinations[0].port, Some(8443));
    assert_eq!(
        anthropic.destinations[0].headers,
        ["x-api-key", "authorization"]
    );
    assert_eq!(secrets[1].destinations[0].host, "api.openai.com");
    let github = &secrets[2];
    assert_eq!(
        github.source,
        SecretSource::Command(vec!["/usr/bin/pass".into(), "show".into(), "github".into()])
    );
    assert_eq!(github.destinations[0].headers, ["authorization"]);
    let raw = &github.destinations[1];
    assert!(raw.matches("objects.githubusercontent.com", 443));
    assert!(!raw.matches("githubusercontent.com", 443));
    assert!(!raw.matches("objects.githubusercontent.com", 80));
    assert!(raw.body && raw.query == ["token"]);
    // Headers not named: `authorization` only, never "any header".
    assert_eq!(raw.headers, ["authorization"]);
    assert_eq!(github.defined_at, "d.yaml:11:3");
    // A file of them instead.
    let c = ok(&format!("{MINIMAL}secrets: secrets.yaml\n"));
    assert_eq!(
        c.secrets.file.as_deref(),
        Some(Path::new("/etc/agentsh/secrets.yaml"))
    );
    // Values never show in a debug print.
    let c = ok(&format!(
        "{MINIMAL}secrets:\n  OPENAI_API_KEY:\n    value: sk-real\n"
    ));
    assert!(!format!("{:?}", c.secrets).contains("sk-real"));
}

#[test]
fn secret_mistakes_are_located() {
    let cases = [
        (
            "  GITHUB_TOKEN:\n    value: x\n",
            "4:3",
            "has no `destinations`",
        ),
        (
            "  github-token:\n    value: x\n",
            "4:3",
            "environment variable",
        ),
        ("  OPENAI_API_KEY: {}\n", "4:3", "nowhere to read the value"),
        (
            "  OPENAI_API_KEY:\n    value: x\n    file: /k\n",
            "6:5",
            "`value` and `file` both give the value",
        ),
        (
            "  OPENAI_API_KEY:\n    command: [pass, x]\n",
            "5:14",
            "absolute path",
        ),
        (
            "  OPENAI_API_KEY:\n    file: key.txt\n",
            "5:11",
            "absolute path",
        ),
        (
            "  OPENAI_API_KEY:\n    credential: ../x\n",
            "5:17",
            "not a path",
        ),
        (
            "  T:\n    value: x\n    destinations:\n      - host: https://api.x.com/\n",
            "7:15",
            "not a host name",
        ),
        (
            "  T:\n    value: x\n    destinations:\n      - host: api.x.com\n        headers: [content-type]\n",
            "8:19",
            "carries no credential",
        ),
        (
            "  T:\n    value: x\n    destinations: []\n",
            "6:19",
            "is empty",
        ),
    ];
    for (yaml, at, says) in cases {
        let bad = errors(&format!("{MINIMAL}secrets:\n{yaml}"));
        assert!(
            bad.iter()
                .any(|e| e.starts_with(&format!("d.yaml:{at}: error:")) && e.contains(says)),
            "{yaml}: want {at} {says}: {bad:?}"
        );
    }
}
