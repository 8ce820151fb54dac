//! The kernel seam: what the tools need from wherever a host's notebooks run their code.
//!
//! A host hands out one [`NotebookKernels`] ([`crate::NotebookHost::kernels`]). It says what it
//! can do ([`KernelCapabilities`], which decides the kernel tools that are listed), lists and
//! selects kernels, starts, restarts, interrupts and stops a notebook's kernel, and gives the
//! running one as a [`KernelSession`]: something that runs a notebook cell or helper code and
//! yields [`KernelEvent`]s in order. The local and remote Jupyter kernels of the `kernels` crate
//! are one implementation (`host-kernels`), VS Code's Jupyter extension another
//! (`host-vscode`), the scripted kernel of [`crate::testing`] a third. Tool logic (what a run
//! means, staleness, transfers, inspection) sees only this interface.
//!
//! Every future here is cancel-safe from the caller's side, and none waits without a bound the
//! implementation documents.

use std::collections::BTreeMap;
use std::sync::Arc;

use execution_tracker::{IopubEvent, KernelLifecycle, ReplyStatus};
use mcp_contract::ErrorCode;
/// A kernel as `list_kernels` shows it and where it runs: the seam's own vocabulary (the
/// contract's result types), so that kernel providers name them through this seam and never
/// through the MCP contract.
pub use mcp_contract::results::{KernelChoice, KernelPlace, KernelPlaceKind};
use serde_json::{Map, Value};
use thiserror::Error;
use tokio::sync::watch;

use super::location::NotebookLocation;
use mcp_contract::dispatch::{BoxFuture, ProgressSink};

/// Which kernel tools a host's kernels support. A tool is listed only when its capability is
/// here ([`crate::Tools`] builds `tools/list` from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelCapabilities {
    /// Run cells and helper code: `run_cells`, `get_execution`, `inspect_variable`, `run` on
    /// `edit_cells`.
    pub execute: bool,
    /// `interrupt_kernels`.
    pub interrupt: bool,
    /// `restart_kernels`.
    pub restart: bool,
    /// `list_kernels`, `select_kernel`, `configure_kernel`, and `kernelId` on
    /// `create_notebook`.
    pub choose: bool,
    /// `upload_file` and `download_file` (which also need the host's files).
    pub transfer: bool,
}

impl KernelCapabilities {
    /// Everything.
    pub const ALL: KernelCapabilities = KernelCapabilities {
        execute: true,
        interrupt: true,
        restart: true,
        choose: true,
        transfer: true,
    };

    /// Nothing: a host that runs no code.
    pub const NONE: KernelCapabilities = KernelCapabilities {
        execute: false,
        interrupt: false,
        restart: false,
        choose: false,
        transfer: false,
    };
}

/// How one running kernel can be talked to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionFeatures {
    /// Execute requests can carry binary buffers and displays can return them, and user
    /// expressions are evaluated (a Jupyter kernel spoken to in Jupyter messages). Without it,
    /// only code goes in and only outputs come back (an editor's kernel API).
    pub messages: bool,
    /// The host writes a run's outputs into the document itself (the editor's kernel does), so
    /// the runner only observes them.
    pub host_writes_outputs: bool,
    /// [`KernelSession::probe`] tells the kernel's status, so a run looks at it once a second
    /// while it waits.
    pub probe: bool,
}

impl SessionFeatures {
    /// A Jupyter kernel over its own protocol (ZeroMQ or a server's WebSocket).
    pub const JUPYTER: SessionFeatures = SessionFeatures {
        messages: true,
        host_writes_outputs: false,
        probe: true,
    };
}

/// A kernel's state as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelStatus {
    /// Started, not answering yet.
    Starting,
    /// Waiting for work.
    Idle,
    /// Working on a request.
    Busy,
    /// A restart is in progress.
    Restarting,
    /// Gone: exited, shut down or lost for good.
    Dead,
    /// Alive as far as is known, but not answering now.
    Unreachable,
}

impl KernelStatus {
    /// True for `Dead`.
    pub fn is_dead(self) -> bool {
        self == KernelStatus::Dead
    }

    /// A short lower-case word, as Jupyter spells kernel states.
    pub fn as_str(self) -> &'static str {
        match self {
            KernelStatus::Starting => "starting",
            KernelStatus::Idle => "idle",
            KernelStatus::Busy => "busy",
            KernelStatus::Restarting => "restarting",
            KernelStatus::Dead => "dead",
            KernelStatus::Unreachable => "unreachable",
        }
    }

    /// The status as the run state machine records it.
    pub(crate) fn tracked(self) -> execution_tracker::KernelStatus {
        use execution_tracker::KernelStatus as Tracked;
        match self {
            KernelStatus::Starting => Tracked::Starting,
            KernelStatus::Idle => Tracked::Idle,
            KernelStatus::Busy => Tracked::Busy,
            KernelStatus::Restarting => Tracked::Restarting,
            KernelStatus::Dead => Tracked::Dead,
            KernelStatus::Unreachable => Tracked::Unknown,
        }
    }
}

/// What a running kernel says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionInfo {
    /// The exact id of its choice (as `list_kernels` gives it).
    pub id: String,
    /// Its display name.
    pub label: String,
    /// e.g. `python` (empty when unknown).
    pub language: String,
    /// e.g. `ipython`.
    pub implementation: Option<String>,
    /// e.g. `3.11.7`.
    pub language_version: Option<String>,
    /// The kernel's process id, for local kernels.
    pub pid: Option<u32>,
    /// Where it runs, when the host knows.
    pub runs_on: Option<KernelPlace>,
}

/// Options of one execution of helper code (or of a cell, with the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecuteOptions {
    /// As quiet as possible: no input echo, no result, no history.
    pub silent: bool,
    /// Add the code to the kernel's history and bump the execution count.
    pub store_history: bool,
    /// Expressions evaluated after the code, answered in the reply (only where
    /// [`SessionFeatures::messages`]).
    pub user_expressions: BTreeMap<String, String>,
    /// Abort queued requests when this one fails.
    pub stop_on_error: bool,
    /// Binary buffers sent with the request (only where [`SessionFeatures::messages`]).
    pub buffers: Vec<Vec<u8>>,
}

impl Default for ExecuteOptions {
    fn default() -> Self {
        ExecuteOptions {
            silent: false,
            store_history: true,
            user_expressions: BTreeMap::new(),
            stop_on_error: true,
            buffers: Vec::new(),
        }
    }
}

impl ExecuteOptions {
    /// Silent, no history, no abort of queued requests: helper code the user should not see
    /// (inspection, file transfer).
    pub fn quiet() -> Self {
        ExecuteOptions {
            silent: true,
            store_history: false,
            stop_on_error: false,
            ..ExecuteOptions::default()
        }
    }
}

/// An error raised by the code the kernel ran.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RaisedError {
    /// The exception's class name.
    pub ename: String,
    /// Its message.
    pub evalue: String,
    /// Traceback lines as the kernel sent them.
    pub traceback: Vec<String>,
}

/// The kernel's reply to an execution.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelReply {
    /// `ok`, `error` or `aborted`.
    pub status: ReplyStatus,
    /// The execution count, when the kernel gave one.
    pub execution_count: Option<u64>,
    /// What the code raised, for an `error` reply.
    pub error: Option<RaisedError>,
    /// Results of [`ExecuteOptions::user_expressions`], as the kernel sent them.
    pub user_expressions: Map<String, Value>,
}

impl KernelReply {
    /// A reply with only a status and a count.
    pub fn new(status: ReplyStatus, execution_count: Option<u64>) -> KernelReply {
        KernelReply {
            status,
            execution_count,
            error: None,
            user_expressions: Map::new(),
        }
    }
}

/// One event of an execution, in order: `Busy`, its outputs, `Idle`, `Reply`. `Reply` and the
/// variants after it in this list end the execution: nothing follows them.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelEvent {
    /// The kernel started working on it.
    Busy,
    /// An output (with the binary buffers of its message, usually none).
    Output {
        /// The output as the run state machine takes it.
        event: IopubEvent,
        /// The message's binary buffers.
        buffers: Vec<Vec<u8>>,
    },
    /// The kernel went idle after it.
    Idle,
    /// The kernel's reply arrived ahead of `Idle` (the code has finished; outputs sent before
    /// the reply may still arrive until `Idle`). Hosts that cannot tell never send it.
    Replied {
        /// The reply's execution count.
        execution_count: Option<u64>,
    },
    /// The kernel asked its frontend for something the host answered with an error at once
    /// (a provider's own prompt); `message` says what the user must do outside MCP.
    ActionRequired {
        /// A short, stable code (e.g. `colab_request`).
        code: String,
        /// What the user must do.
        message: String,
    },
    /// The reply. Terminal.
    Reply(KernelReply),
    /// The kernel restarted, died, was shut down or could no longer be reached. Terminal.
    Ended(KernelLifecycle),
    /// The host refused to run it (the editor rejected the command); `error_name` is a
    /// sanitised class name. Terminal.
    Refused {
        /// A plain identifier, never message text.
        error_name: String,
    },
    /// The notebook was closed. Terminal.
    NotebookClosed,
    /// The host stopped observing it without a completion (the cell changed under observation,
    /// or a restart or interrupt was requested). Completion is not claimed. Terminal.
    Lost,
    /// The editor's command that dispatched the cell has settled. Only hosts whose dispatch is
    /// a command that settles apart from the cell's completion send it, and only after `Lost`
    /// or `NotebookClosed`: the run has ended, but the notebook's command stays pending until
    /// this arrives.
    CommandSettled,
}

impl KernelEvent {
    /// An output without buffers.
    pub fn output(event: IopubEvent) -> KernelEvent {
        KernelEvent::Output {
            event,
            buffers: Vec::new(),
        }
    }

    /// Whether nothing follows this event.
    pub fn is_terminal(&self) -> bool {
        !matches!(
            self,
            KernelEvent::Busy
                | KernelEvent::Output { .. }
                | KernelEvent::Idle
                | KernelEvent::Replied { .. }
                | KernelEvent::ActionRequired { .. }
                | KernelEvent::CommandSettled
        )
    }
}

/// The events of one execution.
pub type KernelEvents = futures::stream::BoxStream<'static, KernelEvent>;

/// A cell to run, as the notebook holds it when it is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellToRun {
    /// Its index in the document now.
    pub index: usize,
    /// Its nbformat id.
    pub cell_id: String,
    /// Its source, as verified before dispatch.
    pub source: String,
}

/// A failed kernel operation. Messages say what to do next and never carry raw kernel, server
/// or OS text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KernelError {
    /// No usable kernel is installed or chosen.
    #[error("{message}")]
    NoKernel {
        /// What to install or select.
        message: String,
    },
    /// The kernel id is not one the host lists.
    #[error("{message}")]
    UnknownKernel {
        /// Which ids exist.
        message: String,
    },
    /// A request was larger than the kernel connection takes.
    #[error("{message}")]
    TooLarge {
        /// What was too large.
        message: String,
    },
    /// The kernel cannot be started, reached or used now.
    #[error("{message}")]
    Unavailable {
        /// Why, and what to try.
        message: String,
    },
    /// The kernel restarted while the request was under way.
    #[error("the kernel restarted while the request was under way")]
    Restarted,
    /// The kernel died, was shut down or disappeared, so the request cannot be answered.
    #[error("the kernel is gone (it died, was shut down or can no longer be reached)")]
    Gone,
    /// The host cannot do this.
    #[error("{message}")]
    NotSupported {
        /// What is not supported here.
        message: String,
    },
}

impl KernelError {
    /// The contract error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            KernelError::NoKernel { .. } => ErrorCode::NoKernel,
            KernelError::UnknownKernel { .. } => ErrorCode::KernelNotFound,
            KernelError::TooLarge { .. } => ErrorCode::TooLarge,
            KernelError::Unavailable { .. } | KernelError::Restarted | KernelError::Gone => {
                ErrorCode::KernelUnavailable
            }
            KernelError::NotSupported { .. } => ErrorCode::NotSupported,
        }
    }

    /// `Unavailable` with this message.
    pub fn unavailable(message: impl Into<String>) -> KernelError {
        KernelError::Unavailable {
            message: message.into(),
        }
    }

    /// `UnknownKernel` for a selection of `kernel_id`, which is not among the `available` ids
    /// the host lists: nothing was selected, and these are the ids that exist.
    pub fn unknown_kernel<'a>(
        kernel_id: &str,
        available: impl IntoIterator<Item = &'a str>,
    ) -> KernelError {
        let available: Vec<&str> = available.into_iter().collect();
        KernelError::UnknownKernel {
            message: format!(
                "no kernel has the id `{kernel_id}`; nothing was selected. Available ids: {}",
                if available.is_empty() {
                    "(none)".to_owned()
                } else {
                    available.join(", ")
                }
            ),
        }
    }
}

impl From<KernelError> for mcp_contract::ToolError {
    fn from(failure: KernelError) -> mcp_contract::ToolError {
        mcp_contract::ToolError::new(failure.code(), failure.to_string())
    }
}

/// A running kernel of one notebook.
pub trait KernelSession: Send + Sync + 'static {
    /// What it says about itself.
    fn info(&self) -> SessionInfo;

    /// How it can be talked to.
    fn features(&self) -> SessionFeatures;

    /// Bumped on every start and restart and never repeated within a server; `None` for a
    /// kernel whose restarts the host cannot see (then no cell counts as fresh on it).
    fn epoch(&self) -> Option<u64>;

    /// A watch of its status.
    fn status(&self) -> watch::Receiver<KernelStatus>;

    /// Runs a notebook cell as the user would (history, execution count).
    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>>;

    /// Runs helper code with `options`.
    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>>;

    /// Checks liveness within a bounded time (where [`SessionFeatures::probe`]). A kernel that
    /// is no longer the one this session stands for (the editor replaced it) answers `Dead`.
    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>>;

    /// How many times the host has seen this kernel start again, restart or die since the
    /// session was handed out (never decreasing). Sessions without an [`KernelSession::epoch`]
    /// have their epoch derived by the tools from a stamp in the kernel, which they read back
    /// whenever this moves. Default: 0 (a host that sees no such thing, or whose sessions have
    /// real epochs).
    fn lifecycle_changes(&self) -> u64 {
        0
    }
}

/// A shared session. Two lookups of the same kernel object give the same `Arc`
/// ([`Arc::ptr_eq`]), so a caller can tell a replaced kernel from the one it started with.
pub type SharedSession = Arc<dyn KernelSession>;

/// The address of a session object: the key of per-kernel records, which hold the session
/// alive (or weakly, and check it), so an address is not reused while a record names it.
pub(crate) fn session_address(session: &SharedSession) -> usize {
    Arc::as_ptr(session).cast::<()>() as usize
}

/// Whether a kernel runs for a notebook.
#[derive(Clone)]
pub enum KernelLookup {
    /// One runs (it may have died since).
    Running(SharedSession),
    /// None runs; why, in words that say how to start one.
    Absent {
        /// e.g. "no kernel is running for this notebook; run_cells or configure_kernel
        /// starts one".
        reason: String,
    },
    /// None is seen, but one may run where the host cannot look (an editor that reports no
    /// active kernel, or could not be asked).
    Unobserved {
        /// Why none is seen, and what to do.
        reason: String,
    },
}

impl std::fmt::Debug for KernelLookup {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelLookup::Running(session) => formatter
                .debug_tuple("Running")
                .field(&session.info().id)
                .finish(),
            KernelLookup::Absent { reason } => formatter
                .debug_struct("Absent")
                .field("reason", reason)
                .finish(),
            KernelLookup::Unobserved { reason } => formatter
                .debug_struct("Unobserved")
                .field("reason", reason)
                .finish(),
        }
    }
}

impl KernelLookup {
    /// The session, when one runs.
    pub fn session(self) -> Option<SharedSession> {
        match self {
            KernelLookup::Running(session) => Some(session),
            KernelLookup::Absent { .. } | KernelLookup::Unobserved { .. } => None,
        }
    }
}

/// What a notebook's metadata says about the kernel it wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelPreference {
    /// An explicit choice recorded by `select_kernel` (`metadata.jupyter_mcp.kernel_id`).
    pub kernel_id: Option<String>,
    /// `metadata.kernelspec.name`.
    pub kernel_name: Option<String>,
    /// `metadata.kernelspec.language` or `metadata.language_info.name`.
    pub language: Option<String>,
}

/// How a notebook's metadata names a kernel choice, for hosts that keep the choice there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRecord {
    /// The exact id (stored as `metadata.jupyter_mcp.kernel_id`).
    pub kernel_id: String,
    /// `metadata.kernelspec.name`.
    pub kernelspec_name: String,
    /// `metadata.kernelspec.display_name`.
    pub display_name: String,
    /// `metadata.kernelspec.language`.
    pub language: String,
}

/// One kernel a notebook can use.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelOption {
    /// As `list_kernels` shows it.
    pub choice: KernelChoice,
    /// How the notebook records it; `None` where the editor keeps the choice.
    pub record: Option<KernelRecord>,
}

/// The kernels a notebook can use.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelListing {
    /// Every choice, with its exact id.
    pub kernels: Vec<KernelOption>,
    /// The id the notebook would use now.
    pub selected: Option<String>,
    /// Why none would be used, when none would.
    pub hint: Option<String>,
}

/// The outcome of selecting a kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSelection {
    /// The chosen kernel.
    pub kernel: KernelChoice,
    /// What the tools write into the notebook's metadata, when the host keeps the choice there.
    pub record: Option<KernelRecord>,
    /// A kernel of another kind runs for the notebook: the tools end its run and shut it down
    /// so the next start uses the choice.
    pub replaces_running: bool,
}

/// The outcome of `configure_kernel`.
#[derive(Debug, Clone, PartialEq)]
pub struct Configured {
    /// The kernel it set up.
    pub kernel: KernelChoice,
}

/// What a restart or interrupt request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestOutcome {
    /// Done, and confirmed (the restarted kernel's new epoch, where it has one).
    Done {
        /// The epoch after the request.
        epoch: Option<u64>,
    },
    /// Handed to the editor; it may ask for confirmation, and completion is not claimed.
    Requested {
        /// What the host saw of the kernel afterwards, in a sentence (a restart it watched
        /// happen), when it saw anything.
        observed: Option<String>,
    },
    /// No kernel runs for the notebook; nothing was done.
    NotRunning,
}

/// A run of a notebook cell that did not go through the tools: a person ran it in an editor
/// that shares the kernel (JupyterLab on the same server session), and the host saw it finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedRun {
    /// The cell's id.
    pub cell_id: String,
    /// Its source as it ran.
    pub source: String,
    /// The epoch of the kernel it ran on.
    pub epoch: u64,
    /// It ended without an error.
    pub ok: bool,
}

/// The kernels of a host's notebooks.
pub trait NotebookKernels: Send + Sync + 'static {
    /// What these kernels can do (decides the kernel tools that are listed).
    fn capabilities(&self) -> KernelCapabilities;

    /// The epoch of the notebook's live kernel, when one runs that has epochs. Never waits:
    /// reads use it to judge staleness.
    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64>;

    /// The notebook's running kernel, without starting one.
    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup>;

    /// The notebook's kernel, started (or restarted, when it died) if needed.
    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>>;

    /// Like [`NotebookKernels::start`], reporting the progress of a slow start (a JupyterHub
    /// spawning the user's server) to `progress` as fractions from 0 to 1 (total 1). Hosts
    /// whose starts are quick need not override it.
    fn start_with_progress<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
        progress: Option<Arc<dyn ProgressSink>>,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        let _ = progress;
        self.start(location, preference)
    }

    /// The kernels the notebook can use, and the one it would use.
    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>>;

    /// Selects the kernel with exactly this id for the notebook (an editor selects it now; a
    /// host that keeps the choice in the notebook returns the record to write).
    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>>;

    /// Sets the notebook's kernel up now: starts it, or asks the editor to.
    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>>;

    /// Like [`NotebookKernels::configure`], reporting a slow start's progress as
    /// [`NotebookKernels::start_with_progress`] does.
    fn configure_with_progress<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
        progress: Option<Arc<dyn ProgressSink>>,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        let _ = progress;
        self.configure(location, preference)
    }

    /// Restarts the notebook's kernel.
    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>>;

    /// Interrupts what the notebook's kernel is running.
    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>>;

    /// Stops the notebook's kernel; whether one ran.
    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>>;

    /// Stops every kernel (the host is going away).
    fn shutdown_all(&self) -> BoxFuture<'_, ()>;

    /// Runs of the notebook's cells that others made on its kernel since the last call, oldest
    /// first, so that staleness follows what actually ran. Never waits. Default: none (a host
    /// whose kernels only the tools use).
    fn observed_runs(&self, location: &NotebookLocation) -> Vec<ObservedRun> {
        let _ = location;
        Vec::new()
    }
}

/// A shared handle on a host's kernels.
pub type SharedKernels = Arc<dyn NotebookKernels>;

/// The progress of a kernel start inside a call that reports progress of its own afterwards
/// (a run). MCP wants each notification's progress above the last: the start's fractions are
/// kept strictly increasing below 1, and what the call reports after them counts from 1.
pub(crate) struct StartProgress {
    sink: Arc<dyn ProgressSink>,
    state: Arc<std::sync::Mutex<Option<f64>>>,
}

struct StartSink {
    sink: Arc<dyn ProgressSink>,
    state: Arc<std::sync::Mutex<Option<f64>>>,
}

struct AfterStart {
    sink: Arc<dyn ProgressSink>,
}

impl StartProgress {
    pub(crate) fn new(sink: Arc<dyn ProgressSink>) -> StartProgress {
        StartProgress {
            sink,
            state: Arc::default(),
        }
    }

    /// Where the start reports.
    pub(crate) fn sink(&self) -> Arc<dyn ProgressSink> {
        Arc::new(StartSink {
            sink: Arc::clone(&self.sink),
            state: Arc::clone(&self.state),
        })
    }

    /// Whether the start reported anything.
    pub(crate) fn reported(&self) -> bool {
        self.state.lock().expect("progress lock").is_some()
    }

    /// Where the call reports after the start: its progress and total shifted by 1.
    pub(crate) fn after(&self) -> Arc<dyn ProgressSink> {
        Arc::new(AfterStart {
            sink: Arc::clone(&self.sink),
        })
    }
}

impl ProgressSink for StartSink {
    fn report(&self, progress: f64, _total: Option<f64>, message: Option<String>) {
        let value = {
            let mut last = self.state.lock().expect("progress lock");
            let wanted = progress.clamp(0.0, 1.0) * 0.98;
            let value = match *last {
                Some(previous) if wanted <= previous => previous + (0.99 - previous) / 16.0,
                _ => wanted,
            };
            *last = Some(value);
            value
        };
        self.sink.report(value, Some(1.0), message);
    }
}

impl ProgressSink for AfterStart {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.sink
            .report(progress + 1.0, total.map(|total| total + 1.0), message);
    }
}

/// What one execution of helper code produced, gathered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// Everything written to stdout, in order.
    pub stdout: String,
    /// Everything written to stderr, in order.
    pub stderr: String,
    /// The binary buffers of its displays, in order.
    pub buffers: Vec<Vec<u8>>,
    /// What it raised, from its `error` output or its reply.
    pub error: Option<RaisedError>,
    /// The reply (absent when the execution ended otherwise).
    pub reply: Option<KernelReply>,
}

/// How long a tool that needs an idle kernel waits for a busy one. The status follows IOPub,
/// which trails a run's reply by a little (the agent's own run, or a person's).
pub(crate) const IDLE_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// The kernel's status once it is not busy, waiting up to [`IDLE_SETTLE`]; `None` while it is
/// still busy then. A session that stops reporting counts as dead.
pub(crate) async fn settled_status(
    mut status: watch::Receiver<KernelStatus>,
) -> Option<KernelStatus> {
    let settled = tokio::time::timeout(IDLE_SETTLE, async {
        match status
            .wait_for(|status| *status != KernelStatus::Busy)
            .await
        {
            Ok(status) => *status,
            Err(_) => KernelStatus::Dead,
        }
    })
    .await;
    settled.ok()
}

/// Gathers an execution's events until its end. A kernel that restarted, died or was lost
/// before replying is an error; so is a refused execution.
pub async fn collect(mut events: KernelEvents) -> Result<Collected, KernelError> {
    use futures::StreamExt;
    let mut collected = Collected::default();
    while let Some(event) = events.next().await {
        match event {
            KernelEvent::Output { event, buffers } => {
                collected.buffers.extend(buffers);
                match event {
                    IopubEvent::Stream { name, text } if name == "stderr" => {
                        collected.stderr.push_str(&text);
                    }
                    IopubEvent::Stream { text, .. } => collected.stdout.push_str(&text),
                    IopubEvent::Error {
                        ename,
                        evalue,
                        traceback,
                    } => {
                        collected.error = Some(RaisedError {
                            ename,
                            evalue,
                            traceback,
                        });
                    }
                    _ => {}
                }
            }
            KernelEvent::Reply(reply) => {
                if collected.error.is_none() {
                    collected.error = reply.error.clone();
                }
                collected.reply = Some(reply);
                return Ok(collected);
            }
            KernelEvent::Ended(KernelLifecycle::Restarted) => {
                return Err(KernelError::Restarted);
            }
            KernelEvent::Ended(_) | KernelEvent::NotebookClosed | KernelEvent::Lost => {
                return Err(KernelError::Gone);
            }
            KernelEvent::Refused { .. } => {
                return Err(KernelError::unavailable(
                    "the host refused to run the request",
                ));
            }
            KernelEvent::Busy
            | KernelEvent::Idle
            | KernelEvent::Replied { .. }
            | KernelEvent::ActionRequired { .. }
            | KernelEvent::CommandSettled => {}
        }
    }
    Err(KernelError::Gone)
}

/// An nbformat output as the IOPub event that would have produced it (for hosts whose
/// editor reports outputs rather than kernel messages).
pub fn iopub_of_output(output: &Value) -> Option<IopubEvent> {
    let mut message = output.as_object()?.clone();
    let output_type = message.remove("output_type")?;
    if let Some(Value::Array(parts)) = message.get("text") {
        let joined: String = parts.iter().filter_map(Value::as_str).collect();
        message.insert("text".to_owned(), Value::String(joined));
    }
    if let Some(Value::Array(parts)) = message.get("traceback")
        && parts.iter().any(|part| !part.is_string())
    {
        message.remove("traceback");
    }
    message.insert("msg_type".to_owned(), output_type);
    serde_json::from_value(Value::Object(message)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Default)]
    struct Recorded(std::sync::Mutex<Vec<(f64, Option<f64>)>>);

    impl ProgressSink for Recorded {
        fn report(&self, progress: f64, total: Option<f64>, _message: Option<String>) {
            self.0.lock().unwrap().push((progress, total));
        }
    }

    #[test]
    fn start_progress_increases_and_what_follows_counts_on_after_it() {
        let recorded = Arc::new(Recorded::default());
        let start = StartProgress::new(recorded.clone());
        assert!(!start.reported());
        let sink = start.sink();
        // The hub's own events repeat values (two at 0) and end at 100 %.
        for fraction in [0.0, 0.0, 0.5, 1.0, 1.0] {
            sink.report(fraction, Some(1.0), None);
        }
        assert!(start.reported());
        start.after().report(0.0, Some(2.0), None);
        start.after().report(2.0, Some(2.0), None);
        let values = recorded.0.lock().unwrap().clone();
        assert!(
            values.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "strictly increasing: {values:?}"
        );
        assert!(
            values[..5]
                .iter()
                .all(|(value, total)| *value < 1.0 && *total == Some(1.0))
        );
        assert_eq!(values[5], (1.0, Some(3.0)));
        assert_eq!(values[6], (3.0, Some(3.0)));
    }

    #[test]
    fn outputs_become_the_events_that_make_them() {
        let stream =
            iopub_of_output(&json!({"output_type":"stream","name":"stdout","text":["a\n","b"]}));
        assert_eq!(
            stream,
            Some(IopubEvent::Stream {
                name: "stdout".to_owned(),
                text: "a\nb".to_owned()
            })
        );
        let error = iopub_of_output(
            &json!({"output_type":"error","ename":"ValueError","evalue":"x","traceback":[]}),
        );
        assert!(matches!(error, Some(IopubEvent::Error { .. })));
        assert_eq!(iopub_of_output(&json!({"text": "no type"})), None);
    }
}
