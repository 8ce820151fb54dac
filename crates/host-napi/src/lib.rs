//! The VS Code host of jupyter-mcp as a native Node module.
//!
//! Layer 3 (binding), thin on purpose: for each export a mirror struct with `#[napi(object)]`,
//! a conversion into the `host-vscode` type, and one private function that does the work there.
//! The extension calls [`start_server`] with its document operations as JavaScript functions;
//! Rust calls them through threadsafe functions and awaits the Promises they return. Failures
//! cross the boundary as data (`ShellReply.error`, `ToolReply.isError`), never as exceptions the
//! other side must guess at. VS Code positions are UTF-16: byte offsets become
//! `(line, character)` here, once, and nowhere else.
//!
//! It must never contain tool logic, nbformat mapping or edit planning (that is `host-vscode`
//! and below), nor any VS Code API call (that is the TypeScript shell).
#![allow(
    unsafe_code,
    reason = "napi-derive expands to the FFI glue; this crate writes no unsafe code itself"
)]

use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::future::BoxFuture;
use host_vscode::plan::EditPlan;
use host_vscode::shell::VsCellKind;
use host_vscode::{
    CellData, CellSnapshot, Controller, ExecutionSummary, HostConfig, JupyterKernel, JupyterReply,
    JupyterRequest, NewNotebook, OutputData, OutputItem, RunningServer, Shell, ShellError,
    Snapshot, Transport, VsCodeDispatch, VsCodeHost,
};
use napi::bindgen_prelude::{Promise, Result, Status};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::Value;

/// A JavaScript function taking `Arg` and returning a Promise of `Reply`, callable from any
/// thread. Weak: it never keeps Node's event loop alive.
type JsFunction<Arg, Reply> = ThreadsafeFunction<Arg, Promise<Reply>, Arg, Status, false, true>;

// ---------------------------------------------------------------------------------------------
// Mirror structs.

/// How the server starts.
#[napi(object)]
pub struct ServerOptions {
    /// `http` or `stdio`.
    pub transport: String,
    /// Loopback port for HTTP; 0 picks a free one.
    pub port: u32,
    /// Workspace folder names joined with `, `, or `Empty window`.
    pub window_label: String,
    /// Absolute paths of the workspace folders, first one first.
    pub workspace_folders: Vec<String>,
    pub save_before_execute: bool,
    /// Run cells on local Jupyter kernels (default true).
    pub kernels: Option<bool>,
    /// Stop a notebook's kernel after this many idle seconds (default 3600; 0 never).
    pub kernel_idle_ttl_seconds: Option<u32>,
    /// The Colab extension (`google.colab`) is installed: the Colab tools are listed.
    pub colab_installed: Option<bool>,
    /// `jupyterMcp.nativeDebugPort` or `JUPYTER_MCP_NATIVE_DEBUG_PORT` (0 or absent: unset).
    pub native_debug_port: Option<u32>,
}

/// `NotebookCellOutputItem`, its bytes in base64.
#[napi(object)]
pub struct JsOutputItem {
    pub mime: String,
    pub data_base64: String,
}

/// `NotebookCellOutput`.
#[napi(object)]
pub struct JsOutput {
    pub items: Vec<JsOutputItem>,
    pub metadata: Option<Value>,
}

/// `NotebookCellExecutionSummary`.
#[napi(object)]
pub struct JsExecutionSummary {
    pub execution_order: Option<u32>,
    pub success: Option<bool>,
    pub start_time: Option<f64>,
    pub end_time: Option<f64>,
}

/// A live cell: its data, and where it lives.
#[napi(object)]
pub struct JsCell {
    pub data: JsCellData,
    /// The fragment of the cell document's URI.
    pub fragment: String,
}

/// A live notebook document.
#[napi(object)]
pub struct JsSnapshot {
    pub uri: String,
    pub version: i64,
    pub is_untitled: bool,
    pub is_dirty: bool,
    pub metadata: Value,
    pub cells: Vec<JsCell>,
    /// The extension's controller is the one selected for this notebook.
    pub can_write_outputs: bool,
}

/// A cell's content (`NotebookCellData`), of a new cell or a live one. `kind` is
/// `NotebookCellKind`: 1 markup, 2 code.
#[napi(object)]
pub struct JsCellData {
    pub kind: u32,
    pub language_id: String,
    pub source: String,
    pub metadata: Value,
    pub outputs: Vec<JsOutput>,
    pub execution_summary: Option<JsExecutionSummary>,
}

/// Replace a range of one cell's text; positions are VS Code's (UTF-16 characters).
#[napi(object)]
pub struct JsTextEdit {
    pub cell: u32,
    pub start_line: u32,
    pub start_character: u32,
    pub end_line: u32,
    pub end_character: u32,
    pub text: String,
}

/// Set one cell's VS Code metadata.
#[napi(object)]
pub struct JsMetadataEdit {
    pub cell: u32,
    pub metadata: Value,
}

/// Write one cell's outputs through the extension's controller.
#[napi(object)]
pub struct JsOutputEdit {
    pub cell: u32,
    pub outputs: Vec<JsOutput>,
    pub execution_summary: Option<JsExecutionSummary>,
}

/// `NotebookEdit.replaceCells(start..end, cells)`.
#[napi(object)]
pub struct JsReplacement {
    pub start: u32,
    pub end: u32,
    pub cells: Vec<JsCellData>,
}

/// One change of a live document. Every cell index refers to the document at `baseVersion`.
#[napi(object)]
pub struct ApplyRequest {
    pub uri: String,
    pub base_version: i64,
    pub text_edits: Vec<JsTextEdit>,
    pub metadata_edits: Vec<JsMetadataEdit>,
    pub output_edits: Vec<JsOutputEdit>,
    pub replacements: Vec<JsReplacement>,
    pub notebook_metadata: Option<Value>,
}

/// A notebook to create: `ipynb` for a workspace file, `metadata` and `cells` for an untitled
/// document.
#[napi(object)]
pub struct CreateRequest {
    pub uri: String,
    pub ipynb: String,
    pub metadata: Value,
    pub cells: Vec<JsCellData>,
}

/// A failure of a document operation. `code`: `not_found`, `stale`, `already_exists` or
/// `failed`; `message` in the shell's own words.
#[napi(object)]
pub struct ShellFailure {
    pub code: String,
    pub message: String,
}

/// The answer of a document operation.
#[napi(object)]
pub struct ShellReply {
    pub error: Option<ShellFailure>,
    /// `list`: the URIs of the open Jupyter notebooks.
    pub uris: Option<Vec<String>>,
    /// `read` (absent when not open), `open`, `apply`, `create`.
    pub snapshot: Option<JsSnapshot>,
    /// `open`: the notebook was open already (revealed, not reloaded).
    pub already_open: Option<bool>,
}

/// A request to the Jupyter extension. `op`: `backend`, `kernel`, `controllers`, `reveal`,
/// `select` (`id`, `extension`), `configure`, `command` (`command`) or `execute` (`index`).
#[napi(object)]
pub struct JupyterCall {
    pub op: String,
    pub uri: String,
    pub index: Option<u32>,
    pub id: Option<String>,
    pub extension: Option<String>,
    pub command: Option<String>,
    /// `executeCode`: the code to run.
    pub code: Option<String>,
}

/// The active kernel the Jupyter extension reports.
#[napi(object)]
pub struct JsJupyterKernel {
    pub label: Option<String>,
    pub language: Option<String>,
    pub status: Option<String>,
    /// The shell's number for the kernel object (a new number is another kernel).
    pub identity: Option<u32>,
    /// Restarts, deaths and terminations the shell saw of this kernel object.
    pub lifecycle: Option<u32>,
}

/// A notebook controller VS Code offers.
#[napi(object)]
pub struct JsController {
    pub id: String,
    pub label: String,
    pub description: Option<String>,
    pub detail: Option<String>,
}

/// What VS Code answered a [`JupyterCall`]; only the fields of its `op` are set.
#[napi(object)]
pub struct JupyterAnswer {
    pub installed: Option<bool>,
    pub own_controller_selected: Option<bool>,
    pub kernel: Option<JsJupyterKernel>,
    /// `unavailable`, `activation-failed`, `no-lookup`, `lookup-failed` or `no-kernel`.
    pub lookup_failure: Option<String>,
    pub controllers: Option<Vec<JsController>>,
    pub accepted: Option<bool>,
    pub detail: Option<String>,
    /// A rejected command's error class name (`error.name`), never its message.
    pub error_name: Option<String>,
    /// `executeCode`: every output it yielded, in order.
    pub outputs: Option<Vec<JsOutput>>,
}

/// The result of a tool call.
#[napi(object)]
pub struct ToolReply {
    pub is_error: bool,
    /// The result (or error) JSON.
    pub text: String,
}

// ---------------------------------------------------------------------------------------------
// Exports.

/// A running MCP server of one VS Code window.
#[napi]
pub struct JupyterMcpServer {
    url: Option<String>,
    native_marker: String,
    dispatch: VsCodeDispatch,
    running: Mutex<Option<RunningServer>>,
}

#[napi]
impl JupyterMcpServer {
    /// `http://127.0.0.1:PORT/mcp` (absent for stdio).
    #[napi(getter)]
    pub fn url(&self) -> Option<String> {
        self.url.clone()
    }

    /// The marker this activation shows in the window's status bar (its accessibility label),
    /// which binds the native driver to this window: `jmcp-` and 32 hex digits.
    #[napi(getter)]
    pub fn native_marker(&self) -> String {
        self.native_marker.clone()
    }

    /// Stops serving and stops the window's kernels.
    #[napi]
    pub async fn stop(&self) {
        let running = self.running.lock().expect("server lock").take();
        if let Some(running) = running {
            running.stop().await;
        }
    }

    /// Runs cells (indices of the live document) as a tracked run, for the extension's notebook
    /// controller, and resolves when the run ends.
    #[napi]
    pub async fn run_cells(&self, uri: String, cells: Vec<u32>) -> ToolReply {
        tool_reply(self.dispatch.run_cells_for_controller(&uri, &cells).await)
    }

    /// Interrupts the notebook's kernel, for the extension's notebook controller.
    #[napi]
    pub async fn interrupt(&self, uri: String) -> ToolReply {
        tool_reply(self.dispatch.interrupt_for_controller(&uri).await)
    }

    /// A notebook changed or closed (`onDidChangeNotebookDocument`, `onDidCloseNotebookDocument`):
    /// runs observed through the Jupyter extension look again.
    #[napi]
    pub fn notebook_changed(&self, uri: String) {
        let _ = uri;
        self.dispatch.notebook_changed();
    }

    /// Calls a tool directly (the extension's commands use this).
    #[napi]
    pub async fn call_tool(&self, name: String, arguments: Option<Value>) -> ToolReply {
        let arguments = match arguments {
            Some(Value::Object(arguments)) => Some(arguments),
            _ => None,
        };
        tool_reply(
            self.dispatch
                .tools()
                .call(&name, arguments, host_core_context())
                .await,
        )
    }
}

/// Starts the MCP server of a window. The functions are the window's document operations; each
/// returns a Promise of a [`ShellReply`]. Rejects when the port cannot be bound.
#[napi]
#[allow(
    clippy::too_many_arguments,
    reason = "one JavaScript function per shell operation, as napi passes them"
)]
pub async fn start_server(
    options: ServerOptions,
    list: JsFunction<(), ShellReply>,
    read: JsFunction<String, ShellReply>,
    open: JsFunction<String, ShellReply>,
    apply: JsFunction<ApplyRequest, ShellReply>,
    create: JsFunction<CreateRequest, ShellReply>,
    save: JsFunction<String, ShellReply>,
    jupyter: JsFunction<JupyterCall, JupyterAnswer>,
    colab: JsFunction<Value, Value>,
) -> Result<JupyterMcpServer> {
    let shell = JsShell {
        list,
        read,
        open,
        apply,
        create,
        save,
        jupyter,
        colab,
    };
    start(options, Arc::new(shell)).await
}

async fn start(options: ServerOptions, shell: Arc<dyn Shell>) -> Result<JupyterMcpServer> {
    let folders: Vec<std::path::PathBuf> = options
        .workspace_folders
        .iter()
        .map(std::path::PathBuf::from)
        .collect();
    let kernels = options.kernels.unwrap_or(true).then(|| {
        let ttl = options.kernel_idle_ttl_seconds.unwrap_or(3600);
        host_vscode::local_kernels(
            folders.first().cloned(),
            (ttl > 0).then(|| std::time::Duration::from_secs(u64::from(ttl))),
        )
    });
    let native_marker = format!("jmcp-{}", host_vscode::random_uuid().replace('-', ""));
    let colab = options
        .colab_installed
        .unwrap_or(false)
        .then(|| host_vscode::ColabConfig {
            native_debug_port: options
                .native_debug_port
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0),
            marker: native_marker.clone(),
        });
    let host = VsCodeHost::new(
        shell,
        HostConfig {
            window_id: window_id(),
            window_label: options.window_label,
            workspace_folders: folders,
            colab,
            save_before_execute: options.save_before_execute,
        },
        kernels,
    );
    let dispatch = VsCodeDispatch::new(host, host_vscode::services_from_env());
    let transport = match options.transport.as_str() {
        "stdio" => Transport::Stdio,
        _ => Transport::Http {
            port: u16::try_from(options.port).map_err(|_| {
                napi::Error::new(Status::InvalidArg, "jupyterMcp.port must be 0..65535")
            })?,
        },
    };
    let running = RunningServer::start(dispatch.clone(), transport)
        .await
        .map_err(|failure| {
            napi::Error::new(
                Status::GenericFailure,
                format!(
                    "cannot serve MCP on 127.0.0.1:{}: {failure}; pick another jupyterMcp.port (0 for any free one)",
                    options.port
                ),
            )
        })?;
    Ok(JupyterMcpServer {
        url: running.url().map(str::to_owned),
        native_marker,
        dispatch,
        running: Mutex::new(Some(running)),
    })
}

/// A fresh id for this activation of the window, as the reference makes one (a random UUID).
fn window_id() -> String {
    host_vscode::random_uuid()
}

fn host_core_context() -> host_vscode::CallContext {
    host_vscode::CallContext::default()
}

fn tool_reply(output: host_vscode::ToolOutput) -> ToolReply {
    ToolReply {
        is_error: output.is_error,
        text: output.text,
    }
}

// ---------------------------------------------------------------------------------------------
// The shell: JavaScript functions behind the `Shell` trait.

struct JsShell {
    list: JsFunction<(), ShellReply>,
    read: JsFunction<String, ShellReply>,
    open: JsFunction<String, ShellReply>,
    apply: JsFunction<ApplyRequest, ShellReply>,
    create: JsFunction<CreateRequest, ShellReply>,
    save: JsFunction<String, ShellReply>,
    jupyter: JsFunction<JupyterCall, JupyterAnswer>,
    colab: JsFunction<Value, Value>,
}

/// Calls a JavaScript document operation and awaits its Promise; its `error` becomes a
/// [`ShellError`].
async fn ask<Arg: 'static + napi::bindgen_prelude::JsValuesTupleIntoVec>(
    function: &JsFunction<Arg, ShellReply>,
    argument: Arg,
    action: &str,
) -> std::result::Result<ShellReply, ShellError> {
    let unanswered = |_| ShellError::Failed {
        reason: format!("the extension did not answer the {action} request"),
    };
    let promise = function.call_async(argument).await.map_err(unanswered)?;
    let reply = promise.await.map_err(unanswered)?;
    match reply.error {
        None => Ok(reply),
        Some(failure) => Err(shell_error(failure)),
    }
}

fn shell_error(failure: ShellFailure) -> ShellError {
    match failure.code.as_str() {
        "not_found" => ShellError::NotFound {
            uri: failure.message,
        },
        "stale" => ShellError::Stale {
            uri: failure.message,
        },
        "already_exists" => ShellError::AlreadyExists {
            uri: failure.message,
        },
        _ => ShellError::Failed {
            reason: failure.message,
        },
    }
}

fn snapshot_of(reply: ShellReply, action: &str) -> std::result::Result<Snapshot, ShellError> {
    reply
        .snapshot
        .map(Snapshot::from)
        .ok_or_else(|| ShellError::Failed {
            reason: format!("the extension answered the {action} request without the notebook"),
        })
}

impl Shell for JsShell {
    fn list(&self) -> BoxFuture<'_, std::result::Result<Vec<String>, ShellError>> {
        Box::pin(async move {
            let reply = ask(&self.list, (), "list").await?;
            Ok(reply.uris.unwrap_or_default())
        })
    }

    fn read(
        &self,
        uri: String,
    ) -> BoxFuture<'_, std::result::Result<Option<Snapshot>, ShellError>> {
        Box::pin(async move {
            let reply = ask(&self.read, uri, "read").await?;
            Ok(reply.snapshot.map(Snapshot::from))
        })
    }

    fn open(
        &self,
        uri: String,
    ) -> BoxFuture<'_, std::result::Result<(bool, Snapshot), ShellError>> {
        Box::pin(async move {
            let reply = ask(&self.open, uri, "open").await?;
            let already_open = reply.already_open.unwrap_or(false);
            Ok((already_open, snapshot_of(reply, "open")?))
        })
    }

    fn apply(
        &self,
        uri: String,
        base_version: u64,
        plan: EditPlan,
    ) -> BoxFuture<'_, std::result::Result<Snapshot, ShellError>> {
        Box::pin(async move {
            let request = apply_request(uri, base_version, plan);
            snapshot_of(ask(&self.apply, request, "edit").await?, "edit")
        })
    }

    fn create(
        &self,
        uri: String,
        notebook: NewNotebook,
    ) -> BoxFuture<'_, std::result::Result<Snapshot, ShellError>> {
        Box::pin(async move {
            let request = CreateRequest {
                uri,
                ipynb: notebook.ipynb,
                metadata: notebook.metadata,
                cells: notebook.cells.into_iter().map(JsCellData::from).collect(),
            };
            snapshot_of(ask(&self.create, request, "create").await?, "create")
        })
    }

    fn save(&self, uri: String) -> BoxFuture<'_, std::result::Result<(), ShellError>> {
        Box::pin(async move { ask(&self.save, uri, "save").await.map(|_| ()) })
    }

    fn jupyter(
        &self,
        request: JupyterRequest,
    ) -> BoxFuture<'_, std::result::Result<JupyterReply, ShellError>> {
        Box::pin(async move {
            let unanswered = |_| ShellError::Failed {
                reason: "the extension did not answer the Jupyter request".to_owned(),
            };
            let promise = self
                .jupyter
                .call_async(jupyter_call(request))
                .await
                .map_err(unanswered)?;
            let answer = promise.await.map_err(unanswered)?;
            Ok(JupyterReply {
                installed: answer.installed.unwrap_or(false),
                own_controller_selected: answer.own_controller_selected.unwrap_or(false),
                kernel: answer.kernel.map(|kernel| JupyterKernel {
                    label: kernel.label,
                    language: kernel.language,
                    status: kernel.status,
                    identity: kernel.identity.map(u64::from),
                    lifecycle: kernel.lifecycle.map(u64::from),
                }),
                lookup_failure: answer.lookup_failure,
                controllers: answer
                    .controllers
                    .unwrap_or_default()
                    .into_iter()
                    .map(|controller| Controller {
                        id: controller.id,
                        label: controller.label,
                        description: controller.description,
                        detail: controller.detail,
                    })
                    .collect(),
                accepted: answer.accepted.unwrap_or(false),
                detail: answer.detail,
                error_name: answer.error_name,
                outputs: answer
                    .outputs
                    .unwrap_or_default()
                    .into_iter()
                    .map(OutputData::from)
                    .collect(),
            })
        })
    }

    fn colab(&self, request: Value) -> BoxFuture<'_, std::result::Result<Value, ShellError>> {
        Box::pin(self.colab_call(request))
    }
}

impl JsShell {
    async fn colab_call(&self, request: Value) -> std::result::Result<Value, ShellError> {
        let unanswered = |_| ShellError::Failed {
            reason: "the extension did not answer the Colab request".to_owned(),
        };
        let promise = self.colab.call_async(request).await.map_err(unanswered)?;
        promise.await.map_err(unanswered)
    }
}

fn jupyter_call(request: JupyterRequest) -> JupyterCall {
    let call = |op: &str, uri: String| JupyterCall {
        op: op.to_owned(),
        uri,
        index: None,
        id: None,
        extension: None,
        command: None,
        code: None,
    };
    match request {
        JupyterRequest::Backend { uri } => call("backend", uri),
        JupyterRequest::Kernel { uri } => call("kernel", uri),
        JupyterRequest::Controllers { uri } => call("controllers", uri),
        JupyterRequest::Reveal { uri } => call("reveal", uri),
        JupyterRequest::Select { uri, id, extension } => JupyterCall {
            id: Some(id),
            extension: Some(extension),
            ..call("select", uri)
        },
        JupyterRequest::Configure { uri } => call("configure", uri),
        JupyterRequest::Command { uri, command } => JupyterCall {
            command: Some(command),
            ..call("command", uri)
        },
        JupyterRequest::Execute { uri, index: cell } => JupyterCall {
            index: Some(index(cell)),
            ..call("execute", uri)
        },
        JupyterRequest::ExecuteCode { uri, code } => JupyterCall {
            code: Some(code),
            ..call("executeCode", uri)
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions between the mirror structs and the host-vscode types.

fn kind_from_js(kind: u32) -> VsCellKind {
    if kind == 1 {
        VsCellKind::Markup
    } else {
        VsCellKind::Code
    }
}

fn kind_to_js(kind: VsCellKind) -> u32 {
    match kind {
        VsCellKind::Markup => 1,
        VsCellKind::Code => 2,
    }
}

impl From<JsOutput> for OutputData {
    fn from(output: JsOutput) -> OutputData {
        OutputData {
            items: output
                .items
                .into_iter()
                .map(|item| OutputItem {
                    data: BASE64.decode(item.data_base64).unwrap_or_default(),
                    mime: item.mime,
                })
                .collect(),
            metadata: output.metadata,
        }
    }
}

impl From<OutputData> for JsOutput {
    fn from(output: OutputData) -> JsOutput {
        JsOutput {
            items: output
                .items
                .into_iter()
                .map(|item| JsOutputItem {
                    data_base64: BASE64.encode(&item.data),
                    mime: item.mime,
                })
                .collect(),
            metadata: output.metadata,
        }
    }
}

impl From<JsExecutionSummary> for ExecutionSummary {
    fn from(summary: JsExecutionSummary) -> ExecutionSummary {
        ExecutionSummary {
            execution_order: summary.execution_order,
            success: summary.success,
            timing: summary.start_time.zip(summary.end_time),
        }
    }
}

impl From<ExecutionSummary> for JsExecutionSummary {
    fn from(summary: ExecutionSummary) -> JsExecutionSummary {
        JsExecutionSummary {
            execution_order: summary.execution_order,
            success: summary.success,
            start_time: summary.timing.map(|(start, _)| start),
            end_time: summary.timing.map(|(_, end)| end),
        }
    }
}

impl From<JsSnapshot> for Snapshot {
    fn from(snapshot: JsSnapshot) -> Snapshot {
        Snapshot {
            uri: snapshot.uri,
            version: u64::try_from(snapshot.version).unwrap_or(0),
            is_untitled: snapshot.is_untitled,
            is_dirty: snapshot.is_dirty,
            metadata: snapshot.metadata,
            cells: snapshot
                .cells
                .into_iter()
                .map(|cell| CellSnapshot {
                    data: CellData::from(cell.data),
                    fragment: cell.fragment,
                })
                .collect(),
            can_write_outputs: snapshot.can_write_outputs,
        }
    }
}

impl From<JsCellData> for CellData {
    fn from(cell: JsCellData) -> CellData {
        CellData {
            kind: kind_from_js(cell.kind),
            language_id: cell.language_id,
            source: cell.source,
            metadata: cell.metadata,
            outputs: cell.outputs.into_iter().map(OutputData::from).collect(),
            execution_summary: cell.execution_summary.map(ExecutionSummary::from),
        }
    }
}

impl From<CellData> for JsCellData {
    fn from(cell: CellData) -> JsCellData {
        JsCellData {
            kind: kind_to_js(cell.kind),
            language_id: cell.language_id,
            source: cell.source,
            metadata: cell.metadata,
            outputs: cell.outputs.into_iter().map(JsOutput::from).collect(),
            execution_summary: cell.execution_summary.map(JsExecutionSummary::from),
        }
    }
}

fn apply_request(uri: String, base_version: u64, plan: EditPlan) -> ApplyRequest {
    ApplyRequest {
        uri,
        base_version: i64::try_from(base_version).unwrap_or(i64::MAX),
        text_edits: plan
            .text_edits
            .into_iter()
            .map(|edit| {
                let (start_line, start_character) = utf16_position(&edit.old_source, edit.start);
                let (end_line, end_character) = utf16_position(&edit.old_source, edit.end);
                JsTextEdit {
                    cell: index(edit.cell),
                    start_line,
                    start_character,
                    end_line,
                    end_character,
                    text: edit.text,
                }
            })
            .collect(),
        metadata_edits: plan
            .metadata_edits
            .into_iter()
            .map(|(cell, metadata)| JsMetadataEdit {
                cell: index(cell),
                metadata,
            })
            .collect(),
        output_edits: plan
            .output_edits
            .into_iter()
            .map(|edit| JsOutputEdit {
                cell: index(edit.cell),
                outputs: edit.outputs.into_iter().map(JsOutput::from).collect(),
                execution_summary: edit.execution_summary.map(JsExecutionSummary::from),
            })
            .collect(),
        replacements: plan
            .replacements
            .into_iter()
            .map(|replacement| JsReplacement {
                start: index(replacement.start),
                end: index(replacement.end),
                cells: replacement
                    .cells
                    .into_iter()
                    .map(JsCellData::from)
                    .collect(),
            })
            .collect(),
        notebook_metadata: plan.notebook_metadata,
    }
}

fn index(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

/// VS Code's position of a byte offset: the line (after `\n`), and the UTF-16 code units
/// before the offset on that line.
fn utf16_position(text: &str, byte_offset: usize) -> (u32, u32) {
    let before = &text[..byte_offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
    let character: usize = before[line_start..].chars().map(char::len_utf16).sum();
    (index(line), index(character))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_utf16_code_units_per_line() {
        let text = "a🐍b\nnaïve 🐢!";
        assert_eq!(utf16_position(text, 0), (0, 0));
        assert_eq!(utf16_position(text, "a🐍".len()), (0, 3));
        assert_eq!(utf16_position(text, "a🐍b\n".len()), (1, 0));
        assert_eq!(utf16_position(text, "a🐍b\nnaïve 🐢".len()), (1, 8));
        assert_eq!(utf16_position("x\r\ny", 3), (1, 0));
    }
}
