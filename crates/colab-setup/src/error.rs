//! The one error type of the crate: why a call was refused, or why a setup or check failed.
//!
//! Every variant has a stable snake_case [`SetupError::code`] and a message that says what to do
//! next. Messages carry no text the host observed, except bounded kernel labels and names the
//! caller gave.

use serde::Serialize;

use crate::names::SetupId;
use crate::wire::{ActionCode, GuardedOperation, ProviderStep, SetupStatus, Stage};

/// A refusal or a failure, each with a code a caller can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    // Refused calls.
    /// The notebook has an unsettled setup; the operation must wait for it.
    #[error(
        "the notebook has an unsettled Colab setup {setup_id}; wait for it with get_kernel_setup \
         (or cancel it with cancel_kernel_setup) before {}",
        operation.describe()
    )]
    SetupActive {
        /// The blocking setup.
        setup_id: SetupId,
        /// What was refused.
        operation: GuardedOperation,
    },
    /// No setup with this id is tracked for this notebook.
    #[error(
        "no Colab setup {setup_id} is tracked for this notebook; it may have been evicted (the \
         last 16 are kept) or belong to another notebook"
    )]
    SetupNotFound {
        /// The id the caller gave.
        setup_id: String,
    },
    /// Every retained setup is unsettled, so none can make room.
    #[error("{max} Colab setups are unsettled; wait for one to settle before starting another")]
    RegistryFull {
        /// The retention limit.
        max: usize,
    },
    /// The setup is already terminal; the command needs a live one.
    #[error("the setup has already finished ({status}); start a new one with configure_kernel")]
    SetupFinished {
        /// Its final status.
        status: SetupStatus,
    },
    /// Kernel choices can be listed or selected only while the setup awaits a selection.
    #[error(
        "the setup is not awaiting a kernel selection (stage {stage}); poll it with \
         get_kernel_setup"
    )]
    NotAwaitingSelection {
        /// The setup's stage.
        stage: Stage,
    },
    /// `waitMs` outside 0–60000.
    #[error("waitMs must be between 0 and 60000, not {value}")]
    WaitOutOfRange {
        /// The value given.
        value: u64,
    },
    /// A `serverAlias` that is not `m` plus eight lowercase hex digits.
    #[error("invalid serverAlias: {reason}")]
    AliasInvalid {
        /// What is wrong.
        reason: &'static str,
    },
    /// A google-colab-cli session name that breaks the naming rule.
    #[error("invalid session name: {reason}")]
    SessionNameInvalid {
        /// What is wrong.
        reason: &'static str,
    },
    /// A `colabFileUri` that is not a file-service root.
    #[error("invalid colabFileUri: {reason}")]
    RootInvalid {
        /// What is wrong.
        reason: &'static str,
    },
    /// No Colab file-service root is registered, so nothing can prove the kernel is on Colab.
    #[error(
        "no Colab file-service root is available (a plain Jupyter server has none); mount the \
         Colab server, or connect to a Colab runtime, then check again"
    )]
    NoColabRoot,
    /// Several roots are registered and none was named.
    #[error("{count} Colab file-service roots are registered; pass colabFileUri to choose one")]
    ColabRootAmbiguous {
        /// How many.
        count: usize,
    },
    /// The id is not from the setup's latest kernel-choice listing.
    #[error(
        "kernelChoiceId {choice_id} is not from the latest listing (a new listing invalidates \
         older ids); call list_setup_kernels and use one of its ids"
    )]
    ChoiceStale {
        /// The id the caller gave.
        choice_id: String,
    },
    /// A listing is being read; it will appear in the setup's receipt.
    #[error("the kernel choices are being read; poll get_kernel_setup, then list again")]
    ListingPending,
    /// A selection is already on its way.
    #[error("a kernel selection is already in progress; poll get_kernel_setup")]
    SelectionInProgress,

    // Kernel choices.
    /// The picker or kernelspec listing was still loading, filtered or cut short.
    #[error(
        "the kernel choices were incomplete (still loading, filtered or truncated); call \
         list_setup_kernels again"
    )]
    ChoicesIncomplete,
    /// Two choices carry the same label, so a label cannot name one of them.
    #[error(
        "two kernel choices are both labelled {label:?}; selecting by label would be ambiguous"
    )]
    ChoicesDuplicate {
        /// The repeated label.
        label: String,
    },
    /// The choices changed between listing and selection.
    #[error(
        "the kernel choices changed since they were listed; call list_setup_kernels again and \
         select from the new listing"
    )]
    ChoicesChanged,
    /// The kernel list was empty.
    #[error("the server offered no kernel to choose")]
    ChoicesEmpty,
    /// The selection was not positively confirmed.
    #[error(
        "the kernel selection was not confirmed; the editor did not report that it took effect"
    )]
    SelectionUnconfirmed,

    // Servers and aliases.
    /// No server carries exactly this name.
    #[error(
        "no live server is named exactly {name:?}; nothing was created (reuse never falls back to \
         a new server)"
    )]
    AliasUnknown {
        /// The alias or session name.
        name: String,
    },
    /// Several servers carry this name.
    #[error(
        "{count} servers are named {name:?}; remove the duplicates in Colab, nothing was chosen"
    )]
    AliasAmbiguous {
        /// The alias or session name.
        name: String,
        /// How many rows matched.
        count: usize,
    },
    /// The named server exists but cannot be used (stopped, disabled).
    #[error("the server named {name:?} is not available (disabled or not running)")]
    AliasDisabled {
        /// The alias or session name.
        name: String,
    },
    /// The named row changed between observation and selection.
    #[error(
        "the server row named {name:?} changed before it could be selected; nothing was chosen"
    )]
    AliasChanged {
        /// The alias or session name.
        name: String,
    },

    // Providers.
    /// The provider cannot be used (the Colab extension failed to activate, or is missing).
    #[error(
        "Colab is unavailable: the provider is missing or failed to activate; check its log, \
         restore connectivity and reload before retrying"
    )]
    ProviderUnavailable,
    /// Colab answered 412: the account has too many assignments.
    #[error("Colab refused the assignment: too many runtimes are assigned; release one first")]
    TooManyAssignments,
    /// Colab answered 503: the accelerator is unavailable.
    #[error("Colab refused the assignment: the requested machine is unavailable; try later")]
    AcceleratorUnavailable,
    /// Colab's `outcome` reported a quota denial.
    #[error("Colab refused the assignment: the usage quota is exhausted")]
    QuotaDenied,
    /// The assignment request got no confirmed answer; a runtime may exist.
    #[error(
        "the assignment request was not confirmed; a runtime may have been assigned (see \
         serverMayRemain)"
    )]
    AssignmentUnconfirmed,
    /// The runtime does not answer.
    #[error("the runtime does not answer; check its URL and token, or start a new one")]
    RuntimeUnreachable,
    /// The picker showed something the setup does not handle.
    #[error(
        "the picker showed something unexpected at {step}; nothing further was chosen (a \
         suggested local kernel is never accepted)"
    )]
    PickerUnexpected {
        /// Where.
        step: ProviderStep,
    },
    /// The picker closed (or never opened) and stayed closed.
    #[error("the picker closed at {step}; start the setup again")]
    PickerClosed {
        /// Where.
        step: ProviderStep,
    },
    /// The alias input box did not identify a Colab CPU server.
    #[error("the alias prompt does not name Colab CPU; the alias was not entered")]
    AliasPromptMismatch,
    /// The input box did not read back the alias that was typed.
    #[error("the alias input read back differently from what was typed; it was not submitted")]
    AliasReadbackMismatch,
    /// The picker after naming did not show the alias.
    #[error("the kernel list does not show the server alias, so naming was not confirmed")]
    AliasNotConfirmed,

    // Starting, mounting, verifying.
    /// The kernel did not start.
    #[error("the kernel did not start")]
    KernelStartFailed,
    /// The temporary `pass` cell failed.
    #[error("the temporary startup cell failed to run")]
    StartupCellFailed,
    /// The server could not be mounted or its file service connected.
    #[error("the server's file service could not be connected (mount failed)")]
    MountFailed,
    /// The nonce proof did not pass.
    #[error("verification failed: {check}; see verification.checks")]
    VerificationFailed {
        /// The first check that did not pass.
        check: &'static str,
    },
    /// A host command got no answer by its deadline; it may still take effect.
    #[error("a host command at stage {stage} got no answer in time; it may still take effect")]
    CommandTimedOut {
        /// Where.
        stage: Stage,
    },
    /// A host command could not be performed.
    #[error("a host command at stage {stage} could not be performed")]
    CommandFailed {
        /// Where.
        stage: Stage,
    },
    /// The setup's deadline passed.
    #[error(
        "the setup did not finish within {deadline_ms} ms (stage {stage}{}); start it again",
        waiting_for.map(|code| format!(", waiting for {code}")).unwrap_or_default()
    )]
    DeadlineExceeded {
        /// Where.
        stage: Stage,
        /// The configured deadline.
        deadline_ms: u64,
        /// What the setup was waiting for someone to do, if anything.
        waiting_for: Option<ActionCode>,
    },
    /// Cancelled by the client.
    #[error("the setup was cancelled")]
    Cancelled,
}

/// [`SetupError::code`] and [`ERROR_CODES`] from one table, so a code is written once.
macro_rules! error_codes {
    ($($variant:ident => $code:literal,)*) => {
        impl SetupError {
            /// The stable snake_case code.
            pub const fn code(&self) -> &'static str {
                match self {
                    $(SetupError::$variant { .. } => $code,)*
                }
            }
        }

        /// Every code [`SetupError::code`] can return, for contract tables and tests.
        pub const ERROR_CODES: &[&str] = &[$($code,)*];
    };
}

error_codes! {
    SetupActive => "setup_active",
    SetupNotFound => "setup_not_found",
    RegistryFull => "registry_full",
    SetupFinished => "setup_finished",
    NotAwaitingSelection => "not_awaiting_selection",
    WaitOutOfRange => "wait_ms_out_of_range",
    AliasInvalid => "alias_invalid",
    SessionNameInvalid => "session_name_invalid",
    RootInvalid => "root_invalid",
    NoColabRoot => "no_colab_root",
    ColabRootAmbiguous => "colab_root_ambiguous",
    ChoiceStale => "choice_stale",
    ListingPending => "listing_pending",
    SelectionInProgress => "selection_in_progress",
    ChoicesIncomplete => "choices_incomplete",
    ChoicesDuplicate => "choices_duplicate",
    ChoicesChanged => "choices_changed",
    ChoicesEmpty => "choices_empty",
    SelectionUnconfirmed => "selection_unconfirmed",
    AliasUnknown => "alias_unknown",
    AliasAmbiguous => "alias_ambiguous",
    AliasDisabled => "alias_disabled",
    AliasChanged => "alias_changed",
    ProviderUnavailable => "provider_unavailable",
    TooManyAssignments => "too_many_assignments",
    AcceleratorUnavailable => "accelerator_unavailable",
    QuotaDenied => "quota_denied",
    AssignmentUnconfirmed => "assignment_unconfirmed",
    RuntimeUnreachable => "runtime_unreachable",
    PickerUnexpected => "picker_unexpected",
    PickerClosed => "picker_closed",
    AliasPromptMismatch => "alias_prompt_mismatch",
    AliasReadbackMismatch => "alias_readback_mismatch",
    AliasNotConfirmed => "alias_not_confirmed",
    KernelStartFailed => "kernel_start_failed",
    StartupCellFailed => "startup_cell_failed",
    MountFailed => "mount_failed",
    VerificationFailed => "verification_failed",
    CommandTimedOut => "command_timed_out",
    CommandFailed => "command_failed",
    DeadlineExceeded => "deadline_exceeded",
    Cancelled => "cancelled",
}

/// An error as receipts carry it: the stable code and the message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorBody {
    /// [`SetupError::code`].
    pub code: &'static str,
    /// The error's message.
    pub message: String,
}

impl From<&SetupError> for ErrorBody {
    fn from(error: &SetupError) -> Self {
        ErrorBody {
            code: error.code(),
            message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value of every variant, so a new variant without a listed code fails here.
    fn every_variant() -> Vec<SetupError> {
        let stage = Stage::AcquiringServer;
        let step = ProviderStep::ServerPrompt;
        vec![
            SetupError::SetupActive {
                setup_id: SetupId::from_parts(1, 1),
                operation: GuardedOperation::Run,
            },
            SetupError::SetupNotFound {
                setup_id: "x".into(),
            },
            SetupError::RegistryFull { max: 16 },
            SetupError::SetupFinished {
                status: SetupStatus::Ready,
            },
            SetupError::NotAwaitingSelection { stage },
            SetupError::WaitOutOfRange { value: 60_001 },
            SetupError::AliasInvalid { reason: "r" },
            SetupError::SessionNameInvalid { reason: "r" },
            SetupError::RootInvalid { reason: "r" },
            SetupError::NoColabRoot,
            SetupError::ColabRootAmbiguous { count: 2 },
            SetupError::ChoiceStale {
                choice_id: "kc1-00000000-0".into(),
            },
            SetupError::ListingPending,
            SetupError::SelectionInProgress,
            SetupError::ChoicesIncomplete,
            SetupError::ChoicesDuplicate {
                label: "Python 3".into(),
            },
            SetupError::ChoicesChanged,
            SetupError::ChoicesEmpty,
            SetupError::SelectionUnconfirmed,
            SetupError::AliasUnknown { name: "m1".into() },
            SetupError::AliasAmbiguous {
                name: "m1".into(),
                count: 2,
            },
            SetupError::AliasDisabled { name: "m1".into() },
            SetupError::AliasChanged { name: "m1".into() },
            SetupError::ProviderUnavailable,
            SetupError::TooManyAssignments,
            SetupError::AcceleratorUnavailable,
            SetupError::QuotaDenied,
            SetupError::AssignmentUnconfirmed,
            SetupError::RuntimeUnreachable,
            SetupError::PickerUnexpected { step },
            SetupError::PickerClosed { step },
            SetupError::AliasPromptMismatch,
            SetupError::AliasReadbackMismatch,
            SetupError::AliasNotConfirmed,
            SetupError::KernelStartFailed,
            SetupError::StartupCellFailed,
            SetupError::MountFailed,
            SetupError::VerificationFailed {
                check: "file_service_reads_nonce",
            },
            SetupError::CommandTimedOut { stage },
            SetupError::CommandFailed { stage },
            SetupError::DeadlineExceeded {
                stage,
                deadline_ms: 300_000,
                waiting_for: Some(ActionCode::SignIn),
            },
            SetupError::Cancelled,
        ]
    }

    #[test]
    fn every_variant_has_a_listed_unique_snake_case_code() {
        let codes: Vec<&str> = every_variant().iter().map(SetupError::code).collect();
        assert_eq!(codes, ERROR_CODES);
        let unique: std::collections::BTreeSet<_> = codes.iter().collect();
        assert_eq!(unique.len(), codes.len());
        for code in codes {
            assert!(code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        }
    }

    #[test]
    fn messages_name_what_to_do() {
        let active = SetupError::SetupActive {
            setup_id: SetupId::from_parts(36, 1),
            operation: GuardedOperation::Transfer,
        };
        assert_eq!(
            active.to_string(),
            "the notebook has an unsettled Colab setup setup_10_000001; wait for it with \
             get_kernel_setup (or cancel it with cancel_kernel_setup) before transferring files"
        );
        let deadline = SetupError::DeadlineExceeded {
            stage: Stage::AwaitingKernelSelection,
            deadline_ms: 300_000,
            waiting_for: Some(ActionCode::SelectKernelChoice),
        };
        assert_eq!(
            deadline.to_string(),
            "the setup did not finish within 300000 ms (stage awaiting_kernel_selection, waiting \
             for select_kernel_choice); start it again"
        );
    }
}
