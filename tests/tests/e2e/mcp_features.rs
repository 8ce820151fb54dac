//! The rest of MCP beyond tools: runs as tasks, notebooks and outputs as resources with links to
//! what a reply left out, change notifications for subscribers only, and prompts. Two real
//! clients: the official Python SDK on protocol 2026-07-28 (`tests/python/mcp_2026.py`) and the
//! rmcp client pinned to 2025-11-25 (sessions, `resources/subscribe`).

use std::path::Path;
use std::time::Duration;

use jupyter_mcp_tests::{Client, HttpServer};
use rmcp::model::{
    GetPromptRequestParams, ReadResourceRequestParams, ResourceContents, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde_json::{Value, json};

/// A 2×2 red PNG (base64), saved as a cell's output.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAFklEQVR4nGP8z8DAwMDAxMDAwMDAAAANHQEDasKb6QAAAABJRU5ErkJggg==";

/// Writes `root/name`: a notebook of `cells`.
fn write_notebook(root: &Path, name: &str, cells: &[Value]) {
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                     "language_info": {"name": "python"}},
        "cells": cells,
    });
    std::fs::write(root.join(name), notebook.to_string()).unwrap();
}

fn code(id: &str, source: &str, outputs: Value) -> Value {
    json!({"cell_type": "code", "id": id, "metadata": {}, "execution_count": null,
           "outputs": outputs, "source": source})
}

/// The notebooks of the scenarios, and the 2 MB log.
fn prepare(root: &Path) -> String {
    jupyter_mcp_tests::link_venv(root);
    let counter = root.join("count.txt");
    let count = format!("open({:?}, 'a').write('x')", counter.display().to_string());
    write_notebook(
        root,
        "tasks.ipynb",
        &[
            code("quick", "print('done')", json!([])),
            code(
                "slow",
                "import time\nprint('sleeping', flush=True) or time.sleep(60)",
                json!([]),
            ),
            code("count", &count, json!([])),
        ],
    );
    let figure = json!([{"output_type": "display_data", "metadata": {},
                         "data": {"image/png": PNG, "text/plain": "<Figure size 2x2>"}}]);
    write_notebook(root, "plot.ipynb", &[code("figure", "plot()", figure)]);
    let log: String = (0..40_000)
        .map(|line| format!("step {line:06}: loss {:.6}\n", 1.0 / (line as f64 + 1.0)))
        .collect();
    let stream = json!([{"output_type": "stream", "name": "stdout", "text": log}]);
    write_notebook(root, "log.ipynb", &[code("log", "train()", stream)]);
    write_notebook(root, "watched.ipynb", &[code("w", "x = 1\n", json!([]))]);
    log
}

#[tokio::test]
async fn a_2026_client_runs_tasks_reads_resources_follows_changes_and_renders_prompts() {
    let root = tempfile::tempdir().unwrap();
    let log = prepare(root.path());
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let script = jupyter_mcp_tests::workspace_root().join("tests/python/mcp_2026.py");
    let output = tokio::process::Command::new(jupyter_mcp_tests::python())
        .arg(script)
        .arg(&server.url)
        .arg(root.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let findings: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(findings["protocol"], "2026-07-28");
    assert!(
        findings["task_output"].as_str().unwrap().contains("done"),
        "{findings}"
    );

    // Cancelling the task interrupted the kernel: the run ended as an interrupt ends it.
    assert_eq!(findings["cancelled_status"], "cancelled", "{findings}");
    let cancelled = &findings["cancelled_receipt"];
    let interrupted = cancelled["reasonCode"] == "invalidated_by_interrupt"
        || cancelled["text"]
            .as_str()
            .unwrap()
            .contains("KeyboardInterrupt");
    assert!(
        interrupted,
        "the receipt says the run was interrupted: {cancelled}"
    );

    // The retry with the same key got the same task, and the cell ran once.
    assert_eq!(findings["same_task"], true);
    assert_eq!(
        std::fs::read_to_string(root.path().join("count.txt")).unwrap(),
        "x"
    );

    let resources = findings["resources"].as_array().unwrap();
    for name in ["tasks.ipynb", "plot.ipynb", "log.ipynb", "watched.ipynb"] {
        assert!(
            resources
                .iter()
                .any(|entry| entry[0].as_str().unwrap().ends_with(name)
                    && entry[1] == "application/x-ipynb+json"),
            "{name} is listed as a notebook: {resources:?}"
        );
    }
    assert!(
        resources
            .iter()
            .any(|entry| entry[0] == "ui://jupyter-mcp/output-viewer")
    );
    assert_eq!(findings["templates"].as_array().unwrap().len(), 2);
    assert_eq!(
        findings["png_blob"], PNG,
        "the PNG output is the file's bytes"
    );

    let links = findings["log_links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "one link for the condensed log: {findings}");
    assert!(links[0].as_str().unwrap().ends_with("#cells/log/outputs/0"));
    assert_eq!(
        findings["log_length"].as_u64().unwrap() as usize,
        log.len(),
        "the link resolves to the whole 2 MB log"
    );

    assert!(
        findings["update_uri"]
            .as_str()
            .unwrap()
            .ends_with("watched.ipynb"),
        "{findings}"
    );
    eprintln!(
        "a file change reached the subscriber after {:.3} s",
        findings["update_seconds"].as_f64().unwrap()
    );
    let prompts = findings["prompts"].as_array().unwrap();
    assert_eq!(prompts.len(), 3, "{prompts:?}");
    assert!(prompts.iter().all(|prompt| prompt[1] == true));
    assert!(
        findings["prompt_text"]
            .as_str()
            .unwrap()
            .contains("tasks.ipynb")
    );
    assert_eq!(
        findings["viewer_tools"],
        json!(["get_execution", "read_notebook", "run_cells"])
    );
    server.stop().unwrap();
}

fn notebook_uri(root: &Path, name: &str) -> String {
    host_files::file_uri(&root.canonicalize().unwrap().join(name))
}

#[tokio::test]
#[expect(
    deprecated,
    reason = "resources/subscribe is how a 2025-11-25 client subscribes"
)]
async fn a_2025_client_subscribes_reads_and_retries_runs_without_tasks() {
    let root = tempfile::tempdir().unwrap();
    prepare(root.path());
    let server = HttpServer::start(root.path(), &[]).unwrap();
    let subscriber = Client::http(&server.url).await.unwrap();
    let bystander = Client::http(&server.url).await.unwrap();
    let watched = notebook_uri(root.path(), "watched.ipynb");

    // No tasks for a 2025 client: run_cells answers with the receipt; the same key reports
    // the same run.
    let arguments = json!({"notebookRef": "tasks.ipynb", "cellIds": ["count"],
                           "idempotencyKey": "retry-1", "waitMs": 60000});
    let first = subscriber.call("run_cells", arguments.clone()).await.ok();
    let second = subscriber.call("run_cells", arguments).await.ok();
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(first["executionId"], second["executionId"]);
    assert_eq!(
        std::fs::read_to_string(root.path().join("count.txt")).unwrap(),
        "x"
    );

    // Resources through the legacy session, the PNG as a blob.
    let listed = subscriber.peer().list_all_resources().await.unwrap();
    assert!(listed.iter().any(|resource| resource.uri == watched));
    let png = subscriber
        .peer()
        .read_resource(ReadResourceRequestParams::new(format!(
            "{}#cells/figure/outputs/0",
            notebook_uri(root.path(), "plot.ipynb")
        )))
        .await
        .unwrap();
    let blob = png.contents.iter().find_map(|content| match content {
        ResourceContents::BlobResourceContents {
            blob, mime_type, ..
        } => {
            assert_eq!(mime_type.as_deref(), Some("image/png"));
            Some(blob.clone())
        }
        _ => None,
    });
    assert_eq!(blob.as_deref(), Some(PNG));
    let missing = subscriber
        .peer()
        .read_resource(ReadResourceRequestParams::new(format!(
            "{watched}#cells/nope/source"
        )))
        .await;
    assert!(missing.is_err(), "an unknown cell is not found");

    // The subscriber hears changes; the bystander, who subscribed and then unsubscribed, does not.
    subscriber
        .peer()
        .subscribe(SubscribeRequestParams::new(watched.clone()))
        .await
        .unwrap();
    bystander
        .peer()
        .subscribe(SubscribeRequestParams::new(watched.clone()))
        .await
        .unwrap();
    bystander
        .peer()
        .unsubscribe(UnsubscribeRequestParams::new(watched.clone()))
        .await
        .unwrap();
    let path = root.path().join("watched.ipynb");
    for (round, source) in ["x = 2\n", "x = 3\n"].into_iter().enumerate() {
        let mut changed: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        changed["cells"][0]["source"] = json!(source);
        std::fs::write(&path, changed.to_string()).unwrap();
        assert!(
            subscriber
                .recorder
                .wait_for_updates(round + 1, Duration::from_secs(10))
                .await,
            "the subscriber heard change {round}"
        );
    }
    assert_eq!(
        subscriber.recorder.updates.lock().unwrap().as_slice(),
        [watched.clone(), watched.clone()]
    );
    assert!(
        bystander.recorder.updates.lock().unwrap().is_empty(),
        "a client that is not subscribed hears nothing"
    );

    // Prompts over the legacy session.
    let prompts = subscriber.peer().list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 3);
    let rendered = subscriber
        .peer()
        .get_prompt(
            GetPromptRequestParams::new("make-reproducible").with_arguments(
                json!({"notebook": "tasks.ipynb"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    let text = serde_json::to_string(&rendered.messages).unwrap();
    assert!(
        text.contains("restart_kernels") && text.contains("tasks.ipynb"),
        "{text}"
    );
    // The prompts' notebook argument completes to the notebooks whose names contain the text.
    let completed = subscriber
        .peer()
        .complete_prompt_simple("orient", "notebook", "TAS")
        .await
        .unwrap();
    assert_eq!(completed, ["tasks.ipynb"]);
    server.stop().unwrap();
}
