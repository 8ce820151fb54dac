use colab_setup::environment::INVENTORY_TTL_MS;
use colab_setup::{CommandKind, Route, ServerAlias};
use host_core::colab::ColabRuntimes;
use host_core::environment::ColabEnvironment;
use mcp_contract::params::PrepareColabEnvironmentParams;
use mcp_contract::results::{
    CloseColabTerminalsResult, ColabTerminalsResult, PreparationState, TerminalClosureOutcome,
};
use serde_json::Value;

use super::*;
use crate::shell::ShellError;
use futures::future::BoxFuture;

/// A window with terminals and a globalState, answering the Colab requests only.
#[derive(Default)]
struct FakeWindow {
    /// Name and shell pid (-1 for a pseudoterminal, as code-server reports it); a terminal's
    /// handle is where it was first placed in this list, which removal leaves alone.
    terminals: Mutex<Vec<Option<(String, i64)>>>,
    disposed: Mutex<Vec<(String, i64)>>,
    state: Mutex<HashMap<String, Value>>,
    folders: Vec<Folder>,
    /// After an `updateWorkspaceFolders`: the folders, and whether a receipt was already
    /// recorded when it arrived.
    updated: Mutex<Option<(Vec<Folder>, bool)>>,
    notebooks_open: usize,
    /// Every Colab request's op, in order.
    asked: Mutex<Vec<String>>,
}

impl Shell for FakeWindow {
    fn colab(&self, request: Value) -> BoxFuture<'_, Result<Value, ShellError>> {
        Box::pin(async move {
            let op = request["op"].as_str().unwrap_or_default();
            self.asked.lock().unwrap().push(op.to_owned());
            Ok(match op {
                "state" => match &*self.updated.lock().unwrap() {
                    // The window after the conversion: an untitled workspace.
                    Some((folders, _)) => json!({
                        "installed": true, "active": true, "trusted": true,
                        "folders": folders, "workspaceFile": "untitled:Untitled-1.code-workspace",
                    }),
                    None => json!({
                        "installed": true, "active": true, "trusted": true,
                        "folders": self.folders,
                    }),
                },
                "terminals" => json!({"terminals": self.terminals.lock().unwrap().iter()
                    .enumerate()
                    .filter_map(|(handle, terminal)| terminal.as_ref().map(|(name, pid)| {
                        json!({"handle": format!("h{handle}"), "name": name, "processId": pid})
                    }))
                    .collect::<Vec<_>>()}),
                "closeTerminal" => {
                    let wanted = (
                        request["name"].as_str().unwrap_or_default().to_owned(),
                        request["processId"].as_i64().unwrap_or_default(),
                    );
                    let handle = request["handle"].as_str().unwrap_or_default();
                    let mut terminals = self.terminals.lock().unwrap();
                    let slot = handle
                        .strip_prefix('h')
                        .and_then(|index| index.parse::<usize>().ok())
                        .and_then(|index| terminals.get_mut(index));
                    match slot {
                        Some(slot) if slot.as_ref() == Some(&wanted) => {
                            self.disposed.lock().unwrap().extend(slot.take());
                            json!({"outcome": "closed"})
                        }
                        Some(Some(_)) => json!({"outcome": "uncertain"}),
                        _ => json!({"outcome": "already_gone"}),
                    }
                }
                "preflight" => json!({
                    "terminals": self.terminals.lock().unwrap().iter().flatten().count(),
                    "notebooks": {"open": self.notebooks_open},
                }),
                "updateWorkspaceFolders" => {
                    let folders: Vec<Folder> =
                        serde_json::from_value(request["folders"].clone()).unwrap();
                    let recorded = !self.state.lock().unwrap().is_empty();
                    *self.updated.lock().unwrap() = Some((folders, recorded));
                    json!({"accepted": true})
                }
                "stateGet" => json!({"value": self.state.lock().unwrap()
                    .get(request["key"].as_str().unwrap_or_default()).cloned()}),
                "stateSet" => {
                    self.state.lock().unwrap().insert(
                        request["key"].as_str().unwrap_or_default().to_owned(),
                        request["value"].clone(),
                    );
                    json!({"accepted": true})
                }
                other => json!({"errorName": format!("Unexpected {other}")}),
            })
        })
    }
}

fn window(shell: Arc<FakeWindow>, native: Option<NativeDriver>) -> WindowColab {
    WindowColab::new(shell, native, "w1".to_owned(), "project".to_owned())
}

#[tokio::test]
async fn a_server_mounted_already_is_reused_without_the_picker_or_a_debugging_port() {
    let shell = Arc::new(FakeWindow {
        folders: vec![
            Folder {
                uri: "file:///home/me/project".to_owned(),
                name: "project".to_owned(),
            },
            Folder {
                uri: "colab://m0123abcd-srv/content".to_owned(),
                name: "Colab m0123abcd".to_owned(),
            },
        ],
        ..FakeWindow::default()
    });
    // No native driver: nothing here may need the picker.
    let colab = window(shell.clone(), None);
    let notebook = NotebookLocation {
        uri: "file:///home/me/project/a.ipynb".to_owned(),
        path: Some("a.ipynb".into()),
    };
    let alias = ServerAlias::parse("m0123abcd").unwrap();
    assert_eq!(
        colab.mount_route(&alias),
        Ok(Route::MountServer {
            alias: alias.clone()
        })
    );
    let root = FileServiceRoot::parse("colab://m0123abcd-srv/").unwrap();
    for command in [
        CommandKind::FindMountedServer {
            alias: alias.clone(),
        },
        CommandKind::MountServer {
            alias: alias.clone(),
        },
    ] {
        assert_eq!(
            colab.perform_setup(&notebook, &command).await,
            Reply::FileService { root: root.clone() },
            "{command:?}"
        );
    }
    assert_eq!(colab.roots(), vec![root]);
    assert!(
        shell.asked.lock().unwrap().iter().all(|op| op == "state"),
        "only the folders were read: {:?}",
        shell.asked.lock().unwrap()
    );
    // Another alias is not mounted: the setup goes on to the provider and the picker.
    let other = ServerAlias::parse("m99999999").unwrap();
    assert_eq!(
        colab
            .perform_setup(&notebook, &CommandKind::FindMountedServer { alias: other })
            .await,
        Reply::NotMounted
    );
}

#[tokio::test]
async fn a_provider_check_without_a_debugging_port_is_unavailable_and_says_why() {
    let shell = Arc::new(FakeWindow::default());
    let colab = window(shell.clone(), None);
    let notebook = NotebookLocation {
        uri: "file:///work/a.ipynb".to_owned(),
        path: Some("a.ipynb".into()),
    };
    assert_eq!(colab.diagnosis(&notebook), None);
    assert_eq!(
        colab
            .perform_setup(&notebook, &CommandKind::CheckProvider)
            .await,
        Reply::Failed(Failure::Unavailable)
    );
    let diagnosis = colab.diagnosis(&notebook).unwrap();
    assert_eq!(diagnosis["code"], "native_not_configured", "{diagnosis}");
    assert!(
        colab.setup_route(None).is_err(),
        "setups are refused up front"
    );
}

#[tokio::test]
async fn only_named_terminals_of_the_latest_inventory_are_closed() {
    let (shell, colab, first) = inventoried(&[("bash", 11), ("bash", 12), ("zsh", 13)]).await;
    assert_eq!(first.terminals.len(), 3);
    assert_eq!(first.expires_in_ms, 60_000);
    let second = colab.list_terminals().await.unwrap();
    // The older inventory is void: nothing is closed through it.
    let stale = close(&colab, &first, 0).await.unwrap_err();
    assert_eq!(stale.code, ErrorCode::InvalidArgument);
    // A reference the inventory never gave: refused before anything closes.
    let unknown = colab
        .close_terminals(
            &second.inventory_id,
            &[
                second.terminals[1].terminal_ref.clone(),
                "t000000000000".to_owned(),
            ],
        )
        .await
        .unwrap_err();
    assert_mentions(&unknown, "Nothing was closed");
    assert!(shell.disposed.lock().unwrap().is_empty());
    let closed = close(&colab, &second, 1).await.unwrap();
    assert_eq!(closed.results[0].outcome, TerminalClosureOutcome::Closed);
    assert!(!closed.partial);
    assert_eq!(
        *shell.disposed.lock().unwrap(),
        vec![("bash".to_owned(), 12)]
    );
    assert_eq!(shell.terminals.lock().unwrap().iter().flatten().count(), 2);
    // The same reference again: that terminal is gone, and the answer says so.
    let again = close(&colab, &second, 1).await.unwrap();
    assert_eq!(
        again.results[0].outcome,
        TerminalClosureOutcome::AlreadyGone
    );
    assert!(again.partial);
}

/// Closes the terminal at `index` of `inventory`, and only that one.
async fn close(
    colab: &WindowColab,
    inventory: &ColabTerminalsResult,
    index: usize,
) -> Result<CloseColabTerminalsResult, ToolError> {
    let terminal = inventory.terminals[index].terminal_ref.clone();
    colab
        .close_terminals(&inventory.inventory_id, &[terminal])
        .await
}

/// Asserts that a refusal's message says `words`.
fn assert_mentions(refusal: &ToolError, words: &str) {
    assert!(refusal.message.contains(words), "{}", refusal.message);
}

/// A window without a debugging port where these terminals are open, and its first inventory.
async fn inventoried(
    terminals: &[(&str, i64)],
) -> (Arc<FakeWindow>, WindowColab, ColabTerminalsResult) {
    let shell = Arc::new(FakeWindow::default());
    *shell.terminals.lock().unwrap() = open_terminals(terminals);
    let colab = window(shell.clone(), None);
    let inventory = colab.list_terminals().await.unwrap();
    (shell, colab, inventory)
}

fn open_terminals(terminals: &[(&str, i64)]) -> Vec<Option<(String, i64)>> {
    terminals
        .iter()
        .map(|(name, pid)| Some(((*name).to_owned(), *pid)))
        .collect()
}

#[tokio::test]
async fn two_pseudoterminals_of_one_name_are_told_apart() {
    // Two Colab terminals of one server: the same name, and no shell pid (code-server says -1).
    let (shell, colab, inventory) = inventoried(&[("Colab: m1", -1), ("Colab: m1", -1)]).await;
    assert_eq!(inventory.terminals.len(), 2);
    assert!(
        inventory
            .terminals
            .iter()
            .all(|entry| entry.shell_pid.is_none())
    );
    let closed = close(&colab, &inventory, 1).await.unwrap();
    assert_eq!(closed.results[0].outcome, TerminalClosureOutcome::Closed);
    assert!(!closed.partial);
    // The second one went; the first is still open.
    let terminals = shell.terminals.lock().unwrap().clone();
    assert_eq!(terminals[0], Some(("Colab: m1".to_owned(), -1)));
    assert_eq!(terminals[1], None);
}

#[tokio::test(start_paused = true)]
async fn an_inventory_expires_after_sixty_seconds() {
    let (shell, colab, inventory) = inventoried(&[("bash", 11)]).await;
    // At sixty seconds it still holds; a millisecond later it has expired.
    // (An unknown reference is refused for what it is, not for the inventory's age.)
    tokio::time::advance(Duration::from_millis(INVENTORY_TTL_MS)).await;
    let unknown = colab
        .close_terminals(&inventory.inventory_id, &["t-none".to_owned()])
        .await
        .unwrap_err();
    assert_mentions(&unknown, "not a terminalRef");
    tokio::time::advance(Duration::from_millis(1)).await;
    let expired = close(&colab, &inventory, 0).await.unwrap_err();
    assert_mentions(&expired, "expired");
    assert!(shell.disposed.lock().unwrap().is_empty());
}

#[tokio::test]
async fn preparation_without_a_native_port_names_the_blocker_and_changes_nothing() {
    let shell = Arc::new(single_folder());
    let colab = window(shell.clone(), None);
    let params = prepare_params(None);
    let refused = colab.prepare(&params).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::EnvironmentBlocked);
    let blockers = refused.details.unwrap()["blockers"].clone();
    assert!(
        blockers
            .as_array()
            .unwrap()
            .contains(&json!("restart_unsupported")),
        "{blockers}"
    );
    assert!(
        shell.state.lock().unwrap().is_empty(),
        "no receipt was recorded"
    );
    let restart = colab
        .prepare(&PrepareColabEnvironmentParams {
            restart_mode: Some("restore-clean-workspace".into()),
            ..params
        })
        .await
        .unwrap_err();
    assert_eq!(restart.code, ErrorCode::NotSupported);
    assert_mentions(&restart, "--remote-debugging-port");
}

#[tokio::test]
async fn preflight_counts_and_blockers_come_from_the_window() {
    let shell = Arc::new(single_folder());
    *shell.terminals.lock().unwrap() = open_terminals(&[("bash", 11), ("zsh", 13)]);
    let colab = window(shell, None);
    let preflight = colab.preflight().await.unwrap();
    assert_eq!(preflight.terminals, 2);
    assert_eq!(preflight.workspace.folders, 1);
    assert_eq!(preflight.workspace.local_folders, 1);
    assert!(!preflight.workspace.is_workspace);
    assert!(preflight.blockers.contains(&"terminals_open".to_owned()));
    assert!(
        preflight
            .blockers
            .contains(&"native_not_configured".to_owned())
    );
    assert!(!preflight.native.configured);
}

/// A fake DevTools endpoint whose one page shows our marker.
async fn bound_driver() -> (crate::native::fake::FakeChromium, NativeDriver) {
    use crate::native::fake::{FakeChromium, FakeTarget};
    let chromium = FakeChromium::start(vec![FakeTarget::page("P1", |_| {
        Some(json!({"status": "ok", "marker": "ours"}))
    })])
    .await;
    let marker = format!("jmcp-{}", "a".repeat(32));
    let driver = NativeDriver::new(chromium.port, marker);
    (chromium, driver)
}

/// A preparation of this window (no restart), of `folder_uri` when given.
fn prepare_params(folder_uri: Option<&str>) -> PrepareColabEnvironmentParams {
    PrepareColabEnvironmentParams {
        window_id: None,
        folder_uri: folder_uri.map(str::to_owned),
        restart_mode: None,
    }
}

fn single_folder() -> FakeWindow {
    FakeWindow {
        folders: vec![Folder {
            uri: "file:///work/project".into(),
            name: "project".into(),
        }],
        ..FakeWindow::default()
    }
}

#[tokio::test]
async fn a_single_folder_becomes_a_workspace_after_the_receipt_is_recorded() {
    let (_chromium, driver) = bound_driver().await;
    let shell = Arc::new(single_folder());
    let colab = window(shell.clone(), Some(driver.clone()));
    let params = prepare_params(None);
    let receipt = colab.prepare(&params).await.unwrap();
    assert_eq!(receipt.status, PreparationState::Converting);
    assert!(receipt.converted && !receipt.environment_ready);
    assert_eq!(receipt.expected_window_label, "project (Colab)");
    let (folders, recorded_first) = shell.updated.lock().unwrap().clone().unwrap();
    assert!(
        recorded_first,
        "the receipt is recorded before the window changes"
    );
    assert_eq!(
        folders,
        vec![Folder {
            uri: "file:///work/project".into(),
            name: "project (Colab)".into(),
        }]
    );
    // The extension host restarted: a new activation finds the receipt and checks it afresh.
    let restarted = WindowColab::new(
        shell.clone(),
        Some(driver),
        "w2".to_owned(),
        "project (Colab)".to_owned(),
    );
    let again = restarted
        .preparation(&receipt.preparation_id)
        .await
        .unwrap();
    assert_eq!(again.status, PreparationState::Ready, "{again:?}");
    assert!(again.environment_ready && again.native_bound);
    assert_eq!(again.window_id, "w2");
    assert_eq!(
        again.workspace_uri.as_deref(),
        Some("untitled:Untitled-1.code-workspace")
    );
    let unknown = restarted.preparation("prep-00000000").await.unwrap_err();
    assert_eq!(unknown.code, ErrorCode::InvalidArgument);
}

#[tokio::test]
async fn open_work_blocks_the_conversion_and_nothing_changes() {
    let (_chromium, driver) = bound_driver().await;
    let shell = Arc::new(FakeWindow {
        notebooks_open: 1,
        ..single_folder()
    });
    *shell.terminals.lock().unwrap() = open_terminals(&[("bash", 11)]);
    let colab = window(shell.clone(), Some(driver));
    let refused = colab.prepare(&prepare_params(None)).await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::EnvironmentBlocked);
    let blockers = refused.details.unwrap()["blockers"].clone();
    assert_eq!(blockers, json!(["notebooks_open", "terminals_open"]));
    assert!(
        shell.updated.lock().unwrap().is_none(),
        "the window was not changed"
    );
    assert!(
        shell.state.lock().unwrap().is_empty(),
        "no receipt was recorded"
    );
}

#[tokio::test]
async fn another_folder_than_the_open_one_is_refused() {
    let (_chromium, driver) = bound_driver().await;
    let shell = Arc::new(single_folder());
    let colab = window(shell.clone(), Some(driver));
    let refused = colab
        .prepare(&prepare_params(Some("file:///work/elsewhere")))
        .await
        .unwrap_err();
    assert_eq!(
        refused.details.unwrap()["blockers"],
        json!(["folder_mismatch"])
    );
    assert!(shell.updated.lock().unwrap().is_none());
}
