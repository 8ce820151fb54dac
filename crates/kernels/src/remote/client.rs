//! [`ServerClient`]: the rest of a server's API (beyond its kernels) over the same transport
//! the kernels use, for hosts that need more of a Jupyter Server than its kernels.
//!
//! The transport is the connection profile's: rustls with the profile's trust (the platform's
//! store plus `--kernel-server-ca` files, host names always verified, certificate failures as
//! [`Error::ServerCertificate`]), plain `http://` only where the profile allows it, and the
//! credential placed where the profile says, re-read from its source and the request tried
//! again once when the server refuses it. Nothing here knows which API is called.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::Value;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use super::connection::handshake;
use super::contents::Contents;
use super::profile::ConnectionProfile;
use super::server::{Rest, ServerUrl, Transport};
use crate::error::{Error, Result};

/// A byte stream to a server: plain TCP, or TLS over it.
pub trait ByteStream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> ByteStream for T {}

/// A WebSocket opened by [`ServerClient::websocket`] (`ws://`, or `wss://` for `https://`).
pub type ServerWebSocket = tokio_tungstenite::WebSocketStream<Box<dyn ByteStream>>;

/// One answer of [`ServerClient::request`].
#[derive(Debug, Clone)]
pub struct ServerAnswer {
    /// The HTTP status (never 401 or 403: a refused credential is [`Error::ServerAuth`]).
    pub status: StatusCode,
    /// The whole body, as sent.
    pub body: Bytes,
}

/// HTTP requests and WebSockets to the server a [`ConnectionProfile`] describes.
#[derive(Debug, Clone)]
pub struct ServerClient {
    rest: Rest,
}

impl ServerClient {
    /// A client of `profile`'s server; `timeout` bounds each request and handshake. Fails
    /// when the profile cannot be used (plain HTTP to another machine without leave, an
    /// unreadable CA file). Nothing is contacted yet.
    pub fn new(profile: &ConnectionProfile, timeout: Duration) -> Result<ServerClient> {
        let transport = Transport::new(profile, timeout)?;
        Ok(ServerClient {
            rest: Rest::new(transport, profile.base_url.clone(), timeout),
        })
    }

    /// A client over `rest`'s transport (its credential state, its TLS), for the server it
    /// reaches now.
    pub(crate) fn from_rest(rest: Rest) -> ServerClient {
        ServerClient { rest }
    }

    /// The same client with `timeout` for each request and handshake.
    pub fn with_timeout(mut self, timeout: Duration) -> ServerClient {
        self.rest.timeout = timeout;
        self
    }

    /// The server's Contents API through this client.
    pub fn contents(&self) -> Contents {
        Contents::new(self.clone())
    }

    /// The server's base URL.
    pub fn url(&self) -> &ServerUrl {
        &self.rest.url
    }

    /// Sends one request to `path` (relative to the base path, built with
    /// [`encode_path`](super::encode_path), with its query) with `body` as JSON, and reads the
    /// whole answer, the profile's JSON prefix removed. A refused credential is renewed once
    /// and the request sent again. `operation` names it in errors ("listing files").
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &'static str,
    ) -> Result<ServerAnswer> {
        let answer = self
            .rest
            .exchange(method, path, body, operation, self.rest.timeout)
            .await?;
        if matches!(
            answer.status,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
        ) {
            return Err(self.rest.transport.auth_error(
                &self.rest.url,
                operation,
                answer.status.as_u16(),
            ));
        }
        let json = self.rest.transport.json_body(&answer.body);
        Ok(ServerAnswer {
            status: answer.status,
            body: answer.body.slice_ref(json),
        })
    }

    /// Opens a WebSocket to `path` (relative to the base path, already encoded, with its
    /// query). A refused credential is renewed once and the handshake tried again; another
    /// refusal is [`Error::ServerStatus`].
    pub async fn websocket(&self, path: &str, operation: &'static str) -> Result<ServerWebSocket> {
        let mut retried = false;
        loop {
            let placed = self.rest.transport.place(&self.rest.url).await?;
            match handshake(
                &self.rest,
                path,
                &placed,
                None,
                WebSocketConfig::default(),
                self.rest.timeout,
                operation,
            )
            .await
            {
                Err(Error::ServerAuth { .. })
                    if !retried && self.rest.transport.renew(placed.generation).await? =>
                {
                    retried = true;
                }
                other => return other.map(|(socket, _)| socket),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::profile::CredentialSource;
    use crate::remote::server::ServerToken;

    #[tokio::test]
    async fn a_refused_connection_names_the_server_and_not_the_token() {
        // Port 1 on loopback refuses connections.
        let profile = ConnectionProfile::jupyter_server(
            ServerUrl::parse("http://127.0.0.1:1/base").unwrap(),
            Some(CredentialSource::Static(
                ServerToken::new("s3cret").unwrap(),
            )),
        );
        let client = ServerClient::new(&profile, Duration::from_secs(5)).unwrap();
        assert_eq!(client.url().to_string(), "http://127.0.0.1:1/base/");
        let request = client
            .request(Method::GET, "api/status", None, "asking for the status")
            .await
            .unwrap_err()
            .to_string();
        let Err(socket) = client.websocket("api/room?x=1", "opening a room").await else {
            panic!("nothing listens on port 1");
        };
        let socket = socket.to_string();
        for message in [request, socket] {
            assert!(message.contains("http://127.0.0.1:1/base/"), "{message}");
            assert!(!message.contains("s3cret"), "{message}");
        }
    }

    #[test]
    fn plain_http_to_another_machine_is_refused_as_for_kernels() {
        let profile = ConnectionProfile::jupyter_server(
            ServerUrl::parse("http://10.0.0.1:8888/").unwrap(),
            None,
        );
        let error = ServerClient::new(&profile, Duration::from_secs(5)).unwrap_err();
        assert!(
            error.to_string().contains("--allow-insecure-http"),
            "{error}"
        );
    }
}
