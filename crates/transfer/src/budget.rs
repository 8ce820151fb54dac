//! The per-kernel chunk-traffic budget.

use crate::error::Cause;

/// The default budget: 64 MiB of chunk traffic per kernel object.
pub const KERNEL_BUDGET_BYTES: u64 = 64 * 1024 * 1024;

/// How many chunk bytes one kernel object may still carry.
///
/// Every chunk request leaves its source in the kernel process for a while (IPython's caches,
/// message buffers, allocator high-water marks), so a kernel object carries at most
/// [`KERNEL_BUDGET_BYTES`] of chunk traffic in both directions together. The host keeps one
/// `KernelBudget` per live kernel object, passes it to every `next_action` call of every
/// transfer on that kernel, and replaces it with a fresh one when the kernel restarts or is
/// replaced. A request's chunks are charged together at dispatch; a request whose chunks do not
/// fit is refused before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelBudget {
    limit: u64,
    used: u64,
}

impl KernelBudget {
    /// A fresh budget of [`KERNEL_BUDGET_BYTES`].
    pub fn new() -> KernelBudget {
        KernelBudget::with_limit(KERNEL_BUDGET_BYTES)
    }

    /// A fresh budget with another limit (for tests and for hosts that want to be stricter).
    pub fn with_limit(limit: u64) -> KernelBudget {
        KernelBudget { limit, used: 0 }
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Bytes that may still be charged.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    /// Forgets all charges; call it when the kernel object restarts.
    pub fn reset(&mut self) {
        self.used = 0;
    }

    /// Charges `bytes` if they fit, otherwise leaves the budget unchanged.
    pub(crate) fn try_charge(&mut self, bytes: u64) -> Result<(), BudgetRefusal> {
        self.check(bytes)?;
        self.used += bytes;
        Ok(())
    }

    /// Checks without charging.
    pub(crate) fn check(&self, bytes: u64) -> Result<(), BudgetRefusal> {
        if bytes <= self.remaining() {
            Ok(())
        } else {
            Err(BudgetRefusal {
                needed: bytes,
                remaining: self.remaining(),
                limit: self.limit,
            })
        }
    }
}

impl Default for KernelBudget {
    fn default() -> Self {
        KernelBudget::new()
    }
}

/// A refused charge, turned into `Cause::BudgetExhausted` by the machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetRefusal {
    pub(crate) needed: u64,
    pub(crate) remaining: u64,
    pub(crate) limit: u64,
}

impl From<BudgetRefusal> for Cause {
    fn from(refusal: BudgetRefusal) -> Cause {
        Cause::BudgetExhausted {
            needed: refusal.needed,
            remaining: refusal.remaining,
            limit: refusal.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_fit_exactly_and_refusals_change_nothing() {
        let mut budget = KernelBudget::with_limit(10);
        assert_eq!(budget.try_charge(4), Ok(()));
        assert_eq!(budget.try_charge(6), Ok(()));
        assert_eq!(budget.remaining(), 0);
        assert_eq!(
            budget.try_charge(1),
            Err(BudgetRefusal {
                needed: 1,
                remaining: 0,
                limit: 10
            })
        );
        assert_eq!(budget.used(), 10);
        assert_eq!(budget.try_charge(0), Ok(()));
        budget.reset();
        assert_eq!(budget.remaining(), 10);
        assert_eq!(KernelBudget::new().limit(), 67_108_864);
    }
}
