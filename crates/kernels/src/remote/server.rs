//! The REST side of a Jupyter Server or Kernel Gateway: where it is, how requests carry the
//! credential (its [`ConnectionProfile`]), and the `/api/kernelspecs` and `/api/kernels` calls.
//!
//! HTTPS goes through rustls (hyper-rustls); plain `http://` is for loopback unless the
//! profile allows more. The credential travels only where the profile places it, is renewed
//! once and the request retried when the server answers 401 or 403, and is redacted from
//! `Debug`; it never reaches a log line, a URL we show or an error.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::path::encode_segment;
use super::profile::{ConnectionProfile, Credential, CredentialPlacement};
use super::tls::{self, certificate_problem};
use crate::error::{Error, Result};

/// Where a kernel server listens: `http://host:port/base/path/` or `https://…`.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    https: bool,
    /// `host:port` (or `host`).
    authority: String,
    /// The base path, starting and ending with `/`.
    base_path: String,
}

impl ServerUrl {
    /// Parses `http(s)://host[:port][/base/]` (`ws://` and `wss://` are read as `http://` and
    /// `https://`). User info, queries and fragments are refused, because a token does not
    /// belong in a URL (it would show in process lists and logs).
    pub fn parse(text: &str) -> Result<ServerUrl> {
        let refuse = |reason: &str| Error::ServerUrl {
            url: redact(text),
            reason: reason.to_owned(),
        };
        let uri: http::Uri = text
            .trim()
            .parse()
            .map_err(|_| refuse("it is not a URL like https://jupyter.example.org/"))?;
        let https = match uri.scheme_str() {
            Some("http" | "ws") => false,
            Some("https" | "wss") => true,
            _ => {
                return Err(refuse(
                    "it must start with https:// (or http:// on loopback)",
                ));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| refuse("it names no host"))?
            .as_str();
        if authority.contains('@') {
            return Err(refuse(
                "user names and passwords do not belong in the URL; put the token in a file and pass its path",
            ));
        }
        if uri.query().is_some() || text.contains('#') {
            return Err(refuse(
                "a query does not belong in the URL (a token there would show in process lists); put the token in a file and pass its path",
            ));
        }
        let mut base_path = uri.path().to_owned();
        if !base_path.ends_with('/') {
            base_path.push('/');
        }
        Ok(ServerUrl {
            https,
            authority: authority.to_owned(),
            base_path,
        })
    }

    /// Whether requests go over TLS.
    pub fn is_https(&self) -> bool {
        self.https
    }

    /// The host name (or address) without the port, as TLS verifies it.
    pub fn host(&self) -> &str {
        let authority = self.authority.as_str();
        if let Some(rest) = authority.strip_prefix('[') {
            return rest.split(']').next().unwrap_or(rest);
        }
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
    }

    /// The port, explicit or the scheme's default.
    pub fn port(&self) -> u16 {
        let authority = self.authority.as_str();
        let after_host = match authority.rfind(']') {
            Some(end) => &authority[end + 1..],
            None => authority,
        };
        after_host
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .unwrap_or(if self.https { 443 } else { 80 })
    }

    /// Whether the host is this machine's loopback (`127.0.0.0/8`, `::1`, `localhost`).
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|address| address.is_loopback())
    }

    /// The base path (`/` or `/user/alice/`).
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    /// The same origin with another base path (an absolute path, as a hub gives them).
    pub fn with_base_path(&self, path: &str) -> ServerUrl {
        let mut base_path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        if !base_path.ends_with('/') {
            base_path.push('/');
        }
        ServerUrl {
            https: self.https,
            authority: self.authority.clone(),
            base_path,
        }
    }

    /// The URL of `path` (relative to the base path).
    pub fn http(&self, path: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{}{path}", self.authority, self.base_path)
    }

    /// The WebSocket URL of `path` (relative to the base path): `wss://` for `https://`.
    pub fn ws(&self, path: &str) -> String {
        let scheme = if self.https { "wss" } else { "ws" };
        format!("{scheme}://{}{}{path}", self.authority, self.base_path)
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.http(""))
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerUrl({self})")
    }
}

/// The URL as it may be shown: without a query or user info, which may hold secrets.
fn redact(text: &str) -> String {
    let without_query = match text.split_once(['?', '#']) {
        Some((before, _)) => format!("{before}?…"),
        None => text.to_owned(),
    };
    let (scheme, rest) = without_query
        .split_once("://")
        .unwrap_or(("", without_query.as_str()));
    let host_end = rest.find('/').unwrap_or(rest.len());
    match rest[..host_end].rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://…@{host}{}", &rest[host_end..]),
        None => without_query.clone(),
    }
}

/// A server credential (a token). Its `Debug` says `<redacted>`; the value leaves this crate
/// only where a [`ConnectionProfile`] places it.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerToken(String);

impl ServerToken {
    /// A token; surrounding whitespace (a trailing newline in a file) is dropped. `None` when
    /// nothing is left.
    pub fn new(token: &str) -> Option<ServerToken> {
        let token = token.trim();
        (!token.is_empty()).then(|| ServerToken(token.to_owned()))
    }

    /// The value itself, for placing it on a request.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `text` contains the token (to keep it out of anything shown).
    pub(crate) fn appears_in(&self, text: &str) -> bool {
        text.contains(&self.0)
    }
}

impl fmt::Debug for ServerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerToken(<redacted>)")
    }
}

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// What every request to a server (and its hub) shares: the HTTP client over rustls, the TLS
/// configuration for WebSockets, and where the credential comes from and goes.
pub(crate) struct Transport {
    client: HttpsClient,
    pub tls: Arc<rustls::ClientConfig>,
    pub credential: Option<Arc<Credential>>,
    placements: Vec<CredentialPlacement>,
    headers: Vec<(HeaderName, HeaderValue)>,
    strip_prefix: Option<String>,
    hint: String,
    /// Answers the kernels' out-of-protocol IOPub requests.
    pub kernel_requests: Option<Arc<dyn super::profile::AnswerKernelRequest>>,
}

crate::debug_fields!(Transport {
    credential,
    placements
});

/// The credential and the headers of one request, for REST or the WebSocket.
pub(crate) struct Placed {
    pub headers: HeaderMap,
    /// `name=value` pairs for the WebSocket URL (already percent-encoded).
    pub query: Vec<String>,
    pub generation: u64,
}

impl Transport {
    /// The transport of `profile`: checks plain HTTP and builds the TLS configuration.
    pub(crate) fn new(profile: &ConnectionProfile, connect_timeout: Duration) -> Result<Arc<Self>> {
        profile.check_transport()?;
        let tls = tls::client_config(&profile.tls)?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(connect_timeout));
        connector.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let headers = profile
            .headers
            .iter()
            .map(|(name, value)| {
                let name = HeaderName::from_bytes(name.as_bytes()).ok()?;
                let value = HeaderValue::from_str(value).ok()?;
                Some((name, value))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::ServerUrl {
                url: profile.base_url.to_string(),
                reason: "a header of the connection profile cannot be sent".to_owned(),
            })?;
        Ok(Arc::new(Transport {
            client: Client::builder(TokioExecutor::new()).build(https),
            tls,
            credential: profile.credential.clone().map(Credential::new),
            placements: profile.placements.clone(),
            headers,
            strip_prefix: profile.strip_prefix.clone(),
            hint: profile.credential_hint.clone(),
            kernel_requests: profile.kernel_requests.clone(),
        }))
    }

    /// The headers (and WebSocket query parameters) of a request now.
    pub(crate) async fn place(&self, url: &ServerUrl) -> Result<Placed> {
        let mut placed = Placed {
            headers: HeaderMap::new(),
            query: Vec::new(),
            generation: 0,
        };
        for (name, value) in &self.headers {
            placed.headers.insert(name.clone(), value.clone());
        }
        let Some(credential) = &self.credential else {
            return Ok(placed);
        };
        let (token, generation) = credential.current().await?;
        placed.generation = generation;
        let Some(token) = token else {
            return Ok(placed);
        };
        let unsendable = || Error::ServerUrl {
            url: url.to_string(),
            reason: "the token contains characters that cannot be sent in a header".to_owned(),
        };
        for placement in &self.placements {
            match placement {
                CredentialPlacement::AuthorizationToken => {
                    let mut value = HeaderValue::from_str(&format!("token {}", token.expose()))
                        .map_err(|_| unsendable())?;
                    value.set_sensitive(true);
                    placed.headers.insert(header::AUTHORIZATION, value);
                }
                CredentialPlacement::AuthorizationBearer => {
                    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose()))
                        .map_err(|_| unsendable())?;
                    value.set_sensitive(true);
                    placed.headers.insert(header::AUTHORIZATION, value);
                }
                CredentialPlacement::Header(name) => {
                    let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| unsendable())?;
                    let mut value =
                        HeaderValue::from_str(token.expose()).map_err(|_| unsendable())?;
                    value.set_sensitive(true);
                    placed.headers.insert(name, value);
                }
                CredentialPlacement::WebSocketQuery(name) => {
                    placed.query.push(format!(
                        "{}={}",
                        encode_segment(name),
                        encode_segment(token.expose())
                    ));
                }
            }
        }
        Ok(placed)
    }

    /// After a 401 or 403 for a request placed with `generation`: whether a fresh credential is
    /// there to retry with.
    pub(crate) async fn renew(&self, generation: u64) -> Result<bool> {
        match &self.credential {
            Some(credential) => credential.renew(generation).await,
            None => Ok(false),
        }
    }

    /// The error for a refused credential.
    pub(crate) fn auth_error(
        &self,
        url: &ServerUrl,
        operation: &'static str,
        status: u16,
    ) -> Error {
        Error::ServerAuth {
            url: url.to_string(),
            operation,
            status,
            hint: self.hint.clone(),
        }
    }

    /// The JSON of an answer body, without the profile's prefix.
    pub(crate) fn json_body<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        match &self.strip_prefix {
            Some(prefix) => bytes.strip_prefix(prefix.as_bytes()).unwrap_or(bytes),
            None => bytes,
        }
    }
}

/// What `work` yields, or [`Error::Timeout`] for `operation` once `after` has passed.
pub(crate) async fn within<F: Future>(
    after: Duration,
    operation: &'static str,
    work: F,
) -> Result<F::Output> {
    tokio::time::timeout(after, work)
        .await
        .map_err(|_| Error::Timeout { operation, after })
}

/// An error reaching `url`: a certificate problem says so and names the option that fixes it.
pub(crate) fn unreachable_error(
    url: &ServerUrl,
    operation: &'static str,
    source: Box<dyn std::error::Error + Send + Sync>,
) -> Error {
    match certificate_problem(source.as_ref()) {
        Some(problem) => Error::ServerCertificate {
            url: url.to_string(),
            problem: problem.explain(),
        },
        None => Error::ServerUnreachable {
            url: url.to_string(),
            operation,
            source,
        },
    }
}

/// One answer: its status and whole body.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub body: Bytes,
}

/// One kernel as `/api/kernels` describes it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KernelModel {
    pub id: String,
    #[serde(default)]
    pub execution_state: Option<String>,
}

/// One entry of `/api/kernelspecs`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KernelSpecModel {
    pub name: String,
    #[serde(default)]
    pub spec: KernelSpecBody,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct KernelSpecBody {
    #[serde(default)]
    pub display_name: String,
    #[serde(default)]
    pub language: String,
    #[serde(default)]
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Map<String, Value>,
    #[serde(default)]
    pub interrupt_mode: Option<String>,
}

/// `/api/kernelspecs`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct KernelSpecsModel {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub kernelspecs: std::collections::BTreeMap<String, KernelSpecModel>,
}

/// The REST client of one server (or of a hub's API). Its derived `Debug` shows no secret:
/// the URL's and the transport's leave them out.
#[derive(Debug, Clone)]
pub(crate) struct Rest {
    pub transport: Arc<Transport>,
    pub url: ServerUrl,
    pub timeout: Duration,
}

impl Rest {
    pub(crate) fn new(transport: Arc<Transport>, url: ServerUrl, timeout: Duration) -> Self {
        Rest {
            transport,
            url,
            timeout,
        }
    }

    /// The same transport (credential, TLS) for another server.
    pub(crate) fn at(&self, url: ServerUrl) -> Rest {
        Rest {
            transport: Arc::clone(&self.transport),
            url,
            timeout: self.timeout,
        }
    }

    /// Sends one request and reads the whole answer. A 401 or 403 renews the credential once
    /// and tries again when a fresh one came; a second refusal is `ServerAuth`.
    pub(crate) async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &'static str,
        timeout: Duration,
    ) -> Result<Answer> {
        let mut retried = false;
        loop {
            let placed = self.transport.place(&self.url).await?;
            let answer = self
                .send(method.clone(), path, body, &placed, operation, timeout)
                .await?;
            if matches!(
                answer.status,
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN
            ) && !retried
                && self.transport.renew(placed.generation).await?
            {
                retried = true;
                continue;
            }
            return Ok(answer);
        }
    }

    /// Sends one request and keeps the body open, for event streams. The credential is
    /// renewed and the request retried once, as for [`Rest::exchange`].
    pub(crate) async fn open_stream(
        &self,
        path: &str,
        operation: &'static str,
    ) -> Result<http::Response<hyper::body::Incoming>> {
        let mut retried = false;
        loop {
            let placed = self.transport.place(&self.url).await?;
            let request = self.request(
                Method::GET,
                path,
                None,
                &placed,
                "text/event-stream",
                operation,
            )?;
            let response = within(
                self.timeout,
                operation,
                self.transport.client.request(request),
            )
            .await?
            .map_err(|source| unreachable_error(&self.url, operation, Box::new(source)))?;
            let status = response.status();
            if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                && !retried
                && self.transport.renew(placed.generation).await?
            {
                retried = true;
                continue;
            }
            return Ok(response);
        }
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        placed: &Placed,
        accept: &'static str,
        operation: &'static str,
    ) -> Result<Request<Full<Bytes>>> {
        let mut request = Request::builder()
            .method(method)
            .uri(self.url.http(path))
            .header(header::ACCEPT, accept);
        for (name, value) in &placed.headers {
            request = request.header(name, value);
        }
        let payload = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        request
            .body(Full::new(payload))
            .map_err(|_| self.protocol_error(operation))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        placed: &Placed,
        operation: &'static str,
        timeout: Duration,
    ) -> Result<Answer> {
        let request = self.request(method, path, body, placed, "application/json", operation)?;
        let exchange = async {
            let response = self
                .transport
                .client
                .request(request)
                .await
                .map_err(|source| unreachable_error(&self.url, operation, Box::new(source)))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|source| unreachable_error(&self.url, operation, Box::new(source)))?
                .to_bytes();
            Ok::<_, Error>(Answer { status, body })
        };
        within(timeout, operation, exchange).await?
    }

    /// Sends one request and reads the JSON answer (`Null` for an empty body or a failure
    /// status).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        operation: &'static str,
        timeout: Duration,
    ) -> Result<(StatusCode, Value)> {
        let answer = self
            .exchange(method, path, body.as_ref(), operation, timeout)
            .await?;
        let status = answer.status;
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(self
                .transport
                .auth_error(&self.url, operation, status.as_u16()));
        }
        let value = if answer.body.is_empty() || !status.is_success() {
            Value::Null
        } else {
            serde_json::from_slice(self.transport.json_body(&answer.body))
                .map_err(|_| self.protocol_error(operation))?
        };
        Ok((status, value))
    }

    fn protocol_error(&self, operation: &'static str) -> Error {
        Error::ServerProtocol {
            url: self.url.to_string(),
            operation,
        }
    }

    fn status_error(&self, operation: &'static str, status: StatusCode) -> Error {
        Error::ServerStatus {
            url: self.url.to_string(),
            operation,
            status: status.as_u16(),
        }
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        value: Value,
        operation: &'static str,
    ) -> Result<T> {
        serde_json::from_value(value).map_err(|_| self.protocol_error(operation))
    }

    pub(crate) async fn kernelspecs(&self) -> Result<KernelSpecsModel> {
        const OPERATION: &str = "listing kernelspecs";
        let (status, value) = self
            .call(
                Method::GET,
                "api/kernelspecs",
                None,
                OPERATION,
                self.timeout,
            )
            .await?;
        if !status.is_success() {
            return Err(self.status_error(OPERATION, status));
        }
        self.parse(value, OPERATION)
    }

    /// Starts a kernel of kernelspec `name`, in the server's folder `path` when given.
    pub(crate) async fn start_kernel(
        &self,
        name: &str,
        path: Option<&str>,
        timeout: Duration,
    ) -> Result<KernelModel> {
        const OPERATION: &str = "starting a kernel";
        let mut body = json!({ "name": name });
        if let Some(path) = path {
            body["path"] = Value::from(path);
        }
        let (status, value) = self
            .call(Method::POST, "api/kernels", Some(body), OPERATION, timeout)
            .await?;
        if !status.is_success() {
            return Err(self.status_error(OPERATION, status));
        }
        let model: KernelModel = self.parse(value, OPERATION)?;
        if !is_kernel_id(&model.id) {
            return Err(self.protocol_error(OPERATION));
        }
        Ok(model)
    }

    /// The kernel's model, `None` when the server does not know it (any more).
    pub(crate) async fn kernel(&self, id: &str, timeout: Duration) -> Result<Option<KernelModel>> {
        const OPERATION: &str = "looking the kernel up";
        let (status, value) = self
            .call(Method::GET, &kernel_path(id, ""), None, OPERATION, timeout)
            .await?;
        match status {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => self.parse(value, OPERATION).map(Some),
            status => Err(self.status_error(OPERATION, status)),
        }
    }

    /// Asks the server to interrupt the kernel (it honours the kernelspec's interrupt mode).
    /// `false` when the server does not know the kernel.
    pub(crate) async fn interrupt(&self, id: &str) -> Result<bool> {
        self.kernel_action(id, "/interrupt", "interrupting the kernel", self.timeout)
            .await
    }

    /// Restarts the kernel and waits until the server says it is back. `false` when the server
    /// does not know the kernel.
    pub(crate) async fn restart(&self, id: &str, timeout: Duration) -> Result<bool> {
        self.kernel_action(id, "/restart", "restarting the kernel", timeout)
            .await
    }

    /// `POST api/kernels/<id><action>`: `false` when the server does not know the kernel.
    async fn kernel_action(
        &self,
        id: &str,
        action: &str,
        operation: &'static str,
        timeout: Duration,
    ) -> Result<bool> {
        let (status, _) = self
            .call(
                Method::POST,
                &kernel_path(id, action),
                None,
                operation,
                timeout,
            )
            .await?;
        match status {
            StatusCode::NOT_FOUND => Ok(false),
            status if status.is_success() => Ok(true),
            status => Err(self.status_error(operation, status)),
        }
    }

    /// Shuts the kernel down. A kernel the server does not know is already gone.
    pub(crate) async fn delete(&self, id: &str, timeout: Duration) -> Result<()> {
        const OPERATION: &str = "shutting the kernel down";
        let (status, _) = self
            .call(
                Method::DELETE,
                &kernel_path(id, ""),
                None,
                OPERATION,
                timeout,
            )
            .await?;
        match status {
            StatusCode::NOT_FOUND => Ok(()),
            status if status.is_success() => Ok(()),
            status => Err(self.status_error(OPERATION, status)),
        }
    }
}

/// `api/kernels/<id><suffix>`.
pub(crate) fn kernel_path(id: &str, suffix: &str) -> String {
    format!("api/kernels/{id}{suffix}")
}

/// Kernel ids are UUIDs on Jupyter Server and the gateways; anything that could change a URL's
/// path is refused, so a misbehaving server cannot steer our requests elsewhere.
pub(crate) fn is_kernel_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::profile::CredentialSource;

    fn rest(url: &str, token: &str) -> Rest {
        let url = ServerUrl::parse(url).unwrap();
        let profile = ConnectionProfile::jupyter_server(
            url.clone(),
            Some(CredentialSource::Static(ServerToken::new(token).unwrap())),
        );
        Rest::new(
            Transport::new(&profile, Duration::from_secs(5)).unwrap(),
            url,
            Duration::from_secs(5),
        )
    }

    #[test]
    fn urls_keep_their_base_path_and_refuse_what_does_not_belong() {
        let url = ServerUrl::parse("http://127.0.0.1:8888").unwrap();
        assert_eq!(url.to_string(), "http://127.0.0.1:8888/");
        assert_eq!(
            url.http("api/kernelspecs"),
            "http://127.0.0.1:8888/api/kernelspecs"
        );
        assert_eq!((url.host(), url.port()), ("127.0.0.1", 8888));
        let hub = ServerUrl::parse("https://hub.local/user/alice").unwrap();
        assert_eq!(
            hub.ws("api/kernels/k1/channels"),
            "wss://hub.local/user/alice/api/kernels/k1/channels"
        );
        assert_eq!(
            (hub.host(), hub.port(), hub.is_https()),
            ("hub.local", 443, true)
        );
        assert_eq!(
            hub.with_base_path("/user/bob/work/").to_string(),
            "https://hub.local/user/bob/work/"
        );
        let v6 = ServerUrl::parse("http://[::1]:9/").unwrap();
        assert_eq!((v6.host(), v6.port(), v6.is_loopback()), ("::1", 9, true));
        assert_eq!(
            ServerUrl::parse("ws://localhost:9/").unwrap().to_string(),
            "http://localhost:9/"
        );
        assert!(!ServerUrl::parse("http://10.0.0.1/").unwrap().is_loopback());
        for (bad, says) in [
            ("ftp://example.org/", "must start with https://"),
            ("http://me:secret@host/", "user names and passwords"),
            ("http://host/?token=abc", "a query does not belong"),
            ("https://host/#token=abc", "a query does not belong"),
            ("not a url", "not a URL"),
        ] {
            let error = ServerUrl::parse(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
            assert!(
                !error.contains("secret") && !error.contains("abc"),
                "{error}"
            );
        }
    }

    #[tokio::test]
    async fn tokens_are_trimmed_placed_where_the_profile_says_and_never_shown() {
        let token = ServerToken::new("  s3cret\n").unwrap();
        assert_eq!(token.expose(), "s3cret");
        assert_eq!(format!("{token:?}"), "ServerToken(<redacted>)");
        assert!(ServerToken::new(" \n").is_none());
        let rest = rest("http://127.0.0.1:1/", "s3cret");
        assert!(!format!("{rest:?}").contains("s3cret"));
        let placed = rest.transport.place(&rest.url).await.unwrap();
        assert_eq!(placed.headers[header::AUTHORIZATION], "token s3cret");
        assert!(placed.query.is_empty());

        // A runtime behind a proxy of its own (Colab's): a token header, the same token as a
        // WebSocket query parameter, a client-agent header, an anti-XSSI prefix.
        let url = ServerUrl::parse("https://8080-runtime.example.dev/").unwrap();
        let proxy = ConnectionProfile {
            placements: vec![
                CredentialPlacement::Header("X-Colab-Runtime-Proxy-Token".into()),
                CredentialPlacement::WebSocketQuery("colab-runtime-proxy-token".into()),
            ],
            headers: vec![("X-Colab-Client-Agent".into(), "jupyter-mcp".into())],
            strip_prefix: Some(")]}'\n".into()),
            ..ConnectionProfile::jupyter_server(
                url.clone(),
                Some(CredentialSource::Static(ServerToken::new("a b/c").unwrap())),
            )
        };
        let transport = Transport::new(&proxy, Duration::from_secs(5)).unwrap();
        let placed = transport.place(&url).await.unwrap();
        assert_eq!(placed.headers["x-colab-runtime-proxy-token"], "a b/c");
        assert_eq!(placed.headers["x-colab-client-agent"], "jupyter-mcp");
        assert!(placed.headers.get(header::AUTHORIZATION).is_none());
        assert_eq!(placed.query, ["colab-runtime-proxy-token=a%20b%2Fc"]);
        assert_eq!(transport.json_body(b")]}'\n{\"a\":1}"), b"{\"a\":1}");
        assert_eq!(transport.json_body(b"{}"), b"{}");
    }

    #[test]
    fn kernel_ids_that_could_change_a_path_are_refused() {
        assert!(is_kernel_id("3f2a9c1e-58b4-4c1e-9d2b-0f6a7e8d9c10"));
        for bad in ["", "../x", "a/b", "a?b", "a b", "a%2f"] {
            assert!(!is_kernel_id(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_is_named_without_the_token() {
        // Port 1 on loopback refuses connections.
        let rest = rest("http://127.0.0.1:1/", "s3cret");
        let error = rest.kernelspecs().await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("http://127.0.0.1:1/") && message.contains("listing kernelspecs"),
            "{message}"
        );
        assert!(!message.contains("s3cret"));
    }
}
