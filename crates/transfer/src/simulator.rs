//! A simulated kernel and host for testing the machines.
//!
//! The kernel executes each request's structured meaning ([`KernelOperation`]) against an
//! in-memory filesystem and replies in the exact receipt format, written here independently of
//! the parser. Faults can be injected at any step: altered replies, kernel failures, host
//! failures and cancellations. The property tests check the machines against a simple model of
//! what may have happened to the destination and the temp files.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read as _};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::machine::drive_with_constant_reply;
use crate::*;

const SOURCE_HOST: &str = "/host/source.bin";
const DEST_HOST: &str = "/host/dest.bin";
const KERNEL_FILE: &str = "/content/d\u{e4}ta \"q\".bin";
const NONCE: &str = "6f1c2a9e-5b0d-4c1e-9a53-0d8f2b7c4e11";

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Deterministic test bytes: random-looking, or a repeating text that compresses well.
fn test_bytes(len: usize, seed: u64, compressible: bool) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|index| {
            if compressible {
                b"line of a CSV file,42,3.14\n"[index % 27]
            } else {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            }
        })
        .collect()
}

/// What the simulated kernel does with a request.
#[derive(Debug, Default)]
struct SimKernel {
    files: BTreeMap<String, Vec<u8>>,
    /// Every request that ran, in order.
    executed: Vec<KernelOperation>,
    /// Set once the kernel died or restarted: nothing may be sent afterwards.
    gone: bool,
}

impl SimKernel {
    fn execute(&mut self, request: &KernelRequest) -> KernelOutput {
        assert!(
            !self.gone,
            "code was sent to a kernel that died or restarted: {:?}",
            request.operation
        );
        self.executed.push(request.operation.clone());
        let mut buffers = Vec::new();
        let result = self
            .run(&request.operation, &mut buffers)
            .unwrap_or_else(|class| json!({"kind": "error", "type": class}));
        KernelOutput {
            stdout: format!("{RECEIPT_MARKER}{}:{result}\n", request.nonce),
            buffers,
        }
    }

    /// Performs one operation; a download step allowed to sends its chunks into `buffers`.
    fn run(
        &mut self,
        operation: &KernelOperation,
        buffers: &mut Vec<Vec<u8>>,
    ) -> Result<Value, &'static str> {
        match operation {
            KernelOperation::CreateTemp { temp_path } => {
                if self.files.contains_key(temp_path) {
                    return Err("FileExistsError");
                }
                self.files.insert(temp_path.clone(), Vec::new());
                Ok(json!({"kind": "init"}))
            }
            KernelOperation::AppendChunks {
                temp_path,
                offset,
                chunks,
            } => {
                let mut data = Vec::new();
                for chunk in chunks {
                    let decoded = match chunk.encoding {
                        ChunkEncoding::Raw => chunk.encoded.clone(),
                        ChunkEncoding::Zlib => {
                            let mut decoded = Vec::new();
                            flate2::read::ZlibDecoder::new(&chunk.encoded[..])
                                .read_to_end(&mut decoded)
                                .map_err(|_| "error")?;
                            decoded
                        }
                    };
                    if decoded.len() as u64 != chunk.raw_len {
                        return Err("TransferSizeMismatch");
                    }
                    data.extend_from_slice(&decoded);
                }
                let file = self.files.get_mut(temp_path).ok_or("FileNotFoundError")?;
                if file.len() as u64 != *offset {
                    return Err("TransferOffsetMismatch");
                }
                file.extend_from_slice(&data);
                Ok(json!({
                    "kind": "chunks",
                    "offset": offset,
                    "bytes": data.len(),
                    "count": chunks.len(),
                }))
            }
            KernelOperation::PromoteTemp {
                temp_path,
                destination_path,
                bytes,
                sha256,
                overwrite,
            } => {
                let file = self.files.get(temp_path).ok_or("FileNotFoundError")?;
                if file.len() as u64 != *bytes {
                    return Err("TransferSizeMismatch");
                }
                if sha256_hex(file) != *sha256 {
                    return Err("TransferHashMismatch");
                }
                if !overwrite && self.files.contains_key(destination_path) {
                    return Err("FileExistsError");
                }
                let file = self.files.remove(temp_path).unwrap_or_default();
                let digest = sha256_hex(&file);
                let size = file.len();
                self.files.insert(destination_path.clone(), file);
                Ok(json!({"kind": "done", "bytes": size, "sha256": digest}))
            }
            KernelOperation::RemoveTemp { temp_path } => {
                Ok(json!({"kind": "clean", "removed": self.files.remove(temp_path).is_some()}))
            }
            KernelOperation::InspectSource { source_path } => {
                let file = self.files.get(source_path).ok_or("FileNotFoundError")?;
                Ok(json!({"kind": "meta", "bytes": file.len()}))
            }
            KernelOperation::ReadChunks {
                source_path,
                offset,
                len,
                chunk_size,
                reply_buffers,
            } => {
                let file = self.files.get(source_path).ok_or("FileNotFoundError")?;
                let start = (*offset as usize).min(file.len());
                let end = (start + *len as usize).min(file.len());
                let data = &file[start..end];
                if data.len() as u64 != *len {
                    return Err("TransferShortRead");
                }
                let chunks: Vec<Value> = data
                    .chunks(*chunk_size as usize)
                    .map(|chunk| {
                        let packed = EncodedChunk::encode(chunk);
                        let mut spec = json!({
                            "bytes": chunk.len(),
                            "encoding": packed.encoding.as_str(),
                        });
                        if *reply_buffers {
                            spec["buffer"] = json!(buffers.len());
                            buffers.push(packed.encoded);
                        } else {
                            spec["data"] = json!(BASE64.encode(&packed.encoded));
                        }
                        spec
                    })
                    .collect();
                Ok(json!({"kind": "chunks", "offset": offset, "bytes": len, "chunks": chunks}))
            }
            KernelOperation::HashSource { source_path } => {
                let file = self.files.get(source_path).ok_or("FileNotFoundError")?;
                Ok(json!({"kind": "done", "bytes": file.len(), "sha256": sha256_hex(file)}))
            }
        }
    }
}

/// The host's files.
#[derive(Debug, Default)]
struct SimHost {
    files: BTreeMap<String, Vec<u8>>,
}

impl SimHost {
    fn perform(&mut self, action: &Action) -> Result<Event, ErrorKind> {
        match action {
            Action::ReadHostChunk { offset, len } => {
                let file = self.files.get(SOURCE_HOST).ok_or(ErrorKind::NotFound)?;
                let start = (*offset as usize).min(file.len());
                let end = (start + len).min(file.len());
                Ok(Event::HostChunkRead(file[start..end].to_vec()))
            }
            Action::CreateHostTemp { temp_path } => {
                if self.files.contains_key(temp_path) {
                    return Err(ErrorKind::AlreadyExists);
                }
                self.files.insert(temp_path.clone(), Vec::new());
                Ok(Event::HostDone)
            }
            Action::WriteHostChunk {
                temp_path,
                offset,
                bytes,
            } => {
                let file = self.files.get_mut(temp_path).ok_or(ErrorKind::NotFound)?;
                if file.len() as u64 != *offset {
                    return Err(ErrorKind::InvalidInput);
                }
                file.extend_from_slice(bytes);
                Ok(Event::HostDone)
            }
            Action::PromoteHostFile {
                temp_path,
                destination_path,
                overwrite,
            } => {
                if !overwrite && self.files.contains_key(destination_path) {
                    return Err(ErrorKind::AlreadyExists);
                }
                let file = self
                    .files
                    .get(temp_path)
                    .ok_or(ErrorKind::NotFound)?
                    .clone();
                if *overwrite {
                    self.files.remove(temp_path);
                }
                self.files.insert(destination_path.clone(), file);
                Ok(Event::HostDone)
            }
            Action::RemoveHostTemp { temp_path } => {
                self.files.remove(temp_path);
                Ok(Event::HostDone)
            }
            Action::ExecuteKernel(_) | Action::Done(_) | Action::Failed(_) => {
                unreachable!("not a host action")
            }
        }
    }
}

/// How a reply text is damaged.
#[derive(Debug, Clone, Copy)]
enum ReplyFault {
    Missing,
    WrongNonce,
    /// Cut the receipt line somewhere inside (the fraction picks where).
    Truncate(f64),
    Duplicate,
    /// Add one to the first numeric field, or change the kind when there is none.
    CorruptNumber,
    /// Change one character of the last download chunk's data, or the kind otherwise.
    CorruptData,
    /// Leave out the last chunk of a download batch, or count one chunk fewer in an upload
    /// receipt; change the kind otherwise.
    DropChunk,
}

/// One injected fault (or none).
#[derive(Debug, Clone)]
enum Fault {
    None,
    /// The reply to the `step`-th kernel request (counted from 0, modulo the step count) is
    /// damaged after the kernel ran it.
    Reply {
        step: usize,
        fault: ReplyFault,
    },
    /// The `step`-th kernel request fails; `ran` says whether the kernel executed it first.
    Kernel {
        step: usize,
        failure: KernelFailure,
        ran: bool,
    },
    /// The `action`-th host action fails.
    Host {
        action: usize,
        kind: ErrorKind,
    },
    /// The caller cancels before the `action`-th action of any kind.
    Cancel {
        action: usize,
    },
}

impl Fault {
    /// Whether the fault must prevent success (every injected fault does).
    fn is_harmful(&self) -> bool {
        !matches!(self, Fault::None)
    }
}

#[derive(Debug)]
struct Run {
    outcome: Action,
    kernel: SimKernel,
    host: SimHost,
    budget: KernelBudget,
    kernel_steps: usize,
    /// Whether the injected fault struck a temp-file removal (which then leaves the file).
    fault_hit_cleanup: bool,
}

/// Whether `action` removes a transfer's temp file (cleanup or the unlink after a link).
fn removes_temp(action: &Action) -> bool {
    match action {
        Action::RemoveHostTemp { .. } => true,
        Action::ExecuteKernel(step) => {
            matches!(step.request.operation, KernelOperation::RemoveTemp { .. })
        }
        _ => false,
    }
}

fn damage(reply: KernelOutput, fault: ReplyFault, nonce: &str) -> KernelOutput {
    let KernelOutput {
        stdout,
        mut buffers,
    } = reply;
    // Corrupting a chunk that came as a buffer corrupts the buffer; the rest is in the text.
    if matches!(fault, ReplyFault::CorruptData)
        && let Some(last) = buffers.iter_mut().rev().find(|buffer| !buffer.is_empty())
    {
        last[0] ^= 0x01;
        return KernelOutput { stdout, buffers };
    }
    KernelOutput {
        stdout: damage_text(&stdout, fault, nonce),
        buffers,
    }
}

fn damage_text(reply: &str, fault: ReplyFault, nonce: &str) -> String {
    match fault {
        ReplyFault::Missing => String::new(),
        ReplyFault::WrongNonce => reply.replace(nonce, "00000000-0000-4000-8000-000000000000"),
        ReplyFault::Truncate(fraction) => {
            let line = reply.trim_end_matches('\n');
            let cut = ((line.len() as f64) * fraction) as usize;
            line[..cut.min(line.len() - 1)].to_owned()
        }
        ReplyFault::Duplicate => format!("{reply}{reply}"),
        ReplyFault::CorruptNumber | ReplyFault::CorruptData | ReplyFault::DropChunk => {
            let (prefix, json) = reply.trim_end().split_at(reply.find('{').unwrap_or(0));
            let mut object: serde_json::Map<String, Value> =
                serde_json::from_str(json).unwrap_or_default();
            let corrupted = match fault {
                ReplyFault::CorruptData => corrupt_last_chunk_data(&mut object),
                ReplyFault::DropChunk => drop_last_chunk(&mut object),
                _ => corrupt_first_number(&mut object),
            };
            if !corrupted {
                object.insert("kind".into(), json!("other"));
            }
            format!("{prefix}{}\n", Value::Object(object))
        }
    }
}

/// Adds one to `offset` or `bytes`; false if the receipt has neither.
fn corrupt_first_number(object: &mut serde_json::Map<String, Value>) -> bool {
    let Some(field) = ["offset", "bytes"]
        .into_iter()
        .find(|field| object.contains_key(*field))
    else {
        return false;
    };
    let value = object[field].as_u64().unwrap_or(0);
    object.insert(field.into(), json!(value + 1));
    true
}

/// Changes the first character of the last chunk's data; false if there is no such data.
fn corrupt_last_chunk_data(object: &mut serde_json::Map<String, Value>) -> bool {
    let Some(Value::Object(chunk)) = object
        .get_mut("chunks")
        .and_then(Value::as_array_mut)
        .and_then(|chunks| chunks.last_mut())
    else {
        return corrupt_first_number(object);
    };
    let Some(Value::String(data)) = chunk.get_mut("data") else {
        return false;
    };
    if data.is_empty() {
        return false;
    }
    let replacement = if data.starts_with('A') { "B" } else { "A" };
    data.replace_range(..1, replacement);
    true
}

/// Drops the last chunk of a download batch, or counts one chunk fewer in an upload receipt.
fn drop_last_chunk(object: &mut serde_json::Map<String, Value>) -> bool {
    if let Some(chunks) = object.get_mut("chunks").and_then(Value::as_array_mut) {
        return chunks.pop().is_some();
    }
    match object.get("count").and_then(Value::as_u64) {
        Some(count) if count > 0 => {
            object.insert("count".into(), json!(count - 1));
            true
        }
        _ => false,
    }
}

/// Runs a machine to the end against the simulated kernel and host.
fn run(
    mut machine: impl TransferMachine,
    mut kernel: SimKernel,
    mut host: SimHost,
    mut budget: KernelBudget,
    fault: &Fault,
) -> Run {
    let mut kernel_steps = 0;
    let mut host_actions = 0;
    let mut fault_hit_cleanup = false;
    for action_index in 0.. {
        assert!(action_index < 10_000, "the machine does not terminate");
        let action = machine.next_action(&mut budget);
        assert!(budget.used() <= budget.limit());
        if action.is_terminal() {
            // Terminal actions repeat.
            assert_eq!(machine.next_action(&mut budget), action);
            return Run {
                outcome: action,
                kernel,
                host,
                budget,
                kernel_steps,
                fault_hit_cleanup,
            };
        }
        if let Fault::Cancel {
            action: cancelled_index,
        } = fault
            && *cancelled_index == action_index
        {
            fault_hit_cleanup = removes_temp(&action);
            machine.handle(Event::Cancelled);
            continue;
        }
        let event = match &action {
            Action::ExecuteKernel(step) => {
                let rendered = match step.wire {
                    KernelWire::Messages => step.request.to_python_with_buffers(),
                    KernelWire::CodeOnly => (step.request.to_python(), Vec::new()),
                };
                assert_eq!((step.code.clone(), step.buffers.clone()), rendered);
                let step_index = kernel_steps;
                kernel_steps += 1;
                match fault {
                    Fault::Kernel { step, failure, ran } if *step == step_index => {
                        fault_hit_cleanup = removes_temp(&action);
                        if *ran && *failure != KernelFailure::Busy {
                            kernel.execute(&step_request(&action));
                        }
                        if !failure.kernel_still_usable() {
                            kernel.gone = true;
                        }
                        Event::KernelFailed(failure.clone())
                    }
                    Fault::Reply {
                        step: faulty_step,
                        fault,
                    } if *faulty_step == step_index => {
                        let reply = kernel.execute(&step.request);
                        Event::KernelReply(damage(reply, *fault, NONCE))
                    }
                    _ => {
                        // Benign noise around the receipt, including another transfer's receipt.
                        let mut reply = kernel.execute(&step.request);
                        let other = format!(
                            "{RECEIPT_MARKER}11111111-2222-3333-4444-555555555555:{{\"kind\":\"init\"}}\n"
                        );
                        reply.stdout = format!("progress\n{other}{}done\r\n", reply.stdout);
                        Event::KernelReply(reply)
                    }
                }
            }
            host_action => {
                let index = host_actions;
                host_actions += 1;
                match fault {
                    Fault::Host { action, kind } if *action == index => {
                        fault_hit_cleanup = removes_temp(host_action);
                        Event::HostFailed(*kind)
                    }
                    _ => host.perform(host_action).unwrap_or_else(Event::HostFailed),
                }
            }
        };
        machine.handle(event);
    }
    unreachable!()
}

fn step_request(action: &Action) -> KernelRequest {
    match action {
        Action::ExecuteKernel(step) => step.request.clone(),
        _ => unreachable!(),
    }
}

fn temp_files(files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    files
        .keys()
        .filter(|name| name.ends_with(".part"))
        .cloned()
        .collect()
}

/// The leftover an outcome reports, if any.
fn reported_leftover(outcome: &Action) -> Option<Leftover> {
    match outcome {
        Action::Failed(
            TransferError::Failed { leftover, .. } | TransferError::Uncertain { leftover, .. },
        ) => leftover.clone(),
        Action::Failed(TransferError::CommittedCleanupUnconfirmed { leftover, .. }) => {
            Some(leftover.clone())
        }
        _ => None,
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    data: Vec<u8>,
    chunk_size: usize,
    chunks_per_request: usize,
    overwrite: bool,
    existing_destination: Option<Vec<u8>>,
    max_bytes: u64,
    /// How requests travel: with messages, uploads send buffers and downloads get them back.
    wire: KernelWire,
    /// Downloads: chunks per request after the first buffered reply.
    buffered_chunks_per_request: usize,
    fault: Fault,
}

fn scenario(max_len: usize) -> impl Strategy<Value = Scenario> {
    let data = (0..=max_len, any::<u64>(), any::<bool>())
        .prop_map(|(len, seed, compressible)| test_bytes(len, seed, compressible));
    let chunk_size = prop_oneof![Just(CHUNK_SIZE), 1usize..=CHUNK_SIZE];
    let chunks_per_request = prop_oneof![Just(CHUNKS_PER_REQUEST), 1usize..=CHUNKS_PER_REQUEST];
    let buffered_chunks_per_request =
        prop_oneof![Just(CHUNKS_PER_REQUEST), 1usize..=CHUNKS_PER_REQUEST];
    let existing = proptest::option::weighted(0.3, proptest::collection::vec(any::<u8>(), 0..64));
    let reply_fault = prop_oneof![
        Just(ReplyFault::Missing),
        Just(ReplyFault::WrongNonce),
        (0.0f64..1.0).prop_map(ReplyFault::Truncate),
        Just(ReplyFault::Duplicate),
        Just(ReplyFault::CorruptNumber),
        Just(ReplyFault::CorruptData),
        Just(ReplyFault::DropChunk),
    ];
    let kernel_failure = prop_oneof![
        Just(KernelFailure::Busy),
        Just(KernelFailure::Timeout),
        Just(KernelFailure::Died),
        Just(KernelFailure::Restarted),
        Just(KernelFailure::Exception {
            ename: "KeyboardInterrupt".into()
        }),
    ];
    let host_error = prop_oneof![
        Just(ErrorKind::PermissionDenied),
        Just(ErrorKind::WriteZero),
        Just(ErrorKind::Other)
    ];
    let fault = prop_oneof![
        2 => Just(Fault::None),
        3 => (any::<usize>(), reply_fault).prop_map(|(step, fault)| Fault::Reply { step, fault }),
        2 => (any::<usize>(), kernel_failure, any::<bool>()).prop_map(|(step, failure, ran)| Fault::Kernel { step, failure, ran }),
        1 => (any::<usize>(), host_error).prop_map(|(action, kind)| Fault::Host { action, kind }),
        1 => any::<usize>().prop_map(|action| Fault::Cancel { action }),
    ];
    (
        data,
        chunk_size,
        (chunks_per_request, buffered_chunks_per_request),
        (any::<bool>(), any::<bool>()),
        existing,
        fault,
    )
        .prop_map(
            |(
                data,
                chunk_size,
                (chunks_per_request, buffered_chunks_per_request),
                (overwrite, messages),
                existing_destination,
                fault,
            )| {
                // Keep the number of steps small enough for quick runs.
                let chunk_size = chunk_size.max(data.len() / 48).clamp(1, CHUNK_SIZE);
                Scenario {
                    data,
                    chunk_size,
                    chunks_per_request,
                    overwrite,
                    existing_destination,
                    max_bytes: DEFAULT_MAX_BYTES,
                    wire: if messages {
                        KernelWire::Messages
                    } else {
                        KernelWire::CodeOnly
                    },
                    buffered_chunks_per_request,
                    fault,
                }
            },
        )
}

/// Maps a fault's free index onto the steps a fault-free run takes.
fn pin_fault(fault: &Fault, kernel_steps: usize, host_actions: usize, actions: usize) -> Fault {
    match fault.clone() {
        Fault::Reply { step, fault } => Fault::Reply {
            step: step % kernel_steps,
            fault,
        },
        Fault::Kernel { step, failure, ran } => Fault::Kernel {
            step: step % kernel_steps,
            failure,
            ran,
        },
        Fault::Host { action, kind } if host_actions > 0 => Fault::Host {
            action: action % host_actions,
            kind,
        },
        Fault::Host { .. } => Fault::None,
        Fault::Cancel { action } => Fault::Cancel {
            action: action % actions,
        },
        Fault::None => Fault::None,
    }
}

fn upload_world(scenario: &Scenario) -> (Upload, SimKernel, SimHost) {
    let config = UploadConfig {
        overwrite: scenario.overwrite,
        chunk_size: scenario.chunk_size,
        chunks_per_request: scenario.chunks_per_request,
        max_bytes: scenario.max_bytes,
        wire: scenario.wire,
        ..UploadConfig::new(SOURCE_HOST, KERNEL_FILE, NONCE, scenario.data.len() as u64)
    };
    let mut kernel = SimKernel::default();
    if let Some(existing) = &scenario.existing_destination {
        kernel.files.insert(KERNEL_FILE.into(), existing.clone());
    }
    let mut host = SimHost::default();
    host.files.insert(SOURCE_HOST.into(), scenario.data.clone());
    (Upload::new(config).unwrap(), kernel, host)
}

fn download_world(scenario: &Scenario) -> (Download, SimKernel, SimHost) {
    let config = DownloadConfig {
        overwrite: scenario.overwrite,
        chunk_size: scenario.chunk_size,
        chunks_per_request: scenario.chunks_per_request,
        max_bytes: scenario.max_bytes,
        wire: scenario.wire,
        buffered_chunks_per_request: scenario.buffered_chunks_per_request,
        ..DownloadConfig::new(DEST_HOST, KERNEL_FILE, NONCE)
    };
    let mut kernel = SimKernel::default();
    kernel
        .files
        .insert(KERNEL_FILE.into(), scenario.data.clone());
    let mut host = SimHost::default();
    if let Some(existing) = &scenario.existing_destination {
        host.files.insert(DEST_HOST.into(), existing.clone());
    }
    (Download::new(config).unwrap(), kernel, host)
}

/// Counts the steps of a fault-free run, so faults can be pinned to steps that happen:
/// `kernel_steps` besides one per batch of chunks, one host action per batch and `host_fixed`
/// others.
fn counts(kernel_steps: usize, batches: usize, host_fixed: usize) -> (usize, usize, usize) {
    let host = batches + host_fixed;
    (kernel_steps + batches, host, kernel_steps + batches + host)
}

/// The batches of a fault-free upload.
fn upload_batches(scenario: &Scenario) -> usize {
    scenario
        .data
        .len()
        .div_ceil(scenario.chunk_size * scenario.chunks_per_request)
}

/// The batches of a fault-free download: the first of `chunks_per_request` chunks, the rest of
/// `buffered_chunks_per_request` when the kernel sends buffers.
fn download_batches(scenario: &Scenario) -> usize {
    let len = scenario.data.len();
    let first = scenario.chunk_size * scenario.chunks_per_request;
    if !(scenario.wire == KernelWire::Messages) || len <= first {
        return len.div_ceil(first);
    }
    1 + (len - first).div_ceil(scenario.chunk_size * scenario.buffered_chunks_per_request)
}

/// The model: what the destination and temp files may look like after an outcome.
fn check_outcome(
    run: &Run,
    scenario: &Scenario,
    fault: &Fault,
    destination: Option<&Vec<u8>>,
    temps: Vec<String>,
) -> Result<(), TestCaseError> {
    let data = &scenario.data;
    let before = scenario.existing_destination.as_ref();
    let refused_existing = before.is_some() && !scenario.overwrite;
    match &run.outcome {
        Action::Done(receipt) => {
            prop_assert!(
                !fault.is_harmful(),
                "a harmful fault went unnoticed: {fault:?}"
            );
            prop_assert!(
                !refused_existing,
                "an existing destination was replaced without overwrite"
            );
            prop_assert_eq!(destination, Some(data));
            prop_assert_eq!(receipt.bytes, data.len() as u64);
            prop_assert_eq!(&receipt.sha256, &sha256_hex(data));
            prop_assert_eq!(run.budget.used(), data.len() as u64);
            prop_assert!(temps.is_empty(), "temp files left after success: {temps:?}");
        }
        Action::Failed(TransferError::Failed { cause, .. }) => {
            prop_assert_eq!(
                destination,
                before,
                "a failure before commit touched the destination"
            );
            if matches!(fault, Fault::None) {
                prop_assert!(refused_existing);
                prop_assert_eq!(cause, &Cause::DestinationExists);
            }
        }
        Action::Failed(TransferError::Uncertain { .. }) => {
            prop_assert!(fault.is_harmful());
            prop_assert!(destination == before || destination == Some(data));
        }
        Action::Failed(TransferError::CommittedCleanupUnconfirmed { receipt, .. }) => {
            prop_assert!(fault.is_harmful());
            prop_assert_eq!(destination, Some(data));
            prop_assert_eq!(&receipt.sha256, &sha256_hex(data));
        }
        Action::Failed(TransferError::InvalidArgument { .. })
        | Action::ReadHostChunk { .. }
        | Action::ExecuteKernel(_)
        | Action::CreateHostTemp { .. }
        | Action::WriteHostChunk { .. }
        | Action::PromoteHostFile { .. }
        | Action::RemoveHostTemp { .. } => {
            prop_assert!(false, "unexpected outcome {:?}", run.outcome)
        }
    }
    match reported_leftover(&run.outcome) {
        None => prop_assert!(
            temps.is_empty(),
            "unreported temp files: {temps:?} after {:?}",
            run.outcome
        ),
        Some(leftover) => {
            prop_assert!(temps.iter().all(|temp| *temp == leftover.path));
            // In the simulator cleanup works whenever it is attempted, so a leftover is reported
            // only when cleanup was impossible (the kernel is gone) or was itself the fault.
            let committed = matches!(
                run.outcome,
                Action::Failed(TransferError::CommittedCleanupUnconfirmed { .. })
            );
            prop_assert!(
                run.kernel.gone || committed || run.fault_hit_cleanup,
                "cleanup was skipped: {:?}",
                run.outcome
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn uploads_round_trip_or_fail_safely(scenario in scenario(700_000)) {
        let (kernel_steps, host_actions, actions) = counts(2, upload_batches(&scenario), 0);
        let fault = pin_fault(&scenario.fault, kernel_steps, host_actions, actions);
        let (upload, kernel, host) = upload_world(&scenario);
        let temp = upload.temp_path().to_owned();
        let run = run(upload, kernel, host, KernelBudget::new(), &fault);
        let temps = temp_files(&run.kernel.files);
        prop_assert!(temps.iter().all(|name| *name == temp));
        check_outcome(&run, &scenario, &fault, run.kernel.files.get(KERNEL_FILE), temps)?;
        // Batches were sent at increasing offsets, each of at most `chunks_per_request` chunks of
        // exactly the chunk size, except the file's last chunk.
        let mut expected_offset = 0;
        for operation in &run.kernel.executed {
            if let KernelOperation::AppendChunks { offset, chunks, .. } = operation {
                prop_assert_eq!(*offset, expected_offset);
                prop_assert!(!chunks.is_empty() && chunks.len() <= scenario.chunks_per_request);
                for chunk in chunks {
                    expected_offset += chunk.raw_len;
                    let last = expected_offset == scenario.data.len() as u64;
                    prop_assert!(chunk.raw_len as usize == scenario.chunk_size || (last && chunk.raw_len as usize <= scenario.chunk_size));
                }
            }
        }
    }

    #[test]
    fn downloads_round_trip_or_fail_safely(scenario in scenario(700_000)) {
        let (kernel_steps, host_actions, actions) =
            counts(2, download_batches(&scenario), 2 + usize::from(!scenario.overwrite));
        let fault = pin_fault(&scenario.fault, kernel_steps, host_actions, actions);
        let (download, kernel, host) = download_world(&scenario);
        let run = run(download, kernel, host, KernelBudget::new(), &fault);
        let read_only = run.kernel.executed.iter().all(|operation| matches!(
            operation,
            KernelOperation::InspectSource { .. } | KernelOperation::ReadChunks { .. } | KernelOperation::HashSource { .. }
        ));
        prop_assert!(read_only, "a download changed the kernel's files");
        // Batches were asked for at increasing offsets, in chunks of the chunk size: the first of
        // `chunks_per_request` chunks, after a buffered reply of `buffered_chunks_per_request`,
        // every one but the last full.
        let batches: Vec<(u64, u64)> = run.kernel.executed.iter().filter_map(|operation| match operation {
            KernelOperation::ReadChunks { offset, len, chunk_size, .. } => {
                assert_eq!(*chunk_size, scenario.chunk_size as u64);
                Some((*offset, *len))
            }
            _ => None,
        }).collect();
        let mut expected_offset = 0;
        for (index, (offset, len)) in batches.iter().enumerate() {
            prop_assert_eq!(*offset, expected_offset);
            let chunks = if (scenario.wire == KernelWire::Messages) && index > 0 {
                scenario.buffered_chunks_per_request
            } else {
                scenario.chunks_per_request
            };
            let full = (scenario.chunk_size * chunks) as u64;
            let last = index + 1 == batches.len();
            prop_assert!(*len == full || (last && *len > 0 && *len < full), "batch {} of {} bytes, expected {}", index, len, full);
            expected_offset += len;
        }
        let temps = temp_files(&run.host.files);
        check_outcome(&run, &scenario, &fault, run.host.files.get(DEST_HOST), temps)?;
    }

    #[test]
    fn budgets_refuse_before_dispatch(scenario in scenario(300_000), spare in 0u64..1000) {
        prop_assume!(!scenario.data.is_empty());
        let limit = (scenario.data.len() as u64 - 1).saturating_sub(spare);
        let scenario = Scenario { fault: Fault::None, ..scenario };

        let (upload, kernel, host) = upload_world(&scenario);
        let run_upload = run(upload, kernel, host, KernelBudget::with_limit(limit), &Fault::None);
        prop_assert!(run_upload.kernel.executed.is_empty(), "an upload over budget sent code");
        prop_assert_eq!(run_upload.budget.used(), 0);
        let is_budget_refusal = matches!(
            &run_upload.outcome,
            Action::Failed(TransferError::Failed { phase: Phase::ValidateSource, cause: Cause::BudgetExhausted { .. }, leftover: None, .. })
        );
        prop_assert!(is_budget_refusal, "{:?}", run_upload.outcome);

        let (download, kernel, host) = download_world(&scenario);
        let run_download = run(download, kernel, host, KernelBudget::with_limit(limit), &Fault::None);
        prop_assert_eq!(run_download.kernel.executed.len(), 1, "a download over budget read chunks");
        prop_assert!(run_download.host.files.is_empty() || run_download.host.files.keys().all(|name| name == DEST_HOST));
        let is_budget_refusal = matches!(
            &run_download.outcome,
            Action::Failed(TransferError::Failed { phase: Phase::InspectRemoteSource, cause: Cause::BudgetExhausted { .. }, leftover: None, .. })
        );
        prop_assert!(is_budget_refusal, "{:?}", run_download.outcome);
    }

    #[test]
    fn restarts_invalidate_and_silence_the_kernel(scenario in scenario(200_000), step in any::<usize>(), ran in any::<bool>()) {
        let (kernel_steps, _, _) = counts(2, upload_batches(&scenario), 0);
        let fault = Fault::Kernel { step: step % kernel_steps, failure: KernelFailure::Restarted, ran };
        let (upload, kernel, host) = upload_world(&scenario);
        // `SimKernel::execute` panics if anything is sent after the restart.
        let upload_run = run(upload, kernel, host, KernelBudget::new(), &fault);
        let invalidated = matches!(upload_run.outcome, Action::Failed(TransferError::Failed { .. } | TransferError::Uncertain { .. }));
        prop_assert!(invalidated, "{:?}", upload_run.outcome);
        prop_assert_eq!(upload_run.kernel_steps, step % kernel_steps + 1);

        let (download_steps, _, _) = counts(2, download_batches(&scenario), 0);
        let fault = Fault::Kernel { step: step % download_steps, failure: KernelFailure::Restarted, ran };
        let (download, kernel, host) = download_world(&scenario);
        let download_run = run(download, kernel, host, KernelBudget::new(), &fault);
        let is_failure = matches!(&download_run.outcome, Action::Failed(TransferError::Failed { .. }));
        prop_assert!(is_failure);
        prop_assert!(temp_files(&download_run.host.files).is_empty());
    }

    #[test]
    fn reply_parsing_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_reply_parsing(&data);
    }

    #[test]
    fn damaged_receipts_never_panic(json in "\\{(\"[a-z]{1,8}\":(-?[0-9]{1,20}|\"[A-Za-z0-9+/=]{0,12}\"|true|null|\\[\\]),?){0,6}\\}") {
        let nonce = Nonce::parse("fuzz-nonce").unwrap();
        drive_with_constant_reply(&format!("{RECEIPT_MARKER}fuzz-nonce:{json}\n").into(), &nonce);
        check_reply_parsing(format!("{RECEIPT_MARKER}fuzz-nonce:{json}").as_bytes());
    }
}

/// Drives a machine through the simulator and returns the outcome's message.
fn message(outcome: &Action) -> String {
    match outcome {
        Action::Done(receipt) => format!(
            "done: {} bytes, sha256 {}",
            receipt.bytes,
            &receipt.sha256[..12]
        ),
        Action::Failed(error) => error.to_string(),
        other => format!("not terminal: {other:?}"),
    }
}

/// Ten bytes in chunks of four, two chunks per request: batches of 8 and 2 bytes.
fn small_scenario(fault: Fault) -> Scenario {
    Scenario {
        data: test_bytes(10, 1, false),
        chunk_size: 4,
        chunks_per_request: 2,
        overwrite: false,
        existing_destination: None,
        max_bytes: DEFAULT_MAX_BYTES,
        wire: KernelWire::CodeOnly,
        buffered_chunks_per_request: 2,
        fault,
    }
}

#[test]
fn outcomes_read_well() {
    let mut lines = Vec::new();
    let mut upload = |label: &str, scenario: Scenario| {
        let (machine, kernel, host) = upload_world(&scenario);
        let run = run(machine, kernel, host, KernelBudget::new(), &scenario.fault);
        lines.push(format!("upload, {label}: {}", message(&run.outcome)));
    };
    upload("clean", small_scenario(Fault::None));
    upload(
        "destination exists",
        Scenario {
            existing_destination: Some(b"old".to_vec()),
            ..small_scenario(Fault::None)
        },
    );
    upload(
        "too large",
        Scenario {
            max_bytes: 9,
            ..small_scenario(Fault::None)
        },
    );
    upload(
        "promote timed out",
        small_scenario(Fault::Kernel {
            step: 3,
            failure: KernelFailure::Timeout,
            ran: true,
        }),
    );
    upload(
        "chunk receipt corrupted",
        small_scenario(Fault::Reply {
            step: 2,
            fault: ReplyFault::CorruptNumber,
        }),
    );
    upload(
        "chunk count short",
        small_scenario(Fault::Reply {
            step: 1,
            fault: ReplyFault::DropChunk,
        }),
    );
    upload(
        "kernel died",
        small_scenario(Fault::Kernel {
            step: 1,
            failure: KernelFailure::Died,
            ran: false,
        }),
    );
    upload(
        "create receipt duplicated",
        small_scenario(Fault::Reply {
            step: 0,
            fault: ReplyFault::Duplicate,
        }),
    );
    upload(
        "host read failed",
        small_scenario(Fault::Host {
            action: 1,
            kind: ErrorKind::PermissionDenied,
        }),
    );
    let mut download = |label: &str, scenario: Scenario| {
        let (machine, kernel, host) = download_world(&scenario);
        let run = run(machine, kernel, host, KernelBudget::new(), &scenario.fault);
        lines.push(format!("download, {label}: {}", message(&run.outcome)));
    };
    download("clean", small_scenario(Fault::None));
    download(
        "destination exists",
        Scenario {
            existing_destination: Some(b"old".to_vec()),
            ..small_scenario(Fault::None)
        },
    );
    download(
        "chunk data corrupted",
        small_scenario(Fault::Reply {
            step: 1,
            fault: ReplyFault::CorruptData,
        }),
    );
    download(
        "clean, chunks as buffers",
        Scenario {
            wire: KernelWire::Messages,
            ..small_scenario(Fault::None)
        },
    );
    download(
        "chunk buffer corrupted",
        Scenario {
            wire: KernelWire::Messages,
            ..small_scenario(Fault::Reply {
                step: 1,
                fault: ReplyFault::CorruptData,
            })
        },
    );
    download(
        "wrong nonce",
        small_scenario(Fault::Reply {
            step: 2,
            fault: ReplyFault::WrongNonce,
        }),
    );
    download(
        "chunk left out",
        small_scenario(Fault::Reply {
            step: 1,
            fault: ReplyFault::DropChunk,
        }),
    );
    download(
        "temp cleanup after commit failed",
        small_scenario(Fault::Host {
            action: 4,
            kind: ErrorKind::PermissionDenied,
        }),
    );
    download(
        "restarted",
        small_scenario(Fault::Kernel {
            step: 2,
            failure: KernelFailure::Restarted,
            ran: true,
        }),
    );
    download("cancelled", small_scenario(Fault::Cancel { action: 3 }));
    download(
        "too large",
        Scenario {
            max_bytes: 9,
            ..small_scenario(Fault::None)
        },
    );
    expect_test::expect![[r#"
        upload, clean: done: 10 bytes, sha256 1797cf887cb7
        upload, destination exists: upload failed before destination commit during verify and promote destination: the destination already exists; pass overwrite: true to replace it
        upload, too large: upload failed before destination commit during validate source: the file has 10 bytes, more than maxBytes (9); raise maxBytes if this is intended
        upload, promote timed out: upload outcome is uncertain: promotion of /content/däta "q".bin was requested but not confirmed (the kernel did not answer before the deadline); check the destination before retrying
        upload, chunk receipt corrupted: upload failed before destination commit during transfer chunk: invalid receipt: field "offset" is 9, expected 8
        upload, chunk count short: upload failed before destination commit during transfer chunk: invalid receipt: field "count" is 1, expected 2
        upload, kernel died: upload failed before destination commit during transfer chunk: the kernel died or disappeared; the kernel temporary file /content/däta "q".bin.jupyter-mcp-6f1c2a9e-5b0d-4c1e-9a53-0d8f2b7c4e11.part may remain
        upload, create receipt duplicated: upload failed before destination commit during initialize remote temporary file: invalid receipt: 2 receipt lines for this transfer, expected one
        upload, host read failed: upload failed before destination commit during transfer chunk: host file operation failed: permission denied
        download, clean: done: 10 bytes, sha256 1797cf887cb7
        download, destination exists: download failed before destination commit during promote destination: the destination already exists; pass overwrite: true to replace it
        download, chunk data corrupted: download failed before destination commit during verify remote source: the kernel's SHA-256 of the source differs from the transferred bytes; the source changed or data was corrupted
        download, clean, chunks as buffers: done: 10 bytes, sha256 1797cf887cb7
        download, chunk buffer corrupted: download failed before destination commit during verify remote source: the kernel's SHA-256 of the source differs from the transferred bytes; the source changed or data was corrupted
        download, wrong nonce: download failed before destination commit during transfer chunk: invalid receipt: no receipt line for this transfer
        download, chunk left out: download failed before destination commit during transfer chunk: invalid receipt: field "chunks" is 1, expected 2
        download, temp cleanup after commit failed: download was committed to /host/dest.bin but temporary-file cleanup could not be confirmed: the host temporary file /host/dest.bin.jupyter-mcp-6f1c2a9e-5b0d-4c1e-9a53-0d8f2b7c4e11.part may remain
        download, restarted: download failed before destination commit during transfer chunk: a kernel restart was observed, which invalidates the transfer
        download, cancelled: download failed before destination commit during transfer chunk: cancelled
        download, too large: download failed before destination commit during inspect remote source: the file has 10 bytes, more than maxBytes (9); raise maxBytes if this is intended
    "#]].assert_eq(&(lines.join("\n") + "\n"));
}

#[test]
fn a_budget_used_up_mid_transfer_refuses_the_next_chunk_before_dispatch() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, mut host) = upload_world(&scenario);
    let mut budget = KernelBudget::with_limit(12);
    let mut sent_chunks = 0;
    let outcome = loop {
        let action = upload.next_action(&mut budget);
        let event = match &action {
            Action::ExecuteKernel(step) => {
                if let KernelOperation::AppendChunks { .. } = step.request.operation {
                    sent_chunks += 1;
                    // Another transfer on the same kernel object uses up the rest.
                    let remaining = budget.remaining();
                    budget.try_charge(remaining).unwrap();
                }
                Event::KernelReply(kernel.execute(&step.request))
            }
            Action::Done(_) | Action::Failed(_) => break action,
            other => host.perform(other).unwrap(),
        };
        upload.handle(event);
    };
    assert_eq!(sent_chunks, 1);
    assert!(matches!(
        kernel.executed.last(),
        Some(KernelOperation::RemoveTemp { .. })
    ));
    assert!(kernel.files.is_empty(), "the temp file was cleaned up");
    expect_test::expect!["upload failed before destination commit during transfer chunk: this kernel may carry only 0 more bytes of its 12-byte chunk-transfer budget, and 2 are needed; restart the kernel to reset the budget, or move the file another way"].assert_eq(&message(&outcome));
}

#[test]
fn host_protocol_violations_fail_safely() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, _) = upload_world(&scenario);
    let mut budget = KernelBudget::new();
    let Action::ExecuteKernel(step) = upload.next_action(&mut budget) else {
        panic!()
    };
    upload.handle(Event::KernelReply(kernel.execute(&step.request)));
    // The machine asks for a host read; the host answers as if it were a kernel step.
    assert!(matches!(
        upload.next_action(&mut budget),
        Action::ReadHostChunk { .. }
    ));
    upload.handle(Event::HostDone);
    let Action::ExecuteKernel(cleanup) = upload.next_action(&mut budget) else {
        panic!()
    };
    assert!(matches!(
        cleanup.request.operation,
        KernelOperation::RemoveTemp { .. }
    ));
    assert_eq!(cleanup.deadline, Deadline::Cleanup);
    upload.handle(Event::KernelReply(kernel.execute(&cleanup.request)));
    expect_test::expect!["upload failed before destination commit during transfer chunk: internal error: the host answered a transfer step out of order"].assert_eq(&message(&upload.next_action(&mut budget)));
    // Events after the end change nothing.
    upload.handle(Event::HostDone);
    assert!(upload.next_action(&mut budget).is_terminal());

    // Asking twice without answering: the outstanding inspect step is abandoned.
    let (mut download, _, _) = download_world(&scenario);
    let _ = download.next_action(&mut budget);
    expect_test::expect!["download failed before destination commit during inspect remote source: internal error: the host answered a transfer step out of order"].assert_eq(&message(&download.next_action(&mut budget)));
}

#[test]
fn invalid_arguments_are_refused_up_front() {
    let errors: Vec<String> = [
        UploadConfig::new("/h", "C:\\x", NONCE, 1),
        UploadConfig::new("/h", "/k", "short", 1),
        UploadConfig {
            max_bytes: 0,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig {
            chunk_size: CHUNK_SIZE + 1,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig {
            chunks_per_request: CHUNKS_PER_REQUEST + 1,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig::new("", "/k", NONCE, 1),
    ]
    .into_iter()
    .map(|config| Upload::new(config).map(|_| ()).unwrap_err().to_string())
    .collect();
    expect_test::expect![[r#"
        invalid kernelPath: "C:/x" is not an absolute POSIX path (backslashes count as '/'); give a kernel-side path such as /content/data.csv
        invalid nonce: a nonce is 8 to 64 characters of letters, digits, '-' and '_' (a random UUID fits)
        invalid maxBytes: it must be a positive safe integer
        invalid chunkSize: it must be between 1 and 262144
        invalid chunksPerRequest: it must be between 1 and 8
        invalid hostPath: it is empty
    "#]].assert_eq(&(errors.join("\n") + "\n"));
    let refused = Download::new(DownloadConfig {
        buffered_chunks_per_request: 0,
        ..DownloadConfig::new("/h", "/k", NONCE)
    })
    .map(|_| ())
    .unwrap_err()
    .to_string();
    expect_test::expect!["invalid bufferedChunksPerRequest: it must be between 1 and 8"]
        .assert_eq(&refused);
}

#[test]
fn deadlines_match_the_steps() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, mut host) = upload_world(&scenario);
    let mut budget = KernelBudget::new();
    let mut seen = Vec::new();
    loop {
        let action = upload.next_action(&mut budget);
        let event = match &action {
            Action::ExecuteKernel(step) => {
                seen.push(format!(
                    "{:?} {:?} ({})",
                    step.deadline,
                    step.deadline.duration(),
                    step.phase
                ));
                Event::KernelReply(kernel.execute(&step.request))
            }
            Action::Done(_) | Action::Failed(_) => break,
            other => host.perform(other).unwrap(),
        };
        upload.handle(event);
    }
    expect_test::expect![[r#"
        Lookup 60s (initialize remote temporary file)
        Payload 120s (transfer chunk)
        Payload 120s (transfer chunk)
        Lookup 60s (verify and promote destination)
    "#]]
    .assert_eq(&(seen.join("\n") + "\n"));
}
