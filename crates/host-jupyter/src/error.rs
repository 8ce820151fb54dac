//! What can go wrong talking to a Jupyter Server. Messages say what to do next and never carry
//! the token or raw server text.

use thiserror::Error;

/// A failure of this host's own calls to the Jupyter Server.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JupyterError {
    /// The server address or token cannot be used as given.
    #[error("{message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// Nothing answered, or the connection broke.
    #[error(
        "the Jupyter server at {url} cannot be reached ({reason}); check that it runs and that --jupyter names it"
    )]
    Unreachable {
        /// The server's base URL.
        url: String,
        /// A short cause (refused, timed out, closed).
        reason: String,
    },
    /// The server's TLS certificate was refused; `problem` says why and which option fixes it.
    #[error("the Jupyter server at {url} presented a TLS certificate that {problem}")]
    Certificate {
        /// The server's base URL.
        url: String,
        /// What is wrong with the certificate and what to do (names --kernel-server-ca).
        problem: String,
    },
    /// The server refused the token.
    #[error(
        "the Jupyter server at {url} refused the token (HTTP {status}); pass the server's token in JUPYTER_MCP_KERNEL_SERVER_TOKEN or --kernel-server-token-file"
    )]
    Unauthorized {
        /// The server's base URL.
        url: String,
        /// 401 or 403.
        status: u16,
    },
    /// The server has no such file.
    #[error("the Jupyter server has no file `{path}`")]
    NotFound {
        /// The path relative to the server's root.
        path: String,
    },
    /// The server has no real-time collaboration.
    #[error(
        "the Jupyter server at {url} has no real-time collaboration: install jupyter-collaboration there (pip install jupyter-collaboration) and restart it"
    )]
    NoCollaboration {
        /// The server's base URL.
        url: String,
    },
    /// The server answered something else than expected.
    #[error("the Jupyter server answered {what} with HTTP {status}")]
    Status {
        /// Which request.
        what: String,
        /// The HTTP status.
        status: u16,
    },
    /// The server answered with a body that is not what its API documents.
    #[error("the Jupyter server's answer to {what} could not be read")]
    Malformed {
        /// Which request.
        what: String,
    },
    /// The notebook's collaboration room is not connected (it is being reconnected).
    #[error(
        "the live document of {path} is not connected to the Jupyter server right now ({reason}); nothing was changed. Try again in a moment"
    )]
    Disconnected {
        /// The notebook's path.
        path: String,
        /// Why.
        reason: String,
    },
}
