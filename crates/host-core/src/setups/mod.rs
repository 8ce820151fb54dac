//! Colab setups: `configure_kernel` with `runtime: "colab"`, `get_kernel_setup`,
//! `list_setup_kernels`, `select_setup_kernel` and `cancel_kernel_setup`, written once against
//! `colab-setup`'s [`SetupRegistry`].
//!
//! The registry decides; this module performs. Every [`SetupAction::Perform`] becomes one task
//! that answers its command exactly once (the kernel steps here, on the notebook's kernels; the
//! rest through the host's [`ColabRuntimes`]), and a ticker drives the deadlines about every
//! 250 ms while any setup is unsettled. While a notebook's setup is unsettled, the tools that
//! would run, transfer, edit or change its kernel are refused ([`Tools::setup_guard`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use colab_setup::{
    CheckCommandKind, CheckReply, Command, CommandKind, Failure, GuardedOperation, KernelFailure,
    Reply, ServerAlias, SetupAction, SetupEntropy, SetupError, SetupEvent, SetupReceipt,
    SetupRequest, SetupStatus,
};
use mcp_contract::params::{
    ConfigureKernelParams, KernelSetupParams, MountColabServerParams, SelectSetupKernelParams,
    WaitMs,
};
use mcp_contract::{ErrorCode, ToolError, ToolName};
use serde_json::Value;

use crate::colab::SharedColab;
use crate::host::{NotebookHost, NotebookLocation};
use crate::kernel::{ExecuteOptions, KernelLookup, KernelPreference, collect};
use crate::tools::{ImageContent, ToolResult, Tools, error};

pub(crate) mod state;

/// How often unsettled setups are ticked.
const TICK: Duration = Duration::from_millis(250);
/// How long `list_setup_kernels` waits for the runtime's kernel choices.
const LISTING_WAIT_MS: u64 = 30_000;

/// Milliseconds since the epoch, advancing with tokio's clock (so paused-time tests reach
/// deadlines without waiting), anchored to the wall clock once.
fn now_ms() -> u64 {
    static ORIGIN: std::sync::OnceLock<(u64, tokio::time::Instant)> = std::sync::OnceLock::new();
    let (wall_ms, instant) = *ORIGIN.get_or_init(|| {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as u64);
        (wall, tokio::time::Instant::now())
    });
    wall_ms.saturating_add(instant.elapsed().as_millis() as u64)
}

fn entropy() -> SetupEntropy {
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    let more = *uuid::Uuid::new_v4().as_bytes();
    let mut id = [0u8; 8];
    id.copy_from_slice(&bytes[..8]);
    let mut alias = [0u8; 4];
    alias.copy_from_slice(&bytes[8..12]);
    SetupEntropy {
        id: u64::from_le_bytes(id),
        alias,
        nonce: more,
    }
}

fn listing_token() -> [u8; 4] {
    let bytes = *uuid::Uuid::new_v4().as_bytes();
    [bytes[0], bytes[1], bytes[2], bytes[3]]
}

/// A setup error as a tool error, its `colab-setup` code in `details.colabCode`.
pub(crate) fn setup_tool_error(setup_error: &SetupError) -> ToolError {
    let body = colab_setup::ErrorBody::from(setup_error);
    let code = match setup_error {
        SetupError::SetupActive { .. }
        | SetupError::ListingPending
        | SetupError::SelectionInProgress => ErrorCode::CommandPending,
        SetupError::RegistryFull { .. } => ErrorCode::RegistryFull,
        _ => ErrorCode::InvalidArgument,
    };
    ToolError {
        code,
        message: body.message,
        details: Some(serde_json::json!({"colabCode": body.code})),
    }
}

fn wait_ms(value: Option<WaitMs>, default: u64) -> Result<u64, ToolError> {
    let wait = match value.map(WaitMs::whole) {
        None => None,
        Some(Some(ms)) => Some(ms),
        Some(None) => {
            return Err(error(
                ErrorCode::InvalidArgument,
                "waitMs must be a whole number of milliseconds from 0 to 60000",
            ));
        }
    };
    colab_setup::wait_budget(wait, default).map_err(|failure| setup_tool_error(&failure))
}

fn receipt_value(receipt: &SetupReceipt) -> Result<(Value, Vec<ImageContent>), ToolError> {
    Ok((
        serde_json::to_value(receipt).expect("a receipt serialises"),
        Vec::new(),
    ))
}

/// The tool a guarded call is, as the registry names it.
pub(crate) fn guarded_operation(tool: ToolName) -> Option<GuardedOperation> {
    Some(match tool {
        ToolName::RunCells => GuardedOperation::Run,
        ToolName::UploadFile | ToolName::DownloadFile => GuardedOperation::Transfer,
        ToolName::EditCells
        | ToolName::MoveCells
        | ToolName::ClearCellOutputs
        | ToolName::UndoLast => GuardedOperation::NotebookMutation,
        ToolName::SelectKernel
        | ToolName::RestartKernels
        | ToolName::InterruptKernels
        | ToolName::ConfigureKernel => GuardedOperation::KernelChange,
        ToolName::MountColabServer => GuardedOperation::Setup,
        _ => return None,
    })
}

impl<H: NotebookHost> Tools<H> {
    fn colab_for_setup(&self) -> Result<SharedColab, ToolError> {
        self.colab.clone().ok_or_else(|| {
            error(
                ErrorCode::NotSupported,
                "runtime \"colab\" needs a Colab source, and none is configured on this host: start jupyter-mcp with --colab-session NAME (a google-colab-cli session) or --colab-runtime-url URL --colab-token-file FILE",
            )
        })
    }

    /// The notebook a call about one of its setups names, on a host with a Colab source.
    async fn setup_notebook(&self, notebook_ref: &str) -> Result<NotebookLocation, ToolError> {
        self.colab_for_setup()?;
        self.resolve(notebook_ref).await
    }

    /// Refuses `operation` on the notebook `reference` names while a setup of it is unsettled.
    /// Calls without a notebook, or naming one that cannot be resolved, pass (the tool reports
    /// its own error).
    pub(crate) async fn setup_guard(
        &self,
        tool: ToolName,
        arguments: Option<&serde_json::Map<String, Value>>,
    ) -> Result<(), ToolError> {
        let Some(operation) = guarded_operation(tool) else {
            return Ok(());
        };
        if self.setups.registry().is_empty() {
            return Ok(());
        }
        if tool == ToolName::ConfigureKernel
            && arguments.is_some_and(|arguments| arguments.get("runtime").is_some())
        {
            // The registry's own admission decides (`setup_active`).
            return Ok(());
        }
        let references: Vec<String> = match arguments {
            Some(arguments) => {
                match (arguments.get("notebookRef"), arguments.get("notebookRefs")) {
                    (Some(Value::String(one)), _) => vec![one.clone()],
                    (_, Some(Value::Array(many))) => many
                        .iter()
                        .filter_map(|value| value.as_str().map(str::to_owned))
                        .collect(),
                    _ => Vec::new(),
                }
            }
            None => Vec::new(),
        };
        for reference in references {
            let Ok(location) = self.resolve(&reference).await else {
                continue;
            };
            let verdict = self.setups.registry().guard(&location.uri, operation);
            if let Err(blocked) = verdict {
                return Err(setup_tool_error(&blocked));
            }
        }
        Ok(())
    }

    /// `configure_kernel` with `runtime: "colab"`.
    pub(crate) async fn configure_colab(&self, params: ConfigureKernelParams) -> ToolResult {
        let colab = self.colab_for_setup()?;
        let wait = wait_ms(params.wait_ms, colab_setup::DEFAULT_START_WAIT_MS)?;
        let alias = match params.server_alias.as_deref() {
            Some(text) => {
                Some(ServerAlias::parse(text).map_err(|failure| setup_tool_error(&failure))?)
            }
            None => None,
        };
        let location = self.resolve(&params.notebook_ref).await?;
        let route = colab
            .setup_route(alias.as_ref())
            .map_err(|message| error(ErrorCode::InvalidArgument, message))?;
        self.admit_setup(location, route, wait).await
    }

    /// `mount_colab_server`: the file service of the server `serverAlias` names, attached to
    /// the notebook's active kernel and verified.
    pub(crate) async fn mount_colab_server(&self, params: MountColabServerParams) -> ToolResult {
        let colab = self.colab_for_setup()?;
        let wait = wait_ms(params.wait_ms, colab_setup::DEFAULT_START_WAIT_MS)?;
        let alias = ServerAlias::parse(&params.server_alias)
            .map_err(|failure| setup_tool_error(&failure))?;
        let location = self.resolve(&params.notebook_ref).await?;
        let route = colab
            .mount_route(&alias)
            .map_err(|message| error(ErrorCode::InvalidArgument, message))?;
        self.admit_setup(location, route, wait).await
    }

    async fn admit_setup(
        &self,
        location: NotebookLocation,
        route: colab_setup::Route,
        wait: u64,
    ) -> ToolResult {
        let request = SetupRequest {
            notebook: location.uri.clone(),
            route,
        };
        let admitted = {
            // A setup stops the notebook's kernel (or runs its proof on it), so it waits for
            // the notebook's run and for any execute request still in the kernel, as a run does.
            // The run registry stays locked until the setup is admitted, after which the setup
            // guard refuses new runs.
            let runs = self.runs.registry.lock().expect("registry lock");
            if let Some(run) = runs.active_run(&location.uri) {
                let mut refused = error(
                    ErrorCode::RunActive,
                    format!(
                        "run {} is active on this notebook, and a Colab setup would stop or use its kernel under it: wait for the run (get_execution with waitMs) or interrupt it (interrupt_kernels), then retry",
                        run.id().as_str()
                    ),
                );
                refused.details = Some(serde_json::json!({"activeExecutionId": run.id().as_str()}));
                return Err(refused);
            }
            if let Some(pending) = runs.pending_command(&location.uri) {
                let mut refused = error(
                    ErrorCode::CommandPending,
                    format!(
                        "an execute request of run {} is still pending in this notebook's kernel, and a Colab setup would stop or use the kernel under it: wait for it to settle (get_execution with waitMs) or interrupt it (interrupt_kernels), then retry",
                        pending.as_str()
                    ),
                );
                refused.details = Some(serde_json::json!({"pendingExecutionId": pending.as_str()}));
                return Err(refused);
            }
            self.setups
                .registry()
                .admit(request, entropy(), now_ms())
                .map_err(|refused| setup_tool_error(&refused))?
        };
        let setup_id = admitted.setup_id.to_string();
        self.setups
            .locations
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(setup_id.clone(), location.clone());
        self.drive(&setup_id, admitted.actions);
        self.ensure_ticking();
        self.wait_setup(&location, &setup_id, wait, settled_or_asking)
            .await
    }

    /// `get_kernel_setup`.
    pub(crate) async fn get_kernel_setup(&self, params: KernelSetupParams) -> ToolResult {
        let wait = wait_ms(params.wait_ms, colab_setup::DEFAULT_POLL_WAIT_MS)?;
        let location = self.setup_notebook(&params.notebook_ref).await?;
        let version = self.read_setup(&location, &params.setup_id, |setup| Ok(setup.version()))?;
        self.wait_setup(&location, &params.setup_id, wait, move |setup| {
            setup.version() != version
        })
        .await
    }

    /// `list_setup_kernels`: a fresh observation of the runtime's kernel choices.
    pub(crate) async fn list_setup_kernels(&self, params: KernelSetupParams) -> ToolResult {
        let location = self.setup_notebook(&params.notebook_ref).await?;
        self.advance_setup(
            &location,
            &params.setup_id,
            SetupEvent::ListChoices {
                token: listing_token(),
            },
        )?;
        self.wait_setup(&location, &params.setup_id, LISTING_WAIT_MS, |setup| {
            let receipt = setup.receipt();
            setup.is_terminal()
                || receipt.kernel_choices.is_some()
                || receipt.listing_problem.is_some()
        })
        .await
    }

    /// `select_setup_kernel`.
    pub(crate) async fn select_setup_kernel(&self, params: SelectSetupKernelParams) -> ToolResult {
        let wait = wait_ms(params.wait_ms, colab_setup::DEFAULT_START_WAIT_MS)?;
        let location = self.setup_notebook(&params.notebook_ref).await?;
        // Refuse an id the latest listing does not hold before the machine sees it.
        self.read_setup(&location, &params.setup_id, |setup| {
            let listing = setup
                .choice_listing()
                .map_err(|failure| setup_tool_error(&failure))?;
            match listing.find(&params.kernel_choice_id) {
                Some(_) => Ok(()),
                None => Err(setup_tool_error(&SetupError::ChoiceStale {
                    choice_id: params.kernel_choice_id.clone(),
                })),
            }
        })?;
        self.advance_setup(
            &location,
            &params.setup_id,
            SetupEvent::SelectChoice {
                choice_id: params.kernel_choice_id.clone(),
            },
        )?;
        self.wait_setup(&location, &params.setup_id, wait, |setup| {
            setup.is_terminal()
        })
        .await
    }

    /// `cancel_kernel_setup`.
    pub(crate) async fn cancel_kernel_setup(&self, params: KernelSetupParams) -> ToolResult {
        let location = self.setup_notebook(&params.notebook_ref).await?;
        self.advance_setup(&location, &params.setup_id, SetupEvent::Cancel)?;
        // Answer once the cancellation's own cleanup settled, or after a few seconds with
        // `cleanupPending` for the caller to follow.
        self.wait_setup(&location, &params.setup_id, 5_000, |setup| {
            setup.is_settled()
        })
        .await
    }

    fn apply_setup(
        &self,
        location: &NotebookLocation,
        setup_id: &str,
        event: SetupEvent,
    ) -> Result<Vec<SetupAction>, ToolError> {
        let actions = self
            .setups
            .registry()
            .apply(&location.uri, setup_id, event, now_ms())
            .map_err(|failure| setup_tool_error(&failure))?;
        self.setups.bump();
        Ok(actions)
    }

    /// Applies `event` to the setup and drives the actions it asks for.
    fn advance_setup(
        &self,
        location: &NotebookLocation,
        setup_id: &str,
        event: SetupEvent,
    ) -> Result<(), ToolError> {
        let actions = self.apply_setup(location, setup_id, event)?;
        self.drive(setup_id, actions);
        Ok(())
    }

    /// Reads the notebook's setup `setup_id` under the registry's lock; a setup the registry
    /// does not hold for this notebook is refused.
    fn read_setup<T>(
        &self,
        location: &NotebookLocation,
        setup_id: &str,
        read: impl FnOnce(&colab_setup::Setup) -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        let registry = self.setups.registry();
        let setup = registry
            .get(&location.uri, setup_id)
            .map_err(|missing| setup_tool_error(&missing))?;
        read(setup)
    }

    /// Waits up to `wait_ms` for `done` to hold of the setup, then answers with its receipt.
    async fn wait_setup(
        &self,
        location: &NotebookLocation,
        setup_id: &str,
        wait_ms: u64,
        done: impl Fn(&colab_setup::Setup) -> bool,
    ) -> ToolResult {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut changes = self.setups.changed.subscribe();
        loop {
            changes.borrow_and_update();
            let settled = self.read_setup(location, setup_id, |setup| {
                if !done(setup) && tokio::time::Instant::now() < deadline {
                    return Ok(None);
                }
                let mut answer = receipt_value(&setup.receipt())?;
                let stopped =
                    matches!(setup.status(), SetupStatus::Failed | SetupStatus::Cancelled);
                if stopped
                    && let Some(blocker) = self
                        .colab
                        .as_ref()
                        .and_then(|colab| colab.diagnosis(location))
                    && let Value::Object(fields) = &mut answer.0
                {
                    fields.insert("hostBlocker".to_owned(), blocker);
                }
                Ok(Some(answer))
            })?;
            if let Some(answer) = settled {
                return Ok(answer);
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                continue;
            }
        }
    }

    /// Performs each command of `actions` in a task of its own, answering it once.
    fn drive(&self, setup_id: &str, actions: Vec<SetupAction>) {
        for action in actions {
            let SetupAction::Perform(command) = action else {
                continue;
            };
            let tools = self.clone();
            let setup_id = setup_id.to_owned();
            tokio::spawn(async move {
                let reply = tools.perform_setup(&setup_id, &command).await;
                let Some(location) = tools.setups.location(&setup_id) else {
                    return;
                };
                let event = SetupEvent::Reply {
                    command: command.id,
                    reply,
                };
                let was_ready = tools.setup_ready(&location, &setup_id);
                if let Ok(next) = tools.apply_setup(&location, &setup_id, event) {
                    tools.drive(&setup_id, next);
                }
                if !was_ready {
                    tools.note_proven_kernel(&location, &setup_id).await;
                }
            });
        }
        self.setups.bump();
    }

    fn setup_ready(&self, location: &NotebookLocation, setup_id: &str) -> bool {
        self.setups
            .registry()
            .get(&location.uri, setup_id)
            .is_ok_and(|setup| setup.status() == SetupStatus::Ready)
    }

    /// A setup that has just become `ready` proved the notebook's kernel on its runtime, through
    /// the root its receipt names: the kernel's transfers may take that file service from now
    /// on. (The setup still guards the notebook here, so the kernel is the one it proved.)
    async fn note_proven_kernel(&self, location: &NotebookLocation, setup_id: &str) {
        let root = {
            let registry = self.setups.registry();
            let Ok(setup) = registry.get(&location.uri, setup_id) else {
                return;
            };
            if setup.status() != SetupStatus::Ready {
                return;
            }
            setup
                .receipt()
                .verification
                .filter(|proof| proof.verified)
                .and_then(|proof| colab_setup::FileServiceRoot::parse(&proof.root).ok())
        };
        if let Some(root) = root
            && let Some(kernel) = self.running_session(location).await
        {
            self.colab_kernels.record(&kernel, root);
        }
    }

    /// Ticks the setups while any is unsettled.
    fn ensure_ticking(&self) {
        if self.setups.ticking.swap(true, Ordering::SeqCst) {
            return;
        }
        let tools = self.clone();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let batches = tools.setups.registry().tick(now_ms());
                for (setup_id, actions) in batches {
                    tools.drive(setup_id.as_str(), actions);
                }
                tools.setups.bump();
                if !tools.setups.any_unsettled() {
                    tools.setups.ticking.store(false, Ordering::SeqCst);
                    // A setup admitted since the check above found the ticker still running.
                    if tools.setups.any_unsettled()
                        && !tools.setups.ticking.swap(true, Ordering::SeqCst)
                    {
                        continue;
                    }
                    return;
                }
            }
        });
    }

    /// One command's answer. Never panics and never hangs past the command's deadline.
    async fn perform_setup(&self, setup_id: &str, command: &Command) -> Reply {
        let budget = Duration::from_millis(command.deadline_ms.saturating_sub(now_ms()));
        match tokio::time::timeout(budget, self.perform_setup_now(setup_id, &command.kind)).await {
            Ok(reply) => reply,
            Err(_) => Reply::Failed(Failure::Unconfirmed),
        }
    }

    async fn perform_setup_now(&self, setup_id: &str, kind: &CommandKind) -> Reply {
        let (Some(colab), Some(location)) = (self.colab.clone(), self.setups.location(setup_id))
        else {
            return Reply::Failed(Failure::NotPerformed);
        };
        let Some(kernels) = self.kernels.clone() else {
            return Reply::Failed(Failure::NotPerformed);
        };
        match kind {
            CommandKind::ObserveKernelChoices if !colab.drives_picker() => {
                match kernels.list(&location, KernelPreference::default()).await {
                    Ok(listing) => Reply::KernelChoices {
                        labels: listing
                            .kernels
                            .iter()
                            .map(|option| option.choice.label.clone())
                            .collect(),
                        complete: true,
                    },
                    Err(_) => Reply::Failed(Failure::Unavailable),
                }
            }
            CommandKind::StartKernel { label, listing } => {
                let Ok(now) = kernels.list(&location, KernelPreference::default()).await else {
                    return Reply::Failed(Failure::Unavailable);
                };
                let labels: Vec<String> = now
                    .kernels
                    .iter()
                    .map(|option| option.choice.label.clone())
                    .collect();
                if &labels != listing {
                    return Reply::ListingChanged;
                }
                let Some(choice) = now
                    .kernels
                    .iter()
                    .find(|option| &option.choice.label == label)
                else {
                    return Reply::ListingChanged;
                };
                let preference = KernelPreference {
                    kernel_id: Some(choice.choice.id.clone()),
                    ..KernelPreference::default()
                };
                // A setup starts a fresh kernel: one still running from before may be on
                // another runtime, and reusing it would prove nothing about this one.
                if matches!(kernels.lookup(&location).await, KernelLookup::Running(_)) {
                    self.invalidate_active_run(&location, execution_tracker::Invalidation::Restart)
                        .await;
                    if kernels.shutdown(&location).await.is_err() {
                        return Reply::Failed(Failure::Unavailable);
                    }
                }
                match kernels.start(&location, preference).await {
                    Ok(_) => Reply::Done,
                    Err(_) => Reply::Failed(Failure::Unavailable),
                }
            }
            CommandKind::ConnectFileService => {
                colab.refresh_roots().await;
                match colab.roots().into_iter().next() {
                    Some(root) => Reply::FileService { root },
                    None => Reply::Failed(Failure::Unavailable),
                }
            }
            CommandKind::InsertTemporaryCell { source } => {
                self.insert_temporary_cell(&location, source).await
            }
            CommandKind::RunTemporaryCell { cell_id } => {
                self.run_temporary_cell(&location, cell_id).await
            }
            CommandKind::RemoveTemporaryCell { cell_id, source } => {
                self.remove_temporary_cell(&location, cell_id, source).await
            }
            CommandKind::Check { command, .. } => match command {
                CheckCommandKind::ExecuteKernel { code } => {
                    let session = match kernels.lookup(&location).await {
                        KernelLookup::Running(session) => session,
                        _ => return Reply::Check(CheckReply::KernelFailed(KernelFailure::NotSent)),
                    };
                    let run = async {
                        let events = session
                            .execute(code.clone(), ExecuteOptions::quiet())
                            .await?;
                        collect(events).await
                    };
                    Reply::Check(match run.await {
                        Ok(collected) => match collected.error {
                            Some(raised) => CheckReply::KernelFailed(KernelFailure::Error {
                                ename: raised.ename,
                            }),
                            None => CheckReply::KernelOutput {
                                stdout: collected.stdout,
                            },
                        },
                        Err(_) => CheckReply::KernelFailed(KernelFailure::Lost),
                    })
                }
                other => Reply::Check(colab.perform_check(other).await),
            },
            // Providers, assignments, mounting and (in an editor) the kernel picker are the
            // host's.
            _ => colab.perform_setup(&location, kind).await,
        }
    }

    /// The picker path's temporary `pass` cell, appended at the end of the notebook.
    async fn insert_temporary_cell(&self, location: &NotebookLocation, source: &str) -> Reply {
        let params = serde_json::from_value(serde_json::json!({
            "notebookRef": location.uri,
            "edits": [{"editType": "insert", "cellId": "BOTTOM", "newCode": source}],
        }));
        let Ok(params) = params else {
            return Reply::Failed(Failure::NotPerformed);
        };
        match self
            .edit_cells(params, &crate::CallContext::default())
            .await
        {
            Ok((value, _)) => {
                let cell_id = value["applied"][0]["cells"][0]["cellId"]
                    .as_str()
                    .or_else(|| value["applied"][0]["cells"][0]["cell_id"].as_str());
                match cell_id {
                    Some(cell_id) => Reply::CellInserted {
                        cell_id: cell_id.to_owned(),
                    },
                    // The edit went through but did not say which cell it made.
                    None => Reply::Failed(Failure::Unconfirmed),
                }
            }
            Err(_) => Reply::Failed(Failure::NotPerformed),
        }
    }

    /// Runs the temporary cell as a tracked run and answers once that run has ended.
    async fn run_temporary_cell(&self, location: &NotebookLocation, cell_id: &str) -> Reply {
        let context = crate::CallContext::default();
        let params = serde_json::from_value(serde_json::json!({
            "notebookRef": location.uri,
            "cellIds": [cell_id],
            "freshDeps": false,
            "waitMs": 0,
            "includeOutputs": false,
        }));
        let Ok(params) = params else {
            return Reply::Failed(Failure::NotPerformed);
        };
        let started = match self.run_cells(params, &context).await {
            Ok((value, _)) => value,
            Err(_) => return Reply::Failed(Failure::NotPerformed),
        };
        let Some(execution_id) = started["executionId"].as_str().map(str::to_owned) else {
            return Reply::Failed(Failure::Unconfirmed);
        };
        let mut status = started["status"].as_str().unwrap_or_default().to_owned();
        // Each call waits up to a minute for the run to change; the command's own deadline
        // bounds the whole wait.
        while matches!(status.as_str(), "requested" | "running" | "") {
            let params = serde_json::from_value(serde_json::json!({
                "notebookRef": location.uri,
                "executionId": execution_id,
                "waitMs": 60000,
                "includeOutputs": false,
            }));
            let Ok(params) = params else {
                return Reply::Failed(Failure::Unconfirmed);
            };
            match self.get_execution(params, &context).await {
                Ok((value, _)) => status = value["status"].as_str().unwrap_or("unknown").to_owned(),
                Err(_) => return Reply::Failed(Failure::Unconfirmed),
            }
        }
        Reply::CellRan(if status == "completed" {
            colab_setup::CellRun::Completed
        } else {
            colab_setup::CellRun::Failed
        })
    }

    /// Removes the temporary cell when it still has exactly its source; an edited cell stays.
    async fn remove_temporary_cell(
        &self,
        location: &NotebookLocation,
        cell_id: &str,
        source: &str,
    ) -> Reply {
        let read = serde_json::from_value(serde_json::json!({
            "notebookRef": location.uri,
            "cellIds": [cell_id],
            "view": "source",
        }));
        let Ok(read) = read else {
            return Reply::CellRetained(colab_setup::RetainReason::RemovalFailed);
        };
        match self.read_notebook(read).await {
            Ok((value, _)) => {
                let cell = &value["cells"][0];
                if cell["source"].as_str() != Some(source) {
                    return Reply::CellRetained(colab_setup::RetainReason::Edited);
                }
            }
            // Gone already: nothing left to remove.
            Err(failure) if failure.code == ErrorCode::CellNotFound => return Reply::CellRemoved,
            Err(_) => return Reply::CellRetained(colab_setup::RetainReason::RemovalFailed),
        }
        let params = serde_json::from_value(serde_json::json!({
            "notebookRef": location.uri,
            "edits": [{"editType": "delete", "cellId": cell_id}],
        }));
        let Ok(params) = params else {
            return Reply::CellRetained(colab_setup::RetainReason::RemovalFailed);
        };
        match self
            .edit_cells(params, &crate::CallContext::default())
            .await
        {
            Ok(_) => Reply::CellRemoved,
            Err(_) => Reply::CellRetained(colab_setup::RetainReason::RemovalFailed),
        }
    }
}

/// `configure_kernel` and `select_setup_kernel` answer once the setup is terminal or waits for
/// someone.
fn settled_or_asking(setup: &colab_setup::Setup) -> bool {
    setup.is_terminal()
        || matches!(
            setup.status(),
            SetupStatus::AwaitingKernelSelection | SetupStatus::AwaitingUser
        )
}
