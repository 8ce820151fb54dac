//! Starting and stopping the standalone server.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use host_core::{ToolDispatch, Tools};
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
    /// Run code on local Jupyter kernels (off: documents only).
    pub kernels: bool,
    /// Shut a kernel down after this long without a request (`None`: never).
    pub kernel_idle_ttl: Option<std::time::Duration>,
    /// How HTTP clients authenticate.
    pub auth: Auth,
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

/// The kernel manager of a standalone server rooted at `root`.
pub fn local_kernels(
    root: &std::path::Path,
    idle_ttl: Option<std::time::Duration>,
) -> Arc<kernels::KernelManager> {
    let provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(root.to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    Arc::new(kernels::KernelManager::new(
        Arc::new(provider),
        kernels::ManagerConfig { idle_ttl },
    ))
}

/// SIGINT and SIGTERM, installed before the server announces itself so that a signal sent as
/// soon as the URL is printed is handled, not fatal.
struct ShutdownSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl ShutdownSignals {
    fn install() -> std::io::Result<ShutdownSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(ShutdownSignals {
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

/// Runs the server until a signal (HTTP) or the end of stdin (stdio).
pub async fn serve(config: ServeConfig) -> anyhow::Result<()> {
    let mut signals = ShutdownSignals::install().context("cannot install signal handlers")?;
    let host = FileHost::new(FileHostConfig {
        root: config.root.clone(),
        snapshot_folder: config.snapshot_folder.clone(),
    })
    .with_context(|| format!("cannot serve {}", config.root.display()))?;
    let root = host.root().to_path_buf();
    let kernels = config
        .kernels
        .then(|| local_kernels(&root, config.kernel_idle_ttl));
    let standalone = StandaloneHost {
        files: Arc::new(host),
        kernels: kernels.clone(),
        summarizer: crate::summarizer::AnthropicSummarizer::from_env()
            .map(|summarizer| Arc::new(summarizer) as Arc<dyn host_core::summary::Summarizer>),
    };
    let tools: Arc<dyn ToolDispatch> = Arc::new(Tools::new(Arc::new(standalone)));
    let handler = McpHandler::new(tools);
    match config.transport {
        Transport::Stdio => {
            tracing::info!(root = %root.display(), "serving MCP over stdio");
            tokio::select! {
                result = mcp_server::serve_stdio(handler) => result.context("stdio transport failed")?,
                () = signals.recv() => {}
            }
        }
        Transport::Http { port } => {
            let (listener, address) = mcp_server::bind_loopback(port).await.with_context(|| {
                format!(
                    "cannot listen on 127.0.0.1:{port}; is another server using it? Pick another \
                     port with --port, or --port 0 for any free one"
                )
            })?;
            let cancel = CancellationToken::new();
            let token = match &config.auth {
                Auth::RandomToken => Some(mcp_server::random_token()),
                Auth::Token(token) => Some(token.clone()),
                Auth::None => None,
            };
            let security = HttpSecurity {
                token: token.clone(),
            };
            let app = HttpApp::new(handler, security, None, cancel.clone());
            // The printed URL carries the token, so pasting it into a client just works.
            let url = mcp_server::mcp_url(address, token.as_deref());
            let mut stdout = std::io::stdout();
            writeln!(
                stdout,
                "jupyter-mcp {} serving {} at {url}",
                env!("CARGO_PKG_VERSION"),
                root.display()
            )?;
            stdout.flush()?;
            let server = tokio::spawn(mcp_server::serve(listener, app, cancel.clone()));
            signals.recv().await;
            tracing::info!("shutting down");
            cancel.cancel();
            let _ = server.await;
        }
    }
    if let Some(kernels) = kernels {
        // No kernel outlives the server.
        kernels.shutdown_all().await;
    }
    Ok(())
}
