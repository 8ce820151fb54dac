//! Jupyter kernels for the standalone host: discovery, launch, execution, monitoring, shutdown.
//!
//! This is a layer-3 adapter crate. It finds kernels the way Jupyter does (kernelspecs on the
//! Jupyter path, plus project virtual environments with ipykernel), starts them as local
//! processes in their own process group, talks to them over ZeroMQ with `jupyter-zmq-client`
//! (pure Rust, no Python bridge; Python runs only as the kernel itself) and reports each
//! execute request as an ordered stream of events. A [`KernelManager`] keeps one kernel per
//! notebook, stops idle ones and stops all of them on server exit. Callers see the
//! [`KernelProvider`] and [`KernelHandle`] traits, so a remote provider can be added later.
//!
//! It knows nothing about MCP, notebooks as documents or the tool contract: it runs code and
//! reports what the kernel said. It never puts raw kernel or OS text into error messages; the
//! kernel's own output is kept apart for diagnostics.

//!
//! Without the default `local` feature only the traits, the event types, discovery and the
//! manager are built (no ZeroMQ): that is what the tool layer depends on.

#![deny(unsafe_code)]

mod discovery;
mod error;
mod execute;
#[cfg(feature = "local")]
mod local;
mod manager;
mod provider;
mod spec;
mod status;
mod tasks;

pub use discovery::{
    DiscoveryConfig, PythonProbe, discover, discover_blocking, probe_python, runtime_dir,
    user_data_dir,
};
pub use error::{Error, Result};
pub use execute::{
    ErrorOutput, ExecuteEvent, ExecuteHandle, ExecuteOptions, ExecuteReply, ExecuteResultSummary,
    JsonObject, ReplyStatus, StreamName,
};
#[cfg(feature = "local")]
pub use local::{LaunchConfig, LocalKernel, LocalProvider};
pub use manager::{KernelManager, ManagerConfig};
pub use provider::{KernelHandle, KernelProvider};
pub use spec::{Discovery, InterruptMode, KernelSpecInfo, SpecPreference, SpecSource};
pub use status::{KernelInfo, KernelStatus, ProcessExit};
