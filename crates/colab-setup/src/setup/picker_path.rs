//! The picker path (rows, prompts, the alias) and the kernel choices.

use crate::choices::ChoiceListing;
use crate::error::SetupError;
use crate::picker::{
    PickerLabels, PickerRow, PickerView, RowMatch, UserPrompt, find_row, server_rows,
};
use crate::servers::resolve_server;
use crate::wire::{ActionCode, ProviderStep, Stage};

use super::*;

impl Setup {
    // The picker path.

    pub(super) fn observe_later(&mut self, now_ms: u64) {
        self.later(
            CommandKind::ObservePicker,
            self.config.poll_interval_ms,
            now_ms,
        );
    }

    pub(super) fn choose(
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

    pub(super) fn on_view(&mut self, view: PickerView, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn on_quick_pick(
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

    pub(super) fn choose_colab(
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

    pub(super) fn select_server(
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

    pub(super) fn on_list(&mut self, token: [u8; 4], now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn on_choices(&mut self, reply: Reply, now_ms: u64, out: &mut Vec<SetupAction>) {
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

    pub(super) fn on_select(&mut self, choice_id: &str, now_ms: u64, out: &mut Vec<SetupAction>) {
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
    pub(super) fn drop_selection(&mut self) {
        self.stage = Stage::AwaitingKernelSelection;
        self.selection = None;
        self.kernel_label = None;
    }

    /// The choices changed under a selection: nothing was selected, and the listing is void.
    pub(super) fn listing_changed(&mut self) {
        self.drop_selection();
        self.listing = None;
        self.listing_problem = Some(SetupError::ChoicesChanged);
    }
}
