//! Colab runtimes, end to end through MCP, against the Colab stand-in (`tests/colab/`): a real
//! Jupyter Server behind a small HTTPS proxy (signed by a test CA) that enforces Colab's proxy
//! token header and WebSocket query parameter, expires tokens, prefixes its own JSON with
//! `)]}'` and gives the kernels a `/content` folder. It is not Colab: every test here says
//! `stand_in` in its name, and nothing here proves behaviour against Google's service.

use std::path::Path;
use std::time::Duration;

use jupyter_mcp_tests::colab::{ColabStandIn, StandInRuntime};
use jupyter_mcp_tests::kernel_runs::NotebookRuns;
use jupyter_mcp_tests::kernel_server::TestCa;
use jupyter_mcp_tests::{
    Call, Client, HttpServer, is_terminal as terminal, receipt_output as output_of, sha256_hex,
    text_of, write_code_notebook,
};
use serde_json::{Value, json};

const NB: &str = "colab.ipynb";

/// A stand-in whose tokens live an hour, signed by a new test CA (returned with it: the servers
/// trust the CA's certificate file, which lives as long as the CA).
fn start_standin() -> (TestCa, ColabStandIn) {
    let ca = TestCa::new("colab stand-in CA").unwrap();
    let standin = tokio::task::block_in_place(|| ColabStandIn::start(&ca, 3600)).unwrap();
    (ca, standin)
}

/// [`start_standin`], and a root holding the notebook of code cells `sources`.
fn standin_and_notebook(sources: &[&str]) -> (TestCa, ColabStandIn, tempfile::TempDir) {
    let (ca, standin) = start_standin();
    let root = tempfile::tempdir().unwrap();
    write_code_notebook(root.path(), NB, sources);
    (ca, standin, root)
}

/// A cell that prints `waiting`, then waits (bounded) for `/content/<name>` to appear, which
/// the test creates when it has done what it wanted to do mid-run.
fn wait_for_file_cell(name: &str) -> String {
    format!(
        "import os, time\nprint('waiting', flush=True)\ndeadline = time.time() + 90\n\
         while not os.path.exists('/content/{name}') and time.time() < deadline:\n    \
         time.sleep(0.05)\nprint('released' if os.path.exists('/content/{name}') else 'gave up')"
    )
}

/// Asks for Drive authorisation the way Colab's kernel does (`colab_request`, then a blocking
/// wait for the frontend's `colab_reply` on stdin), with a long timeout.
const COLAB_REQUEST_CELL: &str = "from google.colab import _message\n_message.blocking_request('request_auth', {'authType': 'dfs_ephemeral'}, timeout_sec=120)";

const IDENTITY_CELL: &str =
    "import os\nprint('tag', os.environ.get('COLAB_RELEASE_TAG'))\nprint('cwd', os.getcwd())";

/// google-colab-cli's sessions file (0.7.5's shape) with one session `name` for `runtime`,
/// whose proxy token is `token`.
fn write_sessions_file(path: &Path, name: &str, runtime: &StandInRuntime, token: &str) {
    let session = json!({
        name: {
            "name": name, "token": token, "url": runtime.url, "endpoint": runtime.endpoint,
            "token_expires_at": "2026-12-01T18:40:52.717449Z", "variant": "DEFAULT",
            "accelerator": "NONE", "machine_shape": "STANDARD", "kernel_id": null,
            "session_id": null, "last_execution": null, "running": null
        }
    });
    // Written whole and renamed, so the server never reads half a file.
    let partial = path.with_extension("partial");
    std::fs::write(&partial, serde_json::to_string_pretty(&session).unwrap()).unwrap();
    std::fs::rename(partial, path).unwrap();
}

/// The notebook's runs through `client`, followed for two minutes at most.
fn on(client: &Client) -> NotebookRuns<'_> {
    NotebookRuns {
        client,
        notebook: NB,
        patience: Duration::from_secs(120),
    }
}

/// `jupyter-mcp` on `root` with `args`, trusting the CA in `ca_file`, and a client of it.
async fn serve(root: &Path, args: &[&str], ca_file: &Path) -> (HttpServer, Client) {
    let mut args = args.to_vec();
    args.extend(["--kernel-server-ca", ca_file.to_str().unwrap()]);
    let mcp = HttpServer::start(root, &args).expect("jupyter-mcp starts");
    let client = Client::http(&mcp.url).await.unwrap();
    (mcp, client)
}

/// `jupyter-mcp` on `root` with `colab_args` (trusting the stand-in's CA), and a client that
/// ran the notebook's first cell on the runtime, checked to have completed in `/content`.
async fn serve_and_run_first_cell(
    root: &Path,
    standin: &ColabStandIn,
    colab_args: &[&str],
) -> (HttpServer, Client) {
    let (mcp, client) = serve(root, colab_args, standin.ca_file()).await;
    runs_in_content(&on(&client), standin).await;
    (mcp, client)
}

/// Runs the notebook's first cell ([`IDENTITY_CELL`]) and checks that it completed in the
/// runtime's `/content`.
async fn runs_in_content(nb: &NotebookRuns<'_>, standin: &ColabStandIn) {
    let ran = nb.run(json!([0]), 60_000).await;
    assert_eq!(ran["status"], "completed", "{ran}\n{}", standin.logs());
    assert!(output_of(&ran, 0).contains("cwd /content"), "{ran}");
}

/// Moves a file of the notebook's kernel with `tool` (`upload_file` or `download_file`), and
/// answers the result and how long the call took.
async fn timed_transfer(
    nb: &NotebookRuns<'_>,
    tool: &str,
    host_path: &str,
    kernel_path: &str,
) -> (Value, Duration) {
    let started = std::time::Instant::now();
    let result = nb.transfer(tool, host_path, kernel_path).await;
    (result, started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colab_stand_in_runs_cells_from_a_sessions_file_and_survives_a_token_expiring_mid_run() {
    let (_ca, standin, root) =
        standin_and_notebook(&[IDENTITY_CELL, &wait_for_file_cell("go-token")]);
    let runtime = standin.runtime().clone();
    let sessions = root.path().join("sessions.json");
    write_sessions_file(&sessions, "a1b2c3", &runtime, &runtime.token);
    let (_mcp, client) = serve_and_run_first_cell(
        root.path(),
        &standin,
        &[
            "--colab-session",
            "a1b2c3",
            "--colab-sessions-file",
            sessions.to_str().unwrap(),
        ],
    )
    .await;
    let nb = on(&client);

    // Cells ran on the runtime: its release tag and its /content working folder.
    let first = nb
        .ok("get_execution", json!({"includeOutputs": true}))
        .await;
    let output = output_of(&first, 0);
    assert!(
        output.contains("tag release-colab-standin-20261201"),
        "{output}"
    );
    assert!(output.contains("cwd /content"), "{output}");

    // check_colab: the kernel's nonce file is read back through the runtime's Contents API,
    // then removed and confirmed gone both ways; the release tag is evidence only.
    let check = nb.ok("check_colab", json!({})).await;
    assert_eq!(check["verified"], true, "{check}\n{}", standin.logs());
    assert_eq!(check["cleanup"], "confirmed", "{check}");
    assert_eq!(check["root"], runtime.url.as_str(), "{check}");
    assert_eq!(
        check["identity"]["buildInfoReleaseTag"], "release-colab-standin-20261201",
        "{check}"
    );
    let probe = check["probePath"].as_str().unwrap_or_default();
    assert!(probe.starts_with("/content/jupyter-mcp-check-"), "{check}");
    let leftovers: Vec<_> = std::fs::read_dir(standin.content_folder())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("jupyter-mcp-check-")
        })
        .collect();
    assert!(leftovers.is_empty(), "the probe is gone: {leftovers:?}");

    // A 20 MiB file goes through the runtime's Contents API (chunked PUTs), verified by the
    // kernel's SHA-256, and comes back the same way.
    let payload: Vec<u8> = (0..20 * 1024 * 1024u32)
        .map(|index| (index.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let expected = sha256_hex(&payload);
    std::fs::write(root.path().join("payload.bin"), &payload).unwrap();
    let (uploaded, upload_time) =
        timed_transfer(&nb, "upload_file", "payload.bin", "/content/big.bin").await;
    assert_eq!(uploaded["route"], "contents", "{uploaded}");
    assert_eq!(uploaded["sha256"], expected.as_str(), "{uploaded}");
    assert!(uploaded["chunks"].as_u64().unwrap() >= 5, "{uploaded}");
    assert!(
        std::fs::read(standin.content_folder().join("big.bin")).unwrap() == payload,
        "the runtime's copy is intact"
    );
    let (downloaded, download_time) =
        timed_transfer(&nb, "download_file", "back.bin", "/content/big.bin").await;
    assert_eq!(downloaded["route"], "contents", "{downloaded}");
    assert_eq!(downloaded["sha256"], expected.as_str(), "{downloaded}");
    assert!(std::fs::read(root.path().join("back.bin")).unwrap() == payload);
    eprintln!(
        "20 MiB through the stand-in's Contents API: sha256 {expected}, upload {upload_time:?}, download {download_time:?}"
    );
    // A colabFileUri whose path is not the kernel path is refused, nothing moved.
    let arguments = json!({"hostPath": "payload.bin", "kernelPath": "/content/other.bin",
                           "colabFileUri": format!("{}content/big.bin", runtime.url)});
    let mismatched = nb.call("upload_file", arguments).await;
    assert_eq!(
        mismatched.error_code(),
        "invalid_argument",
        "{}",
        mismatched.text()
    );
    assert!(!standin.content_folder().join("other.bin").exists());

    // Mid-run, the proxy token expires and the kernel socket drops (as a proxy that refuses
    // the old token would). The CLI has renewed the session's token in its file: the host
    // reads it there, reconnects, and the run completes with its output.
    nb.run(json!([1]), 0).await;
    nb.follow(|receipt| output_of(receipt, 0).contains("waiting"))
        .await;
    let fresh = standin.issue_token(&runtime.endpoint).unwrap();
    write_sessions_file(&sessions, "a1b2c3", &runtime, &fresh);
    let dropped = standin.expire_tokens(&runtime.endpoint, true).unwrap();
    assert!(dropped >= 1, "the kernel socket was open through the proxy");
    let (status, _) = standin
        .runtime_get(&runtime.token, &runtime.endpoint, "api/kernels")
        .unwrap();
    assert_eq!(status, 401, "the old token really stopped working");
    // Let the cell end only once the host is back on the kernel's socket with the fresh token:
    // what a kernel sends while no socket is open may never arrive (the run would then say it
    // cannot confirm completion, which is right, but not what this test is about).
    let endpoint = runtime.endpoint.clone();
    let reconnected = |state: &Value| {
        state["runtimes"][endpoint.as_str()]["sockets"]
            .as_u64()
            .unwrap_or(0)
            >= 1
    };
    let state = state_until(&standin, reconnected);
    assert!(reconnected(&state), "the host reconnected: {state}");
    std::fs::write(standin.content_folder().join("go-token"), "").unwrap();
    let receipt = nb.follow(terminal).await;
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let output = output_of(&receipt, 0);
    assert!(
        output.contains("waiting") && output.contains("released"),
        "{output}"
    );
}

/// Without a Colab runtime (here: a plain Jupyter Server over TLS), no Colab tool is listed,
/// and a call is refused without running anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_colab_is_refused_against_a_plain_jupyter_server_not_a_stand_in() {
    use jupyter_mcp_tests::kernel_server::{KernelServer, ServerKind};
    let ca = TestCa::new("plain server CA").unwrap();
    let root = tempfile::tempdir().unwrap();
    write_code_notebook(root.path(), NB, &["print(1)"]);
    let tls = ca.issue("plain").unwrap();
    let server = tokio::task::block_in_place(|| {
        KernelServer::start_with_tls(ServerKind::JupyterServer, root.path(), &[], Some(tls))
    })
    .unwrap();
    let token_file = server.token_file();
    let (_mcp, client) = serve(
        root.path(),
        &[
            "--kernel-server",
            &server.url(),
            "--kernel-server-token-file",
            token_file.to_str().unwrap(),
        ],
        &ca.ca_file(),
    )
    .await;
    let nb = on(&client);
    let tools = client.tool_names().await.unwrap();
    assert!(tools.contains(&"run_cells".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"check_colab".to_owned()), "{tools:?}");
    let ran = nb.run(json!([0]), 60_000).await;
    assert_eq!(ran["status"], "completed", "{ran}");
    let refused = nb.call("check_colab", json!({})).await;
    assert!(refused.is_error(), "{}", refused.text());
    assert!(refused.text().contains("check_colab"), "{}", refused.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colab_stand_in_runtime_url_and_token_file_and_a_released_runtime_ends_the_run_unavailable()
{
    let (_ca, standin, root) = standin_and_notebook(&[
        IDENTITY_CELL,
        &wait_for_file_cell("never"),
        "print('after')",
        COLAB_REQUEST_CELL,
    ]);
    let runtime = standin.runtime().clone();
    let token_file = root.path().join("proxy-token");
    std::fs::write(&token_file, format!("{}\n", runtime.token)).unwrap();
    let (_mcp, client) = serve_and_run_first_cell(
        root.path(),
        &standin,
        &[
            "--colab-runtime-url",
            &runtime.url,
            "--colab-token-file",
            token_file.to_str().unwrap(),
        ],
    )
    .await;
    let nb = on(&client);

    // The kernel asks Colab's frontend for Drive access and waits (up to 120 s) for the answer
    // on stdin: the host answers at once with an error that says what to do in Colab, so the
    // cell fails at once instead of hanging.
    let started = std::time::Instant::now();
    let asked = nb.run(json!([3]), 60_000).await;
    let elapsed = started.elapsed();
    assert_eq!(asked["status"], "failed", "{asked}");
    let output = output_of(&asked, 0);
    assert!(
        output.contains("MessageError"),
        "answered, not timed out: {asked}"
    );
    assert!(output.contains("action required in Colab"), "{asked}");
    // The receipt itself says what the user must do, and for which cell.
    assert_eq!(asked["actionRequired"]["code"], "colab_request", "{asked}");
    assert_eq!(
        asked["actionRequired"]["cellId"], asked["cells"][0]["cellId"],
        "{asked}"
    );
    assert!(
        text_of(&asked["actionRequired"]["message"]).contains("request_auth"),
        "{asked}"
    );
    eprintln!("colab_request answered; the cell failed after {elapsed:?}");

    // Colab releases (or reclaims) the runtime mid-run: the run ends `unavailable` with a
    // reason code, the output so far kept, the later cell not run. Never a completion.
    nb.run(json!([1, 2]), 0).await;
    nb.follow(|receipt| output_of(receipt, 0).contains("waiting"))
        .await;
    standin.release(&runtime.endpoint).unwrap();
    let receipt = nb.follow(terminal).await;
    assert_eq!(receipt["status"], "unavailable", "{receipt}");
    assert_eq!(receipt["cells"][1]["state"], "not-run", "{receipt}");
    let code = receipt["reasonCode"].as_str().unwrap_or_default();
    assert!(
        ["kernel_died", "kernel_unreachable", "observation_failed"].contains(&code),
        "{receipt}"
    );
    assert!(output_of(&receipt, 0).contains("waiting"), "output kept");
}

/// `configure_kernel` with `runtime: "colab"` and the `extra` arguments (an object, such as
/// `{"serverAlias": …}`).
async fn configure_colab(nb: &NotebookRuns<'_>, mut extra: Value) -> Call {
    extra["runtime"] = json!("colab");
    nb.call("configure_kernel", extra).await
}

/// [`configure_colab`] waiting up to 30 s: the receipt, checked to have come by `route` and to
/// wait for a kernel choice.
async fn start_colab_setup(nb: &NotebookRuns<'_>, route: &str, mut extra: Value) -> Value {
    extra["waitMs"] = json!(30000);
    let receipt = configure_colab(nb, extra).await.ok();
    assert_eq!(receipt["route"], route, "{receipt}");
    assert_eq!(receipt["status"], "awaiting_kernel_selection", "{receipt}");
    receipt
}

async fn setup_until(
    nb: &NotebookRuns<'_>,
    setup_id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let receipt = nb
            .ok(
                "get_kernel_setup",
                json!({"setupId": setup_id, "waitMs": 5000}),
            )
            .await;
        if done(&receipt) || std::time::Instant::now() > deadline {
            return receipt;
        }
    }
}

/// `select_setup_kernel` with `choice`, then the setup followed until it is no longer running.
async fn select_until_settled(nb: &NotebookRuns<'_>, setup_id: &str, choice: &Value) -> Value {
    let arguments = json!({"setupId": setup_id, "kernelChoiceId": choice["kernelChoiceId"],
                           "waitMs": 60000});
    let selected = nb.ok("select_setup_kernel", arguments).await;
    if selected["status"] == "running" {
        setup_until(nb, setup_id, |receipt| receipt["status"] != "running").await
    } else {
        selected
    }
}

/// The kernel choices of a fresh listing.
async fn list_choices(nb: &NotebookRuns<'_>, setup_id: &str) -> Vec<Value> {
    let listed = nb
        .ok("list_setup_kernels", json!({"setupId": setup_id}))
        .await;
    listed["kernelChoices"]["choices"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("a listing: {listed}"))
}

/// The tracked setup on the sessions-file route, from request to a verified runtime: it waits
/// for an explicit kernel choice (no default), a new listing voids the old ids, and while it is
/// unsettled the notebook's runs are refused; ready only once the nonce proof verified. Then a
/// second setup is cancelled while it waits, and one on the runtime-URL route whose choice never
/// comes ends `failed` at its deadline, with the stage it stopped in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colab_stand_in_setup_waits_for_a_kernel_choice_then_verifies_and_cancel_and_deadline_end_it()
 {
    let (_ca, standin, root) = standin_and_notebook(&[IDENTITY_CELL]);
    let runtime = standin.runtime().clone();
    let sessions = root.path().join("sessions.json");
    write_sessions_file(&sessions, "s-setup", &runtime, &runtime.token);
    let ca_file = standin.ca_file().to_str().unwrap().to_owned();
    let (mcp, client) = serve(
        root.path(),
        &[
            "--colab-session",
            "s-setup",
            "--colab-sessions-file",
            sessions.to_str().unwrap(),
        ],
        standin.ca_file(),
    )
    .await;
    let nb = on(&client);
    let tools = client.tool_names().await.unwrap();
    for tool in [
        "get_kernel_setup",
        "list_setup_kernels",
        "select_setup_kernel",
        "cancel_kernel_setup",
    ] {
        assert!(tools.contains(&tool.to_owned()), "{tool}: {tools:?}");
    }
    // Sessions have no aliases to mount: the tool is not listed here.
    assert!(
        !tools.contains(&"mount_colab_server".to_owned()),
        "{tools:?}"
    );

    // An alias on a route that creates no server is refused before anything starts.
    let alias = configure_colab(&nb, json!({"serverAlias": "m0123abcd"})).await;
    assert_eq!(alias.error_code(), "invalid_argument", "{}", alias.text());
    assert!(alias.text().contains("s-setup"), "{}", alias.text());

    let started = start_colab_setup(&nb, "sessions_file", json!({})).await;
    assert_eq!(started["sessionName"], "s-setup", "{started}");
    assert_eq!(started["ready"], false, "{started}");
    assert_eq!(
        started["actionRequired"]["code"], "select_kernel_choice",
        "{started}"
    );
    let setup_id = started["setupId"].as_str().unwrap().to_owned();

    // The notebook is blocked while its setup is unsettled: no run starts.
    let blocked = nb.call("run_cells", json!({"cellIds": [0]})).await;
    assert_eq!(
        blocked.error_code(),
        "command_pending",
        "{}",
        blocked.text()
    );
    assert_eq!(blocked.error()["details"]["colabCode"], "setup_active");

    // Two listings: the first one's ids die with the second.
    let old = list_choices(&nb, &setup_id).await;
    let fresh = list_choices(&nb, &setup_id).await;
    assert!(!fresh.is_empty(), "the runtime's kernelspecs");
    assert!(
        fresh
            .iter()
            .any(|choice| text_of(&choice["label"]).contains("Python")),
        "{fresh:?}"
    );
    // Choices (and list_kernels) name the runtime they run on.
    assert!(
        text_of(&fresh[0]["label"]).ends_with("on Colab session s-setup"),
        "{fresh:?}"
    );
    let listed = nb.ok("list_kernels", json!({})).await;
    assert!(
        text_of(&listed["kernels"][0]["label"]).contains("Colab session s-setup"),
        "{listed}"
    );
    let stale = nb
        .call(
            "select_setup_kernel",
            json!({"setupId": setup_id, "kernelChoiceId": old[0]["kernelChoiceId"]}),
        )
        .await;
    assert_eq!(stale.error_code(), "invalid_argument", "{}", stale.text());
    assert_eq!(stale.error()["details"]["colabCode"], "choice_stale");

    let ready = select_until_settled(&nb, &setup_id, &fresh[0]).await;
    assert_eq!(ready["status"], "ready", "{ready}\n{}", standin.logs());
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["stage"], "complete", "{ready}");
    assert_eq!(ready["verification"]["verified"], true, "{ready}");
    assert_eq!(ready["verification"]["cleanup"], "confirmed", "{ready}");
    assert_eq!(ready["serverCreated"], false, "{ready}");
    assert_eq!(ready["kernelLabel"], fresh[0]["label"], "{ready}");

    // Ready: the notebook runs on the runtime.
    runs_in_content(&nb, &standin).await;

    // A second setup, cancelled while it waits for a choice: cancelled, nothing created, and
    // the notebook free again.
    let second = configure_colab(&nb, json!({})).await.ok();
    let second_id = second["setupId"].as_str().unwrap().to_owned();
    assert_ne!(second_id, setup_id);
    let cancelled = nb
        .ok("cancel_kernel_setup", json!({"setupId": second_id}))
        .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["cleanupPending"], false, "{cancelled}");
    assert_eq!(cancelled["serverMayRemain"], false, "{cancelled}");
    let after = nb.run(json!([0]), 60_000).await;
    assert_eq!(after["status"], "completed", "{after}");
    let late = nb
        .call("list_setup_kernels", json!({"setupId": second_id}))
        .await;
    assert!(
        late.is_error(),
        "a cancelled setup lists nothing: {}",
        late.text()
    );
    drop(client);
    drop(mcp);

    // The runtime-URL route, from request to ready: the runtime probed with its proxy token,
    // then the same explicit choice and proof; get_kernel_info names the file-service root.
    let token_file = root.path().join("proxy-token");
    std::fs::write(&token_file, &runtime.token).unwrap();
    let url_args = [
        "--colab-runtime-url",
        runtime.url.as_str(),
        "--colab-token-file",
        token_file.to_str().unwrap(),
        "--kernel-server-ca",
        ca_file.as_str(),
    ];
    let mcp = HttpServer::start(root.path(), &url_args).unwrap();
    let client = Client::http(&mcp.url).await.unwrap();
    let nb = on(&client);
    let probed = start_colab_setup(&nb, "runtime_url", json!({})).await;
    let probed_id = probed["setupId"].as_str().unwrap().to_owned();
    let choices = list_choices(&nb, &probed_id).await;
    let ready = select_until_settled(&nb, &probed_id, &choices[0]).await;
    assert_eq!(ready["status"], "ready", "{ready}\n{}", standin.logs());
    assert_eq!(ready["stage"], "complete", "{ready}");
    assert_eq!(ready["verification"]["verified"], true, "{ready}");
    let info = nb.ok("get_kernel_info", json!({})).await;
    assert_eq!(
        info["colabRootCandidates"],
        json!([runtime.url.as_str()]),
        "{info}"
    );
    drop(client);
    drop(mcp);

    // The same route with a two-second deadline: nobody chooses, so the setup ends `failed` in
    // the stage it waited in.
    let mcp = HttpServer::start_with_env(
        root.path(),
        &url_args,
        &[("JUPYTER_MCP_COLAB_SETUP_DEADLINE_MS", "2000")],
    )
    .unwrap();
    let client = Client::http(&mcp.url).await.unwrap();
    let nb = on(&client);
    let waiting = start_colab_setup(&nb, "runtime_url", json!({})).await;
    let waiting_id = waiting["setupId"].as_str().unwrap().to_owned();
    let failed = setup_until(&nb, &waiting_id, |receipt| {
        receipt["status"] != "awaiting_kernel_selection"
    })
    .await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["failedStage"], "awaiting_kernel_selection",
        "{failed}"
    );
    assert_eq!(failed["ready"], false, "{failed}");
    assert!(failed["error"]["code"].is_string(), "{failed}");
}

/// An application-default credentials file (`authorized_user`) whose `token_uri` is the
/// stand-in's OAuth token endpoint.
fn write_adc_file(path: &Path, standin: &ColabStandIn, refresh_token: &str) {
    let adc = json!({
        "type": "authorized_user",
        "client_id": "standin-client.apps.example",
        "client_secret": "standin-client-secret",
        "refresh_token": refresh_token,
        "token_uri": standin.token_uri(),
    });
    std::fs::write(path, adc.to_string()).unwrap();
}

fn tunnel_for(
    standin: &ColabStandIn,
    adc: &Path,
    request_timeout: Duration,
) -> host_standalone::colab::tunnel::ColabTunnel {
    use host_standalone::colab::tunnel::{ColabTunnel, TunnelConfig};
    ColabTunnel::new(TunnelConfig {
        base_url: standin.base_url(),
        credentials_file: Some(adc.to_owned()),
        tls: kernels::TlsTrust {
            extra_roots: vec![standin.ca_file().to_owned()],
        },
        request_timeout,
        ..TunnelConfig::default()
    })
    .unwrap()
}

/// The stand-in's state (a blocking call, off the async worker).
fn standin_state(standin: &ColabStandIn) -> Value {
    tokio::task::block_in_place(|| standin.state()).unwrap()
}

fn set_mode(standin: &ColabStandIn, mode: &str) {
    tokio::task::block_in_place(|| standin.set_assign_mode(mode)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colab_stand_in_tunnel_creates_finds_refuses_keeps_alive_and_releases_with_adc_credentials()
{
    use colab_setup::{AssignRefusal, CommandKind, Failure, Reply, ServerAlias};
    use host_standalone::colab::tunnel::{KeepAlive, notebook_hash};

    let (_ca, standin) = start_standin();
    let folder = tempfile::tempdir().unwrap();
    let adc = folder.path().join("application_default_credentials.json");
    write_adc_file(&adc, &standin, standin.google_refresh_token());
    let tunnel = tunnel_for(&standin, &adc, Duration::from_secs(30));

    assert_eq!(
        tunnel.perform(&CommandKind::CheckProvider).await,
        Reply::Done
    );

    let create = |alias: &ServerAlias| CommandKind::CreateAssignment {
        alias: alias.clone(),
    };
    let lookup = |alias: &ServerAlias| CommandKind::LookupAssignment {
        alias: alias.clone(),
    };

    // Creation assigns a new runtime under the alias's notebook hash.
    let alias = ServerAlias::generate([0x01, 0x23, 0x45, 0x67]);
    let created = tunnel.perform(&create(&alias)).await;
    let Reply::AssignmentCreated { endpoint } = created else {
        panic!("{created:?}\n{}", standin.logs());
    };
    assert_ne!(endpoint, standin.runtime().endpoint, "a new runtime");
    let state = standin_state(&standin);
    assert_eq!(state["runtimes"][&endpoint]["nbh"], notebook_hash(&alias));
    assert_eq!(state["counters"]["assign_post"], 1);
    // The answer's proxy URL and token reach the runtime.
    let assignment = tunnel.assignment(&endpoint).expect("remembered");
    assert_eq!(
        assignment.url.as_deref(),
        state["runtimes"][&endpoint]["url"].as_str()
    );
    assert!(assignment.proxy_token().is_some());

    // A lookup of that alias finds it; creating it again finds it too, without a POST.
    let found = Reply::AssignmentFound {
        endpoint: endpoint.clone(),
    };
    assert_eq!(tunnel.perform(&lookup(&alias)).await, found);
    assert_eq!(tunnel.perform(&create(&alias)).await, found);
    // A lookup of an unknown alias finds nothing and never POSTs.
    let unknown = ServerAlias::generate([0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(tunnel.perform(&lookup(&unknown)).await, Reply::NoAssignment);
    assert_eq!(
        standin_state(&standin)["counters"]["assign_post"],
        1,
        "lookups never POST"
    );

    // Refusals: 412, 503 and a quota denial in `outcome`.
    let create_unknown = create(&unknown);
    for (mode, refusal) in [
        ("too_many", AssignRefusal::TooManyAssignments),
        ("unavailable", AssignRefusal::AcceleratorUnavailable),
        ("quota", AssignRefusal::QuotaDenied),
    ] {
        set_mode(&standin, mode);
        assert_eq!(
            tunnel.perform(&create_unknown).await,
            Reply::AssignmentRefused(refusal),
            "{mode}"
        );
    }
    // A POST that never answers may have created a runtime.
    set_mode(&standin, "stuck");
    let impatient = tunnel_for(&standin, &adc, Duration::from_secs(2));
    assert_eq!(
        impatient.perform(&create_unknown).await,
        Reply::Failed(Failure::Unconfirmed)
    );
    set_mode(&standin, "ok");

    // Keep-alive reaches the runtime.
    let before = standin_state(&standin)["runtimes"][&endpoint]["keepAlives"]
        .as_u64()
        .unwrap();
    assert_eq!(
        tunnel.keep_alive(&endpoint).await.unwrap(),
        KeepAlive::Confirmed
    );
    assert_eq!(
        standin_state(&standin)["runtimes"][&endpoint]["keepAlives"],
        before + 1
    );

    // Release, and the alias finds nothing any more.
    assert_eq!(
        tunnel
            .perform(&CommandKind::ReleaseRuntime {
                endpoint: endpoint.clone()
            })
            .await,
        Reply::Done
    );
    let state = standin_state(&standin);
    assert_eq!(state["runtimes"][&endpoint]["released"], true);
    assert_eq!(state["counters"]["unassign"], 1);
    assert_eq!(tunnel.perform(&lookup(&alias)).await, Reply::NoAssignment);
    assert!(tunnel.assignment(&endpoint).is_none());
    // One refresh served every call of the first client (the second made its own).
    assert_eq!(state["counters"]["oauth_token"], 2);

    // Credentials Google refuses, or none at all, need a new sign-in, and say how.
    let revoked = folder.path().join("revoked.json");
    write_adc_file(&revoked, &standin, "revoked-refresh-token");
    let refused = tunnel_for(&standin, &revoked, Duration::from_secs(30));
    assert_eq!(
        refused.perform(&CommandKind::CheckProvider).await,
        Reply::Failed(Failure::AuthenticationRequired)
    );
    let message = refused.check_credentials().await.unwrap_err().to_string();
    assert!(
        message.contains("gcloud auth application-default login --scopes="),
        "{message}"
    );
    let missing = tunnel_for(
        &standin,
        &folder.path().join("none.json"),
        Duration::from_secs(30),
    );
    assert_eq!(
        missing.perform(&lookup(&alias)).await,
        Reply::Failed(Failure::AuthenticationRequired)
    );
}

/// The stand-in's runtimes, from its state.
fn runtimes(state: &Value) -> impl Iterator<Item = &Value> {
    state["runtimes"]
        .as_object()
        .into_iter()
        .flat_map(|map| map.values())
}

/// Polls the stand-in's state until `done` holds, for at most a minute (a condition wait: the
/// state is asked again every 20 ms, and the caller asserts on what it finally says).
fn state_until(standin: &ColabStandIn, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut state = standin_state(standin);
    while !done(&state) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        state = standin_state(standin);
    }
    state
}

/// The experimental tunnel route through MCP: a setup assigns a new runtime under a generated
/// alias (kept alive while in use), is verified and runs cells there; the exact alias reuses it
/// without a new assignment; an unknown alias fails without creating anything; a setup
/// cancelled while it waits releases the runtime it created and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colab_stand_in_tunnel_setup_creates_reuses_by_alias_and_cancel_releases_only_its_own() {
    let (_ca, standin, root) = standin_and_notebook(&[IDENTITY_CELL]);
    let adc = root.path().join("adc.json");
    write_adc_file(&adc, &standin, standin.google_refresh_token());
    let (_mcp, client) = serve(
        root.path(),
        &[
            "--colab-tunnel",
            "--colab-tunnel-url",
            &standin.base_url(),
            "--colab-credentials-file",
            adc.to_str().unwrap(),
        ],
        standin.ca_file(),
    )
    .await;
    let nb = on(&client);
    let posts = |state: &Value| state["counters"]["assign_post"].as_u64().unwrap_or(0);
    let before = posts(&standin_state(&standin));

    let created = start_colab_setup(&nb, "tunnel", json!({})).await;
    assert_eq!(created["serverCreated"], true, "{created}");
    let alias = created["serverAlias"].as_str().unwrap().to_owned();
    let setup_id = created["setupId"].as_str().unwrap().to_owned();
    assert_eq!(posts(&standin_state(&standin)), before + 1);
    let choices = list_choices(&nb, &setup_id).await;
    let ready = select_until_settled(&nb, &setup_id, &choices[0]).await;
    assert_eq!(ready["status"], "ready", "{ready}\n{}", standin.logs());
    assert_eq!(ready["verification"]["verified"], true, "{ready}");
    runs_in_content(&nb, &standin).await;
    // Kept alive while in use.
    let state = state_until(&standin, |state| {
        runtimes(state).any(|runtime| runtime["keepAlives"].as_u64().unwrap_or(0) >= 1)
    });
    assert!(
        runtimes(&state).any(|runtime| runtime["keepAlives"].as_u64().unwrap_or(0) >= 1),
        "{state}"
    );

    // mount_colab_server: the alias's file service attached to the active kernel, verified.
    let tools = client.tool_names().await.unwrap();
    assert!(
        tools.contains(&"mount_colab_server".to_owned()),
        "{tools:?}"
    );
    let mounted = nb
        .ok(
            "mount_colab_server",
            json!({"serverAlias": alias, "waitMs": 60000}),
        )
        .await;
    let mounted = if mounted["status"] == "running" {
        setup_until(&nb, mounted["setupId"].as_str().unwrap(), |receipt| {
            receipt["status"] != "running"
        })
        .await
    } else {
        mounted
    };
    assert_eq!(mounted["route"], "mount_server", "{mounted}");
    assert_eq!(mounted["status"], "ready", "{mounted}\n{}", standin.logs());
    assert_eq!(mounted["verification"]["verified"], true, "{mounted}");
    assert_eq!(
        posts(&standin_state(&standin)),
        before + 1,
        "a mount creates nothing"
    );

    // Exact alias reuse: the same runtime, no new assignment; cancelling it releases nothing.
    let reused = start_colab_setup(&nb, "tunnel", json!({"serverAlias": alias})).await;
    assert_eq!(reused["serverCreated"], false, "{reused}");
    assert_eq!(reused["serverAlias"], alias.as_str(), "{reused}");
    assert_eq!(
        posts(&standin_state(&standin)),
        before + 1,
        "reuse created nothing"
    );
    let kept = nb
        .ok("cancel_kernel_setup", json!({"setupId": reused["setupId"]}))
        .await;
    assert_eq!(kept["status"], "cancelled", "{kept}");
    assert_eq!(kept["runtimeReleased"], false, "{kept}");

    // An alias no setup made: refused, nothing created.
    let unknown = configure_colab(&nb, json!({"serverAlias": "m0000abcd", "waitMs": 30000}))
        .await
        .ok();
    assert_eq!(unknown["status"], "failed", "{unknown}");
    assert_eq!(unknown["error"]["code"], "alias_unknown", "{unknown}");
    assert_eq!(posts(&standin_state(&standin)), before + 1);

    // A new runtime, cancelled while it waits for a kernel choice: released, and only it.
    let live_before = runtimes(&standin_state(&standin))
        .filter(|runtime| runtime["released"] != true)
        .count();
    let second = start_colab_setup(&nb, "tunnel", json!({})).await;
    assert_ne!(second["serverAlias"], alias.as_str());
    let cancelled = nb
        .ok("cancel_kernel_setup", json!({"setupId": second["setupId"]}))
        .await;
    let cancelled = if cancelled["cleanupPending"] == true {
        setup_until(&nb, cancelled["setupId"].as_str().unwrap(), |receipt| {
            receipt["cleanupPending"] == false
        })
        .await
    } else {
        cancelled
    };
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(cancelled["runtimeReleased"], true, "{cancelled}");
    let state = standin_state(&standin);
    assert_eq!(state["counters"]["unassign"], 1, "{state}");
    // The first runtime is still assigned, and the notebook still runs there.
    let live = runtimes(&state)
        .filter(|runtime| runtime["released"] != true)
        .count();
    assert_eq!(live, live_before, "{state}");
    let again = nb.run(json!([0]), 60_000).await;
    assert_eq!(again["status"], "completed", "{again}");
}
