//! The REST side of a Jupyter Server or Kernel Gateway: where it is, how to authenticate, and
//! the `/api/kernelspecs` and `/api/kernels` calls.
//!
//! Only plain `http://` is spoken (hyper's HTTP/1 client, no TLS): reach a remote server
//! through an SSH tunnel or a TLS-terminating proxy on this machine. The token travels only in
//! the `Authorization: token …` header, never in a URL, and is redacted from `Debug`.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};

/// Where a Jupyter Server or Kernel Gateway listens: `http://host:port/base/path/`.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// `host:port` (or `host`).
    authority: String,
    /// The base path, starting and ending with `/`.
    base_path: String,
}

impl ServerUrl {
    /// Parses `http://host[:port][/base/]`. `ws://` is read as `http://`. HTTPS, user info,
    /// queries and fragments are refused, the last two because a token does not belong in a
    /// URL (it would show in process lists and logs).
    pub fn parse(text: &str) -> Result<ServerUrl> {
        let refuse = |reason: &str| Error::ServerUrl {
            url: redact(text),
            reason: reason.to_owned(),
        };
        let uri: http::Uri = text
            .trim()
            .parse()
            .map_err(|_| refuse("it is not a URL like http://127.0.0.1:8888/"))?;
        match uri.scheme_str() {
            Some("http" | "ws") => {}
            Some("https" | "wss") => {
                return Err(refuse(
                    "TLS is not supported; reach the server through an SSH tunnel or a local TLS-terminating proxy and use its http:// address",
                ));
            }
            _ => return Err(refuse("it must start with http://")),
        }
        let authority = uri
            .authority()
            .ok_or_else(|| refuse("it names no host"))?
            .as_str();
        if authority.contains('@') {
            return Err(refuse(
                "user names and passwords do not belong in the URL; put the token in a file and pass --kernel-server-token-file",
            ));
        }
        if uri.query().is_some() {
            return Err(refuse(
                "a query does not belong in the URL (a token there would show in process lists); put the token in a file and pass --kernel-server-token-file",
            ));
        }
        let mut base_path = uri.path().to_owned();
        if !base_path.ends_with('/') {
            base_path.push('/');
        }
        Ok(ServerUrl {
            authority: authority.to_owned(),
            base_path,
        })
    }

    /// The `http://` URL of `path` (relative to the base path).
    pub(crate) fn http(&self, path: &str) -> String {
        format!("http://{}{}{path}", self.authority, self.base_path)
    }

    /// The `ws://` URL of `path` (relative to the base path).
    pub(crate) fn ws(&self, path: &str) -> String {
        format!("ws://{}{}{path}", self.authority, self.base_path)
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.authority, self.base_path)
    }
}

impl fmt::Debug for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ServerUrl({self})")
    }
}

/// The URL as it may be shown: without a query or user info, which may hold secrets.
fn redact(text: &str) -> String {
    let without_query = match text.split_once('?') {
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

/// The server's token. Its `Debug` says `<redacted>`; the value leaves this crate only in the
/// `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerToken(String);

impl ServerToken {
    /// A token; surrounding whitespace (a trailing newline in a file) is dropped. `None` when
    /// nothing is left.
    pub fn new(token: &str) -> Option<ServerToken> {
        let token = token.trim();
        (!token.is_empty()).then(|| ServerToken(token.to_owned()))
    }

    pub(crate) fn header_value(&self) -> String {
        format!("token {}", self.0)
    }
}

impl fmt::Debug for ServerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServerToken(<redacted>)")
    }
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

/// The REST client of one server.
#[derive(Clone)]
pub(crate) struct Rest {
    client: Client<HttpConnector, Full<Bytes>>,
    pub url: ServerUrl,
    pub token: Option<ServerToken>,
    pub timeout: Duration,
}

impl fmt::Debug for Rest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rest")
            .field("url", &self.url)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl Rest {
    pub(crate) fn new(url: ServerUrl, token: Option<ServerToken>, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        Rest {
            client: Client::builder(TokioExecutor::new()).build(connector),
            url,
            token,
            timeout,
        }
    }

    /// Sends one request and reads the JSON answer (`Null` for an empty body).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        operation: &'static str,
        timeout: Duration,
    ) -> Result<(StatusCode, Value)> {
        let mut request = Request::builder()
            .method(method)
            .uri(self.url.http(path))
            .header(header::ACCEPT, "application/json");
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, token.header_value());
        }
        let payload = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(payload))
            .map_err(|_| self.protocol_error(operation))?;
        let exchange =
            async {
                let response = self.client.request(request).await.map_err(|source| {
                    Error::ServerUnreachable {
                        url: self.url.to_string(),
                        operation,
                        source: Box::new(source),
                    }
                })?;
                let status = response.status();
                let bytes = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|source| Error::ServerUnreachable {
                        url: self.url.to_string(),
                        operation,
                        source: Box::new(source),
                    })?
                    .to_bytes();
                Ok::<_, Error>((status, bytes))
            };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| Error::Timeout {
                operation,
                after: timeout,
            })??;
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(Error::ServerAuth {
                url: self.url.to_string(),
                operation,
                status: status.as_u16(),
            });
        }
        let value = if bytes.is_empty() || !status.is_success() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).map_err(|_| self.protocol_error(operation))?
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
        const OPERATION: &str = "interrupting the kernel";
        let (status, _) = self
            .call(
                Method::POST,
                &kernel_path(id, "/interrupt"),
                None,
                OPERATION,
                self.timeout,
            )
            .await?;
        match status {
            StatusCode::NOT_FOUND => Ok(false),
            status if status.is_success() => Ok(true),
            status => Err(self.status_error(OPERATION, status)),
        }
    }

    /// Restarts the kernel and waits until the server says it is back. `false` when the server
    /// does not know the kernel.
    pub(crate) async fn restart(&self, id: &str, timeout: Duration) -> Result<bool> {
        const OPERATION: &str = "restarting the kernel";
        let (status, _) = self
            .call(
                Method::POST,
                &kernel_path(id, "/restart"),
                None,
                OPERATION,
                timeout,
            )
            .await?;
        match status {
            StatusCode::NOT_FOUND => Ok(false),
            status if status.is_success() => Ok(true),
            status => Err(self.status_error(OPERATION, status)),
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

    #[test]
    fn urls_keep_their_base_path_and_refuse_what_does_not_belong() {
        let url = ServerUrl::parse("http://127.0.0.1:8888").unwrap();
        assert_eq!(url.to_string(), "http://127.0.0.1:8888/");
        assert_eq!(
            url.http("api/kernelspecs"),
            "http://127.0.0.1:8888/api/kernelspecs"
        );
        let hub = ServerUrl::parse("http://hub.local:8000/user/alice").unwrap();
        assert_eq!(
            hub.ws("api/kernels/k1/channels"),
            "ws://hub.local:8000/user/alice/api/kernels/k1/channels"
        );
        assert_eq!(
            ServerUrl::parse("ws://localhost:9/").unwrap().to_string(),
            "http://localhost:9/"
        );
        for (bad, says) in [
            ("https://example.org/", "TLS is not supported"),
            ("ftp://example.org/", "must start with http://"),
            ("http://me:secret@host/", "user names and passwords"),
            ("http://host/?token=abc", "a query does not belong"),
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

    #[test]
    fn tokens_are_trimmed_and_never_shown() {
        let token = ServerToken::new("  s3cret\n").unwrap();
        assert_eq!(token.header_value(), "token s3cret");
        assert_eq!(format!("{token:?}"), "ServerToken(<redacted>)");
        assert!(ServerToken::new(" \n").is_none());
        let rest = Rest::new(
            ServerUrl::parse("http://127.0.0.1:1/").unwrap(),
            Some(token),
            Duration::from_secs(1),
        );
        assert!(!format!("{rest:?}").contains("s3cret"));
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
        let rest = Rest::new(
            ServerUrl::parse("http://127.0.0.1:1/").unwrap(),
            ServerToken::new("s3cret"),
            Duration::from_secs(5),
        );
        let error = rest.kernelspecs().await.unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("http://127.0.0.1:1/") && message.contains("listing kernelspecs"),
            "{message}"
        );
        assert!(!message.contains("s3cret"));
    }
}
