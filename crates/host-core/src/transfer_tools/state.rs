//! What transfers leave behind for later calls: who is transferring, and each kernel object's
//! budget and quarantine.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};

use mcp_contract::{ErrorCode, ToolError};
use transfer::KernelBudget;

use crate::failure::error;
use crate::kernel::{KernelSession, SharedSession};

/// What transfers leave behind for later calls: who is transferring, and each kernel object's
/// budget and quarantine. Cheap to clone; clones share the ledger.
#[derive(Clone, Default)]
pub(crate) struct TransferState {
    pub(crate) ledger: Arc<Mutex<Ledger>>,
}

#[derive(Default)]
pub(crate) struct Ledger {
    /// Notebooks with a transfer in progress.
    pub(crate) notebooks: HashSet<String>,
    /// Kernel objects, by address (kept alive, so not reused, while a record holds them).
    pub(crate) kernels: HashMap<usize, KernelRecord>,
}

pub(crate) struct KernelRecord {
    pub(crate) kernel: Weak<dyn KernelSession>,
    /// The epoch `budget` belongs to.
    pub(crate) epoch: u64,
    pub(crate) budget: KernelBudget,
    pub(crate) transferring: bool,
    /// Steps of ours that outlived their deadline and are still running in the kernel.
    pub(crate) unsettled: usize,
}

impl TransferState {
    /// How many timed-out steps are still running in some kernel (each quarantines its kernel).
    #[cfg(test)]
    pub(crate) fn unsettled(&self) -> usize {
        self.lock()
            .kernels
            .values()
            .map(|record| record.unsettled)
            .sum()
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Claims the notebook and its kernel for one transfer, with the kernel's budget (fresh if
    /// the kernel restarted since it was last used).
    pub(crate) fn reserve(
        &self,
        notebook: &str,
        kernel: &SharedSession,
    ) -> Result<Reservation, ToolError> {
        let mut ledger = self.lock();
        ledger
            .kernels
            .retain(|_, record| record.kernel.strong_count() > 0);
        if ledger.notebooks.contains(notebook) {
            return Err(busy(
                "another file transfer is in progress on this notebook; wait for it to finish",
            ));
        }
        let address = crate::kernel::session_address(kernel);
        let epoch = kernel.epoch().unwrap_or(0);
        let record = ledger
            .kernels
            .entry(address)
            .or_insert_with(|| KernelRecord {
                kernel: Arc::downgrade(kernel),
                epoch,
                budget: KernelBudget::new(),
                transferring: false,
                unsettled: 0,
            });
        if record.epoch != epoch {
            record.epoch = epoch;
            record.budget.reset();
        }
        if record.transferring {
            return Err(busy(
                "another file transfer is in progress on this kernel; wait for it to finish",
            ));
        }
        if record.unsettled > 0 {
            return Err(busy(
                "a file transfer step outlived its deadline and is still running in this kernel, \
                 so the kernel is quarantined for transfers until it settles; retry later, or \
                 interrupt or restart the kernel",
            ));
        }
        record.transferring = true;
        let budget = record.budget.clone();
        ledger.notebooks.insert(notebook.to_owned());
        Ok(Reservation {
            state: self.clone(),
            notebook: notebook.to_owned(),
            kernel: address,
            budget,
        })
    }
}

/// One transfer's claim on its notebook and kernel; released when dropped.
pub(crate) struct Reservation {
    pub(crate) state: TransferState,
    pub(crate) notebook: String,
    pub(crate) kernel: usize,
    pub(crate) budget: KernelBudget,
}

impl Reservation {
    /// Records the budget after a charge, so charges survive the transfer whatever happens.
    pub(crate) fn store_budget(&self, budget: &KernelBudget) {
        if let Some(record) = self.state.lock().kernels.get_mut(&self.kernel) {
            record.budget = budget.clone();
        }
    }

    /// Quarantines the kernel until the returned guard drops.
    pub(crate) fn quarantine(&self) -> Quarantine {
        if let Some(record) = self.state.lock().kernels.get_mut(&self.kernel) {
            record.unsettled += 1;
        }
        Quarantine {
            state: self.state.clone(),
            kernel: self.kernel,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut ledger = self.state.lock();
        ledger.notebooks.remove(&self.notebook);
        if let Some(record) = ledger.kernels.get_mut(&self.kernel) {
            record.transferring = false;
        }
    }
}

/// Held by the task that waits for a timed-out step to settle.
pub(crate) struct Quarantine {
    pub(crate) state: TransferState,
    pub(crate) kernel: usize,
}

impl Drop for Quarantine {
    fn drop(&mut self) {
        if let Some(record) = self.state.lock().kernels.get_mut(&self.kernel) {
            record.unsettled = record.unsettled.saturating_sub(1);
        }
    }
}

/// A finished transfer's traffic.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Traffic {
    /// Kernel request source sent plus reply text received, over every step.
    pub(crate) wire_bytes: u64,
    /// Chunks moved (a chunk step carries up to `transfer::CHUNKS_PER_REQUEST` of them).
    pub(crate) chunks: u64,
}

pub(crate) fn busy(message: &str) -> ToolError {
    error(ErrorCode::KernelBusy, message)
}
