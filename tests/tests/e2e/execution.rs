//! Tracked execution on a real ipykernel, end to end.

use std::time::{Duration, Instant};

use jupyter_mcp_tests::kernel_runs::NotebookRuns;
use jupyter_mcp_tests::{
    Call, Client, HttpServer, example_root, is_terminal as terminal, nbformat_problems,
    process_alive, receipt_output as output_of, serve_code_notebook, strings_of,
    write_code_notebook,
};
use serde_json::{Value, json};

const NB: &str = "run.ipynb";

async fn serve(sources: &[&str]) -> (tempfile::TempDir, HttpServer, Client) {
    serve_code_notebook(NB, sources).await
}

/// A server whose notebook's first cell sleeps for a minute: both cells started, the first
/// seen sleeping.
async fn serve_sleeping() -> (tempfile::TempDir, HttpServer, Client) {
    let (root, server, client) = serve(&[
        "import time\nprint('sleeping', flush=True) or time.sleep(60)",
        "after = True",
    ])
    .await;
    on(&client).start_sleeping(json!([0, 1])).await;
    (root, server, client)
}

/// The notebook's runs through `client`, followed for a minute at most.
fn on(client: &Client) -> NotebookRuns<'_> {
    NotebookRuns {
        client,
        notebook: NB,
        patience: Duration::from_secs(60),
    }
}

/// `run_cells` of `cells`, waiting up to `wait_ms` (outputs only as the tool gives them by
/// default).
async fn run_cells(client: &Client, cells: Value, wait_ms: u64) -> Call {
    client
        .call(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": cells, "waitMs": wait_ms}),
        )
        .await
}

/// Follows the notebook's latest run until `done` holds for its receipt; panics after a minute.
async fn follow(client: &Client, done: impl Fn(&Value) -> bool) -> Value {
    on(client).follow(done).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_cell_keeps_running_after_the_wait() {
    let (root, _server, client) = serve(&[
        "import time\nprint('started', flush=True)\ntime.sleep(2)\nprint('done')",
        "x = 41 + 1\nx",
    ])
    .await;
    let receipt = run_cells(&client, json!([0, 1]), 300).await.ok();
    let execution_id = receipt["executionId"].as_str().unwrap().to_owned();
    assert!(execution_id.starts_with("exec_"));
    assert_eq!(receipt["waitTimedOut"], true);
    assert!(matches!(
        receipt["status"].as_str(),
        Some("requested" | "running")
    ));
    // While it runs, the output so far is visible.
    let running = follow(&client, |receipt| output_of(receipt, 0).contains("started")).await;
    assert_eq!(running["executionId"], execution_id.as_str());
    // get_execution follows it to the end.
    let finished = on(&client).execution(&execution_id, 30000).await;
    assert_eq!(finished["status"], "completed", "{finished}");
    assert!(finished.get("waitTimedOut").is_none());
    assert_eq!(finished["cells"][0]["state"], "completed");
    assert!(output_of(&finished, 0).contains("done"));
    assert!(output_of(&finished, 1).contains("42"));
    assert_eq!(finished["progress"]["cellsDone"], 2);
    // The outputs are in the file, valid, and match what was returned.
    let path = root.path().join(NB);
    assert!(nbformat_problems(std::slice::from_ref(&path)).is_empty());
    let notebook = notebook_model::Notebook::parse(&std::fs::read(&path).unwrap()).unwrap();
    let first = &notebook.cells()[0];
    assert_eq!(first.outputs()[0]["text"], "started\ndone\n");
    assert_eq!(first.execution_count(), Some(1));
    assert_eq!(notebook.cells()[1].outputs()[0]["data"]["text/plain"], "42");
    // Without an id, the latest run is recovered.
    let latest = client
        .call("get_execution", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(latest["executionId"], execution_id.as_str());
    assert!(
        latest["cells"][0].get("output").is_none(),
        "outputs only on request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_stop_at_the_first_failure() {
    let (_root, _server, client) = serve(&["a = 1", "1 / 0", "b = 2"]).await;
    let receipt = run_cells(&client, json!([0, 1, 2]), 30000).await.ok();
    assert_eq!(receipt["status"], "failed", "{receipt}");
    assert_eq!(receipt["reasonCode"], "cell_failed");
    let states = strings_of(&receipt["cells"], "state");
    assert_eq!(states, ["completed", "failed", "not-run"]);
    assert!(output_of(&receipt, 1).contains("ZeroDivisionError"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_stops_a_sleeping_cell() {
    let (root, _server, client) = serve_sleeping().await;
    let started = Instant::now();
    let interrupted = client.kernel_action("interrupt_kernels", NB).await;
    assert_eq!(interrupted["results"][0]["outcome"], "interrupt-sent");
    let receipt = follow(&client, terminal).await;
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        output_of(&receipt, 0).contains("KeyboardInterrupt"),
        "{receipt}"
    );
    assert_eq!(receipt["cells"][1]["state"], "not-run");
    let on_disk = std::fs::read_to_string(root.path().join(NB)).unwrap();
    assert!(on_disk.contains("KeyboardInterrupt"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_invalidates_the_running_run() {
    let (_root, _server, client) = serve_sleeping().await;
    let before = client
        .call("get_kernel_info", json!({"notebookRef": NB}))
        .await
        .ok();
    let restarted = client.kernel_action("restart_kernels", NB).await;
    let entry = &restarted["results"][0];
    assert_eq!(entry["outcome"], "restarted");
    assert!(
        entry["invalidatedExecution"]
            .as_str()
            .unwrap()
            .starts_with("exec_")
    );
    assert!(entry["epoch"].as_u64().unwrap() > before["kernel"]["epoch"].as_u64().unwrap());
    let receipt = follow(&client, terminal).await;
    assert_eq!(receipt["status"], "unavailable");
    assert_eq!(receipt["reasonCode"], "invalidated_by_restart");
    assert_eq!(receipt["cells"][1]["state"], "not-run");
    // A restarted kernel makes every code cell stale (none is fresh).
    for cell in client.outline_cells(NB).await {
        assert_ne!(cell["state"], "fresh", "{cell}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_killed_from_outside_ends_the_run_unavailable() {
    let (_root, _server, client) = serve(&[
        "print('one')",
        "import os\nos.kill(os.getpid(), 9)",
        "print('three')",
    ])
    .await;
    let receipt = run_cells(&client, json!([0, 1, 2]), 30000).await.ok();
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["reasonCode"], "kernel_died");
    assert_eq!(receipt["kernelStatusAtStop"], "dead");
    assert_eq!(receipt["cells"][0]["state"], "completed");
    assert_eq!(receipt["cells"][2]["state"], "not-run");
    // The next run starts a new kernel.
    let again = run_cells(&client, json!([0]), 30000).await.ok();
    assert_eq!(again["status"], "completed", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_limits_are_enforced() {
    let sources: Vec<String> = (0..257)
        .map(|index| format!("v{index} = {index}"))
        .collect();
    let sources: Vec<&str> = sources.iter().map(String::as_str).collect();
    let (_root, _server, client) = serve(&sources).await;
    let too_many = client
        .call("run_cells", json!({"notebookRef": NB, "waitMs": 0}))
        .await;
    assert_eq!(too_many.error_code(), "too_many_cells");
    // A second run on a busy notebook is refused and names the active run.
    let first = client
        .call(
            "edit_cells",
            json!({"notebookRef": NB, "edits": [{"editType": "insert", "cellId": "TOP",
                   "newCode": "import time\ntime.sleep(30)"}]}),
        )
        .await
        .ok();
    let sleeper = first["applied"][0]["cells"][0]["cell_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let running = run_cells(&client, json!([sleeper]), 0).await.ok();
    let busy = run_cells(&client, json!([1]), 0).await;
    assert_eq!(busy.error_code(), "run_active");
    assert_eq!(
        busy.error()["details"]["activeExecutionId"],
        running["executionId"]
    );
    client.kernel_action("interrupt_kernels", NB).await;
    let markdown = client
        .call(
            "run_cells",
            json!({"notebookRef": "getting-started.ipynb", "cellIds": [0]}),
        )
        .await;
    assert_eq!(markdown.error_code(), "not_a_code_cell");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_follow_a_long_run_and_a_quick_one_sends_none() {
    let root = example_root();
    write_code_notebook(
        root.path(),
        NB,
        &[
            "for step in range(3):\n    print(f'step {step}', flush=True)",
            "import time\nfor tick in range(5):\n    print(f'tick {tick}', flush=True)\n    time.sleep(0.6)",
            "1 + 1",
        ],
    );
    // A grace of 2 s: far beyond a trivial run even on a loaded machine, well within the
    // three-second cell.
    let server = HttpServer::start_with_env(
        root.path(),
        &[],
        &[("JUPYTER_MCP_PROGRESS_GRACE_MS", "2000")],
    )
    .expect("server starts");
    let client = Client::http(&server.url).await.expect("client connects");
    // The first run starts the kernel, which may take longer than the grace.
    let warm = run_cells(&client, json!([2]), 60000).await.ok();
    assert_eq!(warm["status"], "completed");
    client.recorder.progress.lock().unwrap().clear();
    // Well within the grace: answered without a notification.
    let quick = client
        .call_with_progress(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": [2], "waitMs": 30000}),
            "quick",
        )
        .await
        .ok();
    assert_eq!(quick["status"], "completed");
    assert!(
        client.recorder.progress.lock().unwrap().is_empty(),
        "a quick run sent progress: {:?}",
        client.recorder.progress.lock().unwrap()
    );
    let receipt = client
        .call_with_progress(
            "run_cells",
            json!({"notebookRef": NB, "cellIds": [0, 1], "waitMs": 30000}),
            "run-progress",
        )
        .await
        .ok();
    assert_eq!(receipt["status"], "completed");
    let progress = client.recorder.progress.lock().unwrap().clone();
    assert!(!progress.is_empty(), "no progress notification arrived");
    assert!(progress.iter().all(|item| item.total == Some(2.0)));
    assert!(progress.iter().any(|item| item.progress >= 1.0));
    assert!(
        progress
            .windows(2)
            .all(|pair| pair[0].progress <= pair[1].progress),
        "progress went back: {progress:?}"
    );
    assert!(
        progress
            .iter()
            .filter_map(|item| item.message.as_deref())
            .any(|message| message.starts_with("tick ")),
        "no progress named the running cell's latest line: {progress:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_kernel_outlives_the_server() {
    for signal in ["-TERM", "-INT"] {
        let (_root, server, client) = serve(&["x = 1"]).await;
        run_cells(&client, json!([0]), 30000).await.ok();
        let info = client
            .call("get_kernel_info", json!({"notebookRef": NB}))
            .await
            .ok();
        let pid = info["kernel"]["pid"].as_u64().unwrap() as u32;
        assert!(process_alive(pid));
        let server_pid = server.pid();
        std::process::Command::new("kill")
            .args([signal, &server_pid.to_string()])
            .status()
            .unwrap();
        let status = server.stop().unwrap();
        assert!(status.success(), "{signal}: {status:?}");
        assert!(
            !process_alive(pid),
            "the kernel survived {signal} of the server"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_and_run_in_one_call() {
    let (_root, _server, client) = serve(&["base = 10"]).await;
    let edited = client
        .call(
            "edit_cells",
            json!({"notebookRef": NB, "run": true, "waitMs": 30000, "edits": [
                {"editType": "insert", "cellId": "BOTTOM", "newCode": "print(base * 2)"}
            ]}),
        )
        .await
        .ok();
    let execution = &edited["execution"];
    assert_eq!(execution["status"], "completed", "{edited}");
    // The inserted cell ran after its stale ancestor.
    assert_eq!(execution["cells"].as_array().unwrap().len(), 2);
    assert!(output_of(execution, 1).contains("20"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_usable_kernel_the_error_says_what_to_install() {
    // A root without a virtual environment, a PATH whose python3 lacks ipykernel, and no
    // kernelspecs anywhere Jupyter looks.
    let root = tempfile::tempdir().unwrap();
    write_code_notebook(root.path(), NB, &["1 + 1"]);
    let empty = tempfile::tempdir().unwrap();
    let data = empty.path().to_str().unwrap();
    let server = HttpServer::start_with_env(
        root.path(),
        &[],
        &[
            ("PATH", "/usr/bin:/bin"),
            ("JUPYTER_PATH", data),
            ("JUPYTER_DATA_DIR", data),
            ("HOME", data),
        ],
    )
    .unwrap();
    let client = Client::http(&server.url).await.unwrap();
    let run = client
        .call("run_cells", json!({"notebookRef": NB, "cellIds": [0]}))
        .await;
    assert_eq!(run.error_code(), "no_kernel", "{}", run.text());
    let message = run.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("ipykernel"), "{message}");
    let kernels = client
        .call("list_kernels", json!({"notebookRef": NB}))
        .await
        .ok();
    assert!(
        kernels["hint"].as_str().unwrap().contains("ipykernel"),
        "{kernels}"
    );
}
