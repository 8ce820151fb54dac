//! Test doubles for tool logic: [`MemoryHost`], a host whose notebooks live in memory,
//! [`ScriptedKernels`], kernels that answer cells from directives in their source instead of
//! running Python, and [`ScriptedSummarizer`], a language model that answers from the cell ids
//! and records what it was asked. With them the tools are tested in-process, on paused tokio time, without a
//! kernel or a file system; other hosts' authors can use them too (feature `testing`).
//!
//! A scripted kernel reads its orders from comment lines that start with `#>` (every other line
//! is ignored, so cells stay valid Python for the dataflow analysis):
//!
//! | directive | what the kernel does |
//! |---|---|
//! | `#> out TEXT` | writes `TEXT` and a newline to stdout |
//! | `#> err NAME` | raises `NAME` (an `error` output and an `error` reply) |
//! | `#> wait MS` | takes `MS` milliseconds (tokio time, so paused tests skip it) |
//! | `#> hang` | runs until interrupted (then raises `KeyboardInterrupt`) or restarted |
//! | `#> stubborn` | runs until restarted, ignoring interrupts |
//! | `#> die` | the kernel process dies |
//! | `#> editor-death` | the kernel dies, and the host reports the cell as failed (as an editor does) |
//! | `#> image` | displays a 2×2 PNG |
//!
//! Helper code (inspection, transfers) follows the same directives, or the ones the
//! [`ScriptedKernels::on_execute`] hook substitutes for it. The tools' stamp request (for
//! kernels [`ScriptedKernels::without_epochs`]) is answered from the kernel's memory, which a
//! restart or death wipes.
//!
//! ```
//! use std::sync::Arc;
//! use host_core::testing::{MemoryHost, ScriptedKernels};
//! use host_core::{CallContext, Tools};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let host = MemoryHost::new().with_kernels(ScriptedKernels::new());
//! host.insert("a.ipynb", &["x = 1\n#> out hello"]);
//! let tools = Tools::new(Arc::new(host));
//! let args = serde_json::json!({"notebookRef": "a.ipynb", "waitMs": 10000});
//! let output = tools
//!     .call("run_cells", args.as_object().cloned(), CallContext::default())
//!     .await;
//! assert!(output.text.contains("hello"), "{}", output.text);
//! # });
//! ```

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use execution_tracker::{IopubEvent, KernelLifecycle, ReplyStatus};
use futures::StreamExt;
use mcp_contract::results::KernelChoice;
use notebook_model::{Cell, CellKind, Notebook, identity};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use crate::files::{HostFileReader, HostFileWriter, HostFiles};
use crate::host::{
    Commit, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus, WindowInfo,
};
use crate::kernel::{
    CellToRun, Configured, ExecuteOptions, KernelCapabilities, KernelError, KernelEvent,
    KernelEvents, KernelListing, KernelLookup, KernelOption, KernelPreference, KernelRecord,
    KernelReply, KernelSelection, KernelSession, KernelStatus, NotebookKernels, ObservedRun,
    RequestOutcome, SessionFeatures, SessionInfo, SharedKernels, SharedSession,
};
use crate::tools::BoxFuture;

/// A notebook as [`MemoryHost`] keeps it.
#[derive(Debug, Clone)]
struct Stored {
    document: Arc<Document>,
}

/// A host whose notebooks live in memory, under URIs `memory:///<path>`.
pub struct MemoryHost {
    window: WindowInfo,
    notebooks: Mutex<BTreeMap<String, Stored>>,
    versions: AtomicU64,
    kernels: Option<SharedKernels>,
    files: Option<Arc<MemoryFiles>>,
    colab: Option<crate::colab::SharedColab>,
    documents: crate::host::DocumentCapabilities,
    /// Files written by `write_new_file`, by path.
    written: Mutex<BTreeMap<String, Vec<u8>>>,
    /// How many outputs commits (a run's writes) were made.
    outputs_commits: AtomicU64,
}

impl Default for MemoryHost {
    fn default() -> Self {
        MemoryHost::new()
    }
}

impl MemoryHost {
    /// An empty host without kernels or files.
    pub fn new() -> MemoryHost {
        MemoryHost {
            window: WindowInfo {
                id: "memory".to_owned(),
                label: "In memory".to_owned(),
            },
            notebooks: Mutex::new(BTreeMap::new()),
            versions: AtomicU64::new(1),
            kernels: None,
            files: None,
            colab: None,
            documents: crate::host::DocumentCapabilities::default(),
            written: Mutex::new(BTreeMap::new()),
            outputs_commits: AtomicU64::new(0),
        }
    }

    /// How many times a run wrote outputs into a notebook.
    pub fn outputs_commits(&self) -> u64 {
        self.outputs_commits.load(Ordering::Relaxed)
    }

    /// The same host with these kernels.
    pub fn with_kernels(mut self, kernels: impl NotebookKernels) -> MemoryHost {
        self.kernels = Some(Arc::new(kernels));
        self
    }

    /// The same host with these shared kernels (keep a clone to script them).
    pub fn with_shared_kernels(mut self, kernels: SharedKernels) -> MemoryHost {
        self.kernels = Some(kernels);
        self
    }

    /// The same host, saying it can do only this with its documents.
    pub fn with_document_capabilities(
        mut self,
        documents: crate::host::DocumentCapabilities,
    ) -> MemoryHost {
        self.documents = documents;
        self
    }

    /// The same host with this Colab runtime (the Colab tools are then listed).
    pub fn with_colab(mut self, colab: crate::colab::SharedColab) -> MemoryHost {
        self.colab = Some(colab);
        self
    }

    /// The same host with in-memory files for transfers.
    pub fn with_files(mut self, files: Arc<MemoryFiles>) -> MemoryHost {
        self.files = Some(files);
        self
    }

    /// Adds a Python notebook at `path` whose code cells have these sources.
    pub fn insert(&self, path: &str, sources: &[&str]) -> NotebookLocation {
        let mut notebook = crate::tools::new_notebook("test");
        notebook.set_cells(Vec::new());
        let mut taken = std::collections::HashSet::new();
        for source in sources {
            let id = identity::fresh_id(CellKind::Code, source, &taken);
            taken.insert(id.clone());
            notebook.push_cell(Cell::new(CellKind::Code, *source, id));
        }
        self.insert_notebook(path, notebook)
    }

    /// Adds `notebook` at `path`, replacing what was there.
    pub fn insert_notebook(&self, path: &str, notebook: Notebook) -> NotebookLocation {
        let location = Self::location_of(path);
        let document = Arc::new(Document {
            location: location.clone(),
            notebook,
            version: self.next_version(),
        });
        self.lock()
            .insert(location.uri.clone(), Stored { document });
        location
    }

    /// The notebook at `path` now.
    pub fn notebook(&self, path: &str) -> Option<Notebook> {
        let uri = Self::location_of(path).uri;
        self.lock()
            .get(&uri)
            .map(|stored| stored.document.notebook.clone())
    }

    /// Changes the notebook at `path` as someone else would (a new version; clients that saw
    /// the old one get `notebook_changed_on_disk` on their next write when its cells changed).
    pub fn change_outside(&self, path: &str, change: impl FnOnce(&mut Notebook)) {
        let uri = Self::location_of(path).uri;
        let version = self.next_version();
        let mut notebooks = self.lock();
        let stored = notebooks.get_mut(&uri).expect("the notebook exists");
        let mut notebook = stored.document.notebook.clone();
        change(&mut notebook);
        stored.document = Arc::new(Document {
            location: stored.document.location.clone(),
            notebook,
            version,
        });
    }

    /// What `write_new_file` wrote at `path`.
    pub fn written(&self, path: &str) -> Option<Vec<u8>> {
        self.written
            .lock()
            .expect("written lock")
            .get(path)
            .cloned()
    }

    fn location_of(path: &str) -> NotebookLocation {
        let path = path.trim_start_matches('/');
        NotebookLocation {
            uri: format!("memory:///{path}"),
            path: Some(path.to_owned()),
        }
    }

    fn next_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Stored>> {
        self.notebooks.lock().expect("notebooks lock")
    }

    fn get(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        self.lock()
            .get(&location.uri)
            .map(|stored| stored.document.clone())
            .ok_or_else(|| HostError::NotFound {
                reference: location.uri.clone(),
            })
    }
}

impl NotebookHost for MemoryHost {
    fn window(&self) -> WindowInfo {
        self.window.clone()
    }

    async fn list(&self) -> Result<Listing, HostError> {
        Ok(Listing {
            notebooks: self
                .lock()
                .values()
                .map(|stored| stored.document.location.clone())
                .collect(),
            unreadable: Vec::new(),
        })
    }

    async fn locate(&self, reference: &str) -> Result<NotebookLocation, HostError> {
        let path = reference.strip_prefix("memory:///").unwrap_or(reference);
        if path.split('/').any(|part| part == "..") {
            return Err(HostError::OutsideRoot {
                reference: reference.to_owned(),
                root: "memory:///".to_owned(),
            });
        }
        if !path.ends_with(".ipynb") {
            return Err(HostError::NotANotebook {
                reference: reference.to_owned(),
            });
        }
        Ok(Self::location_of(path))
    }

    async fn open(
        &self,
        location: &NotebookLocation,
    ) -> Result<(OpenStatus, Arc<Document>), HostError> {
        Ok((OpenStatus::AlreadyOpen, self.get(location)?))
    }

    async fn load(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        self.get(location)
    }

    async fn commit(
        &self,
        location: &NotebookLocation,
        base_version: u64,
        commit: Commit,
    ) -> Result<Arc<Document>, HostError> {
        let version = self.next_version();
        let mut notebooks = self.lock();
        let stored = notebooks
            .get_mut(&location.uri)
            .ok_or_else(|| HostError::NotFound {
                reference: location.uri.clone(),
            })?;
        if stored.document.version != base_version {
            return Err(HostError::ChangedOnDisk {
                path: location.uri.clone(),
            });
        }
        if commit.kind == crate::host::CommitKind::Outputs {
            self.outputs_commits.fetch_add(1, Ordering::Relaxed);
        }
        stored.document = Arc::new(Document {
            location: location.clone(),
            notebook: commit.notebook,
            version,
        });
        Ok(stored.document.clone())
    }

    async fn create(
        &self,
        location: &NotebookLocation,
        notebook: Notebook,
    ) -> Result<Arc<Document>, HostError> {
        if self.lock().contains_key(&location.uri) {
            return Err(HostError::AlreadyExists {
                path: location.uri.clone(),
            });
        }
        let path = location.path.clone().unwrap_or_default();
        self.insert_notebook(&path, notebook);
        self.get(location)
    }

    async fn save(&self, location: &NotebookLocation) -> Result<crate::host::Saved, HostError> {
        self.get(location).map(|_| crate::host::Saved::Written)
    }

    async fn write_new_file(&self, path: &str, contents: Vec<u8>) -> Result<String, HostError> {
        let mut written = self.written.lock().expect("written lock");
        if written.contains_key(path) {
            return Err(HostError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        written.insert(path.to_owned(), contents);
        Ok(format!("memory:///{path}"))
    }

    fn document_capabilities(&self) -> crate::host::DocumentCapabilities {
        self.documents
    }

    fn kernels(&self) -> Option<SharedKernels> {
        self.kernels.clone()
    }

    fn files(&self) -> Option<Arc<dyn HostFiles>> {
        self.files.clone().map(|files| files as Arc<dyn HostFiles>)
    }

    fn colab(&self) -> Option<crate::colab::SharedColab> {
        self.colab.clone()
    }
}

/// In-memory host files for transfers, by absolute path (`/` + the `hostPath`).
#[derive(Debug, Default)]
pub struct MemoryFiles {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemoryFiles {
    /// No files yet.
    pub fn new() -> Arc<MemoryFiles> {
        Arc::new(MemoryFiles::default())
    }

    /// Puts a file at `path`.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.lock().insert(absolute(path), bytes);
    }

    /// The file at `path`.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.lock().get(&absolute(path)).cloned()
    }

    /// Every path that has a file.
    pub fn paths(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.files.lock().expect("files lock")
    }
}

fn absolute(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

struct MemoryReader {
    bytes: Vec<u8>,
}

impl HostFileReader for MemoryReader {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, offset: u64, len: usize) -> BoxFuture<'_, io::Result<Vec<u8>>> {
        let start = (offset as usize).min(self.bytes.len());
        let end = start.saturating_add(len).min(self.bytes.len());
        let slice = self.bytes[start..end].to_vec();
        Box::pin(async move { Ok(slice) })
    }
}

struct MemoryWriter {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    path: String,
}

impl HostFileWriter for MemoryWriter {
    fn write_at(&mut self, offset: u64, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        let mut files = self.files.lock().expect("files lock");
        let file = files.entry(self.path.clone()).or_default();
        let end = offset as usize + bytes.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(&bytes);
        Box::pin(async { Ok(()) })
    }

    fn sync_and_close(self: Box<Self>) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

impl HostFiles for MemoryFiles {
    fn resolve<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            if reference.split('/').any(|part| part == "..") {
                return Err(HostError::OutsideRoot {
                    reference: reference.to_owned(),
                    root: "/".to_owned(),
                });
            }
            Ok(absolute(reference))
        })
    }

    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn HostFileReader>, HostError>> {
        Box::pin(async move {
            let bytes = self.get(path).ok_or_else(|| HostError::InvalidPath {
                reference: path.to_owned(),
                reason: "it does not exist".to_owned(),
            })?;
            Ok(Box::new(MemoryReader { bytes }) as Box<dyn HostFileReader>)
        })
    }

    fn create<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<Box<dyn HostFileWriter>>> {
        Box::pin(async move {
            let path = absolute(path);
            let mut files = self.lock();
            if files.contains_key(&path) {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            files.insert(path.clone(), Vec::new());
            Ok(Box::new(MemoryWriter {
                files: self.files.clone(),
                path,
            }) as Box<dyn HostFileWriter>)
        })
    }

    fn promote<'a>(
        &'a self,
        temp: &'a str,
        destination: &'a str,
        overwrite: bool,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let mut files = self.lock();
            let (temp, destination) = (absolute(temp), absolute(destination));
            if !overwrite && files.contains_key(&destination) {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            let bytes = files.get(&temp).cloned().ok_or(io::ErrorKind::NotFound)?;
            files.insert(destination, bytes);
            if overwrite {
                files.remove(&temp);
            }
            Ok(())
        })
    }

    fn remove<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            self.lock().remove(&absolute(path));
            Ok(())
        })
    }
}

/// A [`Summarizer`](crate::summary::Summarizer) that answers every cell with `Model tldr of
/// <id>` and records the ids of each request, so a test sees what the tools asked for. Clones
/// share the record.
#[derive(Clone)]
pub struct ScriptedSummarizer {
    model: String,
    requests: Arc<Mutex<Vec<Vec<String>>>>,
    failure: Arc<Mutex<Option<String>>>,
}

impl ScriptedSummarizer {
    /// A summarizer that says it is `model`.
    pub fn new(model: &str) -> ScriptedSummarizer {
        ScriptedSummarizer {
            model: model.to_owned(),
            requests: Arc::new(Mutex::new(Vec::new())),
            failure: Arc::new(Mutex::new(None)),
        }
    }

    /// The cell ids of each request so far, oldest first.
    pub fn requests(&self) -> Vec<Vec<String>> {
        self.requests.lock().expect("requests lock").clone()
    }

    /// Makes later requests fail with `reason` (`None`: answer again).
    pub fn fail_with(&self, reason: Option<&str>) {
        *self.failure.lock().expect("failure lock") = reason.map(str::to_owned);
    }
}

impl crate::summary::Summarizer for ScriptedSummarizer {
    fn model(&self) -> &str {
        &self.model
    }

    fn summarize<'a>(
        &'a self,
        cells: &'a [crate::summary::SummaryRequest],
    ) -> BoxFuture<'a, Result<Vec<crate::summary::SummaryResponse>, String>> {
        let ids: Vec<String> = cells.iter().map(|cell| cell.id.clone()).collect();
        self.requests.lock().expect("requests lock").push(ids);
        let failure = self.failure.lock().expect("failure lock").clone();
        let answer = match failure {
            Some(reason) => Err(reason),
            None => Ok(cells
                .iter()
                .map(|cell| crate::summary::SummaryResponse {
                    id: cell.id.clone(),
                    tldr: format!("Model tldr of {}", cell.id),
                    description: format!("What the model says of a {} cell.", cell.kind),
                    output_summary: if cell.outputs.is_empty() {
                        String::new()
                    } else {
                        "The model read its outputs.".to_owned()
                    },
                })
                .collect()),
        };
        Box::pin(std::future::ready(answer))
    }
}

/// Epochs of scripted kernels: shared by every instance in the process, so they never repeat.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// What [`ScriptedKernels::on_execute`] makes of helper code: directives to follow instead of
/// the code's own, or `None` to follow the code's.
pub type ExecuteHook = dyn Fn(&str, &ExecuteOptions) -> Option<String> + Send + Sync;

/// Kernels that follow `#>` directives in the code they are given (see the module docs). One
/// kernel per notebook, started on first use, with every capability and a [`SessionFeatures`]
/// of choice. Clones share everything, so a test keeps one to script and inspect the kernels.
#[derive(Clone)]
pub struct ScriptedKernels {
    inner: Arc<ScriptedInner>,
}

struct ScriptedInner {
    capabilities: KernelCapabilities,
    features: SessionFeatures,
    /// Sessions report epochs of their own (else the tools derive them from stamps).
    own_epochs: bool,
    sessions: Mutex<HashMap<String, Arc<ScriptedSession>>>,
    hook: Mutex<Option<Arc<ExecuteHook>>>,
    /// Every piece of code a kernel was given, in order (cells and helper code).
    log: Mutex<Vec<String>>,
    starts: AtomicU64,
    /// Runs others made, by notebook URI, until the tools take them.
    observed: Mutex<HashMap<String, Vec<ObservedRun>>>,
}

impl Default for ScriptedKernels {
    fn default() -> Self {
        ScriptedKernels::new()
    }
}

impl ScriptedKernels {
    /// Kernels with every capability, spoken to as Jupyter kernels.
    pub fn new() -> ScriptedKernels {
        ScriptedKernels::with(KernelCapabilities::ALL, SessionFeatures::JUPYTER)
    }

    /// Kernels with these capabilities and features.
    pub fn with(capabilities: KernelCapabilities, features: SessionFeatures) -> ScriptedKernels {
        ScriptedKernels {
            inner: Arc::new(ScriptedInner {
                capabilities,
                features,
                own_epochs: true,
                sessions: Mutex::new(HashMap::new()),
                hook: Mutex::new(None),
                log: Mutex::new(Vec::new()),
                starts: AtomicU64::new(0),
                observed: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Kernels that report no epoch of their own, as an editor's kernel API: the tools derive
    /// one from the stamp they leave in the kernel, which a restart or death wipes. Call before
    /// the first kernel starts.
    pub fn without_epochs(self) -> ScriptedKernels {
        let inner = Arc::try_unwrap(self.inner)
            .ok()
            .expect("without_epochs before the kernels are shared");
        ScriptedKernels {
            inner: Arc::new(ScriptedInner {
                own_epochs: false,
                ..inner
            }),
        }
    }

    /// Makes helper code follow the directives `hook` returns for it (`None`: its own).
    pub fn on_execute(
        &self,
        hook: impl Fn(&str, &ExecuteOptions) -> Option<String> + Send + Sync + 'static,
    ) {
        *self.inner.hook.lock().expect("hook lock") = Some(Arc::new(hook));
    }

    /// Removes the hook: helper code follows its own directives again.
    pub fn clear_hook(&self) {
        *self.inner.hook.lock().expect("hook lock") = None;
    }

    /// Every piece of code the kernels were given, in order.
    pub fn log(&self) -> Vec<String> {
        self.inner.log.lock().expect("log lock").clone()
    }

    /// How many kernels were started.
    pub fn starts(&self) -> u64 {
        self.inner.starts.load(Ordering::Relaxed)
    }

    /// The running kernel of the notebook at `uri`.
    pub fn session(&self, uri: &str) -> Option<Arc<ScriptedSession>> {
        self.lock().get(uri).cloned()
    }

    /// Reports that someone else ran `source` as cell `cell_id` on the notebook's live kernel
    /// (as a person in a shared editor would); nothing happens without a live kernel.
    pub fn observe_run(&self, uri: &str, cell_id: &str, source: &str, ok: bool) {
        let Some(epoch) = self.session(uri).and_then(|session| session.epoch()) else {
            return;
        };
        self.inner
            .observed
            .lock()
            .expect("observed lock")
            .entry(uri.to_owned())
            .or_default()
            .push(ObservedRun {
                cell_id: cell_id.to_owned(),
                source: source.to_owned(),
                epoch,
                ok,
            });
    }

    /// Kills the notebook's kernel as a crash would: what runs on it ends `Died`.
    pub fn crash(&self, uri: &str) {
        if let Some(session) = self.session(uri) {
            session.die();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ScriptedSession>>> {
        self.inner.sessions.lock().expect("sessions lock")
    }

    fn choice(id: &str) -> KernelChoice {
        KernelChoice {
            id: id.to_owned(),
            label: format!("Scripted ({id})"),
            language: "python".to_owned(),
            source: "scripted".to_owned(),
            detail: None,
            runs_on: None,
        }
    }
}

impl NotebookKernels for ScriptedKernels {
    fn capabilities(&self) -> KernelCapabilities {
        self.inner.capabilities
    }

    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        let session = self.session(&location.uri)?;
        let alive = !session.status().borrow().is_dead();
        alive.then(|| session.epoch()).flatten()
    }

    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup> {
        Box::pin(async move {
            match self.session(&location.uri) {
                Some(session) => KernelLookup::Running(session),
                None => KernelLookup::Absent {
                    reason: "no kernel is running for this notebook; run_cells or \
                             configure_kernel starts one"
                        .to_owned(),
                },
            }
        })
    }

    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        Box::pin(async move {
            let id = preference.kernel_id.unwrap_or_else(|| "python3".to_owned());
            let mut sessions = self.lock();
            if let Some(session) = sessions.get(&location.uri)
                && session.info.id == id
            {
                if session.status().borrow().is_dead() {
                    session.restart_now();
                }
                return Ok(session.clone() as SharedSession);
            }
            self.inner.starts.fetch_add(1, Ordering::Relaxed);
            let session = ScriptedSession::new(id, self.clone());
            sessions.insert(location.uri.clone(), session.clone());
            Ok(session as SharedSession)
        })
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        let _ = location;
        Box::pin(async move {
            let kernels = ["python3", "other"]
                .into_iter()
                .map(|id| KernelOption {
                    choice: Self::choice(id),
                    record: Some(KernelRecord {
                        kernel_id: id.to_owned(),
                        kernelspec_name: id.to_owned(),
                        display_name: format!("Scripted ({id})"),
                        language: "python".to_owned(),
                    }),
                })
                .collect();
            Ok(KernelListing {
                kernels,
                selected: Some(preference.kernel_id.unwrap_or_else(|| "python3".to_owned())),
                hint: None,
            })
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        Box::pin(async move {
            const IDS: [&str; 2] = ["python3", "other"];
            if !IDS.contains(&kernel_id.as_str()) {
                return Err(KernelError::unknown_kernel(&kernel_id, IDS));
            }
            let replaces_running = self
                .session(&location.uri)
                .is_some_and(|session| session.info.id != kernel_id);
            Ok(KernelSelection {
                kernel: Self::choice(&kernel_id),
                record: Some(KernelRecord {
                    kernel_id: kernel_id.clone(),
                    kernelspec_name: kernel_id.clone(),
                    display_name: format!("Scripted ({kernel_id})"),
                    language: "python".to_owned(),
                }),
                replaces_running,
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            let session = self.start(location, preference).await?;
            Ok(Configured {
                kernel: Self::choice(&session.info().id),
            })
        })
    }

    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(async move {
            let Some(session) = self.session(&location.uri) else {
                return Ok(RequestOutcome::NotRunning);
            };
            session.restart_now();
            Ok(RequestOutcome::Done {
                epoch: session.epoch(),
            })
        })
    }

    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(async move {
            let Some(session) = self.session(&location.uri) else {
                return Ok(RequestOutcome::NotRunning);
            };
            session.control(Control::Interrupt);
            Ok(RequestOutcome::Done {
                epoch: session.epoch(),
            })
        })
    }

    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>> {
        Box::pin(async move {
            let session = self.lock().remove(&location.uri);
            if let Some(session) = &session {
                session.control(Control::Shutdown);
            }
            Ok(session.is_some())
        })
    }

    fn shutdown_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let sessions: Vec<_> = self.lock().drain().collect();
            for (_, session) in sessions {
                session.control(Control::Shutdown);
            }
        })
    }

    fn observed_runs(&self, location: &NotebookLocation) -> Vec<ObservedRun> {
        self.inner
            .observed
            .lock()
            .expect("observed lock")
            .remove(&location.uri)
            .unwrap_or_default()
    }
}

/// What happens to a kernel's running executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Interrupt,
    Restart,
    Die,
    Shutdown,
}

/// One scripted kernel.
pub struct ScriptedSession {
    info: SessionInfo,
    kernels: ScriptedKernels,
    epoch: AtomicU64,
    status: watch::Sender<KernelStatus>,
    /// Running executions hear restarts, interrupts and deaths here.
    control: tokio::sync::broadcast::Sender<Control>,
    /// The stamp the tools left in this kernel process ([`crate::epoch`]).
    stamp: Arc<Mutex<Option<String>>>,
    /// Restarts and deaths so far.
    lifecycle: Arc<AtomicU64>,
    execution_count: AtomicU64,
    /// Executions queue on this lock, as they do in a kernel.
    queue: Arc<tokio::sync::Mutex<()>>,
}

impl ScriptedSession {
    fn new(id: String, kernels: ScriptedKernels) -> Arc<ScriptedSession> {
        Arc::new(ScriptedSession {
            info: SessionInfo {
                label: format!("Scripted ({id})"),
                id,
                language: "python".to_owned(),
                implementation: Some("scripted".to_owned()),
                language_version: Some("3".to_owned()),
                pid: None,
                runs_on: None,
            },
            kernels,
            epoch: AtomicU64::new(EPOCHS.fetch_add(1, Ordering::Relaxed)),
            status: watch::Sender::new(KernelStatus::Idle),
            control: tokio::sync::broadcast::channel(16).0,
            stamp: Arc::default(),
            lifecycle: Arc::default(),
            execution_count: AtomicU64::new(0),
            queue: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn control(&self, control: Control) {
        let _ = self.control.send(control);
        if control != Control::Interrupt {
            self.lifecycle.fetch_add(1, Ordering::Relaxed);
            self.forget_stamp();
        }
        match control {
            Control::Die | Control::Shutdown => {
                self.status.send_replace(KernelStatus::Dead);
            }
            Control::Restart => {
                self.epoch
                    .store(EPOCHS.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
                self.execution_count.store(0, Ordering::Relaxed);
                self.status.send_replace(KernelStatus::Idle);
            }
            Control::Interrupt => {}
        }
    }

    /// Sets the kernel's status as a run from elsewhere (a person's editor) would.
    pub fn set_status(&self, status: KernelStatus) {
        self.status.send_replace(status);
    }

    /// Restarts the kernel now (a new epoch; running executions end `Restarted`).
    pub fn restart_now(&self) {
        self.control(Control::Restart);
    }

    /// Kills the kernel (running executions end `Died`).
    pub fn die(&self) {
        self.control(Control::Die);
    }

    /// Wipes the stamp the tools left in the kernel, as a restart the host never reported would
    /// (a new process behind the same session).
    pub fn forget_stamp(&self) {
        *self.stamp.lock().expect("stamp lock") = None;
    }

    /// A restart the host reports ([`KernelSession::lifecycle_changes`]) while the executions
    /// under way never hear of it (an editor that restarts a crashed kernel by itself and never
    /// completes the running cell).
    pub fn restart_silently(&self) {
        self.lifecycle.fetch_add(1, Ordering::Relaxed);
        self.forget_stamp();
    }

    fn events(&self, code: String, script: String, cell: bool) -> KernelEvents {
        self.kernels.inner.log.lock().expect("log lock").push(code);
        // `#> late TEXT`: printed just before the reply but arriving after it.
        let late: Vec<String> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("#> late "))
            .map(|text| format!("{text}\n"))
            .collect();
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut control = self.control.subscribe();
        let queue = self.queue.clone();
        let status = self.status.clone();
        let count = if cell {
            Some(self.execution_count.fetch_add(1, Ordering::Relaxed) + 1)
        } else {
            None
        };
        let lifecycle = self.lifecycle.clone();
        let stamp = self.stamp.clone();
        if status.borrow().is_dead() {
            let _ = sender.send(KernelEvent::Ended(KernelLifecycle::Died));
        } else {
            tokio::spawn(async move {
                let _turn = queue.lock().await;
                status.send_replace(KernelStatus::Busy);
                let outcome = play(&script, count, &sender, &mut control).await;
                match outcome {
                    Ended::Reply(reply) => {
                        // As from ipykernel: the reply overtakes the final idle.
                        let _ = sender.send(KernelEvent::Replied {
                            execution_count: reply.execution_count,
                        });
                        for text in late {
                            let _ = sender.send(KernelEvent::output(IopubEvent::Stream {
                                name: "stdout".to_owned(),
                                text,
                            }));
                        }
                        status.send_replace(KernelStatus::Idle);
                        let _ = sender.send(KernelEvent::Idle);
                        let _ = sender.send(KernelEvent::Reply(reply));
                    }
                    Ended::Lifecycle(lifecycle) => {
                        let _ = sender.send(KernelEvent::Ended(lifecycle));
                    }
                    Ended::DiedSeenAsFailure(reply) => {
                        // As an editor reports a kernel that died under a cell: the cell is
                        // marked failed, and the kernel is dead.
                        lifecycle.fetch_add(1, Ordering::Relaxed);
                        *stamp.lock().expect("stamp lock") = None;
                        status.send_replace(KernelStatus::Dead);
                        let _ = sender.send(KernelEvent::Idle);
                        let _ = sender.send(KernelEvent::Reply(reply));
                    }
                }
            });
        }
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        })
        .boxed()
    }
}

enum Ended {
    Reply(KernelReply),
    Lifecycle(KernelLifecycle),
    /// `#> editor-death`: the kernel died, and the host reports the cell as failed.
    DiedSeenAsFailure(KernelReply),
}

fn tiny_png() -> String {
    // A 2×2 PNG, base64.
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAFklEQVR4nGP8z8Dwn4GBgYGJAQoAAP8DA/0cyDAAAAAASUVORK5CYII=".to_owned()
}

/// Plays a piece of code's directives until its end or a control that ends it.
async fn play(
    code: &str,
    execution_count: Option<u64>,
    sender: &mpsc::UnboundedSender<KernelEvent>,
    control: &mut tokio::sync::broadcast::Receiver<Control>,
) -> Ended {
    let _ = sender.send(KernelEvent::Busy);
    let raised = |ename: &str, sender: &mpsc::UnboundedSender<KernelEvent>| {
        let _ = sender.send(KernelEvent::output(IopubEvent::Error {
            ename: ename.to_owned(),
            evalue: format!("{ename} raised by a directive"),
            traceback: vec![format!("{ename}: raised by a directive")],
        }));
        let mut reply = KernelReply::new(ReplyStatus::Error, execution_count);
        reply.error = Some(crate::kernel::RaisedError {
            ename: ename.to_owned(),
            evalue: format!("{ename} raised by a directive"),
            traceback: Vec::new(),
        });
        Ended::Reply(reply)
    };
    for line in code.lines() {
        let Some(directive) = line.trim().strip_prefix("#>") else {
            continue;
        };
        let directive = directive.trim();
        let (verb, argument) = directive.split_once(' ').unwrap_or((directive, ""));
        match verb {
            "out" => {
                let _ = sender.send(KernelEvent::output(IopubEvent::Stream {
                    name: "stdout".to_owned(),
                    text: format!("{argument}\n"),
                }));
            }
            "err" => return raised(argument, sender),
            "image" => {
                let _ = sender.send(KernelEvent::output(IopubEvent::DisplayData {
                    data: json!({"image/png": tiny_png(), "text/plain": "<Figure>"}),
                    metadata: Value::Object(Map::new()),
                    transient: None,
                }));
            }
            "die" => return Ended::Lifecycle(KernelLifecycle::Died),
            "editor-death" => {
                let Ended::Reply(reply) = raised("KernelDied", sender) else {
                    unreachable!("raised ends with a reply")
                };
                return Ended::DiedSeenAsFailure(reply);
            }
            "wait" | "hang" | "stubborn" => {
                let wait = async {
                    match argument.parse::<u64>() {
                        Ok(ms) if verb == "wait" => {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        _ => std::future::pending::<()>().await,
                    }
                };
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        () = &mut wait => break,
                        received = control.recv() => match received {
                            Ok(Control::Interrupt) if verb == "stubborn" => {}
                            Ok(Control::Interrupt) => return raised("KeyboardInterrupt", sender),
                            Ok(Control::Restart) => return Ended::Lifecycle(KernelLifecycle::Restarted),
                            Ok(Control::Die) => return Ended::Lifecycle(KernelLifecycle::Died),
                            Ok(Control::Shutdown) | Err(_) => {
                                return Ended::Lifecycle(KernelLifecycle::Terminated);
                            }
                        },
                    }
                }
            }
            _ => {}
        }
    }
    Ended::Reply(KernelReply::new(ReplyStatus::Ok, execution_count))
}

impl KernelSession for ScriptedSession {
    fn info(&self) -> SessionInfo {
        self.info.clone()
    }

    fn features(&self) -> SessionFeatures {
        self.kernels.inner.features
    }

    fn epoch(&self) -> Option<u64> {
        self.kernels
            .inner
            .own_epochs
            .then(|| self.epoch.load(Ordering::Relaxed))
    }

    fn lifecycle_changes(&self) -> u64 {
        self.lifecycle.load(Ordering::Relaxed)
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        self.status.subscribe()
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { Ok(self.events(cell.source.clone(), cell.source, true)) })
    }

    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move {
            let hook = self.kernels.inner.hook.lock().expect("hook lock").clone();
            let hooked = hook.and_then(|hook| hook(&code, &options));
            // The tools' stamp request: answered as the stamp program would, from this
            // process's memory (unless the hook says otherwise).
            let stamped = crate::epoch::script::offered_token(&code).map(|offered| {
                let stamp = self
                    .stamp
                    .lock()
                    .expect("stamp lock")
                    .get_or_insert(offered)
                    .clone();
                format!("#> out {}", crate::epoch::script::answer(&stamp))
            });
            let script = hooked.or(stamped).unwrap_or_else(|| code.clone());
            Ok(self.events(code, script, false))
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>> {
        Box::pin(async move { Ok(*self.status.borrow()) })
    }
}
