//! The rmcp binding: `tools/list` from the contract catalogue (with portable input schemas),
//! `tools/call` through a [`ToolDispatch`] (progress notifications when the client sent a
//! progress token; `run_cells` as a task for 2026-07-28 clients that declared the tasks
//! extension), the notebooks as resources (`resources/list`, templates, `resources/read`, and
//! change notifications for subscribers: see [`crate::subscriptions`]), the prompts of
//! `mcp_contract::prompts` with completion of their notebook argument, and the output viewer,
//! an MCP App (`ui://jupyter-mcp/output-viewer`). `logging/setLevel` is accepted (the
//! `logging` capability is declared, as the MCP conformance suite expects of 2025-11-25
//! servers), but the server sends no log notifications: its log goes to stderr. Logging is
//! deprecated from spec 2026-07-28 on (SEP-2577), hence the `expect`s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcp_contract::resources::{NOTEBOOK_MIME, TEMPLATES};
use mcp_contract::{
    CallContext, ResourceError, ToolDispatch, ToolName, ToolOutput, ToolRequest, ToolSpec,
};
#[expect(
    deprecated,
    reason = "logging/setLevel still belongs to the 2025 protocol versions"
)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, ExtensionCapabilities,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetTaskParams, GetTaskResult, Icon,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Reference, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig, SubscriptionFilter, Tool, ToolAnnotations, UpdateTaskParams,
};
use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

use crate::progress::{CallProgress, PeerOut};
use crate::subscriptions::Subscriptions;
use crate::tasks::Tasks;

/// What the server says about itself at `initialize`.
pub const INSTRUCTIONS: &str = "Notebook tools. Start with list_notebooks, then read_notebook \
(outline view) to get cell ids, names and revs. Edit with edit_cells quoting each cell's rev as \
expectedRev. run_cells without cellIds runs exactly the stale cells; follow long runs with \
get_execution.";

/// The output viewer, an MCP App.
pub const VIEWER_URI: &str = "ui://jupyter-mcp/output-viewer";
/// The MIME type of an MCP App.
pub const APP_MIME: &str = "text/html;profile=mcp-app";
/// The MCP Apps extension.
pub const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";
const VIEWER_HTML: &str = include_str!("viewer.html");

/// Serves one [`ToolDispatch`] over MCP. The tool list is asked of the dispatch on every
/// `tools/list`, because a broker's changes as windows come and go.
#[derive(Clone)]
pub struct McpHandler {
    dispatch: Arc<dyn ToolDispatch>,
    /// rmcp descriptions by tool name, made once each (generating schemas is not free).
    described: Arc<Mutex<HashMap<&'static str, Tool>>>,
    subscriptions: Arc<Subscriptions>,
    tasks: Arc<Tasks>,
    /// Counts the sessions handed out, so each has its own id.
    sessions: Arc<AtomicU64>,
    /// This handler's session (legacy subscriptions belong to one).
    session: u64,
}

impl std::fmt::Debug for McpHandler {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("McpHandler")
            .field("tools", &self.dispatch.specs().len())
            .field("session", &self.session)
            .finish()
    }
}

/// The server's icon: a notebook page, drawn without external references.
const ICON_SVG: &str = include_str!("icon.svg");

/// `svg` as a `data:` URI, the characters a URI cannot carry percent-encoded.
fn svg_data_uri(svg: &str) -> String {
    let mut uri = String::from("data:image/svg+xml,");
    for character in svg.trim().chars() {
        match character {
            '<' | '>' | '"' | '#' | '%' | '{' | '}' | '|' | '\\' | '^' | '`' | ' ' | '\n' => {
                uri.push_str(&format!("%{:02X}", character as u32));
            }
            other => uri.push(other),
        }
    }
    uri
}

/// The rmcp description of a contract tool: its portable input schema, its output schema,
/// annotations, and for the tools whose outputs the viewer shows, the viewer's URI.
pub fn rmcp_tool(spec: &ToolSpec) -> Tool {
    let annotations = ToolAnnotations::from_raw(
        Some(spec.title.to_owned()),
        Some(spec.annotations.read_only),
        Some(spec.annotations.destructive),
        Some(spec.annotations.idempotent),
        Some(spec.annotations.open_world),
    );
    let tool = Tool::new(
        spec.name,
        spec.description,
        Arc::new(mcp_contract::catalog::portable_input_schema(spec)),
    )
    .with_title(spec.title)
    .with_raw_output_schema(Arc::new(mcp_contract::catalog::portable_output_schema(
        spec,
    )))
    .with_annotations(annotations);
    if spec.tool.shown_in_viewer() {
        let mut meta = serde_json::Map::new();
        meta.insert("ui".to_owned(), json!({"resourceUri": VIEWER_URI}));
        tool.with_meta(MetaObject(meta))
    } else {
        tool
    }
}

/// Converts a tool output into an MCP result: the JSON as text, images, then resource links.
pub fn call_tool_result(output: ToolOutput) -> CallToolResult {
    let mut content = vec![ContentBlock::text(output.text)];
    for image in output.images {
        content.push(ContentBlock::image(image.data, image.mime_type));
    }
    for link in output.links {
        let mut resource = Resource::new(link.uri, link.name).with_mime_type(link.mime_type);
        if let Some(description) = link.description {
            resource = resource.with_description(description);
        }
        if let Some(title) = link.title {
            resource = resource.with_title(title);
        }
        content.push(ContentBlock::resource_link(resource));
    }
    let mut result = if output.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    result.structured_content = output.structured;
    result
}

fn resource_error(error: ResourceError) -> McpError {
    match error {
        ResourceError::NotFound { uri, message } => {
            McpError::resource_not_found(message, Some(json!({ "uri": uri })))
        }
        ResourceError::Unavailable { message } => McpError::internal_error(message, None),
    }
}

/// Whether the request comes from a 2026-07-28 (or later) client.
fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl McpHandler {
    /// Serves `dispatch`.
    pub fn new(dispatch: Arc<dyn ToolDispatch>) -> McpHandler {
        let handler = McpHandler {
            subscriptions: Subscriptions::new(dispatch.clone()),
            dispatch,
            described: Arc::default(),
            tasks: Arc::default(),
            sessions: Arc::default(),
            session: 0,
        };
        handler.tools();
        handler
    }

    /// The handler of a new session: the same server, its own session id.
    pub fn for_session(&self) -> McpHandler {
        let mut handler = self.clone();
        handler.session = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
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

fn prompt_list() -> Vec<Prompt> {
    mcp_contract::prompts::PROMPTS
        .iter()
        .map(|prompt| {
            Prompt::new(
                prompt.name,
                Some(prompt.description),
                Some(vec![
                    PromptArgument::new(mcp_contract::prompts::NOTEBOOK_ARGUMENT)
                        .with_description(mcp_contract::prompts::NOTEBOOK_ARGUMENT_DESCRIPTION)
                        .with_required(true),
                ]),
            )
            .with_title(prompt.title)
        })
        .collect()
}

impl ServerHandler for McpHandler {
    #[expect(
        deprecated,
        reason = "the logging capability of the 2025 protocol versions"
    )]
    fn get_info(&self) -> ServerConfig {
        let mut extensions = ExtensionCapabilities::new();
        let mut apps = serde_json::Map::new();
        apps.insert("mimeTypes".to_owned(), json!([APP_MIME]));
        extensions.insert(APPS_EXTENSION.to_owned(), apps);
        let mut config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_extensions_with(extensions)
                .enable_tasks()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_prompts()
                .enable_completions()
                .enable_logging()
                .build(),
        );
        config.server_info = Implementation::new("jupyter-mcp", env!("CARGO_PKG_VERSION"))
            .with_title("Jupyter MCP")
            .with_icons(vec![
                Icon::new(svg_data_uri(ICON_SVG))
                    .with_mime_type("image/svg+xml")
                    .with_sizes(vec!["any".to_owned()]),
            ]);
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
        // The list changes only when windows join or leave a shared port: a short cache.
        Ok(ListToolsResult::with_all_items(self.tools())
            .with_ttl_ms(10_000)
            .with_cache_scope(CacheScope::Private))
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
        let wants_task = ToolName::parse(&request.name).is_some_and(ToolName::runs_as_task)
            && is_modern(&context)
            && context
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
            && self
                .dispatch
                .specs()
                .iter()
                .any(|spec| spec.name == request.name);
        if wants_task {
            let task = self
                .tasks
                .start(self.dispatch.clone(), request.arguments.unwrap_or_default());
            return Ok(CallToolResponse::Task(task));
        }
        let progress = request
            .meta
            .as_ref()
            .and_then(|meta| meta.get_progress_token())
            .or_else(|| context.meta.get_progress_token())
            .map(|token| {
                CallProgress::start(
                    PeerOut {
                        peer: context.peer.clone(),
                    },
                    token,
                )
            });
        let client_name = context.peer.peer_info().map(|info| {
            let client = &info.client_info;
            client.title.clone().unwrap_or_else(|| client.name.clone())
        });
        let output = self
            .dispatch
            .dispatch(ToolRequest {
                name: request.name.to_string(),
                arguments: request.arguments,
                context: CallContext {
                    progress: progress.as_ref().map(CallProgress::sink),
                    client_name,
                },
            })
            .await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        Ok(call_tool_result(output).into())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(
            self.tasks.manager().get_task(&request.task_id)?,
        ))
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.manager().cancel_task(&request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Runs never ask for input; an answer for one is acknowledged and ignored.
        self.tasks
            .manager()
            .update_task(&request.task_id, std::iter::empty())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let mut resources: Vec<Resource> = self
            .dispatch
            .list_resources()
            .await
            .into_iter()
            .map(|entry| {
                let mut resource = Resource::new(entry.uri, entry.name.clone())
                    .with_title(entry.title.unwrap_or(entry.name))
                    .with_mime_type(entry.mime_type);
                if let Some(description) = entry.description {
                    resource = resource.with_description(description);
                }
                resource
            })
            .collect();
        resources.push(
            Resource::new(VIEWER_URI, "output-viewer")
                .with_title("Output viewer")
                .with_description(
                    "Shows the outputs of a read or a run as the notebook would (an MCP App)",
                )
                .with_mime_type(APP_MIME),
        );
        // Notebooks come and go on disk: clients must not keep the list.
        Ok(ListResourcesResult::with_all_items(resources)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            TEMPLATES
                .iter()
                .map(|template| {
                    ResourceTemplate::new(template.uri_template, template.name)
                        .with_description(template.description)
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let contents = if uri == VIEWER_URI {
            let mut meta = serde_json::Map::new();
            // No origin to connect to or load from: everything it shows comes through the host.
            meta.insert(
                "ui".to_owned(),
                json!({"prefersBorder": true, "csp": {"connectDomains": [], "resourceDomains": []}}),
            );
            vec![
                ResourceContents::text(VIEWER_HTML, uri.clone())
                    .with_mime_type(APP_MIME)
                    .with_meta(MetaObject(meta)),
            ]
        } else {
            self.dispatch
                .read_resource(uri.clone())
                .await
                .map_err(resource_error)?
                .into_iter()
                .map(|body| match (body.text, body.blob) {
                    (_, Some(blob)) => {
                        ResourceContents::blob(blob, body.uri).with_mime_type(body.mime_type)
                    }
                    (text, None) => ResourceContents::text(text.unwrap_or_default(), body.uri)
                        .with_mime_type(body.mime_type),
                })
                .collect()
        };
        // A notebook changes under the reader (a person, a run): never serve it from a cache.
        Ok(ReadResourceResult::new(contents)
            .with_ttl_ms(0)
            .with_cache_scope(CacheScope::Private)
            .into())
    }

    /// A 2025 session's subscription (2026-07-28 clients use `subscriptions/listen`).
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = [request.uri.clone()];
        self.subscriptions
            .subscribe(request.uri, self.session, context.peer.clone());
        // Answered once the baseline is known: a change made after the reply is news.
        self.subscriptions.take_baseline(&uri, false).await;
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscriptions.unsubscribe(&request.uri, self.session);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // The stream is acknowledged before `listen` runs, so the baseline is taken here (a
        // change made as soon as the client hears the acknowledgement is news). That needs a
        // worker thread to wait on; on a single-threaded runtime the watcher's first look is
        // the baseline.
        if let Some(uris) = &requested.resource_subscriptions
            && tokio::runtime::Handle::try_current().is_ok_and(|runtime| {
                runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            })
        {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(self.subscriptions.take_baseline(uris, true));
            });
        }
        // Resource updates only: the tool and prompt lists do not change on their own.
        let mut accepted = requested.clone();
        accepted.tools_list_changed = None;
        accepted.prompts_list_changed = None;
        accepted.resources_list_changed = None;
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let sink = context.sink().clone();
        let mut listener = self.subscriptions.listen(uris);
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = listener.changes.recv() => match changed {
                    Ok(uri) if listener.uris.contains(&uri) => {
                        if let Err(error) = sink.notify_resource_updated(uri).await {
                            tracing::debug!(?error, "a resource update was not delivered");
                        }
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(prompt_list()))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let Some(prompt) = mcp_contract::prompts::prompt(&request.name) else {
            let names: Vec<&str> = mcp_contract::prompts::PROMPTS
                .iter()
                .map(|prompt| prompt.name)
                .collect();
            return Err(McpError::invalid_params(
                format!(
                    "no prompt is named `{}`; the prompts are {}",
                    request.name,
                    names.join(", ")
                ),
                None,
            ));
        };
        let notebook = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get(mcp_contract::prompts::NOTEBOOK_ARGUMENT))
            .and_then(Value::as_str)
            .filter(|notebook| !notebook.trim().is_empty())
            .ok_or_else(|| {
                McpError::invalid_params(
                    "the prompt needs the argument `notebook` (a notebookRef, path or URI)",
                    None,
                )
            })?
            .to_owned();
        let mut messages = vec![PromptMessage::new_text(
            Role::User,
            (prompt.render)(&notebook),
        )];
        // A notebook this server serves goes along as a resource link.
        if let Some(entry) = self
            .dispatch
            .list_resources()
            .await
            .into_iter()
            .find(|entry| entry.uri == notebook || entry.name == notebook)
        {
            messages.push(PromptMessage::new_resource_link(
                Role::User,
                Resource::new(entry.uri, entry.name).with_mime_type(NOTEBOOK_MIME),
            ));
        }
        Ok(GetPromptResult::new(messages)
            .with_description(prompt.description)
            .into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let wants_notebook = matches!(request.r#ref, Reference::Prompt(_))
            && request.argument.name == mcp_contract::prompts::NOTEBOOK_ARGUMENT;
        let mut values: Vec<String> = if wants_notebook {
            let typed = request.argument.value.to_lowercase();
            self.dispatch
                .list_resources()
                .await
                .into_iter()
                .map(|entry| entry.name)
                .filter(|name| name.to_lowercase().contains(&typed))
                .collect()
        } else {
            Vec::new()
        };
        values.truncate(CompletionInfo::MAX_VALUES);
        let info = CompletionInfo::new(values)
            .map_err(|problem| McpError::internal_error(problem.to_string(), None))?;
        Ok(CompleteResult::new(info))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_icon_uri_decodes_to_the_svg_and_carries_no_reserved_characters() {
        let uri = svg_data_uri(ICON_SVG);
        let body = uri.strip_prefix("data:image/svg+xml,").unwrap();
        assert!(!body.contains(['<', '>', '"', '#', ' ']), "{body}");
        let mut decoded = String::new();
        let mut rest = body;
        while let Some(at) = rest.find('%') {
            decoded.push_str(&rest[..at]);
            let code = u8::from_str_radix(&rest[at + 1..at + 3], 16).unwrap();
            decoded.push(char::from(code));
            rest = &rest[at + 3..];
        }
        decoded.push_str(rest);
        assert_eq!(decoded, ICON_SVG.trim());
    }
}
