//! The wheel's Jupyter Server extension: installed, a `jupyter server` (and a JupyterHub
//! user's server) serves MCP at `<base_url>mcp` behind the server's own authentication, on its
//! live documents, and leaves no process behind when it stops.

use std::path::Path;
use std::time::{Duration, Instant};

use jupyter_mcp_tests::collab::{CollabServer, Peer, write_notebook};
use jupyter_mcp_tests::hub::Hub;
use jupyter_mcp_tests::kernel_server::{KernelServer, ServerKind, https_request};
use jupyter_mcp_tests::{http_request, python, workspace_root};
use serde_json::{Value, json};

use crate::{WheelEnv, processes_of};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

const NEW_SOURCE: &str = "y = 40 + 2\nprint('answer', y)";

/// Writes `gated.ipynb` into `folder`: one cell that prints, then waits for the file `gate`,
/// which the SDK client makes only when a progress notification of the run reached it.
fn write_gated_notebook(folder: &Path, gate: &Path) {
    let source = format!(
        "import os, time\nprint('waiting', flush=True)\nwhile not os.path.exists({:?}):\n    time.sleep(0.05)\nprint('released')",
        gate.display().to_string()
    );
    jupyter_mcp_tests::write_code_notebook(folder, "gated.ipynb", &[&source]);
}

/// Runs the official Python SDK client (`tests/python/mcp_through_jupyter.py`) against `url`
/// with `token` and checks its findings (see [`check_findings`]). It also runs `gated.ipynb`,
/// proving that the stream of that call reaches it as it is written.
fn sdk_client(url: &str, token: &str, notebook: &str, gate: &Path, ca: Option<&Path>) {
    let mut command = std::process::Command::new(python());
    command
        .arg(workspace_root().join("tests/python/mcp_through_jupyter.py"))
        .args([url, token, notebook, "c0", NEW_SOURCE, "gated.ipynb"])
        .arg(gate);
    if let Some(ca) = ca {
        command.env("SSL_CERT_FILE", ca);
    }
    let output = crate::run(&mut command);
    let last = output.lines().last().unwrap_or_default();
    let findings = serde_json::from_str(last).unwrap_or_else(|error| panic!("{error}: {output}"));
    check_findings(&findings, notebook);
}

/// Waits until `person` sees the agent's edit of `c0` and the output of its run, live.
async fn sees_the_agents_work(person: Peer) {
    let (person, seen) = person
        .ask(json!({"cmd": "wait", "cell": "c0", "contains": "y = 40 + 2", "output": "answer 42", "timeout": 60}))
        .await;
    seen.expect("the person sees the agent's edit and its output live");
    drop(person);
}

/// What an agent must have seen through `/mcp`: the tools, the notebook, its edit and its run.
fn check_findings(findings: &Value, notebook: &str) {
    let tools: Vec<&str> = findings["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"run_cells") && tools.contains(&"edit_cells"),
        "{tools:?}"
    );
    assert!(
        findings["notebooks"].to_string().contains(notebook),
        "{findings}"
    );
    assert!(
        !findings["edit"].to_string().contains("\"error\""),
        "{findings}"
    );
    assert_eq!(findings["run"]["status"], "completed", "{findings}");
    assert!(
        findings["run"].to_string().contains("answer 42"),
        "{findings}"
    );
    // The gated cell ended: a progress notification reached the client while the call was still
    // open (the cell could not end before), so the proxy streamed it rather than buffering.
    let streamed = &findings["streamed"];
    assert_eq!(streamed["run"]["status"], "completed", "{findings}");
    assert!(
        streamed["run"].to_string().contains("released"),
        "{findings}"
    );
    assert!(
        !streamed["progress"].as_array().unwrap().is_empty(),
        "{findings}"
    );
}

/// Waits until `check` holds, failing with `what` after `seconds`.
fn wait_for(seconds: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check() {
        assert!(Instant::now() < deadline, "{what} (waited {seconds} s)");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn refused(status: u16) -> bool {
    matches!(status, 401 | 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jupyter_server_serves_mcp_behind_its_token_and_the_agent_edits_live() {
    let env = WheelEnv::shared();
    let binary = env.binary();
    let mut server = CollabServer::start_from(&env.bin().join("python"), None).unwrap();
    write_notebook(&server, "shared.ipynb", &["x = 1"]);
    let port = server.port();
    let post = |token: Option<&str>| {
        let authorization = token.map(|token| format!("token {token}"));
        let mut headers = vec![("Accept", "application/json, text/event-stream")];
        if let Some(value) = &authorization {
            headers.push(("Authorization", value));
        }
        http_request(port, "POST", "/mcp", &headers, INITIALIZE).unwrap()
    };
    // Nothing was configured: installing the wheel enabled the extension.
    let (status, body) = post(None);
    assert!(refused(status), "without a token: {status} {body}");
    let (status, body) = post(Some("not-the-token"));
    assert!(refused(status), "with a wrong token: {status} {body}");
    let (status, body) = post(Some(server.token()));
    assert_eq!(
        status,
        200,
        "with the server's token: {body}\n{}",
        server.log()
    );

    // The person has the notebook open; the agent edits and runs it through /mcp.
    let mut person = Peer::start(&server.url(), server.token()).unwrap();
    person.open("shared.ipynb").unwrap();
    let gate = server.state_dir().join("gate");
    write_gated_notebook(server.root(), &gate);
    sdk_client(
        &format!("{}mcp", server.url()),
        server.token(),
        "shared.ipynb",
        &gate,
        None,
    );
    sees_the_agents_work(person).await;

    // One process of ours served it; stopping the server leaves none.
    let marker = format!("127.0.0.1:{port}/");
    assert_eq!(
        processes_of(&binary, &marker).len(),
        1,
        "one jupyter-mcp runs beside the server"
    );
    server.server.stop().unwrap();
    wait_for(15, "jupyter-mcp stops with the server", || {
        processes_of(&binary, &marker).is_empty()
    });
    assert!(
        server.log().contains("jupyter-mcp: serving"),
        "{}",
        server.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_collaboration_mcp_answers_503_with_the_reason() {
    let env = WheelEnv::shared();
    let root = tempfile::tempdir().unwrap();
    // jupyter-collaboration installed but turned off: the binary cannot work alongside
    // JupyterLab, and says so.
    let server = KernelServer::start_from(
        &env.bin().join("python"),
        ServerKind::JupyterServer,
        root.path(),
        &["--ServerApp.jpserver_extensions={\"jupyter_server_ydoc\": False}"],
        None,
    )
    .unwrap();
    let authorization = format!("token {}", server.token());
    let headers = [
        ("Accept", "application/json, text/event-stream"),
        ("Authorization", authorization.as_str()),
    ];
    let (status, body) = http_request(server.port(), "POST", "/mcp", &headers, INITIALIZE).unwrap();
    assert_eq!(status, 503, "{body}\n{}", server.log());
    let reason: Value = serde_json::from_str(&body).unwrap();
    let reason = reason["error"].as_str().unwrap().to_owned();
    assert!(
        reason.contains("collaboration"),
        "the reason names what is missing: {reason}"
    );
    assert!(
        server.log().contains(&reason[..reason.len().min(60)]),
        "the log says why too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jupyterhub_users_server_serves_mcp_to_that_user_only() {
    let env = WheelEnv::shared();
    let binary = env.binary();
    let hub = Hub::start(&env.bin().join("jupyterhub-singleuser")).unwrap();
    let (status, body) = hub
        .request("POST", "/hub/api/users/alice/server", None, "")
        .unwrap();
    assert!(
        matches!(status, 201 | 202),
        "starting alice's server: {status} {body}"
    );
    wait_for(120, "alice's server is ready", || {
        hub.server("").is_some_and(|server| server["ready"] == true)
    });
    let home = hub.home("alice");
    jupyter_mcp_tests::write_code_notebook(&home, "hub.ipynb", &["x = 1"]);
    let base = format!("{}user/alice/", hub.url());
    let post = |token: Option<&str>| {
        let authorization = token.map(|token| format!("token {token}"));
        let mut headers = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Content-Type", "application/json"),
        ];
        if let Some(value) = &authorization {
            headers.push(("Authorization", value));
        }
        https_request(
            hub.port(),
            &hub.ca_file(),
            "POST",
            "/user/alice/mcp",
            &headers,
            INITIALIZE,
        )
        .unwrap()
    };
    let (status, body) = post(None);
    assert!(refused(status), "without a token: {status} {body}");
    let (status, body) = post(Some(hub.bob_token()));
    assert!(
        refused(status),
        "with another user's token: {status} {body}"
    );

    let mut person = Peer::start_trusting(&base, hub.token(), Some(&hub.ca_file())).unwrap();
    person.open("hub.ipynb").unwrap();
    let gate_folder = tempfile::tempdir().unwrap();
    let gate = gate_folder.path().join("gate");
    write_gated_notebook(&home, &gate);
    sdk_client(
        &format!("{base}mcp"),
        hub.token(),
        "hub.ipynb",
        &gate,
        Some(&hub.ca_file()),
    );
    sees_the_agents_work(person).await;

    let marker = "/user/alice/";
    assert_eq!(
        processes_of(&binary, marker).len(),
        1,
        "one jupyter-mcp runs beside alice's server"
    );
    hub.stop_server("");
    wait_for(15, "jupyter-mcp stops with alice's server", || {
        processes_of(&binary, marker).is_empty()
    });
}
