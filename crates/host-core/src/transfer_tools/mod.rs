//! The file transfer tools, `upload_file` and `download_file`: they drive the sans-I/O machines
//! of the `transfer` crate against the notebook's running kernel and the host's files.
//!
//! The machine decides every step; this module only performs them: host file I/O through the
//! host's [`HostFiles`], kernel steps on the notebook's live [`KernelSession`] within the step's
//! deadline. How a step travels follows the session: to a kernel spoken to in Jupyter messages,
//! a step is sent as a silent execute request without history whose cell is the
//! request's tag line and whose one user expression is the whole request: IPython evaluates
//! user expressions with a plain `eval` in the user namespace, so the payload skips the cell
//! pipeline (ipykernel hashes every cell's source in pure Python, IPython tokenises it and keeps
//! it in `linecache` and in the last execution result), and silence keeps it from being echoed on
//! IOPub. The request's receipt line still arrives on stdout. To an editor's kernel that only
//! takes code, the whole request is the cell and its chunks are base64 literals
//! ([`transfer::KernelWire::CodeOnly`]). It also keeps what the protocol leaves to a host: one
//! chunk budget per live kernel object (fresh after a restart), one transfer per notebook and
//! per kernel at a time, a recheck before every kernel step that the original kernel is still
//! there, on the same epoch and idle, and a quarantine on a kernel whose step outlived its
//! deadline until that execution settles. A transfer never starts or selects a kernel, and it
//! runs in its own task, so a client that goes away mid-way cannot leave it without cleanup.

use std::io::ErrorKind;
use std::sync::Arc;

use execution_tracker::{IopubEvent, KernelLifecycle};
use futures::StreamExt;
use mcp_contract::params::TransferParams;
use mcp_contract::results::TransferResult;
use mcp_contract::{ErrorCode, ToolError};
use serde_json::{Value, json};
use transfer::{
    Action, Cause, Direction, Download, DownloadConfig, Event, KernelBudget, KernelFailure,
    KernelOutput, KernelPath, KernelStep, KernelWire, Phase, RECEIPT_MARKER, TransferError,
    TransferMachine, TransferReceipt, Upload, UploadConfig,
};

use crate::files::{HostFileReader, HostFileWriter, HostFiles};
use crate::host::{NotebookHost, NotebookLocation};
use crate::kernel::{ExecuteOptions, KernelError, KernelEvent, KernelStatus, SharedSession};
use crate::tools::{
    CallContext, ImageContent, ProgressSink, Tools, error, refuse_control_characters,
};

pub(crate) mod state;

use state::{Reservation, Traffic, busy};

type ToolResult = Result<(Value, Vec<ImageContent>), ToolError>;

/// The `user_expressions` key a step's request travels under.
const STEP_EXPRESSION: &str = "jupyter_mcp_transfer";

fn files_unavailable() -> ToolError {
    error(
        ErrorCode::NotSupported,
        "this host has no files for transfers; upload_file and download_file are not available here",
    )
}

impl<H: NotebookHost> Tools<H> {
    pub(crate) async fn upload_file(
        &self,
        params: TransferParams,
        context: &CallContext,
    ) -> ToolResult {
        self.transfer(Direction::Upload, params, context).await
    }

    pub(crate) async fn download_file(
        &self,
        params: TransferParams,
        context: &CallContext,
    ) -> ToolResult {
        self.transfer(Direction::Download, params, context).await
    }

    async fn transfer(
        &self,
        direction: Direction,
        params: TransferParams,
        context: &CallContext,
    ) -> ToolResult {
        let location = self.resolve(&params.notebook_ref).await?;
        KernelPath::parse(&params.kernel_path).map_err(|failure| transfer_error(&failure))?;
        let files = self.files.clone().ok_or_else(files_unavailable)?;
        let host_path = files.resolve(&params.host_path).await?;
        refuse_control_characters(
            params.colab_file_uri.as_deref(),
            "colabFileUri holds a control character; give the Colab root followed by kernelPath without its leading '/'",
        )?;
        if params.colab_file_uri.is_some() && self.colab.is_none() {
            // Said before anything about the kernel: no kernel state makes it usable here.
            return Err(error(
                ErrorCode::NotSupported,
                "colabFileUri needs a Colab runtime, and none is configured on this host (start jupyter-mcp with --colab-session, --colab-runtime-url or --colab-tunnel); without it the file moves through the kernel",
            ));
        }
        let kernel = self.transfer_kernel(&location).await?;
        let reservation = self.transfers.reserve(&location.uri, &kernel)?;
        let epoch = kernel.epoch();
        let wire = if kernel.features().messages {
            KernelWire::Messages
        } else {
            KernelWire::CodeOnly
        };
        if let Some(failure) = self.step_blocker(&location, &kernel, epoch).await {
            return Err(match failure {
                KernelFailure::Busy => busy(
                    "the kernel is busy (a run or other executions are in progress), so it is \
                     quarantined for transfers until they settle; wait (get_execution with \
                     waitMs) and retry",
                ),
                _ => error(
                    ErrorCode::KernelUnavailable,
                    format!("the notebook's kernel cannot take a transfer: {failure}"),
                ),
            });
        }
        // The file service of the Colab runtime this kernel was proven on carries its large
        // files (and any with colabFileUri), under the same maxBytes as the kernel route.
        if let Some(route) = self
            .contents_route(direction, &params, &files, &host_path, &kernel)
            .await?
        {
            let max_bytes = params.max_bytes.unwrap_or(transfer::DEFAULT_MAX_BYTES);
            if let Some(size) = route.size().filter(|&size| size > max_bytes) {
                return Err(too_large(direction, size, max_bytes));
            }
            let moved = self
                .contents_transfer(direction, &params, route, &files, &host_path, &kernel)
                .await;
            drop(reservation);
            return moved;
        }
        let nonce = uuid::Uuid::new_v4().to_string();
        let overwrite = params.overwrite.unwrap_or(false);
        let max_bytes = params.max_bytes.unwrap_or(transfer::DEFAULT_MAX_BYTES);
        let mut driver = Driver {
            tools: self.clone(),
            location,
            budget: reservation.budget.clone(),
            reservation,
            files: files.clone(),
            kernel,
            epoch,
            reader: None,
            writer: None,
            progress: context.progress.clone(),
            total: None,
            moved: 0,
            traffic: Traffic::default(),
        };
        let outcome = match direction {
            Direction::Upload => {
                let reader = files.open(&host_path).await?;
                let config = UploadConfig {
                    overwrite,
                    max_bytes,
                    wire,
                    ..UploadConfig::new(host_path, params.kernel_path.clone(), nonce, reader.size())
                };
                let machine = Upload::new(config).map_err(|failure| transfer_error(&failure))?;
                driver.total = Some(reader.size());
                driver.reader = Some(reader);
                tokio::spawn(driver.run(machine)).await
            }
            Direction::Download => {
                let config = DownloadConfig {
                    overwrite,
                    max_bytes,
                    wire,
                    ..DownloadConfig::new(host_path, params.kernel_path.clone(), nonce)
                };
                let machine = Download::new(config).map_err(|failure| transfer_error(&failure))?;
                tokio::spawn(driver.run(machine)).await
            }
        };
        let (outcome, traffic) = outcome.map_err(|join_error| {
            error(
                ErrorCode::InternalError,
                format!("the transfer task failed: {join_error}"),
            )
        })?;
        let receipt = outcome.map_err(|failure| transfer_error(&failure))?;
        let result = TransferResult {
            operation: crate::result_words::transfer_operation(receipt.direction),
            bytes: receipt.bytes,
            sha256: receipt.sha256,
            host_path: receipt.host_path,
            kernel_path: receipt.kernel_path,
            verified: true,
            wire_bytes: traffic.wire_bytes,
            chunks: traffic.chunks,
            route: None,
        };
        Ok((
            serde_json::to_value(result).expect("serialises"),
            Vec::new(),
        ))
    }

    /// The notebook's running Python kernel; never starts one.
    async fn transfer_kernel(
        &self,
        location: &NotebookLocation,
    ) -> Result<SharedSession, ToolError> {
        let not_running = || {
            error(
                ErrorCode::KernelUnavailable,
                "no kernel runs for this notebook, and a file transfer never starts or selects \
                 one: start it with configure_kernel or run_cells, then retry",
            )
        };
        let kernel = self
            .running_session(location)
            .await
            .ok_or_else(not_running)?;
        if kernel.status().borrow().is_dead() {
            return Err(not_running());
        }
        let language = kernel.info().language;
        if !language.is_empty() && !language.eq_ignore_ascii_case("python") {
            return Err(error(
                ErrorCode::NotSupported,
                format!(
                    "file transfer runs Python in the kernel, and this notebook's kernel runs \
                     {language}"
                ),
            ));
        }
        Ok(kernel)
    }

    /// Why a kernel step may not be sent now, if it may not: the original kernel object must
    /// still be the notebook's, on the same epoch, alive, and idle with no tracked run or
    /// pending command on the notebook.
    async fn step_blocker(
        &self,
        location: &NotebookLocation,
        kernel: &SharedSession,
        epoch: Option<u64>,
    ) -> Option<KernelFailure> {
        match self.running_session(location).await {
            // Being started or stopped right now, or gone.
            None => return Some(KernelFailure::Busy),
            Some(current) if !Arc::ptr_eq(&current, kernel) => {
                return Some(KernelFailure::Restarted);
            }
            Some(_) => {}
        }
        if kernel.epoch() != epoch {
            return Some(KernelFailure::Restarted);
        }
        {
            let registry = self.runs.registry.lock().expect("registry lock");
            if registry.active_run(&location.uri).is_some()
                || registry.notebook_command_pending(&location.uri)
            {
                return Some(KernelFailure::Busy);
            }
        }
        let Some(current) = crate::kernel::settled_status(kernel.status()).await else {
            return Some(KernelFailure::Busy);
        };
        if kernel.epoch() != epoch {
            return Some(KernelFailure::Restarted);
        }
        match current {
            KernelStatus::Idle => None,
            KernelStatus::Dead => Some(KernelFailure::Died),
            KernelStatus::Restarting => Some(KernelFailure::Restarted),
            KernelStatus::Starting | KernelStatus::Busy | KernelStatus::Unreachable => {
                Some(KernelFailure::Busy)
            }
        }
    }
}

/// Performs one transfer's actions.
struct Driver<H: NotebookHost> {
    tools: Tools<H>,
    location: NotebookLocation,
    reservation: Reservation,
    budget: KernelBudget,
    files: Arc<dyn HostFiles>,
    kernel: SharedSession,
    epoch: Option<u64>,
    reader: Option<Box<dyn HostFileReader>>,
    writer: Option<Box<dyn HostFileWriter>>,
    progress: Option<Arc<dyn ProgressSink>>,
    /// The bytes to move, when known up front (uploads).
    total: Option<u64>,
    /// Chunk bytes moved so far.
    moved: u64,
    traffic: Traffic,
}

impl<H: NotebookHost> Driver<H> {
    async fn run(
        mut self,
        mut machine: impl TransferMachine + Send,
    ) -> (Result<TransferReceipt, TransferError>, Traffic) {
        loop {
            let action = machine.next_action(&mut self.budget);
            self.reservation.store_budget(&self.budget);
            let event = match action {
                Action::Done(receipt) => return (Ok(receipt), self.traffic),
                Action::Failed(failure) => return (Err(failure), self.traffic),
                Action::ReadHostChunk { offset, len } => match self.reader.as_mut() {
                    Some(reader) => match reader.read_at(offset, len).await {
                        Ok(bytes) => Event::HostChunkRead(bytes),
                        Err(failure) => Event::HostFailed(failure.kind()),
                    },
                    None => Event::HostFailed(ErrorKind::NotFound),
                },
                Action::ExecuteKernel(step) => self.execute(step).await,
                Action::CreateHostTemp { temp_path } => match self.files.create(&temp_path).await {
                    Ok(writer) => {
                        self.writer = Some(writer);
                        Event::HostDone
                    }
                    Err(failure) => Event::HostFailed(failure.kind()),
                },
                Action::WriteHostChunk { offset, bytes, .. } => match self.writer.as_mut() {
                    Some(writer) => match writer.write_at(offset, bytes).await {
                        Ok(()) => Event::HostDone,
                        Err(failure) => Event::HostFailed(failure.kind()),
                    },
                    None => Event::HostFailed(ErrorKind::NotFound),
                },
                Action::PromoteHostFile {
                    temp_path,
                    destination_path,
                    overwrite,
                } => {
                    let synced = match self.writer.take() {
                        Some(writer) => writer.sync_and_close().await,
                        None => Err(ErrorKind::NotFound.into()),
                    };
                    let promoted = match synced {
                        Ok(()) => {
                            self.files
                                .promote(&temp_path, &destination_path, overwrite)
                                .await
                        }
                        Err(failure) => Err(failure),
                    };
                    match promoted {
                        Ok(()) => Event::HostDone,
                        Err(failure) => Event::HostFailed(failure.kind()),
                    }
                }
                Action::RemoveHostTemp { temp_path } => {
                    drop(self.writer.take());
                    match self.files.remove(&temp_path).await {
                        Ok(()) => Event::HostDone,
                        Err(failure) => Event::HostFailed(failure.kind()),
                    }
                }
            };
            machine.handle(event);
        }
    }

    /// Runs one kernel step after rechecking the kernel, within the step's deadline.
    async fn execute(&mut self, step: KernelStep) -> Event {
        if let Some(failure) = self
            .tools
            .step_blocker(&self.location, &self.kernel, self.epoch)
            .await
        {
            return Event::KernelFailed(failure);
        }
        let chunk_traffic = step.request.operation.chunk_traffic();
        self.traffic.wire_bytes +=
            (step.code.len() + step.buffers.iter().map(Vec::len).sum::<usize>()) as u64;
        let (cell, options) = match step.wire {
            // The request's tag line is the cell; the whole request is evaluated as a user
            // expression, so it never passes through IPython's cell machinery (which hashes,
            // tokenises and caches every cell's source). The payload rides as binary buffers.
            KernelWire::Messages => {
                let tag = step.code.lines().next().unwrap_or_default().to_owned();
                let mut options = ExecuteOptions::quiet();
                options
                    .user_expressions
                    .insert(STEP_EXPRESSION.to_owned(), step.code.clone());
                options.buffers = step.buffers;
                (tag, options)
            }
            // A kernel that only takes code runs the whole request as the cell.
            KernelWire::CodeOnly => (step.code.clone(), ExecuteOptions::quiet()),
        };
        let deadline = tokio::time::Instant::now() + step.deadline.duration();
        let started = tokio::time::timeout_at(deadline, self.kernel.execute(cell, options)).await;
        let mut events = match started {
            Err(_) => return Event::KernelFailed(KernelFailure::Timeout),
            Ok(Err(failure)) => return Event::KernelFailed(execute_failure(&failure)),
            Ok(Ok(events)) => events,
        };
        let mut stdout = String::new();
        let mut buffers = Vec::new();
        let mut exception = None;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Err(_) => {
                    // The step may still be running: keep listening in the background and keep
                    // transfers off this kernel until it settles.
                    let quarantine = self.reservation.quarantine();
                    tokio::spawn(async move {
                        while events.next().await.is_some() {}
                        drop(quarantine);
                    });
                    return Event::KernelFailed(KernelFailure::Timeout);
                }
                Ok(None) => return Event::KernelFailed(KernelFailure::Died),
                Ok(Some(event)) => match event {
                    KernelEvent::Output {
                        event,
                        buffers: sent,
                    } => match event {
                        IopubEvent::Stream { name, text } if name == "stdout" => {
                            stdout.push_str(&text);
                        }
                        // A download step's chunks, when the kernel could send them as buffers.
                        IopubEvent::DisplayData { .. } => buffers.extend(sent),
                        IopubEvent::Error { ename, .. } => exception = Some(ename),
                        _ => {}
                    },
                    KernelEvent::Reply(reply) => {
                        if exception.is_none() {
                            exception = reply.error.map(|raised| raised.ename);
                        }
                        if exception.is_none() {
                            exception = expression_error(&reply.user_expressions);
                        }
                        break;
                    }
                    KernelEvent::Ended(KernelLifecycle::Restarted) => {
                        return Event::KernelFailed(KernelFailure::Restarted);
                    }
                    KernelEvent::Ended(_)
                    | KernelEvent::NotebookClosed
                    | KernelEvent::Lost
                    | KernelEvent::Refused { .. } => {
                        return Event::KernelFailed(KernelFailure::Died);
                    }
                    KernelEvent::Busy
                    | KernelEvent::Idle
                    | KernelEvent::Replied { .. }
                    | KernelEvent::ActionRequired { .. }
                    | KernelEvent::CommandSettled => {}
                },
            }
        }
        self.traffic.wire_bytes +=
            (stdout.len() + buffers.iter().map(Vec::len).sum::<usize>()) as u64;
        if let Some((bytes, chunks)) = chunk_traffic {
            self.traffic.chunks += chunks;
            self.moved += bytes;
            if let Some(sink) = &self.progress {
                sink.report(
                    self.moved as f64,
                    self.total.map(|total| total as f64),
                    Some(format!("{} chunk(s) moved", self.traffic.chunks)),
                );
            }
        }
        // A receipt says what the step did even if something was raised after it; without one,
        // a raised exception is the kernel's answer. (An aborted reply gives no receipt, which
        // the machine judges as unconfirmed.)
        match exception {
            Some(ename) if !stdout.contains(RECEIPT_MARKER) => {
                Event::KernelFailed(KernelFailure::Exception { ename })
            }
            _ => Event::KernelReply(KernelOutput { stdout, buffers }),
        }
    }
}

/// The exception class a step's user expression raised, if it raised (an interrupt can land
/// outside the transfer program's own `except Exception`).
fn expression_error(user_expressions: &serde_json::Map<String, Value>) -> Option<String> {
    let result = user_expressions.get(STEP_EXPRESSION)?;
    (result.get("status")? == "error")
        .then(|| result.get("ename")?.as_str().map(str::to_owned))
        .flatten()
}

/// What a failed `execute` call means for the step.
fn execute_failure(failure: &KernelError) -> KernelFailure {
    match failure {
        KernelError::Restarted => KernelFailure::Restarted,
        KernelError::Gone => KernelFailure::Died,
        // The request was not sent.
        _ => KernelFailure::Busy,
    }
}

/// The refusal of a file above `maxBytes`, as the kernel route words it (`too_large`), for a
/// transfer through a Colab file service, which judges the size itself before anything moves.
pub(crate) fn too_large(direction: Direction, bytes: u64, max_bytes: u64) -> ToolError {
    transfer_error(&TransferError::Failed {
        direction,
        phase: match direction {
            Direction::Upload => Phase::ValidateSource,
            Direction::Download => Phase::InspectRemoteSource,
        },
        cause: Cause::TooLarge { bytes, max_bytes },
        leftover: None,
    })
}

/// The contract error for a transfer that did not succeed. `details` carry the direction,
/// the phase, whether the destination was committed and which temporary file may remain.
fn transfer_error(failure: &TransferError) -> ToolError {
    let leftover_json = |leftover: Option<&transfer::Leftover>| {
        leftover.map_or(Value::Null, |leftover| {
            json!({
                "side": match leftover.side {
                    transfer::Side::Kernel => "kernel",
                    transfer::Side::Host => "host",
                },
                "path": leftover.path,
            })
        })
    };
    let (code, details) = match failure {
        TransferError::InvalidArgument { .. } => (ErrorCode::InvalidArgument, None),
        TransferError::Failed {
            direction,
            phase,
            cause,
            leftover,
        } => {
            let code = match cause {
                Cause::TooLarge { .. } => ErrorCode::TooLarge,
                Cause::BudgetExhausted { .. } => ErrorCode::TransferBudget,
                Cause::DestinationExists => ErrorCode::AlreadyExists,
                _ => ErrorCode::TransferFailed,
            };
            let details = json!({
                "direction": direction.to_string(),
                "phase": phase.to_string(),
                "committed": false,
                "leftover": leftover_json(leftover.as_ref()),
            });
            (code, Some(details))
        }
        TransferError::Uncertain {
            direction,
            leftover,
            ..
        } => {
            let phase = match direction {
                Direction::Upload => Phase::VerifyAndPromoteDestination,
                Direction::Download => Phase::PromoteDestination,
            };
            let details = json!({
                "direction": direction.to_string(),
                "phase": phase.to_string(),
                "committed": Value::Null,
                "leftover": leftover_json(leftover.as_ref()),
            });
            (ErrorCode::TransferUncertain, Some(details))
        }
        TransferError::CommittedCleanupUnconfirmed { receipt, leftover } => {
            let details = json!({
                "direction": receipt.direction.to_string(),
                "committed": true,
                "bytes": receipt.bytes,
                "sha256": receipt.sha256,
                "leftover": leftover_json(Some(leftover)),
            });
            (ErrorCode::TransferFailed, Some(details))
        }
    };
    ToolError {
        code,
        message: failure.to_string(),
        details,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfer_errors_map_to_contract_codes_with_the_phase() {
        let failed = |cause| TransferError::Failed {
            direction: Direction::Upload,
            phase: Phase::TransferChunk,
            cause,
            leftover: None,
        };
        let cases = [
            failed(Cause::TooLarge {
                bytes: 10,
                max_bytes: 5,
            }),
            failed(Cause::BudgetExhausted {
                needed: 10,
                remaining: 5,
                limit: 64,
            }),
            failed(Cause::DestinationExists),
            failed(Cause::KernelException {
                class_name: "PermissionError".into(),
            }),
            failed(Cause::KernelException {
                class_name: "secret text: /home/x".into(),
            }),
            TransferError::Failed {
                direction: Direction::Upload,
                phase: Phase::TransferChunk,
                cause: Cause::Kernel(KernelFailure::Died),
                leftover: Some(transfer::Leftover {
                    side: transfer::Side::Kernel,
                    path: "/k/x.jupyter-mcp-n.part".into(),
                }),
            },
            TransferError::Uncertain {
                direction: Direction::Download,
                destination: "/h/x".into(),
                cause: Cause::Kernel(KernelFailure::Timeout),
                leftover: None,
            },
            TransferError::InvalidArgument {
                argument: "kernelPath",
                reason: "it is empty".into(),
            },
        ];
        let rendered: String = cases
            .iter()
            .map(|failure| {
                let tool_error = transfer_error(failure);
                format!(
                    "{} | {} | {}\n",
                    tool_error.code,
                    tool_error.message,
                    tool_error.details.unwrap_or(Value::Null)
                )
            })
            .collect();
        expect_test::expect![[r#"
            too_large | upload failed before destination commit during transfer chunk: the file has 10 bytes, more than maxBytes (5); raise maxBytes if this is intended | {"committed":false,"direction":"upload","leftover":null,"phase":"transfer chunk"}
            transfer_budget | upload failed before destination commit during transfer chunk: this kernel may carry only 5 more bytes of its 64-byte chunk-transfer budget, and 10 are needed; restart the kernel to reset the budget, or move the file another way | {"committed":false,"direction":"upload","leftover":null,"phase":"transfer chunk"}
            already_exists | upload failed before destination commit during transfer chunk: the destination already exists; pass overwrite: true to replace it | {"committed":false,"direction":"upload","leftover":null,"phase":"transfer chunk"}
            transfer_failed | upload failed before destination commit during transfer chunk: the kernel raised PermissionError | {"committed":false,"direction":"upload","leftover":null,"phase":"transfer chunk"}
            transfer_failed | upload failed before destination commit during transfer chunk: the kernel raised an exception | {"committed":false,"direction":"upload","leftover":null,"phase":"transfer chunk"}
            transfer_failed | upload failed before destination commit during transfer chunk: the kernel died or disappeared; the kernel temporary file /k/x.jupyter-mcp-n.part may remain | {"committed":false,"direction":"upload","leftover":{"path":"/k/x.jupyter-mcp-n.part","side":"kernel"},"phase":"transfer chunk"}
            transfer_uncertain | download outcome is uncertain: promotion of /h/x was requested but not confirmed (the kernel did not answer before the deadline); check the destination before retrying | {"committed":null,"direction":"download","leftover":null,"phase":"promote destination"}
            invalid_argument | invalid kernelPath: it is empty | null
        "#]].assert_eq(&rendered);
    }
}
