//! ZeroMQ frames into [`WireMessage`]s.

use jupyter_zmq_client::RawMessage;
use serde_json::Value;

use crate::wire::WireMessage;

impl WireMessage {
    /// Parses the four JSON frames of an already verified raw message.
    pub(crate) fn from_raw(raw: &RawMessage) -> Option<WireMessage> {
        let [header, parent, _metadata, content, ..] = raw.jparts.as_slice() else {
            return None;
        };
        let header: Value = serde_json::from_slice(header).ok()?;
        let parent: Value = serde_json::from_slice(parent).unwrap_or(Value::Null);
        let content: Value = serde_json::from_slice(content).ok()?;
        let buffers = raw.jparts[4..].iter().map(|part| part.to_vec()).collect();
        Some(WireMessage::from_parts(&header, &parent, content)?.with_buffers(buffers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execute::ExecuteEvent;
    use crate::wire::{IopubItem, iopub_item};
    use bytes::Bytes;
    use serde_json::json;

    fn raw(header: Value, parent: Value, content: Value) -> RawMessage {
        RawMessage {
            zmq_identities: Vec::new(),
            jparts: vec![
                Bytes::from(header.to_string()),
                Bytes::from(parent.to_string()),
                Bytes::from("{}"),
                Bytes::from(content.to_string()),
            ],
        }
    }

    #[test]
    fn raw_message_with_empty_parent_has_no_parent_id() {
        let message = WireMessage::from_raw(&raw(
            json!({"msg_type": "status", "msg_id": "a"}),
            json!({}),
            json!({"execution_state": "starting"}),
        ))
        .unwrap();
        assert_eq!(message.parent_msg_id, None);
        assert_eq!(iopub_item(message), IopubItem::Ignored);
    }

    #[test]
    fn frames_after_the_content_are_the_buffers_of_a_display() {
        let mut message = raw(
            json!({"msg_type": "display_data", "msg_id": "d"}),
            json!({"msg_id": "request"}),
            json!({"data": {}, "metadata": {}}),
        );
        message.jparts.push(Bytes::from_static(b"\x00\xff"));
        message.jparts.push(Bytes::new());
        let message = WireMessage::from_raw(&message).unwrap();
        let expected = vec![b"\x00\xff".to_vec(), Vec::new()];
        assert_eq!(message.buffers, expected);
        let IopubItem::Output(ExecuteEvent::DisplayData { buffers, .. }) = iopub_item(message)
        else {
            panic!("a display_data is an output");
        };
        assert_eq!(buffers, expected);
    }

    #[test]
    fn raw_message_without_msg_type_is_rejected() {
        assert_eq!(
            WireMessage::from_raw(&raw(json!({"msg_id": "a"}), json!({}), json!({}))),
            None
        );
    }
}
