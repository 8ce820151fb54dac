//! Kernels on a real Jupyter Server and a real Jupyter Kernel Gateway (from the test Python
//! environment), each started here on loopback with a random token on a free port and stopped
//! at the end; the `jupyter-mcp` binary uses them through `--kernel-server`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jupyter_mcp_tests::kernel_runs::{NotebookRuns, printed_lines};
use jupyter_mcp_tests::kernel_server::{KernelServer, ServerKind, SeveringProxy, TestCa};
use jupyter_mcp_tests::{
    Client, HttpServer, is_terminal as terminal, receipt_output as output_of, work_root,
};
use kernels::{
    ExecuteOptions, KernelHandle as _, KernelProvider as _, RemoteConfig, RemoteProvider,
    ServerToken, ServerUrl,
};
use serde_json::json;
use sha2::{Digest as _, Sha256};

/// The notebook, in a subfolder so that the kernel's working folder shows where it started.
const NB: &str = "work/remote.ipynb";

/// Fields drop in order: the client, then `jupyter-mcp` (which shuts its kernels down on the
/// server), then the server, then the folder.
struct Setup {
    client: Client,
    _mcp: HttpServer,
    server: KernelServer,
    root: tempfile::TempDir,
}

impl Setup {
    /// The served folder as the kernel sees it.
    fn root(&self) -> PathBuf {
        self.root.path().canonicalize().unwrap()
    }
}

/// A root with `work/remote.ipynb` holding `sources`, a kernel server of `kind` on it, and
/// `jupyter-mcp` using that server (through `kernel_url` when given, e.g. a proxy).
async fn setup(kind: ServerKind, sources: &[&str]) -> Setup {
    let root = notebook_root(sources);
    let server = KernelServer::start(kind, root.path(), &[]).expect("kernel server starts");
    let mcp = serve_against(root.path(), &server, &server.url(), &[]);
    let client = Client::http(&mcp.url).await.expect("client connects");
    Setup {
        client,
        _mcp: mcp,
        server,
        root,
    }
}

/// A root with `work/remote.ipynb` holding `sources`.
fn notebook_root(sources: &[&str]) -> tempfile::TempDir {
    work_root("remote.ipynb", sources)
}

/// `jupyter-mcp` on `root` using `server` through `url` with the server's token file, and
/// `extra` arguments.
fn serve_against(root: &Path, server: &KernelServer, url: &str, extra: &[&str]) -> HttpServer {
    let token_file = server.token_file();
    let mut args = vec![
        "--kernel-server",
        url,
        "--kernel-server-token-file",
        token_file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    HttpServer::start(root, &args).expect("jupyter-mcp starts")
}

/// A Jupyter Server on `root` over TLS, its certificate issued by `ca`.
fn tls_server(root: &Path, ca: &TestCa) -> KernelServer {
    let server = KernelServer::start_with_tls(
        ServerKind::JupyterServer,
        root,
        &[],
        Some(ca.issue("server").unwrap()),
    )
    .unwrap();
    assert!(server.url().starts_with("https://"));
    server
}

/// `jupyter-mcp` on `root` using `server` (over TLS) and trusting the certificates `ca` issued,
/// and a client of it.
async fn serve_trusting(root: &Path, server: &KernelServer, ca: &TestCa) -> (HttpServer, Client) {
    let ca_file = ca.ca_file();
    let extra = ["--kernel-server-ca", ca_file.to_str().unwrap()];
    let mcp = serve_against(root, server, &server.url(), &extra);
    let client = Client::http(&mcp.url).await.unwrap();
    (mcp, client)
}

/// The notebook's runs through `client`, followed for two minutes at most.
fn on(client: &Client) -> NotebookRuns<'_> {
    NotebookRuns {
        client,
        notebook: NB,
        patience: Duration::from_secs(120),
    }
}

/// The working folder printed by `PRINT_CWD`.
fn printed_folder(output: &str) -> PathBuf {
    let line = output
        .lines()
        .find_map(|line| line.strip_prefix("cwd="))
        .unwrap_or_else(|| panic!("no cwd= line in {output}"));
    PathBuf::from(line.trim())
}

const PRINT_CWD: &str = "import os\nprint('cwd=' + os.getcwd(), flush=True)";
const TICKS: &str =
    "import time\nfor i in range(4):\n    print('tick', i, flush=True)\n    time.sleep(0.4)";
/// A cell whose value is 42, which the scenarios look for in its output.
const ANSWER: &str = "answer = 6 * 7\nanswer";
// One statement, so an interrupt sent on the marker cannot land in IPython's compile of the
// next one (see `kernels`' SLEEPER).
const SLEEP: &str = "import time\nprint('sleeping', flush=True) or time.sleep(120)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cells_run_on_a_jupyter_server_kernel_in_the_notebook_folder() {
    let setup = setup(ServerKind::JupyterServer, &[PRINT_CWD, TICKS, ANSWER]).await;
    let client = &setup.client;
    let runs = on(client);
    let (listed, python) = runs.listed_kernel("remote:python3").await;
    assert_eq!(listed["selected"], "remote:python3", "{listed}");
    assert_eq!(python["source"], "remote");
    assert_eq!(python["language"], "python");

    // A long run is followed while it runs, then to its end.
    let first = runs.run(json!([0, 1, 2]), 200).await;
    assert!(matches!(
        first["status"].as_str(),
        Some("requested" | "running" | "completed")
    ));
    let running = runs
        .follow(|receipt| output_of(receipt, 1).contains("tick 0"))
        .await;
    let execution_id = running["executionId"].as_str().unwrap();
    let finished = runs.execution(execution_id, 60000).await;
    assert_eq!(finished["status"], "completed", "{finished}");
    let ticks = output_of(&finished, 1);
    assert_eq!(
        printed_lines(&ticks, "tick "),
        ["tick 0", "tick 1", "tick 2", "tick 3"],
        "{ticks}"
    );
    assert!(output_of(&finished, 2).contains("42"));
    // Jupyter Server starts the kernel in the notebook's folder (the `path` we send).
    assert_eq!(
        printed_folder(&output_of(&finished, 0)),
        setup.root().join("work")
    );
    // Staleness works as with local kernels.
    for cell in client.outline_cells(NB).await {
        assert_eq!(cell["state"], "fresh", "{cell}");
    }
    let info = client
        .call("get_kernel_info", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(info["kernel"]["id"], "remote:python3");
    assert_eq!(info["kernel"]["status"], "idle");
    assert_eq!(info["kernel"]["implementation"], "ipython");
    assert!(
        info["kernel"].get("pid").is_none(),
        "no local process: {info}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_restart_and_a_crash_on_a_jupyter_server() {
    let setup = setup(
        ServerKind::JupyterServer,
        &[SLEEP, "after = True", "import os\nos.kill(os.getpid(), 9)"],
    )
    .await;
    let client = &setup.client;
    let runs = on(client);

    runs.interrupt_sleeping_cell(json!([0, 1])).await;

    // Restart: the running run is invalidated and the epoch moves on.
    runs.run(json!([0, 1]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("sleeping"))
        .await;
    let before = runs.epoch().await;
    let restarted = client.kernel_action("restart_kernels", NB).await;
    assert_eq!(
        restarted["results"][0]["outcome"], "restarted",
        "{restarted}"
    );
    assert!(restarted["results"][0]["epoch"].as_u64().unwrap() > before);
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["status"], "unavailable");
    assert_eq!(receipt["reasonCode"], "invalidated_by_restart");

    // A kernel that dies on the server is restarted by the server, which says so: the run
    // ends with `kernel_restarted` and the epoch moves on again.
    let before = runs.epoch().await;
    let receipt = runs.run(json!([2, 1]), 60000).await;
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["reasonCode"], "kernel_restarted", "{receipt}");
    assert_eq!(receipt["cells"][1]["state"], "not-run");
    assert!(runs.epoch().await > before);
    let again = runs.run(json!([1]), 60000).await;
    assert_eq!(again["status"], "completed", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_websocket_is_resumed_without_losing_the_run() {
    let root = notebook_root(&[
        "import time\nfor i in range(30):\n    print('line', i, flush=True)\n    time.sleep(0.1)",
        ANSWER,
    ]);
    let server = KernelServer::start(ServerKind::JupyterServer, root.path(), &[]).unwrap();
    let proxy = SeveringProxy::start(server.port()).await.unwrap();
    let mcp = serve_against(root.path(), &server, &proxy.url(), &[]);
    let client = Client::http(&mcp.url).await.unwrap();
    let runs = on(&client);
    runs.run(json!([0, 1]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("line 3\n"))
        .await;
    // An outage: the socket is cut (as a network failure would) and reconnections are refused
    // until the client has retried four times (its back-off makes that 1.5 s at least), while
    // the kernel keeps printing.
    assert!(
        proxy.sever_and_hold() > 0,
        "the kernel WebSocket went through the proxy"
    );
    proxy.refused_at_least(4).await;
    proxy.release();
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let text = output_of(&receipt, 0);
    let printed: Vec<usize> = printed_lines(&text, "line ")
        .iter()
        .map(|line| line["line ".len()..].parse().unwrap())
        .collect();
    assert!(
        printed.windows(2).all(|pair| pair[0] < pair[1]),
        "once each, in order: {printed:?}"
    );
    assert_eq!(printed.first(), Some(&0), "{printed:?}");
    assert_eq!(printed.last(), Some(&29), "{printed:?}");
    // What the server buffered during the outage (some 15 lines) was replayed. Only what it
    // sent before it noticed the cut may be missing (a few lines at most, however loaded the
    // machine), and the output says where: the marker sits right before the missing ones.
    let marker = text
        .find("connection to the kernel server dropped here")
        .unwrap_or_else(|| panic!("the gap is marked in the output: {text}"));
    let before = printed_lines(&text[..marker], "line ").len();
    let missing: Vec<usize> = (0..30).filter(|line| !printed.contains(line)).collect();
    assert!(
        missing.len() <= 5,
        "only the cut's edge is lost: {missing:?}"
    );
    for line in &missing {
        assert_eq!(
            *line,
            before + missing.iter().filter(|m| *m < line).count(),
            "{text}"
        );
    }
    assert!(output_of(&receipt, 1).contains("42"));
    // The kernel is the same one (same epoch), and later runs work.
    let before = runs.epoch().await;
    let again = runs.run(json!([1]), 60000).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(runs.epoch().await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_gateway_runs_interrupts_and_restarts() {
    let setup = setup(ServerKind::KernelGateway, &[PRINT_CWD, SLEEP, ANSWER]).await;
    let client = &setup.client;
    let runs = on(client);
    let receipt = runs.run(json!([0, 2]), 60000).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    assert!(output_of(&receipt, 1).contains("42"));
    // Kernel Gateway 3 (built on Jupyter Server 2) honours the folder we ask for too.
    assert_eq!(
        printed_folder(&output_of(&receipt, 0)),
        setup.root().join("work")
    );

    runs.interrupt_sleeping_cell(json!([1, 2])).await;
    runs.restart().await;
    for cell in client.outline_cells(NB).await {
        assert_ne!(cell["state"], "fresh", "{cell}");
    }
    let again = runs.run(json!([2]), 60000).await;
    assert_eq!(again["status"], "completed", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_the_gateway_mid_run_ends_the_run_honestly() {
    let mut setup = setup(
        ServerKind::KernelGateway,
        &[
            "import time\nfor i in range(1200):\n    print('step', i, flush=True)\n    time.sleep(0.1)",
            ANSWER,
        ],
    )
    .await;
    let runs = on(&setup.client);
    runs.run(json!([0, 1]), 0).await;
    runs.follow(|receipt| output_of(receipt, 0).contains("step 3\n"))
        .await;
    let before = runs.epoch().await;
    // The gateway goes away (taking its kernels and our WebSocket with it) and comes back.
    tokio::task::block_in_place(|| setup.server.restart()).expect("the gateway restarts");
    let receipt = runs.follow(terminal).await;
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["cells"][0]["state"], "unavailable", "{receipt}");
    assert_eq!(receipt["cells"][1]["state"], "not-run", "{receipt}");
    // What happened, as far as the server let us know: the kernel is gone (`kernel_died`),
    // could not be reached again (`kernel_unreachable`), or went unobserved for three looks
    // while the gateway was down (`observation_failed`). Never a completion.
    let code = receipt["reasonCode"].as_str().unwrap_or_default();
    assert!(
        ["kernel_died", "kernel_unreachable", "observation_failed"].contains(&code),
        "{receipt}"
    );
    assert!(!receipt["reason"].as_str().unwrap_or_default().is_empty());
    assert!(output_of(&receipt, 0).contains("step 3\n"), "output kept");
    // The next run gets a new kernel on the restarted gateway.
    let again = runs.run(json!([1]), 60000).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert!(output_of(&again, 0).contains("42"));
    assert!(runs.epoch().await > before);
}

fn provider(server: &KernelServer, offer_binary: bool) -> RemoteProvider {
    let mut config = RemoteConfig::new(
        ServerUrl::parse(&server.url()).unwrap(),
        ServerToken::new(server.token()),
    );
    config.offer_binary_protocol = offer_binary;
    RemoteProvider::new(config).unwrap()
}

/// Runs one execute step of a transfer on `kernel` as a host does (`store_history: false`,
/// within the step's deadline) and turns what happened into the machine's event.
async fn execute_step(
    kernel: &dyn kernels::KernelHandle,
    step: transfer::KernelStep,
) -> transfer::Event {
    use transfer::{Event, KernelFailure};
    let options = ExecuteOptions {
        silent: false,
        store_history: false,
        user_expressions: BTreeMap::new(),
        stop_on_error: false,
        buffers: step.buffers.clone(),
    };
    let Ok(handle) = kernel.execute(&step.code, options).await else {
        return Event::KernelFailed(KernelFailure::Busy);
    };
    match tokio::time::timeout(step.deadline.duration(), handle.summarize()).await {
        Err(_) => Event::KernelFailed(KernelFailure::Timeout),
        Ok(Ok(summary)) => match summary.error {
            Some(error) => Event::KernelFailed(KernelFailure::Exception { ename: error.ename }),
            None => {
                // Download chunks come back as binary buffers in both WebSocket protocols.
                if let transfer::KernelOperation::ReadChunks { len, .. } = step.request.operation {
                    let received: usize = summary.display_buffers.iter().map(Vec::len).sum();
                    assert!(
                        len > 0 && received > 0 && received as u64 <= len + len / 20,
                        "a batch of {len} bytes came back as {received} bytes of buffers"
                    );
                }
                Event::KernelReply(transfer::KernelOutput {
                    stdout: summary.stdout,
                    buffers: summary.display_buffers,
                })
            }
        },
        Ok(Err(kernels::Error::KernelRestarted)) => Event::KernelFailed(KernelFailure::Restarted),
        Ok(Err(_)) => Event::KernelFailed(KernelFailure::Died),
    }
}

/// Drives a transfer machine (the `transfer` crate's upload or download) to its end through
/// `kernel`, doing the host's file work here: the kernel's filesystem is the server's, and the
/// bytes travel only as kernel requests and replies over the kernel WebSocket.
async fn drive_transfer(
    kernel: &dyn kernels::KernelHandle,
    machine: &mut dyn transfer::TransferMachine,
    source: Option<&Path>,
    budget: &mut transfer::KernelBudget,
) -> Result<transfer::TransferReceipt, transfer::TransferError> {
    use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
    use transfer::{Action, Event};
    let host = |result: std::io::Result<()>| match result {
        Ok(()) => Event::HostDone,
        Err(error) => Event::HostFailed(error.kind()),
    };
    loop {
        let event = match machine.next_action(budget) {
            Action::Done(receipt) => return Ok(receipt),
            Action::Failed(error) => return Err(error),
            Action::ExecuteKernel(step) => execute_step(kernel, step).await,
            Action::ReadHostChunk { offset, len } => {
                let read = (|| {
                    let mut file = std::fs::File::open(source.expect("an upload has a source"))?;
                    file.seek(SeekFrom::Start(offset))?;
                    let mut bytes = Vec::with_capacity(len);
                    file.take(len as u64).read_to_end(&mut bytes)?;
                    Ok::<_, std::io::Error>(bytes)
                })();
                match read {
                    Ok(bytes) => Event::HostChunkRead(bytes),
                    Err(error) => Event::HostFailed(error.kind()),
                }
            }
            Action::CreateHostTemp { temp_path } => host(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(temp_path)
                    .map(drop),
            ),
            Action::WriteHostChunk {
                temp_path,
                offset,
                bytes,
            } => host((|| {
                let mut file = std::fs::OpenOptions::new().write(true).open(temp_path)?;
                file.seek(SeekFrom::Start(offset))?;
                file.write_all(&bytes)?;
                file.sync_all()
            })()),
            Action::PromoteHostFile {
                temp_path,
                destination_path,
                overwrite,
            } => host(if overwrite {
                std::fs::rename(&temp_path, &destination_path)
            } else {
                std::fs::hard_link(&temp_path, &destination_path)
                    .and_then(|()| std::fs::remove_file(&temp_path))
            }),
            Action::RemoveHostTemp { temp_path } => host(match std::fs::remove_file(temp_path) {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            }),
        };
        machine.handle(event);
    }
}

/// Uploads `payload` (written to a host file) to `kernel_folder` through `kernel` with the
/// transfer protocol, downloads it back to another host file, and checks both ends.
async fn transfer_round_trip(
    kernel: &dyn kernels::KernelHandle,
    payload: &[u8],
    kernel_folder: &Path,
) {
    let host = tempfile::tempdir().unwrap();
    let source = host.path().join("payload.bin");
    std::fs::write(&source, payload).unwrap();
    let kernel_file = kernel_folder.join("uploaded.bin");
    let mut budget = transfer::KernelBudget::new();
    let mut upload = transfer::Upload::new(transfer::UploadConfig::new(
        source.to_str().unwrap(),
        kernel_file.to_str().unwrap(),
        uuid_like(1),
        payload.len() as u64,
    ))
    .unwrap();
    let sent = drive_transfer(kernel, &mut upload, Some(&source), &mut budget)
        .await
        .expect("the upload succeeds");
    let expected_digest: String = Sha256::digest(payload)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    assert_eq!(sent.bytes, payload.len() as u64);
    assert_eq!(sent.sha256, expected_digest);
    // The server runs on this machine, so the kernel's file can be checked directly too.
    assert!(
        std::fs::read(&kernel_file).unwrap() == payload,
        "the kernel's copy is intact"
    );

    let back = host.path().join("downloaded.bin");
    let mut download = transfer::Download::new(transfer::DownloadConfig::new(
        back.to_str().unwrap(),
        kernel_file.to_str().unwrap(),
        uuid_like(2),
    ))
    .unwrap();
    let received = drive_transfer(kernel, &mut download, None, &mut budget)
        .await
        .expect("the download succeeds");
    assert_eq!(received.sha256, expected_digest);
    assert!(
        std::fs::read(&back).unwrap() == payload,
        "the downloaded copy is intact"
    );
}

/// A nonce for a transfer (the host's job is a random UUID; distinct values suffice here).
fn uuid_like(serial: u32) -> String {
    format!("{serial:08x}-test-{:016x}", std::process::id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_protocols_transfer_a_10_mib_file_and_oversized_requests_fail_cleanly() {
    let root = tempfile::tempdir().unwrap();
    // One server speaks only the JSON protocol, the other offers the binary one.
    let json_only = KernelServer::start(
        ServerKind::JupyterServer,
        root.path(),
        &["--ZMQChannelsWebsocketConnection.kernel_ws_protocol="],
    )
    .unwrap();
    let binary = KernelServer::start(ServerKind::JupyterServer, root.path(), &[]).unwrap();
    // Incompressible bytes: each download reply then carries a full batch of raw chunks (1 MiB of
    // binary buffers, which the server's IOPub data rate limit does not count).
    let payload = jupyter_mcp_tests::random_bytes(10 * 1024 * 1024, 11);
    for (server, expected) in [
        (&json_only, "json"),
        (&binary, "v1.kernel.websocket.jupyter.org"),
    ] {
        let provider = provider(server, true);
        let discovery = provider.discover(None).await.unwrap();
        let spec = discovery.find("remote:python3").unwrap();
        let kernel = provider.start_remote(spec, root.path()).await.unwrap();
        assert_eq!(kernel.protocol().await, Some(expected));
        // The kernel's side of the transfer: a folder of the server's filesystem.
        let kernel_folder = tempfile::tempdir().unwrap();
        transfer_round_trip(&kernel, &payload, kernel_folder.path()).await;

        // One request above the server's message limit fails before anything is sent, and the
        // kernel stays usable.
        let oversized = format!(
            "_big = '{}'",
            "a".repeat(kernels::DEFAULT_MAX_MESSAGE_BYTES)
        );
        let error = kernel
            .execute(&oversized, ExecuteOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(error, kernels::Error::MessageTooLarge { .. }),
            "{error}"
        );
        let summary = kernel.execute_collect("print(6 * 7)").await.unwrap();
        assert_eq!(summary.stdout, "42\n");

        // Shutting down removes the kernel from the server.
        assert_eq!(server.kernel_count(), Some(1));
        kernel.shutdown().await.unwrap();
        assert!(kernel.status().borrow().is_dead());
        assert_eq!(server.kernel_count(), Some(0));
    }
    // Declining the binary protocol uses JSON on a server that offers both.
    let provider = provider(&binary, false);
    let discovery = provider.discover(None).await.unwrap();
    let kernel = provider
        .start_remote(discovery.find("remote:python3").unwrap(), root.path())
        .await
        .unwrap();
    assert_eq!(kernel.protocol().await, Some("json"));
    kernel.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_and_the_token_never_reaches_the_logs() {
    let root = notebook_root(&["1 + 1"]);
    let server = KernelServer::start(ServerKind::JupyterServer, root.path(), &[]).unwrap();

    let wrong = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(wrong.path(), "not-the-token\n").unwrap();
    let refused = HttpServer::start(
        root.path(),
        &[
            "--kernel-server",
            &server.url(),
            "--kernel-server-token-file",
            wrong.path().to_str().unwrap(),
        ],
    )
    .unwrap();
    let client = Client::http(&refused.url).await.unwrap();
    let call = client
        .call("list_kernels", json!({"notebookRef": NB}))
        .await;
    assert_eq!(call.error_code(), "kernel_unavailable");
    let message = call.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("refused the token"), "{message}");
    assert!(!message.contains("not-the-token"), "{message}");

    // With the right token from the environment and the most verbose logging, the token
    // appears nowhere in what the server prints.
    let log = tempfile::NamedTempFile::new().unwrap();
    let logged = HttpServer::start_with(
        root.path(),
        &["--kernel-server", &server.url()],
        &[
            ("JUPYTER_MCP_KERNEL_SERVER_TOKEN", server.token()),
            ("JUPYTER_MCP_LOG", "trace"),
        ],
        Some(log.path()),
    )
    .unwrap();
    let client = Client::http(&logged.url).await.unwrap();
    let receipt = client
        .call(
            "run_cells",
            json!({"notebookRef": NB, "waitMs": 60000, "includeOutputs": true}),
        )
        .await
        .ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    drop(client);
    logged.stop().unwrap();
    let written = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        written.contains("remote kernel ready"),
        "trace logs were written"
    );
    assert!(
        !written.contains(server.token()),
        "the kernel server's token leaked into the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jupyter_server_over_tls_runs_follows_interrupts_restarts_and_transfers() {
    let ca = TestCa::new("jupyter-mcp test CA").unwrap();
    let root = notebook_root(&[TICKS, SLEEP, ANSWER]);
    let server = tls_server(root.path(), &ca);
    let (_mcp, client) = serve_trusting(root.path(), &server, &ca).await;
    let runs = on(&client);
    let (_, python) = runs.listed_kernel("remote:python3").await;
    assert_eq!(
        python["runsOn"],
        json!({"kind": "server", "url": server.url()})
    );

    runs.follow_ticks(json!([0, 2]), "tick 0", 4).await;
    let info = runs.ok("get_kernel_info", json!({})).await;
    assert_eq!(info["kernel"]["runsOn"]["url"], server.url(), "{info}");

    runs.interrupt_sleeping_cell(json!([1, 2])).await;
    runs.restart().await;
    runs.transfer_round_trip(root.path(), 31).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_is_refused_with_the_option_that_fixes_it() {
    let ca = TestCa::new("jupyter-mcp test CA").unwrap();
    let stranger = TestCa::new("some other CA").unwrap();
    let root = notebook_root(&["1 + 1"]);
    let server = tls_server(root.path(), &ca);
    let (_mcp, client) = serve_trusting(root.path(), &server, &stranger).await;
    let call = client
        .call("run_cells", json!({"notebookRef": NB, "waitMs": 30000}))
        .await;
    assert_eq!(call.error_code(), "kernel_unavailable", "{}", call.text());
    let message = call.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("does not trust") && message.contains("--kernel-server-ca"),
        "{message}"
    );
    assert!(!message.contains(server.token()), "{message}");
}
