//! One request in, one response line out; who may do what.

use std::sync::mpsc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::peer::unmanaged_session;
use super::{Daemon, Peer, report};
use crate::api::protocol::{
    ApiError, ApproveArgs, Approved, AuditHead, AuditKey, AuditRecords, AuditRecordsArgs,
    BinaryArgs, CustomServerSetting, ErrorCode, EventsArgs, EventsPageArgs, Generated, Hello,
    InstructionsArgs, Notice, NoticeKind, OutputArgs, PROTOCOL_VERSION, PinDiff, PinEntry,
    PinsArgs, RawRequest, RecordArgs, Role, SecretArgs, ServerArgs, ServerRequestArgs,
    ServerSetupArgs, SessionArgs, SessionCreateArgs, SessionCreated, ToolCallArgs, ToolRef,
    ToolsListedArgs, ops,
};
use crate::audit::{Action, Event, EventKind};
use crate::engine::Rules;
use crate::session::Placement;
use crate::store::{EventQuery, SessionRecord, now_secs};

/// Events an `events.page` request looks at: one answer stays a few MB at most.
const PAGE_SCAN: usize = 500;

type Answer = Result<Vec<u8>, ApiError>;

/// What to send back for one request.
pub enum Reply {
    /// The response line (it ends with `\n`).
    Line(Vec<u8>),
    /// The response line; then the connection carries release notices of `server` from
    /// `releases` until either side closes it.
    Watch {
        line: Vec<u8>,
        server: String,
        releases: mpsc::Receiver<String>,
    },
}

/// Answers one request line.
pub fn handle(daemon: &Daemon, peer: &Peer, line: &[u8]) -> Reply {
    let request: RawRequest = match serde_json::from_slice(line) {
        Ok(r) => r,
        Err(err) => {
            let message = format!("not a request: {err}");
            let answer = Err(ApiError::new(ErrorCode::BadRequest, message));
            return Reply::Line(respond(0, answer));
        }
    };
    if request.v != PROTOCOL_VERSION {
        let message = format!(
            "protocol version {} is not supported; this daemon speaks {PROTOCOL_VERSION}",
            request.v
        );
        let answer = Err(ApiError::new(ErrorCode::UnsupportedVersion, message));
        return Reply::Line(respond(request.id, answer));
    }
    if request.op == ops::WATCH {
        return match args::<ServerArgs>(request.args) {
            Ok(a) => {
                let session = verdict_session(daemon, peer);
                Reply::Watch {
                    line: respond(request.id, ok(&serde_json::json!({}))),
                    releases: daemon.engine.watch_releases(&session, &a.server),
                    server: a.server,
                }
            }
            Err(err) => Reply::Line(respond(request.id, Err(err))),
        };
    }
    Reply::Line(respond(request.id, dispatch(daemon, peer, &request)))
}

/// The line announcing that `tool` of `server` is let through now.
pub fn released_notice(server: &str, tool: &str) -> Vec<u8> {
    let notice = Notice {
        v: PROTOCOL_VERSION,
        notice: NoticeKind::ToolReleased,
        server: server.to_owned(),
        tool: tool.to_owned(),
    };
    let mut line = serde_json::to_vec(&notice).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The answer to a request line longer than the protocol allows.
pub fn oversize() -> Vec<u8> {
    respond(
        0,
        Err(ApiError::new(
            ErrorCode::BadRequest,
            "request line too long",
        )),
    )
}

/// The answer to a connection that is not served (an unidentifiable peer, a limit reached).
pub fn refused(why: &str) -> Vec<u8> {
    respond(0, Err(forbidden(why)))
}

fn respond(id: u64, answer: Answer) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(format!("{{\"v\":{PROTOCOL_VERSION},\"id\":{id},").as_bytes());
    match answer {
        Ok(ok) => {
            out.extend_from_slice(b"\"ok\":");
            out.extend_from_slice(&ok);
        }
        Err(err) => {
            out.extend_from_slice(b"\"error\":");
            // An error of two strings always serialises.
            out.extend_from_slice(&serde_json::to_vec(&err).unwrap_or_else(|_| b"{}".to_vec()));
        }
    }
    out.extend_from_slice(b"}\n");
    out
}

fn ok<T: Serialize>(value: &T) -> Answer {
    serde_json::to_vec(value).map_err(|e| internal(format!("cannot encode the answer: {e}")))
}

fn args<T: DeserializeOwned>(raw: Option<&RawValue>) -> Result<T, ApiError> {
    let text = raw.map_or("{}", RawValue::get);
    serde_json::from_str(text)
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("bad args: {e}")))
}

fn internal(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Internal, message)
}

fn forbidden(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Forbidden, message)
}

fn admin_only(peer: &Peer, what: &str) -> Result<(), ApiError> {
    if peer.is_admin() {
        return Ok(());
    }
    Err(forbidden(format!(
        "{what} needs an administrator (root, the daemon's user or a member of the admin group); {} is not one",
        peer.user
    )))
}

fn dispatch(daemon: &Daemon, peer: &Peer, request: &RawRequest) -> Answer {
    let raw = request.args;
    let engine = &daemon.engine;
    match request.op.as_str() {
        ops::HELLO => ok(&Hello {
            protocol: PROTOCOL_VERSION,
            daemon: format!("agentshd {}", env!("CARGO_PKG_VERSION")),
            instance: daemon.instance.clone(),
            role: peer.role,
            session: peer.session.clone(),
            limitations: daemon.limitations.clone(),
            traffic: daemon.traffic.get().cloned(),
        }),
        ops::SERVER_SETUP => {
            let a: ServerSetupArgs = args(raw)?;
            ok(&engine.server_setup(
                &verdict_session(daemon, peer),
                &a.server,
                &a.origin,
                a.resumed,
            ))
        }
        ops::BINARY => {
            let a: BinaryArgs = args(raw)?;
            let verdict = engine
                .binary(
                    &verdict_session(daemon, peer),
                    &a.server,
                    &a.path,
                    &a.sha256,
                )
                .map_err(|e| internal(e.0))?;
            ok(&verdict)
        }
        ops::TOOLS_LISTED => {
            let a: ToolsListedArgs = args(raw)?;
            ok(&engine.tools_listed(&verdict_session(daemon, peer), &a.server, &a.tools))
        }
        ops::TOOL_CALL => {
            let a: ToolCallArgs = args(raw)?;
            ok(&engine.tool_call(
                &verdict_session(daemon, peer),
                &a.server,
                &a.tool,
                a.arguments.as_ref(),
            ))
        }
        ops::OUTPUT => {
            let a: OutputArgs = args(raw)?;
            ok(&engine.output(
                &verdict_session(daemon, peer),
                &a.server,
                a.tool.as_deref(),
                &a.method,
                &a.output,
            ))
        }
        ops::SERVER_REQUEST => {
            let a: ServerRequestArgs = args(raw)?;
            ok(&engine.server_request(
                &verdict_session(daemon, peer),
                &a.server,
                &a.method,
                a.params.as_ref(),
            ))
        }
        ops::INSTRUCTIONS => {
            let a: InstructionsArgs = args(raw)?;
            ok(&engine.instructions(&verdict_session(daemon, peer), &a.server, &a.text))
        }
        ops::WITHHELD_CAPABILITIES => {
            // The policy is the session's; the server is named for the day it is per server.
            let _: ServerArgs = args(raw)?;
            ok(&engine.withheld_capabilities(&verdict_session(daemon, peer)))
        }
        ops::RECORD => {
            let a: RecordArgs = args(raw)?;
            let mut event = a.event;
            // The session is the kernel's answer and the time the daemon's, whatever the event
            // claims: a back-dated event would end `since` queries early and hide what
            // follows it.
            event.session = None;
            event.seq = None;
            event.timestamp = std::time::SystemTime::now();
            engine.record(&verdict_session(daemon, peer), event);
            ok(&serde_json::json!({}))
        }
        ops::SESSION_CREATE => create_session(daemon, peer, args(raw)?),
        ops::SESSION_LIST => {
            let sessions: Vec<SessionRecord> = daemon
                .log
                .sessions()
                .map_err(|e| internal(e.to_string()))?
                .into_iter()
                .filter(|s| readable(peer, s))
                .collect();
            let listed: Vec<serde_json::Value> = sessions
                .iter()
                .map(|s| {
                    let mut v = serde_json::to_value(s.without_policy_text()).unwrap_or_default();
                    v["live"] = daemon.sessions.is_live(&s.id).into();
                    v
                })
                .collect();
            ok(&listed)
        }
        ops::SESSION_REPORT => {
            let a: SessionArgs = args(raw)?;
            let record = readable_session(daemon, peer, &a.session)?;
            ok(&report::build(daemon, &record).map_err(|e| internal(e.to_string()))?)
        }
        ops::EVENTS => {
            let a: EventsArgs = args(raw)?;
            let query = restrict(daemon, peer, a.query)?;
            // Events recorded before this request are in the answer, not only those committed.
            daemon.log.flush();
            ok(&daemon
                .log
                .query(&query)
                .map_err(|e| internal(e.to_string()))?)
        }
        ops::EVENTS_PAGE => {
            let a: EventsPageArgs = args(raw)?;
            let query = restrict(daemon, peer, a.query)?;
            daemon.log.flush();
            ok(&daemon
                .log
                .page(a.after, PAGE_SCAN, &query)
                .map_err(|e| internal(e.to_string()))?)
        }
        ops::AUDIT_KEY => ok(&AuditKey {
            public_key: daemon.log.public_key_hex().to_owned(),
            key_id: daemon.log.key_id().to_owned(),
        }),
        ops::AUDIT_HEAD => match daemon.log.chain_head() {
            Some((seq, hash)) => ok(&AuditHead { seq, hash }),
            None => Err(internal(
                "the trail has no chained record (tamper evidence is off, or nothing was recorded)",
            )),
        },
        ops::AUDIT_RECORDS => {
            let a: AuditRecordsArgs = args(raw)?;
            match (&a.session, peer.role) {
                (None, Role::Admin) => {}
                (None, _) => {
                    return Err(forbidden(
                        "the whole trail is for administrators; verify one of your sessions \
                         with --session",
                    ));
                }
                (Some(session), _) => {
                    restrict(
                        daemon,
                        peer,
                        EventQuery {
                            sessions: Some(vec![session.clone()]),
                            ..EventQuery::default()
                        },
                    )?;
                }
            }
            daemon.log.flush();
            let page = daemon
                .log
                .raw_records(a.after, PAGE_SCAN, a.session.as_deref())
                .map_err(|e| internal(e.to_string()))?;
            ok(&AuditRecords {
                next: page.last().map_or(a.after, |(seq, _)| *seq),
                records: page
                    .into_iter()
                    .map(|(_, bytes)| String::from_utf8_lossy(&bytes).into_owned())
                    .collect(),
            })
        }
        ops::SECRETS_LIST => ok(&super::secrets::list(daemon)),
        ops::SECRETS_TEST => {
            if !peer.is_admin() {
                return Err(forbidden("testing a brokered secret is for administrators"));
            }
            let a: SecretArgs = args(raw)?;
            match super::secrets::test(daemon, &a.name) {
                Some(test) => ok(&test),
                None => Err(ApiError::new(
                    ErrorCode::NotFound,
                    format!(
                        "no brokered secret is named {} (`agentshctl secrets list`)",
                        a.name
                    ),
                )),
            }
        }
        ops::PINS_LIST => {
            let a: PinsArgs = args(raw)?;
            pins_list(daemon, peer, &a)
        }
        ops::PINS_DIFF => {
            if peer.role == Role::Session {
                return Err(forbidden("a session's processes may not read pins"));
            }
            let a: PinsArgs = args(raw)?;
            let (Some(server), Some(tool)) = (a.server, a.tool) else {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "pins.diff needs server and tool",
                ));
            };
            let store = pin_store(daemon)?;
            let pinned = store
                .tool_pin(&server, &tool)
                .map_err(|e| internal(e.to_string()))?
                .ok_or_else(|| {
                    ApiError::new(ErrorCode::NotFound, format!("no pin for {server}:{tool}"))
                })?;
            let pending = store
                .pending(&server, &tool)
                .map_err(|e| internal(e.to_string()))?;
            ok(&PinDiff {
                server,
                tool,
                pinned,
                pending,
            })
        }
        ops::PINS_TRUST => {
            admin_only(peer, "trusting a definition")?;
            let a: PinsArgs = args(raw)?;
            let (Some(server), Some(tool)) = (a.server, a.tool) else {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "pins.trust needs server and tool",
                ));
            };
            let pin = engine
                .trust(&server, &tool, &peer.user)
                .map_err(|e| internal(e.to_string()))?
                .ok_or_else(|| {
                    ApiError::new(
                        ErrorCode::NotFound,
                        format!(
                            "no changed definition of {server}:{tool} is waiting to be trusted"
                        ),
                    )
                })?;
            ok(&pin)
        }
        ops::PINS_RESET => {
            admin_only(peer, "resetting pins")?;
            let a: PinsArgs = args(raw)?;
            let Some(server) = a.server else {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "pins.reset needs a server",
                ));
            };
            let removed = pin_store(daemon)?
                .reset(&server, a.tool.as_deref())
                .map_err(|e| internal(e.to_string()))?;
            engine.record_global(
                Event::new(
                    EventKind::McpPinTrusted,
                    &server,
                    Action::Alert,
                    format!("{removed} pin(s) reset by {}", peer.user),
                )
                .details(serde_json::json!({"reset_by": peer.user, "tool": a.tool})),
            );
            ok(&serde_json::json!({"removed": removed}))
        }
        ops::APPROVE => {
            admin_only(peer, "approving a tool")?;
            let a: ApproveArgs = args(raw)?;
            let approved = engine
                .approve(&a.server, a.tool.as_deref(), &peer.user)
                .map_err(|e| internal(e.to_string()))?;
            if approved.is_empty() {
                let message = match &a.tool {
                    None => format!(
                        "no tool of server '{}' is held back by a detection in a live session",
                        a.server
                    ),
                    Some(t) => format!(
                        "tool '{}:{t}' is not held back by a detection in a live session",
                        a.server
                    ),
                };
                return Err(ApiError::new(ErrorCode::NotFound, message));
            }
            ok(&Approved {
                approved: approved
                    .into_iter()
                    .map(|(tool, _)| ToolRef {
                        server: a.server.clone(),
                        tool,
                    })
                    .collect(),
                by: peer.user.clone(),
            })
        }
        ops::POLICY_GENERATE => {
            let a: SessionArgs = args(raw)?;
            let record = readable_session(daemon, peer, &a.session)?;
            let policy =
                report::generate_policy(daemon, &record).map_err(|e| internal(e.to_string()))?;
            ok(&Generated { policy })
        }
        ops::POLICY_RELOAD => {
            admin_only(peer, "reloading the policy")?;
            ok(&daemon
                .reload_policy()
                .map_err(|e| ApiError::new(ErrorCode::Invalid, e))?)
        }
        other => Err(ApiError::new(
            ErrorCode::UnknownOp,
            format!("unknown operation `{other}`"),
        )),
    }
}

/// The engine session for a peer's verdicts. A shim outside any session gets its user's
/// unmanaged session, recorded the first time it is used.
fn verdict_session(daemon: &Daemon, peer: &Peer) -> std::sync::Arc<crate::engine::Session> {
    daemon.verdict_session(peer.session.as_deref(), &peer.verdict_session, peer.uid)
}

/// Whether the peer may read this session.
fn readable(peer: &Peer, session: &SessionRecord) -> bool {
    match peer.role {
        Role::Admin => true,
        Role::Session => peer.session.as_deref() == Some(session.id.as_str()),
        Role::User => session.owner_uid == peer.uid,
    }
}

fn readable_session(daemon: &Daemon, peer: &Peer, id: &str) -> Result<SessionRecord, ApiError> {
    let record = daemon
        .log
        .session(id)
        .map_err(|e| internal(e.to_string()))?;
    match record {
        Some(record) if readable(peer, &record) => Ok(record),
        // Not saying whether it exists: a session's processes may not probe for others.
        _ if peer.role == Role::Session => Err(forbidden(format!(
            "a session's processes may only read their own session ({})",
            peer.session.as_deref().unwrap_or_default()
        ))),
        Some(_) => Err(forbidden(format!("session {id} belongs to another user"))),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no session {id}"),
        )),
    }
}

/// Narrows a query to what the peer may read.
fn restrict(daemon: &Daemon, peer: &Peer, mut query: EventQuery) -> Result<EventQuery, ApiError> {
    let allowed: Vec<String> = match peer.role {
        Role::Admin => return Ok(query),
        Role::Session => peer.session.iter().cloned().collect(),
        Role::User => {
            let mut own: Vec<String> = daemon
                .log
                .sessions()
                .map_err(|e| internal(e.to_string()))?
                .into_iter()
                .filter(|s| s.owner_uid == peer.uid)
                .map(|s| s.id)
                .collect();
            own.push(unmanaged_session(peer.uid));
            own
        }
    };
    match &query.sessions {
        Some(asked) => {
            if let Some(other) = asked.iter().find(|s| !allowed.contains(s)) {
                return Err(forbidden(match peer.role {
                    Role::Session => format!(
                        "a session's processes may only read their own session, not {other}"
                    ),
                    _ => format!("session {other} is not one of yours"),
                }));
            }
        }
        None => query.sessions = Some(allowed),
    }
    Ok(query)
}

fn create_session(daemon: &Daemon, peer: &Peer, a: SessionCreateArgs) -> Answer {
    if peer.role == Role::Session {
        return Err(forbidden(
            "a session's processes cannot start sessions (that would leave the current one)",
        ));
    }
    if a.uid != peer.uid && peer.uid != 0 {
        return Err(forbidden(format!(
            "uid {} may not start a session for uid {}",
            peer.uid, a.uid
        )));
    }
    let rules = match &a.policy {
        None => None,
        Some(_) if !(peer.is_admin() || daemon.settings.allow_user_policy) => {
            return Err(forbidden(
                "only administrators may choose a session's policy (sessions.allow_user_policy is off)",
            ));
        }
        Some(source) => {
            let policy = crate::config::load_str(&source.text, &source.origin)
                .map_err(|e| ApiError::new(ErrorCode::Invalid, e.to_string()))?;
            Some(
                Rules::compile(policy)
                    .map_err(|e| ApiError::new(ErrorCode::Invalid, e.to_string()))?,
            )
        }
    };
    let id = crate::session::new_id();
    let placement = daemon
        .sessions
        .create(&id, a.pid, peer.pid, a.uid)
        .map_err(|e| ApiError::new(ErrorCode::Invalid, e.to_string()))?;
    let cgroup = match &placement {
        Placement::Cgroup(path) => Some(path.clone()),
        Placement::Process { .. } => None,
    };
    let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(a.uid))
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {}", a.uid), |u| u.name);
    let mut record = SessionRecord {
        id: id.clone(),
        name: a.name,
        owner_uid: a.uid,
        owner,
        command: a.command,
        cgroup,
        placement: Some(placement.clone()),
        policy: rules.as_ref().map_or_else(
            || daemon.engine.rules().policy.origin.clone(),
            |r| r.policy.origin.clone(),
        ),
        policy_text: a.policy.as_ref().map(|source| source.text.clone()),
        started_at: now_secs(),
        ended_at: None,
        placeholders: Default::default(),
    };
    let session_rules = rules.clone().unwrap_or_else(|| daemon.engine.rules());
    if let Err(err) = daemon.enforce(&id, &placement, &session_rules) {
        // The agent would run with nothing in the kernel to stop it: not started at all.
        return Err(internal(format!(
            "the kernel cannot enforce the session: {err}"
        )));
    }
    let trust_bundle = match daemon.trust.get() {
        None => None,
        Some(trust) => match trust.open(&id, a.uid, &a.trusted_pem) {
            Ok(path) => Some(path.display().to_string()),
            Err(err) => {
                // Without its CA the session's TLS would be refused: not started at all (its
                // cgroup empties when the launcher gives up, and the reaper removes it).
                return Err(internal(format!(
                    "cannot make the session's certificate authority: {err}"
                )));
            }
        },
    };
    let handout = if a.no_secrets {
        super::secrets::declined(daemon)
    } else {
        super::secrets::hand_out(daemon, &placement, a.no_kernel)
    };
    record.placeholders = handout.placeholders.clone();
    daemon
        .log
        .put_session(&record)
        .map_err(|e| internal(e.to_string()))?;
    daemon.hold_secrets(&id, &record.placeholders);
    let session = daemon.engine.open_session(Some(&id), rules);
    daemon.engine.record(
        &session,
        Event::new(
            EventKind::SessionStarted,
            "",
            Action::Allow,
            format!("session started by {} for {}", peer.user, record.owner),
        )
        .details(serde_json::json!({
            "command": record.command,
            "cgroup": record.cgroup,
            "policy": record.policy,
            "policy_sha256": session_rules.policy.sha256,
            "name": record.name,
            "host": a.host,
            "configured_servers": a.configured,
            "isolation": a.isolation.as_deref().unwrap_or("unknown: the launcher did not say"),
            "secrets": handout.placeholders.keys().collect::<Vec<_>>(),
            "secrets_withheld": handout.withheld,
            "secrets_declined": a.no_secrets,
        })),
    );
    let mut warnings = session_warnings(daemon, &session, a.host, &a.configured);
    warnings.extend(handout.warnings);
    if let Some(started) = daemon.on_session_start.get() {
        started(&session);
    }
    // The daemon's launcher patterns first (they may name ids), then the policy's.
    let mut launcher = daemon.settings.launcher.clone();
    launcher
        .custom_servers
        .extend(
            session_rules
                .policy
                .sandbox
                .mcp
                .launch_patterns
                .iter()
                .map(|c| CustomServerSetting {
                    pattern: c.pattern.as_str().to_owned(),
                    id: c.id.clone(),
                }),
        );
    ok(&SessionCreated {
        session: record.without_policy_text(),
        launcher,
        proxy: daemon.proxy.get().cloned(),
        trust_bundle,
        warnings,
        traffic: daemon.traffic.get().cloned(),
        secrets: handout.placeholders,
        withheld: handout.withheld,
    })
}

fn pin_store(daemon: &Daemon) -> Result<&crate::store::PinStore, ApiError> {
    daemon
        .engine
        .pin_store()
        .ok_or_else(|| internal("this daemon keeps no pins"))
}

fn pins_list(daemon: &Daemon, peer: &Peer, a: &PinsArgs) -> Answer {
    if peer.role == Role::Session {
        return Err(forbidden("a session's processes may not list pins"));
    }
    let store = pin_store(daemon)?;
    let mut entries = Vec::new();
    for (server, tool, pin) in store.all_tool_pins().map_err(|e| internal(e.to_string()))? {
        if a.server.as_ref().is_some_and(|s| *s != server)
            || a.tool.as_ref().is_some_and(|t| *t != tool)
        {
            continue;
        }
        let pending = store
            .pending(&server, &tool)
            .map_err(|e| internal(e.to_string()))?;
        entries.push(PinEntry {
            server,
            tool,
            pin,
            pending,
        });
    }
    ok(&entries)
}

/// What the user starting a session should know: policy server names that match none of the
/// agent's configured servers and no server agentsh has seen (rules that would apply to
/// nothing), and the agent's network servers the policy does not declare (their messages are
/// not read).
fn session_warnings(
    daemon: &Daemon,
    session: &crate::engine::Session,
    host: Option<crate::hosts::Host>,
    configured: &[crate::hosts::ConfiguredServer],
) -> Vec<String> {
    use crate::hosts::Transport;
    let rules = session.rules();
    let names: Vec<String> = configured.iter().map(|s| s.name.clone()).collect();
    let agent = host.map_or("the agent", |h| h.title());
    let list = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    let mut warnings: Vec<String> = daemon
        .engine
        .unseen_server_references(&rules, &names)
        .into_iter()
        .map(|r| {
            format!(
                "{}, which is not one of {agent}'s MCP servers ({list}) and which no session has run: it applies to nothing",
                r.describe(&rules.policy.origin)
            )
        })
        .collect();
    for server in configured.iter().filter(|s| s.enabled) {
        if let Transport::Http { url } = &server.transport
            && rules.policy.server(&server.name).is_none()
        {
            warnings.push(format!(
                "{}'s network MCP server `{}` ({url}) is not declared in the policy (sandbox.mcp.servers with type: http and this url): its messages are not read",
                server.host.title(),
                server.name
            ));
        }
    }
    warnings
}

/// Records the end of a session and forgets its engine state.
pub fn end_session(daemon: &Daemon, id: &str, why: &str) {
    if let Some(session) = daemon.engine.find_session(id) {
        daemon.engine.report_unseen_servers(&session);
    }
    // Its engine state may be gone (ended while the daemon was down): the event names the
    // session itself rather than through one.
    let mut ended = Event::new(EventKind::SessionEnded, "", Action::Allow, why);
    ended.session = Some(id.to_owned());
    daemon.engine.record_global(ended);
    daemon.engine.close_session(id);
    daemon.release_secrets(id);
    if let Some(trust) = daemon.trust.get() {
        trust.close(id);
    }
    if let Some(enforcement) = daemon.enforcement.get() {
        enforcement.session_ended(id);
    }
    if let Some(ended) = daemon.on_session_end.get() {
        ended(id);
    }
    if let Ok(Some(mut record)) = daemon.log.session(id) {
        record.ended_at = Some(now_secs());
        if let Err(err) = daemon.log.put_session(&record) {
            eprintln!("agentshd: cannot record the end of session {id}: {err}");
        }
    }
}
