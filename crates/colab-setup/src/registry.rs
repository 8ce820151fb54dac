//! The setups of one host: admission, retention and the guards other tools ask.
//!
//! At most [`RegistryConfig::max_records`] setups are kept (16 by default). Admitting one more
//! evicts the oldest settled setup; an unsettled one (not terminal, or terminal with commands
//! still to settle) is never evicted, and when every record is unsettled admission fails. A
//! notebook has at most one unsettled setup, and while it has one, [`SetupRegistry::guard`]
//! refuses runs, transfers, notebook mutations, kernel changes and another setup on it, naming
//! the blocking setup. Commands the setup itself dispatches (its temporary cell) are the host's
//! own and bypass the guard.

use crate::error::SetupError;
use crate::names::SetupId;
use crate::receipt::SetupReceipt;
use crate::setup::{Setup, SetupAction, SetupConfig, SetupEntropy, SetupEvent, SetupRequest};
use crate::wire::GuardedOperation;

/// The registry's limits and the configuration of its setups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryConfig {
    /// How many setups are retained: 16.
    pub max_records: usize,
    /// Timing and labels of every setup.
    pub setup: SetupConfig,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            max_records: 16,
            setup: SetupConfig::default(),
        }
    }
}

/// A setup just admitted: its id and its first actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// The new setup's id.
    pub setup_id: SetupId,
    /// What the host must do first.
    pub actions: Vec<SetupAction>,
}

/// Every retained setup of one host, oldest first.
#[derive(Clone, Debug, Default)]
pub struct SetupRegistry {
    config: RegistryConfig,
    setups: Vec<Setup>,
}

impl SetupRegistry {
    /// An empty registry.
    pub fn new(config: RegistryConfig) -> Self {
        SetupRegistry {
            config,
            setups: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// Admits and starts a setup. Refused, with nothing changed, when the notebook has an
    /// unsettled setup (`setup_active`) or every retained setup is unsettled
    /// (`registry_full`).
    pub fn admit(
        &mut self,
        request: SetupRequest,
        entropy: SetupEntropy,
        now_ms: u64,
    ) -> Result<Admitted, SetupError> {
        self.guard(&request.notebook, GuardedOperation::Setup)?;
        if self.setups.len() >= self.config.max_records.max(1) {
            let Some(oldest_settled) = self.setups.iter().position(Setup::is_settled) else {
                return Err(SetupError::RegistryFull {
                    max: self.config.max_records,
                });
            };
            self.setups.remove(oldest_settled);
        }
        let mut suffix = entropy.id;
        let mut setup_id = SetupId::from_parts(now_ms, suffix);
        while self.find(setup_id.as_str()).is_some() {
            suffix = suffix.wrapping_add(1);
            setup_id = SetupId::from_parts(now_ms, suffix);
        }
        let mut setup = Setup::new(
            setup_id.clone(),
            request,
            entropy,
            self.config.setup,
            now_ms,
        );
        let actions = setup.start(now_ms);
        self.setups.push(setup);
        Ok(Admitted { setup_id, actions })
    }

    /// Applies an event to the notebook's setup with this id. A setup of another notebook is
    /// reported as not found, like an unknown id.
    pub fn apply(
        &mut self,
        notebook: &str,
        setup_id: &str,
        event: SetupEvent,
        now_ms: u64,
    ) -> Result<Vec<SetupAction>, SetupError> {
        let index = self.index_for(notebook, setup_id)?;
        self.setups[index].apply(event, now_ms)
    }

    /// Ticks every unsettled setup; returns each one's actions.
    pub fn tick(&mut self, now_ms: u64) -> Vec<(SetupId, Vec<SetupAction>)> {
        let mut all = Vec::new();
        for setup in &mut self.setups {
            if setup.is_settled() {
                continue;
            }
            let actions = setup
                .apply(SetupEvent::Tick, now_ms)
                .expect("a tick is never refused");
            if !actions.is_empty() {
                all.push((setup.id().clone(), actions));
            }
        }
        all
    }

    /// Refuses `operation` on `notebook` while it has an unsettled setup.
    pub fn guard(&self, notebook: &str, operation: GuardedOperation) -> Result<(), SetupError> {
        match self.blocking_setup(notebook) {
            Some(setup) => Err(SetupError::SetupActive {
                setup_id: setup.id().clone(),
                operation,
            }),
            None => Ok(()),
        }
    }

    /// The notebook's unsettled setup, if any.
    pub fn blocking_setup(&self, notebook: &str) -> Option<&Setup> {
        self.setups
            .iter()
            .find(|setup| setup.notebook() == notebook && !setup.is_settled())
    }

    /// The notebook's setup with this id.
    pub fn get(&self, notebook: &str, setup_id: &str) -> Result<&Setup, SetupError> {
        self.index_for(notebook, setup_id)
            .map(|index| &self.setups[index])
    }

    /// The receipt of the notebook's setup with this id.
    pub fn receipt(&self, notebook: &str, setup_id: &str) -> Result<SetupReceipt, SetupError> {
        self.get(notebook, setup_id).map(Setup::receipt)
    }

    /// The notebook's newest setup.
    pub fn latest(&self, notebook: &str) -> Option<&Setup> {
        self.setups
            .iter()
            .rev()
            .find(|setup| setup.notebook() == notebook)
    }

    /// Every retained setup, oldest first.
    pub fn setups(&self) -> &[Setup] {
        &self.setups
    }

    /// How many setups are retained.
    pub fn len(&self) -> usize {
        self.setups.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.setups.is_empty()
    }

    fn find(&self, setup_id: &str) -> Option<usize> {
        self.setups
            .iter()
            .position(|setup| setup.id().as_str() == setup_id)
    }

    fn index_for(&self, notebook: &str, setup_id: &str) -> Result<usize, SetupError> {
        self.find(setup_id)
            .filter(|&index| self.setups[index].notebook() == notebook)
            .ok_or_else(|| SetupError::SetupNotFound {
                setup_id: setup_id.to_owned(),
            })
    }
}

/// The longest `waitMs` a setup tool accepts.
pub const MAX_WAIT_MS: u64 = 60_000;
/// `waitMs` of `configure_kernel`, `mount_colab_server` and `select_setup_kernel` when omitted.
pub const DEFAULT_START_WAIT_MS: u64 = 1_000;
/// `waitMs` of `get_kernel_setup` when omitted.
pub const DEFAULT_POLL_WAIT_MS: u64 = 0;

/// Validates a `waitMs` argument: 0 to 60000, `default` when omitted. The wait only bounds the
/// caller's request; it never cancels the setup.
pub fn wait_budget(wait_ms: Option<u64>, default: u64) -> Result<u64, SetupError> {
    match wait_ms {
        None => Ok(default),
        Some(value) if value <= MAX_WAIT_MS => Ok(value),
        Some(value) => Err(SetupError::WaitOutOfRange { value }),
    }
}

#[cfg(test)]
mod tests;
