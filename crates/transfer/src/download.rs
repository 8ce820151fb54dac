//! The download machine: kernel file → host file.
//!
//! Steps: the kernel stats the source and the machine judges its size against `maxBytes` and
//! the budget (`inspect remote source`); the host creates `<hostPath>.jupyter-mcp-<nonce>.part`
//! exclusively, then for each batch of up to [`crate::CHUNKS_PER_REQUEST`] chunks the kernel
//! reads it with one request and the host writes it (`transfer chunk`); the kernel hashes the
//! whole source independently and the machine compares (`verify remote source`); the host
//! promotes its temp file (`promote destination`). The kernel side is read-only, so cleanup is always the host's: after a failure the machine asks to remove
//! the host temp file, if one was created.

use sha2::Digest as _;
use std::io::ErrorKind;

use crate::budget::KernelBudget;
use crate::error::{Cause, Direction, Leftover, Phase, Side, TransferError, TransferReceipt};
use crate::machine::{
    Action, Chunking, Common, Deadline, Driver, Emitted, Event, KernelWire, Pending, Steps,
    TransferMachine, validate_common,
};
use crate::names::temp_file_path;
use crate::receipt::{self, Reply};
use crate::request::KernelOperation;

/// Everything a download needs to know before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadConfig {
    /// The host destination as the host resolved it; the temp file is named after it.
    pub host_path: String,
    /// The `kernelPath` argument, before normalisation.
    pub kernel_path: String,
    /// This transfer's nonce (a fresh random UUID).
    pub nonce: String,
    /// Replace an existing destination (default false).
    pub overwrite: bool,
    /// The largest file the caller accepts (default 64 MiB).
    pub max_bytes: u64,
    /// Chunk size (default and maximum 256 KiB; smaller values exist for tests).
    pub chunk_size: usize,
    /// Chunks per kernel request while the kernel prints them (default
    /// [`crate::DOWNLOAD_CHUNKS_PER_REQUEST`], at most [`crate::CHUNKS_PER_REQUEST`]); the
    /// first request of a download always uses this.
    pub chunks_per_request: usize,
    /// Chunks per kernel request once a reply has carried its chunks as binary buffers
    /// (default and at most [`crate::CHUNKS_PER_REQUEST`]): buffers are not counted by Jupyter
    /// Server's IOPub data rate limit, so larger batches only save requests.
    pub buffered_chunks_per_request: usize,
    /// How the host's kernel requests travel (default [`KernelWire::Messages`]). With
    /// messages the kernel sends the chunks as the binary buffers of a `display_data` message
    /// instead of base64 in the receipt: no base64 and no JSON around the payload on either
    /// side, and no message signature over it (a kernel that cannot, not ipykernel 6 or later,
    /// inlines them anyway); code-only hosts get them inlined.
    pub wire: KernelWire,
}

impl DownloadConfig {
    /// A config with the defaults: no overwrite, `maxBytes` 64 MiB, 256 KiB chunks, chunks as
    /// binary buffers where the kernel can, 4 chunks per request (a printed reply that fits
    /// Jupyter Server's default output rate limit with room to spare) until a reply has come as
    /// buffers, 8 after that.
    pub fn new(
        host_path: impl Into<String>,
        kernel_path: impl Into<String>,
        nonce: impl Into<String>,
    ) -> DownloadConfig {
        DownloadConfig {
            host_path: host_path.into(),
            kernel_path: kernel_path.into(),
            nonce: nonce.into(),
            overwrite: false,
            max_bytes: crate::DEFAULT_MAX_BYTES,
            chunk_size: crate::CHUNK_SIZE,
            chunks_per_request: crate::DOWNLOAD_CHUNKS_PER_REQUEST,
            buffered_chunks_per_request: crate::CHUNKS_PER_REQUEST,
            wire: KernelWire::default(),
        }
    }
}

/// One download's state machine. See [`TransferMachine`] for the driving loop.
#[derive(Debug)]
pub struct Download {
    driver: Driver<DownloadSteps>,
}

/// What the download knows between steps.
#[derive(Debug)]
struct DownloadSteps {
    common: Common,
    host_temp_path: String,
    /// The source size the kernel reported.
    remote_size: u64,
    /// Whether the host temp file exists (we created it and have not removed it).
    host_temp_exists: bool,
    /// `DownloadConfig::reply_buffers`.
    reply_buffers: bool,
    /// The most bytes one request asks for once the kernel has sent buffers.
    buffered_batch_len: u64,
    /// Whether a read reply has carried binary buffers: later batches are
    /// `buffered_batch_len`.
    kernel_sends_buffers: bool,
}

/// Decided but not yet handed out.
#[derive(Debug, Default)]
enum Next {
    #[default]
    Inspect,
    CreateTemp,
    Request {
        offset: u64,
    },
    Write {
        offset: u64,
        bytes: Vec<u8>,
    },
    Verify,
    Promote(TransferReceipt),
    RemoveAfterCommit(TransferReceipt),
    Cleanup(Pending),
    Finish(Action),
}

/// Handed out, waiting for the host's event.
#[derive(Debug)]
enum Awaiting {
    Inspect,
    CreateTemp,
    Read { offset: u64, len: u64 },
    Write { offset: u64, len: u64 },
    Verify { sha256: String },
    Promote(TransferReceipt),
    RemoveAfterCommit(TransferReceipt),
    Cleanup(Pending),
}

impl Download {
    /// Validates the arguments (kernel path, nonce, limits).
    pub fn new(config: DownloadConfig) -> Result<Download, TransferError> {
        let common = validate_common(
            Direction::Download,
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
        if config.buffered_chunks_per_request == 0
            || config.buffered_chunks_per_request > crate::CHUNKS_PER_REQUEST
        {
            return Err(TransferError::InvalidArgument {
                argument: "bufferedChunksPerRequest",
                reason: format!("it must be between 1 and {}", crate::CHUNKS_PER_REQUEST),
            });
        }
        let host_temp_path = temp_file_path(&common.host_path, &common.nonce);
        let buffered_batch_len = common.chunk_size * config.buffered_chunks_per_request as u64;
        Ok(Download {
            driver: Driver::new(DownloadSteps {
                common,
                host_temp_path,
                remote_size: 0,
                host_temp_exists: false,
                reply_buffers: config.wire == KernelWire::Messages,
                buffered_batch_len,
                kernel_sends_buffers: false,
            }),
        })
    }

    /// The host-side temp file: `<hostPath>.jupyter-mcp-<nonce>.part`.
    pub fn host_temp_path(&self) -> &str {
        &self.driver.steps.host_temp_path
    }
}

impl DownloadSteps {
    fn on_inspect(&mut self, event: Event) -> Next {
        let phase = Phase::InspectRemoteSource;
        match event {
            Event::KernelReply(output) => {
                match receipt::parse_inspect(&output.stdout, &self.common.nonce) {
                    Ok(Reply::Receipt(bytes)) if bytes > self.common.max_bytes => self.fail(
                        phase,
                        Cause::TooLarge {
                            bytes,
                            max_bytes: self.common.max_bytes,
                        },
                    ),
                    Ok(Reply::Receipt(bytes)) => {
                        self.remote_size = bytes;
                        Next::CreateTemp
                    }
                    Ok(Reply::Exception { class_name, .. }) => {
                        self.fail(phase, Cause::KernelException { class_name })
                    }
                    Err(problem) => self.fail(phase, Cause::InvalidReceipt(problem)),
                }
            }
            other => self.unexpected_kernel_event(phase, other),
        }
    }

    fn on_create_temp(&mut self, event: Event) -> Next {
        let phase = Phase::TransferChunk;
        match event {
            Event::HostDone => {
                self.host_temp_exists = true;
                self.after_chunk(0)
            }
            // A failed exclusive create leaves nothing of ours behind (an existing file is
            // someone else's and stays).
            Event::HostFailed(kind) => self.fail(phase, Cause::HostIo(kind)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostChunkRead(_) | Event::KernelReply(_) | Event::KernelFailed(_) => {
                // The host may or may not have created it.
                self.host_temp_exists = true;
                self.fail(phase, Cause::HostProtocolViolation)
            }
        }
    }

    fn on_read(&mut self, offset: u64, len: u64, event: Event) -> Next {
        let phase = Phase::TransferChunk;
        match event {
            Event::KernelReply(output) => {
                let carried_buffers = !output.buffers.is_empty();
                match receipt::parse_read(
                    &output.stdout,
                    output.buffers,
                    &self.common.nonce,
                    offset,
                    len,
                    self.common.chunk_size,
                ) {
                    Ok(Reply::Receipt(bytes)) => {
                        self.kernel_sends_buffers |= carried_buffers;
                        self.common.hasher.update(&bytes);
                        Next::Write { offset, bytes }
                    }
                    Ok(Reply::Exception { class_name, .. }) => {
                        self.fail(phase, Cause::KernelException { class_name })
                    }
                    Err(problem) => self.fail(phase, Cause::InvalidReceipt(problem)),
                }
            }
            other => self.unexpected_kernel_event(phase, other),
        }
    }

    fn on_write(&mut self, offset: u64, len: u64, event: Event) -> Next {
        let phase = Phase::TransferChunk;
        match event {
            Event::HostDone => self.after_chunk(offset + len),
            Event::HostFailed(kind) => self.fail(phase, Cause::HostIo(kind)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostChunkRead(_) | Event::KernelReply(_) | Event::KernelFailed(_) => {
                self.fail(phase, Cause::HostProtocolViolation)
            }
        }
    }

    fn on_verify(&mut self, sha256: String, event: Event) -> Next {
        let phase = Phase::VerifyRemoteSource;
        match event {
            Event::KernelReply(output) => {
                match receipt::parse_hash(&output.stdout, &self.common.nonce) {
                    Ok(Reply::Receipt((bytes, _))) if bytes != self.remote_size => self.fail(
                        phase,
                        Cause::SizeMismatch {
                            expected: self.remote_size,
                            actual: bytes,
                        },
                    ),
                    Ok(Reply::Receipt((_, remote_sha256))) if remote_sha256 != sha256 => {
                        self.fail(phase, Cause::HashMismatch)
                    }
                    Ok(Reply::Receipt(_)) => {
                        Next::Promote(self.common.receipt(self.remote_size, sha256))
                    }
                    Ok(Reply::Exception { class_name, .. }) => {
                        self.fail(phase, Cause::KernelException { class_name })
                    }
                    Err(problem) => self.fail(phase, Cause::InvalidReceipt(problem)),
                }
            }
            other => self.unexpected_kernel_event(phase, other),
        }
    }

    fn on_promote(&mut self, receipt: TransferReceipt, event: Event) -> Next {
        let phase = Phase::PromoteDestination;
        match event {
            Event::HostDone if self.common.overwrite => {
                // The rename consumed the temp file.
                self.host_temp_exists = false;
                Next::Finish(Action::Done(receipt))
            }
            Event::HostDone => Next::RemoveAfterCommit(receipt),
            Event::HostFailed(ErrorKind::AlreadyExists) if !self.common.overwrite => {
                self.fail(phase, Cause::DestinationExists)
            }
            Event::HostFailed(kind) => self.fail(phase, Cause::HostIo(kind)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::HostChunkRead(_) | Event::KernelReply(_) | Event::KernelFailed(_) => {
                self.begin_failure(Pending::uncertain(Cause::HostProtocolViolation))
            }
        }
    }

    /// Kernel steps: a kernel failure or cancellation fails the phase; host events are a bug.
    fn unexpected_kernel_event(&mut self, phase: Phase, event: Event) -> Next {
        match event {
            Event::KernelFailed(failure) => self.fail(phase, Cause::Kernel(failure)),
            Event::Cancelled => self.fail(phase, Cause::Cancelled),
            Event::KernelReply(_)
            | Event::HostChunkRead(_)
            | Event::HostDone
            | Event::HostFailed(_) => self.fail(phase, Cause::HostProtocolViolation),
        }
    }

    fn after_chunk(&self, offset: u64) -> Next {
        if offset >= self.remote_size {
            Next::Verify
        } else {
            Next::Request { offset }
        }
    }

    fn fail(&mut self, phase: Phase, cause: Cause) -> Next {
        self.begin_failure(Pending::before_commit(phase, cause))
    }

    fn begin_failure(&mut self, pending: Pending) -> Next {
        if self.host_temp_exists {
            Next::Cleanup(pending)
        } else {
            Next::Finish(self.common.conclude(pending, None))
        }
    }

    fn source(&self) -> String {
        self.common.kernel_path.as_str().to_owned()
    }

    fn leftover(&self) -> Leftover {
        Leftover {
            side: Side::Host,
            path: self.host_temp_path.clone(),
        }
    }
}

impl Steps for DownloadSteps {
    type Next = Next;
    type Awaiting = Awaiting;

    fn emit(&mut self, next: Next, budget: &mut KernelBudget) -> Emitted<Self> {
        match next {
            Next::Inspect => {
                let operation = KernelOperation::InspectSource {
                    source_path: self.source(),
                };
                let action = self.common.kernel_step(
                    operation,
                    Deadline::Lookup,
                    Phase::InspectRemoteSource,
                );
                Emitted::Wait(action, Awaiting::Inspect)
            }
            Next::CreateTemp => {
                if let Err(refusal) = budget.check(self.remote_size) {
                    return Emitted::Then(self.fail(Phase::InspectRemoteSource, refusal.into()));
                }
                let action = Action::CreateHostTemp {
                    temp_path: self.host_temp_path.clone(),
                };
                Emitted::Wait(action, Awaiting::CreateTemp)
            }
            Next::Request { offset } => {
                let batch_len = if self.kernel_sends_buffers {
                    self.buffered_batch_len
                } else {
                    self.common.batch_len()
                };
                let len = (self.remote_size - offset).min(batch_len);
                if let Err(refusal) = budget.try_charge(len) {
                    return Emitted::Then(self.fail(Phase::TransferChunk, refusal.into()));
                }
                let operation = KernelOperation::ReadChunks {
                    source_path: self.source(),
                    offset,
                    len,
                    chunk_size: self.common.chunk_size,
                    reply_buffers: self.reply_buffers,
                };
                let action =
                    self.common
                        .kernel_step(operation, Deadline::Payload, Phase::TransferChunk);
                Emitted::Wait(action, Awaiting::Read { offset, len })
            }
            Next::Write { offset, bytes } => {
                let len = bytes.len() as u64;
                let action = Action::WriteHostChunk {
                    temp_path: self.host_temp_path.clone(),
                    offset,
                    bytes,
                };
                Emitted::Wait(action, Awaiting::Write { offset, len })
            }
            Next::Verify => {
                let sha256 = self.common.sha256_hex();
                let operation = KernelOperation::HashSource {
                    source_path: self.source(),
                };
                let action =
                    self.common
                        .kernel_step(operation, Deadline::Lookup, Phase::VerifyRemoteSource);
                Emitted::Wait(action, Awaiting::Verify { sha256 })
            }
            Next::Promote(receipt) => {
                let action = Action::PromoteHostFile {
                    temp_path: self.host_temp_path.clone(),
                    destination_path: self.common.host_path.clone(),
                    overwrite: self.common.overwrite,
                };
                Emitted::Wait(action, Awaiting::Promote(receipt))
            }
            Next::RemoveAfterCommit(receipt) => {
                let action = Action::RemoveHostTemp {
                    temp_path: self.host_temp_path.clone(),
                };
                Emitted::Wait(action, Awaiting::RemoveAfterCommit(receipt))
            }
            Next::Cleanup(pending) => {
                let action = Action::RemoveHostTemp {
                    temp_path: self.host_temp_path.clone(),
                };
                Emitted::Wait(action, Awaiting::Cleanup(pending))
            }
            Next::Finish(action) => Emitted::Finished(action),
        }
    }

    fn on_event(&mut self, awaiting: Awaiting, event: Event) -> Next {
        match awaiting {
            Awaiting::Inspect => self.on_inspect(event),
            Awaiting::CreateTemp => self.on_create_temp(event),
            Awaiting::Read { offset, len } => self.on_read(offset, len, event),
            Awaiting::Write { offset, len } => self.on_write(offset, len, event),
            Awaiting::Verify { sha256 } => self.on_verify(sha256, event),
            Awaiting::Promote(receipt) => self.on_promote(receipt, event),
            Awaiting::RemoveAfterCommit(receipt) => match event {
                Event::HostDone => {
                    self.host_temp_exists = false;
                    Next::Finish(Action::Done(receipt))
                }
                _ => Next::Finish(Action::Failed(TransferError::CommittedCleanupUnconfirmed {
                    receipt,
                    leftover: self.leftover(),
                })),
            },
            Awaiting::Cleanup(pending) => {
                let leftover = (event != Event::HostDone).then(|| self.leftover());
                Next::Finish(self.common.conclude(pending, leftover))
            }
        }
    }

    /// The host answered with no action outstanding (a host bug).
    fn on_event_without_action(&mut self, next: Next) -> Next {
        let phase = match next {
            Next::Cleanup(_) | Next::Finish(_) | Next::RemoveAfterCommit(_) => return next,
            Next::Inspect => Phase::InspectRemoteSource,
            Next::CreateTemp | Next::Request { .. } | Next::Write { .. } => Phase::TransferChunk,
            Next::Verify => Phase::VerifyRemoteSource,
            Next::Promote(_) => Phase::PromoteDestination,
        };
        self.fail(phase, Cause::HostProtocolViolation)
    }

    /// The host asked for the next action without answering the last one (a host bug).
    fn on_unanswered(&mut self, awaiting: Awaiting) -> Next {
        let cause = Cause::HostProtocolViolation;
        match awaiting {
            Awaiting::Inspect => self.fail(Phase::InspectRemoteSource, cause),
            Awaiting::CreateTemp => {
                self.host_temp_exists = true;
                self.fail(Phase::TransferChunk, cause)
            }
            Awaiting::Read { .. } | Awaiting::Write { .. } => {
                self.fail(Phase::TransferChunk, cause)
            }
            Awaiting::Verify { .. } => self.fail(Phase::VerifyRemoteSource, cause),
            Awaiting::Promote(_) => self.begin_failure(Pending::uncertain(cause)),
            Awaiting::RemoveAfterCommit(receipt) => {
                Next::Finish(Action::Failed(TransferError::CommittedCleanupUnconfirmed {
                    receipt,
                    leftover: self.leftover(),
                }))
            }
            Awaiting::Cleanup(pending) => {
                Next::Finish(self.common.conclude(pending, Some(self.leftover())))
            }
        }
    }
}

impl TransferMachine for Download {
    fn next_action(&mut self, budget: &mut KernelBudget) -> Action {
        self.driver.next_action(budget)
    }

    fn handle(&mut self, event: Event) {
        self.driver.handle(event);
    }
}
