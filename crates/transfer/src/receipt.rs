//! Parsing the kernel's reply: one receipt line per step.
//!
//! The host passes all stdout text a step produced (stream messages concatenated in arrival
//! order). Exactly one line must carry `__JUPYTER_MCP_FILE_RECEIPT__<nonce>:`, at its start,
//! followed by a compact JSON object. Each step expects one receipt `kind` (or `error`) with an
//! exact set of fields; every numeric field must be a non-negative integer no larger than
//! 2^53 - 1 and equal to the value the machine expects. Problems are described without echoing
//! kernel text.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value};

use crate::error::is_class_name;
use crate::names::Nonce;

/// The text that starts every receipt line, followed by the nonce and a colon.
pub const RECEIPT_MARKER: &str = "__JUPYTER_MCP_FILE_RECEIPT__";

/// The largest integer a receipt may carry (JavaScript's safe-integer bound).
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// What is wrong with a kernel reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptProblem {
    /// No line carries the marker with this transfer's nonce.
    #[error("no receipt line for this transfer")]
    Missing,
    /// Several lines carry it.
    #[error("{count} receipt lines for this transfer, expected one")]
    Repeated {
        /// How many.
        count: usize,
    },
    /// The marker is not at the start of its line.
    #[error("the receipt marker is not at the start of its line")]
    NotAtLineStart,
    /// The text after the marker is not JSON.
    #[error("the receipt is not JSON")]
    NotJson,
    /// The JSON is not an object.
    #[error("the receipt is not a JSON object")]
    NotObject,
    /// The receipt's `kind` is missing, not a string, or not the one this step expects.
    #[error("the receipt is not of kind {expected:?}")]
    UnexpectedKind {
        /// The kind the step expects.
        expected: &'static str,
    },
    /// A required field is absent.
    #[error("field {0:?} is missing")]
    MissingField(&'static str),
    /// The receipt has fields this kind does not have.
    #[error("the receipt has unexpected fields")]
    UnexpectedField,
    /// A numeric field is not a non-negative safe integer.
    #[error("field {0:?} is not a non-negative integer")]
    NotNonNegativeInteger(&'static str),
    /// A numeric field has another value than expected.
    #[error("field {field:?} is {actual}, expected {expected}")]
    NumberMismatch {
        /// The field.
        field: &'static str,
        /// The expected value.
        expected: u64,
        /// The received value.
        actual: u64,
    },
    /// A field has the wrong type or an unacceptable value (a malformed hash, an unknown
    /// encoding, a class name that is not an identifier, invalid base64 or zlib data).
    #[error("field {0:?} has an invalid value")]
    InvalidValue(&'static str),
    /// A string field differs from the value the machine expects.
    #[error("field {0:?} differs from the expected value")]
    ValueMismatch(&'static str),
    /// A chunk's decoded length differs from its declared length.
    #[error("the chunk data does not decode to {expected} bytes")]
    ChunkLength {
        /// The declared length.
        expected: u64,
    },
    /// A chunk names a binary buffer the reply did not carry.
    #[error("chunk {index} names a binary buffer the reply lacks")]
    MissingBuffer {
        /// The chunk's (and the buffer's) index.
        index: usize,
    },
}

/// A parsed reply: the step's receipt, or the kernel-side exception the transfer code caught.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply<T> {
    Receipt(T),
    Exception {
        class_name: String,
        /// Only for the promote step: the destination was linked before the exception.
        committed: bool,
    },
}

/// Finds the single receipt object for `nonce` in `output`.
pub(crate) fn find_receipt(
    output: &str,
    nonce: &Nonce,
) -> Result<Map<String, Value>, ReceiptProblem> {
    let prefix = format!("{RECEIPT_MARKER}{nonce}:");
    let mut found = None;
    let mut count = 0;
    for line in output.split('\n') {
        if line.contains(&prefix) {
            count += 1;
            found = Some(line);
        }
    }
    let line = match (count, found) {
        (1, Some(line)) => line,
        (0, _) | (_, None) => return Err(ReceiptProblem::Missing),
        (count, _) => return Err(ReceiptProblem::Repeated { count }),
    };
    let line = line.strip_suffix('\r').unwrap_or(line);
    let json = line
        .strip_prefix(&prefix)
        .ok_or(ReceiptProblem::NotAtLineStart)?;
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(ReceiptProblem::NotObject),
        Err(_) => Err(ReceiptProblem::NotJson),
    }
}

/// Reads a receipt's fields, tracking which ones were looked at so extras are refused.
struct Fields {
    object: Map<String, Value>,
    seen: usize,
}

impl Fields {
    fn get(&mut self, field: &'static str) -> Result<&Value, ReceiptProblem> {
        let value = self
            .object
            .get(field)
            .ok_or(ReceiptProblem::MissingField(field))?;
        self.seen += 1;
        Ok(value)
    }

    /// Moves a field's value out (large values are not copied).
    fn take(&mut self, field: &'static str) -> Result<Value, ReceiptProblem> {
        // A taken field leaves the object, so it need not count as seen.
        self.object
            .remove(field)
            .ok_or(ReceiptProblem::MissingField(field))
    }

    fn has(&self, field: &str) -> bool {
        self.object.contains_key(field)
    }

    fn integer(&mut self, field: &'static str) -> Result<u64, ReceiptProblem> {
        match self.get(field)?.as_u64() {
            Some(value) if value <= MAX_SAFE_INTEGER => Ok(value),
            _ => Err(ReceiptProblem::NotNonNegativeInteger(field)),
        }
    }

    fn integer_equal(&mut self, field: &'static str, expected: u64) -> Result<(), ReceiptProblem> {
        let actual = self.integer(field)?;
        if actual == expected {
            Ok(())
        } else {
            Err(ReceiptProblem::NumberMismatch {
                field,
                expected,
                actual,
            })
        }
    }

    fn string(&mut self, field: &'static str) -> Result<&str, ReceiptProblem> {
        self.get(field)?
            .as_str()
            .ok_or(ReceiptProblem::InvalidValue(field))
    }

    fn boolean(&mut self, field: &'static str) -> Result<bool, ReceiptProblem> {
        self.get(field)?
            .as_bool()
            .ok_or(ReceiptProblem::InvalidValue(field))
    }

    fn sha256(&mut self) -> Result<String, ReceiptProblem> {
        let text = self.string("sha256")?;
        let valid = text.len() == 64
            && text
                .bytes()
                .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(text.to_owned())
        } else {
            Err(ReceiptProblem::InvalidValue("sha256"))
        }
    }

    fn finish(self) -> Result<(), ReceiptProblem> {
        if self.seen == self.object.len() {
            Ok(())
        } else {
            Err(ReceiptProblem::UnexpectedField)
        }
    }
}

/// Parses the reply to a step whose receipt has kind `kind`; `read` takes the kind's fields.
/// `committed_allowed` admits `"committed": true` on error receipts (promote step only).
fn parse<T>(
    output: &str,
    nonce: &Nonce,
    kind: &'static str,
    committed_allowed: bool,
    read: impl FnOnce(&mut Fields) -> Result<T, ReceiptProblem>,
) -> Result<Reply<T>, ReceiptProblem> {
    let object = find_receipt(output, nonce)?;
    let mut fields = Fields { object, seen: 0 };
    let received_kind = match fields.get("kind") {
        Ok(Value::String(received)) => received.clone(),
        Ok(_) | Err(_) => return Err(ReceiptProblem::UnexpectedKind { expected: kind }),
    };
    if received_kind == "error" {
        let class_name = fields.string("type")?.to_owned();
        if !is_class_name(&class_name) {
            return Err(ReceiptProblem::InvalidValue("type"));
        }
        let committed = if committed_allowed && fields.has("committed") {
            if !fields.boolean("committed")? {
                return Err(ReceiptProblem::InvalidValue("committed"));
            }
            true
        } else {
            false
        };
        fields.finish()?;
        return Ok(Reply::Exception {
            class_name,
            committed,
        });
    }
    if received_kind != kind {
        return Err(ReceiptProblem::UnexpectedKind { expected: kind });
    }
    let value = read(&mut fields)?;
    fields.finish()?;
    Ok(Reply::Receipt(value))
}

/// `{"kind":"init"}`.
pub(crate) fn parse_create(output: &str, nonce: &Nonce) -> Result<Reply<()>, ReceiptProblem> {
    parse(output, nonce, "init", false, |_| Ok(()))
}

/// `{"kind":"chunks","offset":N,"bytes":N,"count":N}` with all three numbers as expected.
pub(crate) fn parse_append(
    output: &str,
    nonce: &Nonce,
    offset: u64,
    bytes: u64,
    count: u64,
) -> Result<Reply<()>, ReceiptProblem> {
    parse(output, nonce, "chunks", false, |fields| {
        fields.integer_equal("offset", offset)?;
        fields.integer_equal("bytes", bytes)?;
        fields.integer_equal("count", count)
    })
}

/// `{"kind":"done","bytes":N,"sha256":HEX}` with both as expected (upload promotion).
pub(crate) fn parse_promote(
    output: &str,
    nonce: &Nonce,
    bytes: u64,
    sha256: &str,
) -> Result<Reply<()>, ReceiptProblem> {
    parse(output, nonce, "done", true, |fields| {
        fields.integer_equal("bytes", bytes)?;
        if fields.sha256()? == sha256 {
            Ok(())
        } else {
            Err(ReceiptProblem::ValueMismatch("sha256"))
        }
    })
}

/// `{"kind":"clean","removed":BOOL}`.
pub(crate) fn parse_remove(output: &str, nonce: &Nonce) -> Result<Reply<bool>, ReceiptProblem> {
    parse(output, nonce, "clean", false, |fields| {
        fields.boolean("removed")
    })
}

/// `{"kind":"meta","bytes":N}`; the size is returned for the machine to judge.
pub(crate) fn parse_inspect(output: &str, nonce: &Nonce) -> Result<Reply<u64>, ReceiptProblem> {
    parse(output, nonce, "meta", false, |fields| {
        fields.integer("bytes")
    })
}

/// `{"kind":"chunks","offset":N,"bytes":N,"chunks":[{"bytes":N,"encoding":E,"data":BASE64}, ...]}`
/// for `len` bytes at `offset` in chunks of `chunk_size`: every chunk must be there, in order,
/// with its expected length, and decode to exactly that many bytes. Returns the bytes, joined.
pub(crate) fn parse_read(
    output: &str,
    mut buffers: Vec<Vec<u8>>,
    nonce: &Nonce,
    offset: u64,
    len: u64,
    chunk_size: u64,
) -> Result<Reply<Vec<u8>>, ReceiptProblem> {
    parse(output, nonce, "chunks", false, |fields| {
        fields.integer_equal("offset", offset)?;
        fields.integer_equal("bytes", len)?;
        let Value::Array(chunks) = fields.take("chunks")? else {
            return Err(ReceiptProblem::InvalidValue("chunks"));
        };
        let expected_count = len.div_ceil(chunk_size.max(1));
        if chunks.len() as u64 != expected_count {
            return Err(ReceiptProblem::NumberMismatch {
                field: "chunks",
                expected: expected_count,
                actual: chunks.len() as u64,
            });
        }
        let mut joined = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        for (index, chunk) in chunks.into_iter().enumerate() {
            let Value::Object(object) = chunk else {
                return Err(ReceiptProblem::InvalidValue("chunks"));
            };
            let expected = (len - joined.len() as u64).min(chunk_size);
            joined.extend(parse_chunk(object, expected, index, &mut buffers)?);
        }
        Ok(joined)
    })
}

/// Chunk `index` of a download receipt, that must decode to `expected` bytes: either
/// `{"bytes":N,"encoding":E,"data":BASE64}` or, when the kernel sent the chunks as binary
/// buffers, `{"bytes":N,"encoding":E,"buffer":I}` where `I` is the chunk's own index (each
/// chunk its own buffer, in order).
fn parse_chunk(
    object: Map<String, Value>,
    expected: u64,
    index: usize,
    buffers: &mut [Vec<u8>],
) -> Result<Vec<u8>, ReceiptProblem> {
    let mut fields = Fields { object, seen: 0 };
    fields.integer_equal("bytes", expected)?;
    let compressed = match fields.string("encoding")? {
        "raw" => false,
        "zlib" => true,
        _ => return Err(ReceiptProblem::InvalidValue("encoding")),
    };
    let encoded = if fields.has("buffer") {
        let named = fields.integer("buffer")?;
        if named != index as u64 {
            return Err(ReceiptProblem::NumberMismatch {
                field: "buffer",
                expected: index as u64,
                actual: named,
            });
        }
        fields.finish()?;
        let buffer = buffers
            .get_mut(index)
            .ok_or(ReceiptProblem::MissingBuffer { index })?;
        std::mem::take(buffer)
    } else {
        let Value::String(data) = fields.take("data")? else {
            return Err(ReceiptProblem::InvalidValue("data"));
        };
        fields.finish()?;
        BASE64
            .decode(data)
            .map_err(|_| ReceiptProblem::InvalidValue("data"))?
    };
    let decoded = if compressed {
        inflate_at_most(&encoded, expected)?
    } else {
        encoded
    };
    if decoded.len() as u64 == expected {
        Ok(decoded)
    } else {
        Err(ReceiptProblem::ChunkLength { expected })
    }
}

/// Inflates zlib data into a buffer one byte longer than `len`, so a hostile stream cannot
/// balloon memory: a stream that fills it is too long, which the caller's length check reports.
fn inflate_at_most(encoded: &[u8], len: u64) -> Result<Vec<u8>, ReceiptProblem> {
    let room =
        usize::try_from(len.saturating_add(1)).map_err(|_| ReceiptProblem::InvalidValue("data"))?;
    let mut decoded = vec![0; room];
    let (inflated, code) =
        zlib_rs::decompress_slice(&mut decoded, encoded, zlib_rs::InflateConfig::default());
    let inflated = inflated.len();
    let complete = code == zlib_rs::ReturnCode::Ok;
    // Out of room: more than `len` bytes, reported by the length check. Anything else that
    // did not end the stream (a truncated or corrupt one) is invalid data.
    if complete || (code == zlib_rs::ReturnCode::BufError && inflated == room) {
        decoded.truncate(inflated);
        Ok(decoded)
    } else {
        Err(ReceiptProblem::InvalidValue("data"))
    }
}

/// `{"kind":"done","bytes":N,"sha256":HEX}`; returned for the machine to compare (download).
pub(crate) fn parse_hash(
    output: &str,
    nonce: &Nonce,
) -> Result<Reply<(u64, String)>, ReceiptProblem> {
    parse(output, nonce, "done", false, |fields| {
        Ok((fields.integer("bytes")?, fields.sha256()?))
    })
}

/// Parses arbitrary bytes as a kernel reply to every kind of step, and drives both machines with
/// them as every reply. For fuzzing: it must never panic, whatever `data` holds.
pub fn check_reply_parsing(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(nonce) = Nonce::parse("fuzz-nonce") else {
        return;
    };
    // The same bytes serve as the reply's binary buffers too: the whole input, then its halves.
    let half = data.len() / 2;
    let buffers = vec![data.to_vec(), data[..half].to_vec(), data[half..].to_vec()];
    let _ = parse_create(&text, &nonce);
    let _ = parse_append(&text, &nonce, 0, 3, 2);
    let _ = parse_promote(&text, &nonce, 3, &"0".repeat(64));
    let _ = parse_remove(&text, &nonce);
    let _ = parse_inspect(&text, &nonce);
    let _ = parse_read(&text, Vec::new(), &nonce, 0, 3, 2);
    let _ = parse_read(&text, buffers.clone(), &nonce, 0, 3, 2);
    let _ = parse_hash(&text, &nonce);
    crate::machine::drive_with_constant_reply(&text.clone().into_owned().into(), &nonce);
    let reply = crate::machine::KernelOutput {
        stdout: text.into_owned(),
        buffers,
    };
    crate::machine::drive_with_constant_reply(&reply, &nonce);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce() -> Nonce {
        Nonce::parse("nonce-123").unwrap()
    }

    fn line(json: &str) -> String {
        format!("{RECEIPT_MARKER}nonce-123:{json}\n")
    }

    #[test]
    fn exactly_one_receipt_line_with_our_nonce_counts() {
        let good = line(r#"{"kind":"init"}"#);
        assert_eq!(parse_create(&good, &nonce()), Ok(Reply::Receipt(())));
        let noisy = format!("hello\n{}{good}tail", "x\r\n");
        assert_eq!(parse_create(&noisy, &nonce()), Ok(Reply::Receipt(())));
        let crlf = good.replace('\n', "\r\n");
        assert_eq!(parse_create(&crlf, &nonce()), Ok(Reply::Receipt(())));
        assert_eq!(parse_create("", &nonce()), Err(ReceiptProblem::Missing));
        let other = format!("{RECEIPT_MARKER}nonce-1234:{{\"kind\":\"init\"}}\n");
        assert_eq!(parse_create(&other, &nonce()), Err(ReceiptProblem::Missing));
        assert_eq!(
            parse_create(&format!("{good}{good}"), &nonce()),
            Err(ReceiptProblem::Repeated { count: 2 })
        );
        assert_eq!(
            parse_create(&format!("x{good}"), &nonce()),
            Err(ReceiptProblem::NotAtLineStart)
        );
        assert_eq!(
            parse_create(&line(r#"{"kind":"in"#), &nonce()),
            Err(ReceiptProblem::NotJson)
        );
        assert_eq!(
            parse_create(&line("[1]"), &nonce()),
            Err(ReceiptProblem::NotObject)
        );
        assert_eq!(
            parse_create(&line(r#"{"kind":"init","x":1}"#), &nonce()),
            Err(ReceiptProblem::UnexpectedField)
        );
        assert_eq!(
            parse_create(&line(r#"{"kind":"done"}"#), &nonce()),
            Err(ReceiptProblem::UnexpectedKind { expected: "init" })
        );
    }

    #[test]
    fn numbers_must_be_exact_non_negative_integers() {
        let check = |json: &str| parse_append(&line(json), &nonce(), 5, 7, 2);
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":5,"bytes":7}"#),
            Ok(Reply::Receipt(()))
        );
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":6,"bytes":7}"#),
            Err(ReceiptProblem::NumberMismatch {
                field: "offset",
                expected: 5,
                actual: 6
            })
        );
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":5.0,"bytes":7}"#),
            Err(ReceiptProblem::NotNonNegativeInteger("offset"))
        );
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":-5,"bytes":7}"#),
            Err(ReceiptProblem::NotNonNegativeInteger("offset"))
        );
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":"5","bytes":7}"#),
            Err(ReceiptProblem::NotNonNegativeInteger("offset"))
        );
        assert_eq!(
            check(r#"{"kind":"chunks","count":2,"offset":5}"#),
            Err(ReceiptProblem::MissingField("bytes"))
        );
        assert_eq!(
            parse_inspect(
                &line(r#"{"kind":"meta","bytes":9007199254740992}"#),
                &nonce()
            ),
            Err(ReceiptProblem::NotNonNegativeInteger("bytes"))
        );
    }

    #[test]
    fn exceptions_come_back_by_class_name_only() {
        let reply = parse_create(
            &line(r#"{"kind":"error","type":"PermissionError"}"#),
            &nonce(),
        );
        assert_eq!(
            reply,
            Ok(Reply::Exception {
                class_name: "PermissionError".into(),
                committed: false
            })
        );
        let reply = parse_create(
            &line(r#"{"kind":"error","type":"no such file: /secret"}"#),
            &nonce(),
        );
        assert_eq!(reply, Err(ReceiptProblem::InvalidValue("type")));
        let committed = line(r#"{"kind":"error","type":"PermissionError","committed":true}"#);
        assert_eq!(
            parse_create(&committed, &nonce()),
            Err(ReceiptProblem::UnexpectedField)
        );
        let sha = "a".repeat(64);
        assert_eq!(
            parse_promote(&committed, &nonce(), 1, &sha),
            Ok(Reply::Exception {
                class_name: "PermissionError".into(),
                committed: true
            })
        );
        let not_committed = line(r#"{"kind":"error","type":"PermissionError","committed":false}"#);
        assert_eq!(
            parse_promote(&not_committed, &nonce(), 1, &sha),
            Err(ReceiptProblem::InvalidValue("committed"))
        );
    }

    #[test]
    fn chunks_decode_raw_and_zlib_and_must_have_the_declared_length() {
        let batch = |offset: u64, bytes: u64, chunks: &[String]| {
            line(&format!(
                r#"{{"kind":"chunks","offset":{offset},"bytes":{bytes},"chunks":[{}]}}"#,
                chunks.join(",")
            ))
        };
        let chunk = |bytes: usize, encoding: &str, data: &[u8]| {
            format!(
                r#"{{"bytes":{bytes},"encoding":"{encoding}","data":"{}"}}"#,
                BASE64.encode(data)
            )
        };
        let raw = batch(0, 3, &[chunk(3, "raw", b"abc")]);
        assert_eq!(
            parse_read(&raw, Vec::new(), &nonce(), 0, 3, 4),
            Ok(Reply::Receipt(b"abc".to_vec()))
        );
        let packed = crate::request::EncodedChunk::encode(&[7u8; 4000]);
        let zlib = batch(8, 4000, &[chunk(4000, "zlib", &packed.encoded)]);
        assert_eq!(
            parse_read(&zlib, Vec::new(), &nonce(), 8, 4000, 4000),
            Ok(Reply::Receipt(vec![7u8; 4000]))
        );
        assert_eq!(
            parse_read(
                &zlib.replace("4000", "3999"),
                Vec::new(),
                &nonce(),
                8,
                3999,
                4000
            ),
            Err(ReceiptProblem::ChunkLength { expected: 3999 })
        );
        assert_eq!(
            parse_read(&raw.replace("raw", "gzip"), Vec::new(), &nonce(), 0, 3, 4),
            Err(ReceiptProblem::InvalidValue("encoding"))
        );
        assert_eq!(
            parse_read(&raw.replace("YWJj", "YWJ!"), Vec::new(), &nonce(), 0, 3, 4),
            Err(ReceiptProblem::InvalidValue("data"))
        );

        // A batch: every chunk in order, each with its own encoding, all of them there.
        let mixed = [
            chunk(2, "raw", b"ab"),
            chunk(2, "zlib", &crate::request::zlib_compress(b"cd")),
            chunk(1, "raw", b"e"),
        ];
        assert_eq!(
            parse_read(&batch(4, 5, &mixed), Vec::new(), &nonce(), 4, 5, 2),
            Ok(Reply::Receipt(b"abcde".to_vec()))
        );
        assert_eq!(
            parse_read(&batch(4, 5, &mixed[..2]), Vec::new(), &nonce(), 4, 5, 2),
            Err(ReceiptProblem::NumberMismatch {
                field: "chunks",
                expected: 3,
                actual: 2
            })
        );
        let swapped = [mixed[0].clone(), mixed[2].clone(), mixed[1].clone()];
        assert_eq!(
            parse_read(&batch(4, 5, &swapped), Vec::new(), &nonce(), 4, 5, 2),
            Err(ReceiptProblem::NumberMismatch {
                field: "bytes",
                expected: 2,
                actual: 1
            })
        );
        let extra_field = mixed[0].replace(r#""raw""#, r#""raw","x":1"#);
        assert_eq!(
            parse_read(
                &batch(4, 5, &[extra_field, mixed[1].clone(), mixed[2].clone()]),
                Vec::new(),
                &nonce(),
                4,
                5,
                2
            ),
            Err(ReceiptProblem::UnexpectedField)
        );
        assert_eq!(
            parse_read(
                &line(r#"{"kind":"chunks","offset":4,"bytes":5,"chunks":{}}"#),
                Vec::new(),
                &nonce(),
                4,
                5,
                2
            ),
            Err(ReceiptProblem::InvalidValue("chunks"))
        );
    }

    #[test]
    fn chunks_can_come_as_binary_buffers_named_by_their_index() {
        let reply = line(
            r#"{"kind":"chunks","offset":0,"bytes":5,"chunks":[{"bytes":2,"encoding":"raw","buffer":0},{"bytes":2,"encoding":"zlib","buffer":1},{"bytes":1,"encoding":"raw","data":"ZQ=="}]}"#,
        );
        let buffers = || vec![b"ab".to_vec(), crate::request::zlib_compress(b"cd")];
        assert_eq!(
            parse_read(&reply, buffers(), &nonce(), 0, 5, 2),
            Ok(Reply::Receipt(b"abcde".to_vec()))
        );
        // Fewer buffers than named, a chunk naming another chunk's buffer, a buffer of the
        // wrong length, and a field beside the buffer index are all refused.
        assert_eq!(
            parse_read(&reply, vec![b"ab".to_vec()], &nonce(), 0, 5, 2),
            Err(ReceiptProblem::MissingBuffer { index: 1 })
        );
        assert_eq!(
            parse_read(
                &reply.replace(r#""buffer":1"#, r#""buffer":0"#),
                buffers(),
                &nonce(),
                0,
                5,
                2
            ),
            Err(ReceiptProblem::NumberMismatch {
                field: "buffer",
                expected: 1,
                actual: 0
            })
        );
        assert_eq!(
            parse_read(
                &reply,
                vec![b"abc".to_vec(), buffers()[1].clone()],
                &nonce(),
                0,
                5,
                2
            ),
            Err(ReceiptProblem::ChunkLength { expected: 2 })
        );
        assert_eq!(
            parse_read(
                &reply.replace(r#""buffer":0"#, r#""buffer":0,"data":"YWI=""#),
                buffers(),
                &nonce(),
                0,
                5,
                2
            ),
            Err(ReceiptProblem::UnexpectedField)
        );
        // A truncated zlib buffer is invalid data, not a short chunk.
        let mut truncated = buffers();
        truncated[1].pop();
        assert_eq!(
            parse_read(&reply, truncated, &nonce(), 0, 5, 2),
            Err(ReceiptProblem::InvalidValue("data"))
        );
    }

    #[test]
    fn hashes_must_be_lowercase_hex() {
        let upper = line(&format!(
            r#"{{"kind":"done","bytes":1,"sha256":"{}"}}"#,
            "A".repeat(64)
        ));
        assert_eq!(
            parse_hash(&upper, &nonce()),
            Err(ReceiptProblem::InvalidValue("sha256"))
        );
        let short = line(r#"{"kind":"done","bytes":1,"sha256":"abc"}"#);
        assert_eq!(
            parse_hash(&short, &nonce()),
            Err(ReceiptProblem::InvalidValue("sha256"))
        );
    }

    #[test]
    fn the_fuzz_seeds_are_valid_batch_receipts() {
        // `check_reply_parsing` reads them with these expectations; valid seeds let the fuzzer
        // start from receipts that get past the envelope.
        let nonce = Nonce::parse("fuzz-nonce").unwrap();
        let seed = |name: &str| {
            let path = format!(
                "{}/../../fuzz/seeds/transfer_reply_parsing/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            std::fs::read_to_string(path).unwrap()
        };
        assert_eq!(
            parse_append(&seed("append.txt"), &nonce, 0, 3, 2),
            Ok(Reply::Receipt(()))
        );
        for name in ["read_raw.txt", "read_zlib.txt"] {
            assert_eq!(
                parse_read(&seed(name), Vec::new(), &nonce, 0, 3, 2),
                Ok(Reply::Receipt(b"abc".to_vec())),
                "{name}"
            );
        }
    }

    #[test]
    fn the_fuzz_entry_point_survives_odd_input() {
        for sample in [
            &b""[..],
            b"\xff\xfe",
            b"__JUPYTER_MCP_FILE_RECEIPT__fuzz-nonce:{\"kind\":\"error\",\"type\":\"X\"}",
            b"__JUPYTER_MCP_FILE_RECEIPT__fuzz-nonce:{\"kind\":\"chunks\",\"offset\":0,\"bytes\":3,\"chunks\":[{\"bytes\":2,\"encoding\":\"zlib\",\"data\":\"eJw=\"}]}",
        ] {
            check_reply_parsing(sample);
        }
    }
}
