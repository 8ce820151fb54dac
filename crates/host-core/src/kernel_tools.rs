//! The kernel tools: listing and selecting kernels, starting one, reporting its state, and
//! restarting or interrupting it (which ends the notebook's tracked run honestly).

use std::sync::Arc;

use kernels::{KernelHandle, KernelSpecInfo};
use mcp_contract::ToolError;
use mcp_contract::params::{NotebookRefParams, NotebookRefsParams, SelectKernelParams};
use mcp_contract::results::*;
use notebook_model::edit::EditOp;
use notebook_model::identity::METADATA_KEY;
use serde_json::{Map, Value, json};

use crate::execution::kernel_error;
use crate::host::{NotebookHost, NotebookLocation};
use crate::tools::{ImageContent, Tools, error};

type ToolResult = Result<(Value, Vec<ImageContent>), ToolError>;

fn choice(spec: &KernelSpecInfo) -> KernelChoice {
    KernelChoice {
        id: spec.id.clone(),
        label: spec.display_name.clone(),
        language: spec.language.clone(),
        source: spec.source.as_str().to_owned(),
        detail: spec
            .venv_dir()
            .map(|folder| folder.display().to_string())
            .or_else(|| spec.argv.first().cloned()),
    }
}

fn kernel_state(kernel: Option<&Arc<dyn KernelHandle>>, language: &str) -> KernelState {
    match kernel {
        Some(kernel) => {
            let status = kernel.status().borrow().clone();
            let info = kernel.info();
            let dead = status.is_dead();
            KernelState {
                label: Some(kernel.spec().display_name.clone()),
                id: Some(kernel.spec().id.clone()),
                language: if info.language.is_empty() {
                    language.to_owned()
                } else {
                    info.language.clone()
                },
                status: status.as_str().to_owned(),
                runtime: if dead { "dead" } else { "active" }.to_owned(),
                runtime_reason: dead.then(|| {
                    "the kernel process has exited; the next run_cells or configure_kernel starts a new one"
                        .to_owned()
                }),
                implementation: Some(info.implementation.clone()).filter(|text| !text.is_empty()),
                language_version: Some(info.language_version.clone())
                    .filter(|text| !text.is_empty()),
                epoch: Some(kernel.epoch()),
                pid: kernel.process_id(),
            }
        }
        None => KernelState {
            label: None,
            id: None,
            language: language.to_owned(),
            status: "not-started".to_owned(),
            runtime: "none".to_owned(),
            runtime_reason: Some(
                "no kernel is running for this notebook; run_cells or configure_kernel starts one"
                    .to_owned(),
            ),
            implementation: None,
            language_version: None,
            epoch: None,
            pid: None,
        },
    }
}

fn unknown_kernel(kernel_id: &str, available: &[&str]) -> ToolError {
    error(
        "kernel_not_found",
        format!(
            "no kernel has the id `{kernel_id}`; nothing was selected. Available ids: {}",
            if available.is_empty() {
                "(none)".to_owned()
            } else {
                available.join(", ")
            }
        ),
    )
}

impl<H: NotebookHost> Tools<H> {
    fn kernel_parts(
        &self,
        location: &NotebookLocation,
    ) -> Result<(Arc<kernels::KernelManager>, std::path::PathBuf), ToolError> {
        let manager = self
            .host
            .kernel_manager()
            .ok_or_else(|| error("not_supported", "this host runs no kernels"))?;
        let key = self.host.kernel_key(location).ok_or_else(|| {
            error(
                "not_supported",
                "this notebook has no kernel location on this host",
            )
        })?;
        Ok((manager, key))
    }

    pub(crate) async fn list_kernels(&self, params: NotebookRefParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        if let Some(external) = self.host.external_kernels(&location).await {
            let result = ListKernelsResult {
                kernels: external.list(&location).await?,
                notebook: location.uri,
                selected: None,
                hint: None,
            };
            return Ok((
                serde_json::to_value(result).expect("serialises"),
                Vec::new(),
            ));
        }
        let (manager, key) = self.kernel_parts(&location)?;
        let discovery = manager
            .discover(Some(&key))
            .await
            .map_err(|failure| kernel_error(&failure))?;
        let root = self.host.kernel_root();
        let chosen = discovery.choose(
            &Self::preference(&document.notebook),
            key.parent(),
            root.as_deref(),
        );
        let (selected, hint) = match chosen {
            Ok(spec) => (Some(spec.id.clone()), None),
            Err(failure) => (None, Some(failure.to_string())),
        };
        let result = ListKernelsResult {
            notebook: location.uri,
            kernels: discovery.specs.iter().map(choice).collect(),
            selected,
            hint,
        };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
    }

    pub(crate) async fn select_kernel(&self, params: SelectKernelParams) -> ToolResult {
        let location = self.resolve(&params.notebook_ref).await?;
        if let Some(external) = self.host.external_kernels(&location).await {
            let offered = external.list(&location).await?;
            let Some(kernel) = offered.iter().find(|kernel| kernel.id == params.kernel_id) else {
                let available: Vec<&str> =
                    offered.iter().map(|kernel| kernel.id.as_str()).collect();
                return Err(unknown_kernel(&params.kernel_id, &available));
            };
            external.select(&location, &kernel.id).await?;
            let result = SelectKernelResult {
                notebook: location.uri,
                kernel: kernel.clone(),
                replaced_running_kernel: false,
            };
            return Ok((
                serde_json::to_value(result).expect("serialises"),
                Vec::new(),
            ));
        }
        let (manager, key) = self.kernel_parts(&location)?;
        let discovery = manager
            .discover(Some(&key))
            .await
            .map_err(|failure| kernel_error(&failure))?;
        let Some(spec) = discovery.find(&params.kernel_id).cloned() else {
            let available: Vec<&str> = discovery
                .specs
                .iter()
                .map(|spec| spec.id.as_str())
                .collect();
            return Err(unknown_kernel(&params.kernel_id, &available));
        };
        let document = self.host.load(&location).await?;
        let mut ours = document
            .notebook
            .metadata()
            .get(METADATA_KEY)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        ours.insert("kernel_id".to_owned(), Value::String(spec.id.clone()));
        let mut patch = Map::new();
        patch.insert(METADATA_KEY.to_owned(), Value::Object(ours));
        let kernel_name = if spec.id.starts_with("venv:") {
            "python3".to_owned()
        } else {
            spec.id.clone()
        };
        patch.insert(
            "kernelspec".to_owned(),
            json!({"name": kernel_name, "display_name": spec.display_name, "language": spec.language}),
        );
        let description = format!("select_kernel ({})", spec.id);
        self.mutate(
            &params.notebook_ref,
            &[EditOp::MergeNotebookMetadata { metadata: patch }],
            description,
        )
        .await?;
        // A running kernel of another kind is replaced on the next start.
        let mut replaced = false;
        if let Some(running) = manager.get(&key)
            && running.spec().id != spec.id
        {
            self.invalidate_active_run(&location, execution_tracker::Invalidation::Restart)
                .await;
            manager
                .shutdown(&key)
                .await
                .map_err(|failure| kernel_error(&failure))?;
            replaced = true;
        }
        let result = SelectKernelResult {
            notebook: location.uri,
            kernel: choice(&spec),
            replaced_running_kernel: replaced,
        };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
    }

    /// For a notebook being created: the kernel it will use (an explicit `kernel_id`, recorded in
    /// its metadata, or what the defaults choose), so the caller sees the interpreter up front.
    pub(crate) async fn resolve_new_kernel(
        &self,
        location: &NotebookLocation,
        notebook: &mut notebook_model::Notebook,
        kernel_id: Option<&str>,
    ) -> Result<Option<KernelChoice>, ToolError> {
        let Ok((manager, key)) = self.kernel_parts(location) else {
            return Ok(None);
        };
        let discovery = manager
            .discover(Some(&key))
            .await
            .map_err(|failure| kernel_error(&failure))?;
        if let Some(kernel_id) = kernel_id {
            let spec = discovery.find(kernel_id).ok_or_else(|| {
                error(
                    "kernel_not_found",
                    format!("no kernel has the id `{kernel_id}`; call list_kernels for the ids; nothing was created"),
                )
            })?;
            let metadata = notebook.metadata_mut();
            metadata.insert(METADATA_KEY.to_owned(), json!({"kernel_id": spec.id}));
            let name = if spec.id.starts_with("venv:") {
                "python3"
            } else {
                spec.id.as_str()
            };
            metadata.insert(
                "kernelspec".to_owned(),
                json!({"name": name, "display_name": spec.display_name, "language": spec.language}),
            );
            return Ok(Some(choice(spec)));
        }
        let root = self.host.kernel_root();
        Ok(discovery
            .choose(&Self::preference(notebook), key.parent(), root.as_deref())
            .ok()
            .map(choice))
    }

    pub(crate) async fn configure_kernel(&self, params: NotebookRefParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        if let Some(external) = self.host.external_kernels(&location).await {
            let detail = external.configure(&location).await?;
            let state = external.state(&location).await;
            let result = ConfigureKernelResult {
                notebook: location.uri,
                kernel: KernelChoice {
                    id: state.id.clone().unwrap_or_default(),
                    label: state.label.clone().unwrap_or_default(),
                    language: state.language.clone(),
                    source: "editor".to_owned(),
                    detail: Some(detail),
                },
                ready: state.runtime == "active",
                state,
            };
            return Ok((
                serde_json::to_value(result).expect("serialises"),
                Vec::new(),
            ));
        }
        let kernel = self.start_kernel(&location, &document.notebook).await?;
        let ready = kernel.probe().await.is_ok_and(|status| !status.is_dead());
        let result = ConfigureKernelResult {
            notebook: location.uri,
            kernel: choice(kernel.spec()),
            state: kernel_state(Some(&kernel), document.notebook.code_language()),
            ready,
        };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
    }

    pub(crate) async fn kernel_info(&self, params: NotebookRefParams) -> ToolResult {
        let (location, document) = self.load(&params.notebook_ref).await?;
        let language = document.notebook.code_language().to_owned();
        let mut capabilities = Map::new();
        if let Some(external) = self.host.external_kernels(&location).await {
            capabilities.insert(
                "execution".to_owned(),
                json!({"availability": "available", "reason": "runs through the kernel the editor selected for this notebook"}),
            );
            let result = KernelInfoResult {
                notebook: location.uri.clone(),
                kernel: external.state(&location).await,
                capabilities,
            };
            return Ok((
                serde_json::to_value(result).expect("serialises"),
                Vec::new(),
            ));
        }
        let (kernel, execution) = match self.kernel_parts(&location) {
            Ok((manager, key)) => (
                manager.get(&key),
                json!({"availability": "available", "reason": "runs on a Jupyter kernel (local, or on the configured kernel server), started on first use"}),
            ),
            Err(_) => (
                None,
                json!({"availability": "unavailable", "reason": "this host runs no kernels"}),
            ),
        };
        capabilities.insert("execution".to_owned(), execution);
        let result = KernelInfoResult {
            notebook: location.uri,
            kernel: kernel_state(kernel.as_ref(), &language),
            capabilities,
        };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
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
            let registry = self.registry.lock().expect("registry lock");
            registry
                .active_run(&location.uri)
                .map(|run| run.id().as_str().to_owned())
        }?;
        let control = self
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
        }
        Some(id)
    }

    async fn locations(&self, references: &[String]) -> Result<Vec<NotebookLocation>, ToolError> {
        if references.is_empty() {
            return Err(error(
                "invalid_argument",
                "notebookRefs must list at least one notebook",
            ));
        }
        let mut locations = Vec::with_capacity(references.len());
        for reference in references {
            locations.push(self.resolve(reference).await?);
        }
        Ok(locations)
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
        let locations = self.locations(&params.notebook_refs).await?;
        let mut results = Vec::new();
        for location in locations {
            if let Some(external) = self.host.external_kernels(&location).await {
                let invalidated = self.invalidate_active_run(&location, request).await;
                let restart = request == Invalidation::Restart;
                let (outcome, detail) = match external.request(&location, restart).await {
                    Ok(()) if restart => (
                        "restart-requested",
                        "the editor was asked to restart the kernel; it may ask for confirmation, and completion is not claimed".to_owned(),
                    ),
                    Ok(()) => (
                        "interrupt-requested",
                        "the editor was asked to interrupt the kernel; completion is not claimed".to_owned(),
                    ),
                    Err(failure) => ("failed", failure.to_string()),
                };
                self.registry_changed.send_modify(|version| *version += 1);
                results.push(KernelRequestEntry {
                    notebook: location.uri.clone(),
                    outcome: outcome.to_owned(),
                    detail: Some(detail),
                    invalidated_execution: invalidated,
                    epoch: None,
                });
                continue;
            }
            self.kernel_parts(&location)?;
            let Some(kernel) = self.running_kernel(&location) else {
                let verb = match request {
                    Invalidation::Restart => "restarted",
                    Invalidation::Interrupt => "interrupted",
                };
                results.push(KernelRequestEntry {
                    notebook: location.uri.clone(),
                    outcome: "not-running".to_owned(),
                    detail: Some(format!(
                        "no kernel runs for this notebook; nothing was {verb}"
                    )),
                    invalidated_execution: None,
                    epoch: None,
                });
                continue;
            };
            let invalidated = self.invalidate_active_run(&location, request).await;
            let (sent, outcome, detail) = match request {
                Invalidation::Restart => (
                    kernel.restart().await,
                    "restarted",
                    "all kernel state is gone; every cell is stale",
                ),
                Invalidation::Interrupt => (
                    kernel.interrupt().await,
                    "interrupt-sent",
                    "the running cell gets a KeyboardInterrupt; queued cells of the run are not run",
                ),
            };
            let (outcome, detail) = match sent {
                Ok(()) => (outcome.to_owned(), detail.to_owned()),
                Err(failure) => ("failed".to_owned(), failure.to_string()),
            };
            self.registry_changed.send_modify(|version| *version += 1);
            results.push(KernelRequestEntry {
                notebook: location.uri.clone(),
                outcome,
                detail: Some(detail),
                invalidated_execution: invalidated,
                epoch: Some(kernel.epoch()),
            });
        }
        let result = KernelRequestsResult { results };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
    }
}
