//! What the machines ask of a host, what the host tells them back, and the parts both machines
//! share.

use std::io::ErrorKind;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::budget::KernelBudget;
use crate::download::{Download, DownloadConfig};
use crate::error::Cause;
use crate::error::{Direction, Leftover, Phase, TransferError, TransferReceipt};
use crate::names::{KernelPath, Nonce};
use crate::request::{KernelOperation, KernelRequest};
use crate::upload::{Upload, UploadConfig};

/// Which deadline the host enforces on a kernel step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deadline {
    /// Lookups and non-payload executions (create, promote, inspect, hash): 60 s.
    Lookup,
    /// Steps that carry a chunk: 2 min.
    Payload,
    /// Best-effort cleanup: 5 s.
    Cleanup,
}

impl Deadline {
    /// How long the host waits for the step's reply before reporting `KernelFailure::Timeout`.
    pub const fn duration(self) -> Duration {
        match self {
            Deadline::Lookup => Duration::from_secs(60),
            Deadline::Payload => Duration::from_secs(120),
            Deadline::Cleanup => Duration::from_secs(5),
        }
    }
}

/// How a host's kernel requests travel, which decides how payloads are rendered. The host
/// says which it can do; everything else follows here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelWire {
    /// Jupyter messages (a kernel over ZeroMQ or a server's WebSocket): upload chunks ride as
    /// binary buffers of the execute request, downloads come back as the buffers of a
    /// `display_data` message, and the request itself travels as a user expression.
    #[default]
    Messages,
    /// Source code in, outputs out (an editor's kernel API such as VS Code's Jupyter
    /// extension): chunks are base64 literals in the source and downloads are printed, base64,
    /// in the receipt line.
    CodeOnly,
}

/// One kernel execution the machine asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelStep {
    /// The request as data (what `code` does).
    pub request: KernelRequest,
    /// The Python source to execute (`request.to_python_with_buffers()` or, for
    /// [`KernelWire::CodeOnly`], `request.to_python()`).
    pub code: String,
    /// The binary buffers to send with it, in this order (none for
    /// [`KernelWire::CodeOnly`]).
    pub buffers: Vec<Vec<u8>>,
    /// How the host sends it: with [`KernelWire::Messages`], the first line of `code` (its tag)
    /// as the cell and the whole of `code` as a user expression, with `buffers`; with
    /// [`KernelWire::CodeOnly`], `code` as the cell.
    pub wire: KernelWire,
    /// The deadline the host enforces.
    pub deadline: Deadline,
    /// The phase the step belongs to (for logs and progress).
    pub phase: Phase,
}

/// What the host must do next. Every non-terminal action is answered with exactly one
/// [`Event`] through `handle`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Upload: read exactly `len` bytes of the source file at `offset`. Answer
    /// `Event::HostChunkRead(bytes)` (fewer bytes at end of file are fine: the machine judges), or
    /// `Event::HostFailed(kind)`.
    ReadHostChunk {
        /// Where to read.
        offset: u64,
        /// How much to read: the chunks of one request, at most [`crate::CHUNKS_PER_REQUEST`]
        /// times 256 KiB.
        len: usize,
    },
    /// Check that the original kernel object is still there and idle, then run `step.code` in it
    /// (an `execute_request` with `store_history: false`, `silent: false`) within
    /// `step.deadline`. Answer `Event::KernelReply(output)` with all stdout stream text
    /// concatenated in arrival order and the binary buffers of the step's `display_data`
    /// messages in arrival order (see [`KernelOutput`]), or `Event::KernelFailed(..)`.
    ExecuteKernel(KernelStep),
    /// Download: create `temp_path` exclusively (fail with `AlreadyExists` if it exists) and keep
    /// it open for writing. Answer `Event::HostDone` or `Event::HostFailed(kind)`.
    CreateHostTemp {
        /// `<hostPath>.jupyter-mcp-<nonce>.part`.
        temp_path: String,
    },
    /// Download: write all of `bytes` at `offset` of the temp file (offsets arrive in order,
    /// so appending is fine). A zero-length or short write is a failure (`WriteZero`). Answer
    /// `Event::HostDone` or `Event::HostFailed(kind)`.
    WriteHostChunk {
        /// The temp file.
        temp_path: String,
        /// Where the bytes go.
        offset: u64,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Download: flush, sync and close the temp file, then promote it. With `overwrite`, rename
    /// it over `destination_path`. Without, hard-link it to `destination_path`, which fails with
    /// `AlreadyExists` if the destination exists; the machine then asks for `RemoveHostTemp`.
    /// Answer `Event::HostDone` or `Event::HostFailed(kind)`; a failure must mean the
    /// destination was not touched.
    PromoteHostFile {
        /// The temp file.
        temp_path: String,
        /// `hostPath`.
        destination_path: String,
        /// Rename over an existing destination.
        overwrite: bool,
    },
    /// Download: close (if open) and delete the temp file; a missing file counts as done. Do it
    /// even if the caller has cancelled. Answer `Event::HostDone` or `Event::HostFailed(kind)`.
    RemoveHostTemp {
        /// The temp file.
        temp_path: String,
    },
    /// Terminal: the transfer succeeded and was verified on both sides.
    Done(TransferReceipt),
    /// Terminal: the transfer failed, or its outcome is uncertain.
    Failed(TransferError),
}

impl Action {
    /// Whether this is `Done` or `Failed`.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Action::Done(_) | Action::Failed(_))
    }
}

/// The host's answer to the last non-terminal [`Action`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `ReadHostChunk` produced these bytes.
    HostChunkRead(Vec<u8>),
    /// A host file action succeeded.
    HostDone,
    /// A host file action failed; the kind only, so no OS text leaks into messages.
    HostFailed(ErrorKind),
    /// `ExecuteKernel` produced this output.
    KernelReply(KernelOutput),
    /// `ExecuteKernel` did not produce a reply.
    KernelFailed(crate::error::KernelFailure),
    /// The caller cancelled, and the host did **not** perform the action. (A host that abandons
    /// a kernel execution already sent answers `KernelFailed(Timeout)` instead.)
    Cancelled,
}

/// What one kernel step printed and sent back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelOutput {
    /// All stdout stream text, concatenated in arrival order; the receipt line is in it.
    pub stdout: String,
    /// The binary buffers of the step's `display_data` messages, in arrival order. A download
    /// step whose request allows buffers (`DownloadConfig::reply_buffers`) sends its chunks
    /// here, and its receipt names them by index; other steps send none.
    pub buffers: Vec<Vec<u8>>,
}

impl From<String> for KernelOutput {
    /// Stdout text without buffers.
    fn from(stdout: String) -> Self {
        KernelOutput {
            stdout,
            buffers: Vec::new(),
        }
    }
}

/// The driving interface shared by [`Upload`] and [`Download`], so a host writes one loop:
///
/// ```text
/// loop {
///     match machine.next_action(&mut budget) {
///         Action::Done(receipt) => return Ok(receipt),
///         Action::Failed(error) => return Err(error),
///         action => machine.handle(perform(action)),
///     }
/// }
/// ```
pub trait TransferMachine {
    /// The next action. `budget` is the kernel object's chunk budget; chunk steps are charged
    /// to it as they are handed out. Terminal actions repeat once reached.
    fn next_action(&mut self, budget: &mut KernelBudget) -> Action;

    /// Feeds the host's answer to the last action.
    fn handle(&mut self, event: Event);
}

/// What one machine decides between the host's calls. [`Driver`] holds the state between them
/// and answers [`TransferMachine`] for every machine the same way.
pub(crate) trait Steps {
    /// A step decided but not yet handed out. The default is the first step.
    type Next: Default;
    /// A step handed out, waiting for the host's event.
    type Awaiting;

    /// Turns a decided step into an action for the host, or into another step decided at once
    /// (a refusal found before anything was handed out).
    fn emit(&mut self, next: Self::Next, budget: &mut KernelBudget) -> Emitted<Self>;

    /// The host's answer to the step it was handed.
    fn on_event(&mut self, awaiting: Self::Awaiting, event: Event) -> Self::Next;

    /// The host answered with no action outstanding (a host bug).
    fn on_event_without_action(&mut self, next: Self::Next) -> Self::Next;

    /// The host asked for the next action without answering the last one (a host bug): the
    /// outstanding step's outcome is unknown.
    fn on_unanswered(&mut self, awaiting: Self::Awaiting) -> Self::Next;
}

/// What [`Steps::emit`] made of a step.
pub(crate) enum Emitted<S: Steps + ?Sized> {
    /// Hand this action out and wait for the host's event.
    Wait(Action, S::Awaiting),
    /// Nothing for the host yet: emit this step instead.
    Then(S::Next),
    /// The transfer is over: this terminal action repeats from now on.
    Finished(Action),
}

/// The driving loop's state around one machine's [`Steps`].
#[derive(Debug)]
pub(crate) struct Driver<S: Steps> {
    pub(crate) steps: S,
    state: State<S::Next, S::Awaiting>,
}

#[derive(Debug)]
enum State<Next, Awaiting> {
    Next(Next),
    Awaiting(Awaiting),
    Finished(Action),
}

impl<S: Steps> Driver<S> {
    pub(crate) fn new(steps: S) -> Driver<S> {
        Driver {
            steps,
            state: State::Next(S::Next::default()),
        }
    }

    pub(crate) fn next_action(&mut self, budget: &mut KernelBudget) -> Action {
        let mut next = match std::mem::replace(&mut self.state, State::Next(S::Next::default())) {
            State::Next(next) => next,
            State::Awaiting(awaiting) => self.steps.on_unanswered(awaiting),
            State::Finished(action) => {
                self.state = State::Finished(action.clone());
                return action;
            }
        };
        loop {
            match self.steps.emit(next, budget) {
                Emitted::Wait(action, awaiting) => {
                    self.state = State::Awaiting(awaiting);
                    return action;
                }
                Emitted::Then(then) => next = then,
                Emitted::Finished(action) => {
                    self.state = State::Finished(action.clone());
                    return action;
                }
            }
        }
    }

    pub(crate) fn handle(&mut self, event: Event) {
        self.state = match std::mem::replace(&mut self.state, State::Next(S::Next::default())) {
            State::Awaiting(awaiting) => State::Next(self.steps.on_event(awaiting, event)),
            State::Next(next) => State::Next(self.steps.on_event_without_action(next)),
            finished @ State::Finished(_) => finished,
        };
    }
}

/// How a failing transfer will end once cleanup (if any) is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Nothing was committed.
    BeforeCommit(Phase),
    /// Promotion was requested and not confirmed.
    Uncertain,
    /// The destination was committed; only the temp file's removal is open.
    Committed(TransferReceipt),
}

/// A failure waiting for cleanup to finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) outcome: Outcome,
    pub(crate) cause: Cause,
}

impl Pending {
    pub(crate) fn before_commit(phase: Phase, cause: Cause) -> Pending {
        Pending {
            outcome: Outcome::BeforeCommit(phase),
            cause,
        }
    }

    pub(crate) fn uncertain(cause: Cause) -> Pending {
        Pending {
            outcome: Outcome::Uncertain,
            cause,
        }
    }
}

/// What both machines know about their transfer.
#[derive(Debug, Clone)]
pub(crate) struct Common {
    pub(crate) direction: Direction,
    pub(crate) host_path: String,
    pub(crate) kernel_path: KernelPath,
    pub(crate) nonce: Nonce,
    pub(crate) overwrite: bool,
    pub(crate) max_bytes: u64,
    pub(crate) chunk_size: u64,
    pub(crate) chunks_per_request: u64,
    pub(crate) wire: KernelWire,
    pub(crate) sequence: u32,
    pub(crate) hasher: Sha256,
}

impl Common {
    /// Hands out a kernel step with the next sequence number.
    pub(crate) fn kernel_step(
        &mut self,
        operation: KernelOperation,
        deadline: Deadline,
        phase: Phase,
    ) -> Action {
        self.sequence += 1;
        let request = KernelRequest {
            nonce: self.nonce.clone(),
            sequence: self.sequence,
            operation,
        };
        let (code, buffers) = match self.wire {
            KernelWire::Messages => request.to_python_with_buffers(),
            KernelWire::CodeOnly => (request.to_python(), Vec::new()),
        };
        Action::ExecuteKernel(KernelStep {
            request,
            code,
            buffers,
            wire: self.wire,
            deadline,
            phase,
        })
    }

    /// The most bytes one chunk step carries: `chunks_per_request` chunks.
    pub(crate) fn batch_len(&self) -> u64 {
        self.chunk_size * self.chunks_per_request
    }

    /// The lowercase hex SHA-256 of the bytes hashed so far.
    pub(crate) fn sha256_hex(&self) -> String {
        self.hasher
            .clone()
            .finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    pub(crate) fn receipt(&self, bytes: u64, sha256: String) -> TransferReceipt {
        TransferReceipt {
            direction: self.direction,
            bytes,
            sha256,
            host_path: self.host_path.clone(),
            kernel_path: self.kernel_path.as_str().to_owned(),
        }
    }

    /// The terminal action for a failure, once cleanup is over.
    pub(crate) fn conclude(&self, pending: Pending, leftover: Option<Leftover>) -> Action {
        let destination = match self.direction {
            Direction::Upload => self.kernel_path.as_str().to_owned(),
            Direction::Download => self.host_path.clone(),
        };
        let error = match pending.outcome {
            Outcome::BeforeCommit(phase) => TransferError::Failed {
                direction: self.direction,
                phase,
                cause: pending.cause,
                leftover,
            },
            Outcome::Uncertain => TransferError::Uncertain {
                direction: self.direction,
                destination,
                cause: pending.cause,
                leftover,
            },
            Outcome::Committed(receipt) => match leftover {
                None => return Action::Done(receipt),
                Some(leftover) => TransferError::CommittedCleanupUnconfirmed { receipt, leftover },
            },
        };
        Action::Failed(error)
    }
}

/// Validates the arguments both configs share.
pub(crate) fn validate_common(
    direction: Direction,
    host_path: &str,
    kernel_path: &str,
    nonce: &str,
    overwrite: bool,
    max_bytes: u64,
    chunking: Chunking,
) -> Result<Common, TransferError> {
    let Chunking {
        chunk_size,
        chunks_per_request,
        wire,
    } = chunking;
    if host_path.is_empty() {
        return Err(TransferError::InvalidArgument {
            argument: "hostPath",
            reason: "it is empty".into(),
        });
    }
    let kernel_path = KernelPath::parse(kernel_path)?;
    let nonce = Nonce::parse(nonce)?;
    if max_bytes == 0 || max_bytes > (1 << 53) - 1 {
        return Err(TransferError::InvalidArgument {
            argument: "maxBytes",
            reason: "it must be a positive safe integer".into(),
        });
    }
    if chunk_size == 0 || chunk_size > crate::CHUNK_SIZE {
        return Err(TransferError::InvalidArgument {
            argument: "chunkSize",
            reason: format!("it must be between 1 and {}", crate::CHUNK_SIZE),
        });
    }
    if chunks_per_request == 0 || chunks_per_request > crate::CHUNKS_PER_REQUEST {
        return Err(TransferError::InvalidArgument {
            argument: "chunksPerRequest",
            reason: format!("it must be between 1 and {}", crate::CHUNKS_PER_REQUEST),
        });
    }
    Ok(Common {
        direction,
        host_path: host_path.to_owned(),
        kernel_path,
        nonce,
        overwrite,
        max_bytes,
        chunk_size: chunk_size as u64,
        chunks_per_request: chunks_per_request as u64,
        wire,
        sequence: 0,
        hasher: Sha256::new(),
    })
}

/// How a transfer cuts its bytes: chunk size and chunks per kernel request, as configured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Chunking {
    pub(crate) chunk_size: usize,
    pub(crate) chunks_per_request: usize,
    pub(crate) wire: KernelWire,
}

/// Drives an upload and a download answering every kernel step with `reply` (for fuzzing: the
/// machines must end, without panicking, whatever the kernel says).
pub(crate) fn drive_with_constant_reply(reply: &KernelOutput, nonce: &Nonce) {
    let mut upload_config = UploadConfig::new("/host/file", "/kernel/file", nonce.as_str(), 5);
    upload_config.chunk_size = 2;
    upload_config.chunks_per_request = 2;
    let download_config = DownloadConfig {
        chunk_size: 2,
        chunks_per_request: 2,
        ..DownloadConfig::new("/host/file", "/kernel/file", nonce.as_str())
    };
    if let Ok(mut upload) = Upload::new(upload_config) {
        drive(&mut upload, reply);
    }
    if let Ok(mut download) = Download::new(download_config) {
        drive(&mut download, reply);
    }
}

fn drive(machine: &mut impl TransferMachine, reply: &KernelOutput) {
    let mut budget = KernelBudget::new();
    for _ in 0..64 {
        let event = match machine.next_action(&mut budget) {
            Action::Done(_) | Action::Failed(_) => return,
            Action::ReadHostChunk { len, .. } => Event::HostChunkRead(vec![b'x'; len]),
            Action::ExecuteKernel(_) => Event::KernelReply(reply.clone()),
            Action::CreateHostTemp { .. }
            | Action::WriteHostChunk { .. }
            | Action::PromoteHostFile { .. }
            | Action::RemoveHostTemp { .. } => Event::HostDone,
        };
        machine.handle(event);
    }
}
