//! The Colab setups of a host's notebooks (`colab-setup`'s registry, shared by every clone of
//! the tools), and the kernels a verified proof showed on Colab.

use std::sync::Arc;

use colab_setup::FileServiceRoot;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;

use colab_setup::{RegistryConfig, SetupRegistry};

use crate::host::NotebookLocation;

/// The setups of this host's notebooks.
pub(crate) struct Setups {
    pub(crate) registry: Mutex<SetupRegistry>,
    /// Each setup's notebook, for the commands of a tick.
    pub(crate) locations: Mutex<HashMap<String, NotebookLocation>>,
    /// Bumped after every change to a setup; waiters re-check theirs.
    pub(crate) changed: tokio::sync::watch::Sender<u64>,
    pub(crate) ticking: AtomicBool,
}

impl Setups {
    /// No setups, with `config`'s timing (the five-minute deadline unless a host changes it).
    pub(crate) fn new(config: RegistryConfig) -> Setups {
        Setups {
            registry: Mutex::new(SetupRegistry::new(config)),
            locations: Mutex::new(HashMap::new()),
            changed: tokio::sync::watch::channel(0).0,
            ticking: AtomicBool::new(false),
        }
    }

    pub(crate) fn registry(&self) -> std::sync::MutexGuard<'_, SetupRegistry> {
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn location(&self, setup_id: &str) -> Option<NotebookLocation> {
        self.locations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(setup_id)
            .cloned()
    }

    pub(crate) fn any_unsettled(&self) -> bool {
        self.registry()
            .setups()
            .iter()
            .any(|setup| !setup.is_settled())
    }

    pub(crate) fn bump(&self) {
        self.changed
            .send_modify(|version| *version = version.wrapping_add(1));
    }
}

impl std::fmt::Debug for Setups {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Setups")
            .field("setups", &self.registry().len())
            .finish()
    }
}

/// The kernels a nonce proof showed to run on a Colab runtime, each with the file-service root
/// it was proven through (by `check_colab`, a setup that ended `ready`, or the fresh proof of a
/// transfer through the file service).
///
/// This is what decides a transfer's route, because it is the one honest signal a host has: a
/// host with a Colab side (a VS Code window with the Colab extension, a server started with a
/// Colab source) may also run local kernels, `SessionInfo::runs_on` names a server but not that
/// it is Colab's (and an editor's kernels report none), and a setup's record names the notebook
/// but not which kernel it holds now. A proof names this kernel object: a proof holds only for
/// the session it ran on, at the epoch and lifecycle count it ran at, so a restart or a kernel
/// the editor swapped in needs a new one (until then its transfers take the kernel route, which
/// works everywhere).
#[derive(Default)]
pub(crate) struct ProvenKernels {
    pub(crate) proofs: Mutex<HashMap<usize, Proof>>,
}

pub(crate) struct Proof {
    pub(crate) kernel: std::sync::Weak<dyn crate::kernel::KernelSession>,
    pub(crate) epoch: Option<u64>,
    pub(crate) lifecycle: u64,
    pub(crate) root: FileServiceRoot,
}

impl ProvenKernels {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Proof>> {
        self.proofs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that a proof through `root` verified on `kernel` as it is now.
    pub(crate) fn record(&self, kernel: &crate::kernel::SharedSession, root: FileServiceRoot) {
        let mut proofs = self.lock();
        proofs.retain(|_, proof| proof.kernel.strong_count() > 0);
        proofs.insert(
            crate::kernel::session_address(kernel),
            Proof {
                kernel: Arc::downgrade(kernel),
                epoch: kernel.epoch(),
                lifecycle: kernel.lifecycle_changes(),
                root,
            },
        );
    }

    /// The root `kernel` was proven through, if a proof holds for it as it is now.
    pub(crate) fn root_of(&self, kernel: &crate::kernel::SharedSession) -> Option<FileServiceRoot> {
        let proofs = self.lock();
        let proof = proofs.get(&(crate::kernel::session_address(kernel)))?;
        let same = proof
            .kernel
            .upgrade()
            .is_some_and(|held| Arc::ptr_eq(&held, kernel))
            && proof.epoch == kernel.epoch()
            && proof.lifecycle == kernel.lifecycle_changes();
        same.then(|| proof.root.clone())
    }
}
