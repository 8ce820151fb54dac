//! Every tool, written once against [`NotebookHost`]. A call comes in as a tool name and JSON
//! arguments and leaves as a [`ToolOutput`]: structured JSON (with the same JSON as text), images,
//! and an error flag. Failures are data, never panics or protocol errors.

pub(crate) mod colab;
mod dispatch;
pub(crate) mod documents;
pub(crate) mod edit;
mod environment;
pub(crate) mod notebooks;
pub(crate) mod read;
mod summarize;

pub(crate) use crate::failure::{
    ToolResult, cell_ref_error, current_cell_json, error, refuse_control_characters, require_items,
    to_json,
};

use crate::colab::SharedColab;
use crate::epoch::DerivedEpochs;
use crate::execution::state::RunState;
use crate::setups::state::{ProvenKernels, Setups};
use crate::transfer_tools::state::TransferState;
use crate::undo::state::UndoHistory;
use notebooks::state::NotebookState;

use std::collections::HashMap;
use std::sync::Arc;

use mcp_contract::catalog::{self, Capability, ToolName, ToolSpec};
use serde_json::{Map, Value};

use crate::files::HostFiles;
use crate::host::NotebookHost;
use crate::kernel::{KernelCapabilities, SharedKernels};

pub use mcp_contract::dispatch::{
    BoxFuture, CallContext, ImageContent, ProgressSink, ToolDispatch, ToolOutput,
};

/// The tools of one host. Cheap to clone: clones share all state (the runner of a background
/// execution holds one). Each tool family owns its state: the notebooks' references and what
/// clients saw (`notebooks`), tracked runs (`runs`), transfers, derived epochs, Colab setups and
/// proofs, and the undo history.
pub struct Tools<H: NotebookHost> {
    pub(crate) host: Arc<H>,
    /// The host's kernels, taken once at the start.
    pub(crate) kernels: Option<SharedKernels>,
    /// The host's files for transfers, taken once at the start.
    pub(crate) files: Option<Arc<dyn HostFiles>>,
    /// The host's Colab runtime, taken once at the start.
    pub(crate) colab: Option<SharedColab>,
    /// What the tools use besides the host, given at construction.
    pub(crate) services: Services,
    /// The tools this host lists, with their input schemas.
    listed: Arc<Listed>,
    /// References handed out, per-notebook locks, and what clients saw of each notebook.
    pub(crate) notebooks: Arc<NotebookState>,
    /// Tracked runs and per-notebook dataflow and run records.
    pub(crate) runs: Arc<RunState>,
    /// File transfers in progress, and each kernel's transfer budget and quarantine.
    pub(crate) transfers: TransferState,
    /// Epochs derived from stamps, for kernels whose host reports none.
    pub(crate) epochs: Arc<DerivedEpochs>,
    /// The Colab setups of this host's notebooks.
    pub(crate) setups: Arc<Setups>,
    /// The kernels proven to run on a Colab runtime, which decide a transfer's route.
    pub(crate) colab_kernels: Arc<ProvenKernels>,
    /// The changes clients made, per notebook, for `undo_last`.
    pub(crate) undo_history: Arc<UndoHistory>,
}

/// The tools a host lists, decided once from what it can do.
struct Listed {
    specs: Vec<ToolSpec>,
    input_schemas: HashMap<ToolName, Map<String, Value>>,
}

impl<H: NotebookHost> Clone for Tools<H> {
    fn clone(&self) -> Self {
        Tools {
            host: self.host.clone(),
            kernels: self.kernels.clone(),
            files: self.files.clone(),
            colab: self.colab.clone(),
            services: self.services.clone(),
            listed: self.listed.clone(),
            notebooks: self.notebooks.clone(),
            runs: self.runs.clone(),
            transfers: self.transfers.clone(),
            epochs: self.epochs.clone(),
            setups: self.setups.clone(),
            colab_kernels: self.colab_kernels.clone(),
            undo_history: self.undo_history.clone(),
        }
    }
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
            host,
            kernels,
            files,
            setups: Arc::new(Setups::new(
                colab
                    .as_ref()
                    .map_or_else(Default::default, |colab| colab.setup_config()),
            )),
            colab,
            services,
            listed: Arc::new(Listed {
                specs,
                input_schemas,
            }),
            notebooks: Default::default(),
            runs: Default::default(),
            transfers: Default::default(),
            epochs: Default::default(),
            colab_kernels: Default::default(),
            undo_history: Default::default(),
        }
    }

    /// The host the tools act on.
    pub fn host(&self) -> &Arc<H> {
        &self.host
    }

    /// The tools this host lists.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.listed.specs
    }

    /// The input schema of `tool`, when this host lists it.
    pub(crate) fn input_schema(&self, tool: ToolName) -> Option<&Map<String, Value>> {
        self.listed.input_schemas.get(&tool)
    }
}
