//! The upload machine: host file → kernel file.
//!
//! Steps: check size and budget (`validate source`); create `<kernelPath>.jupyter-mcp-<nonce>.part`
//! exclusively (`initialize remote temporary file`); for each batch of up to
//! [`crate::CHUNKS_PER_REQUEST`] chunks, read it on the host and append its chunks in the kernel
//! at the expected offset with one request (`transfer chunk`); have the kernel check size
//! and SHA-256 and promote the temp file (`verify and promote destination`). After a failure
//! that may have left the temp file, a best-effort cleanup step runs first, unless the kernel
//! died or restarted.

use sha2::Digest as _;

use crate::budget::KernelBudget;
use crate::error::{Cause, Direction, KernelFailure, Leftover, Phase, Side, TransferError};
use crate::machine::{
    Action, Chunking, Common, Deadline, Driver, Emitted, Event, KernelWire, Outcome, Pending,
    Steps, TransferMachine, validate_common,
};
use crate::names::temp_file_path;
use crate::receipt::{self, Reply};
use crate::request::{EncodedChunk, KernelOperation};

/// Everything an upload needs to know before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadConfig {
    /// The host file as the host resolved it (echoed in receipts and messages).
    pub host_path: String,
    /// The `kernelPath` argument, before normalisation.
    pub kernel_path: String,
    /// This transfer's nonce (a fresh random UUID).
    pub nonce: String,
    /// The host file's size, from the host's `stat` of the opened file.
    pub file_size: u64,
    /// Replace an existing destination (default false).
    pub overwrite: bool,
    /// The largest file the caller accepts (default 64 MiB).
    pub max_bytes: u64,
    /// Chunk size (default and maximum 256 KiB; smaller values exist for tests).
    pub chunk_size: usize,
    /// Chunks per kernel request (default and maximum [`crate::CHUNKS_PER_REQUEST`]; smaller
    /// values exist for tests).
    pub chunks_per_request: usize,
    /// How the host's kernel requests travel (default [`KernelWire::Messages`]).
    pub wire: KernelWire,
}

impl UploadConfig {
    /// A config with the defaults: no overwrite, `maxBytes` 64 MiB, 256 KiB chunks, the
    /// most chunks per request.
    pub fn new(
        host_path: impl Into<String>,
        kernel_path: impl Into<String>,
        nonce: impl Into<String>,
        file_size: u64,
    ) -> UploadConfig {
        UploadConfig {
            host_path: host_path.into(),
            kernel_path: kernel_path.into(),
            nonce: nonce.into(),
            file_size,
            overwrite: false,
            max_bytes: crate::DEFAULT_MAX_BYTES,
            chunk_size: crate::CHUNK_SIZE,
            chunks_per_request: crate::CHUNKS_PER_REQUEST,
            wire: KernelWire::default(),
        }
    }
}

/// One upload's state machine. See [`TransferMachine`] for the driving loop.
#[derive(Debug)]
pub struct Upload {
    driver: Driver<UploadSteps>,
}

/// What the upload knows between steps.
#[derive(Debug)]
struct UploadSteps {
    common: Common,
    temp_path: String,
    file_size: u64,
    /// The SHA-256 sent with the promote step.
    sha256: String,
    /// Whether the kernel temp file may exist (so cleanup is worth asking for).
    remote_temp_may_exist: bool,
    /// False once the kernel died or restarted: no more code goes to it.
    kernel_usable: bool,
}

/// Decided but not yet handed out.
#[derive(Debug, Default)]
enum Next {
    #[default]
    Validate,
    Read {
        offset: u64,
    },
    Send {
        offset: u64,
        bytes: Vec<u8>,
    },
    Promote,
    Cleanup(Pending),
    Finish(Action),
}

/// Handed out, waiting for the host's event.
#[derive(Debug)]
enum Awaiting {
    Create,
    Read { offset: u64, len: usize },
    Append { offset: u64, len: u64, count: u64 },
    Promote,
    Cleanup(Pending),
}

impl Upload {
    /// Validates the arguments (kernel path, nonce, limits). Size and budget are judged by the
    /// first action, as phase `validate source`.
    pub fn new(config: UploadConfig) -> Result<Upload, TransferError> {
        let common = validate_common(
            Direction::Upload,
            &config.host_path,
            &config.kernel_path,
            &config.nonce,
            config.overwrite,
            config.max_bytes,
            Chunking {
                chunk_size: config.chunk_size,
                chunks_per_request: config.chunks_per_request,
                wire: config.wire,
            },
        )?;
        let temp_path = temp_file_path(common.kernel_path.as_str(), &common.nonce);
        Ok(Upload {
            driver: Driver::new(UploadSteps {
                common,
                temp_path,
                file_size: config.file_size,
                sha256: String::new(),
                remote_temp_may_exist: false,
                kernel_usable: true,
            }),
        })
    }

    /// The kernel-side temp file: `<kernelPath>.jupyter-mcp-<nonce>.part`.
    pub fn temp_path(&self) -> &str {
        &self.driver.steps.temp_path
    }
}

impl UploadSteps {
    fn on_create(&mut self, event: Event) -> Next {
        let phase = Phase::InitializeRemoteTemporaryFile;
        match event {
            Event::KernelReply(output) => {
                match receipt::parse_create(&output.stdout, &self.common.nonce) {
                    Ok(Reply::Receipt(())) => self.after_chunk(0),
                    Ok(Reply::Exception { class_name, .. }) => {
                        // Exclusive creation raised, so the temp file (if any) is not ours.
                        self.remote_temp_may_exist = false;
                        self.fail(phase, Cause::KernelException { class_name })
                    }
                    Err(problem) => self.fail(phase, Cause::InvalidReceipt(problem)),
                }
            }
            Event::KernelFailed(failure) => self.kernel_failed(phase, failure),
            Event::Cancelled => {
                self.remote_temp_may_exist = false;
                self.fail(phase, Cause::Cancelled)
            }
            Event::HostChunkRead(_) | Event::HostDone | Event::HostFailed(_) => {
                self.fail(phase, Cause::HostProtocolViolation)
            }
        }
    }

    fn on_read(&mut self, offset: u64, len: usize, event: Event) -> Next {
        let phase = Phase::TransferChunk;
        match event {
            Event::HostChunkRead(bytes) if bytes.len() == len => {
                self.common.hasher.update(&bytes);
                Next::Send { offset, bytes }
            }
            Event::HostChunkRead(bytes) => self.fail(
                phase,
                Cause::HostReadLength {
                    expected: len,
                    actual: bytes.len(),
                },
            ),
            Event::HostFailed(kind) => self.fail(phase, Cause::HostIo(kind)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostDone | Event::KernelReply(_) | Event::KernelFailed(_) => {
                self.fail(phase, Cause::HostProtocolViolation)
            }
        }
    }

    fn on_append(&mut self, offset: u64, len: u64, count: u64, event: Event) -> Next {
        let phase = Phase::TransferChunk;
        match event {
            Event::KernelReply(output) => {
                match receipt::parse_append(&output.stdout, &self.common.nonce, offset, len, count)
                {
                    Ok(Reply::Receipt(())) => self.after_chunk(offset + len),
                    Ok(Reply::Exception { class_name, .. }) => {
                        self.fail(phase, Cause::KernelException { class_name })
                    }
                    Err(problem) => self.fail(phase, Cause::InvalidReceipt(problem)),
                }
            }
            Event::KernelFailed(failure) => self.kernel_failed(phase, failure),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostChunkRead(_) | Event::HostDone | Event::HostFailed(_) => {
                self.fail(phase, Cause::HostProtocolViolation)
            }
        }
    }

    fn on_promote(&mut self, event: Event) -> Next {
        let phase = Phase::VerifyAndPromoteDestination;
        match event {
            Event::KernelReply(output) => {
                match receipt::parse_promote(
                    &output.stdout,
                    &self.common.nonce,
                    self.file_size,
                    &self.sha256,
                ) {
                    Ok(Reply::Receipt(())) => {
                        self.remote_temp_may_exist = false;
                        Next::Finish(Action::Done(
                            self.common.receipt(self.file_size, self.sha256.clone()),
                        ))
                    }
                    Ok(Reply::Exception {
                        class_name,
                        committed: true,
                    }) => {
                        let receipt = self.common.receipt(self.file_size, self.sha256.clone());
                        self.begin_failure(Pending {
                            outcome: Outcome::Committed(receipt),
                            cause: Cause::KernelException { class_name },
                        })
                    }
                    Ok(Reply::Exception {
                        class_name,
                        committed: false,
                    }) => {
                        if class_name == "FileExistsError" && !self.common.overwrite {
                            self.fail(phase, Cause::DestinationExists)
                        } else {
                            self.fail(phase, Cause::KernelException { class_name })
                        }
                    }
                    Err(problem) => {
                        self.begin_failure(Pending::uncertain(Cause::InvalidReceipt(problem)))
                    }
                }
            }
            Event::KernelFailed(failure) if failure.may_have_run() => {
                self.kernel_usable &= failure.kernel_still_usable();
                self.begin_failure(Pending::uncertain(Cause::Kernel(failure)))
            }
            Event::KernelFailed(failure) => self.fail(phase, Cause::Kernel(failure)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostChunkRead(_) | Event::HostDone | Event::HostFailed(_) => {
                self.begin_failure(Pending::uncertain(Cause::HostProtocolViolation))
            }
        }
    }

    fn on_cleanup(&mut self, pending: Pending, event: Event) -> Next {
        let removed = match event {
            Event::KernelReply(output) => {
                matches!(
                    receipt::parse_remove(&output.stdout, &self.common.nonce),
                    Ok(Reply::Receipt(_))
                )
            }
            _ => false,
        };
        let leftover = (!removed).then(|| self.leftover());
        Next::Finish(self.common.conclude(pending, leftover))
    }

    fn after_chunk(&self, offset: u64) -> Next {
        if offset >= self.file_size {
            Next::Promote
        } else {
            Next::Read { offset }
        }
    }

    fn kernel_failed(&mut self, phase: Phase, failure: KernelFailure) -> Next {
        self.kernel_usable &= failure.kernel_still_usable();
        self.fail(phase, Cause::Kernel(failure))
    }

    fn fail(&mut self, phase: Phase, cause: Cause) -> Next {
        self.begin_failure(Pending::before_commit(phase, cause))
    }

    /// Cleanup first if the temp file may exist and the kernel can still take code.
    fn begin_failure(&mut self, pending: Pending) -> Next {
        if self.remote_temp_may_exist && self.kernel_usable {
            Next::Cleanup(pending)
        } else {
            let leftover = self.remote_temp_may_exist.then(|| self.leftover());
            Next::Finish(self.common.conclude(pending, leftover))
        }
    }

    fn leftover(&self) -> Leftover {
        Leftover {
            side: Side::Kernel,
            path: self.temp_path.clone(),
        }
    }
}

impl Steps for UploadSteps {
    type Next = Next;
    type Awaiting = Awaiting;

    fn emit(&mut self, next: Next, budget: &mut KernelBudget) -> Emitted<Self> {
        match next {
            Next::Validate => {
                if self.file_size > self.common.max_bytes {
                    let cause = Cause::TooLarge {
                        bytes: self.file_size,
                        max_bytes: self.common.max_bytes,
                    };
                    return Emitted::Then(self.fail(Phase::ValidateSource, cause));
                }
                if let Err(refusal) = budget.check(self.file_size) {
                    return Emitted::Then(self.fail(Phase::ValidateSource, refusal.into()));
                }
                self.remote_temp_may_exist = true;
                let operation = KernelOperation::CreateTemp {
                    temp_path: self.temp_path.clone(),
                };
                let action = self.common.kernel_step(
                    operation,
                    Deadline::Lookup,
                    Phase::InitializeRemoteTemporaryFile,
                );
                Emitted::Wait(action, Awaiting::Create)
            }
            Next::Read { offset } => {
                let len = (self.file_size - offset).min(self.common.batch_len()) as usize;
                Emitted::Wait(
                    Action::ReadHostChunk { offset, len },
                    Awaiting::Read { offset, len },
                )
            }
            Next::Send { offset, bytes } => {
                let len = bytes.len() as u64;
                if let Err(refusal) = budget.try_charge(len) {
                    return Emitted::Then(self.fail(Phase::TransferChunk, refusal.into()));
                }
                let chunks: Vec<EncodedChunk> = bytes
                    .chunks(self.common.chunk_size as usize)
                    .map(EncodedChunk::encode)
                    .collect();
                let count = chunks.len() as u64;
                let operation = KernelOperation::AppendChunks {
                    temp_path: self.temp_path.clone(),
                    offset,
                    chunks,
                };
                let action =
                    self.common
                        .kernel_step(operation, Deadline::Payload, Phase::TransferChunk);
                Emitted::Wait(action, Awaiting::Append { offset, len, count })
            }
            Next::Promote => {
                self.sha256 = self.common.sha256_hex();
                let operation = KernelOperation::PromoteTemp {
                    temp_path: self.temp_path.clone(),
                    destination_path: self.common.kernel_path.as_str().to_owned(),
                    bytes: self.file_size,
                    sha256: self.sha256.clone(),
                    overwrite: self.common.overwrite,
                };
                let action = self.common.kernel_step(
                    operation,
                    Deadline::Lookup,
                    Phase::VerifyAndPromoteDestination,
                );
                Emitted::Wait(action, Awaiting::Promote)
            }
            Next::Cleanup(pending) => {
                let phase = match pending.outcome {
                    Outcome::BeforeCommit(phase) => phase,
                    Outcome::Uncertain | Outcome::Committed(_) => {
                        Phase::VerifyAndPromoteDestination
                    }
                };
                let operation = KernelOperation::RemoveTemp {
                    temp_path: self.temp_path.clone(),
                };
                let action = self.common.kernel_step(operation, Deadline::Cleanup, phase);
                Emitted::Wait(action, Awaiting::Cleanup(pending))
            }
            Next::Finish(action) => Emitted::Finished(action),
        }
    }

    fn on_event(&mut self, awaiting: Awaiting, event: Event) -> Next {
        match awaiting {
            Awaiting::Create => self.on_create(event),
            Awaiting::Read { offset, len } => self.on_read(offset, len, event),
            Awaiting::Append { offset, len, count } => self.on_append(offset, len, count, event),
            Awaiting::Promote => self.on_promote(event),
            Awaiting::Cleanup(pending) => self.on_cleanup(pending, event),
        }
    }

    /// The host answered with no action outstanding (a host bug).
    fn on_event_without_action(&mut self, next: Next) -> Next {
        let phase = match next {
            Next::Cleanup(_) | Next::Finish(_) => return next,
            Next::Validate => Phase::ValidateSource,
            Next::Read { .. } | Next::Send { .. } => Phase::TransferChunk,
            Next::Promote => Phase::VerifyAndPromoteDestination,
        };
        self.fail(phase, Cause::HostProtocolViolation)
    }

    /// The host asked for the next action without answering the last one (a host bug).
    fn on_unanswered(&mut self, awaiting: Awaiting) -> Next {
        match awaiting {
            Awaiting::Create => self.fail(
                Phase::InitializeRemoteTemporaryFile,
                Cause::HostProtocolViolation,
            ),
            Awaiting::Read { .. } | Awaiting::Append { .. } => {
                self.fail(Phase::TransferChunk, Cause::HostProtocolViolation)
            }
            Awaiting::Promote => {
                self.begin_failure(Pending::uncertain(Cause::HostProtocolViolation))
            }
            Awaiting::Cleanup(pending) => {
                Next::Finish(self.common.conclude(pending, Some(self.leftover())))
            }
        }
    }
}

impl TransferMachine for Upload {
    fn next_action(&mut self, budget: &mut KernelBudget) -> Action {
        self.driver.next_action(budget)
    }

    fn handle(&mut self, event: Event) {
        self.driver.handle(event);
    }
}
