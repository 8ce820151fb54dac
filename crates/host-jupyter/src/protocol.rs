//! The messages of a jupyter-collaboration room: the y-websocket framing (one message per
//! WebSocket frame) of the Yjs sync and awareness protocols, plus Jupyter's own message type 2.
//!
//! The server reads only the first message of a frame, so every message is its own frame.
//! Type 2 is y-protocols' `auth` elsewhere; jupyter-collaboration uses it for save requests
//! (`"save"` and an id, client to server) and JSON replies (save results, `conflict`), so it is
//! parsed here before anything hands a frame to yrs' decoder.

use serde::Deserialize;
use yrs::encoding::read::{Cursor, Read};
use yrs::encoding::write::Write;
use yrs::sync::{AwarenessUpdate, Message, SyncMessage};
use yrs::updates::decoder::Decode;
use yrs::updates::encoder::{Encode, Encoder, EncoderV1};

/// y-websocket's sync message type.
const SYNC: u64 = 0;
/// y-websocket's awareness message type.
const AWARENESS: u64 = 1;
/// jupyter-collaboration's own message type (y-protocols' `auth` number).
const JUPYTER: u64 = 2;

/// One message received from a room.
#[derive(Debug, PartialEq)]
pub enum RoomMessage {
    /// A Yjs sync message: step 1 (a state vector), step 2 or an update (v1 updates).
    Sync(SyncMessage),
    /// Awareness states of some clients.
    Awareness(AwarenessUpdate),
    /// A reply of the server's own protocol.
    Jupyter(JupyterReply),
    /// A message type nothing here uses (awareness queries, chat); ignored.
    Other(u64),
}

/// What the server says in its own message type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JupyterReply {
    /// The answer to the save request `id`.
    Saved {
        /// The id the request carried.
        id: u64,
        /// What the server did.
        status: SaveStatus,
    },
    /// An update of ours could not be applied (our document's history diverged from the
    /// room's): the document must be fetched afresh.
    Conflict,
    /// Any other JSON the server sends.
    Unknown,
}

/// The outcome of a save request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveStatus {
    /// The file was written.
    Success,
    /// Nothing to write (the file already holds the document).
    Skipped,
    /// Writing failed (the server logs why).
    Failed,
}

/// A frame that is not a room message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a malformed message from the collaboration room: {0}")]
pub struct ProtocolError(String);

#[derive(Deserialize)]
struct ReplyJson {
    #[serde(rename = "type")]
    kind: String,
    #[serde(rename = "responseTo")]
    response_to: Option<u64>,
    status: Option<String>,
}

/// Reads one frame.
pub fn decode(frame: &[u8]) -> Result<RoomMessage, ProtocolError> {
    let mut cursor = Cursor::new(frame);
    let kind: u64 = cursor
        .read_var()
        .map_err(|failure| ProtocolError(failure.to_string()))?;
    match kind {
        SYNC | AWARENESS => match Message::decode_v1(frame) {
            Ok(Message::Sync(sync)) => Ok(RoomMessage::Sync(sync)),
            Ok(Message::Awareness(update)) => Ok(RoomMessage::Awareness(update)),
            Ok(_) => Ok(RoomMessage::Other(kind)),
            Err(failure) => Err(ProtocolError(failure.to_string())),
        },
        JUPYTER => {
            let text = cursor
                .read_string()
                .map_err(|failure| ProtocolError(failure.to_string()))?;
            Ok(RoomMessage::Jupyter(reply(text)))
        }
        other => Ok(RoomMessage::Other(other)),
    }
}

fn reply(text: &str) -> JupyterReply {
    let Ok(parsed) = serde_json::from_str::<ReplyJson>(text) else {
        return JupyterReply::Unknown;
    };
    match (parsed.kind.as_str(), parsed.response_to) {
        ("save", Some(id)) => JupyterReply::Saved {
            id,
            status: match parsed.status.as_deref() {
                Some("success") => SaveStatus::Success,
                Some("skipped") => SaveStatus::Skipped,
                _ => SaveStatus::Failed,
            },
        },
        ("conflict", _) => JupyterReply::Conflict,
        _ => JupyterReply::Unknown,
    }
}

/// A sync message as one frame.
pub fn sync_frame(message: SyncMessage) -> Vec<u8> {
    Message::Sync(message).encode_v1()
}

/// An awareness update as one frame.
pub fn awareness_frame(update: AwarenessUpdate) -> Vec<u8> {
    Message::Awareness(update).encode_v1()
}

/// A save request with `id` as one frame.
pub fn save_frame(id: u64) -> Vec<u8> {
    let mut encoder = EncoderV1::new();
    encoder.write_var(JUPYTER);
    encoder.write_string("save");
    encoder.write_var(id);
    encoder.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::StateVector;

    fn jupyter_frame(text: &str) -> Vec<u8> {
        let mut encoder = EncoderV1::new();
        encoder.write_var(JUPYTER);
        encoder.write_string(text);
        encoder.to_vec()
    }

    #[test]
    fn sync_messages_round_trip_one_per_frame() {
        let frame = sync_frame(SyncMessage::SyncStep1(StateVector::default()));
        assert_eq!(frame, [0, 0, 1, 0]);
        assert_eq!(
            decode(&frame).unwrap(),
            RoomMessage::Sync(SyncMessage::SyncStep1(StateVector::default()))
        );
        let update = sync_frame(SyncMessage::Update(vec![0, 0]));
        assert_eq!(
            decode(&update).unwrap(),
            RoomMessage::Sync(SyncMessage::Update(vec![0, 0]))
        );
    }

    #[test]
    fn type_two_is_jupyters_save_protocol_not_auth() {
        assert_eq!(save_frame(7), [2, 4, b's', b'a', b'v', b'e', 7]);
        let saved = jupyter_frame(r#"{"type": "save", "responseTo": 7, "status": "success"}"#);
        assert_eq!(
            decode(&saved).unwrap(),
            RoomMessage::Jupyter(JupyterReply::Saved {
                id: 7,
                status: SaveStatus::Success
            })
        );
        let skipped = jupyter_frame(r#"{"type":"save","responseTo":8,"status":"skipped"}"#);
        assert!(matches!(
            decode(&skipped).unwrap(),
            RoomMessage::Jupyter(JupyterReply::Saved {
                status: SaveStatus::Skipped,
                ..
            })
        ));
        let failed = jupyter_frame(r#"{"type":"save","responseTo":9,"status":"failed"}"#);
        assert!(matches!(
            decode(&failed).unwrap(),
            RoomMessage::Jupyter(JupyterReply::Saved {
                status: SaveStatus::Failed,
                ..
            })
        ));
        assert_eq!(
            decode(&jupyter_frame(r#"{"type":"conflict"}"#)).unwrap(),
            RoomMessage::Jupyter(JupyterReply::Conflict)
        );
        assert_eq!(
            decode(&jupyter_frame("not json")).unwrap(),
            RoomMessage::Jupyter(JupyterReply::Unknown)
        );
    }

    #[test]
    fn unknown_types_are_ignored_and_garbage_is_an_error() {
        assert_eq!(decode(&[3]).unwrap(), RoomMessage::Other(3));
        assert_eq!(decode(&[125, 1, 2]).unwrap(), RoomMessage::Other(125));
        assert!(decode(&[]).is_err());
        assert!(decode(&[0, 1, 200]).is_err());
    }
}
