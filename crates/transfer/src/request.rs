//! Kernel-side requests: their structure, and their rendering as Python source.
//!
//! A request is kept as data ([`KernelRequest`]) so tests can execute its meaning directly;
//! [`KernelRequest::to_python`] renders the source a host sends to the kernel. The rendering is
//! two lines of ASCII:
//!
//! ```text
//! # jupyter-mcp-transfer-request <nonce> <sequence>
//! (lambda b: b.exec(b.compile(<program>, "<jupyter-mcp-transfer-<nonce>-<sequence>>", "exec"), {"__builtins__": b, "NONCE": ..., "REQUEST": <json>, "PAYLOAD": ("<base64>", ...)}))(__import__("builtins"))
//! ```
//!
//! A chunk step carries up to [`crate::CHUNKS_PER_REQUEST`] chunks, each compressed or not on
//! its own. [`KernelRequest::to_python_with_buffers`] (what the machine's steps use) sends each
//! chunk once as a binary buffer of the execute request and sets `PAYLOAD` to `None`, so the
//! kernel reads the chunks from its parent message; [`KernelRequest::to_python`] puts each one
//! once as its own base64 literal in `PAYLOAD`, for hosts that can send only source. Batching
//! amortises the fixed 10-15 ms an execute request costs the kernel; buffers remove the cost
//! that grows with the bytes: a 2 MiB batch as base64 literals is a 2.8 MB source that Python
//! tokenises and ipykernel carries as a JSON string (about 150 ms per batch, measured with a
//! kernel on this machine), as buffers it is about 20 ms.
//!
//! The lambda binds no name in the user's namespace and reaches `exec` and `compile` through the
//! `builtins` module, so user variables named `compile` or `exec` do not matter. The first line is
//! the tag by which later requests recognise and drop this source from `linecache`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;

use crate::names::Nonce;

/// The kernel program every request runs (see `kernel_body.py`).
pub(crate) const KERNEL_PROGRAM: &str = include_str!("kernel_body.py");

/// The first line of every request, by which requests recognise each other in `linecache`.
pub const REQUEST_TAG: &str = "# jupyter-mcp-transfer-request";

/// How a chunk's bytes travel inside the base64 literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChunkEncoding {
    /// The bytes as they are.
    Raw,
    /// zlib-compressed (RFC 1950), used when that saves at least 10 %.
    Zlib,
}

impl ChunkEncoding {
    /// The wire name (`"raw"` or `"zlib"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChunkEncoding::Raw => "raw",
            ChunkEncoding::Zlib => "zlib",
        }
    }
}

/// A chunk prepared for the wire. Its wire JSON is `{"bytes":N,"encoding":E}`; the bytes
/// travel apart, as a base64 literal or a binary buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EncodedChunk {
    /// How `encoded` relates to the original bytes.
    pub encoding: ChunkEncoding,
    /// The original length.
    #[serde(rename = "bytes")]
    pub raw_len: u64,
    /// The bytes that get base64-encoded into the request.
    #[serde(skip)]
    pub encoded: Vec<u8>,
}

impl EncodedChunk {
    /// Encodes a chunk, compressing it (zlib at its fastest level) when that saves at least
    /// 10 %. A chunk larger than the sample is judged by compressing the sample first
    /// ([`SAMPLE_SLICES`] slices spread over it), so incompressible data (random, already
    /// compressed) costs a 16 KiB compression instead of a whole one.
    pub fn encode(raw: &[u8]) -> EncodedChunk {
        match pack(raw) {
            Some(compressed) => EncodedChunk {
                encoding: ChunkEncoding::Zlib,
                raw_len: raw.len() as u64,
                encoded: compressed,
            },
            None => EncodedChunk {
                encoding: ChunkEncoding::Raw,
                raw_len: raw.len() as u64,
                encoded: raw.to_vec(),
            },
        }
    }
}

/// How many slices of a chunk are compressed to decide whether the whole chunk is worth
/// compressing (the kernel program uses the same rule).
pub(crate) const SAMPLE_SLICES: usize = 4;

/// The length of each sample slice.
pub(crate) const SAMPLE_SLICE: usize = 4096;

/// `raw` compressed, when compression saves at least 10 % and a sample does not show the data
/// to be incompressible first.
fn pack(raw: &[u8]) -> Option<Vec<u8>> {
    if raw.len() > SAMPLE_SLICES * SAMPLE_SLICE {
        let stride = raw.len() / SAMPLE_SLICES;
        let sample: Vec<u8> = (0..SAMPLE_SLICES)
            .flat_map(|index| &raw[index * stride..index * stride + SAMPLE_SLICE])
            .copied()
            .collect();
        if !saves_ten_percent(sample.len(), zlib_compress(&sample).len()) {
            return None;
        }
    }
    let compressed = zlib_compress(raw);
    saves_ten_percent(raw.len(), compressed.len()).then_some(compressed)
}

/// Whether compressing `raw_len` bytes into `compressed_len` saves at least 10 %.
pub fn saves_ten_percent(raw_len: usize, compressed_len: usize) -> bool {
    raw_len > 0 && (compressed_len as u128) * 10 <= (raw_len as u128) * 9
}

pub(crate) fn zlib_compress(raw: &[u8]) -> Vec<u8> {
    // zlib-rs at its fastest level: about twice miniz_oxide's speed on text-like data, which is
    // what bounds a compressible upload on a local kernel.
    let mut compressed = vec![0; zlib_rs::compress_bound(raw.len())];
    let (written, code) =
        zlib_rs::compress_slice(&mut compressed, raw, zlib_rs::DeflateConfig::best_speed());
    // The buffer is compress_bound's size, so compression cannot run out of room.
    debug_assert_eq!(code, zlib_rs::ReturnCode::Ok);
    let written = written.len();
    compressed.truncate(written);
    compressed
}

/// What one kernel step does. Its wire JSON (`REQUEST`) names the operation as `op` in snake
/// case, and paths and sizes by their short wire names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum KernelOperation {
    /// Upload: create `temp_path` exclusively (it must not exist). Receipt `{"kind":"init"}`.
    CreateTemp {
        /// `<kernelPath>.jupyter-mcp-<nonce>.part`.
        #[serde(rename = "temp")]
        temp_path: String,
    },
    /// Upload: append consecutive chunks, checking that the file's end is at `offset` first.
    /// Receipt `{"kind":"chunks","offset":N,"bytes":N,"count":N}` (the total bytes written and
    /// the number of chunks).
    AppendChunks {
        /// The temp file.
        #[serde(rename = "temp")]
        temp_path: String,
        /// Where the first chunk starts.
        offset: u64,
        /// The chunks, in file order (at most [`crate::CHUNKS_PER_REQUEST`]); each one's base64
        /// travels once, as its own literal in the request's payload tuple.
        chunks: Vec<EncodedChunk>,
    },
    /// Upload: check size and SHA-256 of the temp file, then promote it: `os.replace` with
    /// overwrite, otherwise hard link and unlink (never replacing an existing destination).
    /// Receipt `{"kind":"done","bytes":N,"sha256":HEX}`; when only the unlink after the link
    /// failed, `{"kind":"error","type":NAME,"committed":true}`.
    PromoteTemp {
        /// The temp file.
        #[serde(rename = "temp")]
        temp_path: String,
        /// The destination (`kernelPath`).
        #[serde(rename = "destination")]
        destination_path: String,
        /// Expected size.
        bytes: u64,
        /// Expected lowercase hex SHA-256.
        sha256: String,
        /// Replace an existing destination.
        overwrite: bool,
    },
    /// Upload: best-effort unlink of the temp file; a missing file is fine.
    /// Receipt `{"kind":"clean","removed":BOOL}`.
    RemoveTemp {
        /// The temp file.
        #[serde(rename = "temp")]
        temp_path: String,
    },
    /// Download: stat the source and require a regular file. Receipt `{"kind":"meta","bytes":N}`.
    InspectSource {
        /// The source (`kernelPath`).
        #[serde(rename = "source")]
        source_path: String,
    },
    /// Download: read exactly `len` bytes at `offset` as consecutive chunks of `chunk_size`
    /// bytes (the last one may be shorter), each compressed on its own when zlib saves 10 %.
    /// Receipt `{"kind":"chunks","offset":N,"bytes":N,"chunks":[{"bytes":N,
    /// "encoding":"raw"|"zlib","data":BASE64}, ...]}`, or with `reply_buffers`
    /// `{"bytes":N,"encoding":E,"buffer":I}` per chunk, chunk `I` being buffer `I` of the
    /// step's `display_data` message.
    ReadChunks {
        /// The source.
        #[serde(rename = "source")]
        source_path: String,
        /// Where to read.
        offset: u64,
        /// How much to read in all (at most [`crate::CHUNKS_PER_REQUEST`] chunks).
        #[serde(rename = "bytes")]
        len: u64,
        /// The size of each chunk but the last.
        #[serde(rename = "chunk")]
        chunk_size: u64,
        /// The kernel may send the chunks as the binary buffers of one `display_data` message,
        /// naming each by index in the receipt (`"buffer":I` instead of `"data"`).
        #[serde(rename = "buffers")]
        reply_buffers: bool,
    },
    /// Download: hash the whole source independently. Receipt `{"kind":"done","bytes":N,"sha256":HEX}`.
    HashSource {
        /// The source.
        #[serde(rename = "source")]
        source_path: String,
    },
}

impl KernelOperation {
    /// The chunk traffic this step carries, as `(bytes, chunks)`, if it carries any: what it is
    /// charged to the kernel's budget, and how many chunks that is.
    pub fn chunk_traffic(&self) -> Option<(u64, u64)> {
        match self {
            KernelOperation::AppendChunks { chunks, .. } => Some((
                chunks.iter().map(|chunk| chunk.raw_len).sum(),
                chunks.len() as u64,
            )),
            KernelOperation::ReadChunks {
                len, chunk_size, ..
            } => Some((*len, len.div_ceil((*chunk_size).max(1)))),
            _ => None,
        }
    }

    /// The JSON that travels as `REQUEST`: the wire form of this operation, without payload.
    pub fn wire_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a kernel operation is plain data")
    }
}

/// One request to run in the kernel: an operation, tagged with the transfer's nonce and the
/// step's sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRequest {
    /// The transfer's nonce; the receipt line must carry it.
    pub nonce: Nonce,
    /// The step's number within the transfer, starting at 1 (part of the tag and file name).
    pub sequence: u32,
    /// What to do.
    pub operation: KernelOperation,
}

impl KernelRequest {
    /// The Python source to execute in an IPython kernel for this request, with every chunk of
    /// the payload (if any) exactly once as its own base64 literal in the tuple `PAYLOAD`
    /// (empty without payload): for hosts that can send only source. Two lines of ASCII; hosts
    /// should execute it with `store_history: false` (see the crate documentation).
    pub fn to_python(&self) -> String {
        let chunks: &[EncodedChunk] = match &self.operation {
            KernelOperation::AppendChunks { chunks, .. } => chunks,
            _ => &[],
        };
        let payload_len: usize = chunks
            .iter()
            .map(|chunk| chunk.encoded.len().div_ceil(3) * 4 + 3)
            .sum();
        let mut code = self.source_head(payload_len + 64);
        code.push('(');
        // One literal per chunk, in a tuple (a one-element tuple needs its trailing comma).
        for chunk in chunks {
            code.push('"');
            BASE64.encode_string(&chunk.encoded, &mut code);
            code.push_str("\",");
        }
        code.push(')');
        code.push_str(SOURCE_TAIL);
        code
    }

    /// The request as source plus binary buffers: each chunk's bytes (compressed or not) travel
    /// once, as a buffer of the execute request, and the source (with `PAYLOAD` set to `None`)
    /// has the kernel read them from its parent message. No base64, and the payload is never
    /// parsed as source or JSON: what makes uploads fast. Hosts send the buffers with the
    /// request in order (`ExecuteOptions::buffers`).
    pub fn to_python_with_buffers(&self) -> (String, Vec<Vec<u8>>) {
        let buffers = match &self.operation {
            KernelOperation::AppendChunks { chunks, .. } => {
                chunks.iter().map(|chunk| chunk.encoded.clone()).collect()
            }
            _ => Vec::new(),
        };
        let mut code = self.source_head(16);
        code.push_str("None");
        code.push_str(SOURCE_TAIL);
        (code, buffers)
    }

    /// The source up to the value of `PAYLOAD`, with room for `extra` more bytes.
    fn source_head(&self, extra: usize) -> String {
        let nonce = self.nonce.as_str();
        let sequence = self.sequence;
        let program = python_string_literal(KERNEL_PROGRAM);
        let filename = python_string_literal(&format!("<jupyter-mcp-transfer-{nonce}-{sequence}>"));
        let nonce_literal = python_string_literal(nonce);
        let request = python_string_literal(&self.operation.wire_json().to_string());
        let mut code = format!(
            "{REQUEST_TAG} {nonce} {sequence}\n\
             (lambda b: b.exec(b.compile({program}, {filename}, \"exec\"), \
             {{\"__builtins__\": b, \"NONCE\": {nonce_literal}, \"REQUEST\": {request}, \"PAYLOAD\": "
        );
        code.reserve(extra);
        code
    }
}

/// What follows the value of `PAYLOAD` in a request's source.
const SOURCE_TAIL: &str = "}))(__import__(\"builtins\"))\n";

/// A double-quoted Python string literal for `text`, in printable ASCII only.
pub(crate) fn python_string_literal(text: &str) -> String {
    let mut literal = String::with_capacity(text.len() + 2);
    literal.push('"');
    for character in text.chars() {
        match character {
            '\\' => literal.push_str("\\\\"),
            '"' => literal.push_str("\\\""),
            ' '..='~' => literal.push(character),
            '\n' => literal.push_str("\\n"),
            _ if (character as u32) < 0x1_0000 => {
                literal.push_str(&format!("\\u{:04x}", character as u32));
            }
            _ => literal.push_str(&format!("\\U{:08x}", character as u32)),
        }
    }
    literal.push('"');
    literal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce() -> Nonce {
        Nonce::parse("0f8fad5b-d9cb-469f-a165-70867728950e").unwrap()
    }

    #[test]
    fn literals_are_ascii_and_escape_everything_else() {
        expect_test::expect![[r#""a\"b\\c\nd\u0000\u00e4\U0001f600'""#]]
            .assert_eq(&python_string_literal("a\"b\\c\nd\0ä😀'"));
    }

    #[test]
    fn compression_is_used_only_when_it_saves_ten_percent() {
        assert!(saves_ten_percent(100, 90));
        assert!(!saves_ten_percent(100, 91));
        assert!(!saves_ten_percent(0, 0));
        let compressible = EncodedChunk::encode(&[b'a'; 1000]);
        assert_eq!(compressible.encoding, ChunkEncoding::Zlib);
        assert_eq!(compressible.raw_len, 1000);
        let tiny = EncodedChunk::encode(b"abc");
        assert_eq!(tiny.encoding, ChunkEncoding::Raw);
        assert_eq!(tiny.encoded, b"abc");
    }

    #[test]
    fn a_sample_decides_for_large_chunks_without_missing_compressible_parts() {
        // xorshift: incompressible bytes.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let random: Vec<u8> = (0..crate::CHUNK_SIZE)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        assert_eq!(EncodedChunk::encode(&random).encoding, ChunkEncoding::Raw);
        // Random first half, zeros after: the sample spans both, and the whole saves 50 %.
        let mut mixed = random.clone();
        mixed[crate::CHUNK_SIZE / 2..].fill(0);
        let packed = EncodedChunk::encode(&mixed);
        assert_eq!(packed.encoding, ChunkEncoding::Zlib);
        assert!(saves_ten_percent(mixed.len(), packed.encoded.len()));
    }

    #[test]
    fn requests_render_as_two_ascii_lines_carrying_the_payload_once() {
        let chunk = EncodedChunk::encode(b"payload bytes that are not compressible enough");
        let payload = BASE64.encode(&chunk.encoded);
        let request = KernelRequest {
            nonce: nonce(),
            sequence: 3,
            operation: KernelOperation::AppendChunks {
                temp_path: "/tmp/d\u{e4}t\u{e4} \"q\".bin.jupyter-mcp-x.part".into(),
                offset: 262_144,
                chunks: vec![chunk],
            },
        };
        let code = request.to_python();
        assert!(code.is_ascii());
        assert_eq!(code.lines().count(), 2);
        assert_eq!(code.matches(&payload).count(), 1);
        let first_line = code.lines().next().unwrap();
        expect_test::expect![
            "# jupyter-mcp-transfer-request 0f8fad5b-d9cb-469f-a165-70867728950e 3"
        ]
        .assert_eq(first_line);
        let second_line = code.lines().nth(1).unwrap();
        let program = python_string_literal(KERNEL_PROGRAM);
        expect_test::expect![[r#"(lambda b: b.exec(b.compile(<program>, "<jupyter-mcp-transfer-0f8fad5b-d9cb-469f-a165-70867728950e-3>", "exec"), {"__builtins__": b, "NONCE": "0f8fad5b-d9cb-469f-a165-70867728950e", "REQUEST": "{\"chunks\":[{\"bytes\":46,\"encoding\":\"raw\"}],\"offset\":262144,\"op\":\"append_chunks\",\"temp\":\"/tmp/d\u00e4t\u00e4 \\\"q\\\".bin.jupyter-mcp-x.part\"}", "PAYLOAD": ("cGF5bG9hZCBieXRlcyB0aGF0IGFyZSBub3QgY29tcHJlc3NpYmxlIGVub3VnaA==",)}))(__import__("builtins"))"#]]
            .assert_eq(&second_line.replace(&program, "<program>"));
    }

    /// A raw chunk, a compressed one and a short one.
    fn three_chunks() -> Vec<EncodedChunk> {
        [&b"first chunk, raw"[..], &[b'z'; 4000], b"last"]
            .into_iter()
            .map(EncodedChunk::encode)
            .collect()
    }

    /// Step 4 of a transfer: append `chunks` at offset 0.
    fn append_step(chunks: Vec<EncodedChunk>) -> KernelRequest {
        KernelRequest {
            nonce: nonce(),
            sequence: 4,
            operation: KernelOperation::AppendChunks {
                temp_path: "/x.part".into(),
                offset: 0,
                chunks,
            },
        }
    }

    #[test]
    fn a_batch_carries_each_chunk_once_as_its_own_literal() {
        let chunks = three_chunks();
        let literals: Vec<String> = chunks
            .iter()
            .map(|chunk| format!("\"{}\"", BASE64.encode(&chunk.encoded)))
            .collect();
        let code = append_step(chunks.clone()).to_python();
        assert_eq!(code.lines().count(), 2);
        for literal in &literals {
            assert_eq!(code.matches(literal.as_str()).count(), 1);
        }
        assert!(code.contains(&format!("\"PAYLOAD\": ({},)}}", literals.join(","))));
        let operation = KernelOperation::AppendChunks {
            temp_path: "/x.part".into(),
            offset: 0,
            chunks,
        };
        expect_test::expect![[r#"{"chunks":[{"bytes":16,"encoding":"raw"},{"bytes":4000,"encoding":"zlib"},{"bytes":4,"encoding":"raw"}],"offset":0,"op":"append_chunks","temp":"/x.part"}"#]]
            .assert_eq(&operation.wire_json().to_string());
        assert_eq!(operation.chunk_traffic(), Some((4020, 3)));
        let read = KernelOperation::ReadChunks {
            source_path: "/x".into(),
            offset: 0,
            len: 600_000,
            chunk_size: 262_144,
            reply_buffers: true,
        };
        assert_eq!(read.chunk_traffic(), Some((600_000, 3)));
        // Steps without chunks carry an empty tuple.
        let code = KernelRequest {
            nonce: nonce(),
            sequence: 5,
            operation: read,
        }
        .to_python();
        assert!(code.contains("\"PAYLOAD\": ()}"));
    }

    #[test]
    fn with_buffers_each_chunk_travels_once_as_a_buffer_and_the_source_stays_small() {
        let chunks = three_chunks();
        let request = append_step(chunks.clone());
        let (code, buffers) = request.to_python_with_buffers();
        let encoded: Vec<Vec<u8>> = chunks.iter().map(|chunk| chunk.encoded.clone()).collect();
        assert_eq!(buffers, encoded);
        assert!(code.is_ascii());
        assert_eq!(code.lines().count(), 2);
        assert!(code.ends_with("\"PAYLOAD\": None}))(__import__(\"builtins\"))\n"));
        for chunk in &chunks {
            assert!(!code.contains(&BASE64.encode(&chunk.encoded)));
        }
        // The same request otherwise: only the payload's place differs.
        let literal = request.to_python();
        let head = code
            .strip_suffix("None}))(__import__(\"builtins\"))\n")
            .unwrap();
        assert!(literal.starts_with(head));
        // Steps without chunks send no buffers.
        let (_, buffers) = KernelRequest {
            nonce: nonce(),
            sequence: 5,
            operation: KernelOperation::CreateTemp {
                temp_path: "/x.part".into(),
            },
        }
        .to_python_with_buffers();
        assert!(buffers.is_empty());
    }

    #[test]
    fn the_kernel_program_tag_never_starts_the_second_line() {
        // Requests are recognised by their first line only, so the program text (which mentions
        // the tag) must not make any other line look like a request.
        let code = KernelRequest {
            nonce: nonce(),
            sequence: 1,
            operation: KernelOperation::CreateTemp {
                temp_path: "/x.part".into(),
            },
        }
        .to_python();
        assert_eq!(
            code.lines()
                .filter(|line| line.starts_with(REQUEST_TAG))
                .count(),
            1
        );
        assert!(KERNEL_PROGRAM.contains(&format!("TAG = \"{REQUEST_TAG}\"")));
        assert!(
            KERNEL_PROGRAM.contains(&format!("MARKER = \"{}\"", crate::receipt::RECEIPT_MARKER))
        );
    }
}
