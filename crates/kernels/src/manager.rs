//! One kernel per notebook, started lazily, stopped when idle too long or on server exit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::Result;
use crate::execute::{ExecuteHandle, ExecuteOptions};
use crate::provider::{KernelHandle, KernelProvider};
use crate::spec::{Discovery, KernelSpecInfo, SpecPreference};
use crate::status::{KernelInfo, KernelStatus};
use crate::tasks::AbortOnDrop;

/// Settings of a [`KernelManager`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConfig {
    /// A kernel with no request running for this long is shut down. `None` keeps kernels
    /// until `shutdown_all`. Default one hour.
    pub idle_ttl: Option<Duration>,
}

impl Default for ManagerConfig {
    fn default() -> Self {
        ManagerConfig {
            idle_ttl: Some(Duration::from_secs(60 * 60)),
        }
    }
}

/// Owns the kernels by notebook path. Cheap to clone.
#[derive(Clone)]
pub struct KernelManager {
    inner: Arc<ManagerInner>,
}

impl std::fmt::Debug for KernelManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelManager")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

struct ManagerInner {
    provider: Arc<dyn KernelProvider>,
    config: ManagerConfig,
    slots: Mutex<HashMap<PathBuf, Arc<Slot>>>,
}

/// The kernel of one notebook. Its async lock serialises starting and stopping, so two
/// concurrent first requests start one kernel.
#[derive(Default)]
struct Slot {
    kernel: tokio::sync::Mutex<Option<Arc<ManagedKernel>>>,
}

impl KernelManager {
    pub fn new(provider: Arc<dyn KernelProvider>, config: ManagerConfig) -> Self {
        KernelManager {
            inner: Arc::new(ManagerInner {
                provider,
                config,
                slots: Mutex::new(HashMap::new()),
            }),
        }
    }

    pub fn provider(&self) -> &Arc<dyn KernelProvider> {
        &self.inner.provider
    }

    /// Every kernel choice for `notebook` (or for the server root).
    pub async fn discover(&self, notebook: Option<&Path>) -> Result<Discovery> {
        let notebook_dir = notebook.map(notebook_dir);
        self.inner.provider.discover(notebook_dir.as_deref()).await
    }

    /// The notebook's kernel, started (in the notebook's folder) if there is none, restarted
    /// if it died. An explicit `preference.spec_id` different from the running kernel's
    /// replaces it.
    pub async fn get_or_start(
        &self,
        notebook: &Path,
        preference: &SpecPreference,
    ) -> Result<Arc<dyn KernelHandle>> {
        let slot = self.slot(notebook);
        let mut current = slot.kernel.lock().await;
        if let Some(kernel) = current.as_ref() {
            let wanted_other = preference
                .spec_id
                .as_deref()
                .is_some_and(|id| id != kernel.spec().id);
            if !wanted_other {
                // A kernel that stopped answering may be gone for good (a remote server that
                // lost it): look again before handing it out.
                if *kernel.status().borrow() == KernelStatus::Unreachable {
                    let _ = kernel.probe().await;
                }
                if kernel.status().borrow().is_dead() {
                    kernel.restart().await?;
                }
                return Ok(Arc::clone(kernel) as Arc<dyn KernelHandle>);
            }
        }
        if let Some(old) = current.take() {
            old.shutdown().await?;
        }
        let kernel = self.start(notebook, preference, &slot).await?;
        *current = Some(Arc::clone(&kernel));
        Ok(kernel)
    }

    /// The notebook's kernel if one was started (it may be dead). Never waits: `None` while
    /// that notebook's kernel is being started or stopped.
    pub fn get(&self, notebook: &Path) -> Option<Arc<dyn KernelHandle>> {
        let slot = self.existing_slot(notebook)?;
        let current = slot.kernel.try_lock().ok()?;
        current
            .as_ref()
            .map(|kernel| Arc::clone(kernel) as Arc<dyn KernelHandle>)
    }

    /// Every notebook that has a kernel, with it. Never waits: notebooks whose kernel is being
    /// started or stopped right now are left out.
    pub fn running(&self) -> Vec<(PathBuf, Arc<dyn KernelHandle>)> {
        self.lock_slots()
            .iter()
            .filter_map(|(path, slot)| {
                let current = slot.kernel.try_lock().ok()?;
                let kernel = current.as_ref()?;
                Some((path.clone(), Arc::clone(kernel) as Arc<dyn KernelHandle>))
            })
            .collect()
    }

    /// Shuts the notebook's kernel down. Returns whether there was one.
    pub async fn shutdown(&self, notebook: &Path) -> Result<bool> {
        let Some(slot) = self.existing_slot(notebook) else {
            return Ok(false);
        };
        let taken = slot.kernel.lock().await.take();
        match taken {
            Some(kernel) => kernel.shutdown().await.map(|()| true),
            None => Ok(false),
        }
    }

    /// Shuts every kernel down, concurrently. For server exit (SIGINT/SIGTERM).
    pub async fn shutdown_all(&self) {
        let slots: Vec<_> = self.lock_slots().drain().map(|(_, slot)| slot).collect();
        let stops = slots.into_iter().map(|slot| async move {
            let taken = slot.kernel.lock().await.take();
            if let Some(kernel) = taken
                && let Err(error) = kernel.shutdown().await
            {
                tracing::warn!(%error, "shutting a kernel down failed");
            }
        });
        futures::future::join_all(stops).await;
    }

    async fn start(
        &self,
        notebook: &Path,
        preference: &SpecPreference,
        slot: &Arc<Slot>,
    ) -> Result<Arc<ManagedKernel>> {
        let provider = &self.inner.provider;
        let cwd = notebook_dir(notebook);
        let discovery = provider.discover(Some(&cwd)).await?;
        let spec = discovery.choose(preference, Some(&cwd), provider.server_root())?;
        let kernel = provider.start(spec, &cwd).await?;
        Ok(ManagedKernel::new(kernel, self.inner.config.idle_ttl, slot))
    }

    fn slot(&self, notebook: &Path) -> Arc<Slot> {
        Arc::clone(self.lock_slots().entry(notebook.to_path_buf()).or_default())
    }

    fn existing_slot(&self, notebook: &Path) -> Option<Arc<Slot>> {
        self.lock_slots().get(notebook).cloned()
    }

    fn lock_slots(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Arc<Slot>>> {
        self.inner
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn notebook_dir(notebook: &Path) -> PathBuf {
    match notebook.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// How many requests run, and since when nothing changed.
#[derive(Debug, Clone, Copy)]
struct Activity {
    running: usize,
    since: Instant,
}

/// A kernel as the manager hands it out: it counts running requests for the idle
/// time-to-live and otherwise delegates.
struct ManagedKernel {
    inner: Arc<dyn KernelHandle>,
    activity: Arc<watch::Sender<Activity>>,
    _reaper: AbortOnDrop,
}

impl ManagedKernel {
    fn new(
        inner: Arc<dyn KernelHandle>,
        idle_ttl: Option<Duration>,
        slot: &Arc<Slot>,
    ) -> Arc<Self> {
        let activity = Arc::new(watch::Sender::new(Activity {
            running: 0,
            since: Instant::now(),
        }));
        Arc::new_cyclic(|me: &Weak<ManagedKernel>| {
            let mut reaper = AbortOnDrop::default();
            if let Some(ttl) = idle_ttl {
                reaper.push(tokio::spawn(reap_when_idle(
                    Arc::downgrade(slot),
                    me.clone(),
                    activity.subscribe(),
                    ttl,
                )));
            }
            ManagedKernel {
                inner,
                activity,
                _reaper: reaper,
            }
        })
    }

    fn touch(&self) {
        self.activity
            .send_modify(|activity| activity.since = Instant::now());
    }
}

/// Decrements the running count when the request ends or its handle is dropped.
struct RunningRequest(Arc<watch::Sender<Activity>>);

impl Drop for RunningRequest {
    fn drop(&mut self) {
        self.0.send_modify(|activity| {
            activity.running = activity.running.saturating_sub(1);
            activity.since = Instant::now();
        });
    }
}

async fn reap_when_idle(
    slot: Weak<Slot>,
    kernel: Weak<ManagedKernel>,
    mut activity: watch::Receiver<Activity>,
    ttl: Duration,
) {
    loop {
        let now = *activity.borrow_and_update();
        if now.running > 0 {
            if activity.changed().await.is_err() {
                return;
            }
            continue;
        }
        tokio::select! {
            changed = activity.changed() => if changed.is_err() { return },
            () = tokio::time::sleep_until(now.since + ttl) => {
                let (Some(slot), Some(kernel)) = (slot.upgrade(), kernel.upgrade()) else {
                    return;
                };
                let mut current = slot.kernel.lock().await;
                if !current.as_ref().is_some_and(|held| Arc::ptr_eq(held, &kernel)) {
                    return;
                }
                let latest = *kernel.activity.borrow();
                if latest.running > 0 || latest.since + ttl > Instant::now() {
                    continue;
                }
                current.take();
                drop(current);
                tracing::info!(spec = %kernel.spec().id, "shutting down an idle kernel");
                if let Err(error) = kernel.inner.shutdown().await {
                    tracing::warn!(%error, "shutting an idle kernel down failed");
                }
                return;
            }
        }
    }
}

impl KernelHandle for ManagedKernel {
    fn spec(&self) -> &KernelSpecInfo {
        self.inner.spec()
    }

    fn cwd(&self) -> &Path {
        self.inner.cwd()
    }

    fn info(&self) -> KernelInfo {
        self.inner.info()
    }

    fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    fn status(&self) -> watch::Receiver<KernelStatus> {
        self.inner.status()
    }

    fn process_id(&self) -> Option<u32> {
        self.inner.process_id()
    }

    fn place(&self) -> crate::place::KernelPlace {
        self.inner.place()
    }

    fn diagnostics(&self) -> String {
        self.inner.diagnostics()
    }

    fn execute<'a>(
        &'a self,
        code: &'a str,
        options: ExecuteOptions,
    ) -> BoxFuture<'a, Result<ExecuteHandle>> {
        Box::pin(async move {
            self.activity.send_modify(|activity| {
                activity.running += 1;
                activity.since = Instant::now();
            });
            let guard = RunningRequest(Arc::clone(&self.activity));
            let handle = self.inner.execute(code, options).await?;
            Ok(handle.with_activity(Box::new(guard)))
        })
    }

    fn interrupt(&self) -> BoxFuture<'_, Result<()>> {
        self.inner.interrupt()
    }

    fn restart(&self) -> BoxFuture<'_, Result<()>> {
        self.touch();
        self.inner.restart()
    }

    fn shutdown(&self) -> BoxFuture<'_, Result<()>> {
        self.inner.shutdown()
    }

    fn probe(&self) -> BoxFuture<'_, Result<KernelStatus>> {
        self.inner.probe()
    }
}

#[cfg(test)]
mod tests {
    //! The manager against a fake provider: this also shows that the provider seam works for
    //! a kernel that is not a local process. Time is paused, so the idle time-to-live runs on
    //! tokio's virtual clock.

    use super::*;
    use crate::error::Error;
    use crate::execute::ExecuteEvent;
    use crate::spec::{InterruptMode, SpecSource};
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use tokio::sync::mpsc;

    struct FakeKernel {
        spec: KernelSpecInfo,
        cwd: PathBuf,
        epoch: AtomicU64,
        status: watch::Sender<KernelStatus>,
        open_requests: Mutex<Vec<mpsc::UnboundedSender<ExecuteEvent>>>,
        restarts: AtomicUsize,
        shutdowns: AtomicUsize,
    }

    impl KernelHandle for FakeKernel {
        fn spec(&self) -> &KernelSpecInfo {
            &self.spec
        }
        fn cwd(&self) -> &Path {
            &self.cwd
        }
        fn info(&self) -> KernelInfo {
            KernelInfo::default()
        }
        fn epoch(&self) -> u64 {
            self.epoch.load(Ordering::SeqCst)
        }
        fn status(&self) -> watch::Receiver<KernelStatus> {
            self.status.subscribe()
        }
        fn process_id(&self) -> Option<u32> {
            None
        }
        fn diagnostics(&self) -> String {
            String::new()
        }
        fn execute<'a>(
            &'a self,
            _code: &'a str,
            _options: ExecuteOptions,
        ) -> BoxFuture<'a, Result<ExecuteHandle>> {
            let (sender, receiver) = mpsc::unbounded_channel();
            self.open_requests.lock().unwrap().push(sender);
            let epoch = self.epoch();
            Box::pin(async move { Ok(ExecuteHandle::new("fake".into(), epoch, receiver)) })
        }
        fn interrupt(&self) -> BoxFuture<'_, Result<()>> {
            Box::pin(async { Ok(()) })
        }
        fn restart(&self) -> BoxFuture<'_, Result<()>> {
            self.restarts.fetch_add(1, Ordering::SeqCst);
            self.epoch.fetch_add(1, Ordering::SeqCst);
            self.status.send_replace(KernelStatus::Idle);
            Box::pin(async { Ok(()) })
        }
        fn shutdown(&self) -> BoxFuture<'_, Result<()>> {
            self.shutdowns.fetch_add(1, Ordering::SeqCst);
            self.status.send_replace(KernelStatus::Dead {
                exit: None,
                requested: true,
            });
            Box::pin(async { Ok(()) })
        }
        fn probe(&self) -> BoxFuture<'_, Result<KernelStatus>> {
            let status = self.status.borrow().clone();
            Box::pin(async move { Ok(status) })
        }
    }

    #[derive(Default)]
    struct FakeProvider {
        discovery: Discovery,
        started: Mutex<Vec<Arc<FakeKernel>>>,
        epochs: AtomicU64,
    }

    impl FakeProvider {
        fn with_specs(ids: &[&str]) -> Arc<Self> {
            let specs = ids
                .iter()
                .map(|id| KernelSpecInfo {
                    id: (*id).to_owned(),
                    display_name: (*id).to_owned(),
                    language: "python".into(),
                    argv: vec!["fake".into()],
                    env: Default::default(),
                    interrupt_mode: InterruptMode::Message,
                    resource_dir: None,
                    source: SpecSource::Other,
                })
                .collect();
            Arc::new(FakeProvider {
                discovery: Discovery {
                    specs,
                    ..Discovery::default()
                },
                ..FakeProvider::default()
            })
        }

        fn started(&self) -> Vec<Arc<FakeKernel>> {
            self.started.lock().unwrap().clone()
        }
    }

    impl KernelProvider for FakeProvider {
        fn discover<'a>(&'a self, _dir: Option<&'a Path>) -> BoxFuture<'a, Result<Discovery>> {
            Box::pin(async { Ok(self.discovery.clone()) })
        }
        fn start<'a>(
            &'a self,
            spec: &'a KernelSpecInfo,
            cwd: &'a Path,
        ) -> BoxFuture<'a, Result<Arc<dyn KernelHandle>>> {
            Box::pin(async move {
                // Starting takes a moment, so concurrent first requests overlap.
                tokio::time::sleep(Duration::from_millis(10)).await;
                let kernel = Arc::new(FakeKernel {
                    spec: spec.clone(),
                    cwd: cwd.to_path_buf(),
                    epoch: AtomicU64::new(self.epochs.fetch_add(1, Ordering::SeqCst) + 1),
                    status: watch::Sender::new(KernelStatus::Idle),
                    open_requests: Mutex::new(Vec::new()),
                    restarts: AtomicUsize::new(0),
                    shutdowns: AtomicUsize::new(0),
                });
                self.started.lock().unwrap().push(Arc::clone(&kernel));
                Ok(kernel as Arc<dyn KernelHandle>)
            })
        }
        fn server_root(&self) -> Option<&Path> {
            None
        }
    }

    fn manager(provider: &Arc<FakeProvider>, idle_ttl: Option<Duration>) -> KernelManager {
        KernelManager::new(
            Arc::clone(provider) as Arc<dyn KernelProvider>,
            ManagerConfig { idle_ttl },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn one_kernel_per_notebook_started_in_its_folder() {
        let provider = FakeProvider::with_specs(&["python3"]);
        let manager = manager(&provider, None);
        let notebook = Path::new("/project/sub/a.ipynb");
        let preference = SpecPreference::default();
        let (first, second) = tokio::join!(
            manager.get_or_start(notebook, &preference),
            manager.get_or_start(notebook, &preference)
        );
        assert_eq!(first.unwrap().epoch(), second.unwrap().epoch());
        assert_eq!(provider.started().len(), 1);
        assert_eq!(provider.started()[0].cwd, Path::new("/project/sub"));
        manager
            .get_or_start(Path::new("/project/b.ipynb"), &preference)
            .await
            .unwrap();
        assert_eq!(provider.started().len(), 2);
        assert_eq!(manager.running().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dead_kernel_is_restarted_and_another_choice_replaces_it() {
        let provider = FakeProvider::with_specs(&["python3", "other"]);
        let manager = manager(&provider, None);
        let notebook = Path::new("/n.ipynb");
        let kernel = manager
            .get_or_start(notebook, &SpecPreference::default())
            .await
            .unwrap();
        provider.started()[0]
            .status
            .send_replace(KernelStatus::Dead {
                exit: None,
                requested: false,
            });
        let again = manager
            .get_or_start(notebook, &SpecPreference::default())
            .await
            .unwrap();
        assert_eq!(provider.started()[0].restarts.load(Ordering::SeqCst), 1);
        assert!(again.epoch() > 1 && again.epoch() == kernel.epoch());

        let other = SpecPreference {
            spec_id: Some("other".into()),
            ..SpecPreference::default()
        };
        let replaced = manager.get_or_start(notebook, &other).await.unwrap();
        assert_eq!(replaced.spec().id, "other");
        assert_eq!(provider.started()[0].shutdowns.load(Ordering::SeqCst), 1);
        assert_eq!(provider.started().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_to_start_is_an_actionable_error() {
        let provider = FakeProvider::with_specs(&[]);
        let manager = manager(&provider, None);
        let error = manager
            .get_or_start(Path::new("/n.ipynb"), &SpecPreference::default())
            .await
            .err()
            .unwrap();
        assert!(matches!(error, Error::NoKernel { .. }));
        assert!(manager.get(Path::new("/n.ipynb")).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn idle_ttl_spares_running_requests_and_counts_from_the_last_one() {
        let ttl = Duration::from_secs(60);
        let provider = FakeProvider::with_specs(&["python3"]);
        let manager = manager(&provider, Some(ttl));
        let notebook = Path::new("/n.ipynb");
        let kernel = manager
            .get_or_start(notebook, &SpecPreference::default())
            .await
            .unwrap();
        let fake = &provider.started()[0];
        let handle = kernel
            .execute("long", ExecuteOptions::default())
            .await
            .unwrap();
        tokio::time::sleep(ttl * 3).await;
        assert_eq!(
            fake.shutdowns.load(Ordering::SeqCst),
            0,
            "a request is running"
        );

        // The request ends; the countdown starts from here.
        fake.open_requests.lock().unwrap()[0]
            .send(ExecuteEvent::KernelShutdown)
            .unwrap();
        let finished_at = Instant::now();
        handle.collect_events().await;
        let mut status = kernel.status();
        status.wait_for(KernelStatus::is_dead).await.unwrap();
        assert!(finished_at.elapsed() >= ttl);
        assert_eq!(fake.shutdowns.load(Ordering::SeqCst), 1);
        assert!(manager.get(notebook).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_all_stops_every_kernel() {
        let provider = FakeProvider::with_specs(&["python3"]);
        let manager = manager(&provider, Some(Duration::from_secs(60)));
        for name in ["/a.ipynb", "/b/b.ipynb"] {
            manager
                .get_or_start(Path::new(name), &SpecPreference::default())
                .await
                .unwrap();
        }
        manager.shutdown_all().await;
        assert!(
            provider
                .started()
                .iter()
                .all(|kernel| kernel.shutdowns.load(Ordering::SeqCst) == 1)
        );
        assert!(manager.running().is_empty());
        assert!(!manager.shutdown(Path::new("/a.ipynb")).await.unwrap());
    }
}
