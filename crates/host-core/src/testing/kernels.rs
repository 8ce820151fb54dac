//! [`ScriptedKernels`]: kernels that follow `#>` directives (see the module docs of
//! [`crate::testing`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use execution_tracker::{IopubEvent, KernelLifecycle, ReplyStatus};
use futures::StreamExt;
use mcp_contract::results::KernelChoice;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use crate::host::NotebookLocation;
use crate::kernel::{
    CellToRun, Configured, ExecuteOptions, KernelCapabilities, KernelError, KernelEvent,
    KernelEvents, KernelListing, KernelLookup, KernelOption, KernelPreference, KernelRecord,
    KernelReply, KernelSelection, KernelSession, KernelStatus, NotebookKernels, ObservedRun,
    RequestOutcome, SessionFeatures, SessionInfo, SharedSession,
};
use mcp_contract::BoxFuture;

/// Epochs of scripted kernels: shared by every instance in the process, so they never repeat.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// What [`ScriptedKernels::on_execute`] makes of helper code: directives to follow instead of
/// the code's own, or `None` to follow the code's.
pub type ExecuteHook = dyn Fn(&str, &ExecuteOptions) -> Option<String> + Send + Sync;

/// Kernels that follow `#>` directives in the code they are given (see the module docs). One
/// kernel per notebook, started on first use, with every capability and a [`SessionFeatures`]
/// of choice. Clones share everything, so a test keeps one to script and inspect the kernels.
#[derive(Clone)]
pub struct ScriptedKernels {
    inner: Arc<ScriptedInner>,
}

struct ScriptedInner {
    capabilities: KernelCapabilities,
    features: SessionFeatures,
    /// Sessions report epochs of their own (else the tools derive them from stamps).
    own_epochs: bool,
    sessions: Mutex<HashMap<String, Arc<ScriptedSession>>>,
    hook: Mutex<Option<Arc<ExecuteHook>>>,
    /// Every piece of code a kernel was given, in order (cells and helper code).
    log: Mutex<Vec<String>>,
    starts: AtomicU64,
    /// Runs others made, by notebook URI, until the tools take them.
    observed: Mutex<HashMap<String, Vec<ObservedRun>>>,
}

impl Default for ScriptedKernels {
    fn default() -> Self {
        ScriptedKernels::new()
    }
}

impl ScriptedKernels {
    /// Kernels with every capability, spoken to as Jupyter kernels.
    pub fn new() -> ScriptedKernels {
        ScriptedKernels::with(KernelCapabilities::ALL, SessionFeatures::JUPYTER)
    }

    /// Kernels with these capabilities and features.
    pub fn with(capabilities: KernelCapabilities, features: SessionFeatures) -> ScriptedKernels {
        ScriptedKernels {
            inner: Arc::new(ScriptedInner {
                capabilities,
                features,
                own_epochs: true,
                sessions: Mutex::new(HashMap::new()),
                hook: Mutex::new(None),
                log: Mutex::new(Vec::new()),
                starts: AtomicU64::new(0),
                observed: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Kernels that report no epoch of their own, as an editor's kernel API: the tools derive
    /// one from the stamp they leave in the kernel, which a restart or death wipes. Call before
    /// the first kernel starts.
    pub fn without_epochs(self) -> ScriptedKernels {
        let inner = Arc::try_unwrap(self.inner)
            .ok()
            .expect("without_epochs before the kernels are shared");
        ScriptedKernels {
            inner: Arc::new(ScriptedInner {
                own_epochs: false,
                ..inner
            }),
        }
    }

    /// Makes helper code follow the directives `hook` returns for it (`None`: its own).
    pub fn on_execute(
        &self,
        hook: impl Fn(&str, &ExecuteOptions) -> Option<String> + Send + Sync + 'static,
    ) {
        *self.inner.hook.lock().expect("hook lock") = Some(Arc::new(hook));
    }

    /// Removes the hook: helper code follows its own directives again.
    pub fn clear_hook(&self) {
        *self.inner.hook.lock().expect("hook lock") = None;
    }

    /// Every piece of code the kernels were given, in order.
    pub fn log(&self) -> Vec<String> {
        self.inner.log.lock().expect("log lock").clone()
    }

    /// The code sent since the log held `start` entries (a length of [`ScriptedKernels::log`]
    /// taken before).
    pub fn log_since(&self, start: usize) -> Vec<String> {
        self.inner.log.lock().expect("log lock")[start..].to_vec()
    }

    /// How many kernels were started.
    pub fn starts(&self) -> u64 {
        self.inner.starts.load(Ordering::Relaxed)
    }

    /// The running kernel of the notebook at `uri`.
    pub fn session(&self, uri: &str) -> Option<Arc<ScriptedSession>> {
        self.lock().get(uri).cloned()
    }

    /// Reports that someone else ran `source` as cell `cell_id` on the notebook's live kernel
    /// (as a person in a shared editor would); nothing happens without a live kernel.
    pub fn observe_run(&self, uri: &str, cell_id: &str, source: &str, ok: bool) {
        let Some(epoch) = self.session(uri).and_then(|session| session.epoch()) else {
            return;
        };
        self.inner
            .observed
            .lock()
            .expect("observed lock")
            .entry(uri.to_owned())
            .or_default()
            .push(ObservedRun {
                cell_id: cell_id.to_owned(),
                source: source.to_owned(),
                epoch,
                ok,
            });
    }

    /// Kills the notebook's kernel as a crash would: what runs on it ends `Died`.
    pub fn crash(&self, uri: &str) {
        if let Some(session) = self.session(uri) {
            session.die();
        }
    }

    /// Applies a restart or interrupt to the notebook's kernel, if one runs.
    fn request(
        &self,
        location: &NotebookLocation,
        apply: impl FnOnce(&ScriptedSession),
    ) -> Result<RequestOutcome, KernelError> {
        let Some(session) = self.session(&location.uri) else {
            return Ok(RequestOutcome::NotRunning);
        };
        apply(&session);
        Ok(RequestOutcome::Done {
            epoch: session.epoch(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ScriptedSession>>> {
        self.inner.sessions.lock().expect("sessions lock")
    }

    fn choice(id: &str) -> KernelChoice {
        KernelChoice {
            id: id.to_owned(),
            label: format!("Scripted ({id})"),
            language: "python".to_owned(),
            source: "scripted".to_owned(),
            detail: None,
            runs_on: None,
        }
    }

    /// The record a notebook keeps of the scripted kernel `id`.
    fn record(id: &str) -> KernelRecord {
        KernelRecord {
            kernel_id: id.to_owned(),
            kernelspec_name: id.to_owned(),
            display_name: format!("Scripted ({id})"),
            language: "python".to_owned(),
        }
    }
}

impl NotebookKernels for ScriptedKernels {
    fn capabilities(&self) -> KernelCapabilities {
        self.inner.capabilities
    }

    fn live_epoch(&self, location: &NotebookLocation) -> Option<u64> {
        let session = self.session(&location.uri)?;
        let alive = !session.status().borrow().is_dead();
        alive.then(|| session.epoch()).flatten()
    }

    fn lookup<'a>(&'a self, location: &'a NotebookLocation) -> BoxFuture<'a, KernelLookup> {
        Box::pin(async move {
            match self.session(&location.uri) {
                Some(session) => KernelLookup::Running(session),
                None => KernelLookup::Absent {
                    reason: "no kernel is running for this notebook; run_cells or \
                             configure_kernel starts one"
                        .to_owned(),
                },
            }
        })
    }

    fn start<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<SharedSession, KernelError>> {
        Box::pin(async move {
            let id = preference.kernel_id.unwrap_or_else(|| "python3".to_owned());
            let mut sessions = self.lock();
            if let Some(session) = sessions.get(&location.uri)
                && session.info.id == id
            {
                if session.status().borrow().is_dead() {
                    session.restart_now();
                }
                return Ok(session.clone() as SharedSession);
            }
            self.inner.starts.fetch_add(1, Ordering::Relaxed);
            let session = ScriptedSession::new(id, self.clone());
            sessions.insert(location.uri.clone(), session.clone());
            Ok(session as SharedSession)
        })
    }

    fn list<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<KernelListing, KernelError>> {
        let _ = location;
        Box::pin(async move {
            let kernels = ["python3", "other"]
                .into_iter()
                .map(|id| KernelOption {
                    choice: Self::choice(id),
                    record: Some(Self::record(id)),
                })
                .collect();
            Ok(KernelListing {
                kernels,
                selected: Some(preference.kernel_id.unwrap_or_else(|| "python3".to_owned())),
                hint: None,
            })
        })
    }

    fn select<'a>(
        &'a self,
        location: &'a NotebookLocation,
        kernel_id: String,
    ) -> BoxFuture<'a, Result<KernelSelection, KernelError>> {
        Box::pin(async move {
            const IDS: [&str; 2] = ["python3", "other"];
            if !IDS.contains(&kernel_id.as_str()) {
                return Err(KernelError::unknown_kernel(&kernel_id, IDS));
            }
            let replaces_running = self
                .session(&location.uri)
                .is_some_and(|session| session.info.id != kernel_id);
            Ok(KernelSelection {
                kernel: Self::choice(&kernel_id),
                record: Some(Self::record(&kernel_id)),
                replaces_running,
            })
        })
    }

    fn configure<'a>(
        &'a self,
        location: &'a NotebookLocation,
        preference: KernelPreference,
    ) -> BoxFuture<'a, Result<Configured, KernelError>> {
        Box::pin(async move {
            let session = self.start(location, preference).await?;
            Ok(Configured {
                kernel: Self::choice(&session.info().id),
            })
        })
    }

    fn restart<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(std::future::ready(
            self.request(location, ScriptedSession::restart_now),
        ))
    }

    fn interrupt<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<RequestOutcome, KernelError>> {
        Box::pin(std::future::ready(self.request(location, |session| {
            session.control(Control::Interrupt)
        })))
    }

    fn shutdown<'a>(
        &'a self,
        location: &'a NotebookLocation,
    ) -> BoxFuture<'a, Result<bool, KernelError>> {
        Box::pin(async move {
            let session = self.lock().remove(&location.uri);
            if let Some(session) = &session {
                session.control(Control::Shutdown);
            }
            Ok(session.is_some())
        })
    }

    fn shutdown_all(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let sessions: Vec<_> = self.lock().drain().collect();
            for (_, session) in sessions {
                session.control(Control::Shutdown);
            }
        })
    }

    fn observed_runs(&self, location: &NotebookLocation) -> Vec<ObservedRun> {
        self.inner
            .observed
            .lock()
            .expect("observed lock")
            .remove(&location.uri)
            .unwrap_or_default()
    }
}

/// What happens to a kernel's running executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Control {
    Interrupt,
    Restart,
    Die,
    Shutdown,
}

/// One scripted kernel.
pub struct ScriptedSession {
    info: SessionInfo,
    kernels: ScriptedKernels,
    epoch: AtomicU64,
    status: watch::Sender<KernelStatus>,
    /// Running executions hear restarts, interrupts and deaths here.
    control: tokio::sync::broadcast::Sender<Control>,
    /// The stamp the tools left in this kernel process ([`crate::epoch`]).
    stamp: Arc<Mutex<Option<String>>>,
    /// Restarts and deaths so far.
    lifecycle: Arc<AtomicU64>,
    execution_count: AtomicU64,
    /// Executions queue on this lock, as they do in a kernel.
    queue: Arc<tokio::sync::Mutex<()>>,
}

impl ScriptedSession {
    fn new(id: String, kernels: ScriptedKernels) -> Arc<ScriptedSession> {
        Arc::new(ScriptedSession {
            info: SessionInfo {
                label: format!("Scripted ({id})"),
                id,
                language: "python".to_owned(),
                implementation: Some("scripted".to_owned()),
                language_version: Some("3".to_owned()),
                pid: None,
                runs_on: None,
            },
            kernels,
            epoch: AtomicU64::new(EPOCHS.fetch_add(1, Ordering::Relaxed)),
            status: watch::Sender::new(KernelStatus::Idle),
            control: tokio::sync::broadcast::channel(16).0,
            stamp: Arc::default(),
            lifecycle: Arc::default(),
            execution_count: AtomicU64::new(0),
            queue: Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    fn control(&self, control: Control) {
        let _ = self.control.send(control);
        if control != Control::Interrupt {
            self.lifecycle.fetch_add(1, Ordering::Relaxed);
            self.forget_stamp();
        }
        match control {
            Control::Die | Control::Shutdown => {
                self.status.send_replace(KernelStatus::Dead);
            }
            Control::Restart => {
                self.epoch
                    .store(EPOCHS.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
                self.execution_count.store(0, Ordering::Relaxed);
                self.status.send_replace(KernelStatus::Idle);
            }
            Control::Interrupt => {}
        }
    }

    /// Sets the kernel's status as a run from elsewhere (a person's editor) would.
    pub fn set_status(&self, status: KernelStatus) {
        self.status.send_replace(status);
    }

    /// Restarts the kernel now (a new epoch; running executions end `Restarted`).
    pub fn restart_now(&self) {
        self.control(Control::Restart);
    }

    /// Kills the kernel (running executions end `Died`).
    pub fn die(&self) {
        self.control(Control::Die);
    }

    /// Wipes the stamp the tools left in the kernel, as a restart the host never reported would
    /// (a new process behind the same session).
    pub fn forget_stamp(&self) {
        *self.stamp.lock().expect("stamp lock") = None;
    }

    /// A restart the host reports ([`KernelSession::lifecycle_changes`]) while the executions
    /// under way never hear of it (an editor that restarts a crashed kernel by itself and never
    /// completes the running cell).
    pub fn restart_silently(&self) {
        self.lifecycle.fetch_add(1, Ordering::Relaxed);
        self.forget_stamp();
    }

    fn events(&self, code: String, script: String, cell: bool) -> KernelEvents {
        self.kernels.inner.log.lock().expect("log lock").push(code);
        // `#> late TEXT`: printed just before the reply but arriving after it.
        let late: Vec<String> = script
            .lines()
            .filter_map(|line| line.trim().strip_prefix("#> late "))
            .map(|text| format!("{text}\n"))
            .collect();
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut control = self.control.subscribe();
        let queue = self.queue.clone();
        let status = self.status.clone();
        let count = if cell {
            Some(self.execution_count.fetch_add(1, Ordering::Relaxed) + 1)
        } else {
            None
        };
        let lifecycle = self.lifecycle.clone();
        let stamp = self.stamp.clone();
        if status.borrow().is_dead() {
            let _ = sender.send(KernelEvent::Ended(KernelLifecycle::Died));
        } else {
            tokio::spawn(async move {
                let _turn = queue.lock().await;
                status.send_replace(KernelStatus::Busy);
                let outcome = play(&script, count, &sender, &mut control).await;
                match outcome {
                    Ended::Reply(reply) => {
                        // As from ipykernel: the reply overtakes the final idle.
                        let _ = sender.send(KernelEvent::Replied {
                            execution_count: reply.execution_count,
                        });
                        for text in late {
                            let _ = sender.send(KernelEvent::output(IopubEvent::Stream {
                                name: "stdout".to_owned(),
                                text,
                            }));
                        }
                        status.send_replace(KernelStatus::Idle);
                        let _ = sender.send(KernelEvent::Idle);
                        let _ = sender.send(KernelEvent::Reply(reply));
                    }
                    Ended::Lifecycle(lifecycle) => {
                        let _ = sender.send(KernelEvent::Ended(lifecycle));
                    }
                    Ended::DiedSeenAsFailure(reply) => {
                        // As an editor reports a kernel that died under a cell: the cell is
                        // marked failed, and the kernel is dead.
                        lifecycle.fetch_add(1, Ordering::Relaxed);
                        *stamp.lock().expect("stamp lock") = None;
                        status.send_replace(KernelStatus::Dead);
                        let _ = sender.send(KernelEvent::Idle);
                        let _ = sender.send(KernelEvent::Reply(reply));
                    }
                }
            });
        }
        futures::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|event| (event, receiver))
        })
        .boxed()
    }
}

enum Ended {
    Reply(KernelReply),
    Lifecycle(KernelLifecycle),
    /// `#> editor-death`: the kernel died, and the host reports the cell as failed.
    DiedSeenAsFailure(KernelReply),
}

fn tiny_png() -> String {
    // A 2×2 PNG, base64.
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAYAAABytg0kAAAAFklEQVR4nGP8z8Dwn4GBgYGJAQoAAP8DA/0cyDAAAAAASUVORK5CYII=".to_owned()
}

/// Plays a piece of code's directives until its end or a control that ends it.
async fn play(
    code: &str,
    execution_count: Option<u64>,
    sender: &mpsc::UnboundedSender<KernelEvent>,
    control: &mut tokio::sync::broadcast::Receiver<Control>,
) -> Ended {
    let _ = sender.send(KernelEvent::Busy);
    let raised = |ename: &str, sender: &mpsc::UnboundedSender<KernelEvent>| {
        let _ = sender.send(KernelEvent::output(IopubEvent::Error {
            ename: ename.to_owned(),
            evalue: format!("{ename} raised by a directive"),
            traceback: vec![format!("{ename}: raised by a directive")],
        }));
        let mut reply = KernelReply::new(ReplyStatus::Error, execution_count);
        reply.error = Some(crate::kernel::RaisedError {
            ename: ename.to_owned(),
            evalue: format!("{ename} raised by a directive"),
            traceback: Vec::new(),
        });
        Ended::Reply(reply)
    };
    for line in code.lines() {
        let Some(directive) = line.trim().strip_prefix("#>") else {
            continue;
        };
        let directive = directive.trim();
        let (verb, argument) = directive.split_once(' ').unwrap_or((directive, ""));
        match verb {
            "out" => {
                let _ = sender.send(KernelEvent::output(IopubEvent::Stream {
                    name: "stdout".to_owned(),
                    text: format!("{argument}\n"),
                }));
            }
            "err" => return raised(argument, sender),
            "image" => {
                let _ = sender.send(KernelEvent::output(IopubEvent::DisplayData {
                    data: json!({"image/png": tiny_png(), "text/plain": "<Figure>"}),
                    metadata: Value::Object(Map::new()),
                    transient: None,
                }));
            }
            "die" => return Ended::Lifecycle(KernelLifecycle::Died),
            "editor-death" => {
                let Ended::Reply(reply) = raised("KernelDied", sender) else {
                    unreachable!("raised ends with a reply")
                };
                return Ended::DiedSeenAsFailure(reply);
            }
            "wait" | "hang" | "stubborn" => {
                let wait = async {
                    match argument.parse::<u64>() {
                        Ok(ms) if verb == "wait" => {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                        }
                        _ => std::future::pending::<()>().await,
                    }
                };
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        () = &mut wait => break,
                        received = control.recv() => match received {
                            Ok(Control::Interrupt) if verb == "stubborn" => {}
                            Ok(Control::Interrupt) => return raised("KeyboardInterrupt", sender),
                            Ok(Control::Restart) => return Ended::Lifecycle(KernelLifecycle::Restarted),
                            Ok(Control::Die) => return Ended::Lifecycle(KernelLifecycle::Died),
                            Ok(Control::Shutdown) | Err(_) => {
                                return Ended::Lifecycle(KernelLifecycle::Terminated);
                            }
                        },
                    }
                }
            }
            _ => {}
        }
    }
    Ended::Reply(KernelReply::new(ReplyStatus::Ok, execution_count))
}

impl KernelSession for ScriptedSession {
    fn info(&self) -> SessionInfo {
        self.info.clone()
    }

    fn features(&self) -> SessionFeatures {
        self.kernels.inner.features
    }

    fn epoch(&self) -> Option<u64> {
        self.kernels
            .inner
            .own_epochs
            .then(|| self.epoch.load(Ordering::Relaxed))
    }

    fn lifecycle_changes(&self) -> u64 {
        self.lifecycle.load(Ordering::Relaxed)
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        self.status.subscribe()
    }

    fn run_cell(&self, cell: CellToRun) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move { Ok(self.events(cell.source.clone(), cell.source, true)) })
    }

    fn execute(
        &self,
        code: String,
        options: ExecuteOptions,
    ) -> BoxFuture<'_, Result<KernelEvents, KernelError>> {
        Box::pin(async move {
            let hook = self.kernels.inner.hook.lock().expect("hook lock").clone();
            let hooked = hook.and_then(|hook| hook(&code, &options));
            // The tools' stamp request: answered as the stamp program would, from this
            // process's memory (unless the hook says otherwise).
            let stamped = crate::epoch::script::offered_token(&code).map(|offered| {
                let stamp = self
                    .stamp
                    .lock()
                    .expect("stamp lock")
                    .get_or_insert(offered)
                    .clone();
                format!("#> out {}", crate::epoch::script::answer(&stamp))
            });
            let script = hooked.or(stamped).unwrap_or_else(|| code.clone());
            Ok(self.events(code, script, false))
        })
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus, KernelError>> {
        Box::pin(async move { Ok(*self.status.borrow()) })
    }
}
