//! The registry of tracked runs of one host: admission, limits, retention and lookup.
//!
//! Limits (all configurable through [`RegistryLimits`], defaults from the reference): one active
//! run per notebook; sixteen notebooks with active work (an active run, or an execute request
//! still pending in the kernel); 256 cells per run; 32 notebooks and eight runs per notebook
//! retained; terminal records expire one hour after they finished, active ones never. When a new
//! notebook arrives at capacity, the notebook whose runs are all terminal and whose newest run
//! started earliest is evicted; if there is none, admission fails with "registry is full".
//!
//! Expiry is lazy: the host calls [`Registry::prune`] with the current time before serving a
//! request, as [`Registry::admit`] does itself.

use crate::error::TrackerError;
use crate::id::ExecutionId;
use crate::output::OutputLimits;
use crate::receipt::{OutputFormatter, Receipt, ReceiptOptions, build_receipt};
use crate::run::{CellRequest, Run, RunAction, RunEvent};

/// Admission and retention limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Notebooks that may have active work at once (an active run or a pending command).
    pub max_active_runs: usize,
    /// Most cells in one run (default 256).
    pub max_cells_per_run: usize,
    /// Most notebooks whose runs are retained (default 32); at capacity a notebook without active
    /// runs is evicted.
    pub max_notebooks: usize,
    /// Most runs retained per notebook (default 8).
    pub max_runs_per_notebook: usize,
    /// How long a terminal record is kept after it finished.
    pub terminal_retention_ms: u64,
}

impl Default for RegistryLimits {
    fn default() -> Self {
        RegistryLimits {
            max_active_runs: 16,
            max_cells_per_run: 256,
            max_notebooks: 32,
            max_runs_per_notebook: 8,
            terminal_retention_ms: 60 * 60 * 1000,
        }
    }
}

/// Everything a registry is configured with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistryConfig {
    /// Admission and retention limits.
    pub limits: RegistryLimits,
    /// Bounds on the outputs kept per cell while a run is active.
    pub output_limits: OutputLimits,
}

/// A `run_cells` request that passed the host's own checks (cells resolved, code cells only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// The notebook's key as the host names it (URI or path); receipts report it as
    /// `notebookRef`.
    pub notebook: String,
    /// The cells to run, in order, with their identity and source captured now.
    pub cells: Vec<CellRequest>,
}

/// An execute request that has not had its reply, remembered per notebook even after its run
/// record expired or was evicted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingCommand {
    notebook: String,
    execution_id: ExecutionId,
}

#[derive(Debug)]
struct NotebookRuns {
    notebook: String,
    /// Newest first.
    runs: Vec<Run>,
    /// Admission sequence number of the newest run: breaks ties between equal start times.
    newest_sequence: u64,
}

impl NotebookRuns {
    fn all_terminal(&self) -> bool {
        self.runs.iter().all(Run::is_terminal)
    }

    fn active(&self) -> Option<&Run> {
        self.runs.iter().find(|run| !run.is_terminal())
    }

    fn newest_started_at(&self) -> u64 {
        self.runs.first().map_or(0, Run::admitted_at_ms)
    }
}

/// All tracked runs of one host.
pub struct Registry {
    config: RegistryConfig,
    formatter: Box<dyn OutputFormatter + Send + Sync>,
    notebooks: Vec<NotebookRuns>,
    pending: Vec<PendingCommand>,
    next_sequence: u64,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Registry")
            .field("config", &self.config)
            .field("notebooks", &self.notebooks)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry. The formatter renders outputs for receipts; it is also used once per
    /// run when the run ends, to keep formatted text instead of raw outputs.
    pub fn new(config: RegistryConfig, formatter: Box<dyn OutputFormatter + Send + Sync>) -> Self {
        Registry {
            config,
            formatter,
            notebooks: Vec::new(),
            pending: Vec::new(),
            next_sequence: 0,
        }
    }

    /// The limits this registry was built with.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// Validates and records a new run in state `requested`, pruning expired records first.
    /// Checks, in order: at least one cell, at most `max_cells_per_run`, no active run on the
    /// notebook, no pending command on the notebook, fewer than `max_active_runs` notebooks with
    /// active work, room for the notebook (evicting one if needed). Nothing changes on error.
    ///
    /// The id is `exec_<now_ms base 36>_<random base 36>`; should it already name a retained run
    /// or a pending command, the suffix is stepped until it is unique.
    pub fn admit(
        &mut self,
        request: RunRequest,
        now_ms: u64,
        random: u64,
    ) -> Result<ExecutionId, TrackerError> {
        let limits = self.config.limits;
        if request.cells.is_empty() {
            return Err(TrackerError::EmptyRun);
        }
        if request.cells.len() > limits.max_cells_per_run {
            return Err(TrackerError::TooManyCells {
                requested: request.cells.len(),
                max: limits.max_cells_per_run,
            });
        }
        self.prune(now_ms);
        let entry = self
            .notebooks
            .iter()
            .position(|entry| entry.notebook == request.notebook);
        if let Some(active) = entry.and_then(|index| self.notebooks[index].active()) {
            return Err(TrackerError::NotebookBusy {
                active: active.id().clone(),
            });
        }
        if let Some(pending) = self
            .pending
            .iter()
            .find(|pending| pending.notebook == request.notebook)
        {
            return Err(TrackerError::CommandPending {
                execution_id: pending.execution_id.clone(),
            });
        }
        if self.notebooks_with_active_work() >= limits.max_active_runs {
            return Err(TrackerError::TooManyActiveRuns {
                max: limits.max_active_runs,
            });
        }
        let entry = match entry {
            Some(index) => index,
            None => {
                if self.notebooks.len() >= limits.max_notebooks {
                    let evictable = self
                        .notebooks
                        .iter()
                        .enumerate()
                        .filter(|(_, entry)| entry.all_terminal())
                        .min_by_key(|(_, entry)| (entry.newest_started_at(), entry.newest_sequence))
                        .map(|(index, _)| index);
                    match evictable {
                        Some(index) => {
                            self.notebooks.remove(index);
                        }
                        None => {
                            return Err(TrackerError::RegistryFull {
                                max_notebooks: limits.max_notebooks,
                            });
                        }
                    }
                }
                self.notebooks.push(NotebookRuns {
                    notebook: request.notebook.clone(),
                    runs: Vec::new(),
                    newest_sequence: 0,
                });
                self.notebooks.len() - 1
            }
        };

        let mut suffix = random;
        let mut id = ExecutionId::from_parts(now_ms, suffix);
        // A pending command outlives its record, and its id must keep naming it alone.
        while self.find(id.as_str()).is_some()
            || self
                .pending
                .iter()
                .any(|pending| pending.execution_id == id)
        {
            suffix = suffix.wrapping_add(1);
            id = ExecutionId::from_parts(now_ms, suffix);
        }
        let run = Run::new(
            id.clone(),
            request.notebook,
            request.cells,
            now_ms,
            self.config.output_limits,
        );
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let entry = &mut self.notebooks[entry];
        entry.runs.insert(0, run);
        entry.runs.truncate(limits.max_runs_per_notebook.max(1));
        entry.newest_sequence = sequence;
        Ok(id)
    }

    /// Drops terminal records that finished at least `terminal_retention_ms` before `now_ms`,
    /// and notebooks left without records.
    pub fn prune(&mut self, now_ms: u64) {
        let retention = self.config.limits.terminal_retention_ms;
        for entry in &mut self.notebooks {
            entry.runs.retain(|run| !run.expired(now_ms, retention));
        }
        self.notebooks.retain(|entry| !entry.runs.is_empty());
    }

    /// Applies an event to a run, keeps the notebook's pending-command record in step, and
    /// releases a terminal run's raw outputs. An `ExecuteReply` or `CommandSettled` for a run
    /// whose record is gone still settles its pending command.
    pub fn apply(
        &mut self,
        id: &str,
        event: RunEvent,
        now_ms: u64,
    ) -> Result<Vec<RunAction>, TrackerError> {
        let Some((entry, index)) = self.find(id) else {
            let settles = matches!(
                event,
                RunEvent::ExecuteReply { .. } | RunEvent::CommandSettled
            );
            let pending = self
                .pending
                .iter()
                .position(|pending| pending.execution_id == id);
            return match (settles, pending) {
                (true, Some(pending)) => {
                    self.pending.remove(pending);
                    Ok(Vec::new())
                }
                _ => Err(TrackerError::UnknownExecution { id: id.to_owned() }),
            };
        };
        let run = &mut self.notebooks[entry].runs[index];
        let actions = run.apply(event, now_ms);
        if run.is_terminal() {
            run.compact(&*self.formatter);
        }
        let pending = run.command_pending();
        let notebook = run.notebook().to_owned();
        let execution_id = run.id().clone();
        self.pending
            .retain(|existing| existing.execution_id != execution_id);
        if pending {
            self.pending.push(PendingCommand {
                notebook,
                execution_id,
            });
        }
        Ok(actions)
    }

    /// The run with this id, whatever its notebook.
    pub fn run(&self, id: &str) -> Option<&Run> {
        self.find(id)
            .map(|(entry, index)| &self.notebooks[entry].runs[index])
    }

    /// The run `get_execution` should report: the one with `id`, which must belong to
    /// `notebook`, or without an id the notebook's newest run.
    pub fn resolve(&self, notebook: &str, id: Option<&str>) -> Result<&Run, TrackerError> {
        match id {
            Some(id) => {
                let run = self
                    .run(id)
                    .ok_or_else(|| TrackerError::UnknownExecution { id: id.to_owned() })?;
                if run.notebook() != notebook {
                    return Err(TrackerError::WrongNotebook { id: id.to_owned() });
                }
                Ok(run)
            }
            None => self
                .latest_run(notebook)
                .ok_or(TrackerError::NoRunForNotebook),
        }
    }

    /// The notebook's newest run.
    pub fn latest_run(&self, notebook: &str) -> Option<&Run> {
        self.entry(notebook).and_then(|entry| entry.runs.first())
    }

    /// The notebook's active (non-terminal) run: the one lifecycle events and MCP
    /// restarts/interrupts should be sent to.
    pub fn active_run(&self, notebook: &str) -> Option<&Run> {
        self.entry(notebook).and_then(NotebookRuns::active)
    }

    /// The notebook's retained runs, newest first.
    pub fn runs(&self, notebook: &str) -> &[Run] {
        self.entry(notebook)
            .map(|entry| entry.runs.as_slice())
            .unwrap_or_default()
    }

    /// The notebooks with retained records, in no particular order.
    pub fn notebooks(&self) -> impl Iterator<Item = &str> {
        self.notebooks.iter().map(|entry| entry.notebook.as_str())
    }

    /// Whether an execute request of this notebook has not had its reply yet, even if the run
    /// that sent it ended or its record is gone.
    pub fn notebook_command_pending(&self, notebook: &str) -> bool {
        self.pending_command(notebook).is_some()
    }

    /// The run whose execute request is pending on this notebook.
    pub fn pending_command(&self, notebook: &str) -> Option<&ExecutionId> {
        self.pending
            .iter()
            .find(|pending| pending.notebook == notebook)
            .map(|pending| &pending.execution_id)
    }

    /// Whether the run is terminal; `None` for an unknown id.
    pub fn is_terminal(&self, id: &str) -> Option<bool> {
        self.run(id).map(Run::is_terminal)
    }

    /// The run's change counter; `None` for an unknown id.
    pub fn version(&self, id: &str) -> Option<u64> {
        self.run(id).map(Run::version)
    }

    /// The receipt of a run, formatted with the registry's formatter.
    pub fn receipt(&self, id: &str, options: &ReceiptOptions) -> Result<Receipt, TrackerError> {
        let run = self
            .run(id)
            .ok_or_else(|| TrackerError::UnknownExecution { id: id.to_owned() })?;
        let pending = self.notebook_command_pending(run.notebook());
        Ok(build_receipt(run, options, &*self.formatter, pending))
    }

    fn notebooks_with_active_work(&self) -> usize {
        let mut busy: Vec<&str> = self
            .notebooks
            .iter()
            .filter(|entry| entry.active().is_some())
            .map(|entry| entry.notebook.as_str())
            .collect();
        for pending in &self.pending {
            if !busy.contains(&pending.notebook.as_str()) {
                busy.push(&pending.notebook);
            }
        }
        busy.len()
    }

    fn entry(&self, notebook: &str) -> Option<&NotebookRuns> {
        self.notebooks
            .iter()
            .find(|entry| entry.notebook == notebook)
    }

    fn find(&self, id: &str) -> Option<(usize, usize)> {
        self.notebooks
            .iter()
            .enumerate()
            .find_map(|(entry_index, entry)| {
                entry
                    .runs
                    .iter()
                    .position(|run| run.id() == id)
                    .map(|run_index| (entry_index, run_index))
            })
    }
}

#[cfg(test)]
mod tests;
