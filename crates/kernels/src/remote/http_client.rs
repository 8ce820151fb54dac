//! A small HTTP(S) client for calls beside a kernel server: a provider's control API, an OAuth
//! token endpoint. It trusts the same certificate authorities as kernel servers
//! ([`TlsTrust`]) and opens one connection per request, so that a failure can say whether the
//! request left this machine: before the connection (and its TLS handshake) is made nothing was
//! sent and the call can be repeated; after it, the server may have acted on it.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::profile::TlsTrust;
use super::tls::{self, certificate_problem};
use crate::error::Result;

/// A client for one-off HTTP(S) requests, with the TLS trust of kernel servers.
#[derive(Clone)]
pub struct HttpClient {
    tls: Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
}

crate::debug_fields!(HttpClient { connect_timeout });

/// A whole answer.
#[derive(Debug, Clone)]
pub struct HttpAnswer {
    /// Its status code.
    pub status: u16,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its whole body.
    pub body: Bytes,
}

/// Why a request has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpFailure {
    /// Nothing was sent: the URL cannot be used, the server cannot be reached, or its
    /// certificate was refused. Repeating the request is safe.
    #[error("the request was not sent: {reason}")]
    NotSent {
        /// Why, without credentials.
        reason: String,
    },
    /// The request was sent (or was being sent) and no whole answer came: the server may have
    /// acted on it.
    #[error("the request was sent but no answer came: {reason}")]
    NoAnswer {
        /// Whether the deadline passed (rather than the connection failing).
        timed_out: bool,
        /// Why, without credentials.
        reason: String,
    },
}

/// One request for [`HttpClient::send`]: a method, an absolute `http://` or `https://` URL,
/// headers and a body, checked as it is built (so a caller needs no HTTP crate of its own). A
/// header added with [`HttpRequest::secret_header`] never shows in `Debug` or logs.
#[derive(Debug)]
pub struct HttpRequest {
    request: Request<Bytes>,
}

impl HttpRequest {
    /// `method` to `url`; `NotSent` when the URL cannot be sent.
    pub fn new(method: Method, url: &str) -> std::result::Result<HttpRequest, HttpFailure> {
        let request = Request::builder()
            .method(method)
            .uri(url)
            .body(Bytes::new())
            .map_err(|_| HttpFailure::NotSent {
                reason: "the URL cannot be sent".to_owned(),
            })?;
        Ok(HttpRequest { request })
    }

    /// The request with the header `name: value`; `NotSent` when it cannot be sent.
    pub fn header(self, name: &str, value: &str) -> std::result::Result<HttpRequest, HttpFailure> {
        self.with_header(name, value, false)
    }

    /// [`HttpRequest::header`] for a credential: its value is marked sensitive.
    pub fn secret_header(
        self,
        name: &str,
        value: &str,
    ) -> std::result::Result<HttpRequest, HttpFailure> {
        self.with_header(name, value, true)
    }

    fn with_header(
        mut self,
        name: &str,
        value: &str,
        secret: bool,
    ) -> std::result::Result<HttpRequest, HttpFailure> {
        let unsendable = || HttpFailure::NotSent {
            reason: format!("the header {name} cannot be sent"),
        };
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| unsendable())?;
        let mut value = HeaderValue::from_str(value).map_err(|_| unsendable())?;
        value.set_sensitive(secret);
        self.request.headers_mut().append(name, value);
        Ok(self)
    }

    /// The request with `body`.
    pub fn body(mut self, body: impl Into<Bytes>) -> HttpRequest {
        *self.request.body_mut() = body.into();
        self
    }
}

impl From<Request<Bytes>> for HttpRequest {
    fn from(request: Request<Bytes>) -> HttpRequest {
        HttpRequest { request }
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

impl HttpClient {
    /// A client trusting `trust`, giving up on a connection (and its TLS handshake) after
    /// `connect_timeout`.
    pub fn new(trust: &TlsTrust, connect_timeout: Duration) -> Result<HttpClient> {
        Ok(HttpClient {
            tls: tls::client_config(trust)?,
            connect_timeout,
        })
    }

    /// Sends `request` (an absolute `http://` or `https://` URI) and reads the whole answer,
    /// all within `timeout`. `Host` is set from the URI when the request has none.
    pub async fn send(
        &self,
        request: impl Into<HttpRequest>,
        timeout: Duration,
    ) -> std::result::Result<HttpAnswer, HttpFailure> {
        let request = request.into().request;
        let deadline = Instant::now() + timeout;
        let not_sent = |reason: String| HttpFailure::NotSent { reason };
        let uri = request.uri().clone();
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(not_sent(
                    "the URL is neither http:// nor https://".to_owned(),
                ));
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| not_sent("the URL has no host".to_owned()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let connect_by = deadline.min(Instant::now() + self.connect_timeout);
        let connected = tokio::time::timeout_at(connect_by, self.connect(&host, port, https)).await;
        let stream = match connected {
            Ok(stream) => stream?,
            Err(_) => return Err(not_sent(format!("connecting to {host}:{port} timed out"))),
        };

        let (mut parts, body) = request.into_parts();
        if !parts.headers.contains_key(header::HOST) {
            let authority = uri.authority().map(|a| a.as_str()).unwrap_or(&host);
            let value = HeaderValue::from_str(authority)
                .map_err(|_| not_sent("the URL's host cannot be sent".to_owned()))?;
            parts.headers.insert(header::HOST, value);
        }
        // HTTP/1.1 to the origin: the request line carries the path and query only.
        parts.uri = uri
            .path_and_query()
            .map(|path| path.as_str())
            .unwrap_or("/")
            .parse()
            .map_err(|_| not_sent("the URL's path cannot be sent".to_owned()))?;
        let request = Request::from_parts(parts, Full::new(body));

        let exchange = async {
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|error| format!("the HTTP connection failed ({error})"))?;
            let driver = tokio::spawn(connection);
            let response = sender
                .send_request(request)
                .await
                .map_err(|error| format!("the connection failed ({error})"));
            let answer = match response {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let (parts, body) = response.into_parts();
                    body.collect()
                        .await
                        .map(|body| HttpAnswer {
                            status,
                            headers: parts.headers,
                            body: body.to_bytes(),
                        })
                        .map_err(|error| format!("the answer was cut short ({error})"))
                }
                Err(reason) => Err(reason),
            };
            driver.abort();
            answer
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(reason)) => Err(HttpFailure::NoAnswer {
                timed_out: false,
                reason,
            }),
            Err(_) => Err(HttpFailure::NoAnswer {
                timed_out: true,
                reason: format!("no whole answer within {} ms", timeout.as_millis()),
            }),
        }
    }

    async fn connect(
        &self,
        host: &str,
        port: u16,
        https: bool,
    ) -> std::result::Result<Box<dyn Stream>, HttpFailure> {
        let not_sent = |reason: String| HttpFailure::NotSent { reason };
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|error| not_sent(format!("{host}:{port} cannot be reached ({error})")))?;
        let _ = tcp.set_nodelay(true);
        if !https {
            return Ok(Box::new(tcp));
        }
        let name = rustls::pki_types::ServerName::try_from(host.to_owned())
            .map_err(|_| not_sent(format!("{host} is not a valid TLS server name")))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls));
        match connector.connect(name, tcp).await {
            Ok(stream) => Ok(Box::new(stream)),
            Err(error) => Err(not_sent(match certificate_problem(&error) {
                Some(problem) => format!("the certificate of {host} {}", problem.explain()),
                None => format!("the TLS handshake with {host} failed ({error})"),
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_not_sent_and_a_silent_server_is_no_answer() {
        let client = HttpClient::new(&TlsTrust::default(), Duration::from_secs(5)).unwrap();
        // A port that was free a moment ago: nothing listens there.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let request = Request::get(format!("http://127.0.0.1:{port}/x"))
            .body(Bytes::new())
            .unwrap();
        let failure = client
            .send(request, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(failure, HttpFailure::NotSent { .. }), "{failure}");

        // A server that accepts and never answers: the request went out.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(socket);
        });
        let request = HttpRequest::new(Method::POST, &format!("http://127.0.0.1:{port}/x"))
            .unwrap()
            .secret_header("authorization", "Bearer s3cret")
            .unwrap()
            .body(&b"{}"[..]);
        assert!(!format!("{request:?}").contains("s3cret"));
        assert!(matches!(
            HttpRequest::new(Method::GET, "http://127.0.0.1/")
                .unwrap()
                .header("x", "a\nb"),
            Err(HttpFailure::NotSent { .. })
        ));
        let failure = client
            .send(request, Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(
            matches!(
                failure,
                HttpFailure::NoAnswer {
                    timed_out: true,
                    ..
                }
            ),
            "{failure}"
        );
        held.abort();
    }
}
