//! Colab setups through the tools, on paused time, with a scripted Colab source standing in
//! for a tunnel that assigns runtimes: exact-alias reuse that never creates, cancel that
//! releases exactly what the setup assigned, the guard on the notebook while a setup is
//! unsettled, and the deadline.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use colab_setup::{
    CheckCommandKind, CheckReply, CommandKind, FileServiceRoot, Reply, Route, ServerAlias,
};
use mcp_contract::ErrorCode;
use serde_json::{Value, json};

use super::World;
use crate::BoxFuture;
use crate::colab::{ColabRuntimes, ServiceFile, UploadChunk};
use crate::testing::MemoryHost;

/// A tunnel-like source: a set of assigned aliases; `create` either assigns at once or waits
/// until the test opens the gate.
#[derive(Default)]
struct ScriptedTunnel {
    assigned: Mutex<Vec<String>>,
    creates: AtomicU32,
    releases: AtomicU32,
    hold_creates: bool,
    gate: tokio::sync::Notify,
}

impl ScriptedTunnel {
    fn holding() -> ScriptedTunnel {
        ScriptedTunnel {
            hold_creates: true,
            ..ScriptedTunnel::default()
        }
    }
}

impl ColabRuntimes for ScriptedTunnel {
    fn roots(&self) -> Vec<FileServiceRoot> {
        vec![FileServiceRoot::parse("https://runtime.invalid/").expect("a root")]
    }

    fn perform_check<'a>(&'a self, _: &'a CheckCommandKind) -> BoxFuture<'a, CheckReply> {
        Box::pin(async { CheckReply::ServiceUnavailable })
    }

    fn file_size<'a>(&'a self, _: ServiceFile<'a>) -> BoxFuture<'a, Result<Option<u64>, String>> {
        Box::pin(async { Err("scripted".to_owned()) })
    }

    fn write_chunk<'a>(
        &'a self,
        _: ServiceFile<'a>,
        _: UploadChunk,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("scripted".to_owned()) })
    }

    fn read_file<'a>(&'a self, _: ServiceFile<'a>) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async { Err("scripted".to_owned()) })
    }

    fn delete_file<'a>(&'a self, _: ServiceFile<'a>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Err("scripted".to_owned()) })
    }

    fn setup_route(&self, alias: Option<&ServerAlias>) -> Result<Route, String> {
        Ok(Route::Tunnel {
            reuse: alias.cloned(),
        })
    }

    fn perform_setup<'a>(
        &'a self,
        _notebook: &'a crate::NotebookLocation,
        command: &'a CommandKind,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            match command {
                CommandKind::CheckProvider => Reply::Done,
                CommandKind::LookupAssignment { alias } => {
                    let assigned = self.assigned.lock().unwrap();
                    if assigned.iter().any(|known| known == alias.as_str()) {
                        Reply::AssignmentFound {
                            endpoint: format!("ep-{alias}"),
                        }
                    } else {
                        Reply::NoAssignment
                    }
                }
                CommandKind::CreateAssignment { alias } => {
                    if self.hold_creates {
                        self.gate.notified().await;
                    }
                    self.creates.fetch_add(1, Ordering::SeqCst);
                    self.assigned.lock().unwrap().push(alias.to_string());
                    Reply::AssignmentCreated {
                        endpoint: format!("ep-{alias}"),
                    }
                }
                CommandKind::ReleaseRuntime { endpoint } => {
                    self.releases.fetch_add(1, Ordering::SeqCst);
                    self.assigned
                        .lock()
                        .unwrap()
                        .retain(|alias| format!("ep-{alias}") != *endpoint);
                    Reply::Done
                }
                _ => Reply::Failed(colab_setup::Failure::NotPerformed),
            }
        })
    }
}

/// A world whose host has `tunnel` as its Colab runtime and a.ipynb, with the tunnel to watch.
fn world_with(tunnel: ScriptedTunnel) -> (World, Arc<ScriptedTunnel>) {
    let tunnel = Arc::new(tunnel);
    let world = World::with_host(MemoryHost::new().with_colab(tunnel.clone()));
    world.host.insert("a.ipynb", &["#> out one"]);
    (world, tunnel)
}

/// `configure_kernel` of a.ipynb with `runtime: "colab"` and the arguments in `more`, which
/// must succeed: the setup's receipt.
async fn configure_colab(world: &World, more: Value) -> Value {
    let mut arguments = json!({"notebookRef": "a.ipynb", "runtime": "colab"});
    let more = more.as_object().expect("arguments are an object").clone();
    arguments.as_object_mut().expect("an object").extend(more);
    world.ok("configure_kernel", arguments).await
}

/// `tool` on the setup `setup_id` of a.ipynb, with the arguments in `more`, which must succeed.
async fn setup_call(world: &World, tool: &str, setup_id: &Value, more: Value) -> Value {
    let mut arguments = json!({"notebookRef": "a.ipynb", "setupId": setup_id});
    let more = more.as_object().expect("arguments are an object").clone();
    arguments.as_object_mut().expect("an object").extend(more);
    world.ok(tool, arguments).await
}

/// Follows the setup `setup_id` of a.ipynb from `receipt` with `get_kernel_setup` (each call
/// waiting up to a minute, 20 calls at most) until `done` holds for a receipt; the last one.
async fn follow_setup(
    world: &World,
    setup_id: &Value,
    mut receipt: Value,
    done: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..20 {
        if done(&receipt) {
            break;
        }
        receipt = setup_call(
            world,
            "get_kernel_setup",
            setup_id,
            json!({"waitMs": 60000}),
        )
        .await;
    }
    receipt
}

#[tokio::test(start_paused = true)]
async fn an_unknown_alias_is_refused_without_creating_anything() {
    let (world, tunnel) = world_with(ScriptedTunnel::default());
    let receipt =
        configure_colab(&world, json!({"serverAlias": "m0123abcd", "waitMs": 60000})).await;
    assert_eq!(receipt["status"], "failed", "{receipt}");
    assert_eq!(receipt["error"]["code"], "alias_unknown", "{receipt}");
    assert_eq!(receipt["serverAlias"], "m0123abcd", "{receipt}");
    assert_eq!(receipt["serverCreated"], false, "{receipt}");
    assert_eq!(tunnel.creates.load(Ordering::SeqCst), 0);
    // A malformed alias never reaches the machine.
    let malformed =
        json!({"notebookRef": "a.ipynb", "runtime": "colab", "serverAlias": "M0123ABCD"});
    world
        .refused("configure_kernel", malformed, ErrorCode::InvalidArgument)
        .await;
}

#[tokio::test(start_paused = true)]
async fn a_created_runtime_is_reused_by_its_exact_alias_only() {
    let (world, tunnel) = world_with(ScriptedTunnel::default());
    let first = configure_colab(&world, json!({"waitMs": 60000})).await;
    assert_eq!(first["status"], "awaiting_kernel_selection", "{first}");
    assert_eq!(first["serverCreated"], true, "{first}");
    let alias = first["serverAlias"].as_str().unwrap().to_owned();
    assert!(alias.starts_with('m') && alias.len() == 9, "{alias}");
    setup_call(&world, "cancel_kernel_setup", &first["setupId"], json!({})).await;
    // Cancel released what this setup created, once.
    assert_eq!(tunnel.releases.load(Ordering::SeqCst), 1);
    tunnel.assigned.lock().unwrap().push(alias.clone());
    let reused = configure_colab(&world, json!({"serverAlias": alias, "waitMs": 60000})).await;
    assert_eq!(reused["status"], "awaiting_kernel_selection", "{reused}");
    assert_eq!(reused["serverAlias"], alias.as_str(), "{reused}");
    assert_eq!(reused["serverCreated"], false, "{reused}");
    assert_eq!(
        tunnel.creates.load(Ordering::SeqCst),
        1,
        "reuse created nothing"
    );
    // Cancelling a reuse releases nothing: the server existed before.
    let cancelled = setup_call(&world, "cancel_kernel_setup", &reused["setupId"], json!({})).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["runtimeReleased"], false, "{cancelled}");
    assert_eq!(tunnel.releases.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn cancel_mid_assignment_blocks_the_notebook_until_the_late_runtime_is_released() {
    let (world, tunnel) = world_with(ScriptedTunnel::holding());
    let started = configure_colab(&world, json!({"waitMs": 1000})).await;
    assert_eq!(started["status"], "running", "{started}");
    assert_eq!(started["stage"], "acquiring_server", "{started}");
    assert_eq!(started["providerStep"], "assignment_request", "{started}");
    let setup_id = started["setupId"].clone();
    world
        .refused(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0]}),
            ErrorCode::CommandPending,
        )
        .await;
    world
        .refused(
            "configure_kernel",
            json!({"notebookRef": "a.ipynb", "runtime": "colab"}),
            ErrorCode::CommandPending,
        )
        .await;

    let cancelled = setup_call(&world, "cancel_kernel_setup", &setup_id, json!({})).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["cleanupPending"], true, "{cancelled}");
    let still = world
        .call(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "cellIds": [0]}),
        )
        .await;
    assert_eq!(
        still.error_code(),
        Some(ErrorCode::CommandPending),
        "blocked until the assignment answered: {}",
        still.text
    );

    // The assignment lands after the cancel: the setup releases it, once, and lets go.
    tunnel.gate.notify_one();
    let settled = follow_setup(&world, &setup_id, cancelled, |receipt| {
        receipt["cleanupPending"] == false
    })
    .await;
    assert_eq!(settled["cleanupPending"], false, "{settled}");
    assert_eq!(settled["runtimeReleased"], true, "{settled}");
    assert_eq!(tunnel.creates.load(Ordering::SeqCst), 1);
    assert_eq!(tunnel.releases.load(Ordering::SeqCst), 1);
    assert!(
        tunnel.assigned.lock().unwrap().is_empty(),
        "nothing assigned remains"
    );
    let receipt = world.run_cell("a.ipynb", 0).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
}

#[tokio::test(start_paused = true)]
async fn a_stuck_setup_fails_at_its_deadline_with_the_stage_it_stopped_in() {
    let (world, tunnel) = world_with(ScriptedTunnel::holding());
    let started = configure_colab(&world, json!({"waitMs": 0})).await;
    let setup_id = started["setupId"].clone();
    let receipt = follow_setup(&world, &setup_id, started, |receipt| {
        receipt["status"] != "running"
    })
    .await;
    assert_eq!(receipt["status"], "failed", "{receipt}");
    assert_eq!(receipt["failedStage"], "acquiring_server", "{receipt}");
    assert_eq!(
        receipt["failedProviderStep"], "assignment_request",
        "{receipt}"
    );
    // The assignment was never confirmed either way: it may exist.
    assert_eq!(receipt["serverMayRemain"], true, "{receipt}");
    assert_eq!(tunnel.creates.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_setup_waits_for_the_notebooks_run_and_its_pending_command() {
    let tunnel = Arc::new(ScriptedTunnel::default());
    let world = World::with_host(MemoryHost::new().with_colab(tunnel.clone()));
    world.host.insert("a.ipynb", &["#> stubborn"]);
    world.start_run("a.ipynb").await;
    let setup = json!({"notebookRef": "a.ipynb", "runtime": "colab", "waitMs": 60000});
    let refused = world
        .refused("configure_kernel", setup.clone(), ErrorCode::RunActive)
        .await;
    assert!(
        refused.text.contains("interrupt_kernels") && refused.text.contains("wait"),
        "{}",
        refused.text
    );

    // Interrupted but ignored: the run ends, and its execute request stays in the kernel.
    world
        .ok("interrupt_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    let ended = world.finish("a.ipynb").await;
    assert_eq!(ended["notebookCommandPending"], true, "{ended}");
    let pending = world
        .refused("configure_kernel", setup, ErrorCode::CommandPending)
        .await;
    assert!(pending.text.contains("pending"), "{}", pending.text);
    // Nothing was admitted or created, and the kernel was never stopped under the run.
    assert_eq!(tunnel.creates.load(Ordering::SeqCst), 0);
    assert_eq!(world.kernels.starts(), 1);
}
