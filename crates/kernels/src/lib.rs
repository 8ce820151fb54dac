//! Jupyter kernels for the standalone host: discovery, launch, execution, monitoring, shutdown.
//!
//! This is a layer-3 adapter crate with two providers behind one seam. The local one (feature
//! `local`, the default) finds kernels the way Jupyter does (kernelspecs on the Jupyter path,
//! plus project virtual environments with ipykernel), starts them as local processes in their
//! own process group and talks to them over ZeroMQ with `jupyter-zmq-client` (pure Rust, no
//! Python bridge; Python runs only as the kernel itself). The remote one (feature `remote`)
//! uses a Jupyter Server, Kernel Gateway or a JupyterHub user's server, over HTTPS (rustls) or
//! plain HTTP on loopback, as a connection profile says: kernelspecs and lifecycle over its REST
//! API, execution over the kernel WebSocket (JSON or the `v1.kernel.websocket.jupyter.org`
//! binary subprotocol), reconnecting when the socket drops, renewing the credential when the
//! server refuses it, and starting the hub user's server when needed. Both report each execute request as the
//! same ordered stream of events. A [`KernelManager`] keeps one kernel per notebook, stops
//! idle ones and stops all of them on server exit. Callers see only the [`KernelProvider`] and
//! [`KernelHandle`] traits. Two small pieces serve others too: [`debug_fields!`], the `Debug`
//! that names only some fields (this crate's handles and the hosts above use it), and, with
//! `remote`, the pure v1 frame functions `encode_v1` and `split_v1` (the bench's raw WebSocket
//! floor lays out its frames with them).
//!
//! It knows nothing about MCP, notebooks as documents or the tool contract: it runs code and
//! reports what the kernel said. It never puts raw kernel, server or OS text into error
//! messages (the kernel's own output is kept apart for diagnostics), and never logs a token.
//!
//! Without features only the traits, the event types, discovery, the manager and
//! `debug_fields!` are built (no ZeroMQ, no HTTP): that is what `host-kernels` depends on.

#![deny(unsafe_code)]

mod debug;
mod discovery;
mod error;
mod execute;
#[cfg(feature = "local")]
mod local;
mod manager;
mod place;
mod progress;
mod provider;
#[cfg(feature = "remote")]
mod remote;
#[cfg(any(feature = "local", feature = "remote"))]
mod router;
mod spec;
mod status;
mod tasks;
#[cfg(any(feature = "local", feature = "remote"))]
mod wire;

pub use discovery::{
    DiscoveryConfig, Platform, PythonProbe, discover, discover_blocking, probe_python, runtime_dir,
    user_data_dir,
};
pub use error::{Error, Result};
pub use execute::{
    ErrorOutput, ExecuteEvent, ExecuteHandle, ExecuteOptions, ExecuteReply, ExecuteResultSummary,
    JsonObject, ReplyStatus, StreamName,
};
/// The HTTP method and status of a [`ServerClient`] request and answer.
#[cfg(feature = "remote")]
pub use http::{Method, StatusCode};
#[cfg(feature = "local")]
pub use local::{LaunchConfig, LocalKernel, LocalProvider};
pub use manager::{KernelManager, ManagerConfig};
pub use place::KernelPlace;
pub use progress::{ProgressReporter, StartProgress, with_start_progress};
pub use provider::{KernelHandle, KernelProvider};
#[cfg(feature = "remote")]
pub use remote::{
    AnswerKernelRequest, ByteStream, CertificateProblem, ConnectionProfile, Contents,
    CredentialPlacement, CredentialSource, DEFAULT_MAX_MESSAGE_BYTES, HttpAnswer, HttpClient,
    HttpFailure, HttpRequest, JupyterHubConfig, KernelRequestAnswer, QuickAckStream,
    REMOTE_SPEC_PREFIX, RefreshCredential, RemoteConfig, RemoteKernel, RemoteProvider,
    ServerAnswer, ServerClient, ServerToken, ServerUrl, ServerWebSocket, TlsTrust, encode_path,
    encode_segment, encode_v1, split_v1,
};
pub use spec::{Discovery, InterruptMode, KernelSpecInfo, SpecPreference, SpecSource};
pub use status::{KernelInfo, KernelStatus, ProcessExit};
