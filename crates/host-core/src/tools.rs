//! Every tool, written once against [`NotebookHost`]. A call comes in as a tool name and JSON
//! arguments and leaves as a [`ToolOutput`]: structured JSON (with the same JSON as text), images,
//! and an error flag. Failures are data, never panics or protocol errors.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use mcp_contract::catalog::{self, Capability, RETIRED_TOOLS, ToolName, ToolSpec};
use mcp_contract::params::*;
use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError, parse_arguments};
use notebook_model::edit::{EditOp, EditPolicy};
use notebook_model::export::{ExportFormat, ExportOptions};
use notebook_model::search::{MatchPlace, SearchQuery};
use notebook_model::{
    Cell, CellKind, CellRef, CellRefError, EditError, Notebook, Resolver, identity, view,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::files::HostFiles;
use crate::host::{Commit, Document, HostError, NotebookHost, NotebookLocation, OpenStatus};
use crate::kernel::{KernelCapabilities, SharedKernels};
use crate::refs::{self, RefKind};
use crate::{budget, render};

pub use mcp_contract::dispatch::{
    BoxFuture, CallContext, ImageContent, ProgressSink, ToolDispatch, ToolOutput,
};

pub(crate) fn error(code: ErrorCode, message: impl Into<String>) -> ToolError {
    ToolError::new(code, message)
}

impl From<HostError> for ToolError {
    fn from(host_error: HostError) -> ToolError {
        error(host_error.code(), host_error.to_string())
    }
}

pub(crate) fn cell_ref_error(reference_error: CellRefError) -> ToolError {
    error(
        crate::codes::cell_ref(&reference_error),
        reference_error.to_string(),
    )
}

/// A cell as an error's `details` show it now, so the caller can retry without another read.
pub(crate) fn current_cell_json(current: &notebook_model::CurrentCell) -> Value {
    json!({
        "index": current.index,
        "cell_id": current.id,
        "name": current.name,
        "rev": current.rev,
        "source": current.source,
    })
}

fn edit_error(edit: EditError) -> ToolError {
    let details = edit.current.as_ref().map(|current| {
        json!({
            "editIndex": edit.op_index,
            "current": current_cell_json(current),
        })
    });
    ToolError {
        code: crate::codes::edit(&edit.kind),
        message: edit.to_string(),
        details: details.or_else(|| Some(json!({ "editIndex": edit.op_index }))),
    }
}

pub(crate) fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("contract types serialise")
}

pub(crate) type ToolResult = Result<(Value, Vec<ImageContent>), ToolError>;

/// The tools of one host. Cheap to clone: clones share all state (the runner of a background
/// execution holds one).
pub struct Tools<H: NotebookHost> {
    inner: Arc<Inner<H>>,
}

impl<H: NotebookHost> Clone for Tools<H> {
    fn clone(&self) -> Self {
        Tools {
            inner: self.inner.clone(),
        }
    }
}

impl<H: NotebookHost> std::ops::Deref for Tools<H> {
    type Target = Inner<H>;
    fn deref(&self) -> &Inner<H> {
        &self.inner
    }
}

/// The state shared by every clone of [`Tools`].
pub struct Inner<H: NotebookHost> {
    pub(crate) host: Arc<H>,
    /// The host's kernels, taken once at the start.
    pub(crate) kernels: Option<SharedKernels>,
    /// The host's files for transfers, taken once at the start.
    pub(crate) files: Option<Arc<dyn HostFiles>>,
    /// The host's Colab runtime, taken once at the start.
    pub(crate) colab: Option<crate::colab::SharedColab>,
    /// What the tools use besides the host, given at construction.
    pub(crate) services: Services,
    /// The Colab setups of this host's notebooks.
    pub(crate) setups: crate::setups::Setups,
    specs: Vec<ToolSpec>,
    input_schemas: HashMap<ToolName, Map<String, Value>>,
    known_refs: Mutex<HashMap<String, NotebookLocation>>,
    notebook_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The document version each notebook had when a client last saw it (read or changed it),
    /// with the fingerprint of its cells ([`cells_fingerprint`]).
    seen_versions: Mutex<HashMap<String, Seen>>,
    /// Per-notebook dataflow and run records.
    pub(crate) sessions: Mutex<HashMap<String, crate::session::NotebookSession>>,
    /// Tracked runs of this window.
    pub(crate) registry: Mutex<execution_tracker::Registry>,
    /// Bumped when a run has ended with nothing left to carry out (its outputs written), and
    /// when kernel requests change runs from outside their runners; waiters re-check their run.
    pub(crate) runs_settled: tokio::sync::watch::Sender<u64>,
    /// Per-notebook controls of the running background run (interrupt requests).
    pub(crate) run_controls: Mutex<HashMap<String, Arc<crate::execution::RunControl>>>,
    /// Runs whose latest changes are still being carried out, with how many.
    pub(crate) in_flight: Mutex<HashMap<String, usize>>,
    /// `run_cells` idempotency keys: (notebook URI, key) → the run they started.
    pub(crate) idempotency: Mutex<HashMap<(String, String), String>>,
    /// Names and revs of the latest document version seen per notebook.
    derived: Mutex<HashMap<String, Arc<Derived>>>,
    /// File transfers in progress, and each kernel's transfer budget and quarantine.
    pub(crate) transfers: crate::transfer_tools::TransferState,
    /// Epochs derived from stamps, for kernels whose host reports none.
    pub(crate) epochs: crate::epoch::DerivedEpochs,
    /// The kernels proven to run on a Colab runtime, which decide a transfer's route.
    pub(crate) colab_kernels: crate::colab::ProvenKernels,
    /// The changes clients made, per notebook, for `undo_last`.
    pub(crate) undo_history: crate::undo::UndoHistory,
}

/// A document version clients have seen.
#[derive(Debug, Clone, Copy)]
struct Seen {
    version: u64,
    /// [`cells_fingerprint`] of that version.
    cells: u64,
}

/// A hash of what edits are planned on: each cell's id, kind and source, in order.
fn cells_fingerprint(notebook: &Notebook) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for cell in notebook.cells() {
        cell.id().hash(&mut hasher);
        cell.kind().as_str().hash(&mut hasher);
        cell.source().hash(&mut hasher);
    }
    hasher.finish()
}

/// What is derived from one version of a document and reused until it changes.
#[derive(Debug)]
pub(crate) struct Derived {
    version: u64,
    pub names: Vec<String>,
    pub revs: Vec<String>,
    /// What the saved file says of each cell's last run (an outline needs it for every cell).
    pub states: Vec<view::ExecutionState>,
}

impl<H: NotebookHost> std::fmt::Debug for Tools<H> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Tools")
            .field("window", &self.host.window())
            .finish_non_exhaustive()
    }
}

/// What the tools use besides the host: services that do not depend on where the notebooks
/// live, built once by the binary (from its environment and settings) and given to the tools of
/// whichever host it serves. A host cannot forget one, because no host hands them out.
#[derive(Clone, Default)]
pub struct Services {
    /// A language model for `summarize_cells`; without one, summaries are deterministic and
    /// marked with `*`.
    pub summarizer: Option<crate::summary::SharedSummarizer>,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Services")
            .field(
                "summarizer",
                &self
                    .summarizer
                    .as_ref()
                    .map(|summarizer| summarizer.model()),
            )
            .finish()
    }
}

impl<H: NotebookHost> Tools<H> {
    /// The tools for `host` without services (summaries are then deterministic); see
    /// [`Tools::with_services`].
    pub fn new(host: Arc<H>) -> Tools<H> {
        Tools::with_services(host, Services::default())
    }

    /// The tools for `host` using `services`, listing those its kernels and files can serve.
    /// Takes the host's kernels and files once, here.
    pub fn with_services(host: Arc<H>, services: Services) -> Tools<H> {
        let kernels = host.kernels();
        let files = host.files();
        let colab = host.colab();
        let environment = host.colab_environment().is_some();
        let can = kernels
            .as_ref()
            .map_or(KernelCapabilities::NONE, |kernels| kernels.capabilities());
        let listed = |capability: Capability| match capability {
            Capability::Documents => true,
            Capability::Execute => can.execute,
            Capability::Interrupt => can.interrupt,
            Capability::Restart => can.restart,
            Capability::ChooseKernel => can.choose,
            Capability::Transfer => can.transfer && files.is_some(),
            Capability::Colab => colab.is_some() && can.execute,
            Capability::ColabMount => {
                can.execute && colab.as_ref().is_some_and(|colab| colab.mounts_servers())
            }
            Capability::ColabEnvironment => environment,
        };
        let specs: Vec<ToolSpec> = catalog::all_tools()
            .into_iter()
            .filter(|spec| listed(spec.capability))
            .collect();
        let input_schemas = specs
            .iter()
            .map(|spec| (spec.tool, (spec.input_schema)()))
            .collect();
        Tools {
            inner: Arc::new(Inner {
                host,
                kernels,
                files,
                setups: crate::setups::Setups::new(
                    colab
                        .as_ref()
                        .map_or_else(Default::default, |colab| colab.setup_config()),
                ),
                colab,
                services,
                specs,
                input_schemas,
                known_refs: Mutex::new(HashMap::new()),
                notebook_locks: Mutex::new(HashMap::new()),
                seen_versions: Mutex::new(HashMap::new()),
                sessions: Mutex::new(HashMap::new()),
                registry: Mutex::new(crate::execution::new_registry()),
                runs_settled: tokio::sync::watch::channel(0).0,
                run_controls: Mutex::new(HashMap::new()),
                in_flight: Mutex::new(HashMap::new()),
                idempotency: Mutex::new(HashMap::new()),
                derived: Mutex::new(HashMap::new()),
                transfers: Default::default(),
                epochs: Default::default(),
                undo_history: Default::default(),
                colab_kernels: Default::default(),
            }),
        }
    }

    /// The host the tools act on.
    pub fn host(&self) -> &Arc<H> {
        &self.host
    }

    /// The tools this host lists.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Runs one tool call.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        context: CallContext,
    ) -> ToolOutput {
        let listed =
            ToolName::parse(name).and_then(|tool| Some((tool, self.input_schemas.get(&tool)?)));
        let Some((tool, schema)) = listed else {
            let message = match RETIRED_TOOLS.iter().find(|(retired, _)| *retired == name) {
                Some((_, replacement)) => {
                    format!(
                        "the tool `{name}` was removed; use {replacement} instead (refresh your tool list)"
                    )
                }
                None => {
                    format!("no tool is named `{name}`; call tools/list for the available tools")
                }
            };
            return ToolOutput::failure(error(ErrorCode::UnknownTool, message));
        };
        macro_rules! with {
            ($method:ident) => {
                match parse_arguments(arguments, schema) {
                    Ok(params) => self.$method(params).await,
                    Err(error) => Err(error),
                }
            };
            ($method:ident, context) => {
                match parse_arguments(arguments, schema) {
                    Ok(params) => self.$method(params, &context).await,
                    Err(error) => Err(error),
                }
            };
        }
        if let Err(blocked) = self.setup_guard(tool, arguments.as_ref()).await {
            return ToolOutput::failure(blocked);
        }
        let result = match tool {
            ToolName::ListNotebooks => {
                match parse_arguments::<ListNotebooksParams>(arguments, schema) {
                    Ok(_) => self.list_notebooks().await,
                    Err(error) => Err(error),
                }
            }
            ToolName::OpenNotebooks => with!(open_notebooks),
            ToolName::CreateNotebook => with!(create_notebook),
            ToolName::ReadNotebook => with!(read_notebook),
            ToolName::SearchCells => with!(search_cells),
            ToolName::EditCells => with!(edit_cells, context),
            ToolName::MoveCells => with!(move_cells),
            ToolName::ClearCellOutputs => with!(clear_cell_outputs),
            ToolName::SaveNotebooks => with!(save_notebooks),
            ToolName::ExportNotebook => with!(export_notebook),
            ToolName::UndoLast => with!(undo_last),
            ToolName::GetKernelInfo => with!(kernel_info),
            ToolName::ListKernels => with!(list_kernels),
            ToolName::SelectKernel => with!(select_kernel),
            ToolName::ConfigureKernel => with!(configure_kernel, context),
            ToolName::RestartKernels => with!(restart_kernels),
            ToolName::InterruptKernels => with!(interrupt_kernels),
            ToolName::RunCells => with!(run_cells, context),
            ToolName::GetExecution => with!(get_execution, context),
            ToolName::SummarizeCells => with!(summarize_cells),
            ToolName::InspectVariable => with!(inspect_variable),
            ToolName::UploadFile => with!(upload_file, context),
            ToolName::DownloadFile => with!(download_file, context),
            ToolName::CheckColab => with!(check_colab),
            ToolName::GetKernelSetup => with!(get_kernel_setup),
            ToolName::ListSetupKernels => with!(list_setup_kernels),
            ToolName::SelectSetupKernel => with!(select_setup_kernel),
            ToolName::CancelKernelSetup => with!(cancel_kernel_setup),
            ToolName::MountColabServer => with!(mount_colab_server),
            ToolName::InspectColabEnvironmentPreflight => with!(colab_preflight),
            ToolName::ListColabTerminals => with!(list_colab_terminals),
            ToolName::CloseColabTerminals => with!(close_colab_terminals),
            ToolName::PrepareColabEnvironment => with!(prepare_colab_environment),
            ToolName::GetColabEnvironmentPreparation => with!(get_colab_environment_preparation),
        };
        let output = match result {
            Ok((value, images)) => {
                let links = self.reply_links(tool, &value).await;
                let mut output = ToolOutput::success(value, images);
                output.links = links;
                output
            }
            Err(failure) => ToolOutput::failure(failure),
        };
        budget::cap_reply(tool, output)
    }

    /// Resource links to the outputs a successful reply condensed or left out: in a read with
    /// outputs, the long outputs of cells whose text was cut and the images not returned; in a
    /// run receipt with outputs, every long output and image not returned of its settled cells.
    async fn reply_links(&self, tool: ToolName, value: &Value) -> Vec<mcp_contract::ResourceEntry> {
        let (uri, cells): (Option<&str>, Vec<(String, bool)>) = match tool {
            ToolName::ReadNotebook => (
                value["notebook"].as_str(),
                value["cells"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|cell| cell.get("outputs").is_some())
                    .filter_map(|cell| {
                        let cut = cell["outputsTruncated"].as_bool().unwrap_or(false);
                        Some((cell["cell_id"].as_str()?.to_owned(), cut))
                    })
                    .collect(),
            ),
            _ if tool.replies_with_receipt() => {
                let receipt = if tool == ToolName::EditCells {
                    &value["execution"]
                } else {
                    value
                };
                (
                    receipt["notebookRef"].as_str(),
                    receipt["cells"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|cell| cell.get("output").is_some())
                        .filter_map(|cell| Some((cell["cellId"].as_str()?.to_owned(), true)))
                        .collect(),
                )
            }
            _ => return Vec::new(),
        };
        let Some(uri) = uri.filter(|_| !cells.is_empty()) else {
            return Vec::new();
        };
        let Ok(location) = self.host.locate(uri).await else {
            return Vec::new();
        };
        let Ok(document) = self.host.load(&location).await else {
            return Vec::new();
        };
        let notebook = &document.notebook;
        // (cell, output, thumbnail) of each returned image: a thumbnail is linked to the whole.
        let returned: Vec<(usize, usize, bool)> = value["images"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|image| {
                let output = image["outputIndex"].as_u64()? as usize;
                let cell = match image.get("cellIndex") {
                    Some(index) => index.as_u64()? as usize,
                    None => notebook.position_of_id(image["cellId"].as_str()?)?,
                };
                Some((cell, output, image["thumbnail"] == Value::Bool(true)))
            })
            .collect();
        let mut links = Vec::new();
        for (cell_id, cut) in cells {
            let Some(index) = notebook.position_of_id(&cell_id) else {
                continue;
            };
            let of_cell = |thumbnail: bool| -> HashSet<usize> {
                returned
                    .iter()
                    .filter(|(cell, _, is_thumbnail)| *cell == index && *is_thumbnail == thumbnail)
                    .map(|(_, output, _)| *output)
                    .collect()
            };
            links.extend(crate::resources::output_links(
                &location.uri,
                notebook,
                &cell_id,
                cut,
                &of_cell(false),
                &of_cell(true),
            ));
        }
        links
    }

    fn remember(&self, location: &NotebookLocation) -> String {
        let notebook_ref = refs::notebook_ref(&self.host.window().id, &location.uri);
        self.known_refs
            .lock()
            .expect("ref table lock")
            .insert(notebook_ref.clone(), location.clone());
        notebook_ref
    }

    pub(crate) fn lock_for(&self, uri: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.notebook_locks
            .lock()
            .expect("lock table lock")
            .entry(uri.to_owned())
            .or_default()
            .clone()
    }

    /// Resolves a `notebookRef`, URI or path to a location.
    pub async fn resolve(&self, reference: &str) -> Result<NotebookLocation, ToolError> {
        match refs::classify(reference) {
            RefKind::Malformed => Err(error(
                ErrorCode::NotebookRefMalformed,
                format!(
                    "Malformed notebook reference `{reference}`: a notebookRef is nb_ followed by \
                     24 lower-case hex characters, as list_notebooks returns it"
                ),
            )),
            RefKind::Handle(handle) => {
                if let Some(location) = self.known_refs.lock().expect("ref table lock").get(handle)
                {
                    return Ok(location.clone());
                }
                let listing = self.host.list().await?;
                for location in &listing.notebooks {
                    self.remember(location);
                }
                self.known_refs
                    .lock()
                    .expect("ref table lock")
                    .get(handle)
                    .cloned()
                    .ok_or_else(|| {
                        error(
                            ErrorCode::NotebookRefUnknown,
                            format!(
                                "the notebookRef `{handle}` is unknown, stale, or collides with no \
                                 listed notebook (refs change when a server restarts); call \
                                 list_notebooks for current refs"
                            ),
                        )
                    })
            }
            RefKind::Location(text) => {
                if text.is_empty() {
                    return Err(error(ErrorCode::InvalidArgument, "notebookRef is required"));
                }
                let location = self.host.locate(text).await?;
                self.remember(&location);
                Ok(location)
            }
        }
    }

    pub(crate) async fn load(
        &self,
        reference: &str,
    ) -> Result<(NotebookLocation, Arc<Document>), ToolError> {
        let location = self.resolve(reference).await?;
        let document = self.host.load(&location).await?;
        self.saw(&document);
        Ok((location, document))
    }

    /// Names and revs of a document version (computed once per version).
    pub(crate) fn derived(&self, document: &Document) -> Arc<Derived> {
        if let Some(derived) = self
            .derived
            .lock()
            .expect("derived lock")
            .get(&document.location.uri)
            .filter(|derived| derived.version == document.version)
        {
            return derived.clone();
        }
        let derived = Arc::new(Derived {
            version: document.version,
            names: identity::effective_names(&document.notebook),
            revs: document
                .notebook
                .cells()
                .iter()
                .map(|cell| cell.rev())
                .collect(),
            states: document
                .notebook
                .cells()
                .iter()
                .map(|cell| view::execution_state(cell))
                .collect(),
        });
        self.derived
            .lock()
            .expect("derived lock")
            .insert(document.location.uri.clone(), derived.clone());
        derived
    }

    /// The version clients last saw of a notebook.
    pub(crate) fn seen_version(&self, uri: &str) -> Option<u64> {
        self.seen_versions
            .lock()
            .expect("seen versions lock")
            .get(uri)
            .map(|seen| seen.version)
    }

    /// Records that clients have seen this version of the document. Versions only grow: a read
    /// that loaded an older version and finishes after a concurrent change must not move the
    /// mark back, or the next change would be refused as if the file had changed on disk.
    pub(crate) fn saw(&self, document: &Document) {
        let mut seen = self.seen_versions.lock().expect("seen versions lock");
        let known = seen.get(&document.location.uri);
        if known.is_some_and(|known| known.version >= document.version) {
            return;
        }
        seen.insert(
            document.location.uri.clone(),
            Seen {
                version: document.version,
                cells: cells_fingerprint(&document.notebook),
            },
        );
    }

    /// Fails when someone else changed the document's cells (their ids, order, kinds or
    /// sources; on disk, in the editor) since clients last saw it: the new version is what they
    /// see from now on, and they must read it before changing it. Outputs and metadata others
    /// wrote meanwhile (an editor's kernel writing a run's outputs) change nothing the client's
    /// edits are planned on, and the change applies to the document as it is now, so they are
    /// kept.
    fn check_unchanged_since_seen(&self, document: &Document) -> Result<(), ToolError> {
        let now = Seen {
            version: document.version,
            cells: cells_fingerprint(&document.notebook),
        };
        let previous = self
            .seen_versions
            .lock()
            .expect("seen versions lock")
            .insert(document.location.uri.clone(), now);
        match (previous, &document.location.path) {
            (Some(previous), path)
                if previous.version != document.version && previous.cells != now.cells =>
            {
                Err(HostError::ChangedOnDisk {
                    path: path
                        .clone()
                        .unwrap_or_else(|| document.location.uri.clone()),
                }
                .into())
            }
            _ => Ok(()),
        }
    }

    fn entry(&self, location: &NotebookLocation) -> NotebookEntry {
        NotebookEntry {
            notebook_ref: self.remember(location),
            uri: location.uri.clone(),
            path: location.path.clone(),
        }
    }

    async fn list_notebooks(&self) -> ToolResult {
        let window = self.host.window();
        let listing = self.host.list().await?;
        let notebooks = listing
            .notebooks
            .iter()
            .map(|location| self.entry(location))
            .collect();
        let unreadable = listing
            .unreadable
            .iter()
            .map(|(location, problem)| UnreadableNotebook {
                uri: location.uri.clone(),
                problem: problem.clone(),
            })
            .collect();
        let result = ListNotebooksResult {
            windows: vec![WindowEntry {
                window_id: window.id,
                window_label: window.label,
                status: "available".to_owned(),
                notebooks,
                unreadable,
            }],
        };
        Ok((to_value(&result), Vec::new()))
    }

    pub(crate) fn check_window(&self, window_id: Option<&String>) -> Result<(), ToolError> {
        match window_id {
            Some(id) if *id != self.host.window().id => Err(HostError::WindowNotConnected {
                window_id: id.clone(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    async fn open_notebooks(&self, params: OpenNotebooksParams) -> ToolResult {
        self.check_window(params.window_id.as_ref())?;
        if params.uris.is_empty() {
            return Err(error(
                ErrorCode::InvalidArgument,
                "uris must list at least one notebook",
            ));
        }
        let mut notebooks = Vec::with_capacity(params.uris.len());
        for uri in &params.uris {
            let location = self.resolve(uri).await?;
            let (status, document) = self.host.open(&location).await?;
            notebooks.push(OpenedNotebook {
                notebook_ref: self.remember(&location),
                uri: location.uri.clone(),
                status: match status {
                    OpenStatus::Opened => "opened",
                    OpenStatus::AlreadyOpen => "already-open",
                }
                .to_owned(),
                cell_count: document.notebook.len(),
            });
        }
        Ok((to_value(&OpenNotebooksResult { notebooks }), Vec::new()))
    }

    async fn create_notebook(&self, params: CreateNotebookParams) -> ToolResult {
        self.check_window(params.window_id.as_ref())?;
        let can_choose = self
            .kernels
            .as_ref()
            .is_some_and(|kernels| kernels.capabilities().choose);
        if params.kernel_id.is_some() && !can_choose {
            return Err(error(
                ErrorCode::NotSupported,
                "this host runs no kernels, so kernelId cannot be recorded; omit it",
            ));
        }
        let title = params.title.unwrap_or_else(|| "New notebook".to_owned());
        let location = match &params.path {
            Some(path) => {
                let path = if path.ends_with(".ipynb") {
                    path.clone()
                } else {
                    format!("{path}.ipynb")
                };
                self.host.locate(&path).await?
            }
            None => self.free_location_for(&title).await?,
        };
        let mut notebook = new_notebook(&title);
        let kernel = self
            .resolve_new_kernel(&location, &mut notebook, params.kernel_id.as_deref())
            .await?;
        let document = self.host.create(&location, notebook).await?;
        self.saw(&document);
        let result = CreateNotebookResult {
            notebook_ref: self.remember(&location),
            uri: location.uri.clone(),
            path: location.path.clone(),
            kernel,
            cells: {
                let derived = self.derived(&document);
                outline_cells(&document.notebook, None, &derived)
            },
        };
        Ok((to_value(&result), Vec::new()))
    }

    /// A root-level path derived from the title that no notebook uses yet.
    async fn free_location_for(&self, title: &str) -> Result<NotebookLocation, ToolError> {
        let base = match identity::slugify(title) {
            slug if slug.is_empty() => "notebook".to_owned(),
            slug => slug,
        };
        let listing = self.host.list().await?;
        let taken: HashSet<String> = listing
            .notebooks
            .iter()
            .filter_map(|location| location.path.clone())
            .collect();
        for attempt in 1..10_000 {
            let path = if attempt == 1 {
                format!("{base}.ipynb")
            } else {
                format!("{base}-{attempt}.ipynb")
            };
            if !taken.contains(&path) {
                return Ok(self.host.locate(&path).await?);
            }
        }
        Err(error(
            ErrorCode::AlreadyExists,
            "could not find a free file name for the notebook; pass a path",
        ))
    }

    pub(crate) fn resolve_cells(
        notebook: &Notebook,
        cell_ids: Option<&[CellRefParam]>,
    ) -> Result<Vec<usize>, ToolError> {
        let Some(cell_ids) = cell_ids else {
            return Ok((0..notebook.len()).collect());
        };
        let resolver = Resolver::new(notebook);
        cell_ids
            .iter()
            .map(|reference| {
                resolver
                    .resolve(&to_cell_ref(reference))
                    .map_err(cell_ref_error)
            })
            .collect()
    }

    pub(crate) async fn read_notebook(&self, params: ReadNotebookParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let notebook = &document.notebook;
        let indices = Self::resolve_cells(notebook, params.cell_ids.as_deref())?;
        let view = params.view.unwrap_or_default();
        // The kernel is looked at first, so that freshness is judged against what its host
        // reports now (a restart an editor saw since the last call).
        let kernel = self.kernel_label(&location).await;
        let flow = self.flow_view(&location, &document);
        let derived = self.derived(&document);
        let names = &derived.names;
        let selected: HashSet<usize> = indices.iter().copied().collect();
        if view == ReadView::Lint {
            let result = ReadNotebookResult {
                notebook: location.uri.clone(),
                notebook_ref: self.remember(&location),
                cell_count: notebook.len(),
                cells: Vec::new(),
                lint: Some(
                    flow.lint
                        .iter()
                        .filter(|finding| {
                            params.cell_ids.is_none() || selected.contains(&finding.cell)
                        })
                        .map(|finding| lint_finding(finding, names))
                        .collect(),
                ),
                kernel: kernel.clone(),
                images: Vec::new(),
                notice: None,
                next_cell_offset: None,
            };
            return Ok((to_value(&result), Vec::new()));
        }
        let offset = params.cell_offset.unwrap_or(0) as usize;
        if offset > indices.len() {
            return Err(error(
                ErrorCode::InvalidArgument,
                format!(
                    "cellOffset {offset} is past the {} selected cells; start from 0",
                    indices.len()
                ),
            ));
        }
        let budget = match params
            .max_response_chars
            .unwrap_or(DEFAULT_MAX_RESPONSE_CHARS)
        {
            0 => usize::MAX,
            chars => chars as usize,
        };
        let with_source = matches!(view, ReadView::Source | ReadView::All);
        let with_outputs = matches!(view, ReadView::Outputs | ReadView::All);
        let max_source_chars = params.max_source_chars.unwrap_or(12_000) as usize;
        let max_output_chars = execution_tracker::clamp_max_output_chars(
            crate::execution::requested_chars(params.max_output_chars),
        );
        let output_mode = params.output_mode.unwrap_or_default();
        let include_images = with_outputs && params.include_images.unwrap_or(true);
        let live: HashMap<String, &str> = self.live_states(&location).into_iter().collect();
        // Lint findings travel with their cell, so that a page carries those of its cells.
        let mut lint_by_cell: HashMap<usize, Vec<LintFinding>> = HashMap::new();
        if view == ReadView::Outline {
            for finding in &flow.lint {
                if params.cell_ids.is_none() || selected.contains(&finding.cell) {
                    lint_by_cell
                        .entry(finding.cell)
                        .or_default()
                        .push(lint_finding(finding, names));
                }
            }
        }
        // Images the read did not ask for (`includeImages` omitted) come as thumbnails, each
        // linked to its full-size output; `includeImages: true` returns them full size.
        let thumbnails = params.include_images.is_none();
        let mut image_budget = if thumbnails {
            render::ImageBudget::thumbnails()
        } else {
            render::ImageBudget::default()
        };
        let mut any_thumbnail = false;
        let mut images = Vec::new();
        let mut image_refs = Vec::new();
        let page = &indices[offset..];
        let mut cells = Vec::new();
        // The envelope (URIs, kernel, counts, a notice) is charged up front; each cell then
        // costs its JSON text plus its lint findings.
        let mut spent = 1_000 + 2 * location.uri.len();
        let mut lint: Vec<LintFinding> = Vec::new();
        // A finding repeated in other cells (the same code and message) is given once, with
        // the other cells in `alsoIn`: a name undefined in 500 cells is one finding, not 500.
        let mut repeated: HashMap<(String, String), usize> = HashMap::new();
        let mut returned = 0;
        // Outlines are made one cell at a time: a page of a long notebook costs what it returns.
        for &index in page {
            let Some(mut cell_view) = outline_cells(notebook, Some(&[index]), &derived).pop()
            else {
                continue;
            };
            let cell = notebook.cell(index).expect("resolved index");
            if cell.kind() == CellKind::Code {
                let state = live
                    .get(cell.id())
                    .copied()
                    .or_else(|| flow.states[index].map(dataflow::CellState::as_str));
                cell_view.state = state.map(str::to_owned);
                cell_view.inputs = Some(
                    flow.inputs[index]
                        .iter()
                        .map(|&i| names[i].clone())
                        .collect(),
                );
                cell_view.dependents = Some(
                    flow.dependents[index]
                        .iter()
                        .map(|&i| names[i].clone())
                        .collect(),
                );
            }
            // Beside the source, a fallback tldr would only restate its first line: only a
            // model's summary is kept there.
            cell_view.tldr = if with_source {
                crate::summary::cached_tldr(cell)
            } else {
                Some(crate::summary::tldr(cell))
            };
            if with_source {
                let slice = view::slice_source(
                    cell.source(),
                    index,
                    params.start_line,
                    params.end_line,
                    max_source_chars,
                )
                .map_err(|slice_error| error(ErrorCode::SourceRange, slice_error.to_string()))?;
                cell_view.source = Some(slice.text);
                cell_view.source_truncated = slice.truncated.then_some(true);
                cell_view.metadata = (!cell.metadata().is_empty()).then(|| cell.metadata().clone());
            }
            let images_before = image_budget;
            let mut cell_images = Vec::new();
            if with_outputs {
                let rendered = render::render_outputs(
                    cell.outputs(),
                    output_mode,
                    max_output_chars,
                    include_images.then_some(&mut image_budget),
                );
                cell_view.outputs = Some(rendered.text);
                cell_view.outputs_truncated = rendered.truncated.then_some(true);
                cell_images = rendered.images;
            }
            let cell_lint = lint_by_cell.remove(&index).unwrap_or_default();
            // Without a budget (`maxResponseChars: 0`) nothing is counted.
            let cost = if budget == usize::MAX {
                0
            } else {
                let lint_cost: usize = cell_lint
                    .iter()
                    .map(|finding| {
                        if repeated.contains_key(&(finding.code.clone(), finding.message.clone())) {
                            index.to_string().len() + 1
                        } else {
                            budget::json_len(finding) + 1
                        }
                    })
                    .sum();
                // What the cell's images add beside it: a ref each and, from the cell that
                // brings the first thumbnail or spends the last image, the notice saying so.
                let image_cost: usize = cell_images
                    .iter()
                    .map(|image| budget::json_len(&image_ref(index, image, thumbnails)) + 1)
                    .sum();
                let thumbnail_notice_cost = if !any_thumbnail
                    && cell_images
                        .iter()
                        .any(|image| thumbnails && image.downscaled)
                {
                    budget::json_len(&thumbnail_notice()) + 1
                } else {
                    0
                };
                let cap_notice_cost =
                    if include_images && images_before.images > 0 && image_budget.images == 0 {
                        budget::json_len(&image_cap_notice(thumbnails)) + 1
                    } else {
                        0
                    };
                budget::json_len(&cell_view)
                    + lint_cost
                    + 2
                    + image_cost
                    + thumbnail_notice_cost
                    + cap_notice_cost
            };
            // The first cell is always returned, so that every page makes progress.
            if returned > 0 && spent.saturating_add(cost) > budget {
                image_budget = images_before;
                break;
            }
            spent += cost;
            returned += 1;
            cells.push(cell_view);
            for finding in cell_lint {
                let key = (finding.code.clone(), finding.message.clone());
                match repeated.get(&key) {
                    Some(&first) => {
                        let group: &mut LintFinding = &mut lint[first];
                        // A cell's repeats of one finding come one after another.
                        if group.cell_index != index && group.also_in.last() != Some(&index) {
                            group.also_in.push(index);
                        }
                    }
                    None => {
                        repeated.insert(key, lint.len());
                        lint.push(finding);
                    }
                }
            }
            for image in cell_images {
                let image_ref = image_ref(index, &image, thumbnails);
                any_thumbnail |= image_ref.thumbnail;
                image_refs.push(image_ref);
                images.push(image.content);
            }
        }
        let left_out: Vec<usize> = page[returned..].to_vec();
        let next_cell_offset = (!left_out.is_empty()).then_some(offset + returned);
        let mut notices = Vec::new();
        if let Some(next_offset) = next_cell_offset {
            notices.push(budget::left_out_notice(
                budget,
                returned,
                indices.len(),
                &left_out,
                next_offset,
            ));
        }
        if any_thumbnail {
            notices.push(thumbnail_notice());
        }
        if include_images && image_budget.images == 0 {
            notices.push(image_cap_notice(thumbnails));
        }
        let result = ReadNotebookResult {
            notebook: location.uri.clone(),
            notebook_ref: self.remember(&location),
            cell_count: notebook.len(),
            cells,
            lint: (view == ReadView::Outline).then_some(lint),
            kernel,
            images: image_refs,
            notice: (!notices.is_empty()).then(|| notices.join(" ")),
            next_cell_offset,
        };
        Ok((to_value(&result), images))
    }

    /// `label (epoch N, status)` of the notebook's live kernel.
    async fn kernel_label(&self, location: &NotebookLocation) -> Option<String> {
        let session = self.running_session(location).await?;
        let status = session.status().borrow().as_str();
        let label = session.info().label;
        Some(match session.epoch() {
            Some(epoch) => format!("{label} (epoch {epoch}, {status})"),
            None => format!("{label} ({status})"),
        })
    }

    async fn search_cells(&self, params: SearchCellsParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let indices = match &params.cell_ids {
            Some(ids) => Some(Self::resolve_cells(&document.notebook, Some(ids))?),
            None => None,
        };
        let query = SearchQuery {
            query: params.query.clone(),
            case_sensitive: params.case_sensitive.unwrap_or(false),
            regex: params.regex.unwrap_or(false),
            include_outputs: params.include_outputs.unwrap_or(true),
            max_matches: params.max_matches.unwrap_or(200).max(1) as usize,
        };
        let found = notebook_model::search::search(&document.notebook, &query, indices.as_deref())
            .map_err(|search_error| match search_error {
                notebook_model::search::SearchError::EmptyQuery => {
                    error(ErrorCode::InvalidArgument, "query must not be empty")
                }
                invalid => error(ErrorCode::InvalidRegex, invalid.to_string()),
            })?;
        let result = SearchCellsResult {
            notebook: location.uri,
            query: params.query,
            total_matches: found.total_matches,
            truncated: found.truncated,
            cells: found
                .cells
                .into_iter()
                .map(|cell| SearchCellEntry {
                    index: cell.index,
                    cell_id: cell.id,
                    name: cell.name,
                    matches: cell
                        .matches
                        .into_iter()
                        .map(|found| {
                            let (place, output_index, mime) = match found.place {
                                MatchPlace::Source => ("source", None, None),
                                MatchPlace::Name => ("name", None, None),
                                MatchPlace::Output { output_index, mime } => {
                                    ("output", Some(output_index), Some(mime))
                                }
                            };
                            SearchMatchEntry {
                                place: place.to_owned(),
                                line: found.line,
                                text: found.text,
                                output_index,
                                mime,
                            }
                        })
                        .collect(),
                })
                .collect(),
        };
        Ok((to_value(&result), Vec::new()))
    }

    /// The host's step before a change or run of the notebook, once the call's arguments were
    /// checked ([`NotebookHost::before_change`]).
    pub(crate) async fn before_change(
        &self,
        reference: &str,
        change: crate::host::ChangeKind,
    ) -> Result<NotebookLocation, ToolError> {
        let location = self.resolve(reference).await?;
        self.host.before_change(&location, change).await;
        Ok(location)
    }

    /// Applies edit operations under the notebook's lock and commits them; the change becomes
    /// the newest step of the notebook's undo history.
    pub(crate) async fn mutate(
        &self,
        reference: &str,
        ops: &[EditOp],
        description: String,
    ) -> Result<(NotebookLocation, notebook_model::EditOutcome, Arc<Document>), ToolError> {
        let location = self.resolve(reference).await?;
        let lock = self.lock_for(&location.uri);
        let _guard = lock.lock().await;
        let check_seen = !self.host.document_capabilities().shared_live;
        let mut outcome = None;
        let (document, committed) = self
            .commit_planned(&location, check_seen, |document| {
                let planned = notebook_model::apply_edits(
                    &document.notebook,
                    ops,
                    EditPolicy {
                        require_expected_rev: true,
                    },
                )
                .map_err(edit_error)?;
                let commit = Commit {
                    notebook: planned.notebook.clone(),
                    changes: planned.changes.clone(),
                    description: description.clone(),
                    kind: crate::host::CommitKind::Edit,
                };
                outcome = Some(planned);
                Ok(commit)
            })
            .await?;
        self.saw(&committed);
        self.undo_history.record(
            &location.uri,
            &document.notebook,
            &committed.notebook,
            &description,
        );
        let outcome = outcome.expect("a committed change was planned");
        Ok((location, outcome, committed))
    }

    /// Plans a change against the notebook as it is and commits it; returns the document it was
    /// planned against and the committed one. The caller holds the notebook's lock. A live
    /// document can move on between reading it and committing (someone types): the change is
    /// then planned again against the new version, its revs checked again. With `check_seen`,
    /// a document that changed since clients last saw it is refused instead.
    pub(crate) async fn commit_planned(
        &self,
        location: &NotebookLocation,
        check_seen: bool,
        mut plan: impl FnMut(&Document) -> Result<Commit, ToolError>,
    ) -> Result<(Arc<Document>, Arc<Document>), ToolError> {
        let shared_live = self.host.document_capabilities().shared_live;
        let mut attempts_left = if shared_live { 5 } else { 1 };
        loop {
            attempts_left -= 1;
            let document = self.host.load(location).await?;
            if check_seen {
                self.check_unchanged_since_seen(&document)?;
            }
            let commit = plan(&document)?;
            match self.host.commit(location, document.version, commit).await {
                Ok(committed) => return Ok((document, committed)),
                Err(HostError::ChangedOnDisk { .. }) if attempts_left > 0 => continue,
                Err(failure) => return Err(failure.into()),
            }
        }
    }

    pub(crate) async fn edit_cells(
        &self,
        params: EditCellsParams,
        context: &CallContext,
    ) -> ToolResult {
        if params.edits.is_empty() {
            return Err(error(
                ErrorCode::InvalidArgument,
                "edits must list at least one edit",
            ));
        }
        let run_mode = params.run.clone();
        let per_edit_run = params.edits.iter().any(|edit| edit.run == Some(true));
        let wants_run = matches!(run_mode, Some(RunAfterEdit::Mode(_)))
            || matches!(run_mode, Some(RunAfterEdit::Flag(true)))
            || per_edit_run;
        let can_run = self
            .kernels
            .as_ref()
            .is_some_and(|kernels| kernels.capabilities().execute);
        if wants_run && !can_run {
            return Err(error(
                ErrorCode::NotSupported,
                "this host runs no kernels, so edits cannot be run; drop `run`",
            ));
        }
        let wait = crate::execution::wait_ms(params.wait_ms, 1_000)?;
        for (index, edit) in params.edits.iter().enumerate() {
            if edit.run == Some(true) && edit.edit_type == EditType::Delete {
                return Err(error(
                    ErrorCode::InvalidArgument,
                    format!("edit {index}: a deleted cell cannot run; drop `run` from it"),
                ));
            }
        }
        let ops = params
            .edits
            .iter()
            .enumerate()
            .map(|(index, edit)| edit_op(index, edit))
            .collect::<Result<Vec<_>, _>>()?;
        let description = format!("edit_cells ({} edit(s))", ops.len());
        self.before_change(&params.notebook_ref, crate::host::ChangeKind::Edit)
            .await?;
        let (location, outcome, committed) =
            self.mutate(&params.notebook_ref, &ops, description).await?;
        let mut result = EditCellsResult {
            notebook: location.uri.clone(),
            applied: outcome
                .applied
                .iter()
                .map(|applied| AppliedEdit {
                    edit_type: applied.verb.to_owned(),
                    cells: applied.cells.iter().map(edited_cell).collect(),
                    deleted: applied.deleted.clone(),
                })
                .collect(),
            cell_count: committed.notebook.len(),
            execution: None,
        };
        let mut images = Vec::new();
        if wants_run {
            let targets = match run_mode {
                Some(RunAfterEdit::Mode(RunAfterEditMode::Stale)) => {
                    Some(crate::execution::RunTargets::Stale)
                }
                _ => {
                    let run_all = matches!(run_mode, Some(RunAfterEdit::Flag(true)));
                    let mut cells: Vec<CellRefParam> = Vec::new();
                    for (edit, applied) in params.edits.iter().zip(&outcome.applied) {
                        if !(run_all || edit.run == Some(true)) {
                            continue;
                        }
                        for touched in &applied.cells {
                            let is_code = committed
                                .notebook
                                .cell(touched.index)
                                .is_some_and(|cell| cell.kind() == CellKind::Code);
                            let reference = CellRefParam::Text(touched.id.clone());
                            if is_code && !cells.contains(&reference) {
                                cells.push(reference);
                            }
                        }
                    }
                    (!cells.is_empty()).then_some(crate::execution::RunTargets::Cells {
                        cells,
                        fresh_deps: true,
                    })
                }
            };
            if let Some(targets) = targets {
                let request = crate::execution::ReceiptRequest {
                    wait_ms: wait,
                    include_outputs: true,
                    output_mode: OutputMode::Text,
                    max_output_chars: None,
                    include_images: true,
                };
                result.execution = Some(
                    match self.start_run(&location, targets, request, context).await {
                        Ok((receipt, receipt_images)) => {
                            images = receipt_images;
                            receipt
                        }
                        // The edit is on disk either way; say why the run did not start.
                        Err(failure) => json!({"error": to_value(&failure)}),
                    },
                );
            }
        }
        Ok((to_value(&result), images))
    }

    async fn move_cells(&self, params: MoveCellsParams) -> ToolResult {
        let to_index = params.to_index;
        if !(to_index.is_finite() && to_index >= 0.0 && to_index.fract() == 0.0) {
            return Err(error(
                ErrorCode::InvalidArgument,
                format!("toIndex must be a non-negative integer, not {to_index}"),
            ));
        }
        let ops = [EditOp::Move {
            targets: params.cell_ids.iter().map(to_cell_ref).collect(),
            to_index: to_index as u64,
        }];
        let description = format!("move_cells ({} cell(s))", params.cell_ids.len());
        self.before_change(&params.notebook_ref, crate::host::ChangeKind::Edit)
            .await?;
        let (location, outcome, committed) =
            self.mutate(&params.notebook_ref, &ops, description).await?;
        let result = MoveCellsResult {
            notebook: location.uri,
            moved: outcome.applied[0].cells.iter().map(edited_cell).collect(),
            cell_count: committed.notebook.len(),
        };
        Ok((to_value(&result), Vec::new()))
    }

    async fn clear_cell_outputs(&self, params: ClearCellOutputsParams) -> ToolResult {
        let ops = [EditOp::ClearOutputs {
            targets: params.cell_ids.iter().map(to_cell_ref).collect(),
        }];
        let description = format!("clear_cell_outputs ({} cell(s))", params.cell_ids.len());
        let (location, outcome, _) = self.mutate(&params.notebook_ref, &ops, description).await?;
        let result = ClearCellOutputsResult {
            notebook: location.uri,
            cleared: outcome.applied[0].cells.iter().map(edited_cell).collect(),
        };
        Ok((to_value(&result), Vec::new()))
    }

    async fn save_notebooks(&self, params: NotebookRefsParams) -> ToolResult {
        if params.notebook_refs.is_empty() {
            return Err(error(
                ErrorCode::InvalidArgument,
                "notebookRefs must list at least one notebook",
            ));
        }
        let mut locations = Vec::with_capacity(params.notebook_refs.len());
        for reference in &params.notebook_refs {
            locations.push(self.resolve(reference).await?);
        }
        let mut saved = Vec::new();
        let mut skipped = Vec::new();
        for location in &locations {
            let lock = self.lock_for(&location.uri);
            let _guard = lock.lock().await;
            // Saving writes the document as it is now, changes by others included, and loses
            // nothing: unlike an edit it needs no proof that the agent saw the latest version
            // (in VS Code, outputs the controller writes after a run change the version).
            match self.host.save(location).await? {
                crate::host::Saved::Written => {
                    let after = self.host.load(location).await?;
                    self.saw(&after);
                    saved.push(location.uri.clone());
                }
                crate::host::Saved::Skipped { reason } => skipped.push(SkippedNotebook {
                    notebook: location.uri.clone(),
                    reason,
                }),
            }
        }
        let result = SaveNotebooksResult { saved, skipped };
        Ok((to_value(&result), Vec::new()))
    }

    async fn export_notebook(&self, params: ExportNotebookParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let (format, name) = match params.format {
            ExportFormatParam::Markdown => (ExportFormat::Markdown, "markdown"),
            ExportFormatParam::Python => (ExportFormat::Python, "python"),
            ExportFormatParam::Html => (ExportFormat::Html, "html"),
        };
        let content = notebook_model::export::export(
            &document.notebook,
            format,
            ExportOptions {
                include_outputs: params.include_outputs.unwrap_or(false),
            },
        );
        let bytes = content.len();
        let result = match params.output_path {
            Some(path) => {
                let uri = self
                    .host
                    .write_new_file(&path, content.into_bytes())
                    .await?;
                ExportNotebookResult {
                    notebook: location.uri,
                    format: name.to_owned(),
                    content: None,
                    output_path: Some(uri),
                    bytes,
                }
            }
            None => ExportNotebookResult {
                notebook: location.uri,
                format: name.to_owned(),
                content: Some(content),
                output_path: None,
                bytes,
            },
        };
        Ok((to_value(&result), Vec::new()))
    }
}

/// The reply's reference to an image a read returns; `thumbnails` when the read did not ask
/// for images, so that a downscaled one stands for the full image behind its link.
fn image_ref(cell_index: usize, image: &render::RenderedImage, thumbnails: bool) -> ImageRef {
    ImageRef {
        cell_index,
        output_index: image.output_index,
        mime_type: image.content.mime_type.clone(),
        width: image.width,
        height: image.height,
        thumbnail: thumbnails && image.downscaled,
    }
}

/// The notice of a read that returned thumbnails.
fn thumbnail_notice() -> String {
    format!(
        "images are thumbnails (long side at most {} px), each with a resource link to the full \
         image; includeImages: true returns them full size",
        render::THUMBNAIL_SIDE
    )
}

/// The notice of a read that returned as many images as one reply may carry.
fn image_cap_notice(thumbnails: bool) -> String {
    let limit = if thumbnails {
        render::MAX_THUMBNAILS_PER_RESPONSE
    } else {
        render::MAX_IMAGES_PER_RESPONSE
    };
    format!(
        "at most {limit} images are returned per response; the rest are resource links, or read \
         fewer cells (cellIds) to see them"
    )
}

fn lint_finding(finding: &dataflow::Finding, names: &[String]) -> LintFinding {
    use dataflow::LintCode;
    let severity = match finding.code {
        LintCode::SyntaxError | LintCode::UndefinedName => "error",
        LintCode::DefinedBelow | LintCode::DeletedAbove | LintCode::AnalysisFailed => "warning",
        LintCode::UnusedDefinition
        | LintCode::UnusedImport
        | LintCode::StarImport
        | LintCode::RunMagic => "info",
    };
    LintFinding {
        code: finding.code.as_str().to_owned(),
        severity: severity.to_owned(),
        cell_index: finding.cell,
        cell_name: names.get(finding.cell).cloned().unwrap_or_default(),
        line: finding.line.map(|line| line as usize),
        message: finding.message.clone(),
        also_in: Vec::new(),
    }
}

/// The names of cells that differ between two versions of a notebook (added, removed or changed).
pub(crate) fn changed_cells(before: &Notebook, after: &Notebook) -> Vec<String> {
    let names_before = identity::effective_names(before);
    let names_after = identity::effective_names(after);
    let by_id_before: HashMap<&str, (usize, &Cell)> = before
        .cells()
        .iter()
        .enumerate()
        .map(|(index, cell)| (cell.id(), (index, cell.as_ref())))
        .collect();
    let mut changed = Vec::new();
    let mut seen = HashSet::new();
    for (index, cell) in after.cells().iter().enumerate() {
        seen.insert(cell.id());
        match by_id_before.get(cell.id()) {
            Some((_, old)) if **old == **cell => {}
            _ => changed.push(names_after[index].clone()),
        }
    }
    for (index, cell) in before.cells().iter().enumerate() {
        if !seen.contains(cell.id()) {
            changed.push(names_before[index].clone());
        }
    }
    changed
}

fn edited_cell(cell: &notebook_model::TouchedCell) -> EditedCell {
    EditedCell {
        index: cell.index,
        cell_id: cell.id.clone(),
        name: cell.name.clone(),
        rev: cell.rev.clone(),
    }
}

pub(crate) fn to_cell_ref(reference: &CellRefParam) -> CellRef {
    match reference {
        CellRefParam::Index(index) => CellRef::Index(*index),
        CellRefParam::Text(text) => CellRef::Text(text.clone()),
    }
}

/// Turns one `edit_cells` edit into a model operation, refusing fields that do not belong.
fn edit_op(position: usize, edit: &CellEditParam) -> Result<EditOp, ToolError> {
    let bad = |message: String| {
        let mut failure = error(
            ErrorCode::InvalidArgument,
            format!("edit {position}: {message}"),
        );
        failure.details = Some(json!({ "editIndex": position }));
        failure
    };
    let forbid = |present: bool, field: &str, kinds: &str| {
        if present {
            Err(bad(format!("{field} is only used by {kinds} edits")))
        } else {
            Ok(())
        }
    };
    let target = || {
        edit.cell_id
            .as_ref()
            .map(to_cell_ref)
            .ok_or_else(|| bad("cellId is required for this editType".to_owned()))
    };
    match edit.edit_type {
        EditType::Insert => {
            forbid(edit.old_text.is_some(), "oldText", "replace")?;
            forbid(
                edit.expected_rev.is_some(),
                "expectedRev",
                "edit, delete and replace",
            )?;
            let source = edit
                .new_code
                .clone()
                .ok_or_else(|| bad("insert needs newCode (the new cell's source)".to_owned()))?;
            let (kind, language) = match edit.language.as_deref().map(str::to_ascii_lowercase) {
                Some(language) if language == "markdown" => (CellKind::Markdown, None),
                Some(language) if language == "raw" => (CellKind::Raw, None),
                Some(language) => (CellKind::Code, Some(language)),
                None => (CellKind::Code, None),
            };
            Ok(EditOp::Insert {
                anchor: edit.cell_id.as_ref().map(to_cell_ref),
                kind,
                source,
                language,
                metadata: edit.metadata.clone(),
                name: edit.name.clone(),
            })
        }
        EditType::Edit => {
            forbid(edit.old_text.is_some(), "oldText", "replace")?;
            Ok(EditOp::Edit {
                target: target()?,
                expected_rev: edit.expected_rev.clone(),
                source: edit.new_code.clone(),
                language: edit.language.clone(),
                metadata: edit.metadata.clone(),
                name: edit.name.clone(),
            })
        }
        EditType::Delete => {
            forbid(
                edit.new_code.is_some(),
                "newCode",
                "insert, edit and replace",
            )?;
            forbid(edit.old_text.is_some(), "oldText", "replace")?;
            forbid(
                edit.metadata.is_some(),
                "metadata",
                "insert, edit and replace",
            )?;
            Ok(EditOp::Delete {
                target: target()?,
                expected_rev: edit.expected_rev.clone(),
            })
        }
        EditType::Replace => {
            forbid(edit.name.is_some(), "name", "insert and edit")?;
            let old_text = edit
                .old_text
                .clone()
                .ok_or_else(|| bad("replace needs oldText".to_owned()))?;
            let new_text = edit
                .new_code
                .clone()
                .ok_or_else(|| bad("replace needs newCode (may be empty)".to_owned()))?;
            Ok(EditOp::Replace {
                target: target()?,
                expected_rev: edit.expected_rev.clone(),
                old_text,
                new_text,
                metadata: edit.metadata.clone(),
            })
        }
    }
}

/// A new notebook: a title heading and an empty code cell, Python 3 metadata.
pub fn new_notebook(title: &str) -> Notebook {
    let mut notebook = Notebook::new();
    notebook.metadata_mut().insert(
        "kernelspec".to_owned(),
        json!({"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}),
    );
    notebook
        .metadata_mut()
        .insert("language_info".to_owned(), json!({"name": "python"}));
    let heading = format!("# {title}");
    let mut taken = HashSet::new();
    for (kind, source) in [(CellKind::Markdown, heading.as_str()), (CellKind::Code, "")] {
        let id = identity::fresh_id(kind, source, &taken);
        taken.insert(id.clone());
        let mut cell = Cell::new(kind, source, id);
        let names: HashSet<String> = identity::effective_names(&notebook).into_iter().collect();
        cell.set_stored_name(&identity::unique_name(&identity::base_name(&cell), &names));
        notebook.push_cell(cell);
    }
    notebook
}

/// Outline entries for the cells at `indices` (all when `None`), from the names, revs and saved
/// run states derived once per version of the notebook.
pub(crate) fn outline_cells(
    notebook: &Notebook,
    indices: Option<&[usize]>,
    derived: &Derived,
) -> Vec<CellOutline> {
    let all: Vec<usize> = match indices {
        Some(_) => Vec::new(),
        None => (0..notebook.len()).collect(),
    };
    indices
        .unwrap_or(&all)
        .iter()
        .filter_map(|&index| {
            let cell = notebook.cell(index)?;
            Some(CellOutline {
                index,
                cell_id: cell.id().to_owned(),
                name: derived.names[index].clone(),
                rev: derived.revs[index].clone(),
                kind: cell.kind().as_str().to_owned(),
                language: notebook.cell_language(cell).to_owned(),
                line_count: view::line_count(cell.source()),
                execution_state: derived.states[index].as_str().to_owned(),
                execution_count: cell.execution_count(),
                output_count: (cell.kind() == CellKind::Code).then_some(cell.outputs().len()),
                ..CellOutline::default()
            })
        })
        .collect()
}

impl<H: NotebookHost> ToolDispatch for Tools<H> {
    fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    fn dispatch(
        &self,
        name: String,
        arguments: Option<Map<String, Value>>,
        context: CallContext,
    ) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move { self.call(&name, arguments, context).await })
    }

    fn list_resources(&self) -> BoxFuture<'_, Vec<mcp_contract::ResourceEntry>> {
        Box::pin(async move { Tools::list_resources(self).await })
    }

    fn read_resource(
        &self,
        uri: String,
    ) -> BoxFuture<'_, Result<Vec<mcp_contract::ResourceBody>, mcp_contract::ResourceError>> {
        Box::pin(async move { Tools::read_resource(self, &uri).await })
    }

    fn resource_versions(&self, uris: Vec<String>) -> BoxFuture<'_, Vec<Option<u64>>> {
        Box::pin(async move { Tools::resource_versions(self, &uris).await })
    }
}
