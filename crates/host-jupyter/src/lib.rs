//! The JupyterLab host of jupyter-mcp: the agent and a person edit the same live notebook.
//!
//! Layer 3 (host). [`JupyterHost`] implements `host_core::NotebookHost` over a Jupyter Server
//! with jupyter-collaboration. Its notebooks are the server's (listed through the Contents
//! API); an open notebook is the server's shared Yjs document, reached as JupyterLab reaches it
//! (the collaboration session endpoint, then the document's room over a WebSocket speaking the
//! Yjs sync and awareness protocols, [`protocol`]) and held with `yrs`. Reads come from the live
//! document; every edit is one Yjs transaction planned against the version the tools read
//! ([`ydoc::plan`]), with minimal text edits so a person typing in the same cell keeps their
//! characters. Saving is the server's (its save request); `undo_last` is the tools' own, committed
//! here like any edit.
//! The kernel is the notebook's server session, shared with the JupyterLab tab, through the
//! remote-kernel client; the agent's runs stream their outputs into the document, and its kernel
//! is chosen among the server's kernelspecs as JupyterLab's kernel menu does. The agent
//! shows in JupyterLab's collaborator list and as a cursor in the cell it works on.
//!
//! [`ydoc`] and [`protocol`] are pure (no sockets, no clocks, no tasks). This crate never
//! writes an open notebook's file, knows nothing about VS Code, holds no tool logic, and opens
//! no connection of its own: REST calls and WebSockets (`http://` or `https://`, `ws://` or
//! `wss://`) go through the kernels crate's transport for the [`ServerConnection`]'s profile,
//! so TLS trust, certificate errors and token renewal are the remote kernels' own.
#![warn(missing_docs)]

mod connection;
mod dispatch;
mod error;
mod host;
mod kernels;
mod presence;
pub mod protocol;
mod rest;
mod room;
mod rooms;
pub mod ydoc;

pub use connection::ServerConnection;
pub use dispatch::JupyterDispatch;
pub use error::JupyterError;
pub use host::{JupyterHost, JupyterHostConfig};
pub use kernels::JupyterKernels;
pub use presence::{DEFAULT_NAME, Presence};
