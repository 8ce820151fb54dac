//! `upload_file` and `download_file` on a real ipykernel, end to end. The kernel is local, so
//! its filesystem is this machine's: the tests check the kernel side directly on disk, in a
//! folder outside the server's root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use jupyter_mcp_tests::{
    Call, Client, HttpServer, compressible_bytes, example_root, random_bytes, sha256_hex,
    write_code_notebook,
};
use serde_json::{Value, json};

const NB: &str = "transfer.ipynb";

/// A cell that prints the user namespace's public names and how many transfer request sources
/// IPython's `linecache` still holds.
const NAMESPACE_CELL: &str = "import linecache\n\
    print(sorted(name for name in globals() if not name.startswith('_')), \
    sum(1 for entry in list(linecache.cache.values()) \
    if len(entry) > 2 and entry[2] and str(entry[2][0]).startswith('# jupyter-mcp-transfer-request')))";

/// A server over a fresh root with the transfer notebook, a client, and a folder for the
/// kernel's side.
struct Setup {
    root: tempfile::TempDir,
    kernel_side: tempfile::TempDir,
    _server: HttpServer,
    client: Client,
}

impl Setup {
    async fn new() -> Setup {
        let root = example_root();
        write_code_notebook(root.path(), NB, &[NAMESPACE_CELL]);
        let kernel_side = tempfile::tempdir().expect("kernel folder");
        // Every chunk's progress at once: the tests time their interference by the first one.
        let server =
            HttpServer::start_with_env(root.path(), &[], &[("JUPYTER_MCP_PROGRESS_GRACE_MS", "0")])
                .expect("server starts");
        let client = Client::http(&server.url).await.expect("client connects");
        Setup {
            root,
            kernel_side,
            _server: server,
            client,
        }
    }

    async fn start_kernel(&self) {
        let configured = self
            .client
            .call("configure_kernel", json!({"notebookRef": NB}))
            .await
            .ok();
        assert_eq!(configured["ready"], true, "{configured}");
    }

    fn kernel_path(&self, name: &str) -> PathBuf {
        self.kernel_side.path().join(name)
    }

    async fn upload(&self, host_path: &str, kernel_path: &Path, extra: Value) -> Call {
        self.transfer("upload_file", host_path, kernel_path, extra)
            .await
    }

    async fn download(&self, kernel_path: &Path, host_path: &str, extra: Value) -> Call {
        self.transfer("download_file", host_path, kernel_path, extra)
            .await
    }

    async fn transfer(
        &self,
        tool: &str,
        host_path: &str,
        kernel_path: &Path,
        extra: Value,
    ) -> Call {
        let mut arguments = json!({"notebookRef": NB, "hostPath": host_path,
                                   "kernelPath": kernel_path.to_str().unwrap()});
        if let Value::Object(extra) = extra {
            for (key, value) in extra {
                arguments[key] = value;
            }
        }
        self.client.call(tool, arguments).await
    }

    /// The namespace cell's output.
    async fn namespace(&self) -> String {
        let receipt = self
            .client
            .call(
                "run_cells",
                json!({"notebookRef": NB, "cellIds": [0], "waitMs": 30000}),
            )
            .await
            .ok();
        assert_eq!(receipt["status"], "completed", "{receipt}");
        receipt["cells"][0]["output"]
            .as_str()
            .unwrap()
            .trim()
            .to_owned()
    }

    async fn kernel_pid(&self) -> u32 {
        let info = self
            .client
            .call("get_kernel_info", json!({"notebookRef": NB}))
            .await
            .ok();
        info["kernel"]["pid"]
            .as_u64()
            .expect("a local kernel has a pid") as u32
    }

    /// Every `.part` file left under the root or on the kernel's side.
    fn leftovers(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for folder in [self.root.path(), self.kernel_side.path()] {
            collect_parts(folder, &mut found);
        }
        found
    }
}

fn collect_parts(folder: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() && !kind.is_symlink() {
            collect_parts(&path, found);
        } else if path.to_string_lossy().ends_with(".part") {
            found.push(path);
        }
    }
}

const MIB: usize = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_are_verified_and_leave_nothing_behind() {
    let setup = Setup::new().await;
    setup.start_kernel().await;
    let namespace_before = setup.namespace().await;
    std::fs::create_dir(setup.root.path().join("in")).unwrap();
    let files: [(&str, Vec<u8>); 4] = [
        ("empty ø.bin", Vec::new()),
        ("seventeen \"q\" 'x' ü.bin", random_bytes(17, 1)),
        ("random 10 MiB \"ü\".bin", random_bytes(10 * MIB, 2)),
        ("compressible 20 MiB 'ö'.csv", compressible_bytes(20 * MIB)),
    ];
    for (name, bytes) in &files {
        let expected = sha256_hex(bytes);
        std::fs::write(setup.root.path().join("in").join(name), bytes).unwrap();
        let kernel_path = setup.kernel_path(name);
        let uploaded = setup
            .upload(&format!("in/{name}"), &kernel_path, json!({}))
            .await
            .ok();
        assert_eq!(uploaded["operation"], "upload_file");
        assert_eq!(uploaded["bytes"], bytes.len() as u64, "{name}");
        assert_eq!(uploaded["sha256"], expected.as_str(), "{name}");
        assert_eq!(uploaded["verified"], true);
        assert_eq!(uploaded["kernelPath"], kernel_path.to_str().unwrap());
        assert!(
            uploaded["hostPath"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/in/{name}")),
            "{uploaded}"
        );
        let chunks = bytes.len().div_ceil(262_144) as u64;
        assert_eq!(uploaded["chunks"], chunks, "{name}");
        assert_eq!(std::fs::read(&kernel_path).unwrap(), *bytes, "{name}");

        // Back again, into a folder the download creates.
        let downloaded = setup
            .download(&kernel_path, &format!("out/{name}"), json!({}))
            .await
            .ok();
        assert_eq!(downloaded["operation"], "download_file");
        assert_eq!(downloaded["bytes"], bytes.len() as u64, "{name}");
        assert_eq!(downloaded["sha256"], expected.as_str(), "{name}");
        assert_eq!(downloaded["chunks"], chunks, "{name}");
        let local = std::fs::read(setup.root.path().join("out").join(name)).unwrap();
        assert_eq!(sha256_hex(&local), expected, "{name}");

        // Chunks travel compressed only when that pays, and as binary buffers both ways:
        // random data goes up and comes back as it is (base64 would be a third more), the CSV
        // less than its size.
        let size = bytes.len() as u64;
        let up = uploaded["wireBytes"].as_u64().unwrap();
        let down = downloaded["wireBytes"].as_u64().unwrap();
        if name.starts_with("random") {
            assert!(up > size && up < size + size / 20, "{name}: {up}");
            assert!(down > size && down < size + size / 20, "{name}: {down}");
        }
        if name.starts_with("compressible") {
            assert!(up < size && down < size, "{name}: {up} {down}");
        }
    }
    assert_eq!(setup.leftovers(), Vec::<PathBuf>::new());
    // No helper name in the user's namespace, no request source in linecache.
    let namespace_after = setup.namespace().await;
    assert_eq!(namespace_before, namespace_after);
    assert!(namespace_after.ends_with(" 0"), "{namespace_after}");

    // About 60 MiB of chunks went through this kernel; its 64 MiB budget refuses 5 MiB more
    // before sending anything, and a restart renews it.
    std::fs::write(setup.root.path().join("five.bin"), random_bytes(5 * MIB, 3)).unwrap();
    let refused = setup
        .upload("five.bin", &setup.kernel_path("five.bin"), json!({}))
        .await;
    refused.assert_refused("transfer_budget", "restart the kernel");
    assert!(!setup.kernel_path("five.bin").exists());
    setup.client.kernel_action("restart_kernels", NB).await;
    let after_restart = setup
        .upload("five.bin", &setup.kernel_path("five.bin"), json!({}))
        .await
        .ok();
    assert_eq!(after_restart["bytes"], 5 * MIB as u64);
    assert_eq!(setup.leftovers(), Vec::<PathBuf>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_destinations_are_kept_unless_overwrite_is_asked() {
    let setup = Setup::new().await;
    setup.start_kernel().await;
    let new_bytes = random_bytes(300_000, 4);
    std::fs::write(setup.root.path().join("new.bin"), &new_bytes).unwrap();
    std::fs::write(setup.root.path().join("mine.txt"), "the host's own file").unwrap();
    let kernel_path = setup.kernel_path("theirs.txt");
    std::fs::write(&kernel_path, "the kernel's own file").unwrap();

    let upload = setup.upload("new.bin", &kernel_path, json!({})).await;
    upload.assert_refused("already_exists", "overwrite");
    assert_eq!(
        std::fs::read_to_string(&kernel_path).unwrap(),
        "the kernel's own file"
    );
    let download = setup.download(&kernel_path, "mine.txt", json!({})).await;
    assert_eq!(
        download.error_code(),
        "already_exists",
        "{}",
        download.text()
    );
    assert_eq!(
        std::fs::read_to_string(setup.root.path().join("mine.txt")).unwrap(),
        "the host's own file"
    );
    assert_eq!(setup.leftovers(), Vec::<PathBuf>::new());

    let replaced = setup
        .upload("new.bin", &kernel_path, json!({"overwrite": true}))
        .await
        .ok();
    assert_eq!(replaced["sha256"], sha256_hex(&new_bytes).as_str());
    assert_eq!(std::fs::read(&kernel_path).unwrap(), new_bytes);
    let replaced = setup
        .download(&kernel_path, "mine.txt", json!({"overwrite": true}))
        .await
        .ok();
    assert_eq!(replaced["sha256"], sha256_hex(&new_bytes).as_str());
    assert_eq!(
        std::fs::read(setup.root.path().join("mine.txt")).unwrap(),
        new_bytes
    );
    assert_eq!(setup.leftovers(), Vec::<PathBuf>::new());
}

/// Starts `transfer`, waits for its first chunk, checks that a second transfer on the notebook
/// is refused meanwhile, kills the kernel, and returns the transfer's outcome.
async fn kill_the_kernel_during(setup: &Setup, tool: &str, arguments: Value) -> Call {
    let pid = setup.kernel_pid().await;
    let token = format!("{tool}-progress");
    let in_flight = setup.client.call_with_progress(tool, arguments, &token);
    let interfere = async {
        let started = setup
            .client
            .recorder
            .wait_for_progress(Duration::from_secs(60), |progress| !progress.is_empty())
            .await;
        assert!(started, "no chunk progress within a minute");
        let second = setup
            .download(&setup.kernel_path("other.bin"), "other.bin", json!({}))
            .await;
        assert_eq!(second.error_code(), "kernel_busy", "{}", second.text());
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
    };
    let (outcome, ()) = tokio::join!(in_flight, interfere);
    setup.client.recorder.progress.lock().unwrap().clear();
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_killed_mid_transfer_never_leaves_a_partial_destination() {
    let setup = Setup::new().await;
    setup.start_kernel().await;
    let big = random_bytes(40 * MIB, 5);
    std::fs::write(setup.root.path().join("big.bin"), &big).unwrap();

    // Upload over an existing file: it stays intact; the kernel's temporary file is reported.
    let kernel_path = setup.kernel_path("big.bin");
    std::fs::write(&kernel_path, "previous contents").unwrap();
    let arguments = json!({"notebookRef": NB, "hostPath": "big.bin",
                           "kernelPath": kernel_path.to_str().unwrap(), "overwrite": true});
    let outcome = kill_the_kernel_during(&setup, "upload_file", arguments).await;
    assert_eq!(
        outcome.error_code(),
        "transfer_failed",
        "{}",
        outcome.text()
    );
    let failure = outcome.error();
    assert_eq!(failure["details"]["committed"], false);
    assert_eq!(failure["details"]["phase"], "transfer chunk");
    assert_eq!(
        failure["details"]["leftover"]["side"], "kernel",
        "{failure}"
    );
    assert!(
        failure["message"].as_str().unwrap().contains("died"),
        "{failure}"
    );
    assert_eq!(
        std::fs::read_to_string(&kernel_path).unwrap(),
        "previous contents"
    );

    // Download to a new host file with a new kernel: the destination stays absent and the
    // host's temporary file is removed.
    setup.start_kernel().await;
    let source = setup.kernel_path("source.bin");
    std::fs::write(&source, &big).unwrap();
    let arguments = json!({"notebookRef": NB, "hostPath": "fetched.bin",
                           "kernelPath": source.to_str().unwrap()});
    let outcome = kill_the_kernel_during(&setup, "download_file", arguments).await;
    assert_eq!(
        outcome.error_code(),
        "transfer_failed",
        "{}",
        outcome.text()
    );
    assert_eq!(outcome.error()["details"]["leftover"], Value::Null);
    assert!(!setup.root.path().join("fetched.bin").exists());
    let host_parts: Vec<PathBuf> = setup
        .leftovers()
        .into_iter()
        .filter(|path| path.starts_with(setup.root.path()))
        .collect();
    assert_eq!(host_parts, Vec::<PathBuf>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_before_any_kernel_code() {
    let setup = Setup::new().await;
    std::fs::write(setup.root.path().join("data.bin"), b"some data").unwrap();
    let target = setup.kernel_path("data.bin");

    // A transfer never starts a kernel.
    let no_kernel = setup.upload("data.bin", &target, json!({})).await;
    assert_eq!(
        no_kernel.error_code(),
        "kernel_unavailable",
        "{}",
        no_kernel.text()
    );
    let info = setup
        .client
        .call("get_kernel_info", json!({"notebookRef": NB}))
        .await
        .ok();
    assert_eq!(info["kernel"]["status"], "not-started");

    setup.start_kernel().await;
    let outside = setup.root.path().parent().unwrap().join("outside.bin");
    for host_path in ["../outside.bin", outside.to_str().unwrap(), "/etc/hostname"] {
        let refused = setup.download(&target, host_path, json!({})).await;
        assert_eq!(
            refused.error_code(),
            "path_outside_root",
            "{host_path}: {}",
            refused.text()
        );
    }
    assert!(!outside.exists());
    for kernel_path in ["data.bin", "C:\\data.bin", "", "/tmp/"] {
        let refused = setup
            .client
            .call(
                "upload_file",
                json!({"notebookRef": NB, "hostPath": "data.bin", "kernelPath": kernel_path}),
            )
            .await;
        assert_eq!(
            refused.error_code(),
            "invalid_argument",
            "{kernel_path:?}: {}",
            refused.text()
        );
    }
    let folder = setup.upload(".", &target, json!({})).await;
    assert_eq!(folder.error_code(), "invalid_argument", "{}", folder.text());
    let missing = setup.upload("missing.bin", &target, json!({})).await;
    assert_eq!(
        missing.error_code(),
        "invalid_argument",
        "{}",
        missing.text()
    );
    let too_large = setup
        .upload("data.bin", &target, json!({"maxBytes": 4}))
        .await;
    assert_eq!(too_large.error_code(), "too_large", "{}", too_large.text());
    assert!(!target.exists());

    // A kernel-side failure names the phase and the exception class, nothing else.
    let absent = setup.kernel_path("absent.bin");
    let failed = setup.download(&absent, "absent.bin", json!({})).await;
    assert_eq!(failed.error_code(), "transfer_failed", "{}", failed.text());
    let message = failed.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("inspect remote source"), "{message}");
    assert!(message.contains("FileNotFoundError"), "{message}");
    assert!(!message.contains("No such file"), "{message}");
    assert!(!setup.root.path().join("absent.bin").exists());
    assert_eq!(setup.leftovers(), Vec::<PathBuf>::new());
}
