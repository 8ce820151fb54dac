//! Incoming Jupyter messages, kept as raw JSON and converted into this crate's types.
//!
//! Both transports (ZeroMQ frames and the kernel WebSocket of a Jupyter Server) end up here.
//! Incoming messages are parsed as raw JSON rather than through typed message content: raw
//! JSON keeps MIME bundles and metadata byte-for-byte, and a message type we do not know (or a
//! kernel that bends the schema) never fails the whole channel.

use serde_json::Value;

use crate::execute::{
    ErrorOutput, ExecuteEvent, ExecuteReply, JsonObject, ReplyStatus, StreamName,
};
use crate::status::{KernelInfo, KernelStatus};

/// One received message: the header fields we route on and the raw content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WireMessage {
    pub msg_type: String,
    pub msg_id: String,
    /// `parent_header.msg_id`, absent when the parent header is empty.
    pub parent_msg_id: Option<String>,
    /// `header.session`: the sender's session, which is new for every kernel process (and
    /// the server's own for a status it writes itself). Empty when the header lacks it.
    pub session: String,
    pub content: Value,
    /// The binary buffers after the content (none for most messages).
    pub buffers: Vec<Vec<u8>>,
}

impl WireMessage {
    /// Reads the routing fields from a message's header, parent header and content. `None`
    /// when the header lacks a type or id.
    pub(crate) fn from_parts(header: &Value, parent: &Value, content: Value) -> Option<Self> {
        Some(WireMessage {
            msg_type: header.get("msg_type")?.as_str()?.to_owned(),
            msg_id: header.get("msg_id")?.as_str()?.to_owned(),
            parent_msg_id: parent
                .get("msg_id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
            session: header
                .get("session")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            content,
            buffers: Vec::new(),
        })
    }

    /// The message with these binary buffers.
    pub(crate) fn with_buffers(mut self, buffers: Vec<Vec<u8>>) -> Self {
        self.buffers = buffers;
        self
    }

    #[cfg(test)]
    pub(crate) fn for_test(msg_type: &str, parent: Option<&str>, content: Value) -> Self {
        WireMessage {
            msg_type: msg_type.to_owned(),
            msg_id: format!("{msg_type}-id"),
            parent_msg_id: parent.map(str::to_owned),
            session: String::new(),
            content,
            buffers: Vec::new(),
        }
    }
}

/// What an IOPub message means to the router.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum IopubItem {
    /// `status` with a busy or idle state.
    Status(KernelStatus),
    /// An output of the parent request.
    Output(ExecuteEvent),
    /// Anything we do not route (comms, `starting`, welcome messages, ...).
    Ignored,
}

/// Takes the message, so a display's buffers move into its event rather than being copied.
pub(crate) fn iopub_item(message: WireMessage) -> IopubItem {
    let WireMessage {
        msg_type,
        content,
        buffers,
        ..
    } = message;
    let content = &content;
    match msg_type.as_str() {
        "status" => match str_field(content, "execution_state").as_str() {
            "busy" => IopubItem::Status(KernelStatus::Busy),
            "idle" => IopubItem::Status(KernelStatus::Idle),
            _ => IopubItem::Ignored,
        },
        "stream" => IopubItem::Output(ExecuteEvent::Stream {
            name: if str_field(content, "name") == "stderr" {
                StreamName::Stderr
            } else {
                StreamName::Stdout
            },
            text: str_field(content, "text"),
        }),
        "execute_input" => IopubItem::Output(ExecuteEvent::Input {
            code: str_field(content, "code"),
            execution_count: count_field(content),
        }),
        "execute_result" => IopubItem::Output(ExecuteEvent::ExecuteResult {
            execution_count: count_field(content),
            data: object_field(content, "data"),
            metadata: object_field(content, "metadata"),
        }),
        "display_data" => IopubItem::Output(ExecuteEvent::DisplayData {
            data: object_field(content, "data"),
            metadata: object_field(content, "metadata"),
            display_id: display_id(content),
            buffers,
        }),
        "update_display_data" => IopubItem::Output(ExecuteEvent::UpdateDisplayData {
            data: object_field(content, "data"),
            metadata: object_field(content, "metadata"),
            display_id: display_id(content),
        }),
        "error" => IopubItem::Output(ExecuteEvent::Error(error_output(content))),
        "clear_output" => IopubItem::Output(ExecuteEvent::ClearOutput {
            wait: content
                .get("wait")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        }),
        _ => IopubItem::Ignored,
    }
}

pub(crate) fn execute_reply(content: &Value) -> ExecuteReply {
    let status = match str_field(content, "status").as_str() {
        "error" => ReplyStatus::Error,
        "aborted" => ReplyStatus::Aborted,
        _ => ReplyStatus::Ok,
    };
    ExecuteReply {
        status,
        execution_count: count_field(content),
        user_expressions: object_field(content, "user_expressions"),
        payload: content
            .get("payload")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        error: (status == ReplyStatus::Error).then(|| error_output(content)),
    }
}

pub(crate) fn kernel_info(content: &Value) -> KernelInfo {
    let language_info = content.get("language_info").unwrap_or(&Value::Null);
    KernelInfo {
        language: str_field(language_info, "name"),
        language_version: str_field(language_info, "version"),
        implementation: str_field(content, "implementation"),
        implementation_version: str_field(content, "implementation_version"),
        protocol_version: str_field(content, "protocol_version"),
        banner: str_field(content, "banner"),
    }
}

fn error_output(content: &Value) -> ErrorOutput {
    ErrorOutput {
        ename: str_field(content, "ename"),
        evalue: str_field(content, "evalue"),
        traceback: content
            .get("traceback")
            .and_then(Value::as_array)
            .map(|lines| {
                lines
                    .iter()
                    .map(|line| line.as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `content[key]` as `as_type` reads it (`Value::as_str`, `Value::as_object`), owned; empty
/// when it is missing or of another type.
fn owned_field<T: ToOwned + ?Sized>(
    content: &Value,
    key: &str,
    as_type: fn(&Value) -> Option<&T>,
) -> T::Owned
where
    T::Owned: Default,
{
    content
        .get(key)
        .and_then(as_type)
        .map(T::to_owned)
        .unwrap_or_default()
}

fn str_field(content: &Value, key: &str) -> String {
    owned_field(content, key, Value::as_str)
}

fn count_field(content: &Value) -> Option<u64> {
    content.get("execution_count").and_then(Value::as_u64)
}

fn object_field(content: &Value, key: &str) -> JsonObject {
    owned_field(content, key, Value::as_object)
}

fn display_id(content: &Value) -> Option<String> {
    content
        .get("transient")
        .and_then(|transient| transient.get("display_id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_parent_has_no_parent_id_and_missing_type_is_rejected() {
        let message = WireMessage::from_parts(
            &json!({"msg_type": "status", "msg_id": "a"}),
            &json!({}),
            json!({"execution_state": "starting"}),
        )
        .unwrap();
        assert_eq!(message.parent_msg_id, None);
        assert_eq!(iopub_item(message), IopubItem::Ignored);
        assert_eq!(
            WireMessage::from_parts(&json!({"msg_id": "a"}), &json!({}), json!({})),
            None
        );
    }

    #[test]
    fn display_data_keeps_unknown_mime_types_and_the_display_id() {
        let bundle =
            json!({"text/plain": "a", "application/x-custom+json": {"deep": [1, {"x": null}]}});
        let message = WireMessage::for_test(
            "display_data",
            Some("p"),
            json!({"data": bundle, "metadata": {"isolated": true}, "transient": {"display_id": "d1"}}),
        );
        let IopubItem::Output(ExecuteEvent::DisplayData {
            data,
            metadata,
            display_id,
            buffers,
        }) = iopub_item(message)
        else {
            panic!("not display data");
        };
        assert_eq!(Value::Object(data), bundle);
        assert_eq!(Value::Object(metadata), json!({"isolated": true}));
        assert!(buffers.is_empty());
        assert_eq!(display_id.as_deref(), Some("d1"));
    }

    #[test]
    fn error_reply_carries_the_error() {
        let reply = execute_reply(&json!({
            "status": "error", "execution_count": 3,
            "ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": ["t1", "t2"]
        }));
        assert_eq!(reply.status, ReplyStatus::Error);
        assert_eq!(reply.execution_count, Some(3));
        assert_eq!(
            reply.error,
            Some(ErrorOutput {
                ename: "ZeroDivisionError".into(),
                evalue: "division by zero".into(),
                traceback: vec!["t1".into(), "t2".into()],
            })
        );
    }

    #[test]
    fn aborted_reply_may_lack_an_execution_count() {
        let reply = execute_reply(&json!({"status": "aborted"}));
        assert_eq!(reply.status, ReplyStatus::Aborted);
        assert_eq!(reply.execution_count, None);
        assert_eq!(reply.error, None);
    }

    #[test]
    fn kernel_info_reads_language_and_banner() {
        let info = kernel_info(&json!({
            "protocol_version": "5.3", "implementation": "ipython", "implementation_version": "9.0",
            "language_info": {"name": "python", "version": "3.11.7"}, "banner": "Python 3.11"
        }));
        assert_eq!(info.language, "python");
        assert_eq!(info.language_version, "3.11.7");
        assert_eq!(info.protocol_version, "5.3");
        assert_eq!(info.banner, "Python 3.11");
    }
}
