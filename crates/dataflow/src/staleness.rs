//! Staleness of code cells against the live kernel, and run planning.
//!
//! Freshness is a claim about the live kernel's memory, so it needs that kernel's identity: the
//! host numbers kernels with an epoch (a new or restarted kernel gets a new one) and stamps every
//! run with the epoch it ran on and a per-kernel sequence number. Nothing persisted can claim
//! freshness against a new epoch.

use std::sync::Arc;

use crate::error::DataflowError;

/// The host's record of a cell's last run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunStamp {
    /// The cell's rev when it ran.
    pub rev: String,
    /// The kernel it ran on.
    pub kernel_epoch: u64,
    /// Monotonically increasing per kernel: a run with a higher sequence happened later.
    pub sequence: u64,
    /// Whether the run finished without an error.
    pub ok: bool,
}

/// Why a cell that ran is not fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StaleReason {
    /// No kernel is live.
    NoKernel,
    /// It ran on a kernel that has since been restarted or replaced.
    OldKernel,
    /// Its source changed since it ran.
    Edited,
    /// An input cell is not fresh.
    InputNotFresh {
        /// Index of the input cell that is not fresh.
        input: usize,
    },
    /// An input cell ran after it, so it may have read older values.
    InputRerun {
        /// Index of the input cell that ran later.
        input: usize,
    },
}

/// The staleness of one code cell. `queued` and `running` are the host's to overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellState {
    /// It has no run record at all.
    NeverRun,
    /// Its current source ran on the live kernel after every input, and every input is fresh.
    Fresh,
    /// Its current source ran on the live kernel and failed.
    Error,
    /// It ran, but the result cannot be trusted.
    Stale(StaleReason),
}

impl CellState {
    /// `never-run`, `fresh`, `error` or `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            CellState::NeverRun => "never-run",
            CellState::Fresh => "fresh",
            CellState::Error => "error",
            CellState::Stale(_) => "stale",
        }
    }

    /// Whether the state is [`CellState::Fresh`].
    pub fn is_fresh(self) -> bool {
        self == CellState::Fresh
    }
}

/// The staleness of every cell at one moment, from [`crate::Dataflow::freshness`], with what
/// run planning needs.
#[derive(Debug, Clone)]
pub struct Freshness {
    states: Vec<Option<CellState>>,
    inputs: Arc<[Vec<usize>]>,
}

impl Freshness {
    pub(crate) fn new(states: Vec<Option<CellState>>, inputs: Arc<[Vec<usize>]>) -> Self {
        Freshness { states, inputs }
    }

    /// The state of cell `index`; `None` for markdown and raw cells and out-of-range indexes.
    pub fn state(&self, index: usize) -> Option<CellState> {
        self.states.get(index).copied().flatten()
    }

    /// One entry per cell, in document order.
    pub fn states(&self) -> &[Option<CellState>] {
        &self.states
    }

    /// Every code cell that is not fresh (stale, never run, or failed), in document order: what
    /// a plain "run" executes.
    pub fn stale_set(&self) -> Vec<usize> {
        self.states
            .iter()
            .enumerate()
            .filter(|(_, state)| state.is_some_and(|state| !state.is_fresh()))
            .map(|(index, _)| index)
            .collect()
    }

    /// The cells to run for `targets`: the targets themselves (even when fresh) and, with
    /// `fresh_deps`, every transitive input of a target that is not fresh. In document order,
    /// without duplicates.
    pub fn plan(&self, targets: &[usize], fresh_deps: bool) -> Result<Vec<usize>, DataflowError> {
        let mut included = vec![false; self.states.len()];
        let mut visited = vec![false; self.states.len()];
        let mut to_visit = Vec::new();
        for &target in targets {
            match self.states.get(target) {
                None => {
                    return Err(DataflowError::CellOutOfRange {
                        index: target,
                        len: self.states.len(),
                    });
                }
                Some(None) => return Err(DataflowError::NotACodeCell { index: target }),
                Some(Some(_)) => {}
            }
            included[target] = true;
            if fresh_deps && !visited[target] {
                visited[target] = true;
                to_visit.push(target);
            }
        }
        while let Some(cell) = to_visit.pop() {
            for &input in &self.inputs[cell] {
                if visited[input] {
                    continue;
                }
                visited[input] = true;
                to_visit.push(input);
                if self.state(input).is_some_and(|state| !state.is_fresh()) {
                    included[input] = true;
                }
            }
        }
        Ok(included
            .iter()
            .enumerate()
            .filter(|(_, included)| **included)
            .map(|(index, _)| index)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::testing::{self, TestCell};
    use crate::{CellKind, Dataflow};

    /// A notebook, its kernel and the host's run records, driven by events.
    #[derive(Debug, Clone)]
    struct Session {
        cells: Vec<TestCell>,
        stamps: Vec<Option<RunStamp>>,
        epoch: Option<u64>,
        next_epoch: u64,
        sequence: u64,
    }

    #[derive(Debug, Clone)]
    enum Event {
        Edit { cell: usize, replacement: TestCell },
        Run { cell: usize, ok: bool },
        Restart,
        Shutdown,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            3 => (any::<usize>(), testing::cell())
                .prop_map(|(cell, replacement)| Event::Edit { cell, replacement }),
            6 => (any::<usize>(), proptest::bool::weighted(0.85))
                .prop_map(|(cell, ok)| Event::Run { cell, ok }),
            1 => Just(Event::Restart),
            1 => Just(Event::Shutdown),
        ]
    }

    impl Session {
        fn new(cells: Vec<TestCell>) -> Self {
            let count = cells.len();
            Session {
                cells,
                stamps: vec![None; count],
                epoch: None,
                next_epoch: 1,
                sequence: 0,
            }
        }

        fn start_kernel(&mut self) -> u64 {
            let epoch = self.next_epoch;
            self.next_epoch += 1;
            self.epoch = Some(epoch);
            self.sequence = 0;
            epoch
        }

        fn apply(&mut self, event: &Event) {
            let count = self.cells.len();
            match event {
                Event::Edit { cell, replacement } => self.cells[cell % count] = replacement.clone(),
                Event::Run { cell, ok } => {
                    let cell = cell % count;
                    if self.cells[cell].kind != CellKind::Code {
                        return;
                    }
                    // Running without a kernel starts one, as the host does.
                    let epoch = self.epoch.unwrap_or_else(|| self.start_kernel());
                    self.sequence += 1;
                    self.stamps[cell] = Some(RunStamp {
                        rev: self.cells[cell].source.clone(),
                        kernel_epoch: epoch,
                        sequence: self.sequence,
                        ok: *ok,
                    });
                }
                Event::Restart => {
                    self.start_kernel();
                }
                Event::Shutdown => self.epoch = None,
            }
        }

        fn freshness(&self, dataflow: &Dataflow) -> Freshness {
            let runs: Vec<Option<&RunStamp>> = self.stamps.iter().map(Option::as_ref).collect();
            dataflow
                .freshness(&runs, self.epoch)
                .expect("one record per cell")
        }

        /// The definition, recomputed from scratch: fresh means this source ran and succeeded
        /// on the live kernel after every input, and every input is fresh.
        fn naive_fresh(&self, dataflow: &Dataflow, cell: usize) -> bool {
            let Some(stamp) = &self.stamps[cell] else {
                return false;
            };
            Some(stamp.kernel_epoch) == self.epoch
                && stamp.rev == self.cells[cell].source
                && stamp.ok
                && testing::naive_inputs(dataflow, cell)
                    .into_iter()
                    .all(|input| {
                        self.naive_fresh(dataflow, input)
                            && self.stamps[input]
                                .as_ref()
                                .is_some_and(|input_stamp| input_stamp.sequence < stamp.sequence)
                    })
        }

        fn naive_state(&self, dataflow: &Dataflow, cell: usize) -> Option<&'static str> {
            if self.cells[cell].kind != CellKind::Code {
                return None;
            }
            let Some(stamp) = &self.stamps[cell] else {
                return Some("never-run");
            };
            Some(
                if Some(stamp.kernel_epoch) != self.epoch || stamp.rev != self.cells[cell].source {
                    "stale"
                } else if !stamp.ok {
                    "error"
                } else if self.naive_fresh(dataflow, cell) {
                    "fresh"
                } else {
                    "stale"
                },
            )
        }
    }

    fn ancestors(dataflow: &Dataflow, targets: &[usize]) -> Vec<bool> {
        let mut seen = vec![false; dataflow.len()];
        let mut stack: Vec<usize> = targets.to_vec();
        while let Some(cell) = stack.pop() {
            for &input in dataflow.inputs(cell) {
                if !seen[input] {
                    seen[input] = true;
                    stack.push(input);
                }
            }
        }
        seen
    }

    fn descendants(dataflow: &Dataflow, cell: usize) -> Vec<usize> {
        let mut seen = vec![false; dataflow.len()];
        let mut stack = vec![cell];
        while let Some(current) = stack.pop() {
            for &dependent in dataflow.dependents(current) {
                if !seen[dependent] {
                    seen[dependent] = true;
                    stack.push(dependent);
                }
            }
        }
        (0..dataflow.len()).filter(|&index| seen[index]).collect()
    }

    fn stamp(rev: &str, sequence: u64, ok: bool) -> RunStamp {
        RunStamp {
            rev: rev.to_owned(),
            kernel_epoch: 7,
            sequence,
            ok,
        }
    }

    #[test]
    fn states_and_reasons() {
        let cells: Vec<TestCell> = ["a = 1", "b = a", "c = b", "d = 1", "e = d"]
            .iter()
            .map(|source| TestCell {
                kind: CellKind::Code,
                source: (*source).to_owned(),
            })
            .collect();
        let dataflow = testing::dataflow_of(&cells);
        let stamps = [
            Some(stamp("a = 1", 1, true)),
            Some(stamp("b = a", 3, true)),
            Some(stamp("c = b", 2, true)),
            Some(stamp("d = 0", 4, true)),
            None,
        ];
        let runs: Vec<Option<&RunStamp>> = stamps.iter().map(Option::as_ref).collect();
        let freshness = dataflow.freshness(&runs, Some(7)).unwrap();
        assert_eq!(
            freshness.states(),
            &[
                Some(CellState::Fresh),
                Some(CellState::Fresh),
                Some(CellState::Stale(StaleReason::InputRerun { input: 1 })),
                Some(CellState::Stale(StaleReason::Edited)),
                Some(CellState::NeverRun),
            ]
        );
        assert_eq!(freshness.stale_set(), vec![2, 3, 4]);
        assert_eq!(freshness.plan(&[1], true).unwrap(), vec![1]);
        assert_eq!(freshness.plan(&[4, 2, 4], true).unwrap(), vec![2, 3, 4]);
        assert_eq!(freshness.plan(&[4], false).unwrap(), vec![4]);

        let failed = [Some(stamp("a = 1", 1, false)), None, None, None, None];
        let runs: Vec<Option<&RunStamp>> = failed.iter().map(Option::as_ref).collect();
        let freshness = dataflow.freshness(&runs, Some(7)).unwrap();
        assert_eq!(freshness.state(0), Some(CellState::Error));
        let restarted = dataflow.freshness(&runs, Some(8)).unwrap();
        assert_eq!(
            restarted.state(0),
            Some(CellState::Stale(StaleReason::OldKernel))
        );
        let no_kernel = dataflow.freshness(&runs, None).unwrap();
        assert_eq!(
            no_kernel.state(0),
            Some(CellState::Stale(StaleReason::NoKernel))
        );
        assert_eq!(no_kernel.state(1), Some(CellState::NeverRun));
        assert_eq!(no_kernel.state(9), None);
    }

    #[test]
    fn caller_errors() {
        let cells = vec![
            TestCell {
                kind: CellKind::Code,
                source: "x = 1".to_owned(),
            },
            TestCell {
                kind: CellKind::Markdown,
                source: "# x".to_owned(),
            },
        ];
        let dataflow = testing::dataflow_of(&cells);
        assert_eq!(
            dataflow.freshness(&[None], Some(1)).unwrap_err(),
            DataflowError::RunRecordCount {
                expected: 2,
                got: 1
            }
        );
        let freshness = dataflow.freshness(&[None, None], Some(1)).unwrap();
        assert_eq!(freshness.state(1), None);
        assert_eq!(freshness.stale_set(), vec![0]);
        assert_eq!(
            freshness.plan(&[1], true).unwrap_err(),
            DataflowError::NotACodeCell { index: 1 }
        );
        assert_eq!(
            freshness.plan(&[2], true).unwrap_err(),
            DataflowError::CellOutOfRange { index: 2, len: 2 }
        );
    }

    proptest! {
        #[test]
        fn staleness_matches_the_naive_definition(
            cells in testing::notebook(9),
            events in proptest::collection::vec(event(), 0..40),
        ) {
            let mut session = Session::new(cells);
            for event in &events {
                session.apply(event);
                let dataflow = testing::dataflow_of(&session.cells);
                let freshness = session.freshness(&dataflow);
                for cell in 0..session.cells.len() {
                    prop_assert_eq!(
                        freshness.state(cell).map(CellState::as_str),
                        session.naive_state(&dataflow, cell),
                        "cell {} after {:?}", cell, event
                    );
                }
                match event {
                    Event::Edit { cell, .. } => {
                        let cell = cell % session.cells.len();
                        // An edited cell and everything downstream of it is not fresh, unless
                        // the edit restored exactly the source that ran.
                        let restored = session.stamps[cell]
                            .as_ref()
                            .is_some_and(|stamp| stamp.rev == session.cells[cell].source);
                        if !restored {
                            for affected in std::iter::once(cell)
                                .chain(descendants(&dataflow, cell))
                            {
                                prop_assert!(
                                    freshness.state(affected).is_none_or(|state| !state.is_fresh())
                                );
                            }
                        }
                    }
                    Event::Restart | Event::Shutdown => {
                        let states = freshness.states();
                        prop_assert!(states.iter().flatten().all(|state| !state.is_fresh()));
                    }
                    Event::Run { .. } => {}
                }
            }
        }

        #[test]
        fn plans_hold_targets_and_exactly_their_non_fresh_ancestors(
            cells in testing::notebook(10),
            events in proptest::collection::vec(event(), 0..30),
            targets in proptest::collection::vec(any::<usize>(), 0..4),
            fresh_deps in any::<bool>(),
        ) {
            let mut session = Session::new(cells);
            for event in &events {
                session.apply(event);
            }
            let dataflow = testing::dataflow_of(&session.cells);
            let freshness = session.freshness(&dataflow);
            let code: Vec<usize> = (0..session.cells.len())
                .filter(|&index| session.cells[index].kind == CellKind::Code)
                .collect();
            prop_assume!(!code.is_empty());
            let targets: Vec<usize> = targets.iter().map(|pick| code[pick % code.len()]).collect();
            let plan = freshness.plan(&targets, fresh_deps).unwrap();

            prop_assert!(plan.windows(2).all(|pair| pair[0] < pair[1]), "document order");
            for target in &targets {
                prop_assert!(plan.contains(target));
            }
            for (cell, is_ancestor) in ancestors(&dataflow, &targets).into_iter().enumerate() {
                let non_fresh = freshness.state(cell).is_some_and(|state| !state.is_fresh());
                let expected =
                    targets.contains(&cell) || (fresh_deps && is_ancestor && non_fresh);
                prop_assert_eq!(plan.contains(&cell), expected, "cell {}", cell);
            }
            prop_assert_eq!(
                freshness.stale_set(),
                code.iter()
                    .copied()
                    .filter(|&cell| freshness.state(cell) != Some(CellState::Fresh))
                    .collect::<Vec<_>>()
            );
        }
    }
}
