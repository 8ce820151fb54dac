//! What can go wrong in the broker, with variants a caller can act on.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BrokerError {
    /// Something that is not a jupyter-mcp broker holds the shared port.
    #[error(
        "port {port} on 127.0.0.1 is in use by another program ({what}), not by a jupyter-mcp \
         server; stop it, pick another port with --port, or use --port 0 for a private server on \
         a free port"
    )]
    PortHeldByOther { port: u16, what: String },
    /// A jupyter-mcp broker holds the port, but this process cannot join it.
    #[error("a jupyter-mcp broker holds port {port}, but this server cannot join it: {problem}")]
    CannotJoin { port: u16, problem: String },
    /// The broker already has a window with this id: the same root is served already.
    #[error("{message}")]
    WindowTaken { message: String },
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {path} cannot be used: {problem}")]
    TokenFile { path: PathBuf, problem: String },
    /// Nothing answered on the port (refused, reset, or the connection broke).
    #[error("nothing answered on 127.0.0.1:{port}: {reason}")]
    Unreachable { port: u16, reason: String },
    #[error("127.0.0.1:{port} did not answer within {millis} ms")]
    TimedOut { port: u16, millis: u128 },
    /// The other side answered with an HTTP error.
    #[error("127.0.0.1:{port} refused the request ({status}): {message}")]
    Refused {
        port: u16,
        status: u16,
        message: String,
    },
    /// The other side answered something that is not the broker protocol.
    #[error(
        "127.0.0.1:{port} gave an answer that is not the jupyter-mcp broker protocol: {problem}"
    )]
    BadAnswer { port: u16, problem: String },
}
