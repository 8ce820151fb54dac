//! Several `jupyter-mcp serve` processes on one port: the first is broker, the others join as
//! peers; a client sees every notebook of every server through one URL, calls reach the owner,
//! and when the broker is killed a peer takes the port over.

use std::path::Path;
use std::time::{Duration, Instant};

use jupyter_mcp_tests::{
    Client, HttpServer, free_port, http_request, link_venv, process_alive, write_code_notebook,
};
use serde_json::{Value, json};

const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];

/// A root with `<name>.ipynb` (two code cells) and a `work.ipynb` every root has.
fn root_for(name: &str, seed: usize) -> tempfile::TempDir {
    let root = tempfile::Builder::new().prefix(name).tempdir().unwrap();
    link_venv(root.path());
    write_code_notebook(
        root.path(),
        &format!("{name}.ipynb"),
        &[&format!("x = {seed}"), "print(x * 2)"],
    );
    write_code_notebook(root.path(), "work.ipynb", &["pass"]);
    root
}

/// `(windowLabel, notebookRef of <name>.ipynb)` for every available window, in listing order.
fn windows(listing: &Value) -> Vec<(String, Option<String>)> {
    listing["windows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|window| window["status"] == "available")
        .map(|window| {
            let label = window["windowLabel"].as_str().unwrap().to_owned();
            let own = window["notebooks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|notebook| notebook["path"] != "work.ipynb")
                .map(|notebook| notebook["notebookRef"].as_str().unwrap().to_owned());
            (label, own)
        })
        .collect()
}

fn ref_of(listing: &Value, name: &str) -> String {
    windows(listing)
        .into_iter()
        .find(|(label, _)| label.starts_with(name))
        .and_then(|(_, own)| own)
        .unwrap_or_else(|| panic!("no window for {name} in {listing}"))
}

fn cell_on_disk(root: &Path, notebook: &str, index: usize) -> Value {
    let text = std::fs::read_to_string(root.join(notebook)).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    value["cells"][index].clone()
}

fn source_text(cell: &Value) -> String {
    match &cell["source"] {
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        Value::String(text) => text.clone(),
        _ => String::new(),
    }
}

fn health_owner(port: u16) -> Option<String> {
    let (status, body) = http_request(port, "GET", "/broker/health", &[], "").ok()?;
    if status != 200 {
        return None;
    }
    let body: Value = serde_json::from_str(&body).ok()?;
    body["ownerId"].as_str().map(str::to_owned)
}

fn notebook_uri(root: &Path, name: &str) -> String {
    host_files::file_uri(&root.canonicalize().unwrap().join(name))
}

#[expect(
    deprecated,
    reason = "resources/subscribe is how a 2025-11-25 client subscribes"
)]
async fn subscribe(client: &Client, uri: &str) {
    client
        .peer()
        .subscribe(rmcp::model::SubscribeRequestParams::new(uri.to_owned()))
        .await
        .unwrap();
}

/// Edits cell 0 of `<name>.ipynb` to `x = value`, runs the notebook and checks the file.
async fn edit_and_run(client: &Client, root: &Path, listing: &Value, name: &str, value: usize) {
    let notebook_ref = ref_of(listing, name);
    let read = client
        .call("read_notebook", json!({"notebookRef": notebook_ref}))
        .await
        .ok();
    let rev = read["cells"][0]["rev"].as_str().unwrap().to_owned();
    client
        .call(
            "edit_cells",
            json!({"notebookRef": notebook_ref, "edits": [
                {"editType": "edit", "cellId": "c0", "expectedRev": rev, "newCode": format!("x = {value}")}
            ]}),
        )
        .await
        .ok();
    let receipt = client
        .call(
            "run_cells",
            json!({"notebookRef": notebook_ref, "waitMs": 120000}),
        )
        .await
        .ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    // The owner wrote both the edit and the output into its own file.
    let notebook = format!("{name}.ipynb");
    assert_eq!(
        source_text(&cell_on_disk(root, &notebook, 0)),
        format!("x = {value}")
    );
    let output = cell_on_disk(root, &notebook, 1)["outputs"][0]["text"].clone();
    let output: String = match output {
        Value::Array(lines) => lines.iter().filter_map(Value::as_str).collect(),
        Value::String(text) => text,
        other => panic!("no stream output: {other}"),
    };
    assert_eq!(output.trim(), (value * 2).to_string(), "{name}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_servers_share_one_port_and_survive_the_broker() {
    let runtime = tempfile::tempdir().unwrap();
    let runtime_dir = runtime.path().to_str().unwrap().to_owned();
    let port = free_port();
    let roots: Vec<tempfile::TempDir> = NAMES
        .iter()
        .enumerate()
        .map(|(seed, name)| root_for(name, seed))
        .collect();
    let mut servers = Vec::new();
    for root in &roots {
        servers.push(
            HttpServer::start_on(root.path(), port, &["--runtime-dir", &runtime_dir])
                .expect("server starts"),
        );
    }
    assert!(
        servers[0]
            .banner
            .contains(&format!("the broker of port {port}")),
        "{}",
        servers[0].banner
    );
    for server in &servers[1..] {
        assert!(server.banner.contains("as a peer"), "{}", server.banner);
        // One URL, token included, whoever serves it.
        assert_eq!(server.url, servers[0].url);
    }
    let url = servers[0].url.clone();

    // One client sees the notebooks of all three servers; peers register within a tick.
    let client = Client::http(&url).await.expect("client connects");
    let listing = client.call("list_notebooks", json!({})).await.ok();
    let labels: Vec<String> = windows(&listing)
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert_eq!(labels.len(), 3, "{listing}");
    for (label, name) in labels.iter().zip(NAMES) {
        assert!(label.starts_with(name), "{labels:?}");
    }

    // Resources through the shared URL: every server's notebooks, read from their owner; a
    // subscriber to a peer's notebook hears the edit another client makes through the broker.
    let gamma = notebook_uri(roots[2].path(), "gamma.ipynb");
    let subscriber = Client::http(&url).await.expect("client connects");
    subscribe(&subscriber, &gamma).await;
    let resources = client.peer().list_all_resources().await.unwrap();
    for (root, name) in roots.iter().zip(NAMES) {
        let uri = notebook_uri(root.path(), &format!("{name}.ipynb"));
        assert!(
            resources.iter().any(|resource| resource.uri == uri),
            "{uri} listed through the broker"
        );
    }
    let source = client
        .peer()
        .read_resource(rmcp::model::ReadResourceRequestParams::new(format!(
            "{}#cells/c0/source",
            notebook_uri(roots[1].path(), "beta.ipynb")
        )))
        .await
        .unwrap();
    let source = serde_json::to_value(&source.contents[0]).unwrap();
    assert_eq!(
        source["text"], "x = 1",
        "beta's first cell, read from its owner"
    );

    // Edits and runs reach the right owner, verified on disk.
    for (index, (root, name)) in roots.iter().zip(NAMES).enumerate() {
        edit_and_run(&client, root.path(), &listing, name, 100 + index).await;
    }
    assert!(
        subscriber
            .recorder
            .wait_for_updates(1, Duration::from_secs(10))
            .await,
        "the subscriber to gamma heard its edit"
    );
    let heard = subscriber.recorder.updates.lock().unwrap().clone();
    assert!(heard.iter().all(|uri| *uri == gamma), "{heard:?}");

    // A path every root has is ambiguous; the error names each window's ref.
    let ambiguous = client
        .call("read_notebook", json!({"notebookRef": "work.ipynb"}))
        .await;
    assert_eq!(ambiguous.error_code(), "notebook_ambiguous");
    let message = ambiguous.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("open in 3 windows"), "{message}");
    for window in listing["windows"].as_array().unwrap() {
        let work = window["notebooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|notebook| notebook["path"] == "work.ipynb")
            .unwrap();
        assert!(
            message.contains(work["notebookRef"].as_str().unwrap()),
            "{message}"
        );
    }

    // Nobody registers without the broker secret.
    let registration = json!({"protocol": "jupyter-mcp-broker-v1", "id": "intruder", "label": "x",
                              "peerPort": 1, "tools": [], "nonce": "n"})
    .to_string();
    let (status, body) =
        http_request(port, "POST", "/broker/register", &[], &registration).unwrap();
    assert_eq!(status, 401, "{body}");
    let (status, _) = http_request(
        port,
        "POST",
        "/broker/register",
        &[("x-jupyter-mcp-auth", &"0".repeat(64))],
        &registration,
    )
    .unwrap();
    assert_eq!(status, 401);

    // Kill the broker outright: a peer takes the port over under a new owner id.
    let alpha_ref = ref_of(&listing, "alpha");
    let kernel = client
        .call("get_kernel_info", json!({"notebookRef": alpha_ref}))
        .await
        .ok();
    let alpha_kernel = kernel["kernel"]["pid"].as_u64();
    let first_owner = health_owner(port).expect("the broker answers");
    client.close().await.unwrap();
    servers[0].kill_hard().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let new_owner = loop {
        match health_owner(port) {
            Some(owner) if owner != first_owner => break owner,
            _ => {
                assert!(
                    Instant::now() < deadline,
                    "no peer took the port over within 15 s"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_ne!(new_owner, first_owner);

    // The client reconnects to the same URL and, once the other peer has re-registered, sees
    // the two remaining servers.
    let client = Client::http(&url).await.expect("client reconnects");
    let deadline = Instant::now() + Duration::from_secs(15);
    let listing = loop {
        let listing = client.call("list_notebooks", json!({})).await.ok();
        if windows(&listing).len() == 2 {
            break listing;
        }
        assert!(
            Instant::now() < deadline,
            "the survivors did not regroup: {listing}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let labels: Vec<String> = windows(&listing)
        .into_iter()
        .map(|(label, _)| label)
        .collect();
    assert!(
        labels[0].starts_with("beta") && labels[1].starts_with("gamma"),
        "{labels:?}"
    );

    // The killed server's refs fail clearly; the others still work, routed to their owners.
    let gone = client
        .call("read_notebook", json!({"notebookRef": alpha_ref}))
        .await;
    assert_eq!(gone.error_code(), "notebook_ref_unknown");
    assert!(
        gone.error()["message"]
            .as_str()
            .unwrap()
            .contains("list_notebooks")
    );
    edit_and_run(&client, roots[1].path(), &listing, "beta", 7).await;
    edit_and_run(&client, roots[2].path(), &listing, "gamma", 8).await;
    client.close().await.unwrap();

    // The killed server's kernel notices its parent is gone and exits.
    if let Some(pid) = alpha_kernel {
        let pid = pid as u32;
        let deadline = Instant::now() + Duration::from_secs(20);
        while process_alive(pid) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if process_alive(pid) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the kernel of the killed server outlived it");
        }
    }
    for server in servers.drain(1..) {
        let status = server.stop().unwrap();
        assert!(status.success(), "{status}");
    }
}

#[test]
fn a_port_held_by_another_program_is_refused_clearly() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in listener.incoming().flatten() {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let root = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(jupyter_mcp_tests::server_binary())
        .args([
            "serve",
            "--no-kernels",
            "--port",
            &port.to_string(),
            "--root",
        ])
        .arg(root.path())
        .arg("--runtime-dir")
        .arg(runtime.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "port {port} on 127.0.0.1 is in use by another program"
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing is announced");
}
