//! The broker in process: real coordinators on real loopback ports, with fake hosts whose tools
//! record what reaches them. The end-to-end tests (`tests/tests/e2e/broker.rs`) run the same
//! with real `jupyter-mcp serve` processes.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use mcp_contract::catalog::{self, ToolSpec};
use mcp_contract::refs::notebook_ref;
use mcp_contract::{
    BoxFuture, ErrorCode, ToolDispatch, ToolError, ToolOutput, ToolRequest, WindowInfo,
};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use crate::client::{Call, LoopbackClient};
use crate::coordinator::Shared;
use crate::protocol::{AUTH_HEADER, PEER_TOKEN_HEADER, PROTOCOL, Registration};
use crate::secret::TokenFile;
use crate::{BrokerError, Coordinator, CoordinatorConfig, Joined, Role, Timings};

/// Short timings; every test runs on tokio's paused clock, which moves only when every task
/// waits, so that a busy machine cannot make a heartbeat late or a peer stale.
const FAST: Timings = Timings {
    tick: Duration::from_millis(50),
    stale_after: Duration::from_millis(400),
    control_timeout: Duration::from_millis(400),
    join_deadline: Duration::from_millis(2000),
};

/// A host whose tools record their calls and answer with what they were asked.
struct FakeHost {
    window: WindowInfo,
    uris: Vec<String>,
    calls: Mutex<Vec<(String, Map<String, Value>)>>,
    /// Tools that never answer.
    hang: HashSet<&'static str>,
    /// Tools this host does not serve: not in its `tools/list`, and `unknown_tool` when called,
    /// as a real host answers (a server with `--no-kernels` lacks the execution tools).
    lacks: HashSet<&'static str>,
}

impl FakeHost {
    fn new(id: &str, label: &str, uris: &[&str]) -> Arc<FakeHost> {
        FakeHost::hanging(id, label, uris, &[])
    }

    fn hanging(id: &str, label: &str, uris: &[&str], hang: &[&'static str]) -> Arc<FakeHost> {
        Arc::new(FakeHost {
            window: WindowInfo {
                id: id.to_owned(),
                label: label.to_owned(),
            },
            uris: uris.iter().map(|uri| (*uri).to_owned()).collect(),
            calls: Mutex::new(Vec::new()),
            hang: hang.iter().copied().collect(),
            lacks: HashSet::new(),
        })
    }

    fn lacking(id: &str, label: &str, uris: &[&str], lacks: &[&'static str]) -> Arc<FakeHost> {
        let mut host = FakeHost::hanging(id, label, uris, &[]);
        Arc::get_mut(&mut host).expect("just made").lacks = lacks.iter().copied().collect();
        host
    }

    fn ref_of(&self, uri: &str) -> String {
        notebook_ref(&self.window.id, uri)
    }

    fn calls_of(&self, tool: &str) -> Vec<Map<String, Value>> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|(name, _)| name == tool)
            .map(|(_, arguments)| arguments.clone())
            .collect()
    }
}

fn success(value: Value) -> ToolOutput {
    ToolOutput::success(value, Vec::new())
}

impl ToolDispatch for FakeHost {
    fn specs(&self) -> Vec<ToolSpec> {
        catalog::all_tools()
            .into_iter()
            .filter(|spec| !self.lacks.contains(spec.name))
            .collect()
    }

    fn dispatch(&self, request: ToolRequest) -> BoxFuture<'_, ToolOutput> {
        Box::pin(async move {
            let name = request.name;
            let arguments = request.arguments.unwrap_or_default();
            self.calls
                .lock()
                .unwrap()
                .push((name.clone(), arguments.clone()));
            if self.hang.contains(name.as_str()) {
                std::future::pending::<()>().await;
            }
            if self.lacks.contains(name.as_str()) {
                return ToolOutput::failure(ToolError::new(
                    ErrorCode::UnknownTool,
                    format!("no tool is named `{name}`"),
                ));
            }
            match name.as_str() {
                "list_notebooks" => success(json!({"windows": [{
                    "windowId": self.window.id,
                    "windowLabel": self.window.label,
                    "status": "available",
                    "notebooks": self.uris.iter().map(|uri| json!({
                        "notebookRef": self.ref_of(uri),
                        "uri": uri,
                        "path": uri.rsplit('/').next(),
                    })).collect::<Vec<_>>(),
                }]})),
                "save_notebooks" => success(json!({"saved": arguments["notebookRefs"]})),
                "open_notebooks" => success(json!({"notebooks": [{
                    "notebookRef": self.ref_of("file:///opened/hidden.ipynb"),
                    "uri": "file:///opened/hidden.ipynb",
                    "status": "opened",
                    "cellCount": 0,
                }]})),
                _ => {
                    success(json!({"window": self.window.id, "tool": name, "arguments": arguments}))
                }
            }
        })
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(port: u16, runtime: &std::path::Path, host: &Arc<FakeHost>) -> CoordinatorConfig {
    CoordinatorConfig {
        port,
        window: host.window.clone(),
        local: host.clone(),
        runtime_dir: runtime.to_path_buf(),
        security: mcp_server::HttpSecurity::default(),
        timings: FAST,
    }
}

/// A request as the tests send them: two seconds to answer, 64 KiB of answer at most.
fn request<'path>(
    port: u16,
    method: Method,
    path: &'path str,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
) -> Call<'path> {
    Call {
        port,
        method,
        path,
        headers,
        body,
        timeout: Some(Duration::from_secs(2)),
        max_answer_bytes: 65536,
    }
}

/// What window `id` (`label`) on `peer_port` that serves `tools` registers with, as JSON.
fn registration(id: &str, label: &str, peer_port: u16, tools: &[&str]) -> Vec<u8> {
    serde_json::to_vec(&Registration {
        protocol: PROTOCOL.to_owned(),
        id: id.to_owned(),
        label: label.to_owned(),
        peer_port,
        tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
        nonce: "n".to_owned(),
    })
    .unwrap()
}

/// Waits until `check` holds, polling; fails after `limit`.
async fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A runtime folder and a free port, and `host`'s coordinator on them (the broker: it came
/// first).
async fn lone_broker(host: &Arc<FakeHost>) -> (tempfile::TempDir, u16, Coordinator) {
    let runtime = tempfile::tempdir().unwrap();
    let port = free_port();
    let (broker, joined) = Coordinator::start(config(port, runtime.path(), host))
        .await
        .unwrap();
    assert!(matches!(joined, Joined::Broker { .. }), "{joined:?}");
    (runtime, port, broker)
}

/// A broker and two peers on one port.
struct Trio {
    _runtime: tempfile::TempDir,
    port: u16,
    coordinators: Vec<Coordinator>,
}

impl Trio {
    async fn start(hosts: [Arc<FakeHost>; 3]) -> Trio {
        let runtime = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut coordinators = Vec::new();
        for (index, host) in hosts.iter().enumerate() {
            let (coordinator, joined) = Coordinator::start(config(port, runtime.path(), host))
                .await
                .unwrap();
            assert_eq!(
                matches!(joined, Joined::Broker { .. }),
                index == 0,
                "{joined:?}"
            );
            coordinators.push(coordinator);
        }
        let trio = Trio {
            _runtime: runtime,
            port,
            coordinators,
        };
        trio.wait_for_peers(2).await;
        trio
    }

    fn broker(&self) -> Arc<Shared> {
        self.coordinators[0].shared.clone()
    }

    async fn wait_for_peers(&self, count: usize) {
        let shared = self.broker();
        eventually(Duration::from_secs(5), "peers to register", || {
            shared
                .broker_dispatch()
                .is_some_and(|_| shared.peer_count() == count)
        })
        .await;
    }

    /// The names of the tools the broker lists (its `tools/list`).
    fn tool_names(&self) -> Vec<&'static str> {
        let dispatch = self
            .broker()
            .broker_dispatch()
            .expect("the first is broker");
        dispatch.specs().iter().map(|spec| spec.name).collect()
    }

    /// `read_notebook` of `reference` through the broker.
    async fn read(&self, reference: &str) -> ToolOutput {
        self.call("read_notebook", json!({"notebookRef": reference}))
            .await
    }

    async fn call(&self, tool: &str, arguments: Value) -> ToolOutput {
        let dispatch = self
            .broker()
            .broker_dispatch()
            .expect("the first is broker");
        call(dispatch.as_ref(), tool, arguments).await
    }
}

/// `tool` with the JSON object `arguments` through `dispatch`.
async fn call(dispatch: &dyn ToolDispatch, tool: &str, arguments: Value) -> ToolOutput {
    dispatch
        .dispatch(ToolRequest::new(tool, arguments.as_object().cloned()))
        .await
}

fn code(output: &ToolOutput) -> String {
    output
        .error_code()
        .map(|code| code.as_str().to_owned())
        .unwrap_or_default()
}

fn message(output: &ToolOutput) -> String {
    let body: Value = serde_json::from_str(&output.text).unwrap();
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(start_paused = true)]
async fn calls_go_to_the_owner_and_batches_split_per_owner() {
    let a = FakeHost::new(
        "wa",
        "alpha",
        &["file:///a/one.ipynb", "file:///shared.ipynb"],
    );
    let b = FakeHost::new(
        "wb",
        "beta",
        &[
            "file:///b/two.ipynb",
            "file:///b/three.ipynb",
            "file:///shared.ipynb",
        ],
    );
    let c = FakeHost::new("wc", "gamma", &[]);
    let trio = Trio::start([a.clone(), b.clone(), c.clone()]).await;

    // Every window, including the one without notebooks, sorted by label.
    let listed = trio.call("list_notebooks", json!({})).await;
    let windows = listed.structured.unwrap()["windows"].clone();
    let labels: Vec<&str> = windows
        .as_array()
        .unwrap()
        .iter()
        .map(|window| window["windowLabel"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["alpha", "beta", "gamma"]);
    assert_eq!(windows[2]["notebooks"], json!([]));
    assert_eq!(windows[2]["status"], "available");

    // A ref goes to its owner, rewritten to the URI.
    let read = trio
        .call(
            "read_notebook",
            json!({"notebookRef": b.ref_of("file:///b/two.ipynb"), "view": "source"}),
        )
        .await;
    assert!(!read.is_error, "{}", read.text);
    assert_eq!(read.structured.unwrap()["window"], "wb");
    assert_eq!(
        b.calls_of("read_notebook"),
        vec![
            json!({"notebookRef": "file:///b/two.ipynb", "view": "source"})
                .as_object()
                .cloned()
                .unwrap()
        ]
    );
    // The broker's own notebooks are served in process.
    let read = trio.read("FILE:///A/ONE.IPYNB").await;
    assert_eq!(read.structured.unwrap()["window"], "wa");

    // The reference's distinct errors.
    let ambiguous = trio.read("file:///shared.ipynb").await;
    assert_eq!(code(&ambiguous), "notebook_ambiguous");
    let text = message(&ambiguous);
    assert!(
        text.contains(&format!("alpha: {}", a.ref_of("file:///shared.ipynb"))),
        "{text}"
    );
    assert!(
        text.contains(&format!("beta: {}", b.ref_of("file:///shared.ipynb"))),
        "{text}"
    );
    for (reference, expected) in [
        ("nb_123".to_owned(), "notebook_ref_malformed"),
        (
            notebook_ref("wz", "file:///x.ipynb"),
            "notebook_ref_unknown",
        ),
        ("file:///nowhere.ipynb".to_owned(), "notebook_not_found"),
    ] {
        let read = trio.read(&reference).await;
        assert_eq!(code(&read), expected, "{reference}");
    }
    let no_window = trio
        .call("create_notebook", json!({"title": "t", "windowId": "wz"}))
        .await;
    assert_eq!(code(&no_window), "window_not_connected");

    // Window-routed tools go to windowId, else to the broker's own window.
    let created = trio
        .call("create_notebook", json!({"title": "t", "windowId": "wc"}))
        .await;
    assert_eq!(created.structured.unwrap()["window"], "wc");
    let created = trio.call("create_notebook", json!({"title": "t"})).await;
    assert_eq!(created.structured.unwrap()["window"], "wa");

    // A batch: one call per owner, owners in first-seen order, members in order.
    let batch = trio
        .call(
            "save_notebooks",
            json!({"notebookRefs": [
                b.ref_of("file:///b/two.ipynb"),
                a.ref_of("file:///a/one.ipynb"),
                b.ref_of("file:///b/three.ipynb"),
            ]}),
        )
        .await;
    assert!(!batch.is_error, "{}", batch.text);
    assert_eq!(
        batch.structured.unwrap()["saved"],
        json!([
            "file:///b/two.ipynb",
            "file:///b/three.ipynb",
            "file:///a/one.ipynb"
        ])
    );
    assert_eq!(b.calls_of("save_notebooks").len(), 1);
    assert_eq!(a.calls_of("save_notebooks").len(), 1);
    // Stringified arrays are understood before routing.
    let batch = trio
        .call(
            "save_notebooks",
            json!({"notebookRefs": json!([c.ref_of("nothing")]).to_string()}),
        )
        .await;
    assert_eq!(code(&batch), "notebook_ref_unknown");

    // Refs learned from an answer route without a listing.
    let opened = trio
        .call("open_notebooks", json!({"uris": ["x"], "windowId": "wc"}))
        .await;
    assert!(!opened.is_error);
    let read = trio.read(&c.ref_of("file:///opened/hidden.ipynb")).await;
    assert_eq!(read.structured.unwrap()["window"], "wc");

    // The broker lists every tool any window serves.
    let names = trio.tool_names();
    assert!(names.contains(&"run_cells"), "{names:?}");
    for coordinator in trio.coordinators {
        coordinator.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_listed_tool_its_owner_lacks_answers_who_serves_it() {
    // The broker and gamma serve documents only; beta runs kernels. The broker also cannot
    // create notebooks.
    let a = FakeHost::lacking(
        "wa",
        "alpha",
        &["file:///a.ipynb"],
        &["run_cells", "restart_kernels", "create_notebook"],
    );
    let b = FakeHost::new("wb", "beta", &["file:///b.ipynb"]);
    let c = FakeHost::lacking(
        "wc",
        "gamma",
        &["file:///c.ipynb"],
        &[
            "run_cells",
            "restart_kernels",
            "inspect_colab_environment_preflight",
        ],
    );
    let trio = Trio::start([a.clone(), b.clone(), c.clone()]).await;

    // Listed, because beta serves them.
    let names = trio.tool_names();
    for tool in ["run_cells", "restart_kernels", "create_notebook"] {
        assert!(names.contains(&tool), "{tool} in {names:?}");
    }

    // A notebook of a window without the tool: refused by the broker, naming both windows.
    for (host, label) in [(&a, "alpha"), (&c, "gamma")] {
        let uri = format!("file:///{}.ipynb", &host.window.id[1..]);
        let run = trio
            .call("run_cells", json!({"notebookRef": host.ref_of(&uri)}))
            .await;
        assert!(run.is_error, "{}", run.text);
        assert_eq!(code(&run), "not_supported", "{}", run.text);
        let text = message(&run);
        for named in [label, &host.window.id, "beta", "wb"] {
            assert!(text.contains(named), "{named} in {text}");
        }
        assert!(host.calls_of("run_cells").is_empty());
    }
    // A notebook of a window with it still runs there.
    let run = trio
        .call(
            "run_cells",
            json!({"notebookRef": b.ref_of("file:///b.ipynb")}),
        )
        .await;
    assert!(!run.is_error, "{}", run.text);
    assert_eq!(run.structured.unwrap()["window"], "wb");

    // A batch: the part of the owner without the tool fails precisely, the rest is done.
    let restart = trio
        .call(
            "restart_kernels",
            json!({"notebookRefs": [b.ref_of("file:///b.ipynb"), a.ref_of("file:///a.ipynb")]}),
        )
        .await;
    assert_eq!(code(&restart), "not_supported", "{}", restart.text);
    assert!(message(&restart).contains("alpha"), "{}", restart.text);
    let body: Value = serde_json::from_str(&restart.text).unwrap();
    assert_eq!(
        body["error"]["details"]["doneByOtherWindows"]["window"],
        "wb"
    );
    assert_eq!(b.calls_of("restart_kernels").len(), 1);
    assert!(a.calls_of("restart_kernels").is_empty());

    // The broker's own window lacks create_notebook: with two windows that serve it, the
    // caller is asked to choose; a named one that serves it creates it.
    let created = trio.call("create_notebook", json!({"title": "t"})).await;
    assert_eq!(code(&created), "not_supported", "{}", created.text);
    let text = message(&created);
    for named in ["alpha", "beta", "gamma", "windowId"] {
        assert!(text.contains(named), "{named} in {text}");
    }
    let created = trio
        .call("create_notebook", json!({"title": "t", "windowId": "wa"}))
        .await;
    assert_eq!(code(&created), "not_supported", "{}", created.text);
    let created = trio
        .call("create_notebook", json!({"title": "t", "windowId": "wc"}))
        .await;
    assert_eq!(created.structured.unwrap()["window"], "wc");
    // run_cells without a notebookRef goes to the broker's own window by default; it lacks the
    // tool, so the one window that serves it says what is wrong with the arguments.
    let run = trio.call("run_cells", json!({"cells": []})).await;
    assert_eq!(run.structured.unwrap()["window"], "wb");

    // Every window's preflight: gamma lacks it and is not asked.
    let preflight = trio
        .call("inspect_colab_environment_preflight", json!({}))
        .await;
    assert!(!preflight.is_error, "{}", preflight.text);
    assert!(c.calls_of("inspect_colab_environment_preflight").is_empty());
    assert_eq!(b.calls_of("inspect_colab_environment_preflight").len(), 1);
    for coordinator in trio.coordinators {
        coordinator.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn calls_to_silent_or_departed_owners_end() {
    let a = FakeHost::new("wa", "alpha", &["file:///a.ipynb"]);
    let b = FakeHost::hanging("wb", "beta", &["file:///b.ipynb"], &["run_cells"]);
    let c = FakeHost::hanging("wc", "gamma", &["file:///c.ipynb"], &["read_notebook"]);
    let trio = Trio::start([a.clone(), b.clone(), c.clone()]).await;

    // A run with a wait budget is given up after max(1500, waitMs + 1500) ms.
    let started = Instant::now();
    let run = trio
        .call(
            "run_cells",
            json!({"notebookRef": b.ref_of("file:///b.ipynb"), "waitMs": 0}),
        )
        .await;
    assert_eq!(code(&run), "window_unavailable");
    assert!(
        message(&run).contains("did not answer within 1500 ms"),
        "{}",
        message(&run)
    );
    assert!(started.elapsed() >= Duration::from_millis(1500));

    // gamma leaves while a call to it is in flight: the call fails at once, it does not hang.
    let mut trio = trio;
    let gamma = trio.coordinators.pop().unwrap();
    let reference = c.ref_of("file:///c.ipynb");
    let (output, ()) = tokio::join!(
        async {
            tokio::time::timeout(
                Duration::from_secs(10),
                trio.call("read_notebook", json!({"notebookRef": reference})),
            )
            .await
            .expect("a call to a departed owner returns")
        },
        async {
            eventually(Duration::from_secs(5), "the call to reach gamma", || {
                !c.calls_of("read_notebook").is_empty()
            })
            .await;
            // Stops as a server does on SIGTERM: it unregisters.
            gamma.stop().await;
        }
    );
    assert_eq!(code(&output), "window_unavailable");
    assert!(message(&output).contains("gamma"), "{}", message(&output));
    // Its refs now fail clearly too.
    let again = trio.read(&reference).await;
    assert_eq!(code(&again), "window_unavailable");
    assert!(
        message(&again).contains("disconnected"),
        "{}",
        message(&again)
    );
}

#[tokio::test(start_paused = true)]
async fn a_peer_that_stops_heartbeating_is_pruned_and_its_calls_end() {
    let runtime = tempfile::tempdir().unwrap();
    let port = free_port();
    let a = FakeHost::new("wa", "alpha", &["file:///a.ipynb"]);
    let mut broker_config = config(port, runtime.path(), &a);
    broker_config.timings.stale_after = Duration::from_millis(1500);
    broker_config.timings.control_timeout = Duration::from_millis(200);
    let (broker, _) = Coordinator::start(broker_config).await.unwrap();

    // A peer registers once by hand and then goes silent; its port accepts but never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let _accepting = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let secret = TokenFile::broker_secret(runtime.path(), port)
        .read_secret()
        .unwrap();
    // The tools the calls below use: a window that lacks a tool is not asked for it.
    let body = registration(
        "ws",
        "silent",
        silent_port,
        &["read_notebook", "create_notebook"],
    );
    let client = LoopbackClient::new();
    let (status, _) = client
        .send(request(
            port,
            Method::POST,
            "/broker/register",
            vec![(AUTH_HEADER, secret.sign("register", &[&body]))],
            Some(body),
        ))
        .await
        .unwrap();
    assert_eq!(status, 200);

    let shared = broker.shared.clone();
    let dispatch = shared.broker_dispatch().unwrap();
    // A window that does not answer is listed as unavailable (not dropped), after the control
    // timeout.
    let listed = dispatch
        .dispatch(ToolRequest::new("list_notebooks", None))
        .await;
    let windows = listed.structured.unwrap()["windows"].clone();
    assert_eq!(windows[1]["windowLabel"], "silent");
    assert_eq!(windows[1]["status"], "unavailable");
    let started = Instant::now();
    let output = call(
        dispatch.as_ref(),
        "read_notebook",
        json!({"notebookRef": "x.ipynb", "windowId": "ws"}),
    )
    .await;
    // Two windows and no listing names x.ipynb: not found (the silent one is named).
    assert_eq!(code(&output), "notebook_not_found");
    assert!(message(&output).contains("silent"), "{}", message(&output));
    let create = json!({"title": "t", "windowId": "ws"});
    let output = call(dispatch.as_ref(), "create_notebook", create.clone()).await;
    assert_eq!(code(&output), "window_unavailable");
    assert!(
        message(&output).contains("stopped answering heartbeats"),
        "{}",
        message(&output)
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(shared.peer_count(), 0);
    // Alone again, the broker still says where the window went.
    let output = call(dispatch.as_ref(), "create_notebook", create).await;
    assert!(
        message(&output).contains("has disconnected"),
        "{}",
        message(&output)
    );
    broker.stop().await;
}

#[tokio::test(start_paused = true)]
async fn registration_and_invocation_need_the_secret() {
    let a = FakeHost::new("wa", "alpha", &[]);
    let b = FakeHost::new("wb", "beta", &[]);
    let (runtime, port, broker) = lone_broker(&a).await;
    let (peer, joined) = Coordinator::start(config(port, runtime.path(), &b))
        .await
        .unwrap();
    assert!(matches!(joined, Joined::Peer { .. }));
    let client = LoopbackClient::new();
    let post =
        |path: &'static str, port: u16, headers: Vec<(&'static str, String)>, body: Vec<u8>| {
            client.send(request(port, Method::POST, path, headers, Some(body)))
        };
    let registration = registration("intruder", "intruder", 1, &[]);
    let (status, answer) = post("/broker/register", port, Vec::new(), registration.clone())
        .await
        .unwrap();
    assert_eq!(status, 401, "{answer:?}");
    let forged = crate::secret::Secret::generate().sign("register", &[&registration]);
    let (status, _) = post(
        "/broker/register",
        port,
        vec![(AUTH_HEADER, forged)],
        registration.clone(),
    )
    .await
    .unwrap();
    assert_eq!(status, 401);
    // A signature of another body does not carry over.
    let secret = TokenFile::broker_secret(runtime.path(), port)
        .read_secret()
        .unwrap();
    let (status, _) = post(
        "/broker/register",
        port,
        vec![(AUTH_HEADER, secret.sign("register", &[b"{}"]))],
        registration,
    )
    .await
    .unwrap();
    assert_eq!(status, 401);
    assert_eq!(broker.shared.peer_count(), 1);
    // Oversized control bodies are refused before anything else.
    let (status, _) = post("/broker/register", port, Vec::new(), vec![b' '; 100_000])
        .await
        .unwrap();
    assert_eq!(status, 413);

    // The peer's private endpoint wants its own token: not none, not one for another port.
    let invocation = serde_json::to_vec(&json!({"tool": "list_notebooks"})).unwrap();
    let peer_port = peer.peer_port();
    let mut answer = Default::default();
    for (token, expected) in [
        (None, 403),
        (Some(secret.peer_token("wb", peer_port + 1)), 403),
        (Some(secret.peer_token("wb", peer_port)), 200),
    ] {
        let headers = token.map(|token| (PEER_TOKEN_HEADER, token)).into_iter();
        let (status, body) = post(
            "/peer/invoke",
            peer_port,
            headers.collect(),
            invocation.clone(),
        )
        .await
        .unwrap();
        assert_eq!(status, expected);
        answer = body;
    }
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["structuredContent"]["windows"][0]["windowId"], "wb");
    peer.stop().await;
    broker.stop().await;
    // A broker that stops removes its secret file.
    assert!(
        !TokenFile::broker_secret(runtime.path(), port)
            .path()
            .exists()
    );
}

#[tokio::test(start_paused = true)]
async fn a_peer_takes_over_when_the_broker_goes() {
    let a = FakeHost::new("wa", "alpha", &["file:///a.ipynb"]);
    let b = FakeHost::new("wb", "beta", &["file:///b.ipynb"]);
    let c = FakeHost::new("wc", "gamma", &["file:///c.ipynb"]);
    let trio = Trio::start([a, b, c]).await;
    let Role::Broker { owner_id: first } = trio.coordinators[0].role() else {
        panic!("the first is broker");
    };
    let mut coordinators = trio.coordinators.into_iter();
    coordinators.next().unwrap().stop().await;
    let survivors: Vec<Coordinator> = coordinators.collect();
    let mut watchers: Vec<_> = survivors.iter().map(Coordinator::watch_role).collect();
    // Within a few ticks one survivor is broker under a new owner id, the other its peer.
    let settled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let roles: Vec<Role> = watchers
                .iter()
                .map(|watch| watch.borrow().clone())
                .collect();
            let brokers: Vec<&String> = roles
                .iter()
                .filter_map(|role| match role {
                    Role::Broker { owner_id } => Some(owner_id),
                    _ => None,
                })
                .collect();
            if let [owner] = brokers.as_slice()
                && roles.iter().any(|role| {
                    *role
                        == Role::Peer {
                            owner_id: (*owner).clone(),
                        }
                })
            {
                return (*owner).clone();
            }
            let changed = watchers.iter_mut().map(|watch| Box::pin(watch.changed()));
            let _ = futures::future::select_all(changed).await;
        }
    })
    .await
    .expect("a survivor takes the port over");
    assert_ne!(settled, first);
    let health: crate::protocol::Health = LoopbackClient::new()
        .json(request(
            trio.port,
            Method::GET,
            "/broker/health",
            Vec::new(),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(health.owner_id, settled);
    assert_eq!(health.peers, 1);
    for coordinator in survivors {
        coordinator.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_window_twice_and_foreign_ports_are_refused() {
    let a = FakeHost::new("wa", "alpha", &[]);
    let (runtime, port, broker) = lone_broker(&a).await;
    let twin = FakeHost::new("wa", "alpha", &[]);
    let error = Coordinator::start(config(port, runtime.path(), &twin))
        .await
        .unwrap_err();
    assert!(matches!(error, BrokerError::WindowTaken { .. }), "{error}");
    broker.stop().await;

    // A port held by an HTTP server that is not ours.
    let foreign = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let foreign_port = foreign.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut stream, _)) = foreign.accept().await {
            let mut buffer = [0u8; 4096];
            let _ = stream.read(&mut buffer).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
                .await;
        }
    });
    let error = Coordinator::start(config(foreign_port, runtime.path(), &a))
        .await
        .unwrap_err();
    assert!(
        matches!(error, BrokerError::PortHeldByOther { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("not by a jupyter-mcp server"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_token_file_of_another_broker_does_not_let_a_peer_in() {
    let elsewhere = tempfile::tempdir().unwrap();
    let a = FakeHost::new("wa", "alpha", &[]);
    let (_runtime, port, broker) = lone_broker(&a).await;
    // A peer that reads a different secret (another user's runtime folder, a stale file).
    TokenFile::broker_secret(elsewhere.path(), port)
        .write_secret(&crate::secret::Secret::generate())
        .unwrap();
    let b = FakeHost::new("wb", "beta", &[]);
    let mut timings = FAST;
    timings.join_deadline = Duration::from_millis(300);
    let mut peer_config = config(port, elsewhere.path(), &b);
    peer_config.timings = timings;
    let error = Coordinator::start(peer_config).await.unwrap_err();
    assert!(matches!(error, BrokerError::CannotJoin { .. }), "{error}");
    assert!(error.to_string().contains("401"), "{error}");
    assert_eq!(broker.shared.peer_count(), 0);
    broker.stop().await;
}
