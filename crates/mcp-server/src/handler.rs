//! The rmcp binding: `tools/list` from the contract catalogue, `tools/call` through a
//! [`ToolDispatch`], and progress notifications when the client sent a progress token.
//! `logging/setLevel` is accepted (the `logging` capability is declared, as the MCP conformance
//! suite expects of 2025-11-25 servers), but the server sends no log notifications: its log goes
//! to stderr. Logging is deprecated from spec 2026-07-28 on (SEP-2577), hence the `expect`s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_contract::ToolSpec;
use mcp_contract::{CallContext, ProgressSink, ToolDispatch, ToolOutput};
#[expect(
    deprecated,
    reason = "logging/setLevel still belongs to the 2025 protocol versions"
)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};

/// What the server says about itself at `initialize`.
pub const INSTRUCTIONS: &str = "Notebook tools. Start with list_notebooks, then read_notebook \
(outline view) to get cell ids, names and revs. Edit with edit_cells quoting each cell's rev as \
expectedRev. run_cells without cellIds runs exactly the stale cells; follow long runs with \
get_execution.";

/// Serves one [`ToolDispatch`] over MCP. The tool list is asked of the dispatch on every
/// `tools/list`, because a broker's changes as windows come and go.
#[derive(Clone)]
pub struct McpHandler {
    dispatch: Arc<dyn ToolDispatch>,
    /// rmcp descriptions by tool name, made once each (generating schemas is not free).
    described: Arc<Mutex<HashMap<&'static str, Tool>>>,
}

impl std::fmt::Debug for McpHandler {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpHandler")
            .field("tools", &self.dispatch.specs().len())
            .finish()
    }
}

/// The rmcp description of a contract tool.
pub fn rmcp_tool(spec: &ToolSpec) -> Tool {
    let annotations = ToolAnnotations::from_raw(
        Some(spec.title.to_owned()),
        Some(spec.annotations.read_only),
        Some(spec.annotations.destructive),
        Some(spec.annotations.idempotent),
        Some(spec.annotations.open_world),
    );
    Tool::new(spec.name, spec.description, Arc::new((spec.input_schema)()))
        .with_title(spec.title)
        .with_raw_output_schema(Arc::new((spec.output_schema)()))
        .with_annotations(annotations)
}

/// Converts a tool output into an MCP result.
pub fn call_tool_result(output: ToolOutput) -> CallToolResult {
    let mut content = vec![ContentBlock::text(output.text)];
    for image in output.images {
        content.push(ContentBlock::image(image.data, image.mime_type));
    }
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured;
    result
}

impl McpHandler {
    pub fn new(dispatch: Arc<dyn ToolDispatch>) -> McpHandler {
        let handler = McpHandler {
            dispatch,
            described: Arc::default(),
        };
        handler.tools();
        handler
    }

    /// The tools the dispatch serves now.
    fn tools(&self) -> Vec<Tool> {
        let specs = self.dispatch.specs();
        let mut described = self.described.lock().expect("tool description lock");
        specs
            .iter()
            .map(|spec| {
                described
                    .entry(spec.name)
                    .or_insert_with(|| rmcp_tool(spec))
                    .clone()
            })
            .collect()
    }
}

struct PeerProgress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
}

impl ProgressSink for PeerProgress {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let mut param = ProgressNotificationParam::new(self.token.clone(), progress);
        param.total = total;
        param.message = message;
        let peer = self.peer.clone();
        tokio::spawn(async move {
            if let Err(error) = peer.notify_progress(param).await {
                tracing::debug!(%error, "progress notification not delivered");
            }
        });
    }
}

impl ServerHandler for McpHandler {
    #[expect(
        deprecated,
        reason = "the logging capability of the 2025 protocol versions"
    )]
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        );
        config.server_info = Implementation::new("jupyter-mcp", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(INSTRUCTIONS.to_owned());
        config
    }

    /// Accepted so that clients which set a level do not fail; there are no log notifications
    /// to filter.
    #[expect(
        deprecated,
        reason = "logging/setLevel still belongs to the 2025 protocol versions"
    )]
    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        let spec = self
            .dispatch
            .specs()
            .into_iter()
            .find(|spec| spec.name == name)?;
        let mut described = self.described.lock().expect("tool description lock");
        Some(
            described
                .entry(spec.name)
                .or_insert_with(|| rmcp_tool(&spec))
                .clone(),
        )
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let progress = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token())
            .or_else(|| context.meta.get_progress_token())
            .map(|token| {
                Arc::new(PeerProgress {
                    peer: context.peer.clone(),
                    token,
                }) as Arc<dyn ProgressSink>
            });
        let client_name = context.peer.peer_info().map(|info| {
            let client = &info.client_info;
            client.title.clone().unwrap_or_else(|| client.name.clone())
        });
        let output = self
            .dispatch
            .dispatch(
                request.name.to_string(),
                request.arguments,
                CallContext {
                    progress,
                    client_name,
                },
            )
            .await;
        Ok(call_tool_result(output).into())
    }
}
