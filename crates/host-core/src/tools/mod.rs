//! Every tool, written once against [`NotebookHost`]. A call comes in as a tool name and JSON
//! arguments and leaves as a [`ToolOutput`]: structured JSON (with the same JSON as text), images,
//! and an error flag. Failures are data, never panics or protocol errors.

pub(crate) mod colab;
mod dispatch;
mod documents;
pub(crate) mod edit;
mod environment;
pub(crate) mod notebooks;
pub(crate) mod read;
mod summarize;

pub(crate) use crate::failure::{ToolResult, cell_ref_error, current_cell_json, error, to_value};
pub use documents::new_notebook;
use notebooks::{Derived, Seen};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use mcp_contract::catalog::{self, Capability, ToolName, ToolSpec};
use serde_json::{Map, Value};

use crate::files::HostFiles;
use crate::host::{NotebookHost, NotebookLocation};
use crate::kernel::{KernelCapabilities, SharedKernels};

pub use mcp_contract::dispatch::{
    BoxFuture, CallContext, ImageContent, ProgressSink, ToolDispatch, ToolOutput,
};

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
    pub(crate) colab_kernels: colab::ProvenKernels,
    /// The changes clients made, per notebook, for `undo_last`.
    pub(crate) undo_history: crate::undo::UndoHistory,
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
}
