//! The small enums receipts carry, each with a stable snake_case wire name.

/// Declares a fieldless enum with `as_str`, `Display` and `Serialize` from one table of wire
/// names, so the three can never disagree.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident => $wire:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $wire, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                formatter.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    /// Where a setup is in its pipeline (`stage`, `failedStage`). A failed or cancelled setup
    /// keeps the stage it stopped in.
    pub enum Stage {
        /// Admitted; nothing dispatched yet.
        Requested => "requested",
        /// Checking the provider can be used: the Colab extension activated, credentials present.
        Preparing => "preparing",
        /// Getting a runtime: reading the sessions file, probing a given runtime, a tunnel
        /// assignment, or walking the kernel picker up to the kernel list.
        AcquiringServer => "acquiring_server",
        /// Waiting for the client to list kernel choices and select one by id.
        AwaitingKernelSelection => "awaiting_kernel_selection",
        /// Starting the chosen kernel (standalone), or running and removing the temporary `pass`
        /// cell (VS Code).
        StartingKernel => "starting_kernel",
        /// Connecting the runtime's file service: `colab.mountServer` in VS Code, the Contents
        /// API behind Colab's proxy in the standalone host.
        Mounting => "mounting",
        /// Running the `check_colab` nonce proof against the mounted root.
        Verifying => "verifying",
        /// Verified and ready.
        Complete => "complete",
    }
}

wire_enum! {
    /// The bounded name of the provider step a setup is at (`providerStep`,
    /// `failedProviderStep`). Names carry no picker text and by themselves establish no provider
    /// or authentication failure.
    pub enum ProviderStep {
        /// Standalone: reading google-colab-cli's sessions file.
        SessionsFile => "sessions_file",
        /// Standalone: checking that the given runtime URL answers with its proxy token.
        RuntimeProbe => "runtime_probe",
        /// Standalone: looking up an existing tunnel assignment (the `GET` of `assign`).
        AssignmentLookup => "assignment_lookup",
        /// Standalone: requesting a new tunnel assignment (`GET` then `POST` of `assign`).
        AssignmentRequest => "assignment_request",
        /// VS Code: the notebook's initial kernel picker (local suggestions, "Select Another
        /// Kernel…").
        KernelPicker => "kernel_picker",
        /// VS Code: the kernel-source picker, choosing "Colab".
        ColabSource => "colab_source",
        /// VS Code: waiting for Colab's server prompt.
        ServerPrompt => "server_prompt",
        /// VS Code: the one repeated "Colab" selection allowed after a new empty prompt.
        ProviderHandoff => "provider_handoff",
        /// VS Code: choosing the exact existing server row, or "New Colab Server".
        ServerSelection => "server_selection",
        /// VS Code: choosing "CPU" for a new server.
        AcceleratorSelection => "accelerator_selection",
        /// VS Code: choosing "Standard" when the machine-shape prompt appears.
        MachineShapeSelection => "machine_shape_selection",
        /// VS Code: choosing "Latest" when the runtime-version prompt appears.
        RuntimeVersionSelection => "runtime_version_selection",
        /// VS Code: the alias input box (must name Colab CPU).
        AliasInput => "alias_input",
        /// VS Code: the kernel list of the chosen server.
        KernelSelection => "kernel_selection",
    }
}

wire_enum! {
    /// The setup's status (`status`). `ready`, `failed` and `cancelled` are terminal.
    pub enum SetupStatus {
        /// Working.
        Running => "running",
        /// Paused until the client lists kernel choices and selects one.
        AwaitingKernelSelection => "awaiting_kernel_selection",
        /// Paused until the user does something outside MCP (`actionRequired` says what).
        AwaitingUser => "awaiting_user",
        /// Terminal: the runtime was verified.
        Ready => "ready",
        /// Terminal: the setup failed (`error`, `failedStage` say where and why).
        Failed => "failed",
        /// Terminal: cancelled by `cancel_kernel_setup`.
        Cancelled => "cancelled",
    }
}

impl SetupStatus {
    /// Whether the status is final.
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            SetupStatus::Ready | SetupStatus::Failed | SetupStatus::Cancelled
        )
    }
}

wire_enum! {
    /// What the setup waits for someone to do (`actionRequired.code`).
    pub enum ActionCode {
        /// Call `list_setup_kernels`, then `select_setup_kernel` with one returned id.
        SelectKernelChoice => "select_kernel_choice",
        /// Sign in to Google in the Colab prompt VS Code shows.
        SignIn => "sign_in",
        /// Refresh the Google credentials the standalone host uses.
        RefreshCredentials => "refresh_credentials",
        /// Grant the consent a provider asks for.
        GrantConsent => "grant_consent",
        /// Answer another Colab or Google prompt.
        AnswerPrompt => "answer_prompt",
    }
}

wire_enum! {
    /// What the host is about to do on a notebook, for [`crate::SetupRegistry::guard`].
    pub enum GuardedOperation {
        /// `run_cells`, or `edit_cells` with a rerun.
        Run => "run",
        /// `upload_file` / `download_file`.
        Transfer => "transfer",
        /// Any change of the notebook document (edit, move, clear outputs).
        NotebookMutation => "notebook_mutation",
        /// Another `configure_kernel` or `mount_colab_server`.
        Setup => "setup",
        /// Selecting, restarting or interrupting the notebook's kernel.
        KernelChange => "kernel_change",
    }
}

impl GuardedOperation {
    /// The operation in words, for messages.
    pub const fn describe(self) -> &'static str {
        match self {
            GuardedOperation::Run => "running cells",
            GuardedOperation::Transfer => "transferring files",
            GuardedOperation::NotebookMutation => "changing the notebook",
            GuardedOperation::Setup => "starting another setup",
            GuardedOperation::KernelChange => "changing the kernel",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_snake_case_and_unique() {
        let mut names: Vec<&str> = Stage::ALL.iter().map(|stage| stage.as_str()).collect();
        names.extend(ProviderStep::ALL.iter().map(|step| step.as_str()));
        names.extend(SetupStatus::ALL.iter().map(|status| status.as_str()));
        names.extend(ActionCode::ALL.iter().map(|code| code.as_str()));
        for name in &names {
            assert!(
                name.bytes()
                    .all(|byte| byte.is_ascii_lowercase() || byte == b'_'),
                "{name}"
            );
        }
        for kind in [
            Stage::ALL.len(),
            ProviderStep::ALL.len(),
            SetupStatus::ALL.len(),
        ] {
            assert!(kind > 0);
        }
        let stages: std::collections::BTreeSet<_> = Stage::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(stages.len(), Stage::ALL.len());
        let steps: std::collections::BTreeSet<_> =
            ProviderStep::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(steps.len(), ProviderStep::ALL.len());
        assert_eq!(
            serde_json::to_string(&ProviderStep::ProviderHandoff).unwrap(),
            "\"provider_handoff\""
        );
    }

    #[test]
    fn only_ready_failed_and_cancelled_are_terminal() {
        let terminal: Vec<_> = SetupStatus::ALL
            .iter()
            .filter(|status| status.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                &SetupStatus::Ready,
                &SetupStatus::Failed,
                &SetupStatus::Cancelled
            ]
        );
    }
}
