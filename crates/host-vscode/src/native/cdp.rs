//! The Chrome DevTools Protocol on a loopback debugging port: the target catalog over HTTP and
//! one page target's WebSocket.
//!
//! Every connection goes to `127.0.0.1:{port}` and nowhere else: the catalog is fetched
//! without following redirects, and a page's WebSocket is opened only when the catalog names
//! exactly `ws://127.0.0.1:{port}/devtools/page/{id}`; the TCP connection itself is made to
//! the loopback address, never to a host read from the catalog.

use std::net::Ipv4Addr;
use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::NativeBlocker;

/// The largest catalog or CDP message the driver reads.
const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// The longest target id the driver accepts (Chromium's are 32 hex digits).
const MAX_TARGET_ID_CHARS: usize = 64;

/// One entry of `/json/list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub id: String,
    pub kind: String,
    pub web_socket_url: Option<String>,
}

/// A page target whose WebSocket address is the loopback one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageTarget {
    pub id: String,
}

async fn bounded<T>(
    limit: Duration,
    step: &'static str,
    work: impl Future<Output = Result<T, NativeBlocker>>,
) -> Result<T, NativeBlocker> {
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or(Err(NativeBlocker::Timeout(step)))
}

async fn connect_loopback(port: u16) -> Result<TcpStream, NativeBlocker> {
    TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|_| NativeBlocker::Unreachable)
}

/// `GET http://127.0.0.1:{port}/json/list`, within `limit`.
pub(crate) async fn catalog(port: u16, limit: Duration) -> Result<Vec<Target>, NativeBlocker> {
    let body = bounded(limit, "catalog", fetch_catalog(port)).await?;
    parse_catalog(&body)
}

async fn fetch_catalog(port: u16) -> Result<Bytes, NativeBlocker> {
    let stream = connect_loopback(port).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|_| NativeBlocker::Unreachable)?;
    // The connection ends when `sender` is dropped at the end of this function.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = hyper::Request::get("/json/list")
        .header(hyper::header::HOST, format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
        .map_err(|_| NativeBlocker::Protocol("the catalog request could not be built".into()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|_| NativeBlocker::Unreachable)?;
    let status = response.status();
    if status.is_redirection() {
        // A redirect names another place to go; the driver goes nowhere but 127.0.0.1:{port}.
        return Err(NativeBlocker::ForeignHost);
    }
    if !status.is_success() {
        return Err(NativeBlocker::Protocol(format!(
            "the target catalog answered HTTP {}",
            status.as_u16()
        )));
    }
    let body = Limited::new(response.into_body(), MAX_MESSAGE_BYTES)
        .collect()
        .await
        .map_err(|_| {
            NativeBlocker::Protocol("the target catalog could not be read in full".into())
        })?;
    Ok(body.to_bytes())
}

/// The targets of a `/json/list` body.
pub(crate) fn parse_catalog(body: &[u8]) -> Result<Vec<Target>, NativeBlocker> {
    let not_a_catalog = || NativeBlocker::Protocol("the target catalog is not a JSON list".into());
    let value: Value = serde_json::from_slice(body).map_err(|_| not_a_catalog())?;
    let entries = value.as_array().ok_or_else(not_a_catalog)?;
    entries
        .iter()
        .map(|entry| {
            let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
            Ok(Target {
                id: text("id").ok_or_else(not_a_catalog)?,
                kind: text("type").ok_or_else(not_a_catalog)?,
                web_socket_url: text("webSocketDebuggerUrl"),
            })
        })
        .collect()
}

/// The page targets of a catalog, after checking that each names the loopback WebSocket of
/// this port and its own id. Other kinds (workers, service workers, iframes, Chromium's own
/// UI) are dropped; a page with any other address refuses the whole catalog.
pub(crate) fn page_targets(
    port: u16,
    targets: &[Target],
) -> Result<Vec<PageTarget>, NativeBlocker> {
    let mut pages = Vec::new();
    for target in targets.iter().filter(|target| target.kind == "page") {
        let id_is_plain = !target.id.is_empty()
            && target.id.len() <= MAX_TARGET_ID_CHARS
            && target
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !id_is_plain {
            return Err(NativeBlocker::Protocol(
                "a page target has an id the driver does not accept".into(),
            ));
        }
        match &target.web_socket_url {
            Some(url) if *url == page_url(port, &target.id) => pages.push(PageTarget {
                id: target.id.clone(),
            }),
            Some(_) => return Err(NativeBlocker::ForeignHost),
            // Chromium leaves the address out while another client holds the page; such a
            // page cannot be checked, so it is not a candidate.
            None => {}
        }
    }
    Ok(pages)
}

fn page_url(port: u16, id: &str) -> String {
    format!("ws://127.0.0.1:{port}/devtools/page/{id}")
}

/// How a CDP call failed, before it becomes a blocker.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The socket closed or failed: the session is gone.
    Dropped,
    /// No answer within the limit.
    Timeout(&'static str),
    /// An answer the driver cannot use.
    Protocol(String),
}

impl From<CallError> for NativeBlocker {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Dropped => NativeBlocker::Unreachable,
            CallError::Timeout(step) => NativeBlocker::Timeout(step),
            CallError::Protocol(what) => NativeBlocker::Protocol(what),
        }
    }
}

/// One page target's DevTools WebSocket.
pub(crate) struct Connection {
    socket: WebSocketStream<TcpStream>,
    next_id: u64,
}

impl Connection {
    /// Opens `ws://127.0.0.1:{port}/devtools/page/{id}` within `limit`.
    pub(crate) async fn open(
        port: u16,
        target: &PageTarget,
        limit: Duration,
    ) -> Result<Connection, NativeBlocker> {
        bounded(limit, "connect", async {
            let stream = connect_loopback(port).await?;
            let config = WebSocketConfig::default()
                .max_message_size(Some(MAX_MESSAGE_BYTES))
                .max_frame_size(Some(MAX_MESSAGE_BYTES));
            let (socket, _) = tokio_tungstenite::client_async_with_config(
                page_url(port, &target.id),
                stream,
                Some(config),
            )
            .await
            .map_err(|_| NativeBlocker::Unreachable)?;
            Ok(Connection { socket, next_id: 0 })
        })
        .await
    }

    /// One CDP method call, answered within `limit`. Events and answers to earlier calls are
    /// skipped.
    pub(crate) async fn call(
        &mut self,
        method: &str,
        params: Value,
        limit: Duration,
        step: &'static str,
    ) -> Result<Value, CallError> {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({ "id": id, "method": method, "params": params }).to_string();
        let exchange = async {
            self.socket
                .send(Message::text(request))
                .await
                .map_err(|_| CallError::Dropped)?;
            loop {
                let text = match self.socket.next().await {
                    Some(Ok(Message::Text(text))) => text,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        return Err(CallError::Dropped);
                    }
                    Some(Ok(_)) => continue,
                };
                let answer: Value = serde_json::from_str(text.as_str())
                    .map_err(|_| CallError::Protocol("a DevTools message is not JSON".into()))?;
                if answer.get("id").and_then(Value::as_u64) != Some(id) {
                    continue;
                }
                if answer.get("error").is_some() {
                    return Err(CallError::Protocol(format!("the page refused {method}")));
                }
                return Ok(answer.get("result").cloned().unwrap_or(Value::Null));
            }
        };
        tokio::time::timeout(limit, exchange)
            .await
            .unwrap_or(Err(CallError::Timeout(step)))
    }

    /// `Runtime.evaluate` of `expression` with the value returned as JSON.
    pub(crate) async fn evaluate(
        &mut self,
        expression: String,
        limit: Duration,
    ) -> Result<Value, CallError> {
        let params = json!({
            "expression": expression,
            "returnByValue": true,
            "awaitPromise": false,
        });
        let result = self
            .call("Runtime.evaluate", params, limit, "evaluate")
            .await?;
        if result.get("exceptionDetails").is_some() {
            // The page's exception text is not reported: it is the page's, not ours.
            return Err(CallError::Protocol("a projection threw in the page".into()));
        }
        Ok(result
            .get("result")
            .and_then(|remote| remote.get("value"))
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// Closes the socket, best effort.
    pub(crate) async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_millis(200), self.socket.close(None)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: &str, kind: &str, url: Option<String>) -> Target {
        Target {
            id: id.into(),
            kind: kind.into(),
            web_socket_url: url,
        }
    }

    #[test]
    fn only_loopback_page_targets_of_this_port_are_candidates() {
        let port = 9333;
        let good = Some(page_url(port, "AB12"));
        let targets = vec![
            target("AB12", "page", good.clone()),
            target(
                "W1",
                "worker",
                Some("ws://evil.example/devtools/page/W1".into()),
            ),
            target("O1", "browser_ui", Some(page_url(port, "O1"))),
            target("P2", "page", None),
        ];
        assert_eq!(
            page_targets(port, &targets).unwrap(),
            vec![PageTarget { id: "AB12".into() }]
        );
        for foreign in [
            "ws://localhost:9333/devtools/page/C3",
            "ws://127.0.0.1:9334/devtools/page/C3",
            "ws://127.0.0.2:9333/devtools/page/C3",
            "wss://127.0.0.1:9333/devtools/page/C3",
            "ws://127.0.0.1:9333/devtools/page/OTHER",
            "ws://127.0.0.1:9333/devtools/browser/C3",
            "ws://127.0.0.1:9333@evil.example/devtools/page/C3",
        ] {
            let targets = vec![
                target("AB12", "page", good.clone()),
                target("C3", "page", Some(foreign.into())),
            ];
            assert_eq!(
                page_targets(port, &targets),
                Err(NativeBlocker::ForeignHost),
                "{foreign}"
            );
        }
        let odd_id = vec![target("../x", "page", Some(page_url(port, "../x")))];
        assert!(matches!(
            page_targets(port, &odd_id),
            Err(NativeBlocker::Protocol(_))
        ));
    }

    #[test]
    fn the_catalog_must_be_a_list_of_targets() {
        let body = br#"[{"id":"A","type":"page","url":"http://x","webSocketDebuggerUrl":"ws://127.0.0.1:1/devtools/page/A"},{"id":"B","type":"worker"}]"#;
        let targets = parse_catalog(body).unwrap();
        assert_eq!(targets.len(), 2);
        assert_eq!(targets[1].web_socket_url, None);
        for bad in [&b"{}"[..], b"not json", br#"[{"type":"page"}]"#] {
            assert!(matches!(
                parse_catalog(bad),
                Err(NativeBlocker::Protocol(_))
            ));
        }
    }
}
