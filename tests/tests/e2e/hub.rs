//! Kernels on a real JupyterHub (JupyterHub 6.1.1 from the test Python environment, its real
//! proxy configurable-http-proxy from npm, the dummy authenticator and the simple local-process
//! spawner) on loopback, its public port served over TLS with a certificate of a CA made for
//! the run; `jupyter-mcp serve --jupyterhub` finds the token's user, starts their server through
//! the hub, follows the spawn and runs kernels behind the hub's proxy. One hub serves every
//! test of the run; each test uses a named server of its own.

use std::time::Duration;

use jupyter_mcp_tests::hub::Hub;
use jupyter_mcp_tests::kernel_runs::{NotebookRuns, printed_lines};
use jupyter_mcp_tests::kernel_server::SeveringProxy;
use jupyter_mcp_tests::{
    Client, HttpServer, is_terminal as terminal, receipt_output as output_of, work_root,
};
use serde_json::json;

const NB: &str = "work/hub.ipynb";

/// A notebook root, and `jupyter-mcp` on the shared hub's server `server` (through `url`, the
/// hub's own by default).
struct Setup {
    client: Client,
    mcp: HttpServer,
    root: tempfile::TempDir,
    _token_folder: tempfile::TempDir,
}

fn hub() -> &'static Hub {
    tokio::task::block_in_place(Hub::shared)
}

fn notebook_root(sources: &[&str]) -> tempfile::TempDir {
    work_root("hub.ipynb", sources)
}

/// `jupyter-mcp serve --jupyterhub` arguments for server `server`.
fn hub_args(url: &str, token_file: &std::path::Path, server: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--jupyterhub".to_owned(),
        url.to_owned(),
        "--jupyterhub-token-file".to_owned(),
        token_file.to_str().unwrap().to_owned(),
        "--kernel-server-ca".to_owned(),
        hub().ca_file().to_str().unwrap().to_owned(),
        "--jupyterhub-server".to_owned(),
        server.to_owned(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

async fn setup(server: &str, sources: &[&str], extra: &[&str]) -> Setup {
    let hub = hub();
    let root = notebook_root(sources);
    let token_folder = tempfile::tempdir().unwrap();
    let token_file = hub.write_token_file(token_folder.path(), hub.token());
    let args = hub_args(&hub.url(), &token_file, server, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mcp = HttpServer::start(root.path(), &args).expect("jupyter-mcp starts");
    let client = Client::http(&mcp.url).await.expect("client connects");
    Setup {
        client,
        mcp,
        root,
        _token_folder: token_folder,
    }
}

/// The notebook's runs through `client`; a hub server's spawn can take minutes.
fn on(client: &Client) -> NotebookRuns<'_> {
    NotebookRuns {
        client,
        notebook: NB,
        patience: Duration::from_secs(180),
    }
}

const TICKS: &str =
    "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(0.3)";
const SLEEP: &str = "import time\nprint('sleeping', flush=True) or time.sleep(120)";
const STEPS: &str =
    "import time\nfor i in range(2400):\n    print('step', i, flush=True)\n    time.sleep(0.05)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_server_is_started_with_progress_and_runs_follows_interrupts_restarts_and_transfers()
{
    let setup = setup("main", &[TICKS, SLEEP, "x = 6 * 7\nx", STEPS], &[]).await;
    let client = &setup.client;
    let runs = on(client);
    assert!(
        hub().server("main").is_none(),
        "the server is not running yet"
    );

    // The first tool that needs the kernel starts the user's server through the hub and
    // relays the spawn's progress.
    let configured = client
        .call_with_progress("configure_kernel", json!({"notebookRef": NB}), "spawn")
        .await
        .ok();
    assert_eq!(configured["ready"], true, "{configured}");
    let server = hub().server("main").expect("the hub runs the server now");
    assert_eq!(server["ready"], true, "{server}");
    let relayed = client
        .recorder
        .wait_for_progress(Duration::from_secs(10), |progress| {
            let said = |wanted: &dyn Fn(&str) -> bool| {
                progress
                    .iter()
                    .any(|item| item.message.as_deref().is_some_and(wanted))
            };
            // The hub's own words, and the end: the hub's ready event, or ours when the start
            // request's answer came before it.
            said(&|message| message.contains("Spawning server") || message == "Server requested")
                && said(&|message| {
                    message.contains("/user/alice/main/")
                        && message.to_lowercase().contains("ready")
                })
        })
        .await;
    assert!(
        relayed,
        "the hub's progress was relayed: {:?}",
        client.recorder.progress.lock().unwrap()
    );

    // Where kernels run: the hub, the user and the server, without the token.
    let (_, python) = runs.listed_kernel("remote:python3").await;
    assert_eq!(python["runsOn"]["kind"], "jupyterhub", "{python}");
    assert_eq!(python["runsOn"]["hub"], hub().url());
    assert_eq!(python["runsOn"]["user"], "alice");
    assert_eq!(python["runsOn"]["server"], "main");
    let info = client
        .call("get_kernel_info", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(
        info["kernel"]["runsOn"]["url"],
        format!("{}user/alice/main/", hub().url()),
        "{info}"
    );
    assert!(!info.to_string().contains(hub().token()));

    // A long run is followed while it runs, then to its end.
    runs.follow_ticks(json!([0, 2]), "tick 1", 6).await;

    // Interrupt, then restart.
    runs.interrupt_sleeping_cell(json!([1, 2])).await;
    runs.restart().await;

    // 10 MiB up to the kernel and back, through the hub's proxy.
    on(client).transfer_round_trip(setup.root.path(), 29).await;

    // The hub stops the server mid-run (as its idle culler would): the run ends unavailable
    // with `server_stopped`, the output so far kept, the later cell not run.
    runs.run(json!([3, 2]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("step 5\n"))
        .await;
    tokio::task::block_in_place(|| hub().stop_server("main"));
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["reasonCode"], "server_stopped", "{receipt}");
    assert_eq!(receipt["cells"][0]["state"], "unavailable", "{receipt}");
    assert_eq!(receipt["cells"][1]["state"], "not-run", "{receipt}");
    assert!(output_of(&receipt, 0).contains("step 5\n"), "output kept");
    assert!(
        receipt["reason"].as_str().unwrap().contains("JupyterHub"),
        "{receipt}"
    );

    // Without --jupyterhub-start, the next run does not start it again, and says how to.
    let refused = client
        .call(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": [2], "waitMs": 30000}),
        )
        .await;
    assert_eq!(
        refused.error_code(),
        "kernel_unavailable",
        "{}",
        refused.text()
    );
    let message = refused.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("--jupyterhub-start"), "{message}");
    assert!(!message.contains(hub().token()));
    assert!(hub().server("main").is_none(), "nothing started the server");
    drop(setup.mcp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_jupyterhub_start_a_server_the_hub_stopped_is_started_again() {
    let setup = setup("again", &[STEPS, "y = 7 * 6\ny"], &["--jupyterhub-start"]).await;
    let client = &setup.client;
    let runs = on(client);
    runs.run(json!([0, 1]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("step 3\n"))
        .await;
    let before = runs.epoch().await;
    tokio::task::block_in_place(|| hub().stop_server("again"));
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["reasonCode"], "server_stopped", "{receipt}");
    // The next run starts the server again, and a new kernel on it.
    let again = runs.run(json!([1]), 120_000).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert!(output_of(&again, 0).contains("42"));
    assert!(runs.epoch().await > before);
    assert_eq!(hub().server("again").unwrap()["ready"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_spawn_ends_with_the_hubs_reason() {
    let setup = setup("broken", &["1 + 1"], &[]).await;
    let call = setup
        .client
        .call("configure_kernel", json!({"notebookRef": NB}))
        .await;
    assert_eq!(call.error_code(), "kernel_unavailable", "{}", call.text());
    let message = call.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("JupyterHub could not start your server broken"),
        "{message}"
    );
    // The pre-spawn hook points the server at a program that does not exist; the hub says so.
    assert!(message.contains("No such file or directory"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_replaced_mid_run_is_picked_up_without_losing_the_run() {
    let hub = hub();
    let root = notebook_root(&[
        "import time\nfor i in range(40):\n    print('line', i, flush=True)\n    time.sleep(0.1)",
        "z = 6 * 7\nz",
    ]);
    let (first_id, first) = hub.new_token("rotation, first");
    let token_folder = tempfile::tempdir().unwrap();
    let token_file = hub.write_token_file(token_folder.path(), &first);
    // Through a TCP proxy (TLS passes through it untouched) that can cut the connections.
    let proxy = SeveringProxy::start(hub.port()).await.unwrap();
    let url = proxy.url().replace("http://", "https://");
    let args = hub_args(&url, &token_file, "rotate", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mcp = HttpServer::start(root.path(), &args).unwrap();
    let client = Client::http(&mcp.url).await.unwrap();
    let runs = on(&client);

    runs.run(json!([0, 1]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("line 3\n"))
        .await;
    // The credential expires: a new token goes into the file (renamed into place, as tools that
    // refresh tokens write them), the old one is revoked, and the connections drop, so the
    // WebSocket must be reopened with the new token.
    let (_, second) = hub.new_token("rotation, second");
    let fresh = token_folder.path().join("fresh");
    std::fs::write(&fresh, format!("{second}\n")).unwrap();
    std::fs::rename(&fresh, &token_file).unwrap();
    tokio::task::block_in_place(|| hub.revoke_token(&first_id));
    assert!(!hub.accepts(&first), "the first token is revoked");
    assert!(
        proxy.sever() > 0,
        "the kernel WebSocket went through the proxy"
    );
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let printed = printed_lines(&output_of(&receipt, 0), "line ");
    assert_eq!(
        printed.last().map(String::as_str),
        Some("line 39"),
        "{printed:?}"
    );
    assert!(output_of(&receipt, 1).contains("42"));
    // New requests (REST and a new kernel) use the new token too.
    runs.restart().await;
    let again = runs.run(json!([1]), 60_000).await;
    assert_eq!(again["status"], "completed", "{again}");
}
