//! Streamable HTTP on loopback: `/mcp` is served by rmcp; every request first passes the
//! DNS-rebinding defence (its `Host` and any `Origin` must be loopback, else 403) and, when a token
//! is configured, the token check (else 401). Nothing reaches a tool before both pass.

use core::net::SocketAddr;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

use crate::handler::McpHandler;

/// A response body.
pub type Body = BoxBody<Bytes, Infallible>;

/// Largest request body accepted on `/mcp` (a 10 MB cell source fits; a runaway client does not).
pub const MAX_REQUEST_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Other routes served next to `/mcp` (the broker's endpoints, health checks).
pub trait ExtraRoutes: Send + Sync + 'static {
    /// Handles a request whose path is not `/mcp`, or returns it unhandled.
    fn handle(&self, request: Request<Incoming>) -> RouteFuture<'_>;
}

/// What [`ExtraRoutes::handle`] comes to: the response, or the request it leaves unhandled.
pub type RouteFuture<'a> = mcp_contract::BoxFuture<'a, Result<Response<Body>, Request<Incoming>>>;

/// How the HTTP endpoint is protected.
#[derive(Debug, Clone, Default)]
pub struct HttpSecurity {
    /// When set, every `/mcp` request must carry `Authorization: Bearer <token>` or `?token=<token>`.
    pub token: Option<String>,
}

/// The environment variable a user sets to choose the HTTP token instead of a random one.
pub const TOKEN_ENV: &str = "JUPYTER_MCP_TOKEN";

/// A random token: 256 bits from the OS generator, as hex.
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The token of [`TOKEN_ENV`] when it is set and not blank, trimmed.
pub fn token_from_env() -> Option<String> {
    std::env::var(TOKEN_ENV)
        .ok()
        .map(|token| token.trim().to_owned())
        .filter(|token| !token.is_empty())
}

/// `http://ADDRESS/mcp`, with `?token=…` when there is a token, so that the printed URL works
/// as it is when pasted into a client.
pub fn mcp_url(address: SocketAddr, token: Option<&str>) -> String {
    match token {
        Some(token) => format!("http://{address}/mcp?token={token}"),
        None => format!("http://{address}/mcp"),
    }
}

/// A JSON error response.
pub fn json_response(status: StatusCode, body: serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("a static response is valid")
}

fn is_loopback_host(host: &str) -> bool {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|byte| byte.is_ascii_digit()))
            .map_or(host, |(name, _)| name)
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "localhost" | "127.0.0.1" | "::1"
    )
}

fn is_loopback_origin(origin: &str) -> bool {
    let Some((scheme, rest)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && is_loopback_host(rest.trim_end_matches('/'))
}

/// The DNS-rebinding defence: `Host` must be loopback, `Origin` (when present) too. Returns the
/// 403 response for a request that fails it.
pub fn loopback_rejection<B>(request: &Request<B>) -> Option<Response<Body>> {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    if !host.is_some_and(is_loopback_host) {
        return Some(json_response(
            StatusCode::FORBIDDEN,
            serde_json::json!({"error": "Forbidden: the Host header must name a loopback address (localhost, 127.0.0.1 or [::1])."}),
        ));
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin.to_str().ok().is_some_and(is_loopback_origin);
        if !allowed {
            return Some(json_response(
                StatusCode::FORBIDDEN,
                serde_json::json!({"error": "Forbidden: requests from web pages on other origins are refused."}),
            ));
        }
    }
    None
}

/// Compares two byte strings in time independent of where they differ.
fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    if left.len() != right.len() {
        return false;
    }
    left.iter()
        .zip(right)
        .fold(0u8, |difference, (a, b)| difference | (a ^ b))
        == 0
}

/// The token check, from `Authorization: Bearer` or the `token` query parameter. Returns the 401
/// response for a request without the right token.
pub fn token_rejection<B>(request: &Request<B>, token: &str) -> Option<Response<Body>> {
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let from_query = request.uri().query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("token="))
    });
    let presented = from_header.or(from_query);
    if presented
        .is_some_and(|presented| constant_time_equal(presented.as_bytes(), token.as_bytes()))
    {
        return None;
    }
    let mut response = json_response(
        StatusCode::UNAUTHORIZED,
        serde_json::json!({"error": "Unauthorized: pass the server's token as `Authorization: Bearer <token>` or use the URL the server printed (it carries ?token=...)."}),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    Some(response)
}

type McpService = StreamableHttpService<McpHandler, LocalSessionManager>;

/// The `/mcp` endpoint plus any extra routes, behind the loopback and token checks.
#[derive(Clone)]
pub struct HttpApp {
    mcp: McpService,
    security: Arc<HttpSecurity>,
    extra: Option<Arc<dyn ExtraRoutes>>,
}

impl std::fmt::Debug for HttpApp {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("HttpApp")
            .field("token", &self.security.token.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpApp {
    pub fn new(
        handler: McpHandler,
        security: HttpSecurity,
        extra: Option<Arc<dyn ExtraRoutes>>,
        cancel: CancellationToken,
    ) -> HttpApp {
        let config = StreamableHttpServerConfig::default()
            .with_max_request_body_bytes(MAX_REQUEST_BODY_BYTES)
            .with_sse_keep_alive(Some(Duration::from_secs(15)))
            // A reply with nothing before it goes as one JSON body, not an SSE event: clients cap
            // event sizes (the Python SDK at 1 MiB), and a whole log read as a resource is larger.
            // A call that reports progress first still streams. rmcp does this for stateless
            // requests (2026-07-28); `settle` does it for the sessions of older versions.
            .with_json_response(true)
            .with_cancellation_token(cancel);
        let mcp = StreamableHttpService::new(
            move || Ok(handler.for_session()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        HttpApp {
            mcp,
            security: Arc::new(security),
            extra,
        }
    }

    /// Handles one request.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        if let Some(response) = loopback_rejection(&request) {
            return response;
        }
        if request.uri().path() == "/mcp" || request.uri().path() == "/mcp/" {
            if let Some(token) = &self.security.token
                && let Some(response) = token_rejection(&request, token)
            {
                return response;
            }
            let settle = crate::settle::may_settle(request.method(), request.headers());
            let mut mcp = self.mcp.clone();
            let response = match mcp.call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            return if settle {
                crate::settle::settle(response, crate::settle::REPLY_WAIT).await
            } else {
                response
            };
        }
        let request = match &self.extra {
            Some(extra) => match extra.handle(request).await {
                Ok(response) => return response,
                Err(request) => request,
            },
            None => request,
        };
        let _ = request;
        json_response(
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": "Not found."}),
        )
    }
}

/// Serves `app` on `listener` until `cancel` fires.
pub async fn serve(listener: TcpListener, app: HttpApp, cancel: CancellationToken) {
    serve_with(
        listener,
        move |request| {
            let app = app.clone();
            async move { app.handle(request).await }
        },
        cancel,
    )
    .await;
}

/// Serves only `routes` (no `/mcp`) on `listener` until `cancel` fires, behind the same loopback
/// check; what they leave unhandled gets 404. The broker's peers serve their private endpoint
/// this way.
pub async fn serve_routes(
    listener: TcpListener,
    routes: Arc<dyn ExtraRoutes>,
    cancel: CancellationToken,
) {
    serve_with(
        listener,
        move |request: Request<Incoming>| {
            let routes = routes.clone();
            async move {
                if let Some(response) = loopback_rejection(&request) {
                    return response;
                }
                match routes.handle(request).await {
                    Ok(response) => response,
                    Err(_) => json_response(
                        StatusCode::NOT_FOUND,
                        serde_json::json!({"error": "Not found."}),
                    ),
                }
            }
        },
        cancel,
    )
    .await;
}

async fn serve_with<Handler, Answer>(
    listener: TcpListener,
    handler: Handler,
    cancel: CancellationToken,
) where
    Handler: Fn(Request<Incoming>) -> Answer + Clone + Send + Sync + 'static,
    Answer: Future<Output = Response<Body>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = cancel.cancelled() => break,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let answer = handler(request);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let connection = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                }
                () = cancel.cancelled() => connection.as_mut().graceful_shutdown(),
            }
        });
    }
}

/// Binds `127.0.0.1:port` (`0` picks a free port).
pub async fn bind_loopback(port: u16) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))).await?;
    let address = listener.local_addr()?;
    Ok((listener, address))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_and_origins() {
        for host in [
            "127.0.0.1:51303",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8080",
            "[::1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.com",
            "127.0.0.2",
            "localhost.evil.com",
            "10.0.0.1:80",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
        assert!(is_loopback_origin("http://localhost:3000"));
        assert!(is_loopback_origin("https://127.0.0.1"));
        assert!(!is_loopback_origin("http://evil.com"));
        assert!(!is_loopback_origin("null"));
        assert!(!is_loopback_origin("file://localhost"));
    }

    #[test]
    fn tokens_from_header_or_query() {
        let request = Request::builder().uri("/mcp?token=abc").body(()).unwrap();
        assert!(token_rejection(&request, "abc").is_none());
        assert!(token_rejection(&request, "abd").is_some());
        let request = Request::builder()
            .uri("/mcp")
            .header(header::AUTHORIZATION, "Bearer abc")
            .body(())
            .unwrap();
        assert!(token_rejection(&request, "abc").is_none());
        let request = Request::builder().uri("/mcp").body(()).unwrap();
        assert_eq!(
            token_rejection(&request, "abc").unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
}
