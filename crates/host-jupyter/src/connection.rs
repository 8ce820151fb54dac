//! How to reach the Jupyter Server: its base URL and token, in one place. The REST calls, the
//! room WebSockets and the remote-kernel client all take their addresses and credentials from
//! [`ServerConnection`], so that TLS and the connection profiles of the remote-kernel client
//! replace it in one change.

use std::fmt;

use crate::error::JupyterError;

/// A Jupyter Server (with jupyter-collaboration) at `http://host:port/base/`, and its token.
#[derive(Clone)]
pub struct ServerConnection {
    url: kernels::ServerUrl,
    token: Option<String>,
}

impl fmt::Debug for ServerConnection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ServerConnection")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl ServerConnection {
    /// The server at `url` (`http://host:port/base/`; the remote-kernel client's rules, no
    /// token in the URL; no TLS yet), authenticated with `token` when given.
    pub fn new(url: &str, token: Option<&str>) -> Result<ServerConnection, JupyterError> {
        let url = kernels::ServerUrl::parse(url).map_err(|failure| JupyterError::Config {
            message: failure.to_string(),
        })?;
        if url.is_https() {
            // The room WebSockets and REST calls here are plain; TLS for them is not built yet.
            return Err(JupyterError::Config {
                message: format!(
                    "{url}: --jupyter speaks plain http:// only for now; reach the server through an SSH tunnel or a local TLS-terminating proxy and use its http:// address"
                ),
            });
        }
        Ok(ServerConnection {
            url,
            token: token
                .map(str::trim)
                .filter(|token| !token.is_empty())
                .map(str::to_owned),
        })
    }

    /// `http://host:port/base/`.
    pub fn base_url(&self) -> String {
        self.url.to_string()
    }

    /// The `http://` URL of `path` (relative to the base path, already encoded).
    pub fn http_url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// The `ws://` URL of `path` (relative to the base path, already encoded).
    pub fn ws_url(&self, path: &str) -> String {
        let base = self.base_url();
        let rest = base.strip_prefix("http://").unwrap_or(&base);
        format!("ws://{rest}{path}")
    }

    /// `host:port`, for the `Host` header.
    pub fn authority(&self) -> String {
        let base = self.base_url();
        let rest = base.strip_prefix("http://").unwrap_or(&base);
        rest.split('/').next().unwrap_or_default().to_owned()
    }

    /// The `Authorization` header value, when there is a token. The token never goes into a
    /// URL (it would show in logs).
    pub(crate) fn authorization(&self) -> Option<String> {
        self.token.as_ref().map(|token| format!("token {token}"))
    }

    /// The remote-kernel client's configuration for the same server.
    pub fn kernel_config(&self) -> kernels::RemoteConfig {
        kernels::RemoteConfig::new(
            self.url.clone(),
            self.token.as_deref().and_then(kernels::ServerToken::new),
        )
    }
}

/// `path` with each segment percent-encoded, `/` kept (for Contents API and room paths).
pub fn encode_path(path: &str) -> String {
    path.split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

/// One path segment or query value, percent-encoded (RFC 3986 unreserved characters kept).
pub fn encode_segment(segment: &str) -> String {
    let mut encoded = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                encoded.push(byte as char);
            }
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_share_the_base_path_and_the_token_stays_out_of_them() {
        let connection =
            ServerConnection::new("http://127.0.0.1:8888/user/a", Some("secret\n")).unwrap();
        assert_eq!(connection.base_url(), "http://127.0.0.1:8888/user/a/");
        assert_eq!(
            connection.ws_url("api/collaboration/room/x"),
            "ws://127.0.0.1:8888/user/a/api/collaboration/room/x"
        );
        assert_eq!(connection.authority(), "127.0.0.1:8888");
        assert_eq!(connection.authorization().as_deref(), Some("token secret"));
        assert!(!format!("{connection:?}").contains("secret"));
        assert!(ServerConnection::new("https://example.org/", None).is_err());
    }

    #[test]
    fn paths_are_encoded_per_segment() {
        assert_eq!(
            encode_path("sub dir/my nb.ipynb"),
            "sub%20dir/my%20nb.ipynb"
        );
        assert_eq!(encode_segment("a/b?c"), "a%2Fb%3Fc");
        assert_eq!(encode_path("é.ipynb"), "%C3%A9.ipynb");
    }
}
