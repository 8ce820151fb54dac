//! The baselines and the helpers the side-by-side shares: fixture outputs, the raw kernel round
//! trips (our Rust ZeroMQ client, Python's `jupyter_client`), and reading a tool call's reply.

use super::*;

/// The outputs a condense fixture holds (a bare list, or an object with `outputs`).
pub fn fixture_outputs(path: &Path) -> Result<Vec<Value>> {
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    Ok(match fixture {
        Value::Array(outputs) => outputs,
        Value::Object(mut object) => match object.remove("outputs") {
            Some(Value::Array(outputs)) => outputs,
            _ => Vec::new(),
        },
        _ => Vec::new(),
    })
}

pub(super) fn write_notebook(path: &Path, cells: Vec<Value>) -> Result<()> {
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    });
    std::fs::write(path, Notebook::from_value(notebook)?.to_ipynb_string())?;
    Ok(())
}

/// Runs `work` once to warm up, then `count` times, and summarises the durations.
pub(super) async fn measure_async<F, Fut>(count: usize, mut work: F) -> Result<Summary>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    work().await?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        work().await?;
        samples.push(start.elapsed());
    }
    Ok(Summary::of(samples))
}

pub(super) fn measure_blocking(
    count: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<Summary> {
    work()?;
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        work()?;
        samples.push(start.elapsed());
    }
    Ok(Summary::of(samples))
}

/// The trivial cell through our Rust ZeroMQ client, straight to a kernel.
pub(super) async fn rust_zmq_round_trip(root: &Path, count: usize) -> Result<Summary> {
    let kernel = start_local_kernel(root).await?;
    let result = measure_async(count, || direct_trivial(&kernel)).await;
    kernels::KernelHandle::shutdown(&kernel).await?;
    result
}

/// A local kernel of the default spec for `root`, driven directly (no MCP server).
pub(crate) async fn start_local_kernel(root: &Path) -> Result<kernels::LocalKernel> {
    start_local_kernel_in(root, None).await
}

/// [`start_local_kernel`], with IPython's folder (`IPYTHONDIR`: its profile and history
/// database) set when `ipython_dir` is given.
pub(crate) async fn start_local_kernel_in(
    root: &Path,
    ipython_dir: Option<&Path>,
) -> Result<kernels::LocalKernel> {
    let provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(root.to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    let discovery = provider.discover_specs(Some(root)).await?;
    let mut spec = discovery
        .choose(&kernels::SpecPreference::default(), Some(root), Some(root))?
        .clone();
    if let Some(folder) = ipython_dir {
        spec.env.insert(
            "IPYTHONDIR".to_owned(),
            folder.to_string_lossy().into_owned(),
        );
    }
    Ok(provider.start_local(&spec, root).await?)
}

/// The trivial cell on `kernel` over ZeroMQ: execute, then wait for the reply and the kernel's
/// return to idle.
pub(crate) async fn direct_trivial(kernel: &kernels::LocalKernel) -> Result<()> {
    let mut handle =
        kernels::KernelHandle::execute(kernel, "1+1", kernels::ExecuteOptions::default()).await?;
    while let Some(event) = handle.next().await {
        if event.is_terminal() {
            break;
        }
    }
    Ok(())
}

/// The trivial cell through Python's `jupyter_client`: execute, then wait for the reply and
/// the kernel's return to idle, as a client does.
pub(super) fn python_round_trip(count: usize) -> Result<Summary> {
    let script = r#"
import json, sys, time
from jupyter_client.manager import start_new_kernel
count = int(sys.argv[1])
manager, client = start_new_kernel(kernel_name="python3")
samples = []
try:
    for round in range(count + 5):
        start = time.perf_counter()
        msg_id = client.execute("1+1")
        replied = idle = False
        while not replied:
            replied = client.get_shell_msg(timeout=30)["parent_header"].get("msg_id") == msg_id
        while not idle:
            message = client.get_iopub_msg(timeout=30)
            idle = (message["parent_header"].get("msg_id") == msg_id
                    and message["msg_type"] == "status"
                    and message["content"]["execution_state"] == "idle")
        if round >= 5:
            samples.append(time.perf_counter() - start)
finally:
    client.stop_channels()
    manager.shutdown_kernel(now=True)
print(json.dumps(samples))
"#;
    let output = std::process::Command::new(python())
        .args(["-c", script, &count.to_string()])
        .stdin(Stdio::null())
        .output()
        .context("running Python")?;
    if !output.status.success() {
        bail!(
            "jupyter_client run failed: {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or_default()
        );
    }
    let samples: Vec<f64> = serde_json::from_slice(&output.stdout)?;
    Ok(Summary::of(
        samples.into_iter().map(Duration::from_secs_f64).collect(),
    ))
}

/// The content an agent receives from one call.
pub(super) fn reply_of(result: &CallToolResult) -> Reply {
    let mut reply = Reply {
        calls: 1,
        ..Reply::default()
    };
    for content in &result.content {
        match content {
            ContentBlock::Text(text) => reply.text_bytes += text.text.len(),
            ContentBlock::Image(image) => {
                reply.image_bytes += image.data.len();
                reply.images += 1;
                reply.tokens += image_tokens(&image.data);
            }
            _ => {}
        }
    }
    reply.tokens += reply.text_bytes.div_ceil(4);
    reply
}

pub(super) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| match content {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fails with `what` and the text (on one line) unless the text of `result` contains `wanted`.
pub(super) fn ensure_text_contains(
    result: &CallToolResult,
    wanted: &str,
    what: &str,
) -> Result<()> {
    let text = text_of(result);
    anyhow::ensure!(text.contains(wanted), "{what}: {}", one_line(&text));
    Ok(())
}

/// Resident and peak resident memory of a process, in MB.
pub(super) fn memory_of(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        status
            .lines()
            .find(|line| line.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<f64>()
            .ok()
            .map(|kilobytes| kilobytes / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}
