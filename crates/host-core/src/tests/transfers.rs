//! Transfers' duties toward the kernel: a step that outlived its deadline quarantines the kernel
//! until it settles, and a restart mid-way ends the transfer with no further code sent. Where the
//! host has a Colab side, the route follows the kernel: only a kernel proven on a Colab runtime
//! moves large files through its file service, under the same `maxBytes`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use colab_setup::{
    CheckCommandKind, CheckReply, CommandKind, FileServiceRoot, Reply, Route, ServerAlias,
};
use mcp_contract::ErrorCode;
use serde_json::json;

use super::World;
use crate::BoxFuture;
use crate::colab::{ColabRuntimes, ServiceFile, UploadChunk};
use crate::kernel::ExecuteOptions;
use crate::testing::{MemoryFiles, MemoryHost};

fn world_with_a_file() -> World {
    let files = MemoryFiles::new();
    files.put("data.bin", vec![7; 4096]);
    World::with_host(MemoryHost::new().with_files(files))
}

/// Runs `a.ipynb` to its end, so that its kernel is up.
async fn run_a(world: &World) {
    world.run_stale_cells("a.ipynb").await;
}

/// Whether a piece of code the kernel got is a transfer step.
fn is_transfer(code: &str) -> bool {
    code.contains("jupyter-mcp") && !code.starts_with("#>") && !code.contains("x = 1")
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_step_quarantines_the_kernel_until_a_restart_settles_it() {
    let world = world_with_a_file();
    world.host.insert("a.ipynb", &["x = 1"]);
    run_a(&world).await;
    // Every transfer step runs until the kernel restarts.
    world
        .kernels
        .on_execute(|_, _| Some("#> stubborn".to_owned()));
    let upload = json!({"notebookRef": "a.ipynb", "hostPath": "data.bin",
                        "kernelPath": "/tmp/data.bin"});
    let timed_out = world.call("upload_file", upload.clone()).await;
    assert!(timed_out.is_error, "{}", timed_out.text);
    assert_eq!(world.tools.transfers.unsettled(), 1);
    let refused = world
        .refused("upload_file", upload.clone(), ErrorCode::KernelBusy)
        .await;
    assert!(refused.text.contains("quarantined"), "{}", refused.text);

    world.kernels.clear_hook();
    world
        .ok("restart_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    // The restart ends the stuck step; its listener then lifts the quarantine.
    for _ in 0..1_000 {
        if world.tools.transfers.unsettled() == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(world.tools.transfers.unsettled(), 0);
    let steps_before = world.kernels.log().len();
    let after = world.call("upload_file", upload).await;
    // This kernel answers no receipt, so the upload fails, but in the kernel, not at the door.
    assert_ne!(
        after.error_code(),
        Some(ErrorCode::KernelBusy),
        "{}",
        after.text
    );
    assert!(
        world
            .kernels
            .log_since(steps_before)
            .iter()
            .any(|code| is_transfer(code)),
        "the new kernel got the transfer's first step"
    );
}

#[tokio::test(start_paused = true)]
async fn a_restart_mid_transfer_ends_it_and_sends_no_more_code() {
    let world = world_with_a_file();
    let location = world.host.insert("a.ipynb", &["x = 1"]);
    run_a(&world).await;
    world
        .kernels
        .on_execute(|_, _| Some("#> stubborn".to_owned()));
    let tools = world.tools.clone();
    let upload = tokio::spawn(async move {
        tools
            .call(
                "upload_file",
                json!({"notebookRef": "a.ipynb", "hostPath": "data.bin",
                       "kernelPath": "/tmp/data.bin"})
                .as_object()
                .cloned(),
                crate::CallContext::default(),
            )
            .await
    });
    // Wait until the first step is in the kernel.
    for _ in 0..1_000 {
        if world.kernels.log().iter().any(|code| is_transfer(code)) {
            break;
        }
        tokio::task::yield_now().await;
    }
    let steps = world.kernels.log().len();
    world
        .kernels
        .session(&location.uri)
        .expect("a kernel")
        .restart_now();
    let failed = upload.await.expect("the upload task");
    assert!(failed.is_error, "{}", failed.text);
    assert!(failed.text.contains("restart"), "{}", failed.text);
    assert_eq!(
        world.kernels.log().len(),
        steps,
        "no code went to the kernel after the restart"
    );
}

/// A Colab runtime in process: one `/content` that the kernel (through the execute hook
/// [`colab_kernel`]) and the file service (through any of its roots) share, and a log of every
/// file-service call, so a test sees which route a transfer took and through which root.
struct FakeRuntime {
    roots: Vec<FileServiceRoot>,
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    uploads: Mutex<BTreeMap<String, Vec<u8>>>,
    calls: Mutex<Vec<String>>,
}

impl FakeRuntime {
    fn new(roots: &[&str]) -> Arc<FakeRuntime> {
        Arc::new(FakeRuntime {
            roots: roots
                .iter()
                .map(|root| FileServiceRoot::parse(root).expect("a root"))
                .collect(),
            files: Arc::default(),
            uploads: Mutex::default(),
            calls: Mutex::default(),
        })
    }

    fn called(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// Places a file in the runtime, as the notebook's own code would have written it.
    fn put(&self, path: &str, bytes: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_owned(), bytes);
    }

    /// The size of the runtime's file at `path`, if it has one.
    fn file_len(&self, path: &str) -> Option<usize> {
        self.files.lock().unwrap().get(path).map(Vec::len)
    }
}

impl ColabRuntimes for FakeRuntime {
    fn roots(&self) -> Vec<FileServiceRoot> {
        self.roots.clone()
    }

    fn perform_check<'a>(&'a self, command: &'a CheckCommandKind) -> BoxFuture<'a, CheckReply> {
        Box::pin(async move {
            let files = self.files.lock().unwrap();
            match command {
                CheckCommandKind::ReadBuildInfo => CheckReply::BuildInfo {
                    release_tag: Some("release-test".to_owned()),
                },
                CheckCommandKind::ReadFile { root, path } => {
                    self.called(format!("check read {}{path}", root.uri()));
                    match files.get(&format!("/{path}")) {
                        Some(bytes) => CheckReply::FileContent(bytes.clone()),
                        None => CheckReply::FileMissing,
                    }
                }
                CheckCommandKind::StatFile { root, path } => {
                    self.called(format!("check stat {}{path}", root.uri()));
                    if files.contains_key(&format!("/{path}")) {
                        CheckReply::FileExists
                    } else {
                        CheckReply::FileMissing
                    }
                }
                CheckCommandKind::ExecuteKernel { .. } => CheckReply::ServiceUnavailable,
            }
        })
    }

    fn file_size<'a>(
        &'a self,
        file: ServiceFile<'a>,
    ) -> BoxFuture<'a, Result<Option<u64>, String>> {
        self.called(format!("stat {}{}", file.root.uri(), file.path));
        let size = self
            .file_len(&format!("/{}", file.path))
            .map(|len| len as u64);
        Box::pin(async move { Ok(size) })
    }

    fn write_chunk<'a>(
        &'a self,
        file: ServiceFile<'a>,
        chunk: UploadChunk,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.called(format!("write {}{}", file.root.uri(), file.path));
        let mut uploads = self.uploads.lock().unwrap();
        if chunk.number <= 1 {
            uploads.insert(file.path.to_owned(), Vec::new());
        }
        uploads.get_mut(file.path).unwrap().extend(chunk.bytes);
        if chunk.last {
            let whole = uploads.remove(file.path).unwrap();
            self.files
                .lock()
                .unwrap()
                .insert(format!("/{}", file.path), whole);
        }
        Box::pin(async { Ok(()) })
    }

    fn read_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        self.called(format!("read {}{}", file.root.uri(), file.path));
        let bytes = self
            .files
            .lock()
            .unwrap()
            .get(&format!("/{}", file.path))
            .cloned();
        Box::pin(async move { bytes.ok_or_else(|| "missing".to_owned()) })
    }

    fn delete_file<'a>(&'a self, file: ServiceFile<'a>) -> BoxFuture<'a, Result<(), String>> {
        self.called(format!("delete {}{}", file.root.uri(), file.path));
        self.files
            .lock()
            .unwrap()
            .remove(&format!("/{}", file.path));
        Box::pin(async { Ok(()) })
    }

    fn setup_route(&self, _: Option<&ServerAlias>) -> Result<Route, String> {
        Err("no setups here".to_owned())
    }

    fn perform_setup<'a>(
        &'a self,
        _: &'a crate::NotebookLocation,
        _: &'a CommandKind,
    ) -> BoxFuture<'a, Reply> {
        Box::pin(async { Reply::Failed(colab_setup::Failure::NotPerformed) })
    }
}

/// The quoted value of `"KEY": "…"` in generated kernel code.
fn code_field(code: &str, key: &str) -> Option<String> {
    let start = code.find(&format!("\"{key}\": \""))? + key.len() + 5;
    let end = code[start..].find('"')? + start;
    Some(code[start..end].to_owned())
}

/// A kernel on `runtime`: it answers the nonce proof's and the file service route's kernel
/// programs against the runtime's `/content`, and follows every other code's own directives.
fn colab_kernel(
    runtime: &FakeRuntime,
) -> impl Fn(&str, &ExecuteOptions) -> Option<String> + Send + Sync + 'static + use<> {
    let files = runtime.files.clone();
    move |code, _| {
        let mut files = files.lock().unwrap();
        let answer = if code.contains("__jupyter_mcp_colab_check__") {
            let probe = code_field(code, "PROBE")?;
            let nonce = code_field(code, "NONCE")?;
            let marker = code_field(code, "MARKER")?;
            let result = if code_field(code, "OP")? == "write" {
                let created = !files.contains_key(&probe);
                if created {
                    files.insert(probe, nonce.into_bytes());
                }
                json!({"op": "write", "pid": 42, "python": "3.12.1", "system": "Linux",
                       "content": true, "colab": true, "releaseTag": "release-test",
                       "created": created})
            } else {
                let ours = files.get(&probe).map(|bytes| *bytes == nonce.as_bytes());
                if ours == Some(true) {
                    files.remove(&probe);
                }
                json!({"op": "remove", "removed": ours == Some(true),
                       "foreign": ours == Some(false), "absent": !files.contains_key(&probe)})
            };
            format!("{marker}{result}")
        } else if code.contains("__jupyter_mcp_contents__") {
            let result = match (code_field(code, "TEMP"), code_field(code, "PATH")) {
                (Some(temp), _) => {
                    let bytes = files.remove(&temp).unwrap_or_default();
                    let sha = hex_sha256(&bytes);
                    if Some(sha) == code_field(code, "SHA") {
                        files.insert(code_field(code, "DEST")?, bytes);
                        json!({"promoted": true})
                    } else {
                        json!({"reason": "hash differs"})
                    }
                }
                (None, Some(path)) => match files.get(&path) {
                    Some(bytes) => json!({"sha256": hex_sha256(bytes), "size": bytes.len()}),
                    None => json!({"reason": "kernel-side FileNotFoundError"}),
                },
                (None, None) => return None,
            };
            format!("__JUPYTER_MCP_CONTENTS__{result}")
        } else {
            return None;
        };
        Some(format!("#> out {answer}"))
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

const MIB: usize = 1024 * 1024;

/// Calls `tool`, which must fail with `code` and a message that mentions `hint`.
async fn refused_with(
    world: &World,
    tool: &str,
    arguments: serde_json::Value,
    code: ErrorCode,
    hint: &str,
) {
    let refused = world.refused(tool, arguments, code).await;
    assert!(refused.text.contains(hint), "{tool}: {}", refused.text);
}

/// A host with a Colab side (`runtime`), a 5 MiB host file `big.bin` and a running kernel on
/// `a.ipynb`, which runs on the runtime when `on_colab`.
async fn colab_world(runtime: &Arc<FakeRuntime>, on_colab: bool) -> (World, Arc<MemoryFiles>) {
    let files = MemoryFiles::new();
    files.put("big.bin", vec![5; 5 * MIB]);
    let world = World::with_host(
        MemoryHost::new()
            .with_files(files.clone())
            .with_colab(runtime.clone()),
    );
    world.host.insert("a.ipynb", &["x = 1"]);
    run_a(&world).await;
    if on_colab {
        world.kernels.on_execute(colab_kernel(runtime));
    }
    (world, files)
}

#[tokio::test(start_paused = true)]
async fn a_kernel_not_proven_on_colab_moves_files_through_itself_and_refuses_colab_file_uri() {
    // A window with the Colab extension and a mounted colab:// folder, and a local kernel.
    let runtime = FakeRuntime::new(&["colab://m0123abcd/"]);
    let (world, _) = colab_world(&runtime, false).await;
    let upload = world
        .call(
            "upload_file",
            json!({"notebookRef": "a.ipynb", "hostPath": "big.bin", "kernelPath": "/tmp/big.bin"}),
        )
        .await;
    // The scripted kernel answers no transfer receipt: the upload fails in the kernel route.
    assert!(upload.is_error, "{}", upload.text);
    assert!(!upload.text.contains("Colab"), "{}", upload.text);
    let download = world
        .call(
            "download_file",
            json!({"notebookRef": "a.ipynb", "hostPath": "back.bin", "kernelPath": "/tmp/small.bin"}),
        )
        .await;
    assert!(!download.text.contains("Colab"), "{}", download.text);
    assert!(
        runtime.calls().is_empty(),
        "the Colab file service was never asked: {:?}",
        runtime.calls()
    );
    assert!(world.kernels.log().iter().any(|code| is_transfer(code)));

    let steps = world.kernels.log().len();
    refused_with(
        &world,
        "upload_file",
        json!({"notebookRef": "a.ipynb", "hostPath": "big.bin", "kernelPath": "/content/big.bin",
               "colabFileUri": "colab://m0123abcd/content/big.bin"}),
        ErrorCode::NotSupported,
        "check_colab",
    )
    .await;
    assert_eq!(
        world.kernels.log().len(),
        steps,
        "nothing went to the kernel"
    );
    assert!(runtime.calls().is_empty(), "{:?}", runtime.calls());
}

#[tokio::test(start_paused = true)]
async fn a_proven_kernel_moves_large_files_through_its_root_or_the_one_the_caller_names() {
    let runtime = FakeRuntime::new(&["colab://m1111aaaa/", "colab://m2222bbbb/"]);
    let (world, _) = colab_world(&runtime, true).await;
    let check = world
        .ok(
            "check_colab",
            json!({"notebookRef": "a.ipynb", "colabFileUri": "colab://m1111aaaa/"}),
        )
        .await;
    assert_eq!(check["verified"], true, "{check}");

    // Without colabFileUri: the root the kernel was proven through, though two are mounted.
    let uploaded = world
        .ok(
            "upload_file",
            json!({"notebookRef": "a.ipynb", "hostPath": "big.bin", "kernelPath": "/content/one.bin"}),
        )
        .await;
    assert_eq!(uploaded["route"], "contents", "{uploaded}");
    assert_eq!(runtime.file_len("/content/one.bin"), Some(5 * MIB));
    let writes = |root: &str| {
        runtime
            .calls()
            .iter()
            .filter(|call| call.starts_with(&format!("write {root}")))
            .count()
    };
    assert!(writes("colab://m1111aaaa/") > 0, "{:?}", runtime.calls());
    assert_eq!(writes("colab://m2222bbbb/"), 0, "{:?}", runtime.calls());

    // With colabFileUri: the root it names, proven afresh, and nothing through the other.
    let before = runtime.calls().len();
    let uploaded = world
        .ok(
            "upload_file",
            json!({"notebookRef": "a.ipynb", "hostPath": "big.bin", "kernelPath": "/content/two.bin",
                   "colabFileUri": "colab://m2222bbbb/content/two.bin"}),
        )
        .await;
    assert_eq!(uploaded["route"], "contents", "{uploaded}");
    let used: Vec<String> = runtime.calls()[before..].to_vec();
    assert!(
        used.iter().all(|call| call.contains("colab://m2222bbbb/")),
        "{used:?}"
    );
    assert!(
        used.iter()
            .any(|call| call.starts_with("check read colab://m2222bbbb/"))
    );

    // A restart ends the proof: the next large file takes the kernel route until a new one.
    world
        .ok("restart_kernels", json!({"notebookRefs": ["a.ipynb"]}))
        .await;
    let before = runtime.calls().len();
    let after_restart = world
        .call(
            "upload_file",
            json!({"notebookRef": "a.ipynb", "hostPath": "big.bin", "kernelPath": "/content/three.bin"}),
        )
        .await;
    assert!(
        !after_restart.text.contains("contents"),
        "{}",
        after_restart.text
    );
    assert_eq!(runtime.calls().len(), before, "{:?}", runtime.calls());
}

#[tokio::test(start_paused = true)]
async fn the_colab_file_service_refuses_a_file_above_max_bytes_before_anything_moves() {
    let runtime = FakeRuntime::new(&["colab://m0123abcd/"]);
    let (world, host_files) = colab_world(&runtime, true).await;
    world
        .ok("check_colab", json!({"notebookRef": "a.ipynb"}))
        .await;
    runtime.put("/content/remote.bin", vec![1; 5 * MIB]);
    let calls = runtime.calls().len();
    let steps = world.kernels.log().len();
    for (tool, host_path, kernel_path) in [
        ("upload_file", "big.bin", "/content/big.bin"),
        ("download_file", "back.bin", "/content/remote.bin"),
    ] {
        refused_with(
            &world,
            tool,
            json!({"notebookRef": "a.ipynb", "hostPath": host_path, "kernelPath": kernel_path,
                   "maxBytes": 4 * MIB + MIB / 2}),
            ErrorCode::TooLarge,
            "maxBytes",
        )
        .await;
    }
    // Only the download's size was asked: no proof, no chunk, no kernel code.
    assert_eq!(
        runtime.calls()[calls..].to_vec(),
        vec!["stat colab://m0123abcd/content/remote.bin".to_owned()]
    );
    assert_eq!(world.kernels.log().len(), steps);
    assert!(host_files.get("back.bin").is_none());

    // maxBytes defaults to 64 MiB, as on the kernel route.
    runtime.put("/content/huge.bin", vec![1; 64 * MIB + 1]);
    let huge = json!({"notebookRef": "a.ipynb", "hostPath": "huge.bin",
                      "kernelPath": "/content/huge.bin"});
    world
        .refused("download_file", huge, ErrorCode::TooLarge)
        .await;
    assert_eq!(world.kernels.log().len(), steps);
}
