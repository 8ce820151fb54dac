//! The host-parity suite: each scenario is written once and run against every host that lists
//! the tools it needs, in the style of ripgrep's `rgtest!`. Hosts: the standalone server on
//! local kernels (`local`), the standalone server with `--kernel-server` on a real Jupyter
//! Server (`kernel_server`), `--jupyter` on a real Jupyter Server with jupyter-collaboration,
//! the person played by a real Yjs client (`jupyter`), and the embedding example in memory
//! (`embedded`, the document scenarios). The VS Code window runs the same scenarios in
//! `cargo xtask extension-test`, tests tagged `[parity: NAME]` in their titles: against the
//! stand-in of the Jupyter extension (titles `stand-in Jupyter extension: …`) and on our own
//! controller with a real ipykernel (titles `stand-in vscode: …`). The book's "What each host can
//! do" table (`docs/src/hosts.md`) is checked against [`PARITY`] and those titles by
//! `the_book_host_table_is_what_the_parity_suite_runs`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jupyter_mcp_tests::collab::{CollabServer, Peer, shared_server};
use jupyter_mcp_tests::kernel_server::{KernelServer, ServerKind};
use jupyter_mcp_tests::messages::messages_stand_in;
use jupyter_mcp_tests::{
    Client, HttpServer, is_terminal, link_venv, random_bytes, sha256_hex, strings_of,
    workspace_binary, workspace_root, write_code_notebook,
};
use serde_json::{Value, json};

/// Defines the scenarios, each as a module with one test per host, and [`PARITY`], the list
/// the book's host table (`docs/src/hosts.md`) is checked against.
macro_rules! parity {
    ($($scenario:ident: [$($host:ident),+ $(,)?];)+) => {
        $(
            mod $scenario {
                $(
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn $host() {
                        super::$scenario(super::Host::$host).await;
                    }
                )+
            }
        )+
        /// Every scenario and the hosts it runs on.
        const PARITY: &[(&str, &[&str])] = &[$((stringify!($scenario), &[$(stringify!($host)),+])),+];
    };
}

parity! {
    an_edit_makes_exactly_its_cell_and_dependents_stale_and_a_stale_run_runs_them:
        [local, kernel_server, jupyter];
    a_restart_makes_every_cell_stale: [local, kernel_server, jupyter];
    a_kernel_killed_mid_run_ends_the_run_unavailable: [local, kernel_server, jupyter];
    an_interrupt_ends_the_running_cell_and_a_new_run_is_admitted: [local, kernel_server, jupyter];
    undo_restores_the_agents_last_change: [local, kernel_server, jupyter, embedded];
    undo_refuses_when_the_person_changed_the_cell_since: [local, kernel_server, jupyter];
    summaries_come_from_the_model_and_are_not_asked_again: [local, kernel_server, jupyter, embedded];
    a_10_mib_file_goes_to_the_kernel_and_back_unchanged: [local, kernel_server, jupyter];
    a_background_runs_outputs_reach_the_file: [local, kernel_server, jupyter];
    every_listed_tool_answers: [local, kernel_server, jupyter, embedded];
}

/// Where the notebooks of a scenario live.
#[allow(
    non_camel_case_types,
    reason = "the variants are the test names of the hosts"
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Host {
    local,
    kernel_server,
    jupyter,
    embedded,
}

/// A host serving one notebook, `parity.ipynb`, with a client connected.
struct Fixture {
    client: Client,
    notebook: String,
    /// The notebook's file, where the host has one the test can read and write.
    file: Option<PathBuf>,
    /// The folder transfers read and write.
    files_root: PathBuf,
    /// The person in JupyterLab's room, for `--jupyter`.
    person: Option<Peer>,
    _guards: Vec<Box<dyn std::any::Any + Send>>,
}

const NOTEBOOK: &str = "parity.ipynb";

/// One Jupyter Server for the `kernel_server` tests running at the same time (as
/// [`shared_server`] does for `--jupyter`), serving a folder of its own where each test makes a
/// folder.
fn shared_kernel_server() -> Arc<(KernelServer, tempfile::TempDir)> {
    static SHARED: Mutex<Weak<(KernelServer, tempfile::TempDir)>> = Mutex::new(Weak::new());
    let mut slot = SHARED.lock().unwrap_or_else(|poison| poison.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let root = tempfile::tempdir().unwrap();
    let server = KernelServer::start(ServerKind::JupyterServer, root.path(), &[])
        .expect("a Jupyter Server starts");
    let shared = Arc::new((server, root));
    *slot = Arc::downgrade(&shared);
    shared
}

impl Fixture {
    /// `host` serving a notebook of `sources`, its server started with `env`.
    async fn start(host: Host, sources: &[&str], env: &[(&str, &str)]) -> Fixture {
        let mut guards: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        // The server-backed hosts: the notebook's file, the folder `jupyter-mcp` serves (its
        // notebooks, or its transfer files with `--jupyter`), its arguments, and the person.
        let (notebook, file, root, args, person) = match host {
            Host::embedded => return Fixture::embedded(sources, env).await,
            Host::local => {
                let root = tempfile::tempdir().unwrap();
                link_venv(root.path());
                let file = write_code_notebook(root.path(), NOTEBOOK, sources);
                (NOTEBOOK.to_owned(), file, root, Vec::new(), None)
            }
            Host::kernel_server => {
                let shared = shared_kernel_server();
                let root = tempfile::tempdir_in(shared.1.path()).unwrap();
                let file = write_code_notebook(root.path(), NOTEBOOK, sources);
                let args = vec![
                    "--kernel-server".to_owned(),
                    shared.0.url(),
                    "--kernel-server-token-file".to_owned(),
                    shared.0.token_file().display().to_string(),
                ];
                guards.push(Box::new(shared));
                (NOTEBOOK.to_owned(), file, root, args, None)
            }
            Host::jupyter => {
                let server: Arc<CollabServer> = shared_server();
                let name = format!("parity-{:x}.ipynb", rand_suffix());
                let file = jupyter_mcp_tests::collab::write_notebook(&server, &name, sources);
                let args = vec![
                    "--jupyter".to_owned(),
                    server.url(),
                    "--kernel-server-token-file".to_owned(),
                    server.token_file().display().to_string(),
                ];
                let mut person = Peer::start(&server.url(), server.token()).unwrap();
                person.open(&name).unwrap();
                guards.push(Box::new(server));
                (name, file, tempfile::tempdir().unwrap(), args, Some(person))
            }
        };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = HttpServer::start_with_env(root.path(), &args, env).unwrap();
        let client = Client::http(&server.url).await.unwrap();
        let files_root = root.path().to_path_buf();
        // The server stops before the folders and shared servers it uses go.
        guards.insert(0, Box::new(root));
        guards.insert(0, Box::new(server));
        Fixture {
            client,
            notebook,
            file: Some(file),
            files_root,
            person,
            _guards: guards,
        }
    }

    /// The embedding example, its notebook made through the tools (it keeps notebooks in
    /// memory: no file, no transfers).
    async fn embedded(sources: &[&str], env: &[(&str, &str)]) -> Fixture {
        let binary = workspace_binary("embedded-host", "embedded-host");
        let mut command = tokio::process::Command::new(binary);
        command.envs(env.iter().copied());
        let client = Client::stdio_command(command).await.unwrap();
        let notebook = NOTEBOOK.to_owned();
        let created = client.create_notebook(&notebook, "Parity").await.ok();
        let rev = created["cells"][1]["rev"].clone();
        let mut edits = vec![json!({"editType": "edit", "cellId": 1,
                                    "expectedRev": rev, "newCode": sources[0]})];
        edits.extend(
            sources[1..]
                .iter()
                .map(|source| json!({"editType": "insert", "cellId": "BOTTOM", "newCode": source})),
        );
        client
            .call(
                "edit_cells",
                json!({"notebookRef": notebook, "edits": edits}),
            )
            .await
            .ok();
        Fixture {
            client,
            notebook,
            file: None,
            files_root: PathBuf::new(),
            person: None,
            _guards: Vec::new(),
        }
    }

    async fn call(&self, tool: &str, mut arguments: Value) -> Value {
        arguments["notebookRef"] = json!(self.notebook);
        self.client.call(tool, arguments).await.ok()
    }

    /// Replaces the code of the outlined `cell` (at its listed rev) with `code`.
    async fn edit_code(&self, cell: &Value, code: &str) -> Value {
        self.call(
            "edit_cells",
            json!({"edits": [{"editType": "edit", "cellId": cell["cell_id"],
                   "expectedRev": cell["rev"], "newCode": code}]}),
        )
        .await
    }

    async fn outline(&self) -> Vec<Value> {
        self.call("read_notebook", json!({})).await["cells"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The `state` of each code cell, in order.
    async fn states(&self) -> Vec<String> {
        self.outline()
            .await
            .iter()
            .filter(|cell| cell["kind"] == "code")
            .map(|cell| cell["state"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Follows the latest run until it ended; panics when it has not within `patience`.
    async fn finished(&self, patience: Duration) -> Value {
        self.client
            .follow(&self.notebook, patience, is_terminal)
            .await
    }

    /// The person changes cell `index`'s source where they work: the file on disk, or their
    /// copy of the shared document.
    async fn person_sets_source(&mut self, index: usize, source: &str) {
        if let Some(person) = self.person.take() {
            let (person, answer) = person
                .ask(json!({"cmd": "set_source", "cell": index, "source": source}))
                .await;
            answer.expect("the person's edit");
            self.person = Some(person);
            return;
        }
        let file = self.file.as_ref().expect("a notebook file");
        let mut notebook: Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        notebook["cells"][index]["source"] = json!(source);
        std::fs::write(file, serde_json::to_string_pretty(&notebook).unwrap()).unwrap();
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

const CHAIN: [&str; 4] = [
    "# load\na = 1",
    "# double\nb = a * 2",
    "# report\nc = b + 1",
    "# other\nd = 5",
];

async fn an_edit_makes_exactly_its_cell_and_dependents_stale_and_a_stale_run_runs_them(host: Host) {
    let fixture = Fixture::start(host, &CHAIN, &[]).await;
    let first = fixture.call("run_cells", json!({"waitMs": 120_000})).await;
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(first["cells"].as_array().unwrap().len(), 4, "{first}");
    assert_eq!(fixture.states().await, ["fresh"; 4]);
    let outline = fixture.outline().await;
    fixture.edit_code(&outline[1], "# double\nb = a * 3").await;
    assert_eq!(fixture.states().await, ["fresh", "stale", "stale", "fresh"]);
    let second = fixture.call("run_cells", json!({"waitMs": 120_000})).await;
    assert_eq!(second["status"], "completed", "{second}");
    let ran: Vec<&Value> = second["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| &cell["cellId"])
        .collect();
    assert_eq!(
        ran,
        [&outline[1]["cell_id"], &outline[2]["cell_id"]],
        "exactly the stale cells ran: {second}"
    );
    assert_eq!(fixture.states().await, ["fresh"; 4]);
}

async fn a_restart_makes_every_cell_stale(host: Host) {
    let fixture = Fixture::start(host, &CHAIN, &[]).await;
    let run = fixture.call("run_cells", json!({"waitMs": 120_000})).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(fixture.states().await, ["fresh"; 4]);
    let restart = fixture
        .client
        .kernel_action("restart_kernels", &fixture.notebook)
        .await;
    assert_eq!(restart["results"][0]["outcome"], "restarted", "{restart}");
    assert_eq!(fixture.states().await, ["stale"; 4]);
}

const SLEEPER: [&str; 2] = [
    "import os, time\nprint('pid', os.getpid(), flush=True)\ntime.sleep(120)",
    "after = 1",
];

/// Starts a run of [`SLEEPER`] and waits until its first cell sleeps: the kernel's pid.
async fn start_sleeper(fixture: &Fixture) -> u32 {
    fixture
        .call(
            "run_cells",
            json!({"cellIds": [0, 1], "waitMs": 0, "freshDeps": false}),
        )
        .await;
    let receipt = fixture
        .client
        .follow(&fixture.notebook, Duration::from_secs(120), |receipt| {
            receipt["cells"][0]["output"]
                .as_str()
                .is_some_and(|output| output.contains("pid "))
        })
        .await;
    let output = receipt["cells"][0]["output"].as_str().unwrap();
    output
        .split("pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {output}"))
}

async fn a_kernel_killed_mid_run_ends_the_run_unavailable(host: Host) {
    let fixture = Fixture::start(host, &SLEEPER, &[]).await;
    let pid = start_sleeper(&fixture).await;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "the kernel {pid} was killed");
    // The run has ended within 5 s of the kill (the waits are the server's).
    let ended = fixture
        .call("get_execution", json!({"waitMs": 5_000}))
        .await;
    assert!(is_terminal(&ended), "not ended within 5 s: {ended}");
    assert_eq!(ended["status"], "unavailable", "{ended}");
    assert!(ended["reasonCode"].is_string(), "{ended}");
    assert_eq!(ended["cells"][1]["state"], "not-run", "{ended}");
}

async fn an_interrupt_ends_the_running_cell_and_a_new_run_is_admitted(host: Host) {
    let fixture = Fixture::start(host, &SLEEPER, &[]).await;
    start_sleeper(&fixture).await;
    let interrupt = fixture
        .client
        .kernel_action("interrupt_kernels", &fixture.notebook)
        .await;
    assert_eq!(
        interrupt["results"][0]["outcome"], "interrupt-sent",
        "{interrupt}"
    );
    let ended = fixture.finished(Duration::from_secs(60)).await;
    assert_ne!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["cells"][1]["state"], "not-run", "{ended}");
    let next = fixture
        .call(
            "run_cells",
            json!({"cellIds": [1], "waitMs": 60_000, "freshDeps": false}),
        )
        .await;
    assert_eq!(next["status"], "completed", "{next}");
}

async fn undo_restores_the_agents_last_change(host: Host) {
    let fixture = Fixture::start(host, &CHAIN, &[]).await;
    let before = fixture.outline().await;
    fixture
        .call(
            "edit_cells",
            json!({"edits": [
                {"editType": "edit", "cellId": before[1]["cell_id"], "expectedRev": before[1]["rev"],
                 "newCode": "# double\nb = a * 10"},
                {"editType": "insert", "cellId": "BOTTOM", "newCode": "e = 6"}
            ]}),
        )
        .await;
    assert_eq!(fixture.outline().await.len(), before.len() + 1);
    let undone = fixture.call("undo_last", json!({})).await;
    assert_eq!(undone["cellCount"], before.len(), "{undone}");
    let after = fixture.outline().await;
    let revs = |cells: &[Value]| -> Vec<Value> { cells.iter().map(|c| c["rev"].clone()).collect() };
    assert_eq!(revs(&after), revs(&before), "the notebook is as it was");
}

async fn undo_refuses_when_the_person_changed_the_cell_since(host: Host) {
    let mut fixture = Fixture::start(host, &CHAIN, &[]).await;
    let before = fixture.outline().await;
    fixture.edit_code(&before[1], "# double\nb = a * 10").await;
    fixture
        .person_sets_source(1, "# double\nb = a * 100  # the person's")
        .await;
    // The person's change reaches the host (the file is read again; the room's update arrives).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let read = fixture
            .call("read_notebook", json!({"view": "source"}))
            .await;
        if read["cells"][1]["source"]
            .as_str()
            .is_some_and(|source| source.contains("the person's"))
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never saw: {read}");
    }
    let mut arguments = json!({});
    arguments["notebookRef"] = json!(fixture.notebook);
    let refused = fixture.client.call("undo_last", arguments).await;
    assert_eq!(refused.error_code(), "rev_mismatch", "{}", refused.text());
    let read = fixture
        .call("read_notebook", json!({"view": "source"}))
        .await;
    assert!(
        read["cells"][1]["source"]
            .as_str()
            .unwrap()
            .contains("the person's"),
        "the person's change is kept: {read}"
    );
}

async fn summaries_come_from_the_model_and_are_not_asked_again(host: Host) {
    let (base, received) = messages_stand_in().await;
    let env = [
        ("ANTHROPIC_API_KEY", "parity-key"),
        ("ANTHROPIC_BASE_URL", base.as_str()),
    ];
    let fixture = Fixture::start(host, &CHAIN, &env).await;
    let first = fixture.call("summarize_cells", json!({})).await;
    assert_eq!(first["modelRequests"], 1, "{first}");
    let sources = strings_of(&first["cells"], "source");
    assert!(sources.iter().all(|source| *source == "model"), "{first}");
    let again = fixture.call("summarize_cells", json!({})).await;
    assert_eq!(again["modelRequests"], 0, "{again}");
    assert_eq!(received.lock().unwrap().len(), 1, "asked the model once");
}

async fn a_10_mib_file_goes_to_the_kernel_and_back_unchanged(host: Host) {
    let fixture = Fixture::start(host, &["x = 1"], &[]).await;
    let run = fixture.call("run_cells", json!({"waitMs": 120_000})).await;
    assert_eq!(run["status"], "completed", "{run}");
    let bytes = random_bytes(10 * 1024 * 1024, 37);
    let digest = sha256_hex(&bytes);
    std::fs::write(fixture.files_root.join("payload.bin"), &bytes).unwrap();
    let kernel_dir = tempfile::tempdir().unwrap();
    let kernel_path = kernel_dir.path().join("payload.bin");
    // Up, then back down to another host path.
    for (tool, host_path) in [
        ("upload_file", "payload.bin"),
        ("download_file", "back/payload.bin"),
    ] {
        let arguments = json!({"hostPath": host_path, "kernelPath": kernel_path});
        let moved = fixture.call(tool, arguments).await;
        assert_eq!(moved["sha256"], digest, "{tool}: {moved}");
    }
    let back = std::fs::read(fixture.files_root.join("back/payload.bin")).unwrap();
    assert_eq!(sha256_hex(&back), digest);
}

async fn a_background_runs_outputs_reach_the_file(host: Host) {
    let fixture = Fixture::start(host, &["print('parity-output-' + str(6 * 7))"], &[]).await;
    fixture.call("run_cells", json!({"waitMs": 0})).await;
    let ended = fixture.finished(Duration::from_secs(120)).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let file = fixture.file.as_ref().expect("a notebook file");
    // The standalone host has written the file before the receipt said so; Jupyter Server
    // saves the room's document on its own schedule.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains("parity-output-42") {
            break;
        }
        assert!(host == Host::jupyter, "written before the receipt: {text}");
        assert!(std::time::Instant::now() < deadline, "never saved: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn every_listed_tool_answers(host: Host) {
    let fixture = Fixture::start(host, &CHAIN, &[]).await;
    let tools = fixture.client.tool_names().await.unwrap();
    assert!(tools.len() >= 10, "{tools:?}");
    for tool in tools {
        let answer = fixture.client.call(&tool, json!({})).await;
        if answer.is_error() {
            assert_ne!(
                answer.error_code(),
                "unknown_tool",
                "{tool} is listed but unknown: {}",
                answer.text()
            );
        }
    }
}

/// The book's "What each host can do" table (`docs/src/hosts.md`), between its markers, as
/// (scenario, [marks]) rows.
fn book_host_table() -> Vec<(String, Vec<String>)> {
    let chapter = std::fs::read_to_string(workspace_root().join("docs/src/hosts.md")).unwrap();
    let start = chapter
        .find("<!-- hosts:start -->")
        .expect("the table's start marker");
    let end = chapter
        .find("<!-- hosts:end -->")
        .expect("the table's end marker");
    chapter[start..end]
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<String> = line
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect();
            (cells[0].trim_matches('`').to_owned(), cells[1..].to_vec())
        })
        .collect()
}

/// The window's columns, each with the title prefix of its tests.
const WINDOW_COLUMNS: [(&str, &str); 2] = [
    ("vscode_jupyter", "stand-in Jupyter extension: "),
    ("vscode_controller", "stand-in vscode: "),
];

/// The scenarios the window's tests run, from their `[parity: NAME]` titles, as (column,
/// scenario) pairs; the title's prefix names the column ([`WINDOW_COLUMNS`]).
fn window_scenarios(path: &Path) -> Vec<(&'static str, String)> {
    let tests = std::fs::read_to_string(path).unwrap();
    let mut found = Vec::new();
    for test in tests.split("\ntest('").skip(1) {
        // A title is the test's first line.
        let title = test.lines().next().unwrap_or_default();
        let tags: Vec<String> = title
            .split("[parity: ")
            .skip(1)
            .filter_map(|rest| rest.split(']').next())
            .map(str::to_owned)
            .collect();
        if tags.is_empty() {
            continue;
        }
        let column = WINDOW_COLUMNS
            .iter()
            .find(|(_, prefix)| title.starts_with(prefix))
            .map(|(column, _)| *column)
            .unwrap_or_else(|| panic!("a tagged test of no known column: {title}"));
        found.extend(tags.into_iter().map(|scenario| (column, scenario)));
    }
    assert_eq!(
        found.len(),
        tests.matches("[parity: ").count(),
        "every [parity: …] tag is in a test's title"
    );
    found
}

/// The hosts, in the book table's column order.
const COLUMNS: [&str; 6] = [
    "local",
    "kernel_server",
    "jupyter",
    "embedded",
    "vscode_jupyter",
    "vscode_controller",
];

#[test]
fn the_book_host_table_is_what_the_parity_suite_runs() {
    let window = window_scenarios(&workspace_root().join("extension/test/extension.test.js"));
    let expected: Vec<(String, Vec<String>)> = PARITY
        .iter()
        .map(|(scenario, hosts)| {
            let marks = COLUMNS
                .iter()
                .map(|column| {
                    let runs = if column.starts_with("vscode_") {
                        window.iter().any(|(window_column, name)| {
                            window_column == column && name == scenario
                        })
                    } else {
                        hosts.contains(column)
                    };
                    if runs { "yes" } else { "—" }.to_owned()
                })
                .collect();
            ((*scenario).to_owned(), marks)
        })
        .collect();
    assert!(
        window
            .iter()
            .all(|(_, name)| PARITY.iter().any(|(scenario, _)| scenario == name)),
        "a window test names a scenario the suite does not have: {window:?}"
    );
    assert_eq!(
        book_host_table(),
        expected,
        "docs/src/hosts.md's \"What each host can do\" table must list exactly the parity scenarios and \
         the hosts that run them (columns: {COLUMNS:?})"
    );
}
