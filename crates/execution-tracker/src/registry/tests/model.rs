//! The registry against a naive model: plain vectors, linear scans, no cleverness. Random
//! sequences of admissions, progress, invalidations, replies, pruning and lookups must give the
//! same results and leave the same records in both.

use proptest::prelude::*;

use super::*;

const NOTEBOOKS: usize = 40;

#[derive(Clone, Debug)]
enum Op {
    Admit {
        notebook: usize,
        cells: usize,
        random: u64,
    },
    /// Start the k-th active run and dispatch its first cell.
    Dispatch {
        k: usize,
    },
    /// Drive the k-th active run to completion.
    Complete {
        k: usize,
    },
    /// Invalidate the k-th active run (an MCP interrupt).
    Invalidate {
        k: usize,
    },
    /// The reply of the k-th pending command arrives.
    Reply {
        k: usize,
    },
    Prune,
    Lookup {
        notebook: usize,
        id: Option<usize>,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0..NOTEBOOKS, prop_oneof![20 => 1..4usize, 1 => Just(0usize), 1 => Just(257usize)], 0..3u64)
            .prop_map(|(notebook, cells, random)| Op::Admit { notebook, cells, random }),
        2 => (0..64usize).prop_map(|k| Op::Dispatch { k }),
        3 => (0..64usize).prop_map(|k| Op::Complete { k }),
        1 => (0..64usize).prop_map(|k| Op::Invalidate { k }),
        1 => (0..64usize).prop_map(|k| Op::Reply { k }),
        1 => Just(Op::Prune),
        2 => (0..NOTEBOOKS, proptest::option::of(0..64usize)).prop_map(|(notebook, id)| Op::Lookup { notebook, id }),
        3 => prop_oneof![8 => Just(0u64), 8 => Just(1), 4 => Just(1_000), 1 => Just(HOUR - 1), 1 => Just(HOUR)]
            .prop_map(|ms| Op::Advance { ms }),
    ]
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    NotStarted,
    Dispatched,
    Terminal,
}

#[derive(Clone, Debug)]
struct ModelRun {
    id: String,
    notebook: String,
    started: u64,
    sequence: u64,
    phase: Phase,
    finished: Option<u64>,
}

struct Model {
    limits: RegistryLimits,
    runs: Vec<ModelRun>,
    /// (notebook, execution id) of every command without a reply.
    pending: Vec<(String, String)>,
    sequence: u64,
    /// Every id ever admitted, for lookups of gone runs.
    history: Vec<String>,
}

impl Model {
    fn new(limits: RegistryLimits) -> Self {
        Model {
            limits,
            runs: Vec::new(),
            pending: Vec::new(),
            sequence: 0,
            history: Vec::new(),
        }
    }

    fn prune(&mut self, now: u64) {
        self.runs.retain(|run| {
            run.finished
                .is_none_or(|finished| finished + self.limits.terminal_retention_ms > now)
        });
    }

    fn notebooks(&self) -> Vec<String> {
        let mut notebooks: Vec<String> = Vec::new();
        for run in &self.runs {
            if !notebooks.contains(&run.notebook) {
                notebooks.push(run.notebook.clone());
            }
        }
        notebooks
    }

    /// The index of the `k`th run (modulo their number) among those whose phase is `wanted`.
    fn pick(&self, k: usize, wanted: impl Fn(Phase) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.runs.len())
            .filter(|&index| wanted(self.runs[index].phase))
            .collect();
        candidates.get(k % candidates.len().max(1)).copied()
    }

    fn active(&self, notebook: &str) -> Option<&ModelRun> {
        self.runs
            .iter()
            .find(|run| run.notebook == notebook && run.phase != Phase::Terminal)
    }

    fn admit(
        &mut self,
        notebook: &str,
        cells: usize,
        now: u64,
        random: u64,
    ) -> Result<String, TrackerError> {
        if cells == 0 {
            return Err(TrackerError::EmptyRun);
        }
        if cells > self.limits.max_cells_per_run {
            return Err(TrackerError::TooManyCells {
                requested: cells,
                max: self.limits.max_cells_per_run,
            });
        }
        self.prune(now);
        if let Some(active) = self.active(notebook) {
            return Err(TrackerError::NotebookBusy {
                active: id_of(&active.id),
            });
        }
        if let Some((_, id)) = self.pending.iter().find(|(pending, _)| pending == notebook) {
            return Err(TrackerError::CommandPending {
                execution_id: id_of(id),
            });
        }
        let mut busy: Vec<String> = self
            .runs
            .iter()
            .filter(|run| run.phase != Phase::Terminal)
            .map(|run| run.notebook.clone())
            .collect();
        busy.extend(self.pending.iter().map(|(notebook, _)| notebook.clone()));
        busy.sort();
        busy.dedup();
        if busy.len() >= self.limits.max_active_runs {
            return Err(TrackerError::TooManyActiveRuns {
                max: self.limits.max_active_runs,
            });
        }
        let notebooks = self.notebooks();
        if !notebooks.iter().any(|known| known == notebook)
            && notebooks.len() >= self.limits.max_notebooks
        {
            let mut victim: Option<(u64, u64, String)> = None;
            for candidate in notebooks {
                let runs: Vec<&ModelRun> = self
                    .runs
                    .iter()
                    .filter(|run| run.notebook == candidate)
                    .collect();
                if runs.iter().any(|run| run.phase != Phase::Terminal) {
                    continue;
                }
                let newest = runs.iter().max_by_key(|run| run.sequence).unwrap();
                let key = (newest.started, newest.sequence, candidate.clone());
                if victim
                    .as_ref()
                    .is_none_or(|best| (key.0, key.1) < (best.0, best.1))
                {
                    victim = Some(key);
                }
            }
            let Some((_, _, victim)) = victim else {
                return Err(TrackerError::RegistryFull {
                    max_notebooks: self.limits.max_notebooks,
                });
            };
            self.runs.retain(|run| run.notebook != victim);
        }
        let mut suffix = random;
        let mut id = ExecutionId::from_parts(now, suffix).to_string();
        while self.runs.iter().any(|run| run.id == id)
            || self.pending.iter().any(|(_, pending)| *pending == id)
        {
            suffix += 1;
            id = ExecutionId::from_parts(now, suffix).to_string();
        }
        self.runs.push(ModelRun {
            id: id.clone(),
            notebook: notebook.to_owned(),
            started: now,
            sequence: self.sequence,
            phase: Phase::NotStarted,
            finished: None,
        });
        self.sequence += 1;
        let mut of_notebook: Vec<(u64, String)> = self
            .runs
            .iter()
            .filter(|run| run.notebook == notebook)
            .map(|run| (run.sequence, run.id.clone()))
            .collect();
        of_notebook.sort();
        while of_notebook.len() > self.limits.max_runs_per_notebook {
            let (_, oldest) = of_notebook.remove(0);
            self.runs.retain(|run| run.id != oldest);
        }
        self.history.push(id.clone());
        Ok(id)
    }

    /// The ids of a notebook's retained runs, newest first.
    fn runs_of(&self, notebook: &str) -> Vec<String> {
        let mut runs: Vec<&ModelRun> = self
            .runs
            .iter()
            .filter(|run| run.notebook == notebook)
            .collect();
        runs.sort_by_key(|run| std::cmp::Reverse(run.sequence));
        runs.into_iter().map(|run| run.id.clone()).collect()
    }

    fn resolve(&self, notebook: &str, id: Option<&str>) -> Result<String, TrackerError> {
        match id {
            Some(id) => match self.runs.iter().find(|run| run.id == id) {
                None => Err(TrackerError::UnknownExecution { id: id.to_owned() }),
                Some(run) if run.notebook != notebook => {
                    Err(TrackerError::WrongNotebook { id: id.to_owned() })
                }
                Some(run) => Ok(run.id.clone()),
            },
            None => self
                .runs_of(notebook)
                .first()
                .cloned()
                .ok_or(TrackerError::NoRunForNotebook),
        }
    }
}

fn id_of(text: &str) -> ExecutionId {
    // Ids are only ever built by `from_parts`; rebuild one from its text for comparisons.
    let mut parts = text.trim_start_matches("exec_").split('_');
    let time = u64::from_str_radix(parts.next().unwrap(), 36).unwrap();
    let suffix = u64::from_str_radix(parts.next().unwrap(), 36).unwrap();
    ExecutionId::from_parts(time, suffix)
}

fn notebook_name(index: usize) -> String {
    format!("nb{index}.ipynb")
}

fn check_same(registry: &Registry, model: &Model) {
    for index in 0..NOTEBOOKS {
        let notebook = notebook_name(index);
        let real: Vec<String> = registry
            .runs(&notebook)
            .iter()
            .map(|run| run.id().to_string())
            .collect();
        assert_eq!(real, model.runs_of(&notebook), "runs of {notebook}");
        assert_eq!(
            registry.notebook_command_pending(&notebook),
            model
                .pending
                .iter()
                .any(|(pending, _)| *pending == notebook),
            "pending flag of {notebook}"
        );
        assert_eq!(
            registry
                .active_run(&notebook)
                .map(|run| run.id().to_string()),
            model.active(&notebook).map(|run| run.id.clone())
        );
    }
    for run in &model.runs {
        let real = registry.run(&run.id).unwrap();
        assert_eq!(
            real.is_terminal(),
            run.phase == Phase::Terminal,
            "{}",
            run.id
        );
        assert_eq!(real.finished_at_ms(), run.finished);
        assert!(
            !real.is_terminal() || real.cell_outputs(0).is_empty(),
            "terminal runs are compacted"
        );
    }
    let mut real_notebooks: Vec<&str> = registry.notebooks().collect();
    real_notebooks.sort();
    let mut model_notebooks = model.notebooks();
    model_notebooks.sort();
    assert_eq!(real_notebooks, model_notebooks);
    assert!(real_notebooks.len() <= model.limits.max_notebooks);
}

fn run_ops(limits: RegistryLimits, ops: Vec<Op>) {
    let config = RegistryConfig {
        limits,
        ..RegistryConfig::default()
    };
    let mut registry = Registry::new(config, formatter());
    let mut model = Model::new(limits);
    let mut now = 1_000u64;
    for op in ops {
        match op {
            Op::Admit {
                notebook,
                cells,
                random,
            } => {
                let notebook = notebook_name(notebook);
                let real = registry
                    .admit(request(&notebook, cells), now, random)
                    .map(|id| id.to_string());
                let expected = model.admit(&notebook, cells, now, random);
                assert_eq!(real, expected, "admit {notebook} at {now}");
            }
            Op::Dispatch { k } => {
                if let Some(index) = model.pick(k, |phase| phase == Phase::NotStarted) {
                    let run = &mut model.runs[index];
                    dispatch(&mut registry, &id_of(&run.id), now);
                    run.phase = Phase::Dispatched;
                    model.pending.push((run.notebook.clone(), run.id.clone()));
                }
            }
            Op::Complete { k } => {
                if let Some(index) = model.pick(k, |phase| phase != Phase::Terminal) {
                    let run = &mut model.runs[index];
                    complete(&mut registry, &id_of(&run.id), now);
                    run.phase = Phase::Terminal;
                    run.finished = Some(now);
                    let id = run.id.clone();
                    model.pending.retain(|(_, pending)| *pending != id);
                }
            }
            Op::Invalidate { k } => {
                if let Some(index) = model.pick(k, |phase| phase != Phase::Terminal) {
                    let run = &mut model.runs[index];
                    let event = RunEvent::Invalidate(Invalidation::Interrupt);
                    registry.apply(&run.id, event, now).unwrap();
                    run.phase = Phase::Terminal;
                    run.finished = Some(now);
                }
            }
            Op::Reply { k } => {
                if !model.pending.is_empty() {
                    let (_, id) = model.pending.remove(k % model.pending.len());
                    let reply = RunEvent::ExecuteReply {
                        position: 0,
                        reply: crate::run::ExecuteReply {
                            status: crate::run::ReplyStatus::Ok,
                            execution_count: Some(1),
                        },
                    };
                    registry.apply(&id, reply, now).unwrap();
                    // A reply alone does not settle an active cell (idle is still missing).
                }
            }
            Op::Prune => {
                registry.prune(now);
                model.prune(now);
            }
            Op::Lookup { notebook, id } => {
                let notebook = notebook_name(notebook);
                let id =
                    id.and_then(|k| model.history.get(k % model.history.len().max(1)).cloned());
                let real = registry
                    .resolve(&notebook, id.as_deref())
                    .map(|run| run.id().to_string());
                assert_eq!(
                    real,
                    model.resolve(&notebook, id.as_deref()),
                    "resolve {notebook} {id:?}"
                );
                if let Ok(id) = real {
                    let receipt = registry.receipt(&id, &ReceiptOptions::default()).unwrap();
                    assert_eq!(
                        receipt.notebook_command_pending,
                        registry.notebook_command_pending(&notebook)
                    );
                    assert_eq!(receipt.notebook_ref, notebook);
                }
            }
            Op::Advance { ms } => now += ms,
        }
        check_same(&registry, &model);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The reference limits: pressure on 16 active notebooks and 32 retained ones.
    #[test]
    fn the_registry_agrees_with_a_naive_model(ops in proptest::collection::vec(op(), 1..300)) {
        run_ops(RegistryLimits::default(), ops);
    }

    /// Small limits where fewer notebooks may be retained than may be active, so "registry is
    /// full" is reachable, and where per-notebook trimming happens often.
    #[test]
    fn the_registry_agrees_with_a_naive_model_under_small_limits(ops in proptest::collection::vec(op(), 1..200)) {
        let limits = RegistryLimits {
            max_active_runs: 6,
            max_cells_per_run: 3,
            max_notebooks: 4,
            max_runs_per_notebook: 2,
            terminal_retention_ms: HOUR,
        };
        run_ops(limits, ops);
    }
}
