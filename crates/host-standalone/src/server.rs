//! Starting and stopping the standalone server.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use host_core::{NotebookHost, ToolDispatch, Tools};
use mcp_server::{HttpApp, HttpSecurity, McpHandler};
use tokio_util::sync::CancellationToken;

use crate::files::{FileHost, FileHostConfig, StandaloneHost};

/// How clients reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP on `127.0.0.1:port` (`0` picks a free port).
    Http { port: u16 },
    /// MCP over stdin/stdout; nothing else is written to stdout.
    Stdio,
}

/// Everything `jupyter-mcp serve` needs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub root: PathBuf,
    pub transport: Transport,
    pub snapshot_folder: PathBuf,
    /// Run code on Jupyter kernels (off: documents only).
    pub kernels: bool,
    /// Shut a kernel down after this long without a request (`None`: never).
    pub kernel_idle_ttl: Option<std::time::Duration>,
    /// How HTTP clients authenticate.
    pub auth: Auth,
    /// Where the files shared by the servers of one port live (the broker secret, the shared
    /// access token); see [`broker::secret::default_runtime_dir`].
    pub runtime_dir: PathBuf,
    /// Run kernels on this Jupyter Server or Kernel Gateway instead of locally.
    pub kernel_server: Option<KernelServer>,
    /// Serve the notebooks of this Jupyter Server (with jupyter-collaboration) instead of the
    /// files under `root`, live beside the people who have them open in JupyterLab; `root` is
    /// then the folder transfers read and write.
    pub jupyter: Option<host_jupyter::ServerConnection>,
    /// What the tools use besides the host (the summarizer of `ANTHROPIC_API_KEY`), the same
    /// for files under the root and for `--jupyter`.
    pub services: host_core::Services,
    /// Stop when stdin reaches its end (HTTP): a parent that runs the server holds its stdin,
    /// so the server stops with that parent however the parent ends.
    pub exit_on_stdin_close: bool,
}

/// Where the notebooks' kernels run when not locally.
#[derive(Debug, Clone)]
pub enum KernelServer {
    /// A Jupyter Server or Kernel Gateway, as the profile says how to reach it (its `Debug`
    /// shows no credential).
    Server(kernels::ConnectionProfile),
    /// The token user's server on a JupyterHub.
    JupyterHub(kernels::JupyterHubConfig),
    /// A Colab runtime behind Colab's proxy.
    Colab(crate::colab::ColabRuntime),
}

impl KernelServer {
    /// A Jupyter Server at `url` with a fixed token (tests and benchmarks).
    pub fn jupyter_server(url: kernels::ServerUrl, token: Option<kernels::ServerToken>) -> Self {
        KernelServer::Server(kernels::ConnectionProfile::jupyter_server(
            url,
            token.map(kernels::CredentialSource::Static),
        ))
    }

    /// What the start line says about it.
    fn describe(&self) -> String {
        match self {
            KernelServer::Server(profile) => format!("kernel server {}", profile.base_url),
            KernelServer::Colab(runtime) => runtime.describe(),
            KernelServer::JupyterHub(hub) => format!(
                "JupyterHub {} (server {})",
                hub.url,
                if hub.server_name.is_empty() {
                    "default"
                } else {
                    &hub.server_name
                }
            ),
        }
    }

    /// Warns, loudly, about plain HTTP to another machine.
    fn warn_if_insecure(&self) {
        let (url, allowed) = match self {
            KernelServer::Server(profile) => (&profile.base_url, profile.allow_insecure_http),
            KernelServer::JupyterHub(hub) => (&hub.url, hub.allow_insecure_http),
            // Colab runtimes are reached over HTTPS only.
            KernelServer::Colab(_) => return,
        };
        if allowed && !url.is_https() && !url.is_loopback() {
            tracing::warn!(
                server = %url,
                "--allow-insecure-http: the token and every cell's code and output cross the network to {url} unencrypted; anyone on the way can read them and run code as you"
            );
        }
    }
}

/// How HTTP clients authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A token made at start.
    RandomToken,
    /// A token given by the user (from a file or the environment, never the command line).
    Token(String),
    /// No token: any local process can use the server.
    None,
}

impl ServeConfig {
    /// The `/mcp` token. The servers sharing a port share a random token through a private file
    /// in the runtime folder, so that the URL stays the same whichever of them is broker.
    fn http_token(&self, port: u16) -> anyhow::Result<Option<String>> {
        Ok(match &self.auth {
            Auth::RandomToken if port == 0 => Some(mcp_server::random_token()),
            Auth::RandomToken => Some(
                broker::secret::TokenFile::shared_access_token(&self.runtime_dir, port)
                    .read_or_create(mcp_server::random_token)?,
            ),
            Auth::Token(token) => Some(token.clone()),
            Auth::None => None,
        })
    }
}

/// The kernel manager of a standalone server rooted at `root`.
pub fn local_kernels(
    root: &std::path::Path,
    idle_ttl: Option<std::time::Duration>,
) -> kernels::KernelManager {
    let provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(root.to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    kernels::KernelManager::new(Arc::new(provider), kernels::ManagerConfig { idle_ttl })
}

/// The kernel manager of a standalone server rooted at `root` whose kernels run on `server`.
/// A notebook's kernel is started in the server folder with the notebook folder's path
/// relative to `root`. Fails when the connection settings cannot be used (plain HTTP to
/// another machine without `--allow-insecure-http`, an unreadable CA file).
pub fn remote_kernels(
    root: &std::path::Path,
    idle_ttl: Option<std::time::Duration>,
    server: &KernelServer,
) -> anyhow::Result<kernels::KernelManager> {
    let provider = match server {
        KernelServer::Server(profile) => {
            let mut config = kernels::RemoteConfig::with_profile(profile.clone());
            config.served_root = Some(root.to_path_buf());
            kernels::RemoteProvider::new(config)?
        }
        KernelServer::JupyterHub(hub) => {
            let mut config = kernels::RemoteConfig::with_profile(hub.profile());
            config.served_root = Some(root.to_path_buf());
            kernels::RemoteProvider::jupyterhub(hub.clone(), config)?
        }
        // A runtime's files are its own (`/content`), not the served folder's: no path is sent.
        KernelServer::Colab(runtime) => {
            return Ok(kernels::KernelManager::new(
                Arc::new(crate::colab::slot::SlotProvider::new(runtime.slot.clone())),
                kernels::ManagerConfig { idle_ttl },
            ));
        }
    };
    Ok(kernels::KernelManager::new(
        Arc::new(provider),
        kernels::ManagerConfig { idle_ttl },
    ))
}

/// SIGINT and SIGTERM (on Windows: Ctrl+C, Ctrl+Break and the console window closing),
/// installed before the server announces itself so that a signal sent as soon as the URL is
/// printed is handled, not fatal.
struct ShutdownSignals {
    os: OsSignals,
    /// Cancelled when stdin reached its end (`--exit-on-stdin-close`).
    stdin_closed: Option<CancellationToken>,
}

impl ShutdownSignals {
    fn install(exit_on_stdin_close: bool) -> std::io::Result<ShutdownSignals> {
        let stdin_closed = exit_on_stdin_close.then(|| {
            let closed = CancellationToken::new();
            tokio::spawn(read_to_end_of_stdin(closed.clone()));
            closed
        });
        Ok(ShutdownSignals {
            os: OsSignals::install()?,
            stdin_closed,
        })
    }

    async fn recv(&mut self) {
        match &self.stdin_closed {
            Some(closed) => tokio::select! {
                () = self.os.recv() => {}
                () = closed.cancelled() => {
                    tracing::info!("stdin closed: the process that started this server is gone");
                }
            },
            None => self.os.recv().await,
        }
    }
}

/// Reads and drops stdin until its end (or an error), then cancels `closed`.
async fn read_to_end_of_stdin(closed: CancellationToken) {
    use tokio::io::AsyncReadExt;
    let mut stdin = tokio::io::stdin();
    let mut buffer = [0_u8; 256];
    while let Ok(read) = stdin.read(&mut buffer).await {
        if read == 0 {
            break;
        }
    }
    closed.cancel();
}

#[cfg(unix)]
struct OsSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl OsSignals {
    fn install() -> std::io::Result<OsSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(OsSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

#[cfg(windows)]
struct OsSignals {
    interrupt: tokio::signal::windows::CtrlC,
    broken: tokio::signal::windows::CtrlBreak,
    closed: tokio::signal::windows::CtrlClose,
}

#[cfg(windows)]
impl OsSignals {
    fn install() -> std::io::Result<OsSignals> {
        use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
        Ok(OsSignals {
            interrupt: ctrl_c()?,
            broken: ctrl_break()?,
            closed: ctrl_close()?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.broken.recv() => {}
            _ = self.closed.recv() => {}
        }
    }
}

/// Prints the start line (the URL is its first `http://` word; the tests read it).
fn announce(served: &str, url: &str, role: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "jupyter-mcp {} serving {served} at {url}{role}",
        env!("CARGO_PKG_VERSION"),
    )?;
    stdout.flush()
}

/// What to let go of when the server stops.
enum Host {
    /// Files under a root: its kernels, which no one else uses.
    Files(Option<kernels::KernelManager>),
    /// A Jupyter Server's notebooks: its rooms and the connections to its kernels (the
    /// kernels themselves are its sessions', and keep running).
    Jupyter(Arc<host_jupyter::JupyterHost>),
}

/// The tools of a Jupyter Server's notebooks, after checking the server answers.
async fn jupyter_host(
    config: &ServeConfig,
    connection: &host_jupyter::ServerConnection,
) -> anyhow::Result<(Arc<dyn ToolDispatch>, host_core::WindowInfo, String, Host)> {
    let host = host_jupyter::JupyterHost::new(host_jupyter::JupyterHostConfig {
        connection: connection.clone(),
        transfer_root: Some(config.root.clone()),
        kernels: config.kernels,
    })?;
    host.connect()
        .await
        .with_context(|| format!("cannot use the Jupyter server at {}", connection.base_url()))?;
    tracing::info!(server = %connection.base_url(), "serving a Jupyter server's notebooks");
    let window = host.window();
    // Without the scheme: the start line's first `http://` word is the MCP URL.
    let base = connection.base_url();
    let served = format!(
        "the notebooks of the Jupyter server {}",
        base.trim_start_matches("http://")
            .trim_start_matches("https://")
    );
    let dispatch = host_jupyter::JupyterDispatch::new(Arc::new(host), config.services.clone());
    let host = dispatch.host().clone();
    Ok((Arc::new(dispatch), window, served, Host::Jupyter(host)))
}

/// Runs the server until a signal (HTTP) or the end of stdin (stdio).
pub async fn serve(config: ServeConfig) -> anyhow::Result<()> {
    let mut signals = ShutdownSignals::install(config.exit_on_stdin_close)
        .context("cannot install signal handlers")?;
    let (tools, window, served, host) = match &config.jupyter {
        Some(connection) => jupyter_host(&config, connection).await?,
        None => files_host(&config)?,
    };
    serve_on(&config, tools, window, &served, &mut signals).await?;
    match host {
        // No kernel outlives the server.
        Host::Files(Some(kernels)) => kernels.shutdown_all().await,
        Host::Files(None) => {}
        Host::Jupyter(host) => host.shutdown().await,
    }
    Ok(())
}

/// The tools of the notebook files under the root.
fn files_host(
    config: &ServeConfig,
) -> anyhow::Result<(Arc<dyn ToolDispatch>, host_core::WindowInfo, String, Host)> {
    let host = FileHost::new(FileHostConfig {
        root: config.root.clone(),
        snapshot_folder: config.snapshot_folder.clone(),
    })
    .with_context(|| format!("cannot serve {}", config.root.display()))?;
    let root = host.root().to_path_buf();
    let kernels = match (config.kernels, &config.kernel_server) {
        (false, _) => None,
        (true, Some(server)) => {
            server.warn_if_insecure();
            tracing::info!("kernels run on the {}", server.describe());
            Some(remote_kernels(&root, config.kernel_idle_ttl, server)?)
        }
        (true, None) => Some(local_kernels(&root, config.kernel_idle_ttl)),
    };
    let mut standalone = StandaloneHost::new(Arc::new(host), kernels.clone());
    if let (true, Some(KernelServer::Colab(runtime))) = (config.kernels, &config.kernel_server) {
        let mut setup = colab_setup::RegistryConfig::default();
        if let Some(deadline_ms) = std::env::var(crate::colab::SETUP_DEADLINE_ENV)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .filter(|ms| *ms > 0)
        {
            setup.setup.deadline_ms = deadline_ms;
        }
        standalone.colab = Some(Arc::new(
            crate::colab::RuntimeFiles::new(runtime).with_setup_config(setup),
        ));
    }
    let window = standalone.window();
    let tools: Arc<dyn ToolDispatch> = Arc::new(Tools::with_services(
        Arc::new(standalone),
        config.services.clone(),
    ));
    Ok((
        tools,
        window,
        root.display().to_string(),
        Host::Files(kernels),
    ))
}

/// Serves `tools` on the configured transport until a signal (HTTP) or the end of stdin.
async fn serve_on(
    config: &ServeConfig,
    tools: Arc<dyn ToolDispatch>,
    window: host_core::WindowInfo,
    served: &str,
    signals: &mut ShutdownSignals,
) -> anyhow::Result<()> {
    match config.transport {
        Transport::Stdio => {
            tracing::info!(served, "serving MCP over stdio");
            tokio::select! {
                result = mcp_server::serve_stdio(McpHandler::new(tools)) => result.context("stdio transport failed")?,
                () = signals.recv() => {}
            }
        }
        Transport::Http { port: 0 } => {
            // A private server on a free port: no broker, nobody to share with.
            let (listener, address) = mcp_server::bind_loopback(0)
                .await
                .context("cannot listen on a free port of 127.0.0.1")?;
            let cancel = CancellationToken::new();
            let token = config.http_token(0)?;
            let security = HttpSecurity {
                token: token.clone(),
            };
            let app = HttpApp::new(McpHandler::new(tools), security, None, cancel.clone());
            announce(served, &mcp_server::mcp_url(address, token.as_deref()), "")?;
            let server = tokio::spawn(mcp_server::serve(listener, app, cancel.clone()));
            signals.recv().await;
            tracing::info!("shutting down");
            cancel.cancel();
            let _ = server.await;
        }
        Transport::Http { port } => {
            let token = config.http_token(port)?;
            let (coordinator, joined) = broker::Coordinator::start(broker::CoordinatorConfig {
                port,
                window,
                local: tools,
                runtime_dir: config.runtime_dir.clone(),
                security: HttpSecurity {
                    token: token.clone(),
                },
                timings: broker::Timings::default(),
            })
            .await?;
            let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            let role = match joined {
                broker::Joined::Broker { .. } => format!(
                    " (the broker of port {port}: other jupyter-mcp servers started on this port \
                     join it and share this URL)"
                ),
                broker::Joined::Peer { .. } => format!(
                    " (joined the jupyter-mcp server already on port {port} as a peer: its \
                     notebooks are served at this shared URL)"
                ),
            };
            announce(
                served,
                &mcp_server::mcp_url(address, token.as_deref()),
                &role,
            )?;
            signals.recv().await;
            tracing::info!("shutting down");
            coordinator.stop().await;
        }
    }
    Ok(())
}
