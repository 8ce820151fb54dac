//! The broker protocol on the wire: JSON bodies over HTTP/1.1 on loopback.
//!
//! On the shared port (next to `/mcp`):
//! - `GET /broker/health` → [`Health`] (no authentication: it tells only who holds the port).
//! - `POST /broker/register` with [`Registration`], authenticated by [`AUTH_HEADER`] (an HMAC
//!   of the body under the broker secret) → [`Registered`], whose `proof` shows the answer comes
//!   from a holder of the secret. It is also the peer's heartbeat.
//! - `POST /broker/unregister` with [`Unregistration`], authenticated the same way.
//!
//! On each peer's private port:
//! - `POST /peer/invoke` with [`Invocation`], authenticated by [`PEER_TOKEN_HEADER`] (the peer
//!   token, derived from the broker secret, the peer's id and its port) → [`InvocationResult`].

use mcp_contract::{ImageContent, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The protocol string every broker answer carries; a process joins a broker only when it sees
/// exactly this. It differs on purpose from the reference extension's
/// `jupyter-mcp-window-broker-v1`: registrations here are signed and shaped differently, so a
/// process of either kind must see the other as a foreign holder of the port, not as a broker.
pub const PROTOCOL: &str = "jupyter-mcp-broker-v1";

/// The HMAC of a broker request body (hex), proving the sender can read the broker secret.
pub const AUTH_HEADER: &str = "x-jupyter-mcp-auth";

/// The per-peer token on `/peer/invoke`.
pub const PEER_TOKEN_HEADER: &str = "x-jupyter-mcp-token";

/// Largest body accepted on `/broker/register` and `/broker/unregister`.
pub const MAX_CONTROL_BODY_BYTES: usize = 64 * 1024;

/// Largest body accepted on `/peer/invoke`: whatever `/mcp` accepts, plus room for the envelope.
pub const MAX_INVOKE_BODY_BYTES: usize = mcp_server::http::MAX_REQUEST_BODY_BYTES + 1024 * 1024;

/// Largest answer the broker reads from a peer (a read with many images can be large).
pub const MAX_ANSWER_BODY_BYTES: usize = 256 * 1024 * 1024;

/// `GET /broker/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Health {
    pub protocol: String,
    pub owner_id: String,
    /// The broker's own window.
    pub window_id: String,
    pub peers: usize,
}

/// `POST /broker/register`: a peer announces itself (and, repeated every tick, stays alive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    pub protocol: String,
    /// The peer's window id.
    pub id: String,
    pub label: String,
    /// The peer's private loopback port.
    pub peer_port: u16,
    /// The tools the peer serves (its `tools/list`).
    pub tools: Vec<String>,
    /// A fresh random value that the broker's proof must cover.
    pub nonce: String,
}

/// The broker's answer to a registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Registered {
    pub protocol: String,
    pub owner_id: String,
    /// HMAC over the nonce and owner id: the answer comes from a holder of the secret.
    pub proof: String,
}

/// `POST /broker/unregister`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Unregistration {
    pub protocol: String,
    pub id: String,
    pub peer_port: u16,
}

/// `POST /peer/invoke`: one tool call for the peer's own tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Invocation {
    pub tool: String,
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
}

/// An image in an [`InvocationResult`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireImage {
    pub data: String,
    pub mime_type: String,
}

/// A peer's [`ToolOutput`] on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InvocationResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<WireImage>,
    /// Resource links of the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<mcp_contract::ResourceEntry>,
    pub is_error: bool,
}

/// Reserved invocation names for a peer's resources (never tool names: tools have no `/`).
/// `resources/list` answers `{"resources": [...]}`; `resources/read` takes `{"uri"}` and
/// answers `{"contents": [...]}` or an error; `resources/versions` takes `{"uris": [...]}` and
/// answers `{"versions": [...]}`.
pub const LIST_RESOURCES: &str = "resources/list";
/// See [`LIST_RESOURCES`].
pub const READ_RESOURCE: &str = "resources/read";
/// See [`LIST_RESOURCES`].
pub const RESOURCE_VERSIONS: &str = "resources/versions";

/// Runs a reserved resource invocation on `local`; `None` for a tool call.
pub async fn resource_invocation(
    local: &dyn mcp_contract::ToolDispatch,
    name: &str,
    arguments: Option<&Map<String, Value>>,
) -> Option<ToolOutput> {
    let argument = |key: &str| arguments.and_then(|arguments| arguments.get(key)).cloned();
    let value = match name {
        LIST_RESOURCES => serde_json::json!({ "resources": local.list_resources().await }),
        READ_RESOURCE => {
            let uri = argument("uri")
                .and_then(|uri| uri.as_str().map(str::to_owned))
                .unwrap_or_default();
            match local.read_resource(uri).await {
                Ok(contents) => serde_json::json!({ "contents": contents }),
                Err(error) => serde_json::json!({ "resourceError": error }),
            }
        }
        RESOURCE_VERSIONS => {
            let uris: Vec<String> = argument("uris")
                .and_then(|uris| serde_json::from_value(uris).ok())
                .unwrap_or_default();
            serde_json::json!({ "versions": local.resource_versions(uris).await })
        }
        _ => return None,
    };
    Some(ToolOutput::success(value, Vec::new()))
}

impl From<ToolOutput> for InvocationResult {
    fn from(output: ToolOutput) -> InvocationResult {
        InvocationResult {
            structured_content: output.structured,
            text: output.text,
            images: output
                .images
                .into_iter()
                .map(|image| WireImage {
                    data: image.data,
                    mime_type: image.mime_type,
                })
                .collect(),
            links: output.links,
            is_error: output.is_error,
        }
    }
}

impl From<InvocationResult> for ToolOutput {
    fn from(result: InvocationResult) -> ToolOutput {
        ToolOutput {
            structured: result.structured_content,
            text: result.text,
            images: result
                .images
                .into_iter()
                .map(|image| ImageContent {
                    data: image.data,
                    mime_type: image.mime_type,
                })
                .collect(),
            links: result.links,
            is_error: result.is_error,
        }
    }
}

/// An error answer: `{ "error": message }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_outputs_survive_the_wire() {
        let output = ToolOutput {
            structured: Some(serde_json::json!({"cells": [1]})),
            text: "{\"cells\":[1]}".to_owned(),
            images: vec![ImageContent {
                data: "iVBOR".to_owned(),
                mime_type: "image/png".to_owned(),
            }],
            links: vec![mcp_contract::ResourceEntry {
                uri: "file:///a.ipynb#cells/c/outputs/0".to_owned(),
                name: "cell c output 0".to_owned(),
                title: None,
                mime_type: "text/plain".to_owned(),
                description: Some("the whole output".to_owned()),
                size: None,
            }],
            is_error: false,
        };
        let wire = serde_json::to_string(&InvocationResult::from(output.clone())).unwrap();
        assert!(wire.contains("\"structuredContent\""));
        assert!(wire.contains("\"mimeType\":\"image/png\""));
        let back: InvocationResult = serde_json::from_str(&wire).unwrap();
        assert_eq!(ToolOutput::from(back), output);
    }

    #[test]
    fn registrations_reject_unknown_keys() {
        let text = r#"{"protocol":"p","id":"w","label":"l","peerPort":1,"tools":[],"nonce":"n","token":"t"}"#;
        assert!(serde_json::from_str::<Registration>(text).is_err());
    }
}
