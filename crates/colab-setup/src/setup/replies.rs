//! The host's replies to flow and cleanup commands.

use crate::error::SetupError;
use crate::picker::PickerView;
use crate::probe::{CheckEvent, CheckReply, CheckStep, KernelFailure};
use crate::receipt::RetainReason;
use crate::servers::{Availability, resolve_server};
use crate::wire::{ActionCode, ProviderStep, Stage};

use super::*;

impl Setup {
    // Replies.

    pub(super) fn on_reply(
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
    pub(super) fn record_effects(&mut self, kind: &CommandKind, reply: &Reply) {
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

    pub(super) fn on_flow_reply(
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

    pub(super) fn unexpected_reply(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        let error = match self.provider_step {
            Some(step) if self.stage == Stage::AcquiringServer => {
                SetupError::PickerUnexpected { step }
            }
            _ => SetupError::CommandFailed { stage: self.stage },
        };
        self.fail(error, now_ms, out);
    }

    pub(super) fn on_failure(
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

    pub(super) fn on_sessions(&mut self, reply: Reply, now_ms: u64, out: &mut Vec<SetupAction>) {
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
}
