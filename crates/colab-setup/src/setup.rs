//! The state machine of one Colab setup: events in, actions out.
//!
//! A setup walks its stages in order (`preparing → acquiring_server →
//! awaiting_kernel_selection → starting_kernel → mounting → verifying → complete`), skipping
//! those its route does not need. At most one *flow* command is in flight at a time: the one the
//! setup waits on. Cleanup commands (release, removal, dismissal, the check's cleanup) may follow
//! a terminal status; the setup is *settled* only when every command it dispatched has been
//! answered.
//!
//! Time comes in with every event. The deadline (five minutes by default) counts from admission
//! and includes time spent waiting for a kernel choice or for the user; the first event at or
//! after it fails the setup. Each command carries its own deadline too: a flow command without
//! an answer by then fails the setup, and stays outstanding until the host answers it.

use std::collections::BTreeMap;
use std::fmt;

use crate::choices::ChoiceListing;
use crate::error::{ErrorBody, SetupError};
use crate::names::{FileServiceRoot, Nonce, ServerAlias, SessionName, SetupId};
use crate::picker::{
    PickerLabels, PickerRow, PickerView, RowMatch, UserPrompt, find_row, server_rows,
};
use crate::probe::{
    CheckAction, CheckCommandKind, CheckEvent, CheckReply, CheckStep, CheckTimeouts, ColabCheck,
    KernelFailure,
};
use crate::receipt::{ActionRequired, RetainReason, RouteKind, SetupReceipt};
use crate::servers::{Availability, ServerRow, resolve_server};
use crate::wire::{ActionCode, ProviderStep, SetupStatus, Stage};

/// The source of the temporary startup cell.
pub const STARTUP_CELL_SOURCE: &str = "pass";

/// Where the runtime comes from, and which server to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Standalone: the session with exactly this name in google-colab-cli's sessions file.
    /// Never creates a runtime.
    SessionsFile {
        /// The session's name.
        session: SessionName,
    },
    /// Standalone: the runtime URL and proxy-token file the user gave. Never creates one.
    RuntimeUrl,
    /// Standalone, experimental: Colab's tunnel API. With `reuse`, only the existing assignment
    /// of that alias; without, a new CPU assignment under a generated alias.
    Tunnel {
        /// The alias of an earlier assignment to reuse.
        reuse: Option<ServerAlias>,
    },
    /// VS Code: the Colab extension's kernel picker. With `reuse`, only the exact server row of
    /// that alias; without, New Colab Server → CPU under a generated alias.
    Picker {
        /// The alias of an MCP-created server to reuse.
        reuse: Option<ServerAlias>,
    },
    /// VS Code: mount the MCP-created server with this alias for the notebook's already active
    /// idle Python kernel, then verify (`mount_colab_server`). Selects and starts nothing.
    MountServer {
        /// The server's alias.
        alias: ServerAlias,
    },
}

impl Route {
    /// The route's wire name.
    pub fn kind(&self) -> RouteKind {
        match self {
            Route::SessionsFile { .. } => RouteKind::SessionsFile,
            Route::RuntimeUrl => RouteKind::RuntimeUrl,
            Route::Tunnel { .. } => RouteKind::Tunnel,
            Route::Picker { .. } => RouteKind::Picker,
            Route::MountServer { .. } => RouteKind::MountServer,
        }
    }

    /// Whether the route may create a server (and so needs a generated alias).
    pub fn creates_server(&self) -> bool {
        matches!(
            self,
            Route::Tunnel { reuse: None } | Route::Picker { reuse: None }
        )
    }

    fn is_vscode(&self) -> bool {
        matches!(self, Route::Picker { .. } | Route::MountServer { .. })
    }
}

/// A setup to admit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupRequest {
    /// The notebook's key as the host names it.
    pub notebook: String,
    /// Where the runtime comes from.
    pub route: Route,
}

/// The random bytes one setup needs, drawn by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupEntropy {
    /// For the setup id's suffix.
    pub id: u64,
    /// For a generated server alias.
    pub alias: [u8; 4],
    /// For the verification probe's nonce.
    pub nonce: [u8; 16],
}

/// The timing and labels of setups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetupConfig {
    /// The whole setup's deadline from admission, including time awaiting a choice: 5 min.
    pub deadline_ms: u64,
    /// How long a host command may take before the setup stops waiting for it: 60 s.
    pub command_timeout_ms: u64,
    /// How soon a transitional picker view is observed again: 500 ms.
    pub poll_interval_ms: u64,
    /// How soon a command that needed credentials is retried: 5 s.
    pub retry_interval_ms: u64,
    /// How long the picker may stay closed before the setup gives up: 60 s.
    pub picker_closed_timeout_ms: u64,
    /// The labels the picker path looks for.
    pub labels: PickerLabels,
    /// The verification's per-step deadlines.
    pub check: CheckTimeouts,
}

impl Default for SetupConfig {
    fn default() -> Self {
        SetupConfig {
            deadline_ms: 5 * 60 * 1000,
            command_timeout_ms: 60_000,
            poll_interval_ms: 500,
            retry_interval_ms: 5_000,
            picker_closed_timeout_ms: 60_000,
            labels: PickerLabels::default(),
            check: CheckTimeouts::default(),
        }
    }
}

/// The id of one command a setup dispatched; replies name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommandId(pub u32);

impl fmt::Display for CommandId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "c{}", self.0)
    }
}

/// What the host must do. Each kind says which [`Reply`] answers it; any command may also be
/// answered with [`Reply::Failed`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandKind {
    /// Check the provider can be used: in VS Code, that the Colab extension is active (a cached
    /// activation failure counts as unavailable); for the tunnel, that Google credentials exist.
    /// Answer [`Reply::Done`].
    CheckProvider,
    /// Read google-colab-cli's sessions file under its shared lock and list its sessions.
    /// Answer [`Reply::Servers`].
    ReadSessions,
    /// Check the given runtime URL answers with its proxy token. Answer [`Reply::Done`].
    ProbeRuntime,
    /// The tunnel's `GET assign` for this alias's notebook hash, without a `POST`. Answer
    /// [`Reply::AssignmentFound`] or [`Reply::NoAssignment`].
    LookupAssignment {
        /// The alias.
        alias: ServerAlias,
    },
    /// The tunnel's `GET` then `POST assign` for a CPU runtime under this alias. Answer
    /// [`Reply::AssignmentCreated`], [`Reply::AssignmentFound`] (it already existed) or
    /// [`Reply::AssignmentRefused`]; [`Failure::Unconfirmed`] if the `POST` may have happened.
    CreateAssignment {
        /// The alias.
        alias: ServerAlias,
    },
    /// The tunnel's `unassign` of a runtime this setup created. Answer [`Reply::Done`].
    ReleaseRuntime {
        /// The runtime's endpoint.
        endpoint: String,
    },
    /// Open VS Code's kernel picker for the exact notebook editor. Answer [`Reply::Done`].
    OpenKernelPicker,
    /// Project the open picker. Answer [`Reply::Picker`].
    ObservePicker,
    /// Focus-check, then choose the one enabled row with exactly this label, re-checking the
    /// label before the click. Answer [`Reply::Done`], or [`Reply::RowChanged`] if it differs.
    ChooseRow {
        /// The step this choice performs.
        step: ProviderStep,
        /// The row's label.
        label: String,
    },
    /// Type the alias into the open input box and read it back. Answer [`Reply::AliasReadBack`].
    TypeAlias {
        /// The alias.
        alias: ServerAlias,
    },
    /// Submit the open input box. Answer [`Reply::Done`].
    SubmitInput,
    /// Close whatever picker the setup left open. Answer [`Reply::Done`].
    DismissPicker,
    /// Observe the server's current kernel choices (the open kernel list in VS Code, the
    /// kernelspecs in the standalone host). Answer [`Reply::KernelChoices`].
    ObserveKernelChoices,
    /// VS Code: re-check that the open kernel list still equals `listing`, then choose the row
    /// at `position` with this label. Answer [`Reply::KernelSelected`] with VS Code's boolean
    /// confirmation, or [`Reply::ListingChanged`].
    SelectKernelChoice {
        /// The label.
        label: String,
        /// Its position in the listing.
        position: usize,
        /// The listing's labels, in order.
        listing: Vec<String>,
    },
    /// Standalone: re-check the kernelspecs still equal `listing`, then start a kernel of the
    /// spec with this label. Answer [`Reply::Done`], or [`Reply::ListingChanged`].
    StartKernel {
        /// The label.
        label: String,
        /// The listing's labels, in order.
        listing: Vec<String>,
    },
    /// VS Code: insert a code cell with this source at the end of the notebook. Answer
    /// [`Reply::CellInserted`].
    InsertTemporaryCell {
        /// `pass`.
        source: &'static str,
    },
    /// VS Code: run that cell on the selected kernel. Answer [`Reply::CellRan`] only once its
    /// execution has settled.
    RunTemporaryCell {
        /// The cell's id.
        cell_id: String,
    },
    /// VS Code: remove that cell if it is idle and still has exactly this source. Answer
    /// [`Reply::CellRemoved`] or [`Reply::CellRetained`].
    RemoveTemporaryCell {
        /// The cell's id.
        cell_id: String,
        /// The source it must still have.
        source: &'static str,
    },
    /// `mount_colab_server`, before anything else: find the one file-service root already
    /// mounted for exactly this alias, without opening any picker (in VS Code, a `colab://`
    /// workspace folder of that server). Answer [`Reply::FileService`] with it, or
    /// [`Reply::NotMounted`] when there is none; several for one alias fail the setup.
    FindMountedServer {
        /// The alias.
        alias: ServerAlias,
    },
    /// VS Code: `colab.mountServer`, choosing exactly this alias; require one newly added
    /// matching root (or reuse the one workspace folder already mounted for it). Answer
    /// [`Reply::FileService`].
    MountServer {
        /// The alias.
        alias: ServerAlias,
    },
    /// Standalone: connect the runtime's Contents API behind Colab's proxy. Answer
    /// [`Reply::FileService`].
    ConnectFileService,
    /// A step of the verification; see [`CheckCommandKind`]. Answer [`Reply::Check`].
    Check {
        /// The step.
        step: CheckStep,
        /// What to do.
        command: CheckCommandKind,
    },
}

/// A command to perform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command {
    /// Its id, for the reply.
    pub id: CommandId,
    /// What to do.
    pub kind: CommandKind,
    /// After this time the setup stops waiting; the host should give up and answer.
    pub deadline_ms: u64,
}

/// How a command failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failure {
    /// It certainly had no effect.
    NotPerformed,
    /// It may have taken effect (a timeout, a lost answer).
    Unconfirmed,
    /// It needs the user to sign in or refresh credentials; it had no effect.
    AuthenticationRequired,
    /// The provider or service cannot do it (activation failed, runtime unreachable, picker
    /// gone); it had no effect.
    Unavailable,
}

/// Colab's refusal of an assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AssignRefusal {
    /// HTTP 412.
    TooManyAssignments,
    /// HTTP 503.
    AcceleratorUnavailable,
    /// A quota denial in the `outcome` field.
    QuotaDenied,
}

/// How the temporary cell's execution settled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CellRun {
    /// It completed without error.
    Completed,
    /// It failed or was interrupted.
    Failed,
}

/// The host's answer to a [`Command`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Done, nothing to report.
    Done,
    /// Not done; see [`Failure`].
    Failed(Failure),
    /// The listed servers or sessions.
    Servers(Vec<ServerRow>),
    /// An assignment exists (it was not created by this command).
    AssignmentFound {
        /// Its endpoint.
        endpoint: String,
    },
    /// No assignment exists.
    NoAssignment,
    /// No file-service root is mounted for the alias yet.
    NotMounted,
    /// A new assignment was created.
    AssignmentCreated {
        /// Its endpoint.
        endpoint: String,
    },
    /// Colab refused the assignment.
    AssignmentRefused(AssignRefusal),
    /// The picker's current view.
    Picker(PickerView),
    /// The chosen row's label changed before the click; nothing was chosen.
    RowChanged,
    /// What the input box reads after typing.
    AliasReadBack {
        /// The value.
        value: String,
    },
    /// The observed kernel choices.
    KernelChoices {
        /// Labels in order.
        labels: Vec<String>,
        /// False when the list was still loading, filtered or cut short.
        complete: bool,
    },
    /// The kernel choice was clicked; VS Code's confirmation, if it gave one.
    KernelSelected {
        /// `Some(true)` only when VS Code confirmed the selection.
        confirmed: Option<bool>,
    },
    /// The choices differ from the listing; nothing was selected or started.
    ListingChanged,
    /// The temporary cell exists.
    CellInserted {
        /// Its id.
        cell_id: String,
    },
    /// The temporary cell's execution settled.
    CellRan(CellRun),
    /// The temporary cell was removed.
    CellRemoved,
    /// The temporary cell was left in place.
    CellRetained(RetainReason),
    /// The runtime's file service is connected at this root.
    FileService {
        /// The root.
        root: FileServiceRoot,
    },
    /// A verification step's answer.
    Check(CheckReply),
}

/// What happens to a setup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupEvent {
    /// Time passed (the host ticks about every 250 ms while a setup is unsettled).
    Tick,
    /// A command's answer.
    Reply {
        /// The command answered.
        command: CommandId,
        /// The answer.
        reply: Reply,
    },
    /// `list_setup_kernels`: observe the choices afresh; older ids die now.
    ListChoices {
        /// Random bytes for the new listing's ids.
        token: [u8; 4],
    },
    /// `select_setup_kernel`.
    SelectChoice {
        /// An id from the latest listing.
        choice_id: String,
    },
    /// `cancel_kernel_setup`.
    Cancel,
}

/// What the setup asks of the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupAction {
    /// Perform this command, then answer with [`SetupEvent::Reply`].
    Perform(Command),
    /// The setup reached this terminal status (once). Cleanup may still be pending.
    Finished(SetupStatus),
}

/// Why a command was dispatched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    /// The flow waits on it.
    Flow,
    /// Undoing what the setup created.
    Cleanup,
    /// A verification step.
    Check(CheckStep),
}

#[derive(Clone, Debug)]
struct Outstanding {
    kind: CommandKind,
    purpose: Purpose,
    deadline_ms: u64,
    /// The setup stopped waiting for it.
    expired: bool,
}

/// What the setup knows of the runtime it uses.
#[derive(Clone, Debug, Default)]
struct Runtime {
    endpoint: Option<String>,
    /// This setup's assignment request created it.
    created_here: bool,
    /// An assignment request may have created one that was never confirmed.
    creation_unconfirmed: bool,
    release: Release,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Release {
    #[default]
    NotAttempted,
    Pending,
    Done,
    Failed,
}

/// What the setup knows of its temporary cell.
#[derive(Clone, Debug, Default)]
struct StartupCell {
    id: Option<String>,
    insert_outstanding: bool,
    insert_unconfirmed: bool,
    run_outstanding: bool,
    remove_outstanding: bool,
    removed: bool,
    retained: Option<RetainReason>,
}

/// Progress along the picker path.
#[derive(Clone, Debug, Default)]
struct PickerProgress {
    /// The step after the current `ChooseRow`.
    after_choice: Option<ProviderStep>,
    handoff_used: bool,
    empty_prompt_seen: bool,
    new_server: bool,
    cpu_chosen: bool,
    shape_chosen: bool,
    version_chosen: bool,
    /// The alias was submitted: from here a new server may exist.
    alias_submitted: bool,
    /// The kernel list showed the alias.
    alias_confirmed: bool,
    closed_since_ms: Option<u64>,
    /// A picker may be open (the setup opened it and has not closed it).
    open: bool,
    dismissed: bool,
}

/// A command to dispatch when its time comes.
#[derive(Clone, Debug)]
struct Wake {
    at_ms: u64,
    kind: CommandKind,
}

/// One Colab setup.
#[derive(Clone, Debug)]
pub struct Setup {
    id: SetupId,
    notebook: String,
    route: Route,
    config: SetupConfig,
    alias: Option<ServerAlias>,
    nonce: Nonce,
    started_at_ms: u64,
    deadline_at_ms: u64,
    finished_at_ms: Option<u64>,
    stage: Stage,
    provider_step: Option<ProviderStep>,
    terminal: Option<SetupStatus>,
    error: Option<SetupError>,
    failed_stage: Option<Stage>,
    failed_provider_step: Option<ProviderStep>,
    /// A user action other than the kernel selection.
    user_action: Option<ActionCode>,
    flow: Option<CommandId>,
    outstanding: BTreeMap<CommandId, Outstanding>,
    next_command: u32,
    wake: Option<Wake>,
    runtime: Runtime,
    cell: StartupCell,
    picker: PickerProgress,
    listing: Option<ChoiceListing>,
    listings_made: u32,
    listing_token: Option<[u8; 4]>,
    listing_problem: Option<SetupError>,
    selection: Option<(usize, String)>,
    kernel_label: Option<String>,
    check: Option<ColabCheck>,
    finished_reported: bool,
    started: bool,
    version: u64,
}

impl Setup {
    /// A new setup in stage `requested`; [`Setup::start`] dispatches its first command.
    pub fn new(
        id: SetupId,
        request: SetupRequest,
        entropy: SetupEntropy,
        config: SetupConfig,
        now_ms: u64,
    ) -> Self {
        let alias = match &request.route {
            Route::Tunnel { reuse: Some(alias) }
            | Route::Picker { reuse: Some(alias) }
            | Route::MountServer { alias } => Some(alias.clone()),
            Route::Tunnel { reuse: None } | Route::Picker { reuse: None } => {
                Some(ServerAlias::generate(entropy.alias))
            }
            Route::SessionsFile { .. } | Route::RuntimeUrl => None,
        };
        Setup {
            id,
            notebook: request.notebook,
            route: request.route,
            config,
            alias,
            nonce: Nonce::from_bytes(entropy.nonce),
            started_at_ms: now_ms,
            deadline_at_ms: now_ms.saturating_add(config.deadline_ms),
            finished_at_ms: None,
            stage: Stage::Requested,
            provider_step: None,
            terminal: None,
            error: None,
            failed_stage: None,
            failed_provider_step: None,
            user_action: None,
            flow: None,
            outstanding: BTreeMap::new(),
            next_command: 0,
            wake: None,
            runtime: Runtime::default(),
            cell: StartupCell::default(),
            picker: PickerProgress::default(),
            listing: None,
            listings_made: 0,
            listing_token: None,
            listing_problem: None,
            selection: None,
            kernel_label: None,
            check: None,
            finished_reported: false,
            started: false,
            version: 0,
        }
    }

    /// Dispatches the route's first command. Call once, right after admission.
    pub fn start(&mut self, now_ms: u64) -> Vec<SetupAction> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            let before = self.fingerprint();
            self.begin(now_ms, &mut out);
            self.bump_if_changed(&before);
        }
        out
    }

    /// Applies an event. A refused event (`Err`) changed nothing.
    pub fn apply(
        &mut self,
        event: SetupEvent,
        now_ms: u64,
    ) -> Result<Vec<SetupAction>, SetupError> {
        match &event {
            SetupEvent::ListChoices { .. } => self.check_selectable(now_ms, false)?,
            SetupEvent::SelectChoice { choice_id } => {
                self.check_selectable(now_ms, true)?;
                self.find_choice(choice_id)?;
            }
            SetupEvent::Tick | SetupEvent::Reply { .. } | SetupEvent::Cancel => {}
        }
        let before = self.fingerprint();
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            self.begin(now_ms, &mut out);
        }
        match event {
            SetupEvent::Tick => {}
            SetupEvent::Reply { command, reply } => self.on_reply(command, reply, now_ms, &mut out),
            SetupEvent::Cancel => {
                if self.terminal.is_none() && now_ms < self.deadline_at_ms {
                    self.terminate(
                        SetupStatus::Cancelled,
                        Some(SetupError::Cancelled),
                        now_ms,
                        &mut out,
                    );
                }
            }
            SetupEvent::ListChoices { token } => self.on_list(token, now_ms, &mut out),
            SetupEvent::SelectChoice { choice_id } => self.on_select(&choice_id, now_ms, &mut out),
        }
        self.on_time(now_ms, &mut out);
        self.bump_if_changed(&before);
        Ok(out)
    }

    /// The setup's id.
    pub fn id(&self) -> &SetupId {
        &self.id
    }

    /// The notebook it belongs to.
    pub fn notebook(&self) -> &str {
        &self.notebook
    }

    /// Its route.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The server alias, once it exists.
    pub fn alias(&self) -> Option<&ServerAlias> {
        self.alias.as_ref()
    }

    /// Its status.
    pub fn status(&self) -> SetupStatus {
        if let Some(terminal) = self.terminal {
            return terminal;
        }
        if self.user_action.is_some() {
            SetupStatus::AwaitingUser
        } else if self.awaiting_selection() {
            SetupStatus::AwaitingKernelSelection
        } else {
            SetupStatus::Running
        }
    }

    /// Its stage.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// Whether the status is terminal.
    pub fn is_terminal(&self) -> bool {
        self.terminal.is_some()
    }

    /// Terminal, with every dispatched command answered. An unsettled setup blocks its notebook.
    pub fn is_settled(&self) -> bool {
        self.terminal.is_some() && self.outstanding.is_empty()
    }

    /// Terminal, with commands still to settle.
    pub fn cleanup_pending(&self) -> bool {
        self.terminal.is_some() && !self.outstanding.is_empty()
    }

    /// When the deadline falls.
    pub fn deadline_at_ms(&self) -> u64 {
        self.deadline_at_ms
    }

    /// When the setup was admitted.
    pub fn started_at_ms(&self) -> u64 {
        self.started_at_ms
    }

    /// A counter that moves whenever the receipt changes; `waitMs` waits watch it.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The commands dispatched and not answered, with their kinds.
    pub fn outstanding(&self) -> impl Iterator<Item = (CommandId, &CommandKind)> {
        self.outstanding
            .iter()
            .map(|(id, outstanding)| (*id, &outstanding.kind))
    }

    /// The latest kernel-choice listing, or why there is none.
    pub fn choice_listing(&self) -> Result<&ChoiceListing, SetupError> {
        if let Some(listing) = &self.listing {
            return Ok(listing);
        }
        if let Some(problem) = &self.listing_problem {
            return Err(problem.clone());
        }
        if !self.awaiting_selection() && !self.is_terminal() {
            return Err(SetupError::NotAwaitingSelection { stage: self.stage });
        }
        Err(SetupError::ListingPending)
    }

    /// The verification, once started.
    pub fn check(&self) -> Option<&ColabCheck> {
        self.check.as_ref()
    }

    /// The receipt.
    pub fn receipt(&self) -> SetupReceipt {
        let status = self.status();
        let terminal = self.terminal.is_some();
        let ready = status == SetupStatus::Ready;
        let action_required = if terminal {
            None
        } else if let Some(code) = self.user_action {
            Some(ActionRequired::for_code(code))
        } else if self.awaiting_selection() {
            Some(ActionRequired::for_code(ActionCode::SelectKernelChoice))
        } else {
            None
        };
        let awaiting = self.stage == Stage::AwaitingKernelSelection && !terminal;
        SetupReceipt {
            setup_id: self.id.clone(),
            notebook_ref: self.notebook.clone(),
            route: self.route.kind(),
            status,
            stage: self.stage,
            provider_step: self.provider_step,
            failed_stage: self.failed_stage,
            failed_provider_step: self.failed_provider_step,
            action_required,
            server_alias: self.alias.clone(),
            session_name: match &self.route {
                Route::SessionsFile { session } => Some(session.clone()),
                _ => None,
            },
            server_created: self.server_created(),
            server_may_remain: terminal && !ready && self.server_may_remain(),
            runtime_released: self.runtime.release == Release::Done,
            startup_cell_retained: self.retained_reason().is_some(),
            startup_cell_retained_reason: self.retained_reason(),
            cleanup_pending: self.cleanup_pending(),
            ready,
            kernel_label: self.kernel_label.clone(),
            kernel_choices: if awaiting { self.listing.clone() } else { None },
            listing_problem: if awaiting {
                self.listing_problem.as_ref().map(ErrorBody::from)
            } else {
                None
            },
            error: self.error.as_ref().map(ErrorBody::from),
            started_at_ms: self.started_at_ms,
            deadline_at_ms: self.deadline_at_ms,
            finished_at_ms: self.finished_at_ms,
            verification: self.check.as_ref().map(ColabCheck::receipt),
        }
    }

    // Derived state.

    fn awaiting_selection(&self) -> bool {
        self.terminal.is_none()
            && self.stage == Stage::AwaitingKernelSelection
            && self.selection.is_none()
    }

    fn server_created(&self) -> bool {
        self.runtime.created_here || (self.picker.new_server && self.picker.alias_confirmed)
    }

    fn server_may_remain(&self) -> bool {
        let runtime_left = self.runtime.created_here && self.runtime.release != Release::Done;
        let picker_server = self.picker.new_server && self.picker.alias_submitted;
        runtime_left || self.runtime.creation_unconfirmed || picker_server
    }

    fn retained_reason(&self) -> Option<RetainReason> {
        if self.cell.removed {
            return None;
        }
        if let Some(reason) = self.cell.retained {
            return Some(reason);
        }
        if self.terminal.is_none() || self.cell.remove_outstanding {
            return None;
        }
        if self.cell.run_outstanding {
            Some(RetainReason::QueuedOrRunning)
        } else if self.cell.insert_outstanding || self.cell.insert_unconfirmed {
            Some(RetainReason::InsertionUnconfirmed)
        } else {
            None
        }
    }

    fn fingerprint(&self) -> String {
        serde_json::to_string(&self.receipt()).unwrap_or_default()
    }

    fn bump_if_changed(&mut self, before: &str) {
        if self.fingerprint() != before {
            self.version += 1;
        }
    }

    // Validation of client commands (nothing changes on error).

    fn check_selectable(&self, now_ms: u64, selecting: bool) -> Result<(), SetupError> {
        if let Some(status) = self.terminal {
            return Err(SetupError::SetupFinished { status });
        }
        if now_ms >= self.deadline_at_ms {
            // The deadline has passed; the next tick fails the setup.
            return Err(SetupError::SetupFinished {
                status: SetupStatus::Failed,
            });
        }
        if self.stage != Stage::AwaitingKernelSelection {
            return Err(SetupError::NotAwaitingSelection { stage: self.stage });
        }
        if self.selection.is_some() {
            return Err(SetupError::SelectionInProgress);
        }
        if selecting && self.listing_token.is_some() {
            return Err(SetupError::ListingPending);
        }
        Ok(())
    }

    fn find_choice(&self, choice_id: &str) -> Result<(usize, String), SetupError> {
        self.listing
            .as_ref()
            .and_then(|listing| listing.find(choice_id))
            .map(|(position, choice)| (position, choice.label.clone()))
            .ok_or_else(|| SetupError::ChoiceStale {
                choice_id: choice_id.to_owned(),
            })
    }

    // Dispatch.

    fn issue(
        &mut self,
        kind: CommandKind,
        purpose: Purpose,
        deadline_ms: u64,
        out: &mut Vec<SetupAction>,
    ) -> CommandId {
        let id = CommandId(self.next_command);
        self.next_command += 1;
        match &kind {
            CommandKind::CreateAssignment { .. } => self.runtime.creation_unconfirmed = true,
            CommandKind::InsertTemporaryCell { .. } => self.cell.insert_outstanding = true,
            CommandKind::RunTemporaryCell { .. } => self.cell.run_outstanding = true,
            CommandKind::RemoveTemporaryCell { .. } => self.cell.remove_outstanding = true,
            CommandKind::ReleaseRuntime { .. } => self.runtime.release = Release::Pending,
            CommandKind::OpenKernelPicker => self.picker.open = true,
            CommandKind::SubmitInput => self.picker.alias_submitted = true,
            CommandKind::DismissPicker => self.picker.dismissed = true,
            _ => {}
        }
        self.outstanding.insert(
            id,
            Outstanding {
                kind: kind.clone(),
                purpose,
                deadline_ms,
                expired: false,
            },
        );
        if purpose == Purpose::Flow {
            self.flow = Some(id);
        }
        out.push(SetupAction::Perform(Command {
            id,
            kind,
            deadline_ms,
        }));
        id
    }

    fn flow_command(&mut self, kind: CommandKind, now_ms: u64, out: &mut Vec<SetupAction>) {
        let deadline = now_ms.saturating_add(self.config.command_timeout_ms);
        self.issue(kind, Purpose::Flow, deadline, out);
    }

    fn cleanup_command(&mut self, kind: CommandKind, now_ms: u64, out: &mut Vec<SetupAction>) {
        let deadline = now_ms.saturating_add(self.config.command_timeout_ms);
        self.issue(kind, Purpose::Cleanup, deadline, out);
    }

    /// Dispatches `kind` once `delay_ms` has passed (on a later tick).
    fn later(&mut self, kind: CommandKind, delay_ms: u64, now_ms: u64) {
        self.wake = Some(Wake {
            at_ms: now_ms.saturating_add(delay_ms),
            kind,
        });
    }

    fn begin(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        match self.route.clone() {
            Route::SessionsFile { .. } => {
                self.enter_acquiring(ProviderStep::SessionsFile);
                self.flow_command(CommandKind::ReadSessions, now_ms, out);
            }
            Route::RuntimeUrl => {
                self.enter_acquiring(ProviderStep::RuntimeProbe);
                self.flow_command(CommandKind::ProbeRuntime, now_ms, out);
            }
            // A server mounted already is reused before the provider is touched: reuse needs
            // no picker, no driver and no sign-in.
            Route::MountServer { alias } => {
                self.stage = Stage::Preparing;
                self.flow_command(CommandKind::FindMountedServer { alias }, now_ms, out);
            }
            Route::Tunnel { .. } | Route::Picker { .. } => {
                self.stage = Stage::Preparing;
                self.flow_command(CommandKind::CheckProvider, now_ms, out);
            }
        }
    }

    fn enter_acquiring(&mut self, step: ProviderStep) {
        self.stage = Stage::AcquiringServer;
        self.provider_step = Some(step);
    }

    /// After the provider check: the route's acquisition.
    fn after_preparing(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        match self.route.clone() {
            Route::Tunnel { reuse: Some(alias) } => {
                let kind = CommandKind::LookupAssignment { alias };
                self.enter_acquiring(ProviderStep::AssignmentLookup);
                self.flow_command(kind, now_ms, out);
            }
            Route::Tunnel { reuse: None } => {
                let alias = self.alias.clone().expect("a creating route has an alias");
                let kind = CommandKind::CreateAssignment { alias };
                self.enter_acquiring(ProviderStep::AssignmentRequest);
                self.flow_command(kind, now_ms, out);
            }
            Route::Picker { .. } => {
                self.enter_acquiring(ProviderStep::KernelPicker);
                self.flow_command(CommandKind::OpenKernelPicker, now_ms, out);
            }
            Route::MountServer { .. } => self.enter_mounting(now_ms, out),
            Route::SessionsFile { .. } | Route::RuntimeUrl => {
                unreachable!("standalone file and URL routes have no preparing stage")
            }
        }
    }

    fn enter_awaiting_selection(&mut self) {
        self.stage = Stage::AwaitingKernelSelection;
        if !self.route.is_vscode() {
            self.provider_step = None;
        }
    }

    fn enter_starting(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        self.stage = Stage::StartingKernel;
        self.provider_step = None;
        self.picker.open = false;
        self.flow_command(
            CommandKind::InsertTemporaryCell {
                source: STARTUP_CELL_SOURCE,
            },
            now_ms,
            out,
        );
    }

    fn enter_mounting(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        self.stage = Stage::Mounting;
        self.provider_step = None;
        let kind = match &self.route {
            Route::Picker { .. } | Route::MountServer { .. } => CommandKind::MountServer {
                alias: self.alias.clone().expect("VS Code routes have an alias"),
            },
            Route::SessionsFile { .. } | Route::RuntimeUrl | Route::Tunnel { .. } => {
                CommandKind::ConnectFileService
            }
        };
        self.flow_command(kind, now_ms, out);
    }

    fn enter_verifying(&mut self, root: FileServiceRoot, now_ms: u64, out: &mut Vec<SetupAction>) {
        self.stage = Stage::Verifying;
        let mut check = ColabCheck::new(root, self.nonce.clone(), self.config.check, now_ms);
        let actions = check.start(now_ms);
        self.check = Some(check);
        self.on_check_actions(actions, now_ms, out);
    }

    // Terminal states.

    fn fail(&mut self, error: SetupError, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_none() {
            self.failed_stage = Some(self.stage);
            self.failed_provider_step = self.provider_step;
            self.terminate(SetupStatus::Failed, Some(error), now_ms, out);
        }
    }

    /// Ends the setup with a terminal status; `error` says why it did not become ready.
    fn terminate(
        &mut self,
        status: SetupStatus,
        error: Option<SetupError>,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        self.terminal = Some(status);
        self.error = error;
        self.finished_at_ms = Some(now_ms);
        self.flow = None;
        self.wake = None;
        self.user_action = None;
        self.listing_token = None;
        if !self.finished_reported {
            self.finished_reported = true;
            out.push(SetupAction::Finished(status));
        }
        if status != SetupStatus::Ready
            && let Some(check) = &mut self.check
        {
            let actions = check.apply(CheckEvent::Cancel, now_ms);
            self.on_check_actions(actions, now_ms, out);
        }
        self.plan_cleanup(now_ms, out);
    }

    /// Dispatches whatever cleanup has become possible. Idempotent.
    fn plan_cleanup(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_none() || self.terminal == Some(SetupStatus::Ready) {
            return;
        }
        let cell = &self.cell;
        if let Some(cell_id) = cell.id.clone()
            && !cell.removed
            && cell.retained.is_none()
            && !cell.insert_outstanding
            && !cell.run_outstanding
            && !cell.remove_outstanding
        {
            self.cleanup_command(
                CommandKind::RemoveTemporaryCell {
                    cell_id,
                    source: STARTUP_CELL_SOURCE,
                },
                now_ms,
                out,
            );
        }
        if self.runtime.created_here
            && self.runtime.release == Release::NotAttempted
            && let Some(endpoint) = self.runtime.endpoint.clone()
        {
            self.cleanup_command(CommandKind::ReleaseRuntime { endpoint }, now_ms, out);
        }
        if self.picker.open && !self.picker.dismissed {
            self.cleanup_command(CommandKind::DismissPicker, now_ms, out);
        }
    }

    // Time.

    fn on_time(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_none() && now_ms >= self.deadline_at_ms {
            let waiting_for = if self.user_action.is_some() {
                self.user_action
            } else if self.awaiting_selection() {
                Some(ActionCode::SelectKernelChoice)
            } else {
                None
            };
            let error = SetupError::DeadlineExceeded {
                stage: self.stage,
                deadline_ms: self.config.deadline_ms,
                waiting_for,
            };
            self.fail(error, now_ms, out);
        }
        let expired: Vec<CommandId> = self
            .outstanding
            .iter()
            .filter(|(_, entry)| {
                !entry.expired
                    && now_ms >= entry.deadline_ms
                    && !matches!(entry.purpose, Purpose::Check(_))
            })
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(entry) = self.outstanding.get_mut(&id) {
                entry.expired = true;
            }
            if self.flow == Some(id) {
                self.flow = None;
                let assignment = self.outstanding.get(&id).is_some_and(|entry| {
                    matches!(entry.kind, CommandKind::CreateAssignment { .. })
                });
                let error = if assignment {
                    SetupError::AssignmentUnconfirmed
                } else {
                    SetupError::CommandTimedOut { stage: self.stage }
                };
                self.fail(error, now_ms, out);
            }
        }
        if let Some(check) = &mut self.check {
            let actions = check.apply(CheckEvent::Tick, now_ms);
            self.on_check_actions(actions, now_ms, out);
        }
        if self.terminal.is_none()
            && self.flow.is_none()
            && let Some(wake) = self.wake.take_if(|wake| now_ms >= wake.at_ms)
        {
            self.flow_command(wake.kind, now_ms, out);
        }
    }

    // Replies.

    fn on_reply(
        &mut self,
        command: CommandId,
        reply: Reply,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        let Some(entry) = self.outstanding.remove(&command) else {
            // Never dispatched, or answered already.
            return;
        };
        self.record_effects(&entry.kind, &reply);
        match entry.purpose {
            Purpose::Check(step) => {
                let kernel_step = matches!(step, CheckStep::WriteProbe | CheckStep::RemoveProbe);
                let reply = match reply {
                    Reply::Check(reply) => reply,
                    // The code may have run: as uncertain as a lost kernel.
                    Reply::Failed(Failure::Unconfirmed) if kernel_step => {
                        CheckReply::KernelFailed(KernelFailure::Lost)
                    }
                    Reply::Failed(_) if kernel_step => {
                        CheckReply::KernelFailed(KernelFailure::NotSent)
                    }
                    _ => CheckReply::ServiceUnavailable,
                };
                if let Some(check) = &mut self.check {
                    let actions = check.apply(CheckEvent::Reply { step, reply }, now_ms);
                    self.on_check_actions(actions, now_ms, out);
                }
            }
            Purpose::Cleanup => {}
            Purpose::Flow => {
                if self.flow == Some(command) && self.terminal.is_none() {
                    self.flow = None;
                    self.on_flow_reply(entry.kind, reply, now_ms, out);
                }
            }
        }
        self.plan_cleanup(now_ms, out);
    }

    /// What any answer tells about the resources the setup created, whether or not the flow
    /// still waits for it.
    fn record_effects(&mut self, kind: &CommandKind, reply: &Reply) {
        match (kind, reply) {
            (CommandKind::CreateAssignment { .. }, Reply::AssignmentCreated { endpoint }) => {
                self.runtime.endpoint = Some(endpoint.clone());
                self.runtime.created_here = true;
                self.runtime.creation_unconfirmed = false;
            }
            (
                CommandKind::CreateAssignment { .. } | CommandKind::LookupAssignment { .. },
                Reply::AssignmentFound { endpoint },
            ) => {
                if !self.runtime.created_here {
                    self.runtime.endpoint = Some(endpoint.clone());
                }
                if matches!(kind, CommandKind::CreateAssignment { .. }) {
                    self.runtime.creation_unconfirmed = false;
                }
            }
            (CommandKind::CreateAssignment { .. }, Reply::Failed(Failure::Unconfirmed)) => {}
            (CommandKind::CreateAssignment { .. }, _) => {
                self.runtime.creation_unconfirmed = false;
            }
            (CommandKind::ReleaseRuntime { .. }, Reply::Done) => {
                self.runtime.release = Release::Done;
            }
            (CommandKind::ReleaseRuntime { .. }, _) => self.runtime.release = Release::Failed,
            (CommandKind::InsertTemporaryCell { .. }, reply) => {
                self.cell.insert_outstanding = false;
                match reply {
                    Reply::CellInserted { cell_id } => self.cell.id = Some(cell_id.clone()),
                    Reply::Failed(Failure::Unconfirmed) => self.cell.insert_unconfirmed = true,
                    _ => {}
                }
            }
            (CommandKind::RunTemporaryCell { .. }, _) => self.cell.run_outstanding = false,
            (CommandKind::RemoveTemporaryCell { .. }, reply) => {
                self.cell.remove_outstanding = false;
                match reply {
                    Reply::CellRemoved => self.cell.removed = true,
                    Reply::CellRetained(reason) => self.cell.retained = Some(*reason),
                    _ => self.cell.retained = Some(RetainReason::RemovalFailed),
                }
            }
            (CommandKind::DismissPicker, _) => self.picker.open = false,
            _ => {}
        }
    }

    fn on_flow_reply(
        &mut self,
        kind: CommandKind,
        reply: Reply,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        // A non-prompt answer means the user's earlier action (if any) was done.
        let prompt = matches!(
            reply,
            Reply::Failed(Failure::AuthenticationRequired) | Reply::Picker(PickerView::Prompt(_))
        );
        if !prompt {
            self.user_action = None;
        }
        if let Reply::Failed(failure) = reply {
            self.on_failure(kind, failure, now_ms, out);
            return;
        }
        match kind {
            CommandKind::CheckProvider => match reply {
                Reply::Done => self.after_preparing(now_ms, out),
                _ => self.fail(SetupError::ProviderUnavailable, now_ms, out),
            },
            CommandKind::ReadSessions => self.on_sessions(reply, now_ms, out),
            CommandKind::ProbeRuntime => match reply {
                Reply::Done => self.enter_awaiting_selection(),
                _ => self.fail(SetupError::RuntimeUnreachable, now_ms, out),
            },
            CommandKind::LookupAssignment { alias } => match reply {
                Reply::AssignmentFound { .. } => self.enter_awaiting_selection(),
                Reply::NoAssignment => self.fail(
                    SetupError::AliasUnknown {
                        name: alias.to_string(),
                    },
                    now_ms,
                    out,
                ),
                _ => self.unexpected_reply(now_ms, out),
            },
            CommandKind::CreateAssignment { .. } => match reply {
                Reply::AssignmentCreated { .. } | Reply::AssignmentFound { .. } => {
                    self.enter_awaiting_selection()
                }
                Reply::AssignmentRefused(refusal) => {
                    let error = match refusal {
                        AssignRefusal::TooManyAssignments => SetupError::TooManyAssignments,
                        AssignRefusal::AcceleratorUnavailable => SetupError::AcceleratorUnavailable,
                        AssignRefusal::QuotaDenied => SetupError::QuotaDenied,
                    };
                    self.fail(error, now_ms, out);
                }
                _ => self.unexpected_reply(now_ms, out),
            },
            CommandKind::OpenKernelPicker => match reply {
                Reply::Done => self.flow_command(CommandKind::ObservePicker, now_ms, out),
                _ => self.unexpected_reply(now_ms, out),
            },
            CommandKind::ObservePicker => match reply {
                Reply::Picker(view) => self.on_view(view, now_ms, out),
                _ => self.unexpected_reply(now_ms, out),
            },
            CommandKind::ChooseRow { step, label } => match reply {
                Reply::Done => {
                    if let Some(next) = self.picker.after_choice.take() {
                        self.provider_step = Some(next);
                    }
                    self.picker.closed_since_ms = None;
                    self.flow_command(CommandKind::ObservePicker, now_ms, out);
                }
                Reply::RowChanged if step == ProviderStep::ServerSelection => {
                    self.fail(SetupError::AliasChanged { name: label }, now_ms, out)
                }
                _ => self.fail(SetupError::PickerUnexpected { step }, now_ms, out),
            },
            CommandKind::TypeAlias { alias } => match reply {
                Reply::AliasReadBack { value } if value == alias.as_str() => {
                    self.flow_command(CommandKind::SubmitInput, now_ms, out)
                }
                _ => self.fail(SetupError::AliasReadbackMismatch, now_ms, out),
            },
            CommandKind::SubmitInput => match reply {
                Reply::Done => {
                    self.provider_step = Some(ProviderStep::KernelSelection);
                    self.flow_command(CommandKind::ObservePicker, now_ms, out);
                }
                _ => self.unexpected_reply(now_ms, out),
            },
            CommandKind::ObserveKernelChoices => self.on_choices(reply, now_ms, out),
            CommandKind::SelectKernelChoice { .. } => match reply {
                Reply::KernelSelected {
                    confirmed: Some(true),
                } => self.enter_starting(now_ms, out),
                Reply::ListingChanged => self.listing_changed(),
                _ => self.fail(SetupError::SelectionUnconfirmed, now_ms, out),
            },
            CommandKind::StartKernel { .. } => match reply {
                Reply::Done => self.enter_mounting(now_ms, out),
                Reply::ListingChanged => self.listing_changed(),
                _ => self.fail(SetupError::KernelStartFailed, now_ms, out),
            },
            CommandKind::InsertTemporaryCell { .. } => match reply {
                Reply::CellInserted { cell_id } => {
                    self.flow_command(CommandKind::RunTemporaryCell { cell_id }, now_ms, out)
                }
                _ => self.fail(SetupError::StartupCellFailed, now_ms, out),
            },
            CommandKind::RunTemporaryCell { cell_id } => match reply {
                Reply::CellRan(CellRun::Completed) => self.flow_command(
                    CommandKind::RemoveTemporaryCell {
                        cell_id,
                        source: STARTUP_CELL_SOURCE,
                    },
                    now_ms,
                    out,
                ),
                _ => self.fail(SetupError::StartupCellFailed, now_ms, out),
            },
            // Removed or retained (and reported): the setup goes on either way.
            CommandKind::RemoveTemporaryCell { .. } => self.enter_mounting(now_ms, out),
            CommandKind::FindMountedServer { .. } => match reply {
                Reply::FileService { root } => self.enter_verifying(root, now_ms, out),
                Reply::NotMounted => self.flow_command(CommandKind::CheckProvider, now_ms, out),
                _ => self.fail(SetupError::MountFailed, now_ms, out),
            },
            CommandKind::MountServer { .. } | CommandKind::ConnectFileService => match reply {
                Reply::FileService { root } => self.enter_verifying(root, now_ms, out),
                _ => self.fail(SetupError::MountFailed, now_ms, out),
            },
            CommandKind::ReleaseRuntime { .. } | CommandKind::DismissPicker => {}
            CommandKind::Check { .. } => {}
        }
    }

    fn unexpected_reply(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        let error = match self.provider_step {
            Some(step) if self.stage == Stage::AcquiringServer => {
                SetupError::PickerUnexpected { step }
            }
            _ => SetupError::CommandFailed { stage: self.stage },
        };
        self.fail(error, now_ms, out);
    }

    fn on_failure(
        &mut self,
        kind: CommandKind,
        failure: Failure,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        match failure {
            Failure::AuthenticationRequired => {
                let code = if self.route.is_vscode() {
                    ActionCode::SignIn
                } else {
                    ActionCode::RefreshCredentials
                };
                self.user_action = Some(code);
                // Nothing happened; the same command is retried after the user had a moment.
                let retry = match kind {
                    // A half-walked picker cannot be resumed by repeating a row choice.
                    CommandKind::ChooseRow { .. }
                    | CommandKind::TypeAlias { .. }
                    | CommandKind::SubmitInput => CommandKind::ObservePicker,
                    CommandKind::SelectKernelChoice { .. } | CommandKind::StartKernel { .. } => {
                        // Nothing was selected: the listing stands and the client selects again
                        // once signed in.
                        self.drop_selection();
                        return;
                    }
                    other => other,
                };
                self.later(retry, self.config.retry_interval_ms, now_ms);
            }
            Failure::Unconfirmed => {
                let error = match kind {
                    CommandKind::CreateAssignment { .. } => SetupError::AssignmentUnconfirmed,
                    _ => SetupError::CommandTimedOut { stage: self.stage },
                };
                self.fail(error, now_ms, out);
            }
            Failure::NotPerformed | Failure::Unavailable => {
                let error = match kind {
                    CommandKind::CheckProvider => SetupError::ProviderUnavailable,
                    CommandKind::ProbeRuntime
                    | CommandKind::ReadSessions
                    | CommandKind::LookupAssignment { .. }
                    | CommandKind::CreateAssignment { .. } => SetupError::RuntimeUnreachable,
                    CommandKind::OpenKernelPicker
                    | CommandKind::ObservePicker
                    | CommandKind::ChooseRow { .. }
                    | CommandKind::TypeAlias { .. }
                    | CommandKind::SubmitInput => SetupError::PickerClosed {
                        step: self.provider_step.unwrap_or(ProviderStep::KernelPicker),
                    },
                    CommandKind::ObserveKernelChoices => {
                        if self.route.is_vscode() {
                            SetupError::PickerClosed {
                                step: ProviderStep::KernelSelection,
                            }
                        } else {
                            SetupError::RuntimeUnreachable
                        }
                    }
                    CommandKind::SelectKernelChoice { .. } => SetupError::SelectionUnconfirmed,
                    CommandKind::StartKernel { .. } => SetupError::KernelStartFailed,
                    CommandKind::InsertTemporaryCell { .. }
                    | CommandKind::RunTemporaryCell { .. } => SetupError::StartupCellFailed,
                    // A failed removal is recorded as a retained cell; the setup goes on.
                    CommandKind::RemoveTemporaryCell { .. } => {
                        self.enter_mounting(now_ms, out);
                        return;
                    }
                    CommandKind::FindMountedServer { .. }
                    | CommandKind::MountServer { .. }
                    | CommandKind::ConnectFileService => SetupError::MountFailed,
                    CommandKind::ReleaseRuntime { .. }
                    | CommandKind::DismissPicker
                    | CommandKind::Check { .. } => SetupError::CommandFailed { stage: self.stage },
                };
                self.fail(error, now_ms, out);
            }
        }
    }

    fn on_sessions(&mut self, reply: Reply, now_ms: u64, out: &mut Vec<SetupAction>) {
        let Route::SessionsFile { session } = &self.route else {
            return;
        };
        let Reply::Servers(rows) = reply else {
            self.unexpected_reply(now_ms, out);
            return;
        };
        match resolve_server(session.as_str(), &rows) {
            Ok(position) => {
                if rows[position].availability == Availability::CredentialsExpired {
                    self.user_action = Some(ActionCode::RefreshCredentials);
                    self.later(
                        CommandKind::ReadSessions,
                        self.config.retry_interval_ms,
                        now_ms,
                    );
                } else {
                    self.runtime.endpoint = rows[position].endpoint.clone();
                    self.enter_awaiting_selection();
                }
            }
            Err(error) => self.fail(error, now_ms, out),
        }
    }

    // The picker path.

    fn observe_later(&mut self, now_ms: u64) {
        self.later(
            CommandKind::ObservePicker,
            self.config.poll_interval_ms,
            now_ms,
        );
    }

    fn choose(
        &mut self,
        label: &str,
        step: ProviderStep,
        next: ProviderStep,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        self.provider_step = Some(step);
        self.picker.after_choice = Some(next);
        self.flow_command(
            CommandKind::ChooseRow {
                step,
                label: label.to_owned(),
            },
            now_ms,
            out,
        );
    }

    fn on_view(&mut self, view: PickerView, now_ms: u64, out: &mut Vec<SetupAction>) {
        let step = self.provider_step.unwrap_or(ProviderStep::KernelPicker);
        let labels = self.config.labels;
        match view {
            PickerView::Prompt(prompt) => {
                self.user_action = Some(match prompt {
                    UserPrompt::SignIn => ActionCode::SignIn,
                    UserPrompt::Consent => ActionCode::GrantConsent,
                    UserPrompt::Other => ActionCode::AnswerPrompt,
                });
                self.picker.closed_since_ms = None;
                self.observe_later(now_ms);
            }
            PickerView::Closed => {
                let since = *self.picker.closed_since_ms.get_or_insert(now_ms);
                if now_ms.saturating_sub(since) >= self.config.picker_closed_timeout_ms {
                    self.fail(SetupError::PickerClosed { step }, now_ms, out);
                } else {
                    self.observe_later(now_ms);
                }
            }
            PickerView::QuickPick { title, rows, busy } => {
                self.picker.closed_since_ms = None;
                if busy {
                    self.observe_later(now_ms);
                    return;
                }
                if rows.is_empty() {
                    if matches!(
                        step,
                        ProviderStep::ServerPrompt | ProviderStep::ProviderHandoff
                    ) {
                        self.picker.empty_prompt_seen = true;
                    }
                    self.observe_later(now_ms);
                    return;
                }
                self.on_quick_pick(step, &title, &rows, now_ms, out, &labels);
            }
            PickerView::InputBox { title, prompt, .. } => {
                self.picker.closed_since_ms = None;
                if !(self.picker.new_server && self.picker.cpu_chosen)
                    || self.picker.alias_submitted
                {
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                    return;
                }
                self.provider_step = Some(ProviderStep::AliasInput);
                let names_cpu = title.contains(labels.alias_prompt_server)
                    || prompt.contains(labels.alias_prompt_server);
                if !names_cpu {
                    self.fail(SetupError::AliasPromptMismatch, now_ms, out);
                    return;
                }
                let alias = self.alias.clone().expect("the picker route has an alias");
                self.flow_command(CommandKind::TypeAlias { alias }, now_ms, out);
            }
        }
    }

    fn on_quick_pick(
        &mut self,
        step: ProviderStep,
        title: &str,
        rows: &[PickerRow],
        now_ms: u64,
        out: &mut Vec<SetupAction>,
        labels: &PickerLabels,
    ) {
        let has = |label: &str| find_row(rows, label);
        match step {
            ProviderStep::KernelPicker => {
                if has(labels.select_another_kernel) == RowMatch::One {
                    self.choose(
                        labels.select_another_kernel,
                        step,
                        ProviderStep::ColabSource,
                        now_ms,
                        out,
                    );
                } else if has(labels.colab_source) == RowMatch::One {
                    self.choose_colab(step, now_ms, out, labels);
                } else {
                    // Suggested local kernels are never accepted in Colab's place.
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                }
            }
            ProviderStep::ColabSource => {
                if has(labels.colab_source) == RowMatch::One {
                    self.choose_colab(step, now_ms, out, labels);
                } else {
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                }
            }
            ProviderStep::ServerPrompt | ProviderStep::ProviderHandoff => {
                if has(labels.new_server) != RowMatch::Absent {
                    self.select_server(rows, now_ms, out, labels);
                } else if has(labels.colab_source) == RowMatch::One
                    && self.picker.empty_prompt_seen
                    && !self.picker.handoff_used
                {
                    self.picker.handoff_used = true;
                    self.choose_colab(ProviderStep::ProviderHandoff, now_ms, out, labels);
                } else if has(labels.colab_source) != RowMatch::Absent {
                    // The source picker again, but not as the one allowed hand-off.
                    let step = ProviderStep::ProviderHandoff;
                    self.provider_step = Some(step);
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                } else {
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                }
            }
            // A new server: CPU first (never a GPU or TPU in its place), then the machine-shape
            // and runtime-version prompts if they appear, each at most once and in either order,
            // before the alias input box.
            ProviderStep::AcceleratorSelection
            | ProviderStep::MachineShapeSelection
            | ProviderStep::RuntimeVersionSelection
                if self.picker.new_server =>
            {
                if !self.picker.cpu_chosen {
                    if has(labels.cpu) == RowMatch::One {
                        self.picker.cpu_chosen = true;
                        self.choose(labels.cpu, step, step, now_ms, out);
                    } else {
                        self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                    }
                } else if !self.picker.shape_chosen && has(labels.standard_shape) == RowMatch::One {
                    self.picker.shape_chosen = true;
                    let step = ProviderStep::MachineShapeSelection;
                    self.choose(labels.standard_shape, step, step, now_ms, out);
                } else if !self.picker.version_chosen && has(labels.latest_version) == RowMatch::One
                {
                    self.picker.version_chosen = true;
                    let step = ProviderStep::RuntimeVersionSelection;
                    self.choose(labels.latest_version, step, step, now_ms, out);
                } else {
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                }
            }
            ProviderStep::KernelSelection => {
                let alias = self.alias.as_ref().expect("the picker route has an alias");
                if !title.contains(alias.as_str()) {
                    self.fail(SetupError::AliasNotConfirmed, now_ms, out);
                    return;
                }
                self.picker.alias_confirmed = true;
                self.enter_awaiting_selection();
            }
            _ => self.fail(SetupError::PickerUnexpected { step }, now_ms, out),
        }
    }

    fn choose_colab(
        &mut self,
        step: ProviderStep,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
        labels: &PickerLabels,
    ) {
        self.picker.empty_prompt_seen = false;
        self.choose(
            labels.colab_source,
            step,
            ProviderStep::ServerPrompt,
            now_ms,
            out,
        );
    }

    fn select_server(
        &mut self,
        rows: &[PickerRow],
        now_ms: u64,
        out: &mut Vec<SetupAction>,
        labels: &PickerLabels,
    ) {
        let step = ProviderStep::ServerSelection;
        self.provider_step = Some(step);
        match self.route.clone() {
            Route::Picker { reuse: Some(alias) } => {
                match resolve_server(alias.as_str(), &server_rows(rows)) {
                    Ok(position) => {
                        let label = rows[position].label.clone();
                        self.choose(&label, step, ProviderStep::KernelSelection, now_ms, out);
                    }
                    Err(error) => self.fail(error, now_ms, out),
                }
            }
            _ => {
                if find_row(rows, labels.new_server) == RowMatch::One {
                    self.picker.new_server = true;
                    let next = ProviderStep::AcceleratorSelection;
                    self.choose(labels.new_server, step, next, now_ms, out);
                } else {
                    self.fail(SetupError::PickerUnexpected { step }, now_ms, out);
                }
            }
        }
    }

    // Kernel choices.

    fn on_list(&mut self, token: [u8; 4], now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_some() || self.stage != Stage::AwaitingKernelSelection {
            return;
        }
        // Older ids die now, before the new observation arrives.
        self.listing = None;
        self.listing_problem = None;
        let observing = self.listing_token.is_some();
        self.listing_token = Some(token);
        if !observing {
            self.flow_command(CommandKind::ObserveKernelChoices, now_ms, out);
        }
    }

    fn on_choices(&mut self, reply: Reply, now_ms: u64, out: &mut Vec<SetupAction>) {
        let token = self.listing_token.take().unwrap_or_default();
        let Reply::KernelChoices { labels, complete } = reply else {
            self.unexpected_reply(now_ms, out);
            return;
        };
        self.listings_made += 1;
        match ChoiceListing::new(self.listings_made, token, &labels, complete, now_ms) {
            Ok(listing) => self.listing = Some(listing),
            Err(SetupError::ChoicesIncomplete) => {
                self.listing_problem = Some(SetupError::ChoicesIncomplete);
            }
            Err(error) => self.fail(error, now_ms, out),
        }
    }

    fn on_select(&mut self, choice_id: &str, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_some() || self.stage != Stage::AwaitingKernelSelection {
            return;
        }
        let Ok((position, label)) = self.find_choice(choice_id) else {
            return;
        };
        let listing = self
            .listing
            .as_ref()
            .map(ChoiceListing::labels)
            .unwrap_or_default();
        self.selection = Some((position, label.clone()));
        self.kernel_label = Some(label.clone());
        let kind = if self.route.is_vscode() {
            CommandKind::SelectKernelChoice {
                label,
                position,
                listing,
            }
        } else {
            self.stage = Stage::StartingKernel;
            CommandKind::StartKernel { label, listing }
        };
        self.flow_command(kind, now_ms, out);
    }

    /// Back to awaiting a selection, with the current listing still valid.
    fn drop_selection(&mut self) {
        self.stage = Stage::AwaitingKernelSelection;
        self.selection = None;
        self.kernel_label = None;
    }

    /// The choices changed under a selection: nothing was selected, and the listing is void.
    fn listing_changed(&mut self) {
        self.drop_selection();
        self.listing = None;
        self.listing_problem = Some(SetupError::ChoicesChanged);
    }

    // Verification.

    fn on_check_actions(
        &mut self,
        actions: Vec<CheckAction>,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        for action in actions {
            match action {
                CheckAction::Perform(command) => {
                    self.issue(
                        CommandKind::Check {
                            step: command.step,
                            command: command.kind,
                        },
                        Purpose::Check(command.step),
                        command.deadline_ms,
                        out,
                    );
                }
                CheckAction::Finished { verified } => {
                    if self.terminal.is_some() {
                        continue;
                    }
                    if verified {
                        self.stage = Stage::Complete;
                        self.terminate(SetupStatus::Ready, None, now_ms, out);
                    } else {
                        let check = self
                            .check
                            .as_ref()
                            .map_or("cleanup", ColabCheck::first_unpassed);
                        self.fail(SetupError::VerificationFailed { check }, now_ms, out);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
