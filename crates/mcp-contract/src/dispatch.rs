//! What a transport needs to serve tools: [`ToolDispatch`] (one host's tools, or a broker in
//! front of many), the [`ToolRequest`] a call arrives as (name, arguments and the per-call
//! [`CallContext`]) and the [`ToolOutput`] of a call. The MCP binding, the HTTP broker and the
//! hosts meet here, so transports compile without the tool layer.

use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::catalog::ToolSpec;
use crate::errors::ErrorCode;
use crate::results::ToolError;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The host ("window") as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowInfo {
    /// Made fresh for each start of the host; part of every notebookRef.
    pub id: String,
    /// What `list_notebooks` shows for the window (its folder names).
    pub label: String,
}

/// An image returned as MCP image content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageContent {
    /// Base64 of the image bytes.
    pub data: String,
    /// e.g. `image/png`.
    pub mime_type: String,
}

/// A resource a host serves (a notebook, or a part of one), as listed or linked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceEntry {
    /// Its URI (see [`crate::resources`]).
    pub uri: String,
    /// A short name (a notebook's path, or `<path> cell <id> output <n>`).
    pub name: String,
    /// A human title, when there is a better one than the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Its MIME type.
    pub mime_type: String,
    /// What it is and why it is offered (for links: what the reply left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// One representation of a resource's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBody {
    /// The resource's URI.
    pub uri: String,
    /// This representation's MIME type.
    pub mime_type: String,
    /// Text, for textual representations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 bytes, for binary ones (images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// Why a resource cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ResourceError {
    /// No such resource (or not one of this server's).
    #[error("{message}")]
    NotFound {
        /// The URI asked for.
        uri: String,
        /// What to do next.
        message: String,
    },
    /// It exists but could not be read now.
    #[error("{message}")]
    Unavailable {
        /// What went wrong and what to do next.
        message: String,
    },
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// `structuredContent` (absent for errors, whose body is in `text`).
    pub structured: Option<Value>,
    /// The text content: the same JSON as `structured`, or the error body.
    pub text: String,
    /// Image content blocks, after the text.
    pub images: Vec<ImageContent>,
    /// Resource links, after the images: the whole of what the reply condensed or left out.
    pub links: Vec<ResourceEntry>,
    /// `isError`.
    pub is_error: bool,
}

impl ToolOutput {
    /// A success: `value` as structured content and as text.
    pub fn success(value: Value, images: Vec<ImageContent>) -> ToolOutput {
        ToolOutput {
            text: value.to_string(),
            structured: Some(value),
            images,
            links: Vec::new(),
            is_error: false,
        }
    }

    /// A failure with a stable code and a message that says what to do next.
    pub fn failure(error: ToolError) -> ToolOutput {
        let body = serde_json::to_value(&error).expect("ToolError serialises");
        ToolOutput {
            text: json!({ "error": body }).to_string(),
            structured: None,
            images: Vec::new(),
            links: Vec::new(),
            is_error: true,
        }
    }

    /// The error code, when this is a failure.
    pub fn error_code(&self) -> Option<ErrorCode> {
        if !self.is_error {
            return None;
        }
        let value: Value = serde_json::from_str(&self.text).ok()?;
        ErrorCode::from_word(value["error"]["code"].as_str()?)
    }
}

/// Receives progress of long calls (MCP progress notifications when the client asked for them).
pub trait ProgressSink: Send + Sync {
    /// Reports `progress` out of `total` (when known), with a short message.
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>);
}

/// Per-call context from the transport.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Where progress goes, when the client asked for progress notifications.
    pub progress: Option<Arc<dyn ProgressSink>>,
    /// The name the MCP client gave in its `initialize` request (its title, else its name),
    /// when the transport knows it; a host may show the agent under it.
    pub client_name: Option<String>,
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("CallContext")
            .field("progress", &self.progress.is_some())
            .field("client_name", &self.client_name)
            .finish()
    }
}

/// One tool call as a transport received it: the tool's name, its arguments and its context.
#[derive(Debug, Clone, Default)]
pub struct ToolRequest {
    /// The tool's name as the client sent it.
    pub name: String,
    /// Its arguments (`None` when the client sent none).
    pub arguments: Option<Map<String, Value>>,
    /// Progress and the client's name.
    pub context: CallContext,
}

impl ToolRequest {
    /// A call of `name` with `arguments` and the default context (no progress, no client name).
    pub fn new(name: impl Into<String>, arguments: Option<Map<String, Value>>) -> ToolRequest {
        ToolRequest {
            name: name.into(),
            arguments,
            context: CallContext::default(),
        }
    }
}

impl From<crate::run_task::ToolCall> for ToolRequest {
    fn from(call: crate::run_task::ToolCall) -> ToolRequest {
        ToolRequest::new(call.tool.as_str(), Some(call.arguments))
    }
}

/// Anything that serves tool calls: one host's tools, or a broker in front of many hosts.
/// Transports (HTTP, stdio, the broker's peer endpoint) serve a `dyn ToolDispatch`. The
/// resource methods have defaults for a dispatch that serves no resources.
pub trait ToolDispatch: Send + Sync + 'static {
    /// The tools to list.
    fn specs(&self) -> Vec<ToolSpec>;
    /// Runs one call.
    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput>;

    /// The notebooks served, as resources.
    fn list_resources(&self) -> BoxFuture<'_, Vec<ResourceEntry>> {
        Box::pin(async { Vec::new() })
    }

    /// Every representation of the resource `uri` (see [`crate::resources`]).
    fn read_resource(
        &self,
        uri: String,
    ) -> BoxFuture<'_, Result<Vec<ResourceBody>, ResourceError>> {
        Box::pin(async move {
            Err(ResourceError::NotFound {
                message: format!("this server serves no resources, so not `{uri}`"),
                uri,
            })
        })
    }

    /// A number per notebook resource URI that changes whenever the notebook does (anyone's
    /// edit, a run's outputs, a change on disk); `None` for one not served. What change
    /// notifications are made from.
    fn resource_versions(&self, uris: Vec<String>) -> BoxFuture<'_, Vec<Option<u64>>> {
        Box::pin(async move { vec![None; uris.len()] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_carries_its_code_and_a_success_its_json_twice() {
        let failure = ToolOutput::failure(ToolError::new(ErrorCode::KernelBusy, "wait"));
        assert!(failure.is_error);
        assert_eq!(failure.error_code(), Some(ErrorCode::KernelBusy));
        assert_eq!(
            failure.text,
            r#"{"error":{"code":"kernel_busy","message":"wait"}}"#
        );
        let success = ToolOutput::success(json!({"a": 1}), Vec::new());
        assert_eq!(success.error_code(), None);
        assert_eq!(success.text, r#"{"a":1}"#);
        assert_eq!(success.structured, Some(json!({"a": 1})));
    }
}
