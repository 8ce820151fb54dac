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

use crate::choices::ChoiceListing;
use crate::error::{ErrorBody, SetupError};
use crate::names::{Nonce, ServerAlias, SessionName, SetupId};
use crate::picker::PickerLabels;
use crate::probe::{CheckStep, CheckTimeouts, ColabCheck};
use crate::receipt::{ActionRequired, RetainReason, RouteKind, SetupReceipt};
use crate::wire::{ActionCode, ProviderStep, SetupStatus, Stage};

mod command;
mod flow;
mod picker_path;
mod replies;

pub use command::{
    AssignRefusal, CellRun, Command, CommandId, CommandKind, Failure, Reply, SetupAction,
    SetupEvent,
};

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
}

#[cfg(test)]
mod tests;
