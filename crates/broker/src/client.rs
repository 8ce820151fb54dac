//! A small HTTP/1.1 client for loopback JSON requests between broker and peers: pooled
//! keep-alive connections with `TCP_NODELAY` (a routed call costs one loopback round trip, not a
//! handshake), an optional deadline per request, and a bound on what it reads.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;

use crate::error::BrokerError;
use crate::protocol::ErrorBody;

#[derive(Clone)]
pub(crate) struct LoopbackClient {
    inner: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for LoopbackClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("LoopbackClient")
    }
}

/// One request.
pub(crate) struct Call<'a> {
    pub port: u16,
    pub method: Method,
    pub path: &'a str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
    /// `None`: wait as long as it takes (the caller has another way to give up).
    pub timeout: Option<Duration>,
    pub max_answer_bytes: usize,
}

impl LoopbackClient {
    pub fn new() -> LoopbackClient {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_millis(1500)));
        let inner = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(16)
            .build(connector);
        LoopbackClient { inner }
    }

    /// Sends a request and reads the whole answer.
    pub async fn send(&self, call: Call<'_>) -> Result<(StatusCode, Bytes), BrokerError> {
        let port = call.port;
        let mut builder = Request::builder()
            .method(call.method)
            .uri(format!("http://127.0.0.1:{port}{}", call.path))
            .header(http::header::HOST, format!("127.0.0.1:{port}"));
        if call.body.is_some() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        for (name, value) in call.headers {
            builder = builder.header(name, value);
        }
        let request = builder
            .body(Full::new(Bytes::from(call.body.unwrap_or_default())))
            .map_err(|error| BrokerError::BadAnswer {
                port,
                problem: format!("cannot build the request: {error}"),
            })?;
        let limit = call.max_answer_bytes;
        let exchange =
            async {
                let response = self.inner.request(request).await.map_err(|error| {
                    BrokerError::Unreachable {
                        port,
                        reason: error.to_string(),
                    }
                })?;
                let status = response.status();
                let body = Limited::new(response.into_body(), limit)
                    .collect()
                    .await
                    .map_err(|error| BrokerError::Unreachable {
                        port,
                        reason: format!("the answer broke off or exceeded {limit} bytes: {error}"),
                    })?
                    .to_bytes();
                Ok((status, body))
            };
        match call.timeout {
            Some(timeout) => tokio::time::timeout(timeout, exchange).await.map_err(|_| {
                BrokerError::TimedOut {
                    port,
                    millis: timeout.as_millis(),
                }
            })?,
            None => exchange.await,
        }
    }

    /// Sends a request and reads a JSON answer; an HTTP error becomes [`BrokerError::Refused`]
    /// with the answer's `error` text.
    pub async fn json<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<T, BrokerError> {
        let port = call.port;
        let (status, body) = self.send(call).await?;
        if !status.is_success() {
            let message = serde_json::from_slice::<ErrorBody>(&body)
                .map(|body| body.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).chars().take(200).collect());
            return Err(BrokerError::Refused {
                port,
                status: status.as_u16(),
                message,
            });
        }
        serde_json::from_slice(&body).map_err(|error| BrokerError::BadAnswer {
            port,
            problem: error.to_string(),
        })
    }
}
