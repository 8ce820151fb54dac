//! The floor of a remote kernel round trip: a minimal kernel WebSocket client, written apart
//! from the `kernels` crate's client, that sends one `execute_request` and waits for its
//! `execute_reply` and its `idle` status, in the JSON or the v1 binary protocol, over plain TCP
//! or TLS. What the server and the kernel cost is all it measures; our client's figure against
//! it is our overhead. It acknowledges at once, as our client does (`kernels::QuickAckStream`),
//! and lays out and splits v1 frames with the same pure functions (`kernels::encode_v1`,
//! `kernels::split_v1`).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

const V1: &str = "v1.kernel.websocket.jupyter.org";

/// One WebSocket to one kernel.
pub struct RawKernel {
    socket: WebSocketStream<Box<dyn Stream>>,
    v1: bool,
    session: String,
    counter: u64,
}

impl RawKernel {
    /// Connects to kernel `kernel_id` of the server on `127.0.0.1:port` (TLS trusting `ca` when
    /// given), offering the v1 protocol when `v1`.
    pub async fn connect(
        port: u16,
        ca: Option<&Path>,
        token: &str,
        kernel_id: &str,
        v1: bool,
    ) -> Result<RawKernel> {
        let session = format!("raw-{}", std::process::id());
        let scheme = if ca.is_some() { "wss" } else { "ws" };
        let mut request = format!(
            "{scheme}://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?session_id={session}"
        )
        .into_client_request()?;
        request
            .headers_mut()
            .insert("Authorization", format!("token {token}").parse()?);
        if v1 {
            request
                .headers_mut()
                .insert("Sec-WebSocket-Protocol", V1.parse()?);
        }
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        tcp.set_nodelay(true)?;
        // Quick acknowledgements, as our client has them: without, Jupyter Server's unflushed
        // frames wait for Linux's delayed acks (about 40 ms a round trip).
        let tcp = kernels::QuickAckStream::new(tcp);
        let stream: Box<dyn Stream> = match ca {
            None => Box::new(tcp),
            Some(ca) => {
                let config = jupyter_mcp_tests::kernel_server::client_config_trusting(ca)?;
                let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned();
                Box::new(connector.connect(name, tcp).await?)
            }
        };
        let (socket, response) = tokio_tungstenite::client_async(request, stream)
            .await
            .context("the raw WebSocket handshake")?;
        let agreed = response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .is_some_and(|value| value.as_bytes() == V1.as_bytes());
        if agreed != v1 {
            bail!("the server did not agree on the protocol asked for (v1: {v1})");
        }
        Ok(RawKernel {
            socket,
            v1,
            session,
            counter: 0,
        })
    }

    /// Sends `code` and waits for its reply and its `idle`.
    pub async fn execute(&mut self, code: &str) -> Result<()> {
        self.counter += 1;
        let msg_id = format!("{}-{}", self.session, self.counter);
        let header = json!({"msg_id": msg_id, "msg_type": "execute_request", "session": self.session,
                            "username": "bench", "date": "2026-01-01T00:00:00.000000Z", "version": "5.3"});
        let content = json!({"code": code, "silent": false, "store_history": true,
                             "user_expressions": {}, "allow_stdin": false, "stop_on_error": true});
        let message = if self.v1 {
            Message::binary(kernels::encode_v1(
                "shell",
                &[
                    header.to_string().into_bytes(),
                    b"{}".to_vec(),
                    b"{}".to_vec(),
                    content.to_string().into_bytes(),
                ],
            ))
        } else {
            Message::text(
                json!({"channel": "shell", "header": header, "parent_header": {}, "metadata": {},
                       "content": content, "buffers": []})
                .to_string(),
            )
        };
        self.socket.send(message).await?;
        let (mut replied, mut idle) = (false, false);
        while !(replied && idle) {
            let Some(message) = self.socket.next().await else {
                bail!("the raw WebSocket closed");
            };
            let (channel, header, parent, content) = match message? {
                Message::Text(text) => {
                    let value: Value = serde_json::from_str(&text)?;
                    (
                        value["channel"].as_str().unwrap_or_default().to_owned(),
                        value["header"].clone(),
                        value["parent_header"].clone(),
                        value["content"].clone(),
                    )
                }
                Message::Binary(bytes) if self.v1 => {
                    let (channel, parts) = kernels::split_v1(&bytes).context("a v1 frame")?;
                    let part = |index: usize| -> Value {
                        parts
                            .get(index)
                            .and_then(|part| serde_json::from_slice(part).ok())
                            .unwrap_or(Value::Null)
                    };
                    (channel.to_owned(), part(0), part(1), part(3))
                }
                _ => continue,
            };
            if parent["msg_id"] != msg_id.as_str() {
                continue;
            }
            match (channel.as_str(), header["msg_type"].as_str()) {
                ("shell", Some("execute_reply")) => replied = true,
                ("iopub", Some("status")) if content["execution_state"] == "idle" => idle = true,
                _ => {}
            }
        }
        Ok(())
    }
}
