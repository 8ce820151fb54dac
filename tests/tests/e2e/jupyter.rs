//! Working alongside JupyterLab: `jupyter-mcp serve --jupyter URL` against a real Jupyter Server
//! with jupyter-collaboration on loopback, and the person played by a second real Yjs client
//! (a pycrdt document over httpx-ws, `tests/python/collab_peer.py`). One server serves the
//! tests that run at the same time; each test has notebooks of its own (the HTTPS test starts a
//! server of its own, with a test CA).

use std::time::{Duration, Instant};

use jupyter_mcp_tests::browser::{Browser, save_screenshot};
use jupyter_mcp_tests::collab::{
    CollabServer, JupyterLab, Peer, api_get, shared_server, write_notebook,
};
use jupyter_mcp_tests::kernel_runs::NotebookRuns;
use jupyter_mcp_tests::kernel_server::TestCa;
use jupyter_mcp_tests::{
    CLIENT_TITLE, Call, Client, HttpServer, is_terminal, nbformat_problems, python, server_binary,
    text_of,
};
use serde_json::{Value, json};

/// `jupyter-mcp` serving `server`'s notebooks, with `extra` arguments.
fn serve(server: &CollabServer, transfers: &std::path::Path, extra: &[&str]) -> HttpServer {
    let url = server.url();
    let token_file = server.token_file().display().to_string();
    let mut args = vec!["--jupyter", &url, "--kernel-server-token-file", &token_file];
    args.extend_from_slice(extra);
    HttpServer::start(transfers, &args).expect("jupyter-mcp starts with --jupyter")
}

/// The outline cell with `id`.
fn cell<'a>(cells: &'a [Value], id: &str) -> &'a Value {
    cells
        .iter()
        .find(|cell| cell["cell_id"] == id)
        .unwrap_or_else(|| panic!("no cell {id} in {cells:?}"))
}

/// Reads the notebook's sources until `done` holds for them (a change of the person's reaching
/// the agent's copy); panics after 20 s.
async fn agent_sees(
    client: &Client,
    notebook: &str,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let read = client.read_view(notebook, "source").await;
        let cells = read["cells"].as_array().cloned().unwrap_or_default();
        if done(&cells) {
            return cells;
        }
        assert!(Instant::now() < deadline, "the agent never saw it: {read}");
        // The next read goes out as soon as this one is answered; each is a round trip to the
        // agent's copy, which the person's update reaches in milliseconds.
        tokio::task::yield_now().await;
    }
}

fn source_of(cells: &[Value], id: &str) -> String {
    cell(cells, id)["source"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_and_a_person_edit_one_live_notebook_and_neither_loses_an_edit() {
    let server = shared_server();
    let transfers = tempfile::tempdir().unwrap();
    let path = write_notebook(&server, "live.ipynb", &["x = 1\ny = 2\nz = 3", "a = 10"]);
    let mcp = serve(&server, transfers.path(), &["--no-kernels"]);
    let client = Client::http(&mcp.url).await.unwrap();
    let mut person = Peer::start(&server.url(), server.token()).unwrap();
    person.open("live.ipynb").unwrap();

    // The agent's edit appears in the person's document.
    let cells = client.outline_cells("live.ipynb").await;
    let first = cell(&cells, "c0").clone();
    let second = cell(&cells, "c1").clone();
    let edited = client
        .edit_source("live.ipynb", "c1", json!(second["rev"]), "a = 11")
        .await
        .ok();
    let (mut person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c1", "contains": "a = 11", "timeout": 20}))
        .await;
    seen.expect("the person sees the agent's edit");

    // The person types in line 1 of c0 while the agent rewrites line 3 of it: the two edits
    // cross (each made without the other), and both survive on both sides.
    person
        .ask_blocking(
            json!({"cmd": "type_offline", "cell": "c0", "after": "x = 1", "text": "  # person"}),
        )
        .unwrap();
    client
        .call(
            "edit_cells",
            json!({"notebookRef": "live.ipynb", "edits": [{
                "editType": "replace", "cellId": "c0", "expectedRev": first["rev"],
                "oldText": "z = 3", "newCode": "z = 30"
            }]}),
        )
        .await
        .ok();
    let (person, delivered) = person
        .ask(json!({"cmd": "deliver_offline", "after": {"cell": "c0", "contains": "z = 30"}}))
        .await;
    delivered.unwrap();
    let merged = "x = 1  # person\ny = 2\nz = 30";
    let (mut person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "contains": merged, "timeout": 20}))
        .await;
    seen.expect("the person keeps their typing and sees the agent's line");
    agent_sees(&client, "live.ipynb", |cells| {
        source_of(cells, "c0") == merged
    })
    .await;

    // An edit quoting a rev the person has since changed is refused with the current source.
    let stale_rev = edited["applied"][0]["cells"][0]["rev"].clone();
    person
        .ask_blocking(json!({"cmd": "set_source", "cell": "c1", "source": "a = 12"}))
        .unwrap();
    agent_sees(&client, "live.ipynb", |cells| {
        source_of(cells, "c1") == "a = 12"
    })
    .await;
    let refused = client
        .edit_source("live.ipynb", "c1", json!(stale_rev), "a = 99")
        .await;
    assert!(refused.is_error(), "{}", refused.text());
    let refusal = refused.error();
    assert_eq!(refused.error_code(), "rev_mismatch", "{refusal}");
    assert_eq!(
        refusal["details"]["current"]["source"], "a = 12",
        "{refusal}"
    );
    let current_rev = refusal["details"]["current"]["rev"].clone();

    // Typing in another cell since the agent's last read does not refuse its edit.
    person
        .ask_blocking(json!({"cmd": "type", "cell": "c0", "text": "\nw = 4"}))
        .unwrap();
    agent_sees(&client, "live.ipynb", |cells| {
        source_of(cells, "c0").ends_with("w = 4")
    })
    .await;
    client
        .edit_source("live.ipynb", "c1", json!(current_rev), "a = 13")
        .await
        .ok();
    let (mut person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c1", "contains": "a = 13", "timeout": 20}))
        .await;
    seen.unwrap();

    // The agent is in JupyterLab's collaborator list under its client's name, with a cursor.
    let name = format!("{CLIENT_TITLE} (jupyter-mcp)");
    let collaborators = person
        .ask_blocking(json!({"cmd": "collaborators", "name": name, "timeout": 20}))
        .unwrap();
    let entry = collaborators["states"]
        .as_array()
        .unwrap()
        .iter()
        .find(|state| state["user"]["display_name"] == name)
        .unwrap_or_else(|| panic!("no collaborator {name}: {collaborators}"));
    assert_eq!(entry["current"], "notebook:live.ipynb", "{entry}");
    let cursors = person
        .ask_blocking(json!({"cmd": "cursors", "timeout": 20}))
        .unwrap();
    assert_eq!(
        cursors["states"][0]["user"]["display_name"], name,
        "{cursors}"
    );

    // Undo reverts the agent's last change only (a rev-checked change of its own): the person's
    // typing in the other cell stays.
    let undone = client
        .call("undo_last", json!({"notebookRef": "live.ipynb"}))
        .await
        .ok();
    assert_eq!(undone["cellCount"], 2, "{undone}");
    let (mut person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c1", "contains": "a = 12", "timeout": 20}))
        .await;
    let after_undo = seen.unwrap();
    let person_cells = after_undo["cells"].as_array().unwrap();
    assert!(
        person_cells[0]["source"]
            .as_str()
            .unwrap()
            .contains("# person"),
        "the person's typing stays: {after_undo}"
    );

    // The server saves: the file validates and holds both sides' changes.
    client
        .call("save_notebooks", json!({"notebookRefs": ["live.ipynb"]}))
        .await
        .ok();
    assert_eq!(
        nbformat_problems(std::slice::from_ref(&path)),
        Vec::<String>::new()
    );
    let saved = notebook_model::Notebook::parse(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(saved.cell(0).unwrap().source(), format!("{merged}\nw = 4"));
    assert_eq!(saved.cell(1).unwrap().source(), "a = 12");
    person.ask_blocking(json!({"cmd": "cells"})).unwrap();
    drop(person);
    client.close().await.unwrap();
}

/// Waits for a marker file, so a run goes on until the test lets it end.
fn gated_cell(gate: &std::path::Path) -> String {
    format!(
        "import os, time\nprint('tick 0', flush=True)\nwhile not os.path.exists({gate:?}):\n    time.sleep(0.05)\nprint('done', flush=True)\n41 + 1"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_run_streams_its_outputs_to_the_person_on_the_notebooks_own_kernel() {
    let server = shared_server();
    let transfers = tempfile::tempdir().unwrap();
    let gate = server.state_dir().join("run-gate");
    let source = gated_cell(&gate);
    write_notebook(&server, "run.ipynb", &[&source, "y = 2"]);
    let mcp = serve(&server, transfers.path(), &[]);
    let client = Client::http(&mcp.url).await.unwrap();
    let nb = NotebookRuns {
        client: &client,
        notebook: "run.ipynb",
        patience: Duration::from_secs(60),
    };
    let mut person = Peer::start(&server.url(), server.token()).unwrap();
    person.open("run.ipynb").unwrap();

    let started = nb
        .ok("run_cells", json!({"cellIds": ["c0"], "waitMs": 0}))
        .await;
    assert!(!is_terminal(&started), "{started}");
    // The person sees the first output while the run goes on.
    let (person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "output": "tick 0", "timeout": 60}))
        .await;
    let seen = seen.expect("the output reaches the person during the run");
    assert_eq!(seen["cells"][0]["execution_count"], Value::Null, "{seen}");
    let during = nb.ok("get_execution", json!({})).await;
    assert!(!is_terminal(&during), "the run is still going: {during}");
    std::fs::write(&gate, "").unwrap();
    let (person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "output": "42", "count": true, "timeout": 60}))
        .await;
    let seen = seen.expect("the rest of the outputs and the count arrive");
    let output = text_of(&seen["cells"][0]["output_text"]);
    assert!(output.contains("done"), "{seen}");
    let receipt = nb.follow(is_terminal).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");

    // One kernel, the notebook session's (the one its JupyterLab tab would show).
    assert!(session_kernel(&server, "run.ipynb").is_some(), "a session");
    let outline = client.outline_cells("run.ipynb").await;
    assert_eq!(cell(&outline, "c0")["state"], "fresh", "{outline:?}");
    assert_eq!(
        cell(&outline, "c0")["execution_count"],
        seen["cells"][0]["execution_count"]
    );

    // Transfers go through the shared kernel, between --root and the kernel's side.
    let bytes: Vec<u8> = (0..300_000u32).map(|index| (index % 251) as u8).collect();
    std::fs::write(transfers.path().join("data.bin"), &bytes).unwrap();
    let kernel_side = server.state_dir().join("uploaded.bin");
    let kernel_path = kernel_side.to_str().unwrap();
    let uploaded = nb.transfer("upload_file", "data.bin", kernel_path).await;
    assert_eq!(uploaded["verified"], true, "{uploaded}");
    assert_eq!(std::fs::read(&kernel_side).unwrap(), bytes);
    let downloaded = nb.transfer("download_file", "back.bin", kernel_path).await;
    assert_eq!(downloaded["verified"], true, "{downloaded}");
    assert_eq!(
        std::fs::read(transfers.path().join("back.bin")).unwrap(),
        bytes
    );

    drop(person);
    client.close().await.unwrap();
    drop(mcp);
    // The agent left; the kernel is the session's and keeps running.
    assert!(
        session_kernel(&server, "run.ipynb").is_some(),
        "still a session"
    );
}

/// The kernel of the server session of `path` (`{"id", "name", …}`), if it has a session; panics
/// when it has more than one.
fn session_kernel(server: &CollabServer, path: &str) -> Option<Value> {
    let sessions = api_get(server, "/api/sessions").unwrap();
    let matching: Vec<&Value> = sessions
        .as_array()
        .unwrap()
        .iter()
        .filter(|session| session["path"] == path)
        .collect();
    assert!(matching.len() <= 1, "one session per notebook: {sessions}");
    matching.first().map(|session| session["kernel"].clone())
}

/// A cell that prints which kernelspec's environment its kernel has.
const PRINT_CHOICE: &str =
    "import os\nprint('kernel=' + os.environ.get('JMCP_KERNEL_CHOICE', 'default'), flush=True)";

/// Runs `c0` of `notebook` (a [`PRINT_CHOICE`] cell) to its end; which kernelspec's environment
/// the kernel it ran on has (`default` or `second`).
async fn kernel_choice_of_a_run(client: &Client, notebook: &str) -> &'static str {
    let receipt = client
        .call(
            "run_cells",
            json!({"notebookRef": notebook, "cellIds": ["c0"], "waitMs": 60_000}),
        )
        .await
        .ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let printed = receipt.to_string();
    ["default", "second"]
        .into_iter()
        .find(|choice| printed.contains(&format!("kernel={choice}")))
        .unwrap_or_else(|| panic!("the run printed its kernel: {receipt}"))
}

async fn list_kernels(client: &Client, notebook: &str) -> Value {
    client
        .call("list_kernels", json!({"notebookRef": notebook}))
        .await
        .ok()
}

async fn select_kernel(client: &Client, notebook: &str, kernel_id: &str) -> Call {
    client
        .call(
            "select_kernel",
            json!({"notebookRef": notebook, "kernelId": kernel_id}),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_changes_the_notebooks_kernel_to_another_kernelspec_as_jupyterlab_does() {
    let server = shared_server();
    // A second kernelspec on the server, told apart by the environment its kernels get.
    let second_label = "Second Python (jupyter-mcp tests)";
    server
        .server
        .install_kernelspec(
            "jmcp-second",
            &json!({
                "argv": [python(), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": second_label,
                "language": "python",
                "env": {"JMCP_KERNEL_CHOICE": "second"},
            }),
        )
        .unwrap();
    let transfers = tempfile::tempdir().unwrap();
    write_notebook(&server, "choice.ipynb", &[PRINT_CHOICE, "y = 2"]);
    write_notebook(&server, "unopened.ipynb", &["z = 3"]);
    let mcp = serve(&server, transfers.path(), &[]);
    let client = Client::http(&mcp.url).await.unwrap();
    let tools = client.tool_names().await.unwrap();
    for tool in ["list_kernels", "select_kernel", "configure_kernel"] {
        assert!(tools.iter().any(|name| name == tool), "{tool}: {tools:?}");
    }
    let mut person = Peer::start(&server.url(), server.token()).unwrap();
    person.open("choice.ipynb").unwrap();

    // The server's kernelspecs, its default first; the notebook's (python3) is selected.
    let listed = list_kernels(&client, "choice.ipynb").await;
    let kernels = listed["kernels"].as_array().unwrap();
    assert_eq!(kernels[0]["id"], "remote:python3", "{listed}");
    let second = kernels
        .iter()
        .find(|kernel| kernel["id"] == "remote:jmcp-second")
        .unwrap_or_else(|| panic!("the second kernelspec is listed: {listed}"));
    assert_eq!(second["label"], second_label, "{second}");
    assert_eq!(second["language"], "python", "{second}");
    assert_eq!(second["source"], "remote", "{second}");
    assert_eq!(listed["selected"], "remote:python3", "{listed}");

    // A run starts the notebook's session on the default kernel.
    assert_eq!(
        kernel_choice_of_a_run(&client, "choice.ipynb").await,
        "default"
    );
    let before = session_kernel(&server, "choice.ipynb").expect("the run started a session");
    assert_eq!(before["name"], "python3", "{before}");

    // An id the server does not list changes nothing and names the ids that exist.
    let refused = select_kernel(&client, "choice.ipynb", "jmcp-second").await;
    assert_eq!(
        refused.error_code(),
        "kernel_not_found",
        "{}",
        refused.text()
    );
    let message = refused.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("remote:python3") && message.contains("remote:jmcp-second"),
        "{message}"
    );
    assert_eq!(
        session_kernel(&server, "choice.ipynb").unwrap()["id"],
        before["id"]
    );

    // Selecting the second kernelspec changes the session's kernel, as Change Kernel does.
    let selected = select_kernel(&client, "choice.ipynb", "remote:jmcp-second")
        .await
        .ok();
    assert_eq!(selected["kernel"]["id"], "remote:jmcp-second", "{selected}");
    assert_eq!(selected["replacedRunningKernel"], true, "{selected}");
    let after = session_kernel(&server, "choice.ipynb").expect("the session stays");
    assert_eq!(after["name"], "jmcp-second", "{after}");
    assert_ne!(after["id"], before["id"], "a new kernel: {after}");
    // The person's document names it as JupyterLab would.
    let (person, seen) = person
        .ask(json!({"cmd": "kernelspec", "name": "jmcp-second", "timeout": 20}))
        .await;
    let seen = seen.expect("the person's document records the new kernelspec");
    assert_eq!(seen["kernelspec"]["display_name"], second_label, "{seen}");
    assert_eq!(seen["kernelspec"]["language"], "python", "{seen}");
    // Nothing that ran on the old kernel is fresh on the new one.
    let outline = client.outline_cells("choice.ipynb").await;
    assert_eq!(cell(&outline, "c0")["state"], "stale", "{outline:?}");
    let listed = list_kernels(&client, "choice.ipynb").await;
    assert_eq!(listed["selected"], "remote:jmcp-second", "{listed}");

    // The next run is on the new kernel, and counts on it.
    assert_eq!(
        kernel_choice_of_a_run(&client, "choice.ipynb").await,
        "second"
    );
    let outline = client.outline_cells("choice.ipynb").await;
    assert_eq!(cell(&outline, "c0")["state"], "fresh", "{outline:?}");
    let (_person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "output": "kernel=second", "timeout": 20}))
        .await;
    seen.expect("the person sees the run on the new kernel");
    let configured = client
        .call("configure_kernel", json!({"notebookRef": "choice.ipynb"}))
        .await
        .ok();
    assert_eq!(configured["ready"], true, "{configured}");
    assert_eq!(
        configured["kernel"]["id"], "remote:jmcp-second",
        "{configured}"
    );
    assert_eq!(configured["kernel"]["label"], second_label, "{configured}");
    assert_eq!(
        session_kernel(&server, "choice.ipynb").unwrap()["id"],
        after["id"],
        "configure_kernel attaches to the session's kernel"
    );

    // A notebook without a session gets one with the chosen kernel; nothing was replaced.
    assert_eq!(session_kernel(&server, "unopened.ipynb"), None);
    let selected = select_kernel(&client, "unopened.ipynb", "remote:jmcp-second")
        .await
        .ok();
    assert_eq!(selected["replacedRunningKernel"], false, "{selected}");
    let started = session_kernel(&server, "unopened.ipynb").expect("a session was started");
    assert_eq!(started["name"], "jmcp-second", "{started}");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_https_the_agent_edits_and_runs_trusting_the_kernel_server_ca() {
    let ca = TestCa::new("jupyter-mcp test CA").unwrap();
    let server = CollabServer::start_with_tls(Some(ca.issue("collab").unwrap()))
        .expect("a Jupyter server with collaboration starts over TLS");
    assert!(server.url().starts_with("https://"), "{}", server.url());
    write_notebook(&server, "tls.ipynb", &["a = 1", "print('over tls', 6 * 7)"]);
    let transfers = tempfile::tempdir().unwrap();

    // Without the CA the start's first call fails, saying why and which option fixes it.
    let cache = tempfile::tempdir().unwrap();
    let refused = tokio::process::Command::new(server_binary())
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env_remove("JUPYTER_MCP_TOKEN")
        .args(["serve", "--port", "0", "--root"])
        .arg(transfers.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["--jupyter", &server.url(), "--kernel-server-token-file"])
        .arg(server.token_file())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let refused = tokio::time::timeout(Duration::from_secs(60), refused)
        .await
        .expect("jupyter-mcp gives up on the untrusted server within 60 s")
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said}");
    assert!(
        said.contains("certificate authority this machine does not trust")
            && said.contains("--kernel-server-ca"),
        "{said}"
    );
    assert!(!said.contains(server.token()), "{said}");

    // With it: REST, the room over wss:// and the kernel's WebSocket all work.
    let ca_file = ca.ca_file().display().to_string();
    let mcp = serve(&server, transfers.path(), &["--kernel-server-ca", &ca_file]);
    let client = Client::http(&mcp.url).await.unwrap();
    let mut person =
        Peer::start_trusting(&server.url(), server.token(), Some(&ca.ca_file())).unwrap();
    person.open("tls.ipynb").unwrap();
    let cells = client.outline_cells("tls.ipynb").await;
    let first = cell(&cells, "c0").clone();
    let edited = client
        .edit_source("tls.ipynb", "c0", json!(first["rev"]), "a = 2")
        .await
        .ok();
    let (person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "contains": "a = 2", "timeout": 20}))
        .await;
    seen.unwrap_or_else(|failure| panic!("the person sees the agent's edit ({edited}): {failure}"));

    client
        .call(
            "run_cells",
            json!({"notebookRef": "tls.ipynb", "cellIds": ["c1"], "waitMs": 0}),
        )
        .await
        .ok();
    let receipt = client
        .follow("tls.ipynb", Duration::from_secs(60), is_terminal)
        .await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    assert!(receipt.to_string().contains("over tls 42"), "{receipt}");
    let (_person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c1", "output": "over tls 42", "timeout": 60}))
        .await;
    seen.expect("the run's output reaches the person");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jupyterlab_in_a_browser_shows_the_agents_cell_and_output_without_a_reload() {
    let server = shared_server();
    let transfers = tempfile::tempdir().unwrap();
    write_notebook(&server, "lab.ipynb", &["person_value = 41"]);
    let mcp = serve(&server, transfers.path(), &[]);
    let client = Client::http(&mcp.url).await.unwrap();
    // The person opens the notebook in JupyterLab, which starts its kernel session.
    let browser = Browser::launch().await.expect("Chromium starts");
    let lab = JupyterLab::open(&browser, &server, "lab.ipynb")
        .await
        .expect("JupyterLab opens the notebook");
    // The agent finds that kernel (the tab's), then the person runs their cell in the page.
    let info = client
        .call("get_kernel_info", json!({"notebookRef": "lab.ipynb"}))
        .await
        .ok();
    assert!(info["kernel"]["epoch"].is_u64(), "the tab's kernel: {info}");
    lab.run_first_cell().await.unwrap();
    // What the person ran counts for staleness, and lives in the one shared kernel.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let outline = client.outline_cells("lab.ipynb").await;
        if cell(&outline, "c0")["state"] == "fresh" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the person's run was not seen: {outline:?}"
        );
        tokio::task::yield_now().await;
    }
    let inspected = client
        .call(
            "inspect_variable",
            json!({"notebookRef": "lab.ipynb", "name": "person_value"}),
        )
        .await
        .ok();
    assert!(inspected.to_string().contains("41"), "{inspected}");

    // The agent inserts and runs a cell through MCP; the page shows it and its output.
    let edited = client
        .call(
            "edit_cells",
            json!({"notebookRef": "lab.ipynb", "run": true, "waitMs": 60_000, "edits": [{
                "editType": "insert", "cellId": "c0",
                "newCode": "print('hello from the agent', person_value + 1)"
            }]}),
        )
        .await
        .ok();
    assert_eq!(edited["execution"]["status"], "completed", "{edited}");
    let shown = lab
        .wait_for_cell("hello from the agent", "hello from the agent 42")
        .await
        .expect("the page shows the agent's cell and its output");
    let png = lab.screenshot().await.unwrap();
    save_screenshot("jupyterlab-agent-cell", &png).unwrap();
    assert!(
        shown["prompt"]
            .as_str()
            .is_some_and(|prompt| prompt.starts_with('[') && !prompt.contains('*')),
        "a settled prompt with the count: {shown}"
    );
    drop(lab);
    drop(browser);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_jupyter_server_restarts_the_agent_works_on_a_fresh_copy_of_the_room() {
    // A server of its own: this test restarts it.
    let mut server = CollabServer::start().unwrap();
    let transfers = tempfile::tempdir().unwrap();
    let path = write_notebook(&server, "again.ipynb", &["a = 1"]);
    let mcp = serve(&server, transfers.path(), &["--no-kernels"]);
    let client = Client::http(&mcp.url).await.unwrap();
    let cells = client.outline_cells("again.ipynb").await;
    client
        .edit_source("again.ipynb", "c0", json!(cells[0]["rev"]), "a = 2")
        .await
        .ok();
    client
        .call("save_notebooks", json!({"notebookRefs": ["again.ipynb"]}))
        .await
        .ok();
    // The server dies and comes back on the same port: its rooms and session are new. (A
    // server that is asked to stop waits for its room clients to leave first.)
    server.server.crash_and_restart().unwrap();
    let cells = agent_sees(&client, "again.ipynb", |cells| {
        source_of(cells, "c0") == "a = 2"
    })
    .await;
    client
        .edit_source("again.ipynb", "c0", json!(cells[0]["rev"]), "a = 3")
        .await
        .ok();
    let mut person = Peer::start(&server.url(), server.token()).unwrap();
    let opened = person.open("again.ipynb").unwrap();
    let (person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "contains": "a = 3", "timeout": 20}))
        .await;
    let seen = seen.unwrap_or_else(|failure| panic!("{failure}; at open: {opened}"));
    assert_eq!(
        seen["cells"].as_array().unwrap().len(),
        1,
        "no duplicated content from the old history: {seen}"
    );
    client
        .call("save_notebooks", json!({"notebookRefs": ["again.ipynb"]}))
        .await
        .ok();
    let saved = notebook_model::Notebook::parse(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(saved.len(), 1);
    assert_eq!(saved.cell(0).unwrap().source(), "a = 3");
    drop(person);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_jupyterlab_host_shares_a_port_with_a_standalone_server() {
    let server = shared_server();
    write_notebook(&server, "shared.ipynb", &["s = 1"]);
    let runtime = tempfile::tempdir().unwrap();
    let runtime_dir = runtime.path().to_str().unwrap().to_owned();
    let port = jupyter_mcp_tests::free_port();
    let files = tempfile::tempdir().unwrap();
    jupyter_mcp_tests::write_code_notebook(files.path(), "local.ipynb", &["l = 1"]);
    let standalone = HttpServer::start_on(
        files.path(),
        port,
        &["--runtime-dir", &runtime_dir, "--no-kernels"],
    )
    .unwrap();
    let url = server.url();
    let token_file = server.token_file().display().to_string();
    let transfers = tempfile::tempdir().unwrap();
    let jupyter = HttpServer::start_on(
        transfers.path(),
        port,
        &[
            "--runtime-dir",
            &runtime_dir,
            "--no-kernels",
            "--jupyter",
            &url,
            "--kernel-server-token-file",
            &token_file,
        ],
    )
    .unwrap();
    assert!(jupyter.banner.contains("as a peer"), "{}", jupyter.banner);
    let client = Client::http(&standalone.url).await.unwrap();
    // A peer is registered with the broker before it prints its banner: one URL answers for
    // both windows at once.
    let listing = client.call("list_notebooks", json!({})).await.ok();
    assert_eq!(
        listing["windows"].as_array().map(Vec::len),
        Some(2),
        "{listing}"
    );
    let shared = listing["windows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|window| window["notebooks"].as_array().unwrap().iter())
        .find(|notebook| notebook["path"] == "shared.ipynb")
        .unwrap_or_else(|| panic!("the server's notebook is listed: {listing}"))
        .clone();
    assert!(
        shared["uri"]
            .as_str()
            .unwrap()
            .ends_with("/lab/tree/shared.ipynb"),
        "{shared}"
    );
    let outline = client
        .outline_cells(shared["notebookRef"].as_str().unwrap())
        .await;
    assert_eq!(outline[0]["cell_id"], "c0");
    client.close().await.unwrap();
    drop(jupyter);
    drop(standalone);
}
