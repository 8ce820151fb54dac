//! What a setup asks of its host and what comes back: commands, replies, events and actions.

use std::fmt;

use crate::names::{FileServiceRoot, ServerAlias};
use crate::picker::PickerView;
use crate::probe::{CheckCommandKind, CheckReply, CheckStep};
use crate::receipt::RetainReason;
use crate::servers::ServerRow;
use crate::wire::{ProviderStep, SetupStatus};

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
