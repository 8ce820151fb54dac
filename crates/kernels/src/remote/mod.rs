//! Kernels on a Jupyter Server, a Kernel Gateway or a JupyterHub user's server: kernelspecs
//! from `/api/kernelspecs`, lifecycle through `/api/kernels`, execution over the kernel
//! WebSocket, all as a [`ConnectionProfile`] says (where the server is, how the credential
//! travels and where a fresh one comes from, which CAs are trusted).
//!
//! A [`RemoteKernel`] is one server-side kernel id at a time. Its epoch changes on every start
//! and restart (ours, or one the server reports), and when the server lost the kernel
//! altogether a restart starts a new one there. Working directories: the kernel is started
//! with the server-side `path` of the notebook's folder relative to the served root (Jupyter
//! Server starts it there, or in the nearest existing parent); a Kernel Gateway may ignore it.
//!
//! With a JupyterHub ([`RemoteProvider::jupyterhub`]) the server is the token's user's: it is
//! started (and its spawn followed, as start progress) when a kernel first needs it, and when
//! the hub stops it mid-run the run's requests end with `ServerStopped`; the next start starts
//! it again only when the configuration allows it.

mod client;
mod connection;
mod contents;
mod frames;
mod http_client;
mod hub;
mod hub_client;
mod path;
mod profile;
mod quickack;
mod server;
mod tls;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

pub use self::client::{ByteStream, ServerAnswer, ServerClient, ServerWebSocket};
use self::connection::{
    Command, LinkFailure, LinkParams, Pump, PumpContext, PumpEnd, may_mean_stopped, new_msg_id,
    now_date, open_link,
};
pub use self::contents::Contents;
use self::frames::{Outgoing, Protocol};
pub use self::frames::{encode_v1, split_v1};
pub use self::http_client::{HttpAnswer, HttpClient, HttpFailure, HttpRequest};
use self::hub_client::JupyterHub;
pub use self::hub_client::JupyterHubConfig;
pub use self::path::{encode_path, encode_segment};
pub use self::profile::{
    AnswerKernelRequest, ConnectionProfile, CredentialPlacement, CredentialSource,
    KernelRequestAnswer, RefreshCredential, TlsTrust,
};
pub use self::quickack::QuickAckStream;
use self::server::{KernelSpecModel, Rest, Transport};
pub use self::server::{ServerToken, ServerUrl};
pub use self::tls::CertificateProblem;
use crate::error::{Error, Result};
use crate::execute::{ExecuteEvent, ExecuteHandle, ExecuteOptions};
use crate::place::KernelPlace;
use crate::provider::{KernelBody, KernelHandle, KernelParts, KernelProvider, started};
use crate::spec::{Discovery, InterruptMode, KernelSpecInfo, SpecSource};
use crate::status::{KernelInfo, KernelStatus, StatusHub};

/// The prefix of remote kernel choices' ids: `remote:<kernelspec name>`.
pub const REMOTE_SPEC_PREFIX: &str = "remote:";

/// Tornado's default `websocket_max_message_size`, which Jupyter Server and Kernel Gateway
/// keep: a larger message makes the server close the socket.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 10 * 1024 * 1024;

/// How to reach a kernel server, and the timeouts of talking to it.
#[derive(Debug, Clone)]
pub struct RemoteConfig {
    /// Where the server is and how requests carry the credential. Never logged with it.
    pub profile: ConnectionProfile,
    /// The folder this host serves; a notebook folder under it is sent to the server as the
    /// kernel's `path` (relative, `/`-separated). `None`: no path is sent.
    pub served_root: Option<PathBuf>,
    /// One REST call or WebSocket handshake. Default 30 s.
    pub request_timeout: Duration,
    /// Asking for a kernel (or a restart) until it answers `kernel_info_request`. Default
    /// 120 s: a gateway may place kernels on a cluster.
    pub startup_timeout: Duration,
    /// One liveness look (`GET /api/kernels/<id>`). Default 3 s.
    pub probe_timeout: Duration,
    /// How long requests wait for a dropped WebSocket to come back before they end with
    /// `ConnectionLost`. Default 30 s.
    pub reconnect_timeout: Duration,
    /// How long a reply waits for its `idle` (as for local kernels). Default 5 s.
    pub reply_grace: Duration,
    /// Pings on an idle socket; silence for two intervals counts as a dropped socket.
    /// Default 15 s.
    pub keepalive: Duration,
    /// Offer the `v1.kernel.websocket.jupyter.org` binary subprotocol (the JSON protocol is
    /// used when the server does not take it). Default true.
    pub offer_binary_protocol: bool,
    /// The largest request sent in one message; larger ones fail with `MessageTooLarge`
    /// before anything is sent. Default [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub max_message_bytes: usize,
}

impl RemoteConfig {
    /// The defaults for a Jupyter Server at `url` with a fixed token.
    pub fn new(url: ServerUrl, token: Option<ServerToken>) -> Self {
        RemoteConfig::with_profile(ConnectionProfile::jupyter_server(
            url,
            token.map(CredentialSource::Static),
        ))
    }

    /// The defaults for the server `profile` describes.
    pub fn with_profile(profile: ConnectionProfile) -> Self {
        RemoteConfig {
            profile,
            served_root: None,
            request_timeout: Duration::from_secs(30),
            startup_timeout: Duration::from_secs(120),
            probe_timeout: Duration::from_secs(3),
            reconnect_timeout: Duration::from_secs(30),
            reply_grace: Duration::from_secs(5),
            keepalive: Duration::from_secs(15),
            offer_binary_protocol: true,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
        }
    }

    /// The server-side `path` for a kernel working in `folder`: relative to the served root
    /// with `/` separators (`""` for the root itself), or `None` outside it.
    pub fn server_path(&self, folder: &Path) -> Option<String> {
        let relative = folder.strip_prefix(self.served_root.as_deref()?).ok()?;
        let parts = relative
            .components()
            .map(|component| match component {
                std::path::Component::Normal(part) => part.to_str().map(str::to_owned),
                std::path::Component::CurDir => Some(String::new()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(
            parts
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join("/"),
        )
    }
}

/// Kernels on one Jupyter Server, Kernel Gateway or JupyterHub user's server.
#[derive(Debug)]
pub struct RemoteProvider {
    config: RemoteConfig,
    /// The server's API (for a hub: the hub's, until the user's server is known).
    rest: Rest,
    hub: Option<Arc<JupyterHub>>,
    /// Shared by every kernel of this provider, so epochs never repeat across kernels.
    epochs: Arc<AtomicU64>,
}

impl RemoteProvider {
    /// Kernels on the server `config` names. Fails when the profile cannot be used (plain
    /// HTTP to another machine without leave, an unreadable CA file).
    pub fn new(config: RemoteConfig) -> Result<Self> {
        let transport = Transport::new(&config.profile, config.request_timeout)?;
        let rest = Rest::new(
            transport,
            config.profile.base_url.clone(),
            config.request_timeout,
        );
        Ok(RemoteProvider {
            config,
            rest,
            hub: None,
            epochs: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Kernels on the user's server of a JupyterHub: `config`'s profile is replaced by the
    /// hub's ([`JupyterHubConfig::profile`]); its timeouts and folder are kept.
    pub fn jupyterhub(hub: JupyterHubConfig, mut config: RemoteConfig) -> Result<Self> {
        config.profile = hub.profile();
        let transport = Transport::new(&config.profile, config.request_timeout)?;
        let hub = Arc::new(JupyterHub::new(
            hub,
            Arc::clone(&transport),
            config.request_timeout,
        ));
        let rest = Rest::new(transport, hub.url().clone(), config.request_timeout);
        Ok(RemoteProvider {
            config,
            rest,
            hub: Some(hub),
            epochs: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn config(&self) -> &RemoteConfig {
        &self.config
    }

    /// The server to use now: for a hub, its user's server, started if needed.
    async fn server(&self) -> Result<Rest> {
        match &self.hub {
            Some(hub) => Ok(self.rest.at(hub.ensure_running().await?)),
            None => Ok(self.rest.clone()),
        }
    }

    /// The server's kernelspecs as `remote:<name>` choices, the server's default first.
    pub async fn discover_specs(&self) -> Result<Discovery> {
        let model = self.server().await?.kernelspecs().await?;
        let mut specs: Vec<KernelSpecInfo> = model.kernelspecs.values().map(remote_spec).collect();
        if let Some(default) = model.default {
            let default_id = format!("{REMOTE_SPEC_PREFIX}{default}");
            if let Some(position) = specs.iter().position(|spec| spec.id == default_id) {
                let spec = specs.remove(position);
                specs.insert(0, spec);
            }
        }
        Ok(Discovery {
            specs,
            ..Discovery::default()
        })
    }

    /// Starts `spec` (a `remote:` choice) for a notebook in `folder` and waits until it
    /// answered `kernel_info_request`.
    pub async fn start_remote(&self, spec: &KernelSpecInfo, folder: &Path) -> Result<RemoteKernel> {
        let Some(name) = spec.id.strip_prefix(REMOTE_SPEC_PREFIX) else {
            return Err(Error::UnknownSpec {
                id: spec.id.clone(),
                available: Vec::new(),
            });
        };
        let shared = self.shared(spec, name, folder, true).await?;
        let session = shared.start_new_kernel().await?;
        *shared.lifecycle.lock().await = Some(session);
        Ok(RemoteKernel { shared })
    }

    /// Connects to `kernel_id`, a kernel the server already runs for someone else (the kernel
    /// of a notebook's server session, which JupyterLab uses too), as a `spec` (a `remote:`
    /// choice) kernel working in `folder`, and waits until it answered `kernel_info_request`.
    /// The kernel is shared, not ours: dropping it or shutting it down closes only this
    /// connection, and when the server no longer has it, a restart fails rather than
    /// starting a kernel nobody else would see. A restart through it restarts the kernel for
    /// everyone, as a restart in JupyterLab does.
    pub async fn attach_remote(
        &self,
        spec: &KernelSpecInfo,
        kernel_id: &str,
        folder: &Path,
    ) -> Result<RemoteKernel> {
        let name = spec
            .id
            .strip_prefix(REMOTE_SPEC_PREFIX)
            .unwrap_or(&spec.id)
            .to_owned();
        let shared = self.shared(spec, &name, folder, false).await?;
        let session = shared.open_session(kernel_id.to_owned()).await?;
        *shared.lifecycle.lock().await = Some(session);
        Ok(RemoteKernel { shared })
    }

    /// The state of a new kernel connection of `spec` (kernelspec `name` on the server) for a
    /// notebook in `folder`, not yet connected; `owned`: we start and stop the kernel.
    async fn shared(
        &self,
        spec: &KernelSpecInfo,
        name: &str,
        folder: &Path,
        owned: bool,
    ) -> Result<Arc<Shared>> {
        Ok(Arc::new(Shared {
            spec: spec.clone(),
            name: name.to_owned(),
            cwd: folder.to_path_buf(),
            server_path: self.config.server_path(folder),
            config: self.config.clone(),
            rest: Mutex::new(self.server().await?),
            hub: self.hub.clone(),
            server_stopped: Arc::new(AtomicBool::new(false)),
            epochs: Arc::clone(&self.epochs),
            status: Arc::new(StatusHub::new(KernelStatus::Starting)),
            info: Arc::new(Mutex::new(KernelInfo::default())),
            lifecycle: tokio::sync::Mutex::new(None),
            kernel_id: Mutex::new(None),
            owned,
        }))
    }

    /// A client of the server's other APIs (the Contents API, a provider's own endpoints)
    /// over this provider's transport: the profile's credential (renewed once when refused),
    /// headers, trust and JSON prefix. For a hub, its user's server, started if needed.
    pub async fn client(&self) -> Result<ServerClient> {
        Ok(ServerClient::from_rest(self.server().await?))
    }

    /// Where its kernels run.
    pub fn kernel_place(&self) -> KernelPlace {
        match &self.hub {
            Some(hub) => hub_place(hub),
            None => KernelPlace::Server {
                url: self.rest.url.to_string(),
            },
        }
    }
}

fn hub_place(hub: &JupyterHub) -> KernelPlace {
    KernelPlace::JupyterHub {
        hub: hub.url().to_string(),
        user: hub.user_name(),
        server: hub.server_name().to_owned(),
        url: hub.server_url().map(|url| url.to_string()),
    }
}

fn server_stopped_error() -> Error {
    Error::ServerStopped {
        message: "the JupyterHub stopped the server while the kernel was starting; try again"
            .to_owned(),
    }
}

fn remote_spec(model: &KernelSpecModel) -> KernelSpecInfo {
    let spec = &model.spec;
    KernelSpecInfo {
        id: format!("{REMOTE_SPEC_PREFIX}{}", model.name),
        display_name: if spec.display_name.is_empty() {
            model.name.clone()
        } else {
            spec.display_name.clone()
        },
        language: spec.language.clone(),
        argv: spec.argv.clone(),
        env: spec
            .env
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
            .collect(),
        interrupt_mode: match spec.interrupt_mode.as_deref() {
            Some("message") => InterruptMode::Message,
            _ => InterruptMode::Signal,
        },
        resource_dir: None,
        source: SpecSource::Remote,
    }
}

impl KernelProvider for RemoteProvider {
    fn discover<'a>(&'a self, _notebook_dir: Option<&'a Path>) -> BoxFuture<'a, Result<Discovery>> {
        Box::pin(self.discover_specs())
    }

    fn start<'a>(
        &'a self,
        spec: &'a KernelSpecInfo,
        cwd: &'a Path,
    ) -> BoxFuture<'a, Result<Arc<dyn KernelHandle>>> {
        started(self.start_remote(spec, cwd))
    }

    fn server_root(&self) -> Option<&Path> {
        self.config.served_root.as_deref()
    }

    fn place(&self) -> KernelPlace {
        self.kernel_place()
    }
}

/// A kernel on a Jupyter Server or Kernel Gateway. Cheap to clone; when the last clone is
/// dropped without a shutdown, the server is asked to shut the kernel down.
#[derive(Debug, Clone)]
pub struct RemoteKernel {
    shared: Arc<Shared>,
}

struct Shared {
    spec: KernelSpecInfo,
    /// The kernelspec name on the server.
    name: String,
    cwd: PathBuf,
    server_path: Option<String>,
    config: RemoteConfig,
    /// The server now (a hub's user server may come back at another URL).
    rest: Mutex<Rest>,
    hub: Option<Arc<JupyterHub>>,
    /// The JupyterHub stopped the server under the current session (set by its pump).
    server_stopped: Arc<AtomicBool>,
    epochs: Arc<AtomicU64>,
    status: Arc<StatusHub>,
    info: Arc<Mutex<KernelInfo>>,
    /// Held across a restart or shutdown, so that requests wait for the new session.
    lifecycle: tokio::sync::Mutex<Option<Session>>,
    /// The server-side id of the current (or last) kernel, for diagnostics and restarts.
    kernel_id: Mutex<Option<String>>,
    /// We started the kernel (and stop it); false for one attached to ([`RemoteProvider::attach_remote`]).
    owned: bool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteKernel")
            .field("spec", &self.spec.id)
            .field("server", &self.rest().url)
            .field("kernel_id", &self.current_kernel_id())
            .finish_non_exhaustive()
    }
}

/// One WebSocket session with one server-side kernel, and its pump.
struct Session {
    kernel_id: String,
    /// The `session_id` of the WebSocket, also the `session` of our message headers.
    session_id: String,
    commands: mpsc::UnboundedSender<Command>,
    protocol: Protocol,
    pump: JoinHandle<PumpEnd>,
}

impl Session {
    /// Stops the pump: pending requests end with `terminal`.
    async fn stop(self, terminal: ExecuteEvent) {
        let _ = self.commands.send(Command::Stop { terminal });
        let _ = tokio::time::timeout(Duration::from_secs(2), self.pump).await;
    }

    fn pump_finished(&self) -> bool {
        self.pump.is_finished()
    }
}

impl Shared {
    fn rest(&self) -> Rest {
        self.rest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn current_kernel_id(&self) -> Option<String> {
        self.kernel_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Asks the server for a new kernel and opens a session with it.
    async fn start_new_kernel(&self) -> Result<Session> {
        let model = self
            .rest()
            .start_kernel(
                &self.name,
                self.server_path.as_deref(),
                self.config.startup_timeout,
            )
            .await
            .inspect_err(|_| self.mark_dead())?;
        match self.open_session(model.id.clone()).await {
            Ok(session) => Ok(session),
            Err(error) => {
                // A kernel that never answered is of no use; do not leave it on the server.
                let _ = self
                    .rest()
                    .delete(&model.id, self.config.request_timeout)
                    .await;
                Err(error)
            }
        }
    }

    /// Connects to `kernel_id` under a new epoch and waits for its `kernel_info_reply`.
    async fn open_session(&self, kernel_id: String) -> Result<Session> {
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst) + 1;
        self.status.set_epoch(epoch);
        self.status.set(KernelStatus::Starting);
        *self
            .kernel_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(kernel_id.clone());
        let params = LinkParams {
            rest: self.rest(),
            hub: self.hub.clone(),
            kernel_id: kernel_id.clone(),
            session_id: uuid::Uuid::new_v4().to_string(),
            offer_binary: self.config.offer_binary_protocol,
            connect_timeout: self.config.startup_timeout,
        };
        let link = match open_link(&params).await {
            Ok(link) => link,
            Err(failure) => {
                self.mark_dead();
                return Err(match failure {
                    LinkFailure::Gone => Error::NotRunning,
                    LinkFailure::ServerStopped => server_stopped_error(),
                    LinkFailure::Failed(error) => error,
                });
            }
        };
        let protocol = link.protocol;
        let context_session_id = params.session_id.clone();
        let (commands, receiver) = mpsc::unbounded_channel();
        let context = PumpContext {
            hub: Arc::clone(&self.status),
            server_stopped: Arc::clone(&self.server_stopped),
            epochs: Arc::clone(&self.epochs),
            info: Arc::clone(&self.info),
            params,
            reply_grace: self.config.reply_grace,
            reconnect_timeout: self.config.reconnect_timeout,
            keepalive: self.config.keepalive,
        };
        let pump = tokio::spawn(Pump::new(context, epoch, receiver, link).run());
        let session = Session {
            kernel_id,
            session_id: context_session_id,
            commands,
            protocol,
            pump,
        };
        let (reply, answer) = oneshot::channel();
        let _ = session.commands.send(Command::KernelInfo { reply });
        let timeout = self.config.startup_timeout;
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(_info)) => {
                self.status.set(KernelStatus::Idle);
                tracing::info!(
                    spec = %self.spec.id,
                    server = %self.rest().url,
                    kernel = %session.kernel_id,
                    epoch,
                    protocol = protocol.as_str(),
                    "remote kernel ready"
                );
                Ok(session)
            }
            Ok(Err(_)) => {
                session.stop(ExecuteEvent::KernelShutdown).await;
                self.mark_dead();
                Err(Error::ConnectionLost)
            }
            Err(_) => {
                session.stop(ExecuteEvent::KernelShutdown).await;
                self.mark_dead();
                Err(Error::StartTimeout {
                    spec_id: self.spec.id.clone(),
                    timeout,
                    diagnostics: String::new(),
                })
            }
        }
    }

    fn mark_dead(&self) {
        self.status.set(KernelStatus::Dead {
            exit: None,
            requested: false,
        });
    }

    /// Interrupts before stopping when the kernel is busy, so the server need not wait for
    /// its shutdown timeout.
    async fn interrupt_if_busy(&self, kernel_id: &str) {
        if self.status.last_activity() == KernelStatus::Busy {
            let _ = self.rest().interrupt(kernel_id).await;
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let Some(session) = self.lifecycle.get_mut().take() else {
            return;
        };
        if !self.owned {
            // Someone else's kernel: close our connection only.
            let _ = session.commands.send(Command::Stop {
                terminal: ExecuteEvent::KernelShutdown,
            });
            return;
        }
        // Dropped without a shutdown: ask the server to stop the kernel, if a runtime is
        // still there to do it.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let rest = self
                .rest
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let timeout = self.config.request_timeout;
            runtime.spawn(async move {
                if let Err(error) = rest.delete(&session.kernel_id, timeout).await {
                    tracing::warn!(%error, "shutting down a dropped remote kernel failed");
                }
            });
        }
    }
}

impl RemoteKernel {
    /// The server-side kernel id (of the current, or the last, kernel).
    pub fn kernel_id(&self) -> Option<String> {
        self.shared.current_kernel_id()
    }

    /// `json` or `v1.kernel.websocket.jupyter.org`, as agreed with the server for the current
    /// session.
    pub async fn protocol(&self) -> Option<&'static str> {
        let lifecycle = self.shared.lifecycle.lock().await;
        lifecycle.as_ref().map(|session| session.protocol.as_str())
    }
}

impl KernelBody for RemoteKernel {
    fn parts(&self) -> KernelParts<'_> {
        let shared = &self.shared;
        KernelParts::new(&shared.spec, &shared.cwd, &shared.info, &shared.status)
    }

    fn process_id(&self) -> Option<u32> {
        None
    }

    fn place(&self) -> KernelPlace {
        match &self.shared.hub {
            Some(hub) => hub_place(hub),
            None => KernelPlace::Server {
                url: self.shared.rest().url.to_string(),
            },
        }
    }

    fn diagnostics(&self) -> String {
        let shared = &self.shared;
        format!(
            "remote kernel {} on {} (server folder `{}`)",
            shared
                .current_kernel_id()
                .unwrap_or_else(|| "(none)".to_owned()),
            shared.rest().url,
            shared.server_path.as_deref().unwrap_or("(server default)")
        )
    }

    async fn execute_inner(&self, code: &str, options: ExecuteOptions) -> Result<ExecuteHandle> {
        let shared = &self.shared;
        let lifecycle = shared.lifecycle.lock().await;
        let session = lifecycle.as_ref().ok_or(Error::NotRunning)?;
        let content = json!({
            "code": code,
            "silent": options.silent,
            "store_history": options.store_history,
            "user_expressions": options.user_expressions,
            "allow_stdin": false,
            "stop_on_error": options.stop_on_error,
        });
        let mut request = Outgoing::on_channel(
            "shell",
            "execute_request",
            content,
            &session.session_id,
            new_msg_id(),
            now_date(),
        );
        request.buffers = options.buffers;
        let size = request.encode(session.protocol).len();
        if size > shared.config.max_message_bytes {
            return Err(Error::MessageTooLarge {
                size,
                limit: shared.config.max_message_bytes,
            });
        }
        let msg_id = request.msg_id.clone();
        let (sink, events) = mpsc::unbounded_channel();
        let backlog = crate::execute::StreamBacklog::default();
        session
            .commands
            .send(Command::Execute {
                request,
                sink,
                backlog: backlog.clone(),
            })
            .map_err(|_| {
                if shared.status.get().is_dead() {
                    Error::KernelDied {
                        exit: Default::default(),
                    }
                } else {
                    Error::ConnectionLost
                }
            })?;
        Ok(ExecuteHandle::new(msg_id, shared.status.epoch(), events).with_backlog(backlog))
    }

    async fn interrupt_inner(&self) -> Result<()> {
        let kernel_id = {
            let lifecycle = self.shared.lifecycle.lock().await;
            lifecycle
                .as_ref()
                .ok_or(Error::NotRunning)?
                .kernel_id
                .clone()
        };
        if self.shared.rest().interrupt(&kernel_id).await? {
            Ok(())
        } else {
            Err(Error::NotRunning)
        }
    }

    async fn restart_inner(&self) -> Result<()> {
        let shared = &self.shared;
        let mut lifecycle = shared.lifecycle.lock().await;
        shared.status.set(KernelStatus::Restarting);
        if shared.server_stopped.load(Ordering::SeqCst) {
            // The hub stopped the server, and the kernel with it: a new kernel on the server
            // started again (when that is allowed).
            if let Some(old) = lifecycle.take() {
                old.stop(ExecuteEvent::ServerStopped).await;
            }
            if let Some(hub) = &shared.hub {
                let url = hub
                    .ensure_running()
                    .await
                    .inspect_err(|_| shared.mark_dead())?;
                let rest = shared.rest().at(url);
                *shared.rest.lock().unwrap_or_else(PoisonError::into_inner) = rest;
            }
            shared.server_stopped.store(false, Ordering::SeqCst);
            *lifecycle = Some(shared.start_new_kernel().await?);
            return Ok(());
        }
        let kernel_id = match lifecycle.take() {
            Some(old) => {
                let id = old.kernel_id.clone();
                shared.interrupt_if_busy(&id).await;
                old.stop(ExecuteEvent::KernelRestarted).await;
                Some(id)
            }
            None => shared.current_kernel_id(),
        };
        let restarted = match &kernel_id {
            Some(id) => match shared
                .rest()
                .restart(id, shared.config.startup_timeout)
                .await
            {
                Ok(restarted) => restarted,
                // Some servers answer 500 rather than 404 for a kernel they no longer have
                // (a restarted gateway): ask whether it still exists.
                Err(Error::ServerStatus { .. })
                    if matches!(
                        shared
                            .rest()
                            .kernel(id, shared.config.request_timeout)
                            .await,
                        Ok(None)
                    ) =>
                {
                    false
                }
                Err(error) => {
                    shared.mark_dead();
                    return Err(error);
                }
            },
            None => false,
        };
        let session = match kernel_id {
            Some(id) if restarted => shared.open_session(id).await?,
            // Someone else's kernel that the server no longer has: a new one would be ours
            // alone, so there is nothing to restart.
            _ if !shared.owned => {
                shared.mark_dead();
                return Err(Error::NotRunning);
            }
            // The server no longer has the kernel: start a new one in its place.
            _ => shared.start_new_kernel().await?,
        };
        *lifecycle = Some(session);
        Ok(())
    }

    async fn shutdown_inner(&self) -> Result<()> {
        let shared = &self.shared;
        let mut lifecycle = shared.lifecycle.lock().await;
        let Some(old) = lifecycle.take() else {
            return Ok(());
        };
        let kernel_id = old.kernel_id.clone();
        if !shared.owned {
            // Someone else's kernel keeps running; only our connection ends.
            old.stop(ExecuteEvent::KernelShutdown).await;
            shared.status.set(KernelStatus::Dead {
                exit: None,
                requested: true,
            });
            return Ok(());
        }
        let gone = old.pump_finished();
        if !gone {
            shared.interrupt_if_busy(&kernel_id).await;
        }
        old.stop(ExecuteEvent::KernelShutdown).await;
        // A server the hub stopped has nothing left to delete.
        let result = if shared.server_stopped.load(Ordering::SeqCst) {
            Ok(())
        } else {
            shared
                .rest()
                .delete(&kernel_id, shared.config.request_timeout)
                .await
        };
        shared.status.set(KernelStatus::Dead {
            exit: None,
            requested: true,
        });
        result
    }

    async fn probe_inner(&self) -> Result<KernelStatus> {
        let shared = &self.shared;
        // A restart or shutdown in progress owns the status.
        let Ok(lifecycle) = shared.lifecycle.try_lock() else {
            return Ok(shared.status.get());
        };
        let Some(session) = lifecycle.as_ref() else {
            return Ok(shared.status.get());
        };
        if session.pump_finished() {
            return Ok(shared.status.get());
        }
        let kernel_id = session.kernel_id.clone();
        let commands = session.commands.clone();
        let epoch = shared.status.epoch();
        drop(lifecycle);
        let looked = shared
            .rest()
            .kernel(&kernel_id, shared.config.probe_timeout)
            .await;
        let hub = &shared.status;
        if hub.epoch() == epoch {
            match looked {
                Ok(Some(model)) if model.execution_state.as_deref() == Some("dead") => {
                    let _ = commands.send(Command::Gone);
                    shared.mark_dead();
                }
                Ok(Some(_)) => {
                    if hub.get() == KernelStatus::Unreachable {
                        hub.set(hub.last_activity());
                    }
                }
                Ok(None) => {
                    let _ = commands.send(Command::Gone);
                    shared.mark_dead();
                }
                Err(error) => {
                    tracing::debug!(%error, "probing the remote kernel failed");
                    if let Some(jupyterhub) = &shared.hub
                        && may_mean_stopped(&error)
                        && matches!(jupyterhub.still_running().await, Ok(false))
                    {
                        // The pump ends the requests with `ServerStopped`; until they have
                        // seen it, the kernel only counts as unreachable (a `dead` now would
                        // end a run as a kernel death first).
                        let _ = commands.send(Command::ServerStopped);
                        return Ok(KernelStatus::Unreachable);
                    }
                    if matches!(
                        hub.get(),
                        KernelStatus::Idle | KernelStatus::Busy | KernelStatus::Unreachable
                    ) {
                        hub.set(KernelStatus::Unreachable);
                    }
                }
            }
        }
        Ok(hub.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(root: &str) -> RemoteConfig {
        let mut config = RemoteConfig::new(ServerUrl::parse("http://127.0.0.1:1/").unwrap(), None);
        config.served_root = Some(PathBuf::from(root));
        config
    }

    #[test]
    fn notebook_folders_map_to_server_paths_under_the_root_only() {
        let config = config("/srv/notebooks");
        assert_eq!(
            config.server_path(Path::new("/srv/notebooks")).as_deref(),
            Some("")
        );
        assert_eq!(
            config
                .server_path(Path::new("/srv/notebooks/team/a b"))
                .as_deref(),
            Some("team/a b")
        );
        assert_eq!(config.server_path(Path::new("/elsewhere")), None);
        assert_eq!(
            config.server_path(Path::new("/srv/notebooks/../x")),
            None,
            "no path climbs out"
        );
        let mut without_root = config;
        without_root.served_root = None;
        assert_eq!(without_root.server_path(Path::new("/srv/notebooks")), None);
    }

    #[test]
    fn kernelspecs_become_remote_choices() {
        let model: KernelSpecModel = serde_json::from_value(json!({
            "name": "python3",
            "spec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                     "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                     "env": {"A": "1", "B": 2}, "interrupt_mode": "message", "metadata": {}},
            "resources": {}
        }))
        .unwrap();
        let spec = remote_spec(&model);
        assert_eq!(spec.id, "remote:python3");
        assert_eq!(spec.kernel_name(), "python3");
        assert_eq!(spec.display_name, "Python 3 (ipykernel)");
        assert_eq!(spec.source, SpecSource::Remote);
        assert_eq!(spec.interrupt_mode, InterruptMode::Message);
        assert_eq!(spec.env.len(), 1, "non-string env values are left out");
        let bare: KernelSpecModel = serde_json::from_value(json!({"name": "ir"})).unwrap();
        assert_eq!(remote_spec(&bare).display_name, "ir");
    }

    #[tokio::test]
    async fn a_local_choice_is_not_started_remotely() {
        let provider = RemoteProvider::new(config("/srv")).unwrap();
        let local = KernelSpecInfo {
            id: "python3".into(),
            display_name: "Python 3".into(),
            language: "python".into(),
            argv: Vec::new(),
            env: Default::default(),
            interrupt_mode: InterruptMode::Signal,
            resource_dir: None,
            source: SpecSource::User,
        };
        assert!(matches!(
            provider.start_remote(&local, Path::new("/srv")).await,
            Err(Error::UnknownSpec { .. })
        ));
    }
}
