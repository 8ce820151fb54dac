//! The kernel tools: listing and selecting kernels, starting one, reporting its state, and
//! restarting or interrupting it (which ends the notebook's tracked run honestly). They see the
//! host's kernels only through [`crate::kernel::NotebookKernels`].

use mcp_contract::params::{
    ConfigureKernelParams, KernelRuntime, NotebookRefParams, NotebookRefsParams, SelectKernelParams,
};
use mcp_contract::results::*;
use mcp_contract::{ErrorCode, ToolError};
use notebook_model::edit::EditOp;
use notebook_model::identity::METADATA_KEY;
use serde_json::{Map, Value, json};

use crate::host::{NotebookHost, NotebookLocation};
use crate::kernel::StartProgress;
use crate::kernel::{KernelLookup, KernelRecord, RequestOutcome, SharedSession};
use crate::tools::{CallContext, ImageContent, Tools, error, to_json};

type ToolResult = Result<(Value, Vec<ImageContent>), ToolError>;

/// The state `get_kernel_info` reports for a notebook's kernel, or for its absence.
pub(crate) fn kernel_state(lookup: &KernelLookup, language: &str) -> KernelState {
    match lookup {
        KernelLookup::Running(session) => {
            let status = *session.status().borrow();
            let info = session.info();
            let dead = status.is_dead();
            KernelState {
                label: Some(info.label).filter(|label| !label.is_empty()),
                id: Some(info.id).filter(|id| !id.is_empty()),
                language: if info.language.is_empty() {
                    language.to_owned()
                } else {
                    info.language
                },
                status: status.into(),
                runtime: if dead {
                    KernelRuntimeState::Dead
                } else {
                    KernelRuntimeState::Active
                },
                runtime_reason: dead.then(|| {
                    "the kernel process has exited; the next run_cells or configure_kernel starts a new one"
                        .to_owned()
                }),
                implementation: info.implementation.filter(|text| !text.is_empty()),
                language_version: info.language_version.filter(|text| !text.is_empty()),
                epoch: session.epoch(),
                pid: info.pid,
                runs_on: info.runs_on,
            }
        }
        KernelLookup::Absent { reason } | KernelLookup::Unobserved { reason } => {
            let seen_nothing = matches!(lookup, KernelLookup::Unobserved { .. });
            KernelState {
                label: None,
                id: None,
                language: language.to_owned(),
                status: if seen_nothing {
                    KernelStatusName::Unknown
                } else {
                    KernelStatusName::NotStarted
                },
                runtime: if seen_nothing {
                    KernelRuntimeState::Unknown
                } else {
                    KernelRuntimeState::NoKernel
                },
                runtime_reason: Some(reason.clone()),
                implementation: None,
                language_version: None,
                epoch: None,
                pid: None,
                runs_on: None,
            }
        }
    }
}

/// The metadata that makes a notebook use `record` on its next start.
fn record_metadata(record: &KernelRecord, ours: Option<&Map<String, Value>>) -> Map<String, Value> {
    let mut ours = ours.cloned().unwrap_or_default();
    ours.insert(
        "kernel_id".to_owned(),
        Value::String(record.kernel_id.clone()),
    );
    let mut patch = Map::new();
    patch.insert(METADATA_KEY.to_owned(), Value::Object(ours));
    patch.insert(
        "kernelspec".to_owned(),
        json!({
            "name": record.kernelspec_name,
            "display_name": record.display_name,
            "language": record.language,
        }),
    );
    patch
}

impl<H: NotebookHost> Tools<H> {
    pub(crate) async fn list_kernels(&self, params: NotebookRefParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let listing = self
            .kernels()?
            .list(&location, Self::preference(&document.notebook))
            .await?;
        to_json(&ListKernelsResult {
            notebook: location.uri,
            kernels: listing
                .kernels
                .into_iter()
                .map(|option| option.choice)
                .collect(),
            selected: listing.selected,
            hint: listing.hint,
        })
    }

    pub(crate) async fn select_kernel(&self, params: SelectKernelParams) -> ToolResult {
        let location = self.resolve(&params.notebook_ref).await?;
        let kernels = self.kernels()?;
        let selection = kernels
            .select(&location, params.kernel_id.clone())
            .await
            .map_err(|failure| match failure {
                crate::kernel::KernelError::UnknownKernel { message } => {
                    error(ErrorCode::KernelNotFound, message)
                }
                other => other.into(),
            })?;
        if let Some(record) = &selection.record {
            let document = self.host.load(&location).await?;
            let ours = document
                .notebook
                .metadata()
                .get(METADATA_KEY)
                .and_then(Value::as_object);
            let patch = record_metadata(record, ours);
            let description = format!("select_kernel ({})", record.kernel_id);
            self.mutate(
                &params.notebook_ref,
                &[EditOp::MergeNotebookMetadata { metadata: patch }],
                description,
            )
            .await?;
        }
        // A running kernel of another kind is replaced on the next start.
        if selection.replaces_running {
            self.invalidate_active_run(&location, execution_tracker::Invalidation::Restart)
                .await;
            kernels.shutdown(&location).await?;
        }
        to_json(&SelectKernelResult {
            notebook: location.uri,
            kernel: selection.kernel,
            replaced_running_kernel: selection.replaces_running,
        })
    }

    /// For a notebook being created: the kernel it will use (an explicit `kernel_id`, recorded in
    /// its metadata, or what the defaults choose), so the caller sees the interpreter up front.
    pub(crate) async fn resolve_new_kernel(
        &self,
        location: &NotebookLocation,
        notebook: &mut notebook_model::Notebook,
        kernel_id: Option<&str>,
    ) -> Result<Option<KernelChoice>, ToolError> {
        let Some(kernels) = self
            .kernels
            .as_ref()
            .filter(|kernels| kernels.capabilities().choose)
        else {
            return Ok(None);
        };
        let listing = kernels.list(location, Self::preference(notebook)).await?;
        let Some(kernel_id) = kernel_id else {
            return Ok(listing.selected.and_then(|selected| {
                listing
                    .kernels
                    .into_iter()
                    .find(|option| option.choice.id == selected)
                    .map(|option| option.choice)
            }));
        };
        let option = listing
            .kernels
            .into_iter()
            .find(|option| option.choice.id == kernel_id)
            .ok_or_else(|| {
                error(
                    ErrorCode::KernelNotFound,
                    format!(
                        "no kernel has the id `{kernel_id}`; call list_kernels for the ids; nothing was created"
                    ),
                )
            })?;
        if let Some(record) = &option.record {
            for (key, value) in record_metadata(record, None) {
                notebook.metadata_mut().insert(key, value);
            }
        }
        Ok(Some(option.choice))
    }

    pub(crate) async fn configure_kernel(
        &self,
        params: ConfigureKernelParams,
        context: &CallContext,
    ) -> ToolResult {
        if params.runtime == Some(KernelRuntime::Colab) {
            return self.configure_colab(params).await;
        }
        if params.server_alias.is_some() || params.wait_ms.is_some() {
            return Err(error(
                ErrorCode::InvalidArgument,
                "serverAlias and waitMs go with runtime \"colab\"; without it configure_kernel takes only notebookRef",
            ));
        }
        let (location, document) = self.load(&params.notebook_ref).await?;
        let kernels = self.kernels()?;
        let start = context.progress.clone().map(StartProgress::new);
        let configured = kernels
            .configure_with_progress(
                &location,
                Self::preference(&document.notebook),
                start.as_ref().map(StartProgress::sink),
            )
            .await?;
        let lookup = kernels.lookup(&location).await;
        let ready = match &lookup {
            KernelLookup::Running(session) => self.proven_ready(&location, session).await,
            KernelLookup::Absent { .. } | KernelLookup::Unobserved { .. } => false,
        };
        let mut state = kernel_state(&lookup, document.notebook.code_language());
        state.epoch = state.epoch.or_else(|| self.live_epoch(&location));
        to_json(&ConfigureKernelResult {
            notebook: location.uri,
            kernel: configured.kernel,
            state,
            ready,
        })
    }

    pub(crate) async fn kernel_info(&self, params: NotebookRefParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let language = document.notebook.code_language().to_owned();
        let mut capabilities = Map::new();
        let (lookup, execution) = match self.kernels.as_ref() {
            Some(kernels) if kernels.capabilities().execute => (
                kernels.lookup(&location).await,
                json!({"availability": "available", "reason": "runs on the notebook's kernel, started on first use"}),
            ),
            _ => (
                KernelLookup::Absent {
                    reason: "this host runs no kernels".to_owned(),
                },
                json!({"availability": "unavailable", "reason": "this host runs no kernels"}),
            ),
        };
        capabilities.insert("execution".to_owned(), execution);
        if let Some(colab) = &self.colab {
            colab.refresh_roots().await;
        }
        let mut state = kernel_state(&lookup, &language);
        state.epoch = state.epoch.or_else(|| self.live_epoch(&location));
        to_json(&KernelInfoResult {
            notebook: location.uri,
            kernel: state,
            capabilities,
            colab_root_candidates: self.colab.as_ref().map(|colab| {
                colab
                    .roots()
                    .iter()
                    .map(|root| root.uri().to_string())
                    .collect()
            }),
        })
    }

    /// Ends the notebook's active run (restart: at once; interrupt: after the running cell
    /// answers the interrupt), through its runner so that outputs so far are kept. Returns the
    /// id of the run it touched.
    pub(crate) async fn invalidate_active_run(
        &self,
        location: &NotebookLocation,
        invalidation: execution_tracker::Invalidation,
    ) -> Option<String> {
        let id = {
            let registry = self.runs.registry.lock().expect("registry lock");
            registry
                .active_run(&location.uri)
                .map(|run| run.id().as_str().to_owned())
        }?;
        let control = self
            .runs
            .run_controls
            .lock()
            .expect("run controls lock")
            .get(&location.uri)
            .cloned();
        let acknowledged = match control {
            Some(control) => control.request(invalidation).await,
            None => false,
        };
        if !acknowledged && invalidation == execution_tracker::Invalidation::Restart {
            // No runner answered: end the run here so that it never claims more than we know.
            let _ = self.apply(&id, execution_tracker::RunEvent::Invalidate(invalidation));
            self.wake_run_waiters();
        }
        Some(id)
    }

    pub(crate) async fn restart_kernels(&self, params: NotebookRefsParams) -> ToolResult {
        self.kernel_requests(params, execution_tracker::Invalidation::Restart)
            .await
    }

    pub(crate) async fn interrupt_kernels(&self, params: NotebookRefsParams) -> ToolResult {
        self.kernel_requests(params, execution_tracker::Invalidation::Interrupt)
            .await
    }

    /// Restarts or interrupts each notebook's kernel, ending its tracked run first.
    async fn kernel_requests(
        &self,
        params: NotebookRefsParams,
        request: execution_tracker::Invalidation,
    ) -> ToolResult {
        use execution_tracker::Invalidation;
        let kernels = self.kernels()?;
        let locations = self.locations(&params.notebook_refs).await?;
        let mut results = Vec::new();
        for location in locations {
            let invalidated = self.invalidate_active_run(&location, request).await;
            if request == Invalidation::Restart {
                // Whatever the restart does, nothing that ran before it is fresh.
                self.epochs.forget(&location.uri);
            }
            let sent = match request {
                Invalidation::Restart => kernels.restart(&location).await,
                Invalidation::Interrupt => kernels.interrupt(&location).await,
            };
            let (outcome, detail, epoch) = match (sent, request) {
                (Ok(RequestOutcome::Done { epoch }), Invalidation::Restart) => (
                    KernelRequestOutcome::Restarted,
                    "all kernel state is gone; every cell is stale".to_owned(),
                    epoch,
                ),
                (Ok(RequestOutcome::Done { epoch }), Invalidation::Interrupt) => (
                    KernelRequestOutcome::InterruptSent,
                    "the running cell gets a KeyboardInterrupt; queued cells of the run are not run"
                        .to_owned(),
                    epoch,
                ),
                (Ok(RequestOutcome::Requested { observed }), Invalidation::Restart) => (
                    KernelRequestOutcome::RestartRequested,
                    match observed {
                        Some(observed) => format!(
                            "the editor was asked to restart the kernel; {observed}; every cell is stale"
                        ),
                        None => "the editor was asked to restart the kernel; it may ask for \
                                 confirmation, and no restart was seen yet (completion is not \
                                 claimed); every cell is stale"
                            .to_owned(),
                    },
                    None,
                ),
                (Ok(RequestOutcome::Requested { observed }), Invalidation::Interrupt) => (
                    KernelRequestOutcome::InterruptRequested,
                    match observed {
                        Some(observed) => {
                            format!("the editor was asked to interrupt the kernel; {observed}")
                        }
                        None => {
                            "the editor was asked to interrupt the kernel; completion is not claimed"
                                .to_owned()
                        }
                    },
                    None,
                ),
                (Ok(RequestOutcome::NotRunning), _) => {
                    let verb = match request {
                        Invalidation::Restart => "restarted",
                        Invalidation::Interrupt => "interrupted",
                    };
                    (
                        KernelRequestOutcome::NotRunning,
                        format!("no kernel runs for this notebook; nothing was {verb}"),
                        None,
                    )
                }
                (Err(failure), _) => (KernelRequestOutcome::Failed, failure.to_string(), None),
            };
            self.wake_run_waiters();
            results.push(KernelRequestEntry {
                notebook: location.uri.clone(),
                outcome,
                detail: Some(detail),
                invalidated_execution: invalidated,
                epoch,
            });
        }
        to_json(&KernelRequestsResult { results })
    }
}

impl<H: NotebookHost> Tools<H> {
    /// Whether the kernel is proven to answer: a Jupyter kernel answers a probe (a kernel_info
    /// request); a kernel spoken to in code only must run code (its stamp is read back, see
    /// [`crate::epoch`]). Seeing it listed as idle proves nothing.
    async fn proven_ready(&self, location: &NotebookLocation, session: &SharedSession) -> bool {
        let features = session.features();
        if features.messages && features.probe {
            return session.probe().await.is_ok_and(|status| !status.is_dead());
        }
        self.epochs.verify(&location.uri, session).await.is_some()
    }
}
