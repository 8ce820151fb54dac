//! A self-checking driver for fuzzing and property tests: arbitrary bytes become a route, a
//! simulated world and a sequence of events (cooperative answers, random answers, client
//! commands, ticks), and every step is checked against the invariants the setup promises.

use std::collections::{BTreeMap, BTreeSet};

use notebook_model::fuzz::ByteSource;

use crate::names::{FileServiceRoot, ServerAlias, SessionName, SetupId};
use crate::picker::{PickerLabels, PickerRow, PickerView, UserPrompt};
use crate::probe::{CheckCommandKind, CheckReply, CheckStep, KernelFailure};
use crate::receipt::RetainReason;
use crate::servers::{Availability, ServerRow};
use crate::setup::{
    AssignRefusal, CellRun, Command, CommandId, CommandKind, Failure, Reply, Route, Setup,
    SetupAction, SetupConfig, SetupEntropy, SetupEvent, SetupRequest,
};
use crate::sim::SimHost;
use crate::wire::SetupStatus;

/// Decodes `data` into a setup and an event sequence, applies them, then ticks past the deadline
/// and answers everything outstanding, panicking if an invariant breaks. Any input is valid;
/// this is the body of the `colab_setup` fuzz target.
pub fn check_setup_sequence(data: &[u8]) {
    run_sequence(data);
}

/// The checked run behind [`check_setup_sequence`], returning its checker for inspection.
fn run_sequence(data: &[u8]) -> SetupChecker {
    let mut bytes = ByteSource::new(data);
    let (route, sim) = decode_world(&mut bytes);
    let mut checker = SetupChecker::new(route, sim, 1_000);
    let mut steps = 0;
    while !bytes.is_empty() && steps < 4_000 {
        steps += 1;
        let choice = bytes.next();
        match choice % 10 {
            0..=3 => {
                let pick = usize::from(bytes.next());
                // Mostly cooperative answers, so that random inputs also walk whole paths.
                if !bytes.next().is_multiple_of(16) {
                    checker.answer_one(pick);
                } else {
                    let reply = decode_reply(&mut bytes);
                    checker.answer_one_with(pick, reply);
                }
            }
            4 | 5 => checker.progress(bytes.next()),
            6 => {
                let byte = bytes.next();
                // Small steps, and now and then a jump past command deadlines.
                let advance = if byte >= 240 {
                    u64::from(byte) * 1_000
                } else {
                    u64::from(byte % 64) * 250
                };
                checker.tick(advance);
            }
            7 => {
                let token = [bytes.next(), bytes.next(), bytes.next(), bytes.next()];
                checker.client(SetupEvent::ListChoices { token });
            }
            8 => {
                let pick = bytes.next();
                let choice_id = checker.choice_id(pick);
                checker.client(SetupEvent::SelectChoice { choice_id });
            }
            _ => {
                if bytes.next().is_multiple_of(8) {
                    checker.client(SetupEvent::Cancel);
                } else {
                    checker.tick(0);
                }
            }
        }
    }
    checker.finish();
    checker
}

/// The decoder of picker labels this check adds to the shared fuzz byte source.
pub(crate) trait LabelSource {
    /// One of the labels a picker row may carry, chosen by the next byte.
    fn label(&mut self) -> String;
}

impl LabelSource for ByteSource<'_> {
    fn label(&mut self) -> String {
        self.pick_text(&[
            "Colab",
            "New Colab Server",
            "CPU",
            "Select Another Kernel…",
            "m0123abcd",
            "Python 3 (ipykernel)",
            "",
            "Colab CPU",
        ])
    }
}

const REUSED: &str = "m0123abcd";

fn decode_world(bytes: &mut ByteSource<'_>) -> (Route, SimHost) {
    let alias = || ServerAlias::parse(REUSED).expect("a valid alias");
    let route = match bytes.next() % 7 {
        0 => Route::SessionsFile {
            session: SessionName::parse("cpu-session").expect("a valid name"),
        },
        1 => Route::RuntimeUrl,
        2 => Route::Tunnel { reuse: None },
        3 => Route::Tunnel {
            reuse: Some(alias()),
        },
        4 => Route::Picker { reuse: None },
        5 => Route::Picker {
            reuse: Some(alias()),
        },
        _ => Route::MountServer { alias: alias() },
    };
    let mut sim = SimHost {
        direct_source: bytes.flag(),
        handoff: bytes.flag(),
        shape_prompt: bytes.flag(),
        version_prompt: bytes.flag(),
        sign_in_once: bytes.flag(),
        colab: !bytes.next().is_multiple_of(4),
        ..SimHost::default()
    };
    // Existing servers, sessions and assignments, sometimes with the reused name, sometimes
    // twice, sometimes disabled.
    let existing = bytes.next();
    if existing & 1 != 0 {
        sim.picker_servers.push(REUSED.into());
        sim.assignments
            .insert(REUSED.into(), "existing-endpoint".into());
    }
    if existing & 2 != 0 {
        sim.picker_servers.push(REUSED.into());
    }
    if existing & 4 != 0 {
        sim.picker_servers.push("m99999999".into());
    }
    let availability = match existing >> 3 & 3 {
        0 => Availability::Disabled,
        1 => Availability::CredentialsExpired,
        _ => Availability::Available,
    };
    if existing & 32 != 0 {
        sim.sessions.push(ServerRow {
            name: "cpu-session".into(),
            availability,
            endpoint: Some("session-endpoint".into()),
        });
    }
    if existing & 64 != 0 {
        sim.kernel_labels.push("Python 3 (ipykernel)".into());
    }
    if existing & 128 != 0 {
        sim.mounted.insert(REUSED.into());
    }
    (route, sim)
}

fn decode_failure(bytes: &mut ByteSource<'_>) -> Failure {
    *bytes.pick(&[
        Failure::NotPerformed,
        Failure::Unconfirmed,
        Failure::AuthenticationRequired,
        Failure::Unavailable,
    ])
}

fn decode_view(bytes: &mut ByteSource<'_>) -> PickerView {
    match bytes.next() % 5 {
        0 => PickerView::Closed,
        1 => PickerView::Prompt(*bytes.pick(&[
            UserPrompt::SignIn,
            UserPrompt::Consent,
            UserPrompt::Other,
        ])),
        2 => PickerView::InputBox {
            title: bytes.label(),
            prompt: bytes.label(),
            value: bytes.label(),
        },
        _ => {
            let count = bytes.next() % 4;
            PickerView::QuickPick {
                title: bytes.label(),
                rows: (0..count)
                    .map(|_| PickerRow {
                        label: bytes.label(),
                        enabled: !bytes.next().is_multiple_of(5),
                    })
                    .collect(),
                busy: bytes.next().is_multiple_of(5),
            }
        }
    }
}

fn decode_check_reply(bytes: &mut ByteSource<'_>) -> CheckReply {
    match bytes.next() % 8 {
        0 => CheckReply::KernelOutput {
            stdout: bytes.label(),
        },
        1 => CheckReply::KernelFailed(
            bytes
                .pick(&[
                    KernelFailure::NotSent,
                    KernelFailure::Lost,
                    KernelFailure::Error {
                        ename: "KeyboardInterrupt".into(),
                    },
                ])
                .clone(),
        ),
        2 => CheckReply::BuildInfo {
            release_tag: Some(bytes.label()),
        },
        3 => CheckReply::FileContent(bytes.label().into_bytes()),
        4 => CheckReply::FileExists,
        5 => CheckReply::FileMissing,
        _ => CheckReply::ServiceUnavailable,
    }
}

/// Any reply, plausible or not for the command it answers.
fn decode_reply(bytes: &mut ByteSource<'_>) -> Reply {
    match bytes.next() % 20 {
        0 => Reply::Done,
        1 | 2 => Reply::Failed(decode_failure(bytes)),
        3 => Reply::Servers(vec![ServerRow::available(bytes.label())]),
        4 => Reply::AssignmentFound {
            endpoint: "found-endpoint".into(),
        },
        5 if bytes.flag() => Reply::NotMounted,
        5 => Reply::NoAssignment,
        6 => Reply::AssignmentCreated {
            endpoint: format!("random-endpoint-{}", bytes.next()),
        },
        7 => Reply::AssignmentRefused(*bytes.pick(&[
            AssignRefusal::TooManyAssignments,
            AssignRefusal::AcceleratorUnavailable,
            AssignRefusal::QuotaDenied,
        ])),
        8 | 9 => Reply::Picker(decode_view(bytes)),
        10 => Reply::RowChanged,
        11 => Reply::AliasReadBack {
            value: bytes.label(),
        },
        12 => Reply::KernelChoices {
            labels: (0..bytes.next() % 3).map(|_| bytes.label()).collect(),
            complete: !bytes.next().is_multiple_of(4),
        },
        13 => Reply::KernelSelected {
            confirmed: *bytes.pick(&[None, Some(false), Some(true)]),
        },
        14 => Reply::ListingChanged,
        15 => Reply::CellInserted {
            cell_id: format!("random-cell-{}", bytes.next()),
        },
        16 => Reply::CellRan(if bytes.flag() {
            CellRun::Completed
        } else {
            CellRun::Failed
        }),
        17 => {
            if bytes.flag() {
                Reply::CellRemoved
            } else {
                Reply::CellRetained(RetainReason::Edited)
            }
        }
        18 => Reply::FileService {
            root: FileServiceRoot::ColabFs {
                authority: "random".into(),
            },
        },
        _ => Reply::Check(decode_check_reply(bytes)),
    }
}

/// Drives one setup and checks every step.
pub(crate) struct SetupChecker {
    pub(crate) setup: Setup,
    pub(crate) sim: SimHost,
    pub(crate) now_ms: u64,
    /// Commands dispatched and not answered, as the host sees them.
    pub(crate) pending: BTreeMap<CommandId, Command>,
    /// Every command ever dispatched, in order.
    pub(crate) dispatched: Vec<Command>,
    /// Endpoints the host said this setup's assignment requests created.
    pub(crate) created: BTreeSet<String>,
    /// Endpoints reported as already existing.
    pub(crate) found: BTreeSet<String>,
    /// Cells the host said were inserted.
    pub(crate) inserted: BTreeSet<String>,
    /// Cells whose removal was answered with "edited".
    pub(crate) edited: BTreeSet<String>,
    /// The labels of the newest listing the setup returned, and its ids.
    listing: Vec<(String, String)>,
    /// Every provider step the receipts showed, in order, without repeats.
    pub(crate) provider_steps: Vec<crate::wire::ProviderStep>,
    finished: Vec<SetupStatus>,
    terminal_status: Option<SetupStatus>,
}

impl SetupChecker {
    pub(crate) fn new(route: Route, sim: SimHost, now_ms: u64) -> Self {
        let request = SetupRequest {
            notebook: "nb.ipynb".into(),
            route,
        };
        let entropy = SetupEntropy {
            id: 7,
            alias: [0xc0, 0x1a, 0xb0, 0x01],
            nonce: [0x5e; 16],
        };
        let setup = Setup::new(
            SetupId::from_parts(now_ms, 7),
            request,
            entropy,
            SetupConfig::default(),
            now_ms,
        );
        let mut checker = SetupChecker {
            setup,
            sim,
            now_ms,
            pending: BTreeMap::new(),
            dispatched: Vec::new(),
            created: BTreeSet::new(),
            found: BTreeSet::new(),
            inserted: BTreeSet::new(),
            edited: BTreeSet::new(),
            listing: Vec::new(),
            provider_steps: Vec::new(),
            finished: Vec::new(),
            terminal_status: None,
        };
        let before = checker.setup.clone();
        let actions = checker.setup.start(now_ms);
        checker.observe(&before, &actions);
        checker
    }

    /// A cooperative answer to the `pick`-th outstanding command.
    pub(crate) fn answer_one(&mut self, pick: usize) {
        let Some(command) = self.nth_pending(pick) else {
            return;
        };
        let reply = self.sim.answer(&command);
        self.reply(command.id, reply);
    }

    pub(crate) fn answer_one_with(&mut self, pick: usize, reply: Reply) {
        if let Some(command) = self.nth_pending(pick) {
            self.reply(command.id, reply);
        }
    }

    fn nth_pending(&self, pick: usize) -> Option<Command> {
        if self.pending.is_empty() {
            return None;
        }
        self.pending
            .values()
            .nth(pick % self.pending.len())
            .cloned()
    }

    /// Answers the oldest outstanding command cooperatively; false if none is outstanding.
    pub(crate) fn answer_oldest(&mut self) -> bool {
        match self.pending.values().next().cloned() {
            Some(command) => {
                let reply = self.sim.answer(&command);
                self.reply(command.id, reply);
                true
            }
            None => false,
        }
    }

    pub(crate) fn reply(&mut self, command: CommandId, reply: Reply) {
        let Some(sent) = self.pending.remove(&command) else {
            return;
        };
        match (&sent.kind, &reply) {
            (CommandKind::CreateAssignment { .. }, Reply::AssignmentCreated { endpoint }) => {
                self.created.insert(endpoint.clone());
            }
            (
                CommandKind::CreateAssignment { .. } | CommandKind::LookupAssignment { .. },
                Reply::AssignmentFound { endpoint },
            ) => {
                self.found.insert(endpoint.clone());
            }
            (CommandKind::InsertTemporaryCell { .. }, Reply::CellInserted { cell_id }) => {
                self.inserted.insert(cell_id.clone());
            }
            (
                CommandKind::RemoveTemporaryCell { cell_id, .. },
                Reply::CellRetained(RetainReason::Edited),
            ) => {
                self.edited.insert(cell_id.clone());
            }
            _ => {}
        }
        self.step(SetupEvent::Reply { command, reply });
    }

    pub(crate) fn tick(&mut self, advance_ms: u64) {
        self.now_ms += advance_ms;
        self.step(SetupEvent::Tick);
    }

    /// A client command; refusals are fine, but must change nothing.
    pub(crate) fn client(&mut self, event: SetupEvent) -> bool {
        let before = self.setup.clone();
        let receipt_before = serde_json::to_value(before.receipt()).expect("serializable");
        match self.setup.apply(event.clone(), self.now_ms) {
            Ok(actions) => {
                if let SetupEvent::ListChoices { .. } = event {
                    self.listing.clear();
                }
                self.observe(&before, &actions);
                true
            }
            Err(_) => {
                let after = serde_json::to_value(self.setup.receipt()).expect("serializable");
                assert_eq!(
                    after, receipt_before,
                    "a refused {event:?} changed the setup"
                );
                assert_eq!(self.setup.version(), before.version());
                false
            }
        }
    }

    /// The event that moves the setup along its normal path: answer the oldest command, list
    /// or select when a selection is awaited, or let time pass for a scheduled retry.
    pub(crate) fn progress(&mut self, choice: u8) {
        if self.answer_oldest() {
            return;
        }
        if self.setup.status() == SetupStatus::AwaitingKernelSelection {
            if self.listing.is_empty() {
                self.client(SetupEvent::ListChoices { token: [choice; 4] });
            } else {
                let pick = usize::from(choice) % self.listing.len();
                let choice_id = self.listing[pick].1.clone();
                self.client(SetupEvent::SelectChoice { choice_id });
            }
            return;
        }
        self.tick(500);
    }

    /// An id from the latest listing, or a stale or made-up one.
    pub(crate) fn choice_id(&self, pick: u8) -> String {
        match (pick % 5, self.listing.is_empty()) {
            (0, _) => "kc1-00000000-0".into(),
            (_, true) => "nonsense".into(),
            _ => self.listing[usize::from(pick) % self.listing.len()]
                .1
                .clone(),
        }
    }

    pub(crate) fn step(&mut self, event: SetupEvent) {
        let before = self.setup.clone();
        let actions = self
            .setup
            .apply(event.clone(), self.now_ms)
            .unwrap_or_else(|error| panic!("{event:?} was refused: {error}"));
        self.observe(&before, &actions);
    }

    /// Checks one step's actions and the setup after it.
    fn observe(&mut self, before: &Setup, actions: &[SetupAction]) {
        let setup = &self.setup;
        let receipt = setup.receipt();
        let receipt_json = serde_json::to_value(&receipt).expect("receipts serialize");
        let receipt_before = serde_json::to_value(before.receipt()).expect("receipts serialize");

        // The version never goes back and moves with every receipt change.
        assert!(setup.version() >= before.version());
        if receipt_json != receipt_before {
            assert!(
                setup.version() > before.version(),
                "receipt changed silently"
            );
        }

        // Terminal is final.
        if let Some(status) = self.terminal_status {
            assert_eq!(setup.status(), status, "a terminal status changed");
        }
        if setup.is_terminal() {
            self.terminal_status = Some(setup.status());
            assert!(receipt.finished_at_ms.is_some());
        }
        // The deadline holds: nothing is alive past it.
        if self.now_ms >= setup.deadline_at_ms() {
            assert!(setup.is_terminal(), "alive past the deadline");
        }
        assert_eq!(receipt.ready, receipt.status == SetupStatus::Ready);
        if receipt.ready {
            let verification = receipt.verification.as_ref().expect("ready needs a check");
            assert!(verification.verified, "ready without a verified check");
            assert!(!receipt.server_may_remain);
            assert!(receipt.error.is_none());
        }
        if receipt.status == SetupStatus::Failed {
            assert!(receipt.failed_stage.is_some() && receipt.error.is_some());
        }
        assert_eq!(
            receipt.cleanup_pending,
            setup.is_terminal() && setup.outstanding().next().is_some()
        );
        if let Some(alias) = &receipt.server_alias {
            assert!(ServerAlias::parse(alias.as_str()).is_ok());
        }

        if let Some(step) = receipt.provider_step
            && self.provider_steps.last() != Some(&step)
        {
            self.provider_steps.push(step);
        }

        let reuse = matches!(
            setup.route(),
            Route::Tunnel { reuse: Some(_) } | Route::Picker { reuse: Some(_) }
        );
        let creates = setup.route().creates_server();
        let labels = PickerLabels::default();
        for action in actions {
            match action {
                SetupAction::Finished(status) => {
                    assert!(status.is_terminal());
                    assert_eq!(*status, setup.status());
                    self.finished.push(*status);
                }
                SetupAction::Perform(command) => {
                    assert!(
                        !self.dispatched.iter().any(|old| old.id == command.id),
                        "command id reused"
                    );
                    if before.is_terminal() {
                        let cleanup = matches!(
                            &command.kind,
                            CommandKind::RemoveTemporaryCell { .. }
                                | CommandKind::ReleaseRuntime { .. }
                                | CommandKind::DismissPicker
                                | CommandKind::Check {
                                    step: CheckStep::RemoveProbe | CheckStep::ConfirmAbsent,
                                    ..
                                }
                        );
                        assert!(cleanup, "a terminal setup dispatched {:?}", command.kind);
                    }
                    match &command.kind {
                        CommandKind::CreateAssignment { .. } => assert!(creates),
                        CommandKind::ChooseRow { label, step } => {
                            if label == labels.new_server || label == labels.cpu {
                                assert!(creates, "reuse created a server");
                            }
                            if reuse && *step == crate::wire::ProviderStep::ServerSelection {
                                assert_eq!(label, REUSED, "reuse chose another server");
                            }
                        }
                        CommandKind::TypeAlias { alias } => {
                            assert!(creates);
                            assert_eq!(Some(alias), setup.alias());
                        }
                        CommandKind::SubmitInput => assert!(creates),
                        CommandKind::ReleaseRuntime { endpoint } => {
                            assert!(self.created.contains(endpoint), "released {endpoint}");
                            assert!(
                                !self.found.contains(endpoint) || self.created.contains(endpoint)
                            );
                            let earlier = self.dispatched.iter().any(|old| {
                                matches!(&old.kind, CommandKind::ReleaseRuntime { endpoint: e } if e == endpoint)
                            });
                            assert!(!earlier, "released {endpoint} twice");
                        }
                        CommandKind::RemoveTemporaryCell { cell_id, .. } => {
                            assert!(self.inserted.contains(cell_id), "removed {cell_id}");
                        }
                        CommandKind::SelectKernelChoice { label, listing, .. }
                        | CommandKind::StartKernel { label, listing } => {
                            let latest: Vec<String> = self
                                .listing
                                .iter()
                                .map(|(label, _)| label.clone())
                                .collect();
                            assert_eq!(listing, &latest, "selected from an old listing");
                            assert!(latest.contains(label));
                        }
                        CommandKind::Check {
                            command: CheckCommandKind::ExecuteKernel { code },
                            ..
                        } => {
                            assert!(code.contains("/content/jupyter-mcp-check-"));
                        }
                        _ => {}
                    }
                    self.pending.insert(command.id, command.clone());
                    self.dispatched.push(command.clone());
                }
            }
        }
        assert!(self.finished.len() <= 1, "finished twice");
        assert_eq!(self.finished.len() == 1, setup.is_terminal());
        // The host's view of outstanding commands is the setup's.
        let ours: BTreeSet<CommandId> = self.pending.keys().copied().collect();
        let theirs: BTreeSet<CommandId> = setup.outstanding().map(|(id, _)| id).collect();
        assert_eq!(ours, theirs, "outstanding commands disagree");
        if let Ok(listing) = setup.choice_listing() {
            self.listing = listing
                .choices
                .iter()
                .map(|choice| (choice.label.clone(), choice.kernel_choice_id.to_string()))
                .collect();
        }
    }

    /// Ticks past the deadline, answers everything cooperatively until the setup settles, and
    /// checks what it undid.
    /// The runtimes the setup asked to release, in the order asked.
    pub(crate) fn released_endpoints(&self) -> Vec<String> {
        self.dispatched
            .iter()
            .filter_map(|command| match &command.kind {
                CommandKind::ReleaseRuntime { endpoint } => Some(endpoint.clone()),
                _ => None,
            })
            .collect()
    }

    pub(crate) fn finish(&mut self) {
        let deadline = self.setup.deadline_at_ms();
        if self.now_ms < deadline {
            self.now_ms = deadline;
        }
        self.tick(1);
        assert!(self.setup.is_terminal(), "not terminal after the deadline");
        for _ in 0..64 {
            if !self.answer_oldest() {
                break;
            }
        }
        assert!(self.setup.is_settled(), "unsettled after every answer");
        let receipt = self.setup.receipt();
        if receipt.status != SetupStatus::Ready {
            // Every runtime this setup created was asked to be released, once, and nothing else.
            let released: BTreeSet<String> = self.released_endpoints().into_iter().collect();
            assert_eq!(released, self.created, "release differs from creation");
            // Every inserted cell was asked to be removed, unless it was edited.
            let removed: BTreeSet<String> = self
                .dispatched
                .iter()
                .filter_map(|command| match &command.kind {
                    CommandKind::RemoveTemporaryCell { cell_id, .. } => Some(cell_id.clone()),
                    _ => None,
                })
                .collect();
            for cell in &self.inserted {
                assert!(
                    removed.contains(cell) || self.edited.contains(cell),
                    "cell {cell} left behind"
                );
            }
            if let Some(check) = self.setup.check() {
                assert!(!check.verified());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_short_inputs_do_not_panic() {
        let short = [vec![], vec![0], vec![255; 9]];
        let one_per_route = (0..7).map(|route| vec![route, 1, 0, 1, 0, 0, 1, 0xff]);
        for data in short.into_iter().chain(one_per_route) {
            check_setup_sequence(&data);
        }
    }

    /// Random inputs reach every ending on every route, so the invariants are exercised on
    /// real paths and not only on early failures.
    #[test]
    fn random_inputs_reach_every_outcome() {
        use std::collections::BTreeSet;
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut outcomes = BTreeSet::new();
        for case in 0..3_000u32 {
            let length = 50 + (case % 400) as usize;
            let data: Vec<u8> = (0..length)
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    // Mostly cooperative answers: bias the event byte towards them.
                    (state >> 33) as u8
                })
                .collect();
            let checker = run_sequence(&data);
            outcomes.insert((checker.setup.route().kind(), checker.setup.status()));
        }
        for route in crate::receipt::RouteKind::ALL {
            for status in [SetupStatus::Failed, SetupStatus::Cancelled] {
                assert!(
                    outcomes.contains(&(*route, status)),
                    "{route} never {status}"
                );
            }
        }
        let ready: Vec<_> = outcomes
            .iter()
            .filter(|(_, status)| *status == SetupStatus::Ready)
            .map(|(route, _)| route.as_str())
            .collect();
        assert_eq!(
            ready.len(),
            crate::receipt::RouteKind::ALL.len(),
            "only {ready:?} ever became ready"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1500))]

        /// Random worlds and event sequences (most answers cooperative, some arbitrary), then
        /// ticks past the deadline: every step keeps the invariants, the setup ends terminal,
        /// settles once everything is answered, and released and removed exactly what it
        /// created.
        #[test]
        fn random_event_sequences_keep_the_invariants(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)
        ) {
            check_setup_sequence(&data);
        }
    }
}
