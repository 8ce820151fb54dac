//! Dispatching commands, walking the stages, time, the terminal states and the verification step.

use crate::error::SetupError;
use crate::names::FileServiceRoot;
use crate::probe::{CheckAction, CheckEvent, ColabCheck};
use crate::wire::{ActionCode, ProviderStep, SetupStatus, Stage};

use super::*;

impl Setup {
    // Dispatch.

    pub(super) fn issue(
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

    pub(super) fn flow_command(
        &mut self,
        kind: CommandKind,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        let deadline = now_ms.saturating_add(self.config.command_timeout_ms);
        self.issue(kind, Purpose::Flow, deadline, out);
    }

    /// Dispatches `kind` once `delay_ms` has passed (on a later tick).
    pub(super) fn later(&mut self, kind: CommandKind, delay_ms: u64, now_ms: u64) {
        self.wake = Some(Wake {
            at_ms: now_ms.saturating_add(delay_ms),
            kind,
        });
    }

    pub(super) fn begin(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn enter_acquiring(&mut self, step: ProviderStep) {
        self.stage = Stage::AcquiringServer;
        self.provider_step = Some(step);
    }

    /// After the provider check: the route's acquisition.
    pub(super) fn after_preparing(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn enter_awaiting_selection(&mut self) {
        self.stage = Stage::AwaitingKernelSelection;
        if !self.route.is_vscode() {
            self.provider_step = None;
        }
    }

    pub(super) fn enter_starting(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn enter_mounting(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn enter_verifying(
        &mut self,
        root: FileServiceRoot,
        now_ms: u64,
        out: &mut Vec<SetupAction>,
    ) {
        self.stage = Stage::Verifying;
        let mut check = ColabCheck::new(root, self.nonce.clone(), self.config.check, now_ms);
        let actions = check.start(now_ms);
        self.check = Some(check);
        self.on_check_actions(actions, now_ms, out);
    }

    // Terminal states.

    pub(super) fn fail(&mut self, error: SetupError, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_none() {
            self.failed_stage = Some(self.stage);
            self.failed_provider_step = self.provider_step;
            self.terminate(SetupStatus::Failed, Some(error), now_ms, out);
        }
    }

    /// Ends the setup with a terminal status; `error` says why it did not become ready.
    pub(super) fn terminate(
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
    pub(super) fn plan_cleanup(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
        if self.terminal.is_none() || self.terminal == Some(SetupStatus::Ready) {
            return;
        }
        let mut cleanups = Vec::new();
        let cell = &self.cell;
        if let Some(cell_id) = cell.id.clone()
            && !cell.removed
            && cell.retained.is_none()
            && !cell.insert_outstanding
            && !cell.run_outstanding
            && !cell.remove_outstanding
        {
            cleanups.push(CommandKind::RemoveTemporaryCell {
                cell_id,
                source: STARTUP_CELL_SOURCE,
            });
        }
        if self.runtime.created_here
            && self.runtime.release == Release::NotAttempted
            && let Some(endpoint) = self.runtime.endpoint.clone()
        {
            cleanups.push(CommandKind::ReleaseRuntime { endpoint });
        }
        if self.picker.open && !self.picker.dismissed {
            cleanups.push(CommandKind::DismissPicker);
        }
        let deadline = now_ms.saturating_add(self.config.command_timeout_ms);
        for kind in cleanups {
            self.issue(kind, Purpose::Cleanup, deadline, out);
        }
    }

    // Time.

    pub(super) fn on_time(&mut self, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    // Verification.

    pub(super) fn on_check_actions(
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
