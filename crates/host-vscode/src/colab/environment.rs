//! The window's Colab preparation, preflight and terminals: the I/O around the decisions of
//! `colab_setup::environment`.

use colab_setup::environment::{
    ClosureOutcome, FolderPlan, INVENTORY_TTL_MS, MAX_INVENTORY_TERMINALS, NEXT_AFTER_CONVERSION,
    PreparationRecord, PreparationStatus, PreparationView, RestartModeRefusal, TerminalInventory,
    WindowFacts, WindowFolder, check_preparation, close_targets, closure_partial, listed_shell_pid,
    listed_shell_type, listed_terminal_name, open_work_message, plan_folder, preflight_blockers,
    restart_mode_refusal,
};

use host_core::BoxFuture;
use host_core::environment::{ColabEnvironment, MAX_PREFLIGHT_LABEL_CHARS};
use mcp_contract::params::PrepareColabEnvironmentParams;
use mcp_contract::results::{
    CloseColabTerminalsResult, ColabPreparationResult, ColabTerminalClosure, ColabTerminalEntry,
    ColabTerminalsResult, PreflightNative, PreflightPolicy, PreflightWindow, PreflightWorkspace,
    PreparationState, TerminalClosureOutcome, WindowStatus,
};
use mcp_contract::{ErrorCode, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::native::{NativeBlocker, NativeDriver};

use super::*;

/// A preparation as kept in `globalState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredPreparation {
    pub(super) preparation_id: String,
    pub(super) folder_uri: String,
    /// The root's display name once prepared.
    pub(super) folder_name: String,
    pub(super) expected_window_label: String,
    pub(super) converted: bool,
    /// The folder was made by this preparation (it holds [`OWNED_MARKER`]).
    pub(super) generated: bool,
    /// `converting`, `ready` or `failed`.
    pub(super) status: String,
}

/// The file a generated folder holds, naming the preparation that made it.
pub(super) const OWNED_MARKER: &str = ".jupyter-mcp-colab";

impl WindowColab {
    pub(super) async fn load_preparation(&self, id: &str) -> Option<StoredPreparation> {
        let reply: StateGetReply = self
            .ask(ColabOp::StateGet {
                key: format!("{PREPARATION_KEY}{id}"),
            })
            .await
            .ok()?;
        serde_json::from_value(reply.value?).ok()
    }

    pub(super) async fn store_preparation(
        &self,
        stored: &StoredPreparation,
    ) -> Result<(), ToolError> {
        let value = serde_json::to_value(stored).unwrap_or(Value::Null);
        self.ask::<AcceptedReply>(ColabOp::StateSet {
            key: format!("{PREPARATION_KEY}{}", stored.preparation_id),
            value,
        })
        .await
        .map(|_| ())
        .map_err(|reason| ToolError {
            code: ErrorCode::IoError,
            message: format!(
                "the preparation could not be recorded ({reason}); nothing was changed in the window"
            ),
            details: None,
        })
    }

    /// The status and receipt of `stored`, checked afresh against the window as it is now.
    pub(super) async fn verify(
        &self,
        stored: &StoredPreparation,
    ) -> (PreparationStatus, ColabPreparationResult) {
        let state = self
            .ask::<StateReply>(ColabOp::State)
            .await
            .unwrap_or_default();
        let generated_folder_owned = stored.generated
            && crate::uri::file_path(&stored.folder_uri)
                .map(|folder| folder.join(OWNED_MARKER))
                .and_then(|marker| std::fs::read_to_string(marker).ok())
                .is_some_and(|text| text.trim() == stored.preparation_id);
        let native_blocker = self.bind().await.err();
        let folders: Vec<(&str, &str)> = state
            .folders
            .iter()
            .map(|folder| (folder.uri.as_str(), folder.name.as_str()))
            .collect();
        let (status, blockers) = check_preparation(
            &PreparationRecord {
                folder_uri: &stored.folder_uri,
                folder_name: &stored.folder_name,
                converted: stored.converted,
                generated: stored.generated,
                status: PreparationStatus::parse(&stored.status),
            },
            &PreparationView {
                folders: &folders,
                is_workspace: state.workspace_file.is_some(),
                trusted: state.trusted,
                generated_folder_owned,
                native_blocker: native_blocker.as_ref().map(NativeBlocker::code),
            },
        );
        let receipt = ColabPreparationResult {
            preparation_id: stored.preparation_id.clone(),
            window_id: self.window_id.clone(),
            status: preparation_state(status),
            environment_ready: status == PreparationStatus::Ready,
            folder_uri: stored.folder_uri.clone(),
            workspace_uri: state.workspace_file.clone(),
            expected_window_label: stored.expected_window_label.clone(),
            converted: stored.converted,
            restart_required: false,
            native_bound: native_blocker.is_none(),
            blockers,
            next: status.next_step().to_owned(),
        };
        (status, receipt)
    }
}

/// Creates the isolated folder of preparation `preparation_id` under the home directory (the
/// temporary directory without one), marked as this preparation's, and answers its URI.
fn generate_folder(preparation_id: &str) -> Result<String, ToolError> {
    let home = std::env::home_dir().unwrap_or_else(std::env::temp_dir);
    let path = home.join("jupyter-mcp-colab").join(preparation_id);
    std::fs::create_dir_all(&path)
        .and_then(|()| std::fs::write(path.join(OWNED_MARKER), preparation_id))
        .map_err(|failure| ToolError {
            code: ErrorCode::IoError,
            message: format!(
                "could not create the isolated folder {}: {}",
                path.display(),
                failure.kind()
            ),
            details: None,
        })?;
    Ok(crate::uri::file_uri(&path))
}

impl ColabEnvironment for WindowColab {
    fn preflight(&self) -> BoxFuture<'_, Result<PreflightWindow, ToolError>> {
        Box::pin(async move {
            let state = self.state().await?;
            let counts: PreflightReply = self
                .ask_for_tool(ColabOp::Preflight, "report its counts")
                .await?;
            let native = match &self.native {
                None => PreflightNative::default(),
                Some(driver) => match NativeDriver::page_candidates(driver.port()).await {
                    Ok(pages) => PreflightNative {
                        configured: true,
                        reachable: true,
                        page_candidates: pages,
                    },
                    Err(_) => PreflightNative {
                        configured: true,
                        reachable: false,
                        page_candidates: 0,
                    },
                },
            };
            let blockers = preflight_blockers(&WindowFacts {
                extension_installed: state.installed,
                activation_failed: state.activation_failed,
                native_configured: native.configured,
                native_reachable: native.reachable,
                is_workspace: state.workspace_file.is_some(),
                open_work: counts.open_work(),
            });
            let is_local = |folder: &&Folder| folder.uri.starts_with("file:");
            Ok(PreflightWindow {
                window_id: self.window_id.clone(),
                window_label: self
                    .window_label
                    .chars()
                    .take(MAX_PREFLIGHT_LABEL_CHARS)
                    .collect(),
                status: WindowStatus::Available,
                colab_extension: state.installed,
                workspace: PreflightWorkspace {
                    folders: state.folders.len(),
                    local_folders: state.folders.iter().filter(is_local).count(),
                    colab_folders: state
                        .folders
                        .iter()
                        .filter(|folder| folder.uri.starts_with("colab:"))
                        .count(),
                    is_workspace: state.workspace_file.is_some(),
                    untitled_workspace: state
                        .workspace_file
                        .as_deref()
                        .is_some_and(|file| file.starts_with("untitled:")),
                    remote: state.remote_name.is_some(),
                    trusted: state.trusted,
                },
                notebooks: counts.notebooks,
                text_documents: counts.text_documents,
                tabs: counts.tabs,
                terminals: counts.terminals,
                debug_sessions: counts.debug_sessions,
                policy: PreflightPolicy {
                    confirm_before_close: counts.confirm_before_close,
                    restore_windows: counts.restore_windows,
                },
                native,
                blockers,
            })
        })
    }

    fn list_terminals(&self) -> BoxFuture<'_, Result<ColabTerminalsResult, ToolError>> {
        Box::pin(async move {
            let reply: TerminalsReply = self
                .ask_for_tool(ColabOp::Terminals, "list its terminals")
                .await?;
            let inventory_id = format!("inv-{}", random_hex(8));
            let mut entries = Vec::new();
            let mut terminals = Vec::new();
            for info in reply.terminals.into_iter().take(MAX_INVENTORY_TERMINALS) {
                let terminal_ref = format!("t{}", random_hex(6));
                terminals.push(ColabTerminalEntry {
                    terminal_ref: terminal_ref.clone(),
                    name: listed_terminal_name(&info.name),
                    shell_pid: listed_shell_pid(info.process_id),
                    shell_type: info.shell_type.as_deref().map(listed_shell_type),
                    interacted: info.interacted,
                    exited: info.exited,
                    exit_code: info.exit_code,
                });
                entries.push((terminal_ref, info));
            }
            *self
                .inventory
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(TerminalInventory::new(
                inventory_id.clone(),
                self.now_ms(),
                entries,
            ));
            Ok(ColabTerminalsResult {
                window_id: self.window_id.clone(),
                inventory_id,
                expires_in_ms: INVENTORY_TTL_MS,
                terminals,
            })
        })
    }

    fn close_terminals<'a>(
        &'a self,
        inventory_id: &'a str,
        refs: &'a [String],
    ) -> BoxFuture<'a, Result<CloseColabTerminalsResult, ToolError>> {
        Box::pin(async move {
            let targets = close_targets(
                self.inventory
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .as_ref(),
                inventory_id,
                refs,
                self.now_ms(),
            )
            .map_err(|refusal| ToolError {
                code: ErrorCode::InvalidArgument,
                message: refusal.to_string(),
                details: None,
            })?;
            let mut results = Vec::new();
            let mut outcomes = Vec::new();
            for (terminal_ref, info) in targets {
                let reply = self
                    .ask::<CloseReply>(ColabOp::CloseTerminal {
                        handle: info.handle.clone(),
                        name: info.name.clone(),
                        process_id: info.process_id,
                    })
                    .await;
                let outcome =
                    ClosureOutcome::from_answer(reply.as_ref().ok().map(|r| r.outcome.as_str()));
                outcomes.push(outcome);
                results.push(ColabTerminalClosure {
                    terminal_ref,
                    outcome: closure_outcome(outcome),
                });
            }
            let partial = closure_partial(&outcomes);
            Ok(CloseColabTerminalsResult {
                window_id: self.window_id.clone(),
                inventory_id: inventory_id.to_owned(),
                results,
                partial,
            })
        })
    }

    fn prepare<'a>(
        &'a self,
        params: &'a PrepareColabEnvironmentParams,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>> {
        Box::pin(async move {
            if let Some(mode) = &params.restart_mode {
                let refusal = restart_mode_refusal(mode);
                return Err(match refusal {
                    RestartModeRefusal::Unsupported => ToolError {
                        code: ErrorCode::NotSupported,
                        message: refusal.to_string(),
                        details: Some(json!({ "blockers": ["restart_unsupported"] })),
                    },
                    RestartModeRefusal::Unknown(_) => ToolError {
                        code: ErrorCode::InvalidArgument,
                        message: refusal.to_string(),
                        details: None,
                    },
                });
            }
            // The native connection first: without it nothing here helps, and restarting VS
            // Code to add one is not something this build does.
            self.native().map_err(|blocker| {
                blocked(
                    "Colab preparation needs the native debugging connection and none is \
                     configured; this build cannot restart VS Code to add one: start VS Code with \
                     --remote-debugging-port=N and set jupyterMcp.nativeDebugPort to N",
                    &[blocker.code().to_owned(), "restart_unsupported".to_owned()],
                )
            })?;
            self.bind()
                .await
                .map_err(|blocker| native_blocker_error(&blocker))?;
            // A remote extension host (code-server is one) is fine as long as the binding above
            // held: what matters is that the driver reaches this window's page on loopback.
            let state = self.state().await?;
            let wanted = params
                .folder_uri
                .as_deref()
                .map(|uri| (uri, crate::uri::canonical(uri)));
            let folders: Vec<WindowFolder> = state
                .folders
                .iter()
                .map(|folder| WindowFolder {
                    uri: folder.uri.clone(),
                    canonical_uri: crate::uri::canonical(&folder.uri),
                    name: folder.name.clone(),
                })
                .collect();
            let preparation_id = format!("prep-{}", random_hex(8));
            // Which folder, and whether the window must change.
            let plan = plan_folder(
                state.workspace_file.is_some(),
                &folders,
                wanted
                    .as_ref()
                    .map(|(uri, canonical)| (*uri, canonical.as_str())),
                &preparation_id,
            )
            .map_err(|refusal| match refusal.blocker() {
                Some(blocker) => blocked(refusal.to_string(), &[blocker.to_owned()]),
                None => ToolError {
                    code: ErrorCode::InvalidArgument,
                    message: refusal.to_string(),
                    details: None,
                },
            })?;
            let (folder, converted, generated) = match plan {
                FolderPlan::Keep { uri, name } => (Folder { uri, name }, false, false),
                FolderPlan::Convert {
                    uri,
                    name,
                    must_exist,
                } => {
                    if must_exist && !crate::uri::file_path(&uri).is_some_and(|path| path.is_dir())
                    {
                        return Err(ToolError {
                            code: ErrorCode::NotebookNotFound,
                            message: format!("folderUri {uri} is not an existing folder"),
                            details: None,
                        });
                    }
                    (Folder { uri, name }, true, false)
                }
                FolderPlan::Generate { name } => {
                    let uri = generate_folder(&preparation_id)?;
                    (Folder { uri, name }, true, true)
                }
            };
            if converted {
                // Converting restarts the extension host: what is open now would be restored,
                // not carried; it blocks rather than being closed or saved for the user.
                // Counts that cannot be read block: a default would hide open work.
                let counts: PreflightReply =
                    self.ask(ColabOp::Preflight).await.map_err(|reason| {
                        blocked(
                            format!("the window did not report what is open ({reason}); nothing was changed"),
                            &["window_counts_unavailable".to_owned()],
                        )
                    })?;
                let blockers = counts.open_work().blockers();
                if !blockers.is_empty() {
                    return Err(blocked(open_work_message(&blockers), &blockers));
                }
            }
            let mut stored = StoredPreparation {
                preparation_id: preparation_id.clone(),
                folder_uri: folder.uri.clone(),
                folder_name: folder.name.clone(),
                expected_window_label: folder.name.clone(),
                converted,
                generated,
                status: if converted {
                    PreparationStatus::Converting
                } else {
                    PreparationStatus::Ready
                }
                .as_str()
                .to_owned(),
            };
            // Recorded before the change, and never replayed: a lost acknowledgement leaves a
            // `converting` receipt that polling settles from what the window shows.
            self.store_preparation(&stored).await?;
            if converted {
                let delete_count = usize::from(!state.folders.is_empty());
                let reply = self
                    .ask::<AcceptedReply>(ColabOp::UpdateWorkspaceFolders {
                        start: 0,
                        delete_count,
                        folders: vec![folder.clone()],
                    })
                    .await;
                if !matches!(reply, Ok(AcceptedReply { accepted: true, .. })) {
                    stored.status = PreparationStatus::Failed.as_str().to_owned();
                    self.store_preparation(&stored).await?;
                    return Err(blocked(
                        "VS Code refused to turn the window into a workspace (updateWorkspaceFolders \
                         returned false); nothing was changed",
                        &["workspace_update_refused".to_owned()],
                    ));
                }
                return Ok(ColabPreparationResult {
                    preparation_id,
                    window_id: self.window_id.clone(),
                    status: PreparationState::Converting,
                    environment_ready: false,
                    folder_uri: folder.uri,
                    workspace_uri: None,
                    expected_window_label: stored.expected_window_label,
                    converted: true,
                    restart_required: false,
                    native_bound: true,
                    blockers: Vec::new(),
                    next: NEXT_AFTER_CONVERSION.to_owned(),
                });
            }
            Ok(self.verify(&stored).await.1)
        })
    }

    fn preparation<'a>(
        &'a self,
        preparation_id: &'a str,
    ) -> BoxFuture<'a, Result<ColabPreparationResult, ToolError>> {
        Box::pin(async move {
            let Some(mut stored) = self.load_preparation(preparation_id).await else {
                return Err(ToolError {
                    code: ErrorCode::InvalidArgument,
                    message: format!(
                        "no preparation `{preparation_id}` is recorded in this VS Code profile; \
                         call prepare_colab_environment"
                    ),
                    details: None,
                });
            };
            let (status, receipt) = self.verify(&stored).await;
            if status.as_str() != stored.status {
                stored.status = status.as_str().to_owned();
                let _ = self.store_preparation(&stored).await;
            }
            Ok(receipt)
        })
    }
}

/// A preparation's status as the result reports it.
fn preparation_state(status: PreparationStatus) -> PreparationState {
    match status {
        PreparationStatus::Converting => PreparationState::Converting,
        PreparationStatus::Ready => PreparationState::Ready,
        PreparationStatus::Failed => PreparationState::Failed,
    }
}

/// A terminal's closure as the result reports it.
fn closure_outcome(outcome: ClosureOutcome) -> TerminalClosureOutcome {
    match outcome {
        ClosureOutcome::Closed => TerminalClosureOutcome::Closed,
        ClosureOutcome::AlreadyGone => TerminalClosureOutcome::AlreadyGone,
        ClosureOutcome::Uncertain => TerminalClosureOutcome::Uncertain,
    }
}
