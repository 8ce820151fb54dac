//! A peer's private endpoint: `POST /peer/invoke` on its own loopback port runs one tool call
//! on this window's tools for the broker. Only a caller holding the token derived from the
//! secret of the broker this peer registered with gets in.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use mcp_server::http::{Body, ExtraRoutes, RouteFuture, json_response};

use mcp_contract::{ToolDispatch, ToolRequest};

use crate::protocol::{Invocation, InvocationResult, MAX_INVOKE_BODY_BYTES, PEER_TOKEN_HEADER};
use crate::secret::Secret;

/// The `/peer/*` routes of one process.
pub(crate) struct PeerEndpoint {
    window_id: String,
    port: u16,
    local: Arc<dyn ToolDispatch>,
    /// The secret of the broker this process is registered with (none while it is broker itself
    /// or not registered).
    broker_secret: Mutex<Option<Secret>>,
}

/// An error answer of the broker protocol: `{ "error": message }`.
pub(crate) fn error_response(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, serde_json::json!({ "error": message }))
}

/// Reads a request body of at most `limit` bytes; the error is the response to send.
pub(crate) async fn read_body(
    request: Request<Incoming>,
    limit: usize,
) -> Result<Bytes, Response<Body>> {
    match Limited::new(request.into_body(), limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the request body is larger than {limit} bytes"),
        )),
        Err(_) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "the request body broke off",
        )),
    }
}

/// `body` read as the JSON of a `T`; the error is the response that says it is not `what`.
#[allow(
    clippy::result_large_err,
    reason = "the error is the response to send at once, as with read_body"
)]
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, Response<Body>> {
    serde_json::from_slice(body)
        .map_err(|error| error_response(StatusCode::BAD_REQUEST, &format!("not {what}: {error}")))
}

/// The response of a handler whose refusals (`Err`) are responses too.
pub(crate) fn either(handled: Result<Response<Body>, Response<Body>>) -> Response<Body> {
    handled.unwrap_or_else(|refusal| refusal)
}

impl PeerEndpoint {
    pub(crate) fn new(window_id: String, port: u16, local: Arc<dyn ToolDispatch>) -> PeerEndpoint {
        PeerEndpoint {
            window_id,
            port,
            local,
            broker_secret: Mutex::new(None),
        }
    }

    /// Accepts calls from the broker holding `secret` from now on (`None`: from nobody).
    pub(crate) fn trust(&self, secret: Option<Secret>) {
        *self.broker_secret.lock().expect("peer secret lock") = secret;
    }

    fn authorised(&self, request: &Request<Incoming>) -> bool {
        let Some(presented) = request
            .headers()
            .get(PEER_TOKEN_HEADER)
            .and_then(|value| value.to_str().ok())
        else {
            return false;
        };
        let secret = self.broker_secret.lock().expect("peer secret lock").clone();
        secret.is_some_and(|secret| {
            secret.verify(
                "peer",
                &[self.window_id.as_bytes(), &self.port.to_be_bytes()],
                presented,
            )
        })
    }

    async fn invoke(&self, request: Request<Incoming>) -> Result<Response<Body>, Response<Body>> {
        if request.method() != Method::POST {
            return Err(error_response(StatusCode::METHOD_NOT_ALLOWED, "use POST"));
        }
        if !self.authorised(&request) {
            return Err(error_response(StatusCode::FORBIDDEN, "Forbidden."));
        }
        let body = read_body(request, MAX_INVOKE_BODY_BYTES).await?;
        let invocation: Invocation = parse_body(&body, "an invocation")?;
        let resources = crate::protocol::resource_invocation(
            self.local.as_ref(),
            &invocation.tool,
            invocation.arguments.as_ref(),
        )
        .await;
        let output = match resources {
            Some(output) => output,
            None => {
                self.local
                    .dispatch(ToolRequest::new(invocation.tool, invocation.arguments))
                    .await
            }
        };
        let answer = serde_json::to_vec(&InvocationResult::from(output))
            .expect("an invocation result serialises");
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(Bytes::from(answer)).boxed())
            .expect("a JSON response is valid"))
    }
}

impl ExtraRoutes for PeerEndpoint {
    fn handle(&self, request: Request<Incoming>) -> RouteFuture<'_> {
        Box::pin(async move {
            match request.uri().path() {
                "/peer/invoke" => Ok(either(self.invoke(request).await)),
                _ => Err(request),
            }
        })
    }
}
