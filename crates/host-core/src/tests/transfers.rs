//! Transfers' duties toward the kernel: a step that outlived its deadline quarantines the kernel
//! until it settles, and a restart mid-way ends the transfer with no further code sent.

use mcp_contract::ErrorCode;
use serde_json::json;

use super::World;
use crate::testing::{MemoryFiles, MemoryHost};

fn world_with_a_file() -> World {
    let files = MemoryFiles::new();
    files.put("data.bin", vec![7; 4096]);
    World::with_host(MemoryHost::new().with_files(files))
}

/// Whether a piece of code the kernel got is a transfer step.
fn is_transfer(code: &str) -> bool {
    code.contains("jupyter-mcp") && !code.starts_with("#>") && !code.contains("x = 1")
}

#[tokio::test(start_paused = true)]
async fn a_timed_out_step_quarantines_the_kernel_until_a_restart_settles_it() {
    let world = world_with_a_file();
    world.host.insert("a.ipynb", &["x = 1"]);
    world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "waitMs": 60_000}),
        )
        .await;
    // Every transfer step runs until the kernel restarts.
    world
        .kernels
        .on_execute(|_, _| Some("#> stubborn".to_owned()));
    let upload = json!({"notebookRef": "a.ipynb", "hostPath": "data.bin",
                        "kernelPath": "/tmp/data.bin"});
    let timed_out = world.call("upload_file", upload.clone()).await;
    assert!(timed_out.is_error, "{}", timed_out.text);
    assert_eq!(world.tools.transfers.unsettled(), 1);
    let refused = world.call("upload_file", upload.clone()).await;
    assert_eq!(
        refused.error_code(),
        Some(ErrorCode::KernelBusy),
        "{}",
        refused.text
    );
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
        world.kernels.log()[steps_before..]
            .iter()
            .any(|code| is_transfer(code)),
        "the new kernel got the transfer's first step"
    );
}

#[tokio::test(start_paused = true)]
async fn a_restart_mid_transfer_ends_it_and_sends_no_more_code() {
    let world = world_with_a_file();
    let location = world.host.insert("a.ipynb", &["x = 1"]);
    world
        .ok(
            "run_cells",
            json!({"notebookRef": "a.ipynb", "waitMs": 60_000}),
        )
        .await;
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
