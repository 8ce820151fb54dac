//! A fake Chromium debugging endpoint for the driver's tests: `/json/list` over HTTP and each
//! page's DevTools WebSocket on one loopback port, answering `Runtime.evaluate` from a script.
//!
//! It stands in for Chromium because a browser cannot run in unit tests; the projections
//! themselves are checked against a real workbench by the e2e test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

/// The page's answer to one evaluated expression; `None` never answers.
pub(crate) type Script = Arc<dyn Fn(&str) -> Option<Value> + Send + Sync>;

/// What the catalog says a target's WebSocket address is.
#[derive(Clone)]
pub(crate) enum Address {
    /// `ws://127.0.0.1:{port}/devtools/page/{id}`, as Chromium says it.
    Loopback,
    /// This text, with `{port}` replaced by the fake's port.
    Literal(String),
    /// No address (another client holds the page).
    Absent,
}

#[derive(Clone)]
pub(crate) struct FakeTarget {
    pub id: String,
    pub kind: String,
    pub address: Address,
    pub script: Script,
}

impl FakeTarget {
    /// A page answering with `script`.
    pub(crate) fn page(
        id: &str,
        script: impl Fn(&str) -> Option<Value> + Send + Sync + 'static,
    ) -> FakeTarget {
        FakeTarget {
            id: id.into(),
            kind: "page".into(),
            address: Address::Loopback,
            script: Arc::new(script),
        }
    }

    /// A target of another kind that answers every evaluation as a page with our marker would:
    /// binding to it would be a bug.
    pub(crate) fn other(id: &str, kind: &str) -> FakeTarget {
        FakeTarget {
            id: id.into(),
            kind: kind.into(),
            address: Address::Loopback,
            script: Arc::new(|_| Some(json!({ "status": "ok", "marker": "ours" }))),
        }
    }

    pub(crate) fn at(mut self, address: Address) -> FakeTarget {
        self.address = address;
        self
    }
}

/// How the fake behaves beyond its targets.
#[derive(Clone, Default)]
pub(crate) struct Behaviour {
    /// `/json/list` answers a redirect to this location.
    pub redirect: Option<String>,
    /// Each WebSocket closes after answering this many evaluations.
    pub close_after_evaluations: Option<usize>,
}

#[derive(Default)]
pub(crate) struct Record {
    /// WebSocket upgrades accepted, by target id.
    pub upgrades: Mutex<Vec<String>>,
    /// Catalog requests served.
    pub catalog_requests: AtomicUsize,
    /// Every CDP method called, in order, with the expression for `Runtime.evaluate`.
    pub calls: Mutex<Vec<(String, String)>>,
}

impl Record {
    pub(crate) fn upgrades(&self) -> Vec<String> {
        self.upgrades.lock().expect("record").clone()
    }

    pub(crate) fn methods(&self) -> Vec<String> {
        let calls = self.calls.lock().expect("record");
        calls.iter().map(|(method, _)| method.clone()).collect()
    }

    /// Whether the driver called the DevTools `method` at all.
    pub(crate) fn called(&self, method: &str) -> bool {
        let calls = self.calls.lock().expect("record");
        calls.iter().any(|(called, _)| called == method)
    }

    /// The evaluated expressions of one projection (by the name the driver writes first).
    pub(crate) fn evaluations(&self, projection: &str) -> Vec<String> {
        let prefix = format!("/*jmcp:{projection}*/");
        let calls = self.calls.lock().expect("record");
        calls
            .iter()
            .filter(|(_, expression)| expression.starts_with(&prefix))
            .map(|(_, expression)| expression.clone())
            .collect()
    }
}

pub(crate) struct FakeChromium {
    pub port: u16,
    pub record: Arc<Record>,
    server: JoinHandle<()>,
}

impl Drop for FakeChromium {
    fn drop(&mut self) {
        self.server.abort();
    }
}

struct Shared {
    port: u16,
    targets: Vec<FakeTarget>,
    behaviour: Behaviour,
    record: Arc<Record>,
}

impl FakeChromium {
    pub(crate) async fn start(targets: Vec<FakeTarget>) -> FakeChromium {
        FakeChromium::start_with(targets, Behaviour::default()).await
    }

    pub(crate) async fn start_with(targets: Vec<FakeTarget>, behaviour: Behaviour) -> FakeChromium {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let record = Arc::new(Record::default());
        let shared = Arc::new(Shared {
            port,
            targets,
            behaviour,
            record: record.clone(),
        });
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        FakeChromium {
            port,
            record,
            server,
        }
    }
}

async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    String::from_utf8(head).ok()
}

async fn serve(mut stream: TcpStream, shared: Arc<Shared>) {
    let Some(head) = read_head(&mut stream).await else {
        return;
    };
    let path = head
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    if path == "/json/list" {
        shared
            .record
            .catalog_requests
            .fetch_add(1, Ordering::SeqCst);
        let response = match &shared.behaviour.redirect {
            Some(location) => {
                format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n")
            }
            None => {
                let body = catalog(&shared).to_string();
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
        };
        let _ = stream.write_all(response.as_bytes()).await;
        // Like Chromium, keep the connection open until the client closes it.
        let mut rest = [0u8; 64];
        while matches!(stream.read(&mut rest).await, Ok(read) if read > 0) {}
        return;
    }
    let Some(id) = path.strip_prefix("/devtools/page/") else {
        let _ = stream
            .write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            .await;
        return;
    };
    let Some(target) = shared
        .targets
        .iter()
        .find(|target| target.id == id)
        .cloned()
    else {
        return;
    };
    let Some(key) = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("sec-websocket-key")
            .then(|| value.trim().to_owned())
    }) else {
        return;
    };
    let accept = derive_accept_key(key.as_bytes());
    let response = format!(
        "HTTP/1.1 101 WebSocket Protocol Handshake\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    if stream.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    shared
        .record
        .upgrades
        .lock()
        .expect("record")
        .push(target.id.clone());
    let socket = WebSocketStream::from_raw_socket(stream, Role::Server, None).await;
    page(socket, target, shared).await;
}

async fn page(mut socket: WebSocketStream<TcpStream>, target: FakeTarget, shared: Arc<Shared>) {
    let mut evaluations = 0;
    while let Some(Ok(message)) = socket.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(request) = serde_json::from_str::<Value>(text.as_str()) else {
            return;
        };
        let method = request["method"].as_str().unwrap_or_default().to_owned();
        let expression = request["params"]["expression"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        shared
            .record
            .calls
            .lock()
            .expect("record")
            .push((method.clone(), expression.clone()));
        let result = if method == "Runtime.evaluate" {
            // The driver always asks for the value itself; anything else is a driver bug that
            // the test sees as a closed socket.
            if request["params"]["returnByValue"] != json!(true) {
                return;
            }
            match (target.script)(&expression) {
                Some(value) => json!({ "result": { "type": "object", "value": value } }),
                None => continue,
            }
        } else {
            json!({})
        };
        let answer = json!({ "id": request["id"], "result": result });
        // An event first, as Chromium may send one at any time: the driver must skip it.
        let event = json!({ "method": "Runtime.consoleAPICalled", "params": {} });
        if socket.send(Message::text(event.to_string())).await.is_err()
            || socket
                .send(Message::text(answer.to_string()))
                .await
                .is_err()
        {
            return;
        }
        if method == "Runtime.evaluate" {
            evaluations += 1;
            if shared.behaviour.close_after_evaluations == Some(evaluations) {
                let _ = socket.close(None).await;
                return;
            }
        }
    }
}

fn catalog(shared: &Shared) -> Value {
    let port = shared.port;
    let entries: Vec<Value> = shared
        .targets
        .iter()
        .map(|target| {
            let mut entry = json!({
                "description": "",
                "id": target.id,
                "title": "folder - code-server",
                "type": target.kind,
                "url": "http://127.0.0.1:8080/?folder=/tmp",
                "devtoolsFrontendUrl": format!("/devtools/inspector.html?ws=127.0.0.1:{port}/devtools/page/{}", target.id),
            });
            match &target.address {
                Address::Loopback => {
                    entry["webSocketDebuggerUrl"] =
                        json!(format!("ws://127.0.0.1:{port}/devtools/page/{}", target.id));
                }
                Address::Literal(text) => {
                    entry["webSocketDebuggerUrl"] = json!(text.replace("{port}", &port.to_string()));
                }
                Address::Absent => {}
            }
            entry
        })
        .collect();
    Value::Array(entries)
}
