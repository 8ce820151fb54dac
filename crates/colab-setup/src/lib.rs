//! The Colab state machine: setting up a Colab runtime for a notebook, and proving that a
//! notebook's kernel runs on it (`configure_kernel` with `runtime: "colab"`,
//! `mount_colab_server`, `list_setup_kernels`, `select_setup_kernel`, `get_kernel_setup`,
//! `cancel_kernel_setup`, `check_colab`).
//!
//! Layer 1 (domain). Pure and synchronous: no tokio, no HTTP, no DOM driver, no filesystem, no
//! clock and no random numbers. Time comes in as milliseconds with every event, random bytes as
//! [`SetupEntropy`] and listing tokens, and everything the outside world does as [`Reply`]s to
//! the [`Command`]s the machine hands out. It must never learn how a host talks to Colab, VS Code
//! or a kernel: the standalone host (google-colab-cli's sessions file, a runtime URL with its
//! proxy-token file, or Colab's tunnel API) and the VS Code host (the kernel picker through a DOM
//! driver) drive the same machine.
//!
//! # Stages
//!
//! `preparing` (the provider is usable) → `acquiring_server` (sessions file, runtime probe,
//! tunnel assignment, or the picker path) → `awaiting_kernel_selection` → `starting_kernel` →
//! `mounting` (the runtime's file service) → `verifying` (the [`ColabCheck`] nonce proof) →
//! `complete`. Routes skip what they do not need: the sessions-file and runtime-URL routes have
//! no `preparing`; `mount_server` first looks for a server already mounted under its alias (reused
//! as it is, straight to `verifying`, with no picker), else goes from `preparing` straight to
//! `mounting`. The picker path's
//! position is the [`ProviderStep`]: `kernel_picker` → (`colab_source`) → `server_prompt` →
//! (`provider_handoff`, at most once, only after a new empty prompt) → `server_selection` → for a
//! new server `accelerator_selection` (CPU only) → (`machine_shape_selection`,
//! `runtime_version_selection`) → `alias_input` (the box must name Colab CPU; the typed alias
//! must read back) → `kernel_selection` (its title must show the alias).
//!
//! # What a host does
//!
//! ```text
//! let Admitted { setup_id, actions } = registry.admit(request, entropy, now)?;
//! perform(actions);                       // each Perform(command) is answered exactly once:
//! registry.apply(notebook, &setup_id, SetupEvent::Reply { command: id, reply }, now)?;
//! registry.tick(now);                     // about every 250 ms while a setup is unsettled
//! registry.apply(.., SetupEvent::ListChoices { token }, now)?;       // list_setup_kernels
//! registry.apply(.., SetupEvent::SelectChoice { choice_id }, now)?;  // select_setup_kernel
//! registry.apply(.., SetupEvent::Cancel, now)?;                      // cancel_kernel_setup
//! registry.receipt(notebook, &setup_id)?; // the tool result, as-is
//! registry.guard(notebook, GuardedOperation::Run)?;  // before run_cells, transfers, edits…
//! ```
//!
//! Commands: check the provider; read the sessions file; probe a runtime; look up, create or
//! release a tunnel assignment; open the kernel picker, observe it, choose a row, type and submit
//! the alias, dismiss it; observe the kernel choices; select one (VS Code) or start its kernel
//! (standalone); insert, run and remove the temporary `pass` cell; mount the server or connect
//! the Contents API; and the check's steps (kernel executions, build-info read, file-service read
//! and stat). Each command carries a deadline; the host answers once, even late.
//!
//! # Invariants
//!
//! - Every setup is `ready`, `failed` or `cancelled` by its deadline (5 minutes from admission
//!   by default, including time awaiting a choice or the user), given ticks.
//! - `ready` means the nonce proof verified, with its cleanup confirmed through the kernel and
//!   the file service. Labels, modules, release tags and mounted folders are evidence only.
//! - A name selects only the one live server that carries exactly that name ([`resolve_server`]);
//!   reuse never creates a server, never types an alias, never falls back.
//! - There is no default kernel choice: only an id from the latest listing is accepted, and a new
//!   listing voids the old ids at once.
//! - Cancel and failure undo exactly what this setup created: a runtime it assigned is released
//!   once; its own temporary cell is removed unless edited (a running one once it settles); a
//!   server that existed before is never touched; an unconfirmed creation is reported as
//!   `serverMayRemain`.
//! - A setup is unsettled until it is terminal and every command it dispatched has been
//!   answered; while unsettled it blocks its notebook ([`SetupRegistry::guard`]). The registry
//!   keeps at most 16 setups and never evicts an unsettled one.
//!
//! [`check_setup_sequence`] is the body of a fuzz target:
//! `fuzz_target!(|data: &[u8]| colab_setup::check_setup_sequence(data));`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod choices;
pub mod environment;
mod error;
#[cfg(test)]
mod fixtures;
mod names;
mod picker;
mod probe;
mod receipt;
mod registry;
mod servers;
mod setup;
mod sim;
mod wire;

pub use check::check_setup_sequence;
pub use choices::{ChoiceListing, KernelChoice, MAX_CHOICES, MAX_LABEL_CHARS};
pub use error::{ERROR_CODES, ErrorBody, SetupError};
pub use names::{
    ChoiceId, FileServiceRoot, Nonce, PROBE_DIRECTORY, PROBE_PREFIX, ServerAlias, SessionName,
    SetupId,
};
pub use picker::{PickerLabels, PickerRow, PickerView, UserPrompt};
pub use probe::{
    CHECK_MARKER, CheckAction, CheckCommand, CheckCommandKind, CheckEvent, CheckName, CheckOutcome,
    CheckReceipt, CheckReply, CheckResult, CheckStep, CheckTimeouts, CleanupState, ColabCheck,
    IdentityEvidence, KernelFailure, select_root,
};
pub use receipt::{ActionRequired, RetainReason, RouteKind, SetupReceipt};
pub use registry::{
    Admitted, DEFAULT_POLL_WAIT_MS, DEFAULT_START_WAIT_MS, MAX_WAIT_MS, RegistryConfig,
    SetupRegistry, wait_budget,
};
pub use servers::{Availability, ServerRow, resolve_server};
pub use setup::{
    AssignRefusal, CellRun, Command, CommandId, CommandKind, Failure, Reply, Route,
    STARTUP_CELL_SOURCE, Setup, SetupAction, SetupConfig, SetupEntropy, SetupEvent, SetupRequest,
};
pub use wire::{ActionCode, GuardedOperation, ProviderStep, SetupStatus, Stage};
