//! A bare MCP client over Streamable HTTP, written apart from rmcp: one kept HTTP/1.1
//! connection (hyper), a session, and each call a POST whose JSON answer is parsed into a
//! `serde_json::Value`. Beside the rmcp client's figure for the same call it shows how much of
//! that figure is the client library (its typed parse of the reply) rather than the server and
//! the transport.

use anyhow::{Context, Result, bail, ensure};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use serde_json::{Value, json};

pub struct RawMcp {
    sender: SendRequest<Full<Bytes>>,
    address: String,
    path: String,
    session: String,
    next_id: u64,
}

impl RawMcp {
    /// Connects to the server at `url` (`http://host:port/mcp?token=…`, as the tests' server
    /// gives it) and opens a session.
    pub async fn connect(url: &str) -> Result<RawMcp> {
        let rest = url
            .strip_prefix("http://")
            .context("the bare client speaks plain HTTP")?;
        let (address, query) = rest.split_once("/mcp").context("no /mcp in the URL")?;
        let stream = tokio::net::TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let mut client = RawMcp {
            sender,
            address: address.to_owned(),
            path: format!("/mcp{query}"),
            session: String::new(),
            next_id: 1,
        };
        let (session, reply) = client
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench-bare-client", "version": "0"}}}),
            )
            .await?;
        ensure!(reply.get("result").is_some(), "initialize failed: {reply}");
        client.session = session.context("the server gave no session")?;
        client
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(client)
    }

    /// Calls tool `name` and returns its result (`content`, `structuredContent`, ...).
    pub async fn call(&mut self, name: &str, arguments: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let (_, mut reply) = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}}))
            .await?;
        ensure!(reply["id"] == id, "answer to another call: {reply}");
        match reply.get_mut("result") {
            Some(result) => Ok(result.take()),
            None => bail!("{name} failed: {reply}"),
        }
    }

    /// One POST; returns the session header and the JSON answer (`Null` for a 202).
    async fn post(&mut self, body: Value) -> Result<(Option<String>, Value)> {
        let mut request = hyper::Request::post(&self.path)
            .header("host", &self.address)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if !self.session.is_empty() {
            request = request.header("mcp-session-id", &self.session);
        }
        let request = request.body(Full::new(Bytes::from(body.to_string())))?;
        // The connection takes the next request once the last answer has been read.
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let json = response
            .headers()
            .get("content-type")
            .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
        let bytes = response.into_body().collect().await?.to_bytes();
        if status == hyper::StatusCode::ACCEPTED {
            return Ok((session, Value::Null));
        }
        ensure!(status.is_success(), "HTTP {status}");
        ensure!(
            json,
            "the answer was not one JSON body (a reply slower than the server's wait streams)"
        );
        Ok((session, serde_json::from_slice(&bytes)?))
    }
}
