//! Jupyter messages on the kernel WebSocket of a Jupyter Server, both ways, in both protocols.
//!
//! - The JSON protocol (the default when no subprotocol is agreed): a text frame holds one
//!   message as JSON with a `channel` field. A message with binary buffers comes as a binary
//!   frame: a big-endian `u32` count `n`, `n` big-endian `u32` offsets (the first is the JSON
//!   part, the others the buffers), then the parts.
//! - `v1.kernel.websocket.jupyter.org`: every message is a binary frame. A little-endian `u64`
//!   count `n` of offsets, `n` little-endian `u64` offsets, then the channel name and the
//!   message parts (header, parent header, metadata, content, buffers...), each part running
//!   from its offset to the next one.
//!
//! Pure functions: bytes in, messages out, and back. Malformed frames give `None`; nothing here
//! panics on what a server sends.

use serde_json::{Value, json};

use crate::wire::WireMessage;

/// The binary subprotocol's name, as offered in `Sec-WebSocket-Protocol`.
pub(crate) const V1_SUBPROTOCOL: &str = "v1.kernel.websocket.jupyter.org";

/// The Jupyter messaging protocol version our requests claim.
const PROTOCOL_VERSION: &str = "5.3";

/// Which framing the server agreed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Json,
    V1,
}

impl Protocol {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Protocol::Json => "json",
            Protocol::V1 => V1_SUBPROTOCOL,
        }
    }
}

/// A WebSocket payload, before it becomes a tungstenite message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    Text(String),
    Binary(Vec<u8>),
}

impl Frame {
    pub(crate) fn len(&self) -> usize {
        match self {
            Frame::Text(text) => text.len(),
            Frame::Binary(bytes) => bytes.len(),
        }
    }
}

/// A request this client sends: a header of its own, a content and binary buffers; empty
/// parent and metadata.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outgoing {
    pub channel: &'static str,
    pub msg_id: String,
    pub header: Value,
    pub content: Value,
    pub buffers: Vec<Vec<u8>>,
}

impl Outgoing {
    /// A message of `msg_type` for `channel` (`shell`, or `stdin` for an `input_reply`).
    pub(crate) fn on_channel(
        channel: &'static str,
        msg_type: &str,
        content: Value,
        session: &str,
        msg_id: String,
        date: String,
    ) -> Self {
        let header = json!({
            "msg_id": msg_id,
            "msg_type": msg_type,
            "session": session,
            "username": "jupyter-mcp",
            "date": date,
            "version": PROTOCOL_VERSION,
        });
        Outgoing {
            channel,
            msg_id,
            header,
            content,
            buffers: Vec::new(),
        }
    }

    /// The frame for `protocol`. With buffers, the JSON protocol's frame is binary: Jupyter
    /// Server's layout of a message with buffers (part count, offsets, the JSON, the buffers).
    pub(crate) fn encode(&self, protocol: Protocol) -> Frame {
        match protocol {
            Protocol::Json => {
                let message = json!({
                    "channel": self.channel,
                    "header": self.header,
                    "parent_header": {},
                    "metadata": {},
                    "content": self.content,
                    "buffers": [],
                })
                .to_string();
                if self.buffers.is_empty() {
                    Frame::Text(message)
                } else {
                    Frame::Binary(encode_json_binary(message.as_bytes(), &self.buffers))
                }
            }
            Protocol::V1 => {
                let mut parts = vec![
                    self.header.to_string().into_bytes(),
                    b"{}".to_vec(),
                    b"{}".to_vec(),
                    self.content.to_string().into_bytes(),
                ];
                parts.extend(self.buffers.iter().cloned());
                Frame::Binary(encode_v1(self.channel, &parts))
            }
        }
    }
}

/// Lays out a JSON-protocol message with buffers: the number of parts, each part's offset
/// (big-endian u32), then the JSON and the buffers.
fn encode_json_binary(message: &[u8], buffers: &[Vec<u8>]) -> Vec<u8> {
    let count = 1 + buffers.len();
    let header_len = 4 * (count + 1);
    let total = header_len + message.len() + buffers.iter().map(Vec::len).sum::<usize>();
    let mut frame = Vec::with_capacity(total);
    frame.extend_from_slice(&(count as u32).to_be_bytes());
    let mut offset = header_len;
    frame.extend_from_slice(&(offset as u32).to_be_bytes());
    offset += message.len();
    for buffer in buffers {
        frame.extend_from_slice(&(offset as u32).to_be_bytes());
        offset += buffer.len();
    }
    frame.extend_from_slice(message);
    for buffer in buffers {
        frame.extend_from_slice(buffer);
    }
    frame
}

/// Lays out a v1 frame: offsets, channel, parts.
pub fn encode_v1(channel: &str, parts: &[Vec<u8>]) -> Vec<u8> {
    // The offsets: the channel's start, then each part's start, then the end.
    let count = parts.len() + 2;
    let mut offsets = Vec::with_capacity(count);
    offsets.push(8 * (1 + count));
    offsets.push(offsets[0] + channel.len());
    for part in parts {
        offsets.push(offsets[offsets.len() - 1] + part.len());
    }
    let total = offsets[offsets.len() - 1];
    let mut frame = Vec::with_capacity(total);
    frame.extend_from_slice(&(count as u64).to_le_bytes());
    for offset in &offsets {
        frame.extend_from_slice(&(*offset as u64).to_le_bytes());
    }
    frame.extend_from_slice(channel.as_bytes());
    for part in parts {
        frame.extend_from_slice(part);
    }
    frame
}

/// Splits a v1 frame into its channel and parts.
pub fn split_v1(frame: &[u8]) -> Option<(&str, Vec<&[u8]>)> {
    let read_u64 = |at: usize| -> Option<usize> {
        let bytes: [u8; 8] = frame.get(at..at.checked_add(8)?)?.try_into().ok()?;
        usize::try_from(u64::from_le_bytes(bytes)).ok()
    };
    let count = read_u64(0)?;
    // A channel needs two offsets; a frame cannot hold more offsets than it has bytes.
    if count < 2 || count > frame.len() / 8 {
        return None;
    }
    let offsets = (1..=count)
        .map(|index| read_u64(8 * index))
        .collect::<Option<Vec<_>>>()?;
    if offsets.windows(2).any(|pair| pair[0] > pair[1])
        || offsets[0] < 8 * (1 + count)
        || offsets[count - 1] > frame.len()
    {
        return None;
    }
    let channel = std::str::from_utf8(&frame[offsets[0]..offsets[1]]).ok()?;
    let parts = offsets[1..]
        .windows(2)
        .map(|pair| &frame[pair[0]..pair[1]])
        .collect();
    Some((channel, parts))
}

/// A message received on the WebSocket, with the channel it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Incoming {
    pub channel: String,
    pub message: WireMessage,
    /// The message's metadata (`Null` when it has none).
    pub metadata: Value,
}

/// Reads a text frame (JSON protocol).
pub(crate) fn decode_text(text: &str) -> Option<Incoming> {
    let value: Value = serde_json::from_str(text).ok()?;
    from_json_message(value)
}

/// Reads a binary frame: a v1 message, or a JSON-protocol message with buffers.
pub(crate) fn decode_binary(protocol: Protocol, frame: &[u8]) -> Option<Incoming> {
    match protocol {
        Protocol::V1 => {
            let (channel, parts) = split_v1(frame)?;
            let [header, parent, metadata, content, buffers @ ..] = parts.as_slice() else {
                return None;
            };
            let header: Value = serde_json::from_slice(header).ok()?;
            let parent: Value = serde_json::from_slice(parent).unwrap_or(Value::Null);
            let content: Value = serde_json::from_slice(content).ok()?;
            let buffers = buffers.iter().map(|buffer| buffer.to_vec()).collect();
            Some(Incoming {
                channel: channel.to_owned(),
                message: WireMessage::from_parts(&header, &parent, content)?.with_buffers(buffers),
                metadata: serde_json::from_slice(metadata).unwrap_or(Value::Null),
            })
        }
        Protocol::Json => {
            let read_u32 = |at: usize| -> Option<usize> {
                let bytes: [u8; 4] = frame.get(at..at.checked_add(4)?)?.try_into().ok()?;
                usize::try_from(u32::from_be_bytes(bytes)).ok()
            };
            let count = read_u32(0)?;
            if count == 0 || count > frame.len() / 4 {
                return None;
            }
            // Part `index` runs from its offset to the next part's (the last to the end).
            let part = |index: usize| -> Option<&[u8]> {
                let start = read_u32(4 + 4 * index)?;
                let end = if index + 1 < count {
                    read_u32(8 + 4 * index)?
                } else {
                    frame.len()
                };
                frame.get(start..end)
            };
            let value: Value = serde_json::from_slice(part(0)?).ok()?;
            let buffers = (1..count)
                .map(|index| part(index).map(<[u8]>::to_vec))
                .collect::<Option<Vec<_>>>()?;
            let mut incoming = from_json_message(value)?;
            incoming.message.buffers = buffers;
            Some(incoming)
        }
    }
}

fn from_json_message(mut value: Value) -> Option<Incoming> {
    let channel = value.get("channel")?.as_str()?.to_owned();
    let content = value.get_mut("content").map(Value::take)?;
    let header = value.get("header")?;
    let parent = value.get("parent_header").unwrap_or(&Value::Null);
    Some(Incoming {
        channel,
        message: WireMessage::from_parts(header, parent, content)?,
        metadata: value.get("metadata").cloned().unwrap_or(Value::Null),
    })
}

/// The current time as ISO 8601 in UTC with microseconds, as Jupyter headers carry it.
pub(crate) fn iso_date(since_epoch: std::time::Duration) -> String {
    let seconds = since_epoch.as_secs();
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since_epoch.subsec_micros()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
            .collect()
    }

    /// What jupyter_server 2.21's `serialize_msg_to_ws_v1([b"h", b"pa", b"", b"content"],
    /// "iopub")` returns, byte for byte.
    const SERVER_V1_FRAME: &str = concat!(
        "0600000000000000",
        "3800000000000000",
        "3d00000000000000",
        "3e00000000000000",
        "4000000000000000",
        "4000000000000000",
        "4700000000000000",
        "696f707562",
        "68",
        "7061",
        "636f6e74656e74",
    );

    #[test]
    fn v1_layout_matches_the_server() {
        let parts = [
            b"h".to_vec(),
            b"pa".to_vec(),
            Vec::new(),
            b"content".to_vec(),
        ];
        assert_eq!(encode_v1("iopub", &parts), hex(SERVER_V1_FRAME));
        let frame = hex(SERVER_V1_FRAME);
        let (channel, split) = split_v1(&frame).unwrap();
        assert_eq!(channel, "iopub");
        assert_eq!(split, [&b"h"[..], b"pa", b"", b"content"]);
    }

    #[test]
    fn malformed_v1_frames_are_rejected_not_panicked_on() {
        assert_eq!(split_v1(&[]), None);
        assert_eq!(split_v1(&hex("0100000000000000")), None);
        // Offsets beyond the frame.
        let mut frame = hex(SERVER_V1_FRAME);
        frame.truncate(frame.len() - 1);
        assert_eq!(split_v1(&frame), None);
        // A huge count.
        let mut frame = hex(SERVER_V1_FRAME);
        frame[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(split_v1(&frame), None);
        // Offsets that go backwards.
        let mut frame = hex(SERVER_V1_FRAME);
        frame[16..24].copy_from_slice(&0x30u64.to_le_bytes());
        assert_eq!(split_v1(&frame), None);
    }

    fn request() -> Outgoing {
        Outgoing::on_channel(
            "shell",
            "execute_request",
            json!({"code": "1 + 1", "silent": false}),
            "session-1",
            "msg-1".into(),
            "2026-11-30T12:00:00.000000Z".into(),
        )
    }

    #[test]
    fn a_request_round_trips_through_both_protocols() {
        let outgoing = request();
        for protocol in [Protocol::Json, Protocol::V1] {
            let incoming = match outgoing.encode(protocol) {
                Frame::Text(text) => decode_text(&text),
                Frame::Binary(bytes) => decode_binary(protocol, &bytes),
            }
            .unwrap();
            assert_eq!(incoming.channel, "shell");
            assert_eq!(incoming.message.msg_type, "execute_request");
            assert_eq!(incoming.message.msg_id, "msg-1");
            assert_eq!(incoming.message.parent_msg_id, None);
            assert_eq!(incoming.message.content["code"], "1 + 1");
        }
        assert!(matches!(outgoing.encode(Protocol::Json), Frame::Text(_)));
        assert!(matches!(outgoing.encode(Protocol::V1), Frame::Binary(_)));
    }

    #[test]
    fn buffers_travel_as_extra_parts_in_both_protocols() {
        let mut outgoing = request();
        outgoing.buffers = vec![b"\x00\x01\x02".to_vec(), Vec::new(), b"tail".to_vec()];
        // JSON protocol: Jupyter Server's binary layout, offsets big-endian from the start.
        let Frame::Binary(frame) = outgoing.encode(Protocol::Json) else {
            panic!("a message with buffers is a binary frame");
        };
        let read = |at: usize| u32::from_be_bytes(frame[at..at + 4].try_into().unwrap()) as usize;
        assert_eq!(read(0), 4);
        let offsets: Vec<usize> = (1..=4).map(|index| read(4 * index)).collect();
        assert_eq!(offsets[0], 20);
        assert_eq!(&frame[offsets[1]..offsets[2]], b"\x00\x01\x02");
        assert_eq!(offsets[2], offsets[3], "an empty buffer");
        assert_eq!(&frame[offsets[3]..], b"tail");
        let incoming = decode_binary(Protocol::Json, &frame).unwrap();
        assert_eq!(incoming.message.content["code"], "1 + 1");
        assert_eq!(incoming.message.buffers, outgoing.buffers);
        // v1: header, parent, metadata, content, then the buffers.
        let Frame::Binary(frame) = outgoing.encode(Protocol::V1) else {
            panic!("v1 is binary");
        };
        let (channel, parts) = split_v1(&frame).unwrap();
        assert_eq!(channel, "shell");
        assert_eq!(parts.len(), 7);
        assert_eq!(parts[4], b"\x00\x01\x02");
        assert!(parts[5].is_empty());
        assert_eq!(parts[6], b"tail");
        let incoming = decode_binary(Protocol::V1, &frame).unwrap();
        assert_eq!(incoming.message.buffers, outgoing.buffers);
    }

    #[test]
    fn json_messages_with_buffers_are_read() {
        // What `serialize_binary_message` makes of a message with one buffer.
        let json = json!({
            "channel": "iopub",
            "header": {"msg_id": "out-1", "msg_type": "display_data"},
            "parent_header": {"msg_id": "msg-1"},
            "metadata": {},
            "content": {"data": {"text/plain": "x"}, "metadata": {}},
        })
        .to_string();
        let buffer = b"\x00\x01\x02";
        let mut frame = Vec::new();
        frame.extend_from_slice(&2u32.to_be_bytes());
        frame.extend_from_slice(&12u32.to_be_bytes());
        frame.extend_from_slice(&(12 + json.len() as u32).to_be_bytes());
        frame.extend_from_slice(json.as_bytes());
        frame.extend_from_slice(buffer);
        let incoming = decode_binary(Protocol::Json, &frame).unwrap();
        assert_eq!(incoming.channel, "iopub");
        assert_eq!(incoming.message.parent_msg_id.as_deref(), Some("msg-1"));
        assert_eq!(incoming.message.buffers, vec![buffer.to_vec()]);
        assert_eq!(decode_binary(Protocol::Json, &frame[..10]), None);
        // A buffer offset past the end of the frame is not a message.
        let mut bad = frame.clone();
        bad[8..12].copy_from_slice(&(frame.len() as u32 + 1).to_be_bytes());
        assert_eq!(decode_binary(Protocol::Json, &bad), None);
    }

    #[test]
    fn server_json_messages_keep_their_content() {
        let text = r#"{"header": {"msg_id": "r1", "msg_type": "execute_reply", "date": "2026-11-30T12:00:00.000000Z"},
            "msg_id": "r1", "msg_type": "execute_reply", "parent_header": {"msg_id": "msg-1"},
            "metadata": {}, "content": {"status": "ok", "execution_count": 3}, "buffers": [], "channel": "shell"}"#;
        let incoming = decode_text(text).unwrap();
        assert_eq!(incoming.message.content["execution_count"], 3);
        assert_eq!(decode_text("not json"), None);
        assert_eq!(decode_text(r#"{"header": {}}"#), None);
    }

    #[test]
    fn dates_are_iso_8601_utc() {
        use std::time::Duration;
        assert_eq!(
            iso_date(Duration::from_micros(0)),
            "1970-01-01T00:00:00.000000Z"
        );
        // 2026-11-30T12:34:56.789012Z
        assert_eq!(
            iso_date(Duration::from_micros(1_796_042_096_789_012)),
            "2026-11-30T12:34:56.789012Z"
        );
        // A leap day.
        assert_eq!(
            iso_date(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00.000000Z"
        );
    }
}
