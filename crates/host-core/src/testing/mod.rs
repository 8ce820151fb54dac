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
mod files;
mod kernels;
mod summarizer;

pub use files::MemoryFiles;
pub use kernels::{ExecuteHook, ScriptedKernels, ScriptedSession};
pub use summarizer::ScriptedSummarizer;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use notebook_model::{Cell, CellKind, Notebook, identity};

use crate::files::HostFiles;
use crate::host::{
    Commit, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus, WindowInfo,
};
use crate::kernel::{NotebookKernels, SharedKernels};

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
        let mut notebook = crate::tools::documents::new_notebook("test");
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

    async fn commit(&self, base: &Document, commit: Commit) -> Result<Arc<Document>, HostError> {
        let location = &base.location;
        let version = self.next_version();
        let mut notebooks = self.lock();
        let stored = notebooks
            .get_mut(&location.uri)
            .ok_or_else(|| HostError::NotFound {
                reference: location.uri.clone(),
            })?;
        if stored.document.version != base.version {
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
