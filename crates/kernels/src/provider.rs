//! The seam between callers and where kernels run.
//!
//! Both traits are object-safe (methods return boxed futures), so the host holds an
//! `Arc<dyn KernelProvider>` and `Arc<dyn KernelHandle>` and a remote provider (Jupyter Server,
//! Kernel Gateway) can be added beside [`crate::LocalProvider`] without touching callers or
//! growing an enum here. The cost is one allocation per call, which is nothing next to a
//! kernel round trip.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::error::Result;
use crate::execute::{ExecuteHandle, ExecuteOptions, ExecuteResultSummary};
use crate::place::KernelPlace;
use crate::spec::{Discovery, KernelSpecInfo};
use crate::status::{KernelInfo, KernelStatus, StatusHub};

/// Lists kernel choices and starts kernels.
pub trait KernelProvider: Send + Sync {
    /// Every choice for a notebook in `notebook_dir` (or for the server root without one).
    fn discover<'a>(&'a self, notebook_dir: Option<&'a Path>) -> BoxFuture<'a, Result<Discovery>>;

    /// Starts `spec` with `cwd` as its working directory and waits until it is ready.
    fn start<'a>(
        &'a self,
        spec: &'a KernelSpecInfo,
        cwd: &'a Path,
    ) -> BoxFuture<'a, Result<Arc<dyn KernelHandle>>>;

    /// The folder the server serves, used to choose between virtual environments.
    fn server_root(&self) -> Option<&Path>;

    /// Where the kernels it starts run.
    fn place(&self) -> KernelPlace {
        KernelPlace::Local
    }
}

/// A provider's [`KernelProvider::start`]: the kernel `starting` yields, as a shared handle.
#[cfg(any(feature = "local", feature = "remote"))]
pub(crate) fn started<'a, K: KernelHandle + 'static>(
    starting: impl Future<Output = Result<K>> + Send + 'a,
) -> BoxFuture<'a, Result<Arc<dyn KernelHandle>>> {
    Box::pin(async move { Ok(Arc::new(starting.await?) as Arc<dyn KernelHandle>) })
}

/// One running (or dead, or restartable) kernel.
pub trait KernelHandle: Send + Sync {
    /// The choice it was started from.
    fn spec(&self) -> &KernelSpecInfo;

    /// Its working directory.
    fn cwd(&self) -> &Path;

    /// What the kernel reported when it last started.
    fn info(&self) -> KernelInfo;

    /// Bumped on every start and restart, unique per provider: a request or observation
    /// tagged with an older epoch is stale.
    fn epoch(&self) -> u64;

    /// A watch of the status. Survives restarts.
    fn status(&self) -> watch::Receiver<KernelStatus>;

    /// The kernel's process id, for local kernels.
    fn process_id(&self) -> Option<u32>;

    /// Where it runs.
    fn place(&self) -> KernelPlace {
        KernelPlace::Local
    }

    /// The tail of the kernel's own stdout and stderr, for diagnostics only.
    fn diagnostics(&self) -> String;

    /// Queues `code` for execution. Events arrive on the returned handle.
    fn execute<'a>(
        &'a self,
        code: &'a str,
        options: ExecuteOptions,
    ) -> BoxFuture<'a, Result<ExecuteHandle>>;

    /// Runs helper code quietly ([`ExecuteOptions::quiet`]) and gathers its text, results and
    /// error.
    fn execute_collect<'a>(&'a self, code: &'a str) -> BoxFuture<'a, Result<ExecuteResultSummary>> {
        self.execute_collect_with(code, ExecuteOptions::quiet())
    }

    /// Like [`KernelHandle::execute_collect`] with explicit options (e.g. user expressions).
    fn execute_collect_with<'a>(
        &'a self,
        code: &'a str,
        options: ExecuteOptions,
    ) -> BoxFuture<'a, Result<ExecuteResultSummary>> {
        Box::pin(async move { self.execute(code, options).await?.summarize().await })
    }

    /// Interrupts the running request, honouring the kernelspec's interrupt mode.
    fn interrupt(&self) -> BoxFuture<'_, Result<()>>;

    /// Stops the kernel and starts it again with the same choice and working directory.
    /// Requests in flight end with `KernelRestarted`.
    fn restart(&self) -> BoxFuture<'_, Result<()>>;

    /// Stops the kernel. Requests in flight end with `KernelShutdown`. Idempotent.
    fn shutdown(&self) -> BoxFuture<'_, Result<()>>;

    /// Checks liveness within a bounded time and returns the resulting status (which the
    /// status watch also reflects).
    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus>>;
}

/// What every kind of kernel keeps alike, lent for one call: the choice it was started from,
/// its folder, what it last reported, its status.
pub(crate) struct KernelParts<'a> {
    pub spec: &'a KernelSpecInfo,
    pub cwd: &'a Path,
    pub info: &'a Mutex<KernelInfo>,
    pub status: &'a StatusHub,
}

#[cfg(any(feature = "local", feature = "remote"))]
impl<'a> KernelParts<'a> {
    pub fn new(
        spec: &'a KernelSpecInfo,
        cwd: &'a Path,
        info: &'a Mutex<KernelInfo>,
        status: &'a StatusHub,
    ) -> KernelParts<'a> {
        KernelParts {
            spec,
            cwd,
            info,
            status,
        }
    }
}

/// One kind of kernel (local over ZeroMQ, remote on a server): its parts and its own
/// operations. [`KernelHandle`] comes with it, written once here.
pub(crate) trait KernelBody: Send + Sync {
    fn parts(&self) -> KernelParts<'_>;

    fn process_id(&self) -> Option<u32>;

    fn place(&self) -> KernelPlace {
        KernelPlace::Local
    }

    fn diagnostics(&self) -> String;

    fn execute_inner(
        &self,
        code: &str,
        options: ExecuteOptions,
    ) -> impl Future<Output = Result<ExecuteHandle>> + Send;

    fn interrupt_inner(&self) -> impl Future<Output = Result<()>> + Send;

    fn restart_inner(&self) -> impl Future<Output = Result<()>> + Send;

    fn shutdown_inner(&self) -> impl Future<Output = Result<()>> + Send;

    fn probe_inner(&self) -> impl Future<Output = Result<KernelStatus>> + Send;
}

impl<K: KernelBody> KernelHandle for K {
    fn spec(&self) -> &KernelSpecInfo {
        self.parts().spec
    }

    fn cwd(&self) -> &Path {
        self.parts().cwd
    }

    fn info(&self) -> KernelInfo {
        self.parts()
            .info
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn epoch(&self) -> u64 {
        self.parts().status.epoch()
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        self.parts().status.subscribe()
    }

    fn process_id(&self) -> Option<u32> {
        KernelBody::process_id(self)
    }

    fn place(&self) -> KernelPlace {
        KernelBody::place(self)
    }

    fn diagnostics(&self) -> String {
        KernelBody::diagnostics(self)
    }

    fn execute<'a>(
        &'a self,
        code: &'a str,
        options: ExecuteOptions,
    ) -> BoxFuture<'a, Result<ExecuteHandle>> {
        Box::pin(self.execute_inner(code, options))
    }

    fn interrupt(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.interrupt_inner())
    }

    fn restart(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.restart_inner())
    }

    fn shutdown(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.shutdown_inner())
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus>> {
        Box::pin(self.probe_inner())
    }
}
