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

mod cases;
mod model;
mod run;

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
