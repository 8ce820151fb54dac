//! The state of tracked runs, shared by every clone of the tools: the registry of runs, the
//! per-notebook dataflow and run records, the controls of running runs, what is still being
//! carried out, and idempotency keys. It knows no tool: the run tools and the runner use it.

use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use execution_tracker::{Invalidation, Registry, RegistryConfig};

use crate::render;
use crate::session::NotebookSession;

/// How many changes of each run are still being carried out (runs with none are absent).
#[derive(Default)]
pub(crate) struct InFlightCounts(Mutex<HashMap<String, usize>>);

impl InFlightCounts {
    /// One more change of run `id` is being carried out.
    pub(crate) fn enter(&self, id: &str) {
        *self.lock().entry(id.to_owned()).or_default() += 1;
    }

    /// One change of run `id` was carried out; whether none is left.
    pub(crate) fn leave(&self, id: &str) -> bool {
        let mut counts = self.lock();
        let settled = match counts.get_mut(id) {
            Some(count) => {
                *count -= 1;
                *count == 0
            }
            None => true,
        };
        if settled {
            counts.remove(id);
        }
        settled
    }

    /// Whether changes of run `id` are being carried out.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.0.lock().expect("in-flight lock")
    }
}

/// What the run tools keep between calls.
pub(crate) struct RunState {
    /// Per-notebook dataflow and run records.
    pub(crate) sessions: Mutex<HashMap<String, NotebookSession>>,
    /// Tracked runs of this window.
    pub(crate) registry: Mutex<Registry>,
    /// Bumped when a run has ended with nothing left to carry out (its outputs written), and
    /// when kernel requests change runs from outside their runners; waiters re-check their run.
    pub(crate) runs_settled: tokio::sync::watch::Sender<u64>,
    /// Per-notebook controls of the running background run (interrupt requests).
    pub(crate) run_controls: Mutex<HashMap<String, Arc<RunControl>>>,
    /// Runs whose latest changes are still being carried out, with how many.
    pub(crate) in_flight: InFlightCounts,
    /// `run_cells` idempotency keys: (notebook URI, key) → the run they started.
    pub(crate) idempotency: Mutex<HashMap<(String, String), String>>,
}

impl Default for RunState {
    fn default() -> RunState {
        RunState {
            sessions: Mutex::new(HashMap::new()),
            registry: Mutex::new(new_registry()),
            runs_settled: tokio::sync::watch::channel(0).0,
            run_controls: Mutex::new(HashMap::new()),
            in_flight: InFlightCounts::default(),
            idempotency: Mutex::new(HashMap::new()),
        }
    }
}

/// Requests made to a notebook's running run from outside: a restart or interrupt through MCP.
/// The runner applies them itself, in order with the kernel's own events, and acknowledges.
#[derive(Debug)]
pub struct RunControl {
    sender: tokio::sync::mpsc::UnboundedSender<(Invalidation, tokio::sync::oneshot::Sender<()>)>,
}

pub(crate) type ControlRequests =
    tokio::sync::mpsc::UnboundedReceiver<(Invalidation, tokio::sync::oneshot::Sender<()>)>;

impl RunControl {
    pub(crate) fn new() -> (RunControl, ControlRequests) {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        (RunControl { sender }, receiver)
    }

    /// Asks the runner to apply `invalidation`; true once it has.
    pub(crate) async fn request(&self, invalidation: Invalidation) -> bool {
        let (acknowledge, acknowledged) = tokio::sync::oneshot::channel();
        if self.sender.send((invalidation, acknowledge)).is_err() {
            return false;
        }
        tokio::time::timeout(Duration::from_secs(5), acknowledged)
            .await
            .is_ok_and(|received| received.is_ok())
    }
}

pub(crate) fn new_registry() -> Registry {
    Registry::new(
        RegistryConfig::default(),
        Box::new(render::receipt_formatter),
    )
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

pub(crate) fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(now_ms());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}
