//! A blocking client of the control socket, and [`RemoteDecider`]: the engine in agentshd as
//! seen by an interception point.

use crate::sync::lock;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::protocol::{
    self, ApiError, BinaryArgs, Hello, InstructionsArgs, Notice, NoticeKind, OutputArgs,
    PROTOCOL_VERSION, RawResponse, RecordArgs, Request, ServerArgs, ServerRequestArgs,
    ServerSetupArgs, ToolCallArgs, ToolsListedArgs, ops,
};
use crate::audit::Event;
use crate::engine::{
    BinaryVerdict, CallVerdict, CapabilityVerdict, DecideError, Decider, InstructionsVerdict,
    ListVerdict, OutputVerdict, RequestVerdict, ServerSetup,
};
use crate::registry::ServerOrigin;

/// The socket path when neither `--socket` nor `$AGENTSH_SOCKET` says otherwise.
pub const SYSTEM_SOCKET: &str = "/run/agentsh/agentsh.sock";

/// How long a request may wait for its answer; past it the caller fails closed.
const ANSWER_PATIENCE: Duration = Duration::from_secs(30);

/// How soon a watch closed by the daemon is tried again.
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// The default socket: the system one for root, else the user's runtime dir when there is one
/// and no system daemon listens (an unprivileged development daemon puts its socket there).
pub fn default_socket_path() -> PathBuf {
    let system = PathBuf::from(SYSTEM_SOCKET);
    if nix::unistd::geteuid().is_root() || system.exists() {
        return system;
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => Path::new(&dir).join("agentsh/agentsh.sock"),
        _ => system,
    }
}

/// `--socket PATH`, else `$AGENTSH_SOCKET`, else the default.
pub fn socket_path(flag: Option<&Path>) -> PathBuf {
    if let Some(path) = flag {
        return path.to_owned();
    }
    match std::env::var_os("AGENTSH_SOCKET") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => default_socket_path(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach agentshd at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("agentshd at {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("agentshd at {path} answered something unexpected: {message}")]
    Protocol { path: PathBuf, message: String },
    #[error("{0}")]
    Api(#[from] ApiError),
}

/// One connection; requests are answered in order.
pub struct Client {
    path: PathBuf,
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    line: Vec<u8>,
    out: Vec<u8>,
}

impl Client {
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let connect = |source| ClientError::Connect {
            path: path.to_owned(),
            source,
        };
        let stream = UnixStream::connect(path).map_err(connect)?;
        stream
            .set_read_timeout(Some(ANSWER_PATIENCE))
            .map_err(connect)?;
        let reader = BufReader::with_capacity(1 << 16, stream.try_clone().map_err(connect)?);
        Ok(Self {
            path: path.to_owned(),
            writer: stream,
            reader,
            next_id: 1,
            line: Vec::new(),
            out: Vec::with_capacity(4096),
        })
    }

    /// Sends one request and reads its answer.
    pub fn call<A: Serialize, R: DeserializeOwned>(
        &mut self,
        op: &str,
        args: &A,
    ) -> Result<R, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.out.clear();
        let request = Request {
            v: PROTOCOL_VERSION,
            id,
            op,
            args,
        };
        serde_json::to_writer(&mut self.out, &request).map_err(|e| self.protocol(e))?;
        self.out.push(b'\n');
        self.writer.write_all(&self.out).map_err(|e| self.io(e))?;

        self.line.clear();
        let read = Read::by_ref(&mut self.reader)
            .take(protocol::MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut self.line)
            .map_err(|e| self.io(e))?;
        if read == 0 {
            return Err(self.io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the daemon closed the connection",
            )));
        }
        let response: RawResponse =
            serde_json::from_slice(&self.line).map_err(|e| self.protocol(e))?;
        if response.id != id || response.v != PROTOCOL_VERSION {
            return Err(self.protocol(format!(
                "answer v{} id {} to request v{PROTOCOL_VERSION} id {id}",
                response.v, response.id
            )));
        }
        match (response.ok, response.error) {
            (_, Some(error)) => Err(ClientError::Api(error)),
            (Some(ok), None) => serde_json::from_str(ok.get()).map_err(|e| self.protocol(e)),
            (None, None) => Err(self.protocol("neither ok nor error")),
        }
    }

    /// Asks for the release notices of `server`'s tools in the caller's session; from then on
    /// this connection only carries notices, for as long as both ends keep it open.
    pub fn watch_releases(mut self, server: &str) -> Result<Notices, ClientError> {
        let _: serde::de::IgnoredAny = self.call(
            ops::WATCH,
            &ServerArgs {
                server: server.to_owned(),
            },
        )?;
        // Notices come when someone approves: no patience limit on them.
        self.writer.set_read_timeout(None).map_err(|e| self.io(e))?;
        Ok(Notices { client: self })
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn protocol(&self, message: impl std::fmt::Display) -> ClientError {
        ClientError::Protocol {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }
}

/// The notices of a watching connection, until the daemon closes it (the session ended, or
/// the daemon stopped).
pub struct Notices {
    client: Client,
}

impl Iterator for Notices {
    type Item = Notice;

    fn next(&mut self) -> Option<Notice> {
        let client = &mut self.client;
        loop {
            client.line.clear();
            let read = Read::by_ref(&mut client.reader)
                .take(protocol::MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut client.line)
                .ok()?;
            if read == 0 {
                return None;
            }
            // A line this client does not know (a newer daemon's notice kind) is skipped.
            if let Ok(notice) = serde_json::from_slice(&client.line) {
                return Some(notice);
            }
        }
    }
}

/// Verdicts from agentshd. Connections are pooled so the shim's two relay directions each
/// get one without waiting for the other. A broken pooled connection is dropped and the
/// request tried once more on a new one; a request that still gets no answer fails closed.
pub struct RemoteDecider {
    path: PathBuf,
    pool: Mutex<Vec<Client>>,
    /// The daemon run the connections talk to (its hello's `instance`).
    instance: Mutex<String>,
    /// The last tools/list of each server, for a daemon that restarted: it forgot them, and
    /// would take a held-back tool for one never listed.
    listed: Mutex<HashMap<String, Vec<Value>>>,
    /// Each server's origin, told again to a restarted daemon (rules match its package).
    origins: Mutex<HashMap<String, ServerOrigin>>,
}

impl RemoteDecider {
    /// Connects once to check the daemon is there.
    pub fn connect(path: &Path) -> Result<Self, ClientError> {
        let decider = Self {
            path: path.to_owned(),
            pool: Mutex::new(Vec::new()),
            instance: Mutex::default(),
            listed: Mutex::default(),
            origins: Mutex::default(),
        };
        let client = decider.connect_checked()?;
        lock(&decider.pool).push(client);
        Ok(decider)
    }

    /// A new connection. When it reaches a daemon run other than the last one, that daemon
    /// first learns again what this shim's servers listed.
    fn connect_checked(&self) -> Result<Client, ClientError> {
        let mut client = Client::connect(&self.path)?;
        let hello: Hello = client.call(ops::HELLO, &serde_json::json!({}))?;
        let mut instance = lock(&self.instance);
        if *instance != hello.instance {
            // Only a daemon run that has seen this shim before has forgotten its servers.
            let resumed = !instance.is_empty();
            for (server, origin) in lock(&self.origins).iter().filter(|_| resumed) {
                let _: ServerSetup = client.call(
                    ops::SERVER_SETUP,
                    &ServerSetupArgs {
                        server: server.clone(),
                        origin: origin.clone(),
                        resumed: true,
                    },
                )?;
            }
            let listed = lock(&self.listed);
            for (server, tools) in listed.iter() {
                let _: ListVerdict = client.call(
                    ops::TOOLS_LISTED,
                    &ToolsListedArgs {
                        server: server.clone(),
                        tools,
                    },
                )?;
            }
            *instance = hello.instance;
        }
        Ok(client)
    }

    fn call<A: Serialize, R: DeserializeOwned>(
        &self,
        op: &str,
        args: &A,
    ) -> Result<R, DecideError> {
        let pooled = lock(&self.pool).pop();
        let fresh = pooled.is_none();
        let client = match pooled {
            Some(client) => client,
            None => self
                .connect_checked()
                .map_err(|e| DecideError(e.to_string()))?,
        };
        match self.call_on(client, op, args) {
            // A pooled connection can be one to a daemon that has since restarted: one more
            // try on a new connection, so a restart costs the agent nothing.
            Err(Broken(_)) if !fresh => {
                let client = self
                    .connect_checked()
                    .map_err(|e| DecideError(e.to_string()))?;
                self.call_on(client, op, args).map_err(DecideError::from)
            }
            answer => answer.map_err(DecideError::from),
        }
    }

    /// One request on `client`, which goes back to the pool unless the connection broke.
    fn call_on<A: Serialize, R: DeserializeOwned>(
        &self,
        mut client: Client,
        op: &str,
        args: &A,
    ) -> Result<R, CallError> {
        match client.call(op, args) {
            Ok(answer) => {
                lock(&self.pool).push(client);
                Ok(answer)
            }
            // The connection is fine after an error answer; keep it.
            Err(ClientError::Api(err)) => {
                lock(&self.pool).push(client);
                Err(Refused(DecideError(format!("agentshd refused: {err}"))))
            }
            Err(ClientError::Io { source, .. }) if daemon_went_away(&source) => {
                Err(Broken(DecideError(format!("agentshd went away: {source}"))))
            }
            // A timeout or a garbled answer: the daemon may have acted on the request, so it
            // is not sent again.
            Err(err) => Err(Refused(DecideError(err.to_string()))),
        }
    }
}

/// Whether the connection ended under the request: the daemon stopped (or restarted).
fn daemon_went_away(err: &std::io::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(
        err.kind(),
        BrokenPipe | ConnectionReset | ConnectionAborted | UnexpectedEof
    )
}

/// Why a request on a connection failed.
enum CallError {
    /// The daemon answered with an error, or may have acted on the request.
    Refused(DecideError),
    /// The connection ended: the daemon went away, most likely before it saw the request.
    Broken(DecideError),
}
use CallError::{Broken, Refused};

impl From<CallError> for DecideError {
    fn from(err: CallError) -> Self {
        match err {
            Refused(e) | Broken(e) => e,
        }
    }
}

impl Decider for RemoteDecider {
    fn server_setup(
        &self,
        server: &str,
        origin: &ServerOrigin,
    ) -> Result<ServerSetup, DecideError> {
        lock(&self.origins).insert(server.to_owned(), origin.clone());
        self.call(
            ops::SERVER_SETUP,
            &ServerSetupArgs {
                server: server.to_owned(),
                origin: origin.clone(),
                resumed: false,
            },
        )
    }

    fn binary(&self, server: &str, path: &str, sha256: &str) -> Result<BinaryVerdict, DecideError> {
        self.call(
            ops::BINARY,
            &BinaryArgs {
                server: server.to_owned(),
                path: path.to_owned(),
                sha256: sha256.to_owned(),
            },
        )
    }

    fn tools_listed(&self, server: &str, tools: &[Value]) -> Result<ListVerdict, DecideError> {
        let verdict = self.call(
            ops::TOOLS_LISTED,
            &ToolsListedArgs {
                server: server.to_owned(),
                tools,
            },
        )?;
        lock(&self.listed).insert(server.to_owned(), tools.to_vec());
        Ok(verdict)
    }

    fn tool_call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<CallVerdict, DecideError> {
        self.call(
            ops::TOOL_CALL,
            &ToolCallArgs {
                server: server.to_owned(),
                tool: tool.to_owned(),
                arguments,
            },
        )
    }

    fn output(
        &self,
        server: &str,
        tool: Option<&str>,
        method: &str,
        output: &Value,
    ) -> Result<OutputVerdict, DecideError> {
        self.call(
            ops::OUTPUT,
            &OutputArgs {
                server: server.to_owned(),
                tool: tool.map(str::to_owned),
                method: method.to_owned(),
                output,
            },
        )
    }

    fn server_request(
        &self,
        server: &str,
        method: &str,
        params: Option<&Value>,
    ) -> Result<RequestVerdict, DecideError> {
        self.call(
            ops::SERVER_REQUEST,
            &ServerRequestArgs {
                server: server.to_owned(),
                method: method.to_owned(),
                params: params.cloned(),
            },
        )
    }

    fn instructions(&self, server: &str, text: &str) -> Result<InstructionsVerdict, DecideError> {
        self.call(
            ops::INSTRUCTIONS,
            &InstructionsArgs {
                server: server.to_owned(),
                text: text.to_owned(),
            },
        )
    }

    fn withheld_capabilities(&self, server: &str) -> Result<CapabilityVerdict, DecideError> {
        self.call(
            ops::WITHHELD_CAPABILITIES,
            &ServerArgs {
                server: server.to_owned(),
            },
        )
    }

    fn record(&self, event: Event) {
        let recorded: Result<Value, DecideError> = self.call(ops::RECORD, &RecordArgs { event });
        if let Err(err) = recorded {
            eprintln!("agentsh: event not recorded: {err}");
        }
    }

    /// On a connection of its own, read by a thread of its own, opened again when the daemon
    /// restarts, for as long as the receiver is kept. After such a gap an empty name stands
    /// for whatever may have been let through meanwhile.
    fn watch_releases(&self, server: &str) -> Result<mpsc::Receiver<String>, DecideError> {
        let path = self.path.clone();
        let server = server.to_owned();
        let mut notices = Client::connect(&path)
            .and_then(|client| client.watch_releases(&server))
            .map_err(|e| DecideError(e.to_string()))?;
        let (released, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("release-notices".into())
            .spawn(move || {
                loop {
                    for notice in notices.by_ref() {
                        match notice.notice {
                            NoticeKind::ToolReleased => {
                                if released.send(notice.tool).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                    // The daemon closed the watch (restart, or the session ended): watch again
                    // once it answers.
                    notices = loop {
                        std::thread::sleep(WATCH_RETRY);
                        if let Ok(again) =
                            Client::connect(&path).and_then(|c| c.watch_releases(&server))
                        {
                            break again;
                        }
                    };
                    // A release while no watch was open went unheard: count one, so the
                    // client lists again rather than miss it.
                    if released.send(String::new()).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| DecideError(format!("cannot start the notice reader: {e}")))?;
        Ok(receiver)
    }
}
