//! Kernels that run as local processes and talk ZeroMQ.

mod launch;
mod process;
mod pump;
mod wire;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use jupyter_protocol::{ExecuteRequest, InterruptRequest, JupyterMessage};
use tokio::sync::{OnceCell, mpsc, oneshot};

use self::launch::{Generation, LaunchRequest, launch};
use self::process::BoundedLog;
use self::pump::{PumpCommand, StopReason};
use crate::discovery::{DiscoveryConfig, PythonProbe, discover, probe_python, runtime_dir};
use crate::error::{Error, Result};
use crate::execute::{ExecuteHandle, ExecuteOptions};
use crate::provider::{KernelBody, KernelHandle, KernelParts, KernelProvider, started};
use crate::spec::{Discovery, InterruptMode, KernelSpecInfo};
use crate::status::{KernelInfo, KernelStatus, StatusHub};

/// Timeouts and limits of local kernels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Spawn to `kernel_info_reply`. Default 60 s.
    pub startup_timeout: Duration,
    /// How long a kernel may take to exit after `shutdown_request` before its process group
    /// is killed. Default 5 s.
    pub shutdown_timeout: Duration,
    /// The bound of a liveness probe. Default 2 s.
    pub probe_timeout: Duration,
    /// How long an `interrupt_request` (message mode) may take to be answered. Default 5 s.
    pub interrupt_timeout: Duration,
    /// How long a reply waits for its `idle` once IOPub goes quiet. Default 5 s.
    pub reply_grace: Duration,
    /// Where connection files are written. Default: Jupyter's runtime directory.
    pub runtime_dir: PathBuf,
    /// Bytes of kernel stdout/stderr kept for diagnostics. Default 64 KiB.
    pub log_capacity: usize,
    /// Extra attempts when the kernel reports a port collision. Default 3.
    pub port_retries: u32,
}

impl Default for LaunchConfig {
    fn default() -> Self {
        LaunchConfig {
            startup_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(5),
            probe_timeout: Duration::from_secs(2),
            interrupt_timeout: Duration::from_secs(5),
            reply_grace: Duration::from_secs(5),
            runtime_dir: runtime_dir(),
            log_capacity: 64 * 1024,
            port_retries: 3,
        }
    }
}

/// Starts kernels as local processes; discovers kernelspecs and virtual environments.
#[derive(Debug)]
pub struct LocalProvider {
    discovery: DiscoveryConfig,
    launch: LaunchConfig,
    /// Shared by every kernel this provider starts, so epochs never repeat across kernels.
    epochs: Arc<AtomicU64>,
    python: OnceCell<Option<PythonProbe>>,
}

impl LocalProvider {
    pub fn new(discovery: DiscoveryConfig, launch: LaunchConfig) -> Self {
        LocalProvider {
            discovery,
            launch,
            epochs: Arc::new(AtomicU64::new(0)),
            python: OnceCell::new(),
        }
    }

    pub fn discovery_config(&self) -> &DiscoveryConfig {
        &self.discovery
    }

    pub fn launch_config(&self) -> &LaunchConfig {
        &self.launch
    }

    /// What the configured Python said about itself; asked once, then remembered. The
    /// environment's own Python wins when it has ipykernel.
    pub async fn python(&self) -> Option<&PythonProbe> {
        self.python
            .get_or_init(|| async {
                let timeout = self.discovery.python_probe_timeout;
                if let Some(python) = &self.discovery.env_python
                    && let Some(probe) = probe_python(python.as_os_str(), timeout).await
                    && probe.has_ipykernel
                {
                    return Some(probe);
                }
                match &self.discovery.python {
                    Some(python) => probe_python(python, timeout).await,
                    None => None,
                }
            })
            .await
            .as_ref()
    }

    /// Finds every kernel choice for a notebook in `notebook_dir`.
    pub async fn discover_specs(&self, notebook_dir: Option<&Path>) -> Result<Discovery> {
        let python = self.python().await;
        discover(&self.discovery, python, notebook_dir).await
    }

    /// Starts `spec` in `cwd` and waits until it answered `kernel_info_request`.
    pub async fn start_local(&self, spec: &KernelSpecInfo, cwd: &Path) -> Result<LocalKernel> {
        LocalKernel::start(
            spec.clone(),
            cwd.to_path_buf(),
            self.launch.clone(),
            Arc::clone(&self.epochs),
        )
        .await
    }
}

impl KernelProvider for LocalProvider {
    fn discover<'a>(&'a self, notebook_dir: Option<&'a Path>) -> BoxFuture<'a, Result<Discovery>> {
        Box::pin(self.discover_specs(notebook_dir))
    }

    fn start<'a>(
        &'a self,
        spec: &'a KernelSpecInfo,
        cwd: &'a Path,
    ) -> BoxFuture<'a, Result<Arc<dyn KernelHandle>>> {
        started(self.start_local(spec, cwd))
    }

    fn server_root(&self) -> Option<&Path> {
        self.discovery.server_root.as_deref()
    }
}

/// A local kernel. Cheap to clone; when the last clone is dropped, the kernel's process group
/// is killed.
#[derive(Debug, Clone)]
pub struct LocalKernel {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    spec: KernelSpecInfo,
    cwd: PathBuf,
    config: LaunchConfig,
    epochs: Arc<AtomicU64>,
    hub: Arc<StatusHub>,
    /// Held across a restart or shutdown, so that requests wait for the new generation.
    lifecycle: tokio::sync::Mutex<Option<Generation>>,
    info: Mutex<KernelInfo>,
    log: Mutex<Arc<BoundedLog>>,
    pid: AtomicU32,
}

crate::debug_fields!(Generation { epoch, pid });

impl LocalKernel {
    async fn start(
        spec: KernelSpecInfo,
        cwd: PathBuf,
        config: LaunchConfig,
        epochs: Arc<AtomicU64>,
    ) -> Result<LocalKernel> {
        let shared = Arc::new(Shared {
            spec,
            cwd,
            config,
            epochs,
            hub: Arc::new(StatusHub::new(KernelStatus::Starting)),
            lifecycle: tokio::sync::Mutex::new(None),
            info: Mutex::new(KernelInfo::default()),
            log: Mutex::new(Arc::new(BoundedLog::new(0))),
            pid: AtomicU32::new(0),
        });
        let generation = shared.launch_generation().await?;
        *shared.lifecycle.lock().await = Some(generation);
        Ok(LocalKernel { shared })
    }

    /// The kernel's process id (0 when it is not running).
    pub fn pid(&self) -> u32 {
        self.shared.pid.load(Ordering::SeqCst)
    }
}

impl Shared {
    /// How to interrupt before stopping: only when IOPub last said the kernel is busy.
    fn interrupt_if_busy(&self) -> Option<InterruptMode> {
        (self.hub.last_activity() == KernelStatus::Busy).then_some(self.spec.interrupt_mode)
    }

    /// Starts a new process with a new epoch. On failure the status becomes `Dead`.
    async fn launch_generation(&self) -> Result<Generation> {
        let epoch = self.epochs.fetch_add(1, Ordering::SeqCst) + 1;
        self.hub.set_epoch(epoch);
        self.hub.set(KernelStatus::Starting);
        let result = launch(&LaunchRequest {
            spec: &self.spec,
            cwd: &self.cwd,
            config: &self.config,
            hub: &self.hub,
            epoch,
        })
        .await;
        match result {
            Ok(generation) => {
                *self.info.lock().unwrap_or_else(PoisonError::into_inner) = generation.info.clone();
                *self.log.lock().unwrap_or_else(PoisonError::into_inner) =
                    Arc::clone(&generation.log);
                self.pid.store(generation.pid, Ordering::SeqCst);
                self.hub.set(KernelStatus::Idle);
                tracing::info!(
                    spec = %self.spec.id,
                    epoch,
                    pid = generation.pid,
                    "kernel started"
                );
                Ok(generation)
            }
            Err(error) => {
                if let Some(diagnostics) = error.diagnostics() {
                    let log = BoundedLog::new(self.config.log_capacity);
                    log.push(diagnostics.as_bytes());
                    *self.log.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(log);
                }
                let exit = match &error {
                    Error::StartFailed { exit, .. } => Some(*exit),
                    _ => None,
                };
                self.hub.set(KernelStatus::Dead {
                    exit,
                    requested: false,
                });
                Err(error)
            }
        }
    }
}

/// The error for a generation whose pump is gone.
fn gone(generation: &Generation) -> Error {
    match generation.exited() {
        Some(exit) => Error::KernelDied { exit },
        None => Error::ConnectionLost,
    }
}

impl KernelBody for LocalKernel {
    fn parts(&self) -> KernelParts<'_> {
        let shared = &self.shared;
        KernelParts::new(&shared.spec, &shared.cwd, &shared.info, &shared.hub)
    }

    fn process_id(&self) -> Option<u32> {
        Some(self.pid()).filter(|pid| *pid != 0)
    }

    fn diagnostics(&self) -> String {
        self.shared
            .log
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot()
    }

    async fn execute_inner(&self, code: &str, options: ExecuteOptions) -> Result<ExecuteHandle> {
        let lifecycle = self.shared.lifecycle.lock().await;
        let generation = lifecycle.as_ref().ok_or(Error::NotRunning)?;
        if let Some(exit) = generation.exited() {
            return Err(Error::KernelDied { exit });
        }
        let request = ExecuteRequest {
            code: code.to_owned(),
            silent: options.silent,
            store_history: options.store_history,
            user_expressions: (!options.user_expressions.is_empty()).then(|| {
                options
                    .user_expressions
                    .into_iter()
                    .collect::<HashMap<_, _>>()
            }),
            allow_stdin: false,
            stop_on_error: options.stop_on_error,
        };
        let message = JupyterMessage::from(request).with_buffers(
            options
                .buffers
                .into_iter()
                .map(bytes::Bytes::from)
                .collect(),
        );
        let msg_id = message.header.msg_id.clone();
        let (sink, events) = mpsc::unbounded_channel();
        let backlog = crate::execute::StreamBacklog::default();
        generation
            .commands
            .send(PumpCommand::Execute {
                request: message,
                sink,
                backlog: backlog.clone(),
            })
            .map_err(|_| gone(generation))?;
        Ok(ExecuteHandle::new(msg_id, generation.epoch, events).with_backlog(backlog))
    }

    async fn interrupt_inner(&self) -> Result<()> {
        let lifecycle = self.shared.lifecycle.lock().await;
        let generation = lifecycle.as_ref().ok_or(Error::NotRunning)?;
        if let Some(exit) = generation.exited() {
            return Err(Error::KernelDied { exit });
        }
        match self.shared.spec.interrupt_mode {
            InterruptMode::Signal => generation
                .group
                .signal(process::GroupSignal::Interrupt)
                .map_err(|source| Error::Signal { source }),
            InterruptMode::Message => {
                let (reply, answer) = oneshot::channel();
                generation
                    .commands
                    .send(PumpCommand::Control {
                        request: InterruptRequest {}.into(),
                        reply,
                    })
                    .map_err(|_| gone(generation))?;
                let exit = generation.exit.clone();
                drop(lifecycle);
                let timeout = self.shared.config.interrupt_timeout;
                match tokio::time::timeout(timeout, answer).await {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(_)) => Err(match *exit.borrow() {
                        Some(exit) => Error::KernelDied { exit },
                        None => Error::ConnectionLost,
                    }),
                    Err(_) => Err(Error::Timeout {
                        operation: "interrupting the kernel",
                        after: timeout,
                    }),
                }
            }
        }
    }

    async fn restart_inner(&self) -> Result<()> {
        let shared = &self.shared;
        let mut lifecycle = shared.lifecycle.lock().await;
        shared.hub.set(KernelStatus::Restarting);
        if let Some(old) = lifecycle.take() {
            old.stop(
                StopReason::Restart,
                shared.interrupt_if_busy(),
                &shared.config,
            )
            .await;
        }
        shared.pid.store(0, Ordering::SeqCst);
        *lifecycle = Some(shared.launch_generation().await?);
        Ok(())
    }

    async fn shutdown_inner(&self) -> Result<()> {
        let shared = &self.shared;
        let mut lifecycle = shared.lifecycle.lock().await;
        let Some(old) = lifecycle.take() else {
            return Ok(());
        };
        let died_before = old.exited().is_some();
        let exit = old
            .stop(
                StopReason::Shutdown,
                shared.interrupt_if_busy(),
                &shared.config,
            )
            .await;
        shared.pid.store(0, Ordering::SeqCst);
        if !died_before {
            shared.hub.set(KernelStatus::Dead {
                exit,
                requested: true,
            });
        }
        Ok(())
    }

    async fn probe_inner(&self) -> Result<KernelStatus> {
        let shared = &self.shared;
        // A restart or shutdown in progress owns the status.
        let Ok(lifecycle) = shared.lifecycle.try_lock() else {
            return Ok(shared.hub.get());
        };
        let Some(generation) = lifecycle.as_ref() else {
            return Ok(shared.hub.get());
        };
        if let Some(exit) = generation.exited() {
            return Ok(KernelStatus::Dead {
                exit: Some(exit),
                requested: false,
            });
        }
        let connection = generation.connection.clone();
        let epoch = generation.epoch;
        drop(lifecycle);
        let timeout = shared.config.probe_timeout;
        let heartbeat = tokio::time::timeout(timeout, async {
            let mut heartbeat =
                jupyter_zmq_client::create_client_heartbeat_connection(&connection).await?;
            heartbeat.single_heartbeat().await
        })
        .await;
        let hub = &shared.hub;
        if hub.epoch() == epoch {
            match (heartbeat, hub.get()) {
                (Ok(Ok(())), KernelStatus::Unreachable) => hub.set(hub.last_activity()),
                (Ok(Ok(())), _) => {}
                (_, KernelStatus::Idle | KernelStatus::Busy | KernelStatus::Unreachable) => {
                    hub.set(KernelStatus::Unreachable);
                }
                (_, _) => {}
            }
        }
        Ok(hub.get())
    }
}
