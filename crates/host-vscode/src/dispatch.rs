//! What the extension serves: the tools of one window, over HTTP or stdio, and the entry the
//! extension's own notebook controller uses to run cells on the same kernels and run records as
//! MCP clients.
//!
//! [`VsCodeDispatch`] is a [`ToolDispatch`] that forwards each request to the window's
//! [`Tools`]; [`RunningServer`] serves it on a private port (port 0) or joins the shared port's
//! broker, which serves a `dyn ToolDispatch` per window.

use std::sync::Arc;

use host_core::{BoxFuture, CallContext, NotebookHost, Services, ToolDispatch, ToolOutput, Tools};
use mcp_contract::ToolRequest;
use mcp_contract::catalog::{ToolName, ToolSpec};
use mcp_server::{HttpApp, HttpSecurity, McpHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::host::VsCodeHost;

/// The tools of one VS Code window.
#[derive(Clone)]
pub struct VsCodeDispatch {
    tools: Tools<VsCodeHost>,
}

impl VsCodeDispatch {
    /// The tools of `host`, using `services` (see [`crate::services_from_env`]).
    pub fn new(host: VsCodeHost, services: Services) -> VsCodeDispatch {
        VsCodeDispatch {
            tools: Tools::with_services(Arc::new(host), services),
        }
    }

    pub fn tools(&self) -> &Tools<VsCodeHost> {
        &self.tools
    }

    /// Runs cells of a notebook for the extension's notebook controller (the user pressed Run):
    /// a tracked run of exactly these cells, waited for to its end.
    pub async fn run_cells_for_controller(&self, uri: &str, cells: &[u32]) -> ToolOutput {
        let arguments = json!({
            "notebookRef": uri,
            "cellIds": cells,
            "freshDeps": false,
            "waitMs": 365u64 * 24 * 3600 * 1000,
            "includeOutputs": false,
        });
        self.controller_call(ToolName::RunCells, arguments).await
    }

    /// Interrupts the notebook's kernel for the controller.
    pub async fn interrupt_for_controller(&self, uri: &str) -> ToolOutput {
        let arguments = json!({ "notebookRefs": [uri] });
        self.controller_call(ToolName::InterruptKernels, arguments)
            .await
    }

    /// A call of the extension's notebook controller (no MCP client, so no progress or
    /// cancellation).
    async fn controller_call(&self, tool: ToolName, arguments: Value) -> ToolOutput {
        let arguments = arguments.as_object().cloned();
        self.tools
            .call(tool.as_str(), arguments, CallContext::default())
            .await
    }

    /// The shell reports that a notebook changed or closed.
    pub fn notebook_changed(&self) {
        self.tools.host().notebook_changed();
    }

    /// Stops every kernel (the extension is deactivating).
    pub async fn shutdown_kernels(&self) {
        use host_core::NotebookKernels as _;
        self.tools.host().window_kernels().shutdown_all().await;
    }
}

impl ToolDispatch for VsCodeDispatch {
    fn specs(&self) -> Vec<ToolSpec> {
        self.tools.specs().to_vec()
    }

    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput> {
        self.tools.dispatch(request)
    }
}

/// How clients reach a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Streamable HTTP on `127.0.0.1:port` (`0`: any free port).
    Http { port: u16 },
    /// MCP over the extension host's stdin/stdout.
    Stdio,
}

/// A running server of one window.
pub struct RunningServer {
    dispatch: VsCodeDispatch,
    url: Option<String>,
    cancel: CancellationToken,
    serving: Serving,
}

/// What serves the window: its own endpoint, or the broker coordinator of a shared port.
enum Serving {
    Task(tokio::task::JoinHandle<()>),
    Shared(broker::Coordinator),
}

impl RunningServer {
    /// Starts serving `dispatch`. Fails when the port cannot be bound or joined.
    ///
    /// On a fixed port the window joins the port's broker (the first window, or standalone
    /// server, to take the port is broker and the others register as its peers), so every
    /// window is reached through one URL. Port 0 is a private endpoint on a free port.
    pub async fn start(
        dispatch: VsCodeDispatch,
        transport: Transport,
    ) -> std::io::Result<RunningServer> {
        let cancel = CancellationToken::new();
        let handler = McpHandler::new(Arc::new(dispatch.clone()) as Arc<dyn ToolDispatch>);
        let (url, serving) = match transport {
            Transport::Http { port: 0 } => {
                let (listener, address) = mcp_server::bind_loopback(0).await?;
                // As the standalone server: a token on by default, from JUPYTER_MCP_TOKEN or
                // random; the URL the status item copies carries it.
                let token = mcp_server::token_from_env().unwrap_or_else(mcp_server::random_token);
                let url = mcp_server::mcp_url(address, Some(&token));
                let security = HttpSecurity { token: Some(token) };
                let app = HttpApp::new(handler, security, None, cancel.clone());
                let task = tokio::spawn(mcp_server::serve(listener, app, cancel.clone()));
                (Some(url), Serving::Task(task))
            }
            Transport::Http { port } => {
                let runtime_dir = broker::secret::default_runtime_dir();
                // The windows of one port share one token through a private file, so that the
                // URL stays the same whichever of them is broker.
                let token = match mcp_server::token_from_env() {
                    Some(token) => token,
                    None => broker::secret::TokenFile::shared_access_token(&runtime_dir, port)
                        .read_or_create(mcp_server::random_token)
                        .map_err(std::io::Error::other)?,
                };
                let (coordinator, joined) = broker::Coordinator::start(broker::CoordinatorConfig {
                    port,
                    window: dispatch.tools().host().window(),
                    local: Arc::new(dispatch.clone()),
                    runtime_dir,
                    security: HttpSecurity {
                        token: Some(token.clone()),
                    },
                    timings: broker::Timings::default(),
                })
                .await
                .map_err(std::io::Error::other)?;
                tracing::info!(?joined, port, "joined the shared port");
                let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                (
                    Some(mcp_server::mcp_url(address, Some(&token))),
                    Serving::Shared(coordinator),
                )
            }
            Transport::Stdio => {
                let stopped = cancel.clone();
                let task = tokio::spawn(async move {
                    tokio::select! {
                        result = mcp_server::serve_stdio(handler) => {
                            if let Err(failure) = result {
                                tracing::warn!(%failure, "the stdio transport stopped");
                            }
                        }
                        () = stopped.cancelled() => {}
                    }
                });
                (None, Serving::Task(task))
            }
        };
        Ok(RunningServer {
            dispatch,
            url,
            cancel,
            serving,
        })
    }

    /// `http://127.0.0.1:PORT/mcp?token=TOKEN`, for HTTP.
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    pub fn dispatch(&self) -> &VsCodeDispatch {
        &self.dispatch
    }

    /// Stops serving and stops the window's kernels.
    pub async fn stop(self) {
        self.cancel.cancel();
        match self.serving {
            Serving::Task(task) => {
                let _ = task.await;
            }
            Serving::Shared(coordinator) => coordinator.stop().await,
        }
        self.dispatch.shutdown_kernels().await;
    }
}
