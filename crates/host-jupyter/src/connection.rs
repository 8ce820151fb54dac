//! How to reach the Jupyter Server: its connection profile (base URL, credential source,
//! trusted certificate authorities), in one place. The REST calls, the room WebSockets and the
//! remote-kernel client all go through the kernels crate's transport for that profile
//! ([`kernels::ServerClient`], [`kernels::RemoteProvider`]): `http://` or `https://` (and
//! `ws://` or `wss://`), rustls with the same trust and certificate errors as remote kernels,
//! and the token in a header, re-read from its file when the server refuses it.

use std::time::Duration;

use crate::error::JupyterError;

/// How long one REST call or WebSocket handshake may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// A Jupyter Server (with jupyter-collaboration) at `http(s)://host:port/base/`, and how to
/// authenticate to it.
#[derive(Clone)]
pub struct ServerConnection {
    profile: kernels::ConnectionProfile,
    client: kernels::ServerClient,
}

// The profile's `Debug` redacts the credential.
kernels::debug_fields!(ServerConnection { profile });

impl ServerConnection {
    /// The server at `url` (`http(s)://host:port/base/`; the remote-kernel client's rules, no
    /// token in the URL), authenticated with the fixed `token` when given, trusting the
    /// platform's certificate authorities.
    pub fn new(url: &str, token: Option<&str>) -> Result<ServerConnection, JupyterError> {
        let url = kernels::ServerUrl::parse(url).map_err(config_error)?;
        ServerConnection::with_profile(kernels::ConnectionProfile::jupyter_server(
            url,
            token
                .and_then(kernels::ServerToken::new)
                .map(kernels::CredentialSource::Static),
        ))
    }

    /// The server `profile` describes: its credential source (a token file is read again
    /// when it changes and when the server refuses the token), its trusted certificate
    /// authorities, whether plain `http://` may leave loopback. Fails when the profile cannot
    /// be used (an unreadable CA file, plain HTTP to another machine without leave).
    pub fn with_profile(
        profile: kernels::ConnectionProfile,
    ) -> Result<ServerConnection, JupyterError> {
        let client = kernels::ServerClient::new(&profile, TIMEOUT).map_err(config_error)?;
        Ok(ServerConnection { profile, client })
    }

    /// `http(s)://host:port/base/`.
    pub fn base_url(&self) -> String {
        self.profile.base_url.to_string()
    }

    /// The `http(s)://` URL of `path` (relative to the base path, already encoded).
    pub fn http_url(&self, path: &str) -> String {
        self.profile.base_url.http(path)
    }

    /// The `ws://` (`wss://` under `https://`) URL of `path` (relative to the base path,
    /// already encoded). The token never goes into it: it travels in a header.
    pub fn ws_url(&self, path: &str) -> String {
        self.profile.base_url.ws(path)
    }

    /// The client of the server's API and WebSockets.
    pub(crate) fn client(&self) -> &kernels::ServerClient {
        &self.client
    }

    /// The remote-kernel client's configuration for the same server (the same credential
    /// source and trust).
    pub fn kernel_config(&self) -> kernels::RemoteConfig {
        let mut config = kernels::RemoteConfig::with_profile(self.profile.clone());
        config.request_timeout = TIMEOUT;
        config
    }
}

fn config_error(failure: kernels::Error) -> JupyterError {
    JupyterError::Config {
        message: failure.to_string(),
    }
}

/// Contents API and room paths, session ids: percent-encoded by the kernels crate's one path
/// builder, as every request path to a server is.
pub use kernels::{encode_path, encode_segment};

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
        assert!(!format!("{connection:?}").contains("secret"));
        assert!(!connection.ws_url("x").contains("secret"));
    }

    #[test]
    fn https_servers_are_reached_over_tls_with_wss_rooms() {
        let connection = ServerConnection::new("https://jupyter.example.org:8443/lab", None)
            .expect("https:// is accepted");
        assert_eq!(
            connection.base_url(),
            "https://jupyter.example.org:8443/lab/"
        );
        assert_eq!(
            connection.http_url("api/contents/a.ipynb"),
            "https://jupyter.example.org:8443/lab/api/contents/a.ipynb"
        );
        assert_eq!(
            connection.ws_url("api/collaboration/room/JupyterLab:globalAwareness"),
            "wss://jupyter.example.org:8443/lab/api/collaboration/room/JupyterLab:globalAwareness"
        );
        // The same rules as for kernel servers: plain http:// leaves loopback only when asked.
        let error = ServerConnection::new("http://10.0.0.1:8888/", None).unwrap_err();
        assert!(
            error.to_string().contains("--allow-insecure-http"),
            "{error}"
        );
    }
}
