//! Colab runtimes as kernel servers: every Colab constant and wire shape of the standalone host
//! lives here, and nowhere in `kernels`.
//!
//! A Colab runtime is a Jupyter Server behind Colab's HTTPS proxy. The proxy wants its own
//! token (`X-Colab-Runtime-Proxy-Token` on REST calls and the WebSocket handshake, and the
//! query parameter `colab-runtime-proxy-token` on the kernel WebSocket) and a client-agent
//! header, and puts `)]}'` and a newline before the JSON of Colab's own endpoints. All of that
//! is a [`kernels::ConnectionProfile`] built field by field ([`runtime_profile`]).
//!
//! Where the runtime and its token come from ([`ColabSource`]):
//! - google-colab-cli's sessions file (`~/.config/colab-cli/sessions.json`): one session by
//!   name; its token is read from the file again whenever the proxy refuses the current one
//!   (the CLI renews it there, about five minutes before it expires);
//! - a runtime URL and a file holding its proxy token, read again when it changes.
//!
//! - experimentally, and only when configured, Colab's tunnel API with the user's Google
//!   credentials ([`tunnel`]).
//!
//! Never logged or shown: tokens, the sessions file's contents.

pub mod tunnel;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_core::colab::{ServiceFile, UploadChunk};
use serde::Deserialize;

pub mod slot;

/// The header that carries the runtime's proxy token.
pub const TOKEN_HEADER: &str = "X-Colab-Runtime-Proxy-Token";
/// The kernel WebSocket's query parameter that carries the same token.
pub const TOKEN_QUERY: &str = "colab-runtime-proxy-token";
/// The header that names the client to Colab.
pub const CLIENT_AGENT_HEADER: &str = "X-Colab-Client-Agent";
/// Our client name.
pub const CLIENT_AGENT: &str = "jupyter-mcp";
/// The anti-XSSI prefix of Colab's JSON answers.
pub const XSSI_PREFIX: &str = ")]}'\n";
/// The runtime's build information (its release tag): evidence of Colab, never proof.
pub const BUILD_INFO_PATH: &str = "api/colab/build-info";
/// The folder of the user's files on a runtime, as the kernel sees it.
pub const CONTENT_FOLDER: &str = "/content";
/// The environment variable that shortens (or lengthens) a Colab setup's deadline, in
/// milliseconds (default 300000, five minutes).
pub const SETUP_DEADLINE_ENV: &str = "JUPYTER_MCP_COLAB_SETUP_DEADLINE_MS";
/// google-colab-cli's sessions file under the user's configuration folder.
pub const SESSIONS_FILE: &str = "colab-cli/sessions.json";

/// Where the Colab runtime comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColabSource {
    /// The session of this name in google-colab-cli's sessions file.
    SessionsFile {
        /// The file.
        path: PathBuf,
        /// The session's name.
        session: String,
    },
    /// A runtime URL the user gave, with its proxy token in a file.
    RuntimeUrl {
        /// `https://…/`, the runtime's proxy base URL.
        url: String,
        /// The file holding the proxy token (read again when it changes).
        token_file: PathBuf,
    },
    /// Experimental: runtimes assigned and released through Colab's tunnel API with the
    /// user's Google application-default credentials (`configure_kernel` creates one, or reuses
    /// one by `serverAlias`).
    Tunnel {
        /// The tunnel API's base URL (Colab's unless a test points it elsewhere).
        base_url: String,
        /// The credentials file; `None` looks where gcloud puts it.
        credentials_file: Option<PathBuf>,
    },
}

/// A Colab runtime to run kernels on, ready to be used.
#[derive(Debug, Clone)]
pub struct ColabRuntime {
    /// Where it came from.
    pub source: ColabSource,
    /// Its Colab endpoint id, when the source names it.
    pub endpoint: Option<String>,
    /// How to reach it (`None` on the tunnel route until a setup assigns one).
    pub profile: Option<kernels::ConnectionProfile>,
    /// The runtime the kernels and the file service use.
    pub slot: Arc<slot::RuntimeSlot>,
    /// The tunnel client, on the tunnel route.
    pub tunnel: Option<Arc<tunnel::ColabTunnel>>,
    /// The certificate authorities runtimes are checked against.
    pub tls: kernels::TlsTrust,
}

impl ColabRuntime {
    /// The runtime `source` names, trusting `tls` for HTTPS. Fails with what to do when the
    /// sessions file has no such session or the URL cannot be used.
    pub fn open(source: ColabSource, tls: kernels::TlsTrust) -> Result<ColabRuntime, ColabError> {
        if let ColabSource::Tunnel {
            base_url,
            credentials_file,
        } = &source
        {
            let tunnel = tunnel::ColabTunnel::new(tunnel::TunnelConfig {
                base_url: base_url.clone(),
                credentials_file: credentials_file.clone(),
                tls: tls.clone(),
                ..tunnel::TunnelConfig::default()
            })
            .map_err(|error| ColabError::Url {
                reason: error.to_string(),
            })?;
            return Ok(ColabRuntime {
                source,
                endpoint: None,
                profile: None,
                slot: Arc::new(slot::RuntimeSlot::default()),
                tunnel: Some(Arc::new(tunnel)),
                tls,
            });
        }
        let (url, credential, endpoint, hint) = match &source {
            ColabSource::SessionsFile { path, session } => {
                let found = read_session(path, session)?;
                let credential = kernels::CredentialSource::Refresh(Arc::new(SessionToken {
                    path: path.clone(),
                    session: session.clone(),
                }));
                (
                    found.url,
                    credential,
                    Some(found.endpoint),
                    format!(
                        "the proxy token of session {session} in {} was refused: run `colab` (google-colab-cli) again so that it renews the session, or start a new one",
                        path.display()
                    ),
                )
            }
            ColabSource::RuntimeUrl { url, token_file } => (
                url.clone(),
                kernels::CredentialSource::File(token_file.clone()),
                None,
                format!(
                    "the runtime's proxy token in {} was refused: copy a fresh one into that file (tokens expire after about an hour)",
                    token_file.display()
                ),
            ),
            ColabSource::Tunnel { .. } => unreachable!("handled above"),
        };
        let url = kernels::ServerUrl::parse(&url).map_err(|error| ColabError::Url {
            reason: error.to_string(),
        })?;
        if !url.is_https() && !url.is_loopback() {
            return Err(ColabError::Url {
                reason: "a Colab runtime URL starts with https://".to_owned(),
            });
        }
        let mut profile = runtime_profile(url, credential);
        profile.tls = tls.clone();
        profile.credential_hint = hint;
        let mut active = slot::ActiveRuntime::open(profile.clone(), endpoint.clone(), None)
            .map_err(|error| ColabError::Url {
                reason: error.to_string(),
            })?;
        if let ColabSource::SessionsFile { session, .. } = &source {
            active.label = format!("Colab session {session}");
        }
        Ok(ColabRuntime {
            source,
            endpoint,
            profile: Some(profile),
            slot: Arc::new(slot::RuntimeSlot::holding(active)),
            tunnel: None,
            tls,
        })
    }

    /// What the start line says about it (no token).
    pub fn describe(&self) -> String {
        let url = self
            .profile
            .as_ref()
            .map(|profile| profile.base_url.to_string())
            .unwrap_or_default();
        match &self.source {
            ColabSource::SessionsFile { path, session } => format!(
                "Colab runtime of session {session} in {} ({url})",
                path.display(),
            ),
            ColabSource::RuntimeUrl { .. } => format!("Colab runtime {url}"),
            ColabSource::Tunnel { base_url, .. } => format!(
                "Colab runtimes assigned through the tunnel API at {base_url} (experimental; configure_kernel with runtime \"colab\" assigns one)"
            ),
        }
    }
}

/// The runtime's file service (its Contents API behind Colab's proxy) and build info, for
/// `check_colab`.
pub struct RuntimeFiles {
    slot: Arc<slot::RuntimeSlot>,
    source: ColabSource,
    setup: colab_setup::RegistryConfig,
    tunnel: Option<Arc<tunnel::ColabTunnel>>,
    tls: kernels::TlsTrust,
    /// Endpoints whose keep-alive loop runs.
    kept_alive: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// How often a runtime assigned through the tunnel is kept alive while it is in use (Colab
/// reclaims idle runtimes; the official clients ping every few minutes).
const KEEP_ALIVE_EVERY: std::time::Duration = std::time::Duration::from_secs(4 * 60);

/// How long one file-service call may take.
const FILE_SERVICE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl RuntimeFiles {
    /// The file service of the runtime `slot` holds (now and after a setup changes it), from
    /// `source`.
    pub fn new(runtime: &ColabRuntime) -> RuntimeFiles {
        RuntimeFiles {
            slot: runtime.slot.clone(),
            source: runtime.source.clone(),
            setup: colab_setup::RegistryConfig::default(),
            tunnel: runtime.tunnel.clone(),
            tls: runtime.tls.clone(),
            kept_alive: Arc::default(),
        }
    }

    /// Uses the runtime the tunnel assigned at `endpoint` for `alias` from now on, and keeps it
    /// alive while it stays in use. Its proxy token is fetched again through the tunnel when
    /// the proxy refuses it.
    fn activate(&self, alias: &colab_setup::ServerAlias, endpoint: &str) -> anyhow::Result<()> {
        let tunnel = self
            .tunnel
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no tunnel"))?;
        let assignment = tunnel
            .assignment(endpoint)
            .ok_or_else(|| anyhow::anyhow!("the tunnel's answer named no runtime"))?;
        let url = assignment
            .url
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the assignment has no proxy URL"))?;
        let url = kernels::ServerUrl::parse(&url)?;
        let credential = kernels::CredentialSource::Refresh(Arc::new(TunnelToken {
            tunnel: tunnel.clone(),
            alias: alias.clone(),
        }));
        let mut profile = runtime_profile(url, credential);
        profile.tls = self.tls.clone();
        profile.credential_hint = format!(
            "the proxy token of runtime {alias} was refused and the tunnel gave no fresh one: the runtime may have been released; start a new setup (configure_kernel with runtime \"colab\")"
        );
        let active =
            slot::ActiveRuntime::open(profile, Some(endpoint.to_owned()), Some(alias.clone()))?;
        self.slot.set(active);
        let fresh = self
            .kept_alive
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(endpoint.to_owned());
        if fresh {
            let slot = self.slot.clone();
            let kept_alive = self.kept_alive.clone();
            let endpoint = endpoint.to_owned();
            tokio::spawn(async move {
                while slot.holds(&endpoint) {
                    if let Err(error) = tunnel.keep_alive(&endpoint).await {
                        tracing::warn!(%endpoint, "keeping the Colab runtime alive failed: {error}");
                    }
                    tokio::time::sleep(KEEP_ALIVE_EVERY).await;
                }
                kept_alive
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&endpoint);
            });
        }
        Ok(())
    }

    /// The client of the current runtime's API (its proxy token, headers and XSSI prefix),
    /// each call bounded by [`FILE_SERVICE_TIMEOUT`].
    async fn client(&self) -> Result<kernels::ServerClient, String> {
        let runtime = self
            .slot
            .current()
            .ok_or_else(|| "no Colab runtime is assigned yet".to_owned())?;
        let client = runtime
            .api
            .client()
            .await
            .map_err(|error| error.to_string())?;
        Ok(client.with_timeout(FILE_SERVICE_TIMEOUT))
    }

    /// The current runtime's Contents API.
    async fn contents(&self) -> Result<kernels::Contents, String> {
        Ok(self.client().await?.contents())
    }

    /// The Contents API of the runtime `root` names, when it is the one in use now.
    async fn contents_of(
        &self,
        root: &colab_setup::FileServiceRoot,
    ) -> Result<kernels::Contents, String> {
        self.serving(root)?;
        self.contents().await
    }

    /// The same, with setups timed by `setup` (tests shorten the deadline).
    pub fn with_setup_config(mut self, setup: colab_setup::RegistryConfig) -> RuntimeFiles {
        self.setup = setup;
        self
    }

    /// Refuses a file-service call for `root` unless it is the runtime in use now: after a
    /// setup moved to another runtime, a root proven earlier names the old one, and its files
    /// must not be read or written on the new one.
    fn serving(&self, root: &colab_setup::FileServiceRoot) -> Result<(), String> {
        if host_core::colab::ColabRuntimes::roots(self).contains(root) {
            Ok(())
        } else {
            Err(format!(
                "{} is not the Colab runtime in use now; run check_colab on the kernel again",
                root.uri()
            ))
        }
    }

    /// `GET <path>` of the runtime's API: the status and the JSON body, `None` when the
    /// runtime did not answer.
    async fn get_json(&self, path: &str) -> Option<(u16, serde_json::Value)> {
        let answer = self
            .client()
            .await
            .ok()?
            .request(
                kernels::Method::GET,
                path,
                None,
                "reading the runtime's build",
            )
            .await
            .ok()?;
        Some((
            answer.status.as_u16(),
            serde_json::from_slice(&answer.body).unwrap_or_default(),
        ))
    }
}

/// A file-service failure as the sentence the transfer reports.
fn file_service_error(failure: kernels::Error) -> String {
    match failure {
        kernels::Error::ServerStatus { status, .. } => {
            format!("the file service answered HTTP {status}")
        }
        other => other.to_string(),
    }
}

impl host_core::colab::ColabRuntimes for RuntimeFiles {
    fn roots(&self) -> Vec<colab_setup::FileServiceRoot> {
        self.slot
            .current()
            .map(|runtime| vec![runtime.root.clone()])
            .unwrap_or_default()
    }

    fn setup_config(&self) -> colab_setup::RegistryConfig {
        self.setup
    }

    fn mounts_servers(&self) -> bool {
        self.tunnel.is_some()
    }

    fn mount_route(&self, alias: &colab_setup::ServerAlias) -> Result<colab_setup::Route, String> {
        if self.tunnel.is_none() {
            return Err(format!(
                "mount_colab_server {alias}: this server's runtime has no alias; its file service is attached by configure_kernel with runtime \"colab\""
            ));
        }
        Ok(colab_setup::Route::MountServer {
            alias: alias.clone(),
        })
    }

    fn setup_route(
        &self,
        alias: Option<&colab_setup::ServerAlias>,
    ) -> Result<colab_setup::Route, String> {
        if let ColabSource::Tunnel { .. } = &self.source {
            return Ok(colab_setup::Route::Tunnel {
                reuse: alias.cloned(),
            });
        }
        if let Some(alias) = alias {
            return Err(format!(
                "serverAlias {alias} names a server a setup created, and this server creates none: it runs kernels on {}; omit serverAlias",
                match &self.source {
                    ColabSource::SessionsFile { session, .. } =>
                        format!("google-colab-cli session {session} (--colab-session)"),
                    ColabSource::RuntimeUrl { .. } =>
                        "the runtime of --colab-runtime-url".to_owned(),
                    ColabSource::Tunnel { .. } => unreachable!("handled above"),
                }
            ));
        }
        Ok(match &self.source {
            ColabSource::SessionsFile { session, .. } => colab_setup::Route::SessionsFile {
                session: colab_setup::SessionName::parse(session)
                    .map_err(|error| format!("the --colab-session name cannot be used: {error}"))?,
            },
            ColabSource::RuntimeUrl { .. } => colab_setup::Route::RuntimeUrl,
            ColabSource::Tunnel { .. } => unreachable!("handled above"),
        })
    }

    fn perform_setup<'a>(
        &'a self,
        _notebook: &'a host_core::NotebookLocation,
        command: &'a colab_setup::CommandKind,
    ) -> host_core::BoxFuture<'a, colab_setup::Reply> {
        use colab_setup::{CommandKind, Failure, Reply};
        Box::pin(async move {
            match command {
                CommandKind::ReadSessions => {
                    let ColabSource::SessionsFile { path, .. } = &self.source else {
                        return Reply::Failed(Failure::NotPerformed);
                    };
                    let path = path.clone();
                    match tokio::task::spawn_blocking(move || session_rows(&path)).await {
                        Ok(Ok(rows)) => Reply::Servers(rows),
                        _ => Reply::Failed(Failure::Unavailable),
                    }
                }
                CommandKind::ProbeRuntime => {
                    // The kernelspecs answer only through the proxy with a valid token.
                    let Ok(client) = self.client().await else {
                        return Reply::Failed(Failure::Unavailable);
                    };
                    let probe = client
                        .request(
                            kernels::Method::GET,
                            "api/kernelspecs",
                            None,
                            "probing the runtime",
                        )
                        .await;
                    match probe {
                        Ok(answer) if answer.status == kernels::StatusCode::OK => Reply::Done,
                        Err(kernels::Error::ServerAuth { .. }) => {
                            Reply::Failed(Failure::AuthenticationRequired)
                        }
                        _ => Reply::Failed(Failure::Unavailable),
                    }
                }
                // A runtime this server already uses under the alias is reused as it is.
                CommandKind::FindMountedServer { alias } => match self.slot.use_alias(alias) {
                    Some(root) => Reply::FileService { root },
                    None => Reply::NotMounted,
                },
                CommandKind::MountServer { alias } => {
                    if let Some(root) = self.slot.use_alias(alias) {
                        return Reply::FileService { root };
                    }
                    // Not used by this server yet (it was restarted, say): the tunnel still
                    // knows the exact alias's runtime, or there is none to mount.
                    let Some(tunnel) = &self.tunnel else {
                        return Reply::Failed(Failure::NotPerformed);
                    };
                    match tunnel.lookup(alias).await {
                        Ok(tunnel::LookupOutcome::Found(assignment)) => {
                            match self.activate(alias, &assignment.endpoint) {
                                Ok(()) => match self.slot.use_alias(alias) {
                                    Some(root) => Reply::FileService { root },
                                    None => Reply::Failed(Failure::Unavailable),
                                },
                                Err(_) => Reply::Failed(Failure::Unavailable),
                            }
                        }
                        Ok(tunnel::LookupOutcome::NotAssigned) => {
                            Reply::Failed(Failure::Unavailable)
                        }
                        Err(error) => Reply::Failed(error.failure()),
                    }
                }
                CommandKind::CheckProvider
                | CommandKind::LookupAssignment { .. }
                | CommandKind::CreateAssignment { .. }
                | CommandKind::ReleaseRuntime { .. } => {
                    // Only the tunnel route assigns and releases runtimes.
                    let Some(tunnel) = &self.tunnel else {
                        return Reply::Failed(Failure::NotPerformed);
                    };
                    let reply = tunnel.perform(command).await;
                    match (command, &reply) {
                        (
                            CommandKind::LookupAssignment { alias }
                            | CommandKind::CreateAssignment { alias },
                            Reply::AssignmentFound { endpoint }
                            | Reply::AssignmentCreated { endpoint },
                        ) => {
                            // The answer stays true either way; a runtime that cannot be used
                            // fails the kernel start, and the setup releases what it created.
                            if let Err(error) = self.activate(alias, endpoint) {
                                tracing::warn!(%endpoint, "the assigned Colab runtime cannot be used: {error}");
                            }
                        }
                        (CommandKind::ReleaseRuntime { endpoint }, Reply::Done) => {
                            self.slot.clear_if(endpoint);
                        }
                        _ => {}
                    }
                    reply
                }
                _ => Reply::Failed(Failure::NotPerformed),
            }
        })
    }

    fn perform_check<'a>(
        &'a self,
        command: &'a colab_setup::CheckCommandKind,
    ) -> host_core::BoxFuture<'a, colab_setup::CheckReply> {
        use colab_setup::{CheckCommandKind, CheckReply};
        Box::pin(async move {
            match command {
                CheckCommandKind::ReadBuildInfo => match self.get_json(BUILD_INFO_PATH).await {
                    Some((200, body)) => CheckReply::BuildInfo {
                        release_tag: body["release_tag"].as_str().map(str::to_owned),
                    },
                    _ => CheckReply::ServiceUnavailable,
                },
                CheckCommandKind::ReadFile { root, path } if self.roots().contains(root) => {
                    let Ok(contents) = self.contents().await else {
                        return CheckReply::ServiceUnavailable;
                    };
                    match contents.read_file(path).await {
                        Ok(Some(bytes)) => CheckReply::FileContent(bytes),
                        Ok(None) => CheckReply::FileMissing,
                        Err(_) => CheckReply::ServiceUnavailable,
                    }
                }
                CheckCommandKind::StatFile { root, path } if self.roots().contains(root) => {
                    let Ok(contents) = self.contents().await else {
                        return CheckReply::ServiceUnavailable;
                    };
                    match contents.stat(path).await {
                        Ok(Some(_)) => CheckReply::FileExists,
                        Ok(None) => CheckReply::FileMissing,
                        Err(_) => CheckReply::ServiceUnavailable,
                    }
                }
                _ => CheckReply::ServiceUnavailable,
            }
        })
    }

    fn file_size<'a>(
        &'a self,
        file: ServiceFile<'a>,
    ) -> host_core::BoxFuture<'a, Result<Option<u64>, String>> {
        Box::pin(async move {
            let model = self.contents_of(file.root).await?.stat(file.path).await;
            match model.map_err(file_service_error)? {
                Some(model) => Ok(model["size"].as_u64()),
                None => Ok(None),
            }
        })
    }

    fn write_chunk<'a>(
        &'a self,
        file: ServiceFile<'a>,
        chunk: UploadChunk,
    ) -> host_core::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            // Jupyter's chunked save: 1 starts the file, later ones append, -1 appends and
            // closes it (a one-chunk file is a single -1 into a fresh temporary name).
            let number: i64 = if chunk.last {
                -1
            } else {
                i64::from(chunk.number)
            };
            let contents = self.contents_of(file.root).await?;
            contents
                .save_chunk(file.path, number, &chunk.bytes)
                .await
                .map_err(file_service_error)
        })
    }

    fn read_file<'a>(
        &'a self,
        file: ServiceFile<'a>,
    ) -> host_core::BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let bytes = self
                .contents_of(file.root)
                .await?
                .read_file(file.path)
                .await;
            bytes
                .map_err(file_service_error)?
                .ok_or_else(|| "the file service answered HTTP 404".to_owned())
        })
    }

    fn delete_file<'a>(
        &'a self,
        file: ServiceFile<'a>,
    ) -> host_core::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let contents = self.contents_of(file.root).await?;
            contents.delete(file.path).await.map_err(file_service_error)
        })
    }
}

/// The connection profile of a runtime behind Colab's proxy.
pub fn runtime_profile(
    url: kernels::ServerUrl,
    credential: kernels::CredentialSource,
) -> kernels::ConnectionProfile {
    let mut profile = kernels::ConnectionProfile::jupyter_server(url, Some(credential));
    profile.placements = vec![
        kernels::CredentialPlacement::Header(TOKEN_HEADER.to_owned()),
        kernels::CredentialPlacement::WebSocketQuery(TOKEN_QUERY.to_owned()),
    ];
    profile.headers = vec![(CLIENT_AGENT_HEADER.to_owned(), CLIENT_AGENT.to_owned())];
    profile.strip_prefix = Some(XSSI_PREFIX.to_owned());
    profile.kernel_requests = Some(Arc::new(DeclineColabRequests));
    profile
}

/// The IOPub message type of Colab's kernel-to-frontend requests.
pub const COLAB_REQUEST: &str = "colab_request";

/// Answers every `colab_request` a kernel sends (Drive authorisation, a secret, JavaScript to
/// run in the browser) at once with an error, on stdin as Colab's frontend would answer it:
/// this host cannot do what Colab's web frontend does, and a kernel that gets no answer waits
/// until its own timeout (none, for some requests). The error says what to do instead.
struct DeclineColabRequests;

impl kernels::AnswerKernelRequest for DeclineColabRequests {
    fn answer(
        &self,
        msg_type: &str,
        _content: &serde_json::Value,
        metadata: &serde_json::Value,
    ) -> Option<kernels::KernelRequestAnswer> {
        if msg_type != COLAB_REQUEST {
            return None;
        }
        // Requests without an id expect no answer.
        let id = metadata.get("colab_msg_id")?.clone();
        let kind = metadata
            .get("colab_request_type")
            .and_then(serde_json::Value::as_str)
            .filter(|kind| {
                kind.len() <= 40
                    && kind
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
            })
            .unwrap_or("unnamed");
        let message = format!(
            "action required in Colab: jupyter-mcp cannot answer the kernel's Colab request `{kind}` (Drive, sign-in and browser prompts need Colab's own frontend); do that step in Colab or with google-colab-cli, then run the cell again"
        );
        Some(kernels::KernelRequestAnswer {
            value: serde_json::json!({
                "type": "colab_reply",
                "colab_msg_id": id,
                "error": message,
            }),
            action_required: Some((COLAB_REQUEST.to_owned(), message)),
        })
    }
}

/// The default sessions file: `~/.config/colab-cli/sessions.json`.
pub fn default_sessions_file() -> Option<PathBuf> {
    dirs::home_dir().map(|home| home.join(".config").join(SESSIONS_FILE))
}

/// Why a Colab runtime cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ColabError {
    /// The sessions file cannot be read or parsed.
    #[error(
        "cannot read google-colab-cli's sessions file {path}: {reason}; create a runtime with `colab new` (google-colab-cli) or pass --colab-sessions-file"
    )]
    SessionsFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The sessions file has no session of that name.
    #[error(
        "google-colab-cli's sessions file {path} has no session named {session} (it has: {available}); run `colab ls` to see your sessions"
    )]
    NoSuchSession {
        /// The file.
        path: String,
        /// The name asked for.
        session: String,
        /// The names it has.
        available: String,
    },
    /// The runtime URL cannot be used.
    #[error("the Colab runtime URL cannot be used: {reason}")]
    Url {
        /// Why.
        reason: String,
    },
}

/// One session of the sessions file: the fields we use (the rest is the CLI's).
#[derive(Debug, Clone, Deserialize)]
struct Session {
    #[serde(default)]
    url: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    endpoint: String,
    #[serde(default)]
    running: Option<bool>,
}

/// A session that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FoundSession {
    url: String,
    token: String,
    endpoint: String,
}

/// The CLI rewrites the file in place (truncate, then write), so a read may catch it half
/// written: a parse failure is retried a few times.
const SESSIONS_READ_ATTEMPTS: u32 = 5;

/// Every session of the sessions file, by name.
fn read_sessions(path: &Path) -> Result<std::collections::BTreeMap<String, Session>, ColabError> {
    let describe = || path.display().to_string();
    let mut last = String::new();
    for attempt in 0..SESSIONS_READ_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let text = std::fs::read_to_string(path).map_err(|error| ColabError::SessionsFile {
            path: describe(),
            reason: error.kind().to_string(),
        })?;
        match serde_json::from_str(&text) {
            Ok(sessions) => return Ok(sessions),
            Err(error) => {
                last = format!("it is not the CLI's JSON ({})", error.classify_name());
            }
        }
    }
    Err(ColabError::SessionsFile {
        path: describe(),
        reason: last,
    })
}

fn read_session(path: &Path, session: &str) -> Result<FoundSession, ColabError> {
    let describe = || path.display().to_string();
    let sessions = read_sessions(path)?;
    let Some(found) = sessions.get(session) else {
        return Err(ColabError::NoSuchSession {
            path: describe(),
            session: session.to_owned(),
            available: if sessions.is_empty() {
                "none".to_owned()
            } else {
                sessions.keys().cloned().collect::<Vec<_>>().join(", ")
            },
        });
    };
    if found.url.is_empty() || found.token.trim().is_empty() {
        return Err(ColabError::SessionsFile {
            path: describe(),
            reason: format!("session {session} has no url or token"),
        });
    }
    Ok(FoundSession {
        url: found.url.clone(),
        token: found.token.clone(),
        endpoint: found.endpoint.clone(),
    })
}

/// The sessions of the file as server rows: a session is available when it has a URL and a
/// token and the CLI does not say it stopped.
fn session_rows(path: &Path) -> Result<Vec<colab_setup::ServerRow>, ColabError> {
    Ok(read_sessions(path)?
        .into_iter()
        .map(|(name, session)| colab_setup::ServerRow {
            availability: if session.url.is_empty()
                || session.token.trim().is_empty()
                || session.running == Some(false)
            {
                colab_setup::Availability::Disabled
            } else {
                colab_setup::Availability::Available
            },
            endpoint: (!session.endpoint.is_empty()).then_some(session.endpoint),
            name,
        })
        .collect())
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "unexpected fields",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

/// The proxy token of a runtime the tunnel assigned, fetched again through the tunnel (its
/// assignment answer carries the current one) when the proxy refuses it.
struct TunnelToken {
    tunnel: Arc<tunnel::ColabTunnel>,
    alias: colab_setup::ServerAlias,
}

impl kernels::RefreshCredential for TunnelToken {
    fn refresh(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = kernels::Result<kernels::ServerToken>> + Send + '_>>
    {
        Box::pin(async move {
            let unavailable = |reason: String| kernels::Error::Io {
                context: reason,
                source: std::io::Error::other("Colab tunnel"),
            };
            match self.tunnel.lookup(&self.alias).await {
                Ok(tunnel::LookupOutcome::Found(assignment)) => assignment
                    .proxy_token()
                    .ok_or_else(|| unavailable("the tunnel gave no proxy token".to_owned())),
                Ok(tunnel::LookupOutcome::NotAssigned) => Err(unavailable(format!(
                    "the Colab runtime {} is no longer assigned",
                    self.alias
                ))),
                Err(error) => Err(unavailable(error.to_string())),
            }
        })
    }
}

/// The proxy token of one session, read from the sessions file whenever a fresh one is needed.
struct SessionToken {
    path: PathBuf,
    session: String,
}

impl kernels::RefreshCredential for SessionToken {
    fn refresh(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = kernels::Result<kernels::ServerToken>> + Send + '_>>
    {
        Box::pin(async move {
            let path = self.path.clone();
            let session = self.session.clone();
            let found = tokio::task::spawn_blocking(move || read_session(&path, &session))
                .await
                .map_err(|_| kernels::Error::Io {
                    context: "reading the sessions file".to_owned(),
                    source: std::io::Error::other("the reading task stopped"),
                })?
                .map_err(|error| kernels::Error::Io {
                    context: error.to_string(),
                    source: std::io::Error::other("the sessions file cannot be used"),
                })?;
            kernels::ServerToken::new(&found.token).ok_or_else(|| kernels::Error::Io {
                context: "the session has an empty token".to_owned(),
                source: std::io::Error::other("sessions file"),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_exact_name_and_others_are_named_when_it_is_not() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("sessions.json");
        std::fs::write(
            &path,
            r#"{"a1b2c3": {"name": "a1b2c3", "token": "tok", "url": "https://8080-x.prod.colab.dev",
                "endpoint": "e1", "token_expires_at": "2026-12-01T14:40:52.717449Z",
                "variant": "DEFAULT", "accelerator": "NONE", "machine_shape": "STANDARD",
                "kernel_id": null, "session_id": null, "last_execution": null, "running": null}}"#,
        )
        .unwrap();
        let found = read_session(&path, "a1b2c3").unwrap();
        assert_eq!(found.endpoint, "e1");
        assert_eq!(found.token, "tok");
        let missing = read_session(&path, "a1b2c").unwrap_err();
        assert!(
            matches!(missing, ColabError::NoSuchSession { ref available, .. } if available == "a1b2c3")
        );
        std::fs::write(&path, "{\"a1b2c3\": {").unwrap();
        let torn = read_session(&path, "a1b2c3").unwrap_err();
        assert!(torn.to_string().contains("cut short"), "{torn}");
    }

    #[test]
    fn the_profile_places_the_token_where_colab_wants_it() {
        let profile = runtime_profile(
            kernels::ServerUrl::parse("https://8080-x.prod.colab.dev/").unwrap(),
            kernels::CredentialSource::Static(kernels::ServerToken::new("t").unwrap()),
        );
        assert_eq!(
            profile.placements,
            [
                kernels::CredentialPlacement::Header(TOKEN_HEADER.to_owned()),
                kernels::CredentialPlacement::WebSocketQuery(TOKEN_QUERY.to_owned())
            ]
        );
        assert_eq!(profile.strip_prefix.as_deref(), Some(XSSI_PREFIX));
    }
}
