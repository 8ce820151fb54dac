//! The broker of jupyter-mcp: several hosts share one loopback URL.
//!
//! Layer 3 (adapter), beside `mcp-server`. Every host process (each `jupyter-mcp serve`, later
//! each VS Code window) runs a [`Coordinator`]. The first to bind the shared port is the broker:
//! it serves `/mcp` for everyone through a [`mcp_contract::ToolDispatch`] that sends each call to
//! the window owning its notebook. The others are peers: they listen on private loopback ports,
//! register with the broker and heartbeat every second; when the broker goes away, one of them
//! takes the port over and clients reconnect to the same URL. Every routing decision (who owns a
//! ref, how a batch splits, which peers are stale, the election) is a pure function in
//! [`routing`]. Peer registration and invocation are authenticated with a per-broker secret kept
//! in a file only the user can read ([`secret`]). This crate knows nothing about notebooks
//! beyond refs and URIs, nothing about files under a root, and nothing about kernels.

mod broker;
mod client;
mod coordinator;
mod error;
mod peer;
pub mod protocol;
pub mod routing;
pub mod secret;

#[cfg(test)]
mod tests;

pub use coordinator::{Coordinator, CoordinatorConfig, Joined, Timings};
pub use error::BrokerError;
pub use routing::Role;
