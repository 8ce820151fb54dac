use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::names::{ServerAlias, SessionName};
use crate::setup::{Command, Route};
use crate::sim::SimHost;
use crate::wire::SetupStatus;

fn entropy(id: u64) -> SetupEntropy {
    SetupEntropy {
        id,
        alias: [id as u8, 0, 0, 1],
        nonce: [id as u8; 16],
    }
}

fn tunnel(notebook: &str) -> SetupRequest {
    SetupRequest {
        notebook: notebook.to_owned(),
        route: Route::Tunnel { reuse: None },
    }
}

/// A host for a registry: one simulated world per setup, and the commands each setup owes.
#[derive(Default)]
struct Host {
    sims: BTreeMap<SetupId, SimHost>,
    pending: BTreeMap<SetupId, Vec<Command>>,
}

impl Host {
    fn take(&mut self, setup_id: &SetupId, actions: Vec<SetupAction>) {
        for action in actions {
            if let SetupAction::Perform(command) = action {
                self.pending
                    .entry(setup_id.clone())
                    .or_default()
                    .push(command);
            }
        }
    }

    fn admit(
        &mut self,
        registry: &mut SetupRegistry,
        request: SetupRequest,
        id: u64,
        now: u64,
    ) -> Result<SetupId, SetupError> {
        let admitted = registry.admit(request, entropy(id), now)?;
        self.sims
            .insert(admitted.setup_id.clone(), SimHost::default());
        self.take(&admitted.setup_id, admitted.actions);
        Ok(admitted.setup_id)
    }

    /// Answers the setup's oldest owed command; false if it owes none.
    fn answer(&mut self, registry: &mut SetupRegistry, setup_id: &SetupId, now: u64) -> bool {
        let Some(commands) = self.pending.get_mut(setup_id) else {
            return false;
        };
        if commands.is_empty() {
            return false;
        }
        let command = commands.remove(0);
        let sim = self.sims.get_mut(setup_id).unwrap();
        let reply = sim.answer(&command);
        let notebook = registry
            .setups()
            .iter()
            .find(|setup| setup.id() == setup_id)
            .map(|setup| setup.notebook().to_owned());
        // An evicted setup's answers have nowhere to go; a settled one owes nothing.
        let Some(notebook) = notebook else {
            return false;
        };
        let event = SetupEvent::Reply {
            command: command.id,
            reply,
        };
        let actions = registry
            .apply(&notebook, setup_id.as_str(), event, now)
            .unwrap();
        self.take(setup_id, actions);
        true
    }

    fn tick(&mut self, registry: &mut SetupRegistry, now: u64) {
        for (setup_id, actions) in registry.tick(now) {
            self.take(&setup_id, actions);
        }
    }
}

#[test]
fn an_unsettled_setup_blocks_its_notebook_and_only_its_notebook() {
    let mut registry = SetupRegistry::default();
    let mut host = Host::default();
    let first = host.admit(&mut registry, tunnel("a.ipynb"), 1, 10).unwrap();
    assert_eq!(first.as_str(), "setup_a_000001");
    for operation in GuardedOperation::ALL {
        let refused = registry.guard("a.ipynb", *operation).unwrap_err();
        assert_eq!(
            refused,
            SetupError::SetupActive {
                setup_id: first.clone(),
                operation: *operation
            }
        );
        assert!(refused.to_string().contains(first.as_str()));
        assert_eq!(registry.guard("b.ipynb", *operation), Ok(()));
    }
    assert_eq!(
        host.admit(&mut registry, tunnel("a.ipynb"), 2, 11)
            .unwrap_err()
            .code(),
        "setup_active"
    );
    assert!(host.admit(&mut registry, tunnel("b.ipynb"), 3, 11).is_ok());

    // Cancelled mid-assignment: terminal, but the assignment request is still owed an answer,
    // so the notebook stays blocked until it settles and the runtime is released.
    host.answer(&mut registry, &first, 12); // check_provider
    registry
        .apply("a.ipynb", first.as_str(), SetupEvent::Cancel, 13)
        .unwrap();
    let receipt = registry.receipt("a.ipynb", first.as_str()).unwrap();
    assert_eq!(receipt.status, SetupStatus::Cancelled);
    assert!(receipt.cleanup_pending);
    assert_eq!(
        registry
            .guard("a.ipynb", GuardedOperation::Run)
            .unwrap_err()
            .code(),
        "setup_active"
    );
    while host.answer(&mut registry, &first, 14) {}
    let receipt = registry.receipt("a.ipynb", first.as_str()).unwrap();
    assert!(!receipt.cleanup_pending && receipt.runtime_released);
    assert_eq!(registry.guard("a.ipynb", GuardedOperation::Run), Ok(()));
    assert!(registry.blocking_setup("a.ipynb").is_none());
    assert_eq!(registry.latest("a.ipynb").unwrap().id(), &first);
}

#[test]
fn lookups_name_only_the_notebooks_own_setups() {
    let mut registry = SetupRegistry::default();
    let mut host = Host::default();
    let id = host.admit(&mut registry, tunnel("a.ipynb"), 1, 10).unwrap();
    assert!(registry.get("a.ipynb", id.as_str()).is_ok());
    assert_eq!(
        registry.receipt("b.ipynb", id.as_str()).unwrap_err(),
        SetupError::SetupNotFound {
            setup_id: id.to_string()
        }
    );
    assert_eq!(
        registry
            .apply("a.ipynb", "setup_nope", SetupEvent::Cancel, 11)
            .unwrap_err()
            .code(),
        "setup_not_found"
    );
}

#[test]
fn ids_stay_unique_when_time_and_randomness_repeat() {
    let mut registry = SetupRegistry::default();
    let mut host = Host::default();
    let first = host.admit(&mut registry, tunnel("a"), 5, 10).unwrap();
    let second = host.admit(&mut registry, tunnel("b"), 5, 10).unwrap();
    assert_ne!(first, second);
    assert_eq!(second.as_str(), "setup_a_000006");
}

#[test]
fn retention_evicts_the_oldest_settled_setup_and_never_an_unsettled_one() {
    let mut registry = SetupRegistry::default();
    let mut host = Host::default();
    // Sixteen settled setups (cancelled before anything was dispatched but the provider check,
    // which is then answered).
    let mut ids = Vec::new();
    for n in 0..16u64 {
        let notebook = format!("nb{n}");
        let id = host
            .admit(&mut registry, tunnel(&notebook), n, 100 + n)
            .unwrap();
        registry
            .apply(&notebook, id.as_str(), SetupEvent::Cancel, 200)
            .unwrap();
        while host.answer(&mut registry, &id, 201) {}
        assert!(registry.get(&notebook, id.as_str()).unwrap().is_settled());
        ids.push(id);
    }
    assert_eq!(registry.len(), 16);
    let newest = host.admit(&mut registry, tunnel("nb16"), 16, 300).unwrap();
    assert_eq!(registry.len(), 16);
    assert!(
        registry.get("nb0", ids[0].as_str()).is_err(),
        "the oldest went"
    );
    assert!(registry.get("nb1", ids[1].as_str()).is_ok());

    // Sixteen unsettled setups: nothing can be evicted, and nothing is admitted.
    let mut full = SetupRegistry::default();
    let mut host = Host::default();
    for n in 0..16u64 {
        host.admit(&mut full, tunnel(&format!("nb{n}")), n, 100)
            .unwrap();
    }
    assert_eq!(
        host.admit(&mut full, tunnel("late"), 99, 101),
        Err(SetupError::RegistryFull { max: 16 })
    );
    assert_eq!(full.len(), 16);
    let _ = newest;
}

#[test]
fn ticks_reach_every_unsettled_setup() {
    let mut registry = SetupRegistry::default();
    let mut host = Host::default();
    let request = |notebook: &str, route| SetupRequest {
        notebook: notebook.to_owned(),
        route,
    };
    let sessions = Route::SessionsFile {
        session: SessionName::parse("cpu").unwrap(),
    };
    let reuse = Route::Picker {
        reuse: Some(ServerAlias::parse("m0123abcd").unwrap()),
    };
    host.admit(&mut registry, request("a", sessions), 1, 0)
        .unwrap();
    host.admit(&mut registry, request("b", reuse), 2, 0)
        .unwrap();
    // Nothing answers: both first commands time out after 60 s, in one tick.
    host.tick(&mut registry, 60_000);
    assert!(registry.setups().iter().all(Setup::is_terminal));
    assert!(
        registry
            .setups()
            .iter()
            .all(|setup| setup.receipt().error.unwrap().code == "command_timed_out")
    );
}

#[test]
fn wait_budgets_are_bounded() {
    assert_eq!(wait_budget(None, DEFAULT_START_WAIT_MS), Ok(1_000));
    assert_eq!(wait_budget(None, DEFAULT_POLL_WAIT_MS), Ok(0));
    assert_eq!(wait_budget(Some(0), 1_000), Ok(0));
    assert_eq!(wait_budget(Some(60_000), 0), Ok(60_000));
    assert_eq!(
        wait_budget(Some(60_001), 0),
        Err(SetupError::WaitOutOfRange { value: 60_001 })
    );
}

/// The registry against a naive model: a list of (id, notebook) in admission order. The model
/// asks the real setups only whether they are settled, and decides admission and eviction by
/// the documented rules with linear scans.
#[derive(Clone, Debug)]
enum Op {
    Admit {
        notebook: usize,
        random: u64,
    },
    /// Answer one owed command of the k-th retained setup.
    Answer {
        k: usize,
    },
    Cancel {
        k: usize,
    },
    Tick {
        ms: u64,
    },
    Guard {
        notebook: usize,
    },
}

const NOTEBOOKS: usize = 20;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..NOTEBOOKS, 0..4u64).prop_map(|(notebook, random)| Op::Admit { notebook, random }),
        8 => (0..32usize).prop_map(|k| Op::Answer { k }),
        2 => (0..32usize).prop_map(|k| Op::Cancel { k }),
        2 => prop_oneof![Just(0u64), Just(1_000), Just(61_000), Just(300_000)]
            .prop_map(|ms| Op::Tick { ms }),
        2 => (0..NOTEBOOKS).prop_map(|notebook| Op::Guard { notebook }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_registry_follows_its_model(ops in proptest::collection::vec(op(), 0..120)) {
        let mut registry = SetupRegistry::default();
        let mut host = Host::default();
        let mut model: Vec<(SetupId, String)> = Vec::new();
        let mut now = 1_000u64;
        let settled = |registry: &SetupRegistry, id: &SetupId| {
            registry.setups().iter().find(|setup| setup.id() == id).unwrap().is_settled()
        };
        for op in ops {
            match op {
                Op::Admit { notebook, random } => {
                    let notebook = format!("nb{notebook}");
                    let blocked = model
                        .iter()
                        .find(|(id, owner)| *owner == notebook && !settled(&registry, id))
                        .map(|(id, _)| id.clone());
                    let evict = model.iter().position(|(id, _)| settled(&registry, id));
                    let result = host.admit(&mut registry, tunnel(&notebook), random, now);
                    match (blocked, result) {
                        (Some(blocking), Err(error)) => prop_assert_eq!(
                            error,
                            SetupError::SetupActive { setup_id: blocking, operation: GuardedOperation::Setup }
                        ),
                        (None, Err(error)) => {
                            prop_assert_eq!(model.len(), 16);
                            prop_assert!(evict.is_none());
                            prop_assert_eq!(error, SetupError::RegistryFull { max: 16 });
                        }
                        (None, Ok(id)) => {
                            if model.len() == 16 {
                                let evict = evict.expect("a settled setup to evict");
                                model.remove(evict);
                            }
                            model.push((id, notebook));
                        }
                        (Some(_), Ok(_)) => prop_assert!(false, "admitted a second unsettled setup"),
                    }
                }
                Op::Answer { k } => {
                    if !model.is_empty() {
                        let id = model[k % model.len()].0.clone();
                        now += 100;
                        host.answer(&mut registry, &id, now);
                    }
                }
                Op::Cancel { k } => {
                    if !model.is_empty() {
                        let (id, notebook) = model[k % model.len()].clone();
                        let actions = registry.apply(&notebook, id.as_str(), SetupEvent::Cancel, now).unwrap();
                        host.take(&id, actions);
                    }
                }
                Op::Tick { ms } => {
                    now += ms;
                    host.tick(&mut registry, now);
                }
                Op::Guard { notebook } => {
                    let notebook = format!("nb{notebook}");
                    let blocking = model
                        .iter()
                        .find(|(id, owner)| *owner == notebook && !settled(&registry, id))
                        .map(|(id, _)| id.clone());
                    let guard = registry.guard(&notebook, GuardedOperation::Transfer);
                    match blocking {
                        Some(setup_id) => prop_assert_eq!(
                            guard,
                            Err(SetupError::SetupActive { setup_id, operation: GuardedOperation::Transfer })
                        ),
                        None => prop_assert_eq!(guard, Ok(())),
                    }
                }
            }
            // The invariants: at most sixteen, at most one unsettled per notebook, and the same
            // records in the same order as the model.
            prop_assert!(registry.len() <= 16);
            let ids: Vec<&SetupId> = registry.setups().iter().map(Setup::id).collect();
            let expected: Vec<&SetupId> = model.iter().map(|(id, _)| id).collect();
            prop_assert_eq!(ids, expected);
            let mut unsettled: Vec<&str> = registry
                .setups()
                .iter()
                .filter(|setup| !setup.is_settled())
                .map(Setup::notebook)
                .collect();
            let count = unsettled.len();
            unsettled.sort_unstable();
            unsettled.dedup();
            prop_assert_eq!(unsettled.len(), count, "two unsettled setups on one notebook");
        }
    }
}
