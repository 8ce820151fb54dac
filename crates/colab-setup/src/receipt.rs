//! The setup receipt: what `configure_kernel`, `mount_colab_server`, `get_kernel_setup`,
//! `select_setup_kernel` and `cancel_kernel_setup` return, as-is.

use serde::Serialize;

use crate::choices::ChoiceListing;
use crate::error::ErrorBody;
use crate::names::{ServerAlias, SessionName, SetupId};
use crate::probe::CheckReceipt;
use crate::wire::{ActionCode, ProviderStep, SetupStatus, Stage};

crate::wire::wire_enum! {
    /// Where the runtime comes from (`route`).
    pub enum RouteKind {
        /// Standalone: a session from google-colab-cli's sessions file.
        SessionsFile => "sessions_file",
        /// Standalone: a runtime URL and proxy-token file the user gave.
        RuntimeUrl => "runtime_url",
        /// Standalone, experimental: Colab's tunnel assignment API.
        Tunnel => "tunnel",
        /// VS Code: the Colab extension's kernel picker.
        Picker => "picker",
        /// VS Code: mounting an MCP-created server for the already active kernel
        /// (`mount_colab_server`).
        MountServer => "mount_server",
    }
}

crate::wire::wire_enum! {
    /// Why the temporary startup cell was left in the notebook (`startupCellRetainedReason`).
    pub enum RetainReason {
        /// Someone edited it; an edited cell is never removed.
        Edited => "edited",
        /// It is queued or running; it is removed once its execution settles, unless edited.
        QueuedOrRunning => "queued_or_running",
        /// The insertion was not confirmed; the cell may exist.
        InsertionUnconfirmed => "insertion_unconfirmed",
        /// Removing it failed.
        RemovalFailed => "removal_failed",
    }
}

/// What the setup waits for someone to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionRequired {
    /// A short code.
    pub code: ActionCode,
    /// What to do, in words.
    pub message: &'static str,
}

impl ActionRequired {
    /// The action for a code.
    pub fn for_code(code: ActionCode) -> Self {
        let message = match code {
            ActionCode::SelectKernelChoice => {
                "call list_setup_kernels, then select_setup_kernel with one kernelChoiceId from \
                 that listing; no kernel is chosen by default"
            }
            ActionCode::SignIn => {
                "sign in to Google in the prompt VS Code shows; the setup continues by itself"
            }
            ActionCode::RefreshCredentials => {
                "refresh the Google credentials the server uses (application-default credentials \
                 with the Colab scope); the setup retries by itself"
            }
            ActionCode::GrantConsent => {
                "answer the consent prompt VS Code shows; the setup continues by itself"
            }
            ActionCode::AnswerPrompt => {
                "answer the prompt VS Code shows; the setup continues by itself"
            }
        };
        ActionRequired { code, message }
    }
}

/// A setup receipt. Optional fields are left out when they have no value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupReceipt {
    /// The setup's id.
    pub setup_id: SetupId,
    /// The notebook, as the host names it.
    pub notebook_ref: String,
    /// Where the runtime comes from.
    pub route: RouteKind,
    /// `running`, `awaiting_kernel_selection`, `awaiting_user`, `ready`, `failed`, `cancelled`.
    pub status: SetupStatus,
    /// The current stage; a failed or cancelled setup keeps the stage it stopped in.
    pub stage: Stage,
    /// The provider step, while the setup is in one (and after it stopped in one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_step: Option<ProviderStep>,
    /// The stage a failed setup failed in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_stage: Option<Stage>,
    /// The provider step a failed setup failed at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_provider_step: Option<ProviderStep>,
    /// What someone must do for the setup to go on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_required: Option<ActionRequired>,
    /// The server's alias, once it exists (generated or reused), even after a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_alias: Option<ServerAlias>,
    /// The google-colab-cli session, for the sessions-file route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_name: Option<SessionName>,
    /// Whether this setup confirmed it created the server or runtime.
    pub server_created: bool,
    /// For a failed or cancelled setup: a server this setup asked for may still exist (created
    /// and not released, or its creation was never confirmed either way).
    pub server_may_remain: bool,
    /// Whether a runtime this setup assigned was released again.
    pub runtime_released: bool,
    /// Whether the temporary startup cell is (or may be) still in the notebook.
    pub startup_cell_retained: bool,
    /// Why it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_cell_retained_reason: Option<RetainReason>,
    /// A terminal setup whose dispatched commands have not all settled; the notebook stays
    /// blocked until they do.
    pub cleanup_pending: bool,
    /// True only for `ready` with a verified check.
    pub ready: bool,
    /// The selected kernel's label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_label: Option<String>,
    /// The latest kernel-choice listing, while the setup awaits a selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_choices: Option<ChoiceListing>,
    /// Why the latest listing was refused, while the setup awaits a selection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listing_problem: Option<ErrorBody>,
    /// Why the setup failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
    /// When the setup was admitted (milliseconds as the host gave them).
    pub started_at_ms: u64,
    /// When its deadline falls.
    pub deadline_at_ms: u64,
    /// When it reached its terminal status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<u64>,
    /// The `check_colab` proof, once verification started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification: Option<CheckReceipt>,
}
