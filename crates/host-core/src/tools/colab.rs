//! `check_colab` and transfers through a Colab file service, written once against the
//! [`ColabRuntimes`](crate::colab::ColabRuntimes) seam.
//!
//! A host with a Colab runtime implements [`ColabRuntimes`]: where the runtime's file service
//! is ([`ColabRuntimes::roots`]) and the steps of the proof that do not run in the kernel
//! (reading the build info, reading and stating a file through the file service). The kernel
//! steps run here, on the notebook's own kernel through [`crate::kernel::NotebookKernels`],
//! and the proof itself, its order, checks and cleanup, is `colab-setup`'s [`ColabCheck`].

use std::sync::Arc;
use std::time::Duration;

use colab_setup::{
    CheckAction, CheckCommandKind, CheckEvent, CheckReply, CheckTimeouts, ColabCheck,
    FileServiceRoot, KernelFailure, Nonce,
};
use mcp_contract::params::CheckColabParams;
use mcp_contract::results::TransferOperation;
use mcp_contract::{ErrorCode, ToolError};
use serde_json::Value;
use sha2::Digest as _;

use crate::colab::{ServiceFile, SharedColab, UploadChunk};
use crate::failure::error;
use crate::host::NotebookHost;
use crate::kernel::{ExecuteOptions, KernelLookup, KernelStatus, collect};
use crate::tools::Tools;

/// Above this size a transfer on a Colab runtime goes through its file service.
pub const CONTENTS_ROUTE_ABOVE_BYTES: u64 = 4 * 1024 * 1024;
/// One chunk of an upload through the file service.
const CONTENTS_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// A transfer through the runtime's file service: the root it goes through, the file's path
/// under it, and its size when known before anything moves.
pub(crate) struct ContentsRoute {
    root: FileServiceRoot,
    service_path: String,
    size: Option<u64>,
}

impl ContentsRoute {
    /// The file's size, when known before anything moves.
    pub(crate) fn size(&self) -> Option<u64> {
        self.size
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

fn nonce() -> Nonce {
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..]);
    Nonce::from_bytes(bytes)
}

impl<H: NotebookHost> Tools<H> {
    /// The nonce proof on `session` through `root`: its receipt.
    async fn prove(
        &self,
        colab: &SharedColab,
        session: &crate::kernel::SharedSession,
        root: FileServiceRoot,
    ) -> colab_setup::CheckReceipt {
        let epoch = session.epoch();
        let mut check = ColabCheck::new(root, nonce(), CheckTimeouts::default(), now_ms());
        let mut actions = check.start(now_ms());
        while let Some(action) = actions.pop() {
            let CheckAction::Perform(command) = action else {
                continue;
            };
            let budget = Duration::from_millis(command.deadline_ms.saturating_sub(now_ms()));
            let reply = match &command.kind {
                CheckCommandKind::ExecuteKernel { code } => {
                    if session.epoch() != epoch {
                        CheckReply::KernelFailed(KernelFailure::NotSent)
                    } else {
                        let run = async {
                            let events = session
                                .execute(code.clone(), ExecuteOptions::quiet())
                                .await?;
                            collect(events).await
                        };
                        match tokio::time::timeout(budget, run).await {
                            Ok(Ok(collected)) => match collected.error {
                                Some(raised) => CheckReply::KernelFailed(KernelFailure::Error {
                                    ename: raised.ename,
                                }),
                                None => CheckReply::KernelOutput {
                                    stdout: collected.stdout,
                                },
                            },
                            Ok(Err(_)) => CheckReply::KernelFailed(KernelFailure::Lost),
                            // Unanswered by its deadline: the check records it as
                            // outstanding and fails at this tick.
                            Err(_) => {
                                actions.extend(check.apply(CheckEvent::Tick, now_ms()));
                                continue;
                            }
                        }
                    }
                }
                other => match tokio::time::timeout(budget, colab.perform_check(other)).await {
                    Ok(reply) => reply,
                    Err(_) => {
                        actions.extend(check.apply(CheckEvent::Tick, now_ms()));
                        continue;
                    }
                },
            };
            let mut more = check.apply(
                CheckEvent::Reply {
                    step: command.step,
                    reply,
                },
                now_ms(),
            );
            more.reverse();
            actions.extend(more);
        }
        check.receipt()
    }

    /// Whether a transfer takes the runtime's file service. Only a kernel proven to run on a
    /// Colab runtime ([`ProvenKernels`]) has one: any other kernel's transfer takes the kernel
    /// route, and a `colabFileUri` for it is refused. On a proven kernel: with `colabFileUri`
    /// (which must name a registered root and exactly `kernelPath`) through that root, else
    /// through the root the kernel was proven through for a file above 4 MiB. Never a silent
    /// fallback: a `colabFileUri` that cannot be used, or a file service that does not answer,
    /// is an error. A file above `maxBytes` is refused here, before anything is sent.
    pub(crate) async fn contents_route(
        &self,
        direction: transfer::Direction,
        params: &mcp_contract::params::TransferParams,
        files: &Arc<dyn crate::files::HostFiles>,
        host_path: &str,
        kernel: &crate::kernel::SharedSession,
    ) -> Result<Option<ContentsRoute>, ToolError> {
        let Some(colab) = &self.colab else {
            // `transfer` refused a colabFileUri before this on a host without Colab.
            return Ok(None);
        };
        let Some(proven) = self.colab_kernels.root_of(kernel) else {
            if params.colab_file_uri.is_some() {
                return Err(error(
                    ErrorCode::NotSupported,
                    "colabFileUri moves the file through a Colab runtime's file service, and this notebook's kernel is not proven to run on a Colab runtime (no check_colab or Colab setup verified it since it last started): run check_colab on it first, or omit colabFileUri to move the file through the kernel",
                ));
            }
            return Ok(None);
        };
        let service_path = params.kernel_path.trim_start_matches('/').to_owned();
        colab.refresh_roots().await;
        let roots = colab.roots();
        let explicit = match &params.colab_file_uri {
            Some(uri) => Some(
                match roots
                    .iter()
                    .find_map(|root| Some((root, uri.strip_prefix(root.uri().as_str())?)))
                {
                    Some((root, rest)) if rest == service_path => root.clone(),
                    Some((root, _)) => {
                        return Err(error(
                            ErrorCode::InvalidArgument,
                            format!(
                                "colabFileUri must be the Colab root followed by kernelPath without its leading '/' ({}{service_path})",
                                root.uri()
                            ),
                        ));
                    }
                    None => {
                        return Err(error(
                            ErrorCode::InvalidArgument,
                            "colabFileUri names no registered Colab root (check_colab reports the root)",
                        ));
                    }
                },
            ),
            None => None,
        };
        let root = explicit.clone().unwrap_or(proven);
        let size = match direction {
            transfer::Direction::Upload => Some(files.open(host_path).await?.size()),
            transfer::Direction::Download => match colab
                .file_size(ServiceFile {
                    root: &root,
                    path: &service_path,
                })
                .await
            {
                Ok(size) => size,
                Err(reason) => {
                    return Err(error(
                        ErrorCode::TransferFailed,
                        format!(
                            "the Colab runtime's file service did not answer for {} ({reason}); files above 4 MiB move only through it, so nothing was moved: check the runtime (check_colab) and retry",
                            params.kernel_path
                        ),
                    ));
                }
            },
        };
        let route = ContentsRoute {
            root,
            service_path,
            size,
        };
        if explicit.is_some() {
            return Ok(Some(route));
        }
        match size {
            Some(size) if size > CONTENTS_ROUTE_ABOVE_BYTES => Ok(Some(route)),
            // Small, or (a download) not visible through the file service: the kernel route
            // says what it finds.
            _ => Ok(None),
        }
    }

    /// A transfer through the runtime's file service, after a fresh nonce proof that the
    /// service and the kernel see the same `/content`. The kernel hashes its side; the
    /// destination is promoted atomically only when both hashes match.
    pub(crate) async fn contents_transfer(
        &self,
        direction: transfer::Direction,
        params: &mcp_contract::params::TransferParams,
        route: ContentsRoute,
        files: &Arc<dyn crate::files::HostFiles>,
        host_path: &str,
        kernel: &crate::kernel::SharedSession,
    ) -> Result<(Value, Vec<crate::tools::ImageContent>), ToolError> {
        let colab = self.colab.clone().expect("a route needs a runtime");
        let failed = |phase: &str, reason: String| {
            error(
                ErrorCode::TransferFailed,
                format!("the transfer through the Colab file service failed ({phase}): {reason}"),
            )
        };
        let ContentsRoute {
            root, service_path, ..
        } = route;
        // The root the route chose (the caller's colabFileUri, else the one this kernel was
        // proven through), proven afresh: the file service and the kernel must see the same
        // `/content` now.
        let proof = self.prove(&colab, kernel, root.clone()).await;
        if !proof.verified {
            return Err(failed(
                "route check",
                "the file service and the kernel did not prove the same /content (run check_colab for the details); nothing was moved".to_owned(),
            ));
        }
        self.colab_kernels.record(kernel, root.clone());
        let overwrite = params.overwrite.unwrap_or(false);
        let max_bytes = params.max_bytes.unwrap_or(transfer::DEFAULT_MAX_BYTES);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        match direction {
            transfer::Direction::Upload => {
                let mut reader = files.open(host_path).await?;
                let size = reader.size();
                if size > max_bytes {
                    return Err(crate::transfer_tools::too_large(direction, size, max_bytes));
                }
                // The bytes land next to the destination under a temporary name, and the kernel
                // promotes them once its hash matches ours.
                let temp = format!("{service_path}.jupyter-mcp-{nonce}.part");
                let temp_file = ServiceFile {
                    root: &root,
                    path: &temp,
                };
                let mut hasher = sha2::Sha256::new();
                let (mut offset, mut chunk) = (0u64, 1u32);
                loop {
                    let bytes = reader
                        .read_at(offset, CONTENTS_CHUNK_BYTES)
                        .await
                        .map_err(|io| failed("read", io.kind().to_string()))?;
                    offset += bytes.len() as u64;
                    let last = offset >= size;
                    hasher.update(&bytes);
                    let upload = UploadChunk {
                        number: chunk,
                        last,
                        bytes,
                    };
                    if let Err(reason) = colab.write_chunk(temp_file, upload).await {
                        let _ = colab.delete_file(temp_file).await;
                        return Err(failed("write", reason));
                    }
                    if last {
                        break;
                    }
                    chunk += 1;
                }
                let sha256 = hex(&hasher.finalize());
                let code = format!(
                    "exec({program}, {{\"__name__\": \"__jupyter_mcp_contents__\", \"TEMP\": {temp}, \"DEST\": {dest}, \"SHA\": {sha}, \"OVERWRITE\": {overwrite}}})\n",
                    program = Value::from(PROMOTE_PROGRAM),
                    temp = Value::from(format!("/{temp}")),
                    dest = Value::from(params.kernel_path.as_str()),
                    sha = Value::from(sha256.as_str()),
                    overwrite = if overwrite { "True" } else { "False" },
                );
                let answer = kernel_json(kernel, code).await;
                let _ = colab.delete_file(temp_file).await;
                let answer = answer.map_err(|reason| failed("promote", reason))?;
                if answer["promoted"] != true {
                    return Err(failed(
                        "promote",
                        answer["reason"]
                            .as_str()
                            .unwrap_or("the kernel refused")
                            .to_owned(),
                    ));
                }
                transfer_result(
                    TransferOperation::UploadFile,
                    size,
                    sha256,
                    host_path,
                    params,
                    chunk,
                )
            }
            transfer::Direction::Download => {
                let code = format!(
                    "exec({program}, {{\"__name__\": \"__jupyter_mcp_contents__\", \"PATH\": {path}}})\n",
                    program = Value::from(HASH_PROGRAM),
                    path = Value::from(params.kernel_path.as_str()),
                );
                let kernel_side = kernel_json(kernel, code)
                    .await
                    .map_err(|reason| failed("kernel hash", reason))?;
                let (Some(expected), Some(size)) =
                    (kernel_side["sha256"].as_str(), kernel_side["size"].as_u64())
                else {
                    return Err(failed(
                        "kernel hash",
                        kernel_side["reason"]
                            .as_str()
                            .unwrap_or("no hash")
                            .to_owned(),
                    ));
                };
                if size > max_bytes {
                    // It grew since the route was chosen.
                    return Err(crate::transfer_tools::too_large(direction, size, max_bytes));
                }
                let bytes = colab
                    .read_file(ServiceFile {
                        root: &root,
                        path: &service_path,
                    })
                    .await
                    .map_err(|reason| failed("read", reason))?;
                let sha256 = hex(&sha2::Sha256::digest(&bytes));
                if sha256 != expected || bytes.len() as u64 != size {
                    return Err(failed(
                        "verify",
                        "the bytes read through the file service do not hash to the kernel's SHA-256; nothing was written".to_owned(),
                    ));
                }
                let temp = format!("{host_path}.jupyter-mcp-{nonce}.part");
                let mut writer = files
                    .create(&temp)
                    .await
                    .map_err(|io| failed("write", io.kind().to_string()))?;
                let written = async {
                    writer.write_at(0, bytes).await?;
                    writer.sync_and_close().await?;
                    files.promote(&temp, host_path, overwrite).await
                }
                .await;
                let _ = files.remove(&temp).await;
                written.map_err(|io| failed("promote", io.kind().to_string()))?;
                transfer_result(
                    TransferOperation::DownloadFile,
                    size,
                    sha256,
                    host_path,
                    params,
                    1,
                )
            }
        }
    }

    /// `check_colab`: the nonce proof on the notebook's active idle kernel.
    pub(crate) async fn check_colab(
        &self,
        params: CheckColabParams,
    ) -> Result<(Value, Vec<crate::tools::ImageContent>), ToolError> {
        let colab = self.colab.clone().ok_or_else(|| {
            error(
                ErrorCode::NotSupported,
                "no Colab runtime is configured on this host: start jupyter-mcp with --colab-session or --colab-runtime-url",
            )
        })?;
        let (location, _document) = self.load(&params.notebook_ref).await?;
        let kernels = self
            .kernels
            .clone()
            .ok_or_else(|| error(ErrorCode::NotSupported, "this host runs no kernels"))?;
        let session = match kernels.lookup(&location).await {
            KernelLookup::Running(session) => session,
            KernelLookup::Absent { reason } | KernelLookup::Unobserved { reason } => {
                return Err(error(
                    ErrorCode::KernelUnavailable,
                    format!("check_colab needs the notebook's active idle Python kernel: {reason}"),
                ));
            }
        };
        let status = *session.status().borrow();
        if status != KernelStatus::Idle {
            return Err(error(
                ErrorCode::KernelBusy,
                format!(
                    "check_colab needs the notebook's kernel idle; it is {}: wait for its run (get_execution) and try again",
                    status.as_str()
                ),
            ));
        }
        colab.refresh_roots().await;
        let roots = colab.roots();
        let root = colab_setup::select_root(&roots, params.colab_file_uri.as_deref()).map_err(
            |setup_error| {
                let body = colab_setup::ErrorBody::from(&setup_error);
                ToolError {
                    code: ErrorCode::InvalidArgument,
                    message: body.message,
                    details: Some(serde_json::json!({"colabCode": body.code})),
                }
            },
        )?;
        let receipt = self.prove(&colab, &session, root.clone()).await;
        if receipt.verified {
            self.colab_kernels.record(&session, root);
        }
        Ok((
            serde_json::to_value(&receipt).expect("a receipt serialises"),
            Vec::new(),
        ))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The marker of the kernel programs' one result line.
const CONTENTS_MARKER: &str = "__JUPYTER_MCP_CONTENTS__";

/// A kernel program: `$body`, the lines of a `try:` block, between the start every program
/// shares (its imports, `result`, and `sha256_of`: a file's SHA-256 read in 1 MiB blocks) and
/// its end (a failure's exception class as the reason, then the result line after
/// [`CONTENTS_MARKER`]).
macro_rules! kernel_program {
    ($body:literal) => {
        concat!(
            r#"import hashlib, json, os
result = {}
def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
try:
"#,
            $body,
            r#"except Exception as error:
    result["reason"] = "kernel-side " + type(error).__name__
print("__JUPYTER_MCP_CONTENTS__" + json.dumps(result))
"#
        )
    };
}

/// Hashes the upload the file service wrote to `TEMP`, then promotes it to `DEST` atomically:
/// `os.replace` with `OVERWRITE`, else a hard link that fails when `DEST` exists.
const PROMOTE_PROGRAM: &str = kernel_program!(
    r#"    if sha256_of(TEMP) != SHA:
        result["reason"] = "the kernel's SHA-256 of the uploaded bytes differs from the host's"
    elif OVERWRITE:
        os.replace(TEMP, DEST)
        result["promoted"] = True
    else:
        try:
            os.link(TEMP, DEST)
        except FileExistsError:
            result["reason"] = "the destination exists (pass overwrite: true to replace it)"
        else:
            os.remove(TEMP)
            result["promoted"] = True
"#
);

/// The kernel's SHA-256 and size of `PATH`.
const HASH_PROGRAM: &str = kernel_program!(
    r#"    result["sha256"] = sha256_of(PATH)
    result["size"] = os.path.getsize(PATH)
"#
);

/// Runs one of the programs above on `kernel` and parses its result line.
async fn kernel_json(kernel: &crate::kernel::SharedSession, code: String) -> Result<Value, String> {
    let run = async {
        let events = kernel.execute(code, ExecuteOptions::quiet()).await?;
        collect(events).await
    };
    let collected = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .map_err(|_| "the kernel did not answer within 5 minutes".to_owned())?
        .map_err(|_| "the kernel was lost".to_owned())?;
    if let Some(raised) = collected.error {
        return Err(format!("kernel-side {}", raised.ename));
    }
    collected
        .stdout
        .lines()
        .find_map(|line| line.strip_prefix(CONTENTS_MARKER))
        .and_then(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| "the kernel gave no result".to_owned())
}

fn transfer_result(
    operation: TransferOperation,
    bytes: u64,
    sha256: String,
    host_path: &str,
    params: &mcp_contract::params::TransferParams,
    chunks: u32,
) -> Result<(Value, Vec<crate::tools::ImageContent>), ToolError> {
    let result = mcp_contract::results::TransferResult {
        operation,
        bytes,
        sha256,
        host_path: host_path.to_owned(),
        kernel_path: params.kernel_path.clone(),
        verified: true,
        wire_bytes: bytes,
        chunks: u64::from(chunks),
        route: Some(mcp_contract::results::TransferRoute::Contents),
    };
    Ok((
        serde_json::to_value(result).expect("serialises"),
        Vec::new(),
    ))
}
