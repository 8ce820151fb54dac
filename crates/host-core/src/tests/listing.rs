//! `tools/list` follows what the host's kernels and files can do.

use std::sync::Arc;

use crate::kernel::{KernelCapabilities, SessionFeatures};
use crate::testing::{MemoryFiles, MemoryHost, ScriptedKernels};
use crate::{CallContext, Tools};

const KERNEL_TOOLS: &[&str] = &[
    "get_kernel_info",
    "list_kernels",
    "select_kernel",
    "configure_kernel",
    "run_cells",
    "get_execution",
    "interrupt_kernels",
    "restart_kernels",
    "inspect_variable",
    "upload_file",
    "download_file",
];

fn listed<H: crate::NotebookHost>(tools: &Tools<H>) -> Vec<&'static str> {
    tools.specs().iter().map(|spec| spec.name).collect()
}

#[test]
fn a_host_without_kernels_lists_no_kernel_tool() {
    let tools = Tools::new(Arc::new(MemoryHost::new()));
    let names = listed(&tools);
    for tool in KERNEL_TOOLS {
        assert!(!names.contains(tool), "{tool} is listed without kernels");
    }
    assert!(names.contains(&"read_notebook") && names.contains(&"edit_cells"));
}

#[test]
fn transfers_are_listed_only_with_files_on_the_host_side() {
    let without_files = Tools::new(Arc::new(
        MemoryHost::new().with_kernels(ScriptedKernels::new()),
    ));
    let names = listed(&without_files);
    assert!(names.contains(&"run_cells"));
    assert!(!names.contains(&"upload_file") && !names.contains(&"download_file"));
    let with_files = Tools::new(Arc::new(
        MemoryHost::new()
            .with_kernels(ScriptedKernels::new())
            .with_files(MemoryFiles::new()),
    ));
    let names = listed(&with_files);
    for tool in KERNEL_TOOLS {
        assert!(names.contains(tool), "{tool} missing with every capability");
    }
}

#[test]
fn each_capability_lists_its_own_tools() {
    let can = KernelCapabilities {
        execute: true,
        interrupt: true,
        restart: false,
        choose: false,
        transfer: false,
    };
    let tools = Tools::new(Arc::new(
        MemoryHost::new()
            .with_kernels(ScriptedKernels::with(can, SessionFeatures::JUPYTER))
            .with_files(MemoryFiles::new()),
    ));
    let names = listed(&tools);
    for tool in [
        "run_cells",
        "get_execution",
        "interrupt_kernels",
        "inspect_variable",
    ] {
        assert!(names.contains(&tool), "{tool}");
    }
    for tool in [
        "restart_kernels",
        "list_kernels",
        "select_kernel",
        "configure_kernel",
        "upload_file",
        // Execution alone is not a Colab runtime.
        "check_colab",
    ] {
        assert!(
            !names.contains(&tool),
            "{tool} listed without its capability"
        );
    }
}

#[test]
fn undo_is_listed_on_every_host() {
    let plain = Tools::new(Arc::new(MemoryHost::new()));
    assert!(listed(&plain).contains(&"undo_last"));
    let shared = Tools::new(Arc::new(
        MemoryHost::new()
            .with_document_capabilities(crate::DocumentCapabilities { shared_live: true }),
    ));
    assert!(listed(&shared).contains(&"undo_last"));
}

#[tokio::test]
async fn a_tool_that_is_not_listed_answers_unknown_tool() {
    let tools = Tools::new(Arc::new(MemoryHost::new()));
    let output = tools
        .call(
            "run_cells",
            serde_json::json!({"notebookRef": "a.ipynb"})
                .as_object()
                .cloned(),
            CallContext::default(),
        )
        .await;
    assert_eq!(
        output.error_code(),
        Some(mcp_contract::ErrorCode::UnknownTool)
    );
}
