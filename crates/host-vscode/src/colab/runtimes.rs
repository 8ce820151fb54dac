//! The window as a Colab runtime service: the proof's file-service steps, the `colab://` file
//! service of large transfers, and the setup commands of the picker path.

use base64::Engine as _;
use colab_setup::{
    CheckCommandKind, CheckReply, CommandKind, Failure, FileServiceRoot, PickerView, Reply, Route,
    ServerAlias,
};
use host_core::colab::{ColabRuntimes, ServiceFile, UploadChunk};
use host_core::{BoxFuture, NotebookLocation};
use serde_json::{Value, json};

use crate::native::{Chosen, Observation};

use super::*;

impl ColabRuntimes for WindowColab {
    fn roots(&self) -> Vec<FileServiceRoot> {
        self.roots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn refresh_roots(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.refresh_roots_now())
    }

    fn perform_check<'a>(&'a self, command: &'a CheckCommandKind) -> BoxFuture<'a, CheckReply> {
        Box::pin(async move {
            match command {
                // The build info is Colab's HTTP endpoint, which only the Colab extension
                // reaches: identity evidence the window cannot read.
                CheckCommandKind::ReadBuildInfo => CheckReply::ServiceUnavailable,
                CheckCommandKind::ReadFile { root, path } => {
                    self.check_read(root, path, true).await
                }
                CheckCommandKind::StatFile { root, path } => {
                    self.check_read(root, path, false).await
                }
                CheckCommandKind::ExecuteKernel { .. } => CheckReply::ServiceUnavailable,
            }
        })
    }

    fn file_size<'a>(
        &'a self,
        file: ServiceFile<'a>,
    ) -> BoxFuture<'a, Result<Option<u64>, String>> {
        Box::pin(async move {
            let uri = self.file_uri(file.root, file.path)?;
            let reply = self.fs(FsAction::Stat, uri, None).await?;
            match (reply.exists, reply.error_name) {
                (true, None) => Ok(reply.size),
                (false, None | Some(_)) => Ok(None),
                (true, Some(name)) => Err(name),
            }
        })
    }

    fn write_chunk<'a>(
        &'a self,
        file: ServiceFile<'a>,
        chunk: UploadChunk,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let uri = self.file_uri(file.root, file.path)?;
            let whole = {
                let mut uploads = self
                    .uploads
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                if chunk.number <= 1 {
                    uploads.insert(file.path.to_owned(), Vec::new());
                }
                let buffer = uploads
                    .get_mut(file.path)
                    .ok_or("a chunk arrived for an upload that was not started")?;
                buffer.extend_from_slice(&chunk.bytes);
                if !chunk.last {
                    return Ok(());
                }
                uploads.remove(file.path).unwrap_or_default()
            };
            let reply = self.fs(FsAction::Write, uri, Some(&whole)).await?;
            match reply.error_name {
                None => Ok(()),
                Some(name) => Err(name),
            }
        })
    }

    fn read_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let uri = self.file_uri(file.root, file.path)?;
            let reply = self.fs(FsAction::Read, uri, None).await?;
            if let Some(name) = reply.error_name {
                return Err(name);
            }
            base64::engine::general_purpose::STANDARD
                .decode(reply.data_base64.unwrap_or_default())
                .map_err(|_| "the file system answered bytes that are not base64".to_owned())
        })
    }

    fn delete_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let uri = self.file_uri(file.root, file.path)?;
            let reply = self.fs(FsAction::Delete, uri, None).await?;
            match reply.error_name.as_deref() {
                None | Some("FileNotFound" | "EntryNotFound") => Ok(()),
                Some(name) => Err(name.to_owned()),
            }
        })
    }

    fn setup_route(&self, alias: Option<&ServerAlias>) -> Result<Route, String> {
        if self.native.is_none() {
            return Err(
                "Colab setup in VS Code operates the kernel picker through a Chromium debugging \
                 connection, and none is configured: start VS Code with \
                 --remote-debugging-port=N and set jupyterMcp.nativeDebugPort (or \
                 JUPYTER_MCP_NATIVE_DEBUG_PORT) to N, then reload the window. Nothing was started"
                    .to_owned(),
            );
        }
        Ok(Route::Picker {
            reuse: alias.cloned(),
        })
    }

    fn perform_setup<'a>(
        &'a self,
        notebook: &'a NotebookLocation,
        command: &'a CommandKind,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            let unavailable = Reply::Failed(Failure::Unavailable);
            match command {
                CommandKind::CheckProvider => {
                    // A new setup: what stopped an earlier one no longer applies.
                    self.blockers
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .remove(&notebook.uri);
                    let Ok(state) = self.ask::<StateReply>(ColabOp::State).await else {
                        return unavailable;
                    };
                    if !state.installed || state.activation_failed {
                        return unavailable;
                    }
                    if !state.active {
                        match self.ask::<AcceptedReply>(ColabOp::Activate).await {
                            Ok(reply) if reply.accepted => {}
                            _ => return unavailable,
                        }
                    }
                    match self.bind().await {
                        Ok(()) => Reply::Done,
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    }
                }
                CommandKind::OpenKernelPicker => {
                    let driver = match self.native() {
                        Ok(driver) => driver,
                        Err(blocker) => return self.noted(notebook, &blocker, unavailable),
                    };
                    if let Err(blocker) = driver.bind().await {
                        return self.noted(notebook, &blocker, unavailable);
                    }
                    match self
                        .ask::<AcceptedReply>(ColabOp::OpenKernelPicker {
                            uri: notebook.uri.clone(),
                        })
                        .await
                    {
                        Ok(reply) if reply.accepted => Reply::Done,
                        other => {
                            let why = match other {
                                Ok(reply) => reply.error_name.unwrap_or_default(),
                                Err(reason) => reason,
                            };
                            self.note(
                                notebook,
                                "editor_not_shown",
                                format!("VS Code did not show the notebook's editor to open its kernel picker ({why})"),
                            );
                            Reply::Failed(Failure::NotPerformed)
                        }
                    }
                }
                CommandKind::ObservePicker => match self.native() {
                    Ok(driver) => match driver.observe().await {
                        Ok(view) => Reply::Picker(view),
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::ChooseRow { label, .. } => match self.native() {
                    Ok(driver) => match driver.choose_row(label).await {
                        Ok(Chosen::Clicked) => {
                            settle_after_click(driver, label).await;
                            Reply::Done
                        }
                        Ok(Chosen::RowChanged) => Reply::RowChanged,
                        Err(blocker) => self.step_failed(notebook, &blocker),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::TypeAlias { alias } => match self.native() {
                    Ok(driver) => match driver.type_text(alias.as_str()).await {
                        Ok(value) => {
                            *self
                                .typed
                                .lock()
                                .unwrap_or_else(|poisoned| poisoned.into_inner()) =
                                Some(value.clone());
                            Reply::AliasReadBack { value }
                        }
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::NotPerformed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::SubmitInput => match self.native() {
                    Ok(driver) => {
                        let typed = self
                            .typed
                            .lock()
                            .unwrap_or_else(|poisoned| poisoned.into_inner())
                            .take();
                        let submitted = match typed {
                            Some(value) => driver.submit_value(&value).await,
                            None => driver.submit().await,
                        };
                        match submitted {
                            Ok(()) => {
                                settle_after_submit(driver).await;
                                Reply::Done
                            }
                            Err(blocker) => self.step_failed(notebook, &blocker),
                        }
                    }
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::DismissPicker => match self.native() {
                    Ok(driver) => match dismiss_settled(driver).await {
                        Ok(()) => Reply::Done,
                        Err(blocker) => {
                            self.noted(notebook, &blocker, Reply::Failed(Failure::Unconfirmed))
                        }
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::ObserveKernelChoices => match self.native() {
                    Ok(driver) => match driver.observe_full().await {
                        Ok(Observation {
                            view: PickerView::QuickPick { rows, busy, .. },
                            complete,
                            ..
                        }) => Reply::KernelChoices {
                            complete: complete && !busy && rows.iter().all(|row| row.enabled),
                            labels: rows.into_iter().map(|row| row.label).collect(),
                        },
                        Ok(_) => Reply::KernelChoices {
                            labels: Vec::new(),
                            complete: false,
                        },
                        Err(blocker) => self.noted(notebook, &blocker, unavailable),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                CommandKind::SelectKernelChoice {
                    label,
                    position,
                    listing,
                } => match self.native() {
                    Ok(driver) => match driver.choose_listed(*position, label, listing).await {
                        Ok(Chosen::Clicked) => Reply::KernelSelected {
                            confirmed: self.confirm_selection(notebook, label).await,
                        },
                        Ok(Chosen::RowChanged) => Reply::ListingChanged,
                        Err(blocker) => self.step_failed(notebook, &blocker),
                    },
                    Err(blocker) => self.noted(notebook, &blocker, unavailable),
                },
                // Before the provider check: a mounted server is reused without the driver.
                CommandKind::FindMountedServer { alias } => {
                    self.find_mounted(alias, &mut Vec::new()).await
                }
                CommandKind::MountServer { alias } => self.mount(alias).await,
                // Sessions files, runtime URLs and tunnel assignments are the standalone host's.
                _ => Reply::Failed(Failure::NotPerformed),
            }
        })
    }

    fn drives_picker(&self) -> bool {
        true
    }

    fn diagnosis(&self, notebook: &NotebookLocation) -> Option<Value> {
        let blockers = self
            .blockers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let (code, message) = blockers.get(&notebook.uri)?;
        Some(json!({ "code": code, "message": message }))
    }

    fn mounts_servers(&self) -> bool {
        true
    }

    fn mount_route(&self, alias: &ServerAlias) -> Result<Route, String> {
        // Allowed without a debugging connection: a server mounted already is reused without
        // the picker. Mounting a new one fails at the provider check, whose blocker
        // (`not_configured`) the receipt's `hostBlocker` names.
        Ok(Route::MountServer {
            alias: alias.clone(),
        })
    }
}
