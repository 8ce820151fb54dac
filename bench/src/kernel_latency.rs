//! Trivial-cell latency: a local ZeroMQ kernel against a Jupyter Server's kernels on loopback.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use host_core::{CallContext, Tools};
use host_standalone::{FileHost, FileHostConfig, StandaloneHost};
use serde_json::json;

use crate::transfer::{Wire, transfer_rows};
use crate::{Row, Stats, measure_async, print_rows, stats};

/// One trivial execute request (`1 + 1`) from send to its terminal reply.
async fn trivial_cell(kernel: &dyn kernels::KernelHandle, runs: usize) -> Stats {
    measure_async(runs, || async {
        let handle = kernel
            .execute("1 + 1", kernels::ExecuteOptions::default())
            .await
            .expect("execute");
        let events = handle.collect_events().await;
        assert!(
            matches!(events.last(), Some(kernels::ExecuteEvent::Reply(reply)) if reply.status == kernels::ReplyStatus::Ok),
            "{events:?}"
        );
    })
    .await
}

/// The raw client's trivial execute round trip, `runs` times after one warm-up.
pub(crate) async fn measure_raw(
    raw: &mut crate::raw_ws::RawKernel,
    runs: usize,
) -> anyhow::Result<Stats> {
    raw.execute("1 + 1").await?;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        raw.execute("1 + 1").await?;
        samples.push(start.elapsed());
    }
    Ok(stats(samples))
}

/// `run_cells` of one trivial cell through the in-process tools (dispatch, outputs written
/// to the notebook file, receipt).
async fn trivial_run(
    manager: kernels::KernelManager,
    root: &Path,
    runs: usize,
) -> anyhow::Result<Stats> {
    let notebook = json!({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "id": "c0", "metadata": {}, "execution_count": null,
                   "outputs": [], "source": "1 + 1"}]
    });
    std::fs::write(root.join("trivial.ipynb"), notebook.to_string())?;
    let host = FileHost::new(FileHostConfig {
        root: root.to_path_buf(),
        snapshot_folder: root.join(".snapshots"),
    })?;
    let tools = Tools::new(Arc::new(StandaloneHost::new(
        Arc::new(host),
        Some(manager.clone()),
    )));
    let arguments = json!({"notebookRef": "trivial.ipynb", "cellIds": [0], "waitMs": 30000})
        .as_object()
        .cloned();
    let figures = measure_async(runs, || async {
        let output = tools
            .call("run_cells", arguments.clone(), CallContext::default())
            .await;
        assert!(
            !output.is_error && output.text.contains("\"completed\""),
            "{}",
            output.text
        );
    })
    .await;
    manager.shutdown_all().await;
    Ok(figures)
}

/// Trivial-cell latency on a local kernel (ZeroMQ) and on a kernel of a Jupyter Server on
/// loopback (REST + WebSocket, both framings), measured in the same run.
pub(crate) async fn remote_kernel_bench(report: &mut String, runs: usize) -> anyhow::Result<()> {
    use jupyter_mcp_tests::kernel_server::{KernelServer, ServerKind};
    use kernels::{KernelHandle as _, KernelProvider as _};

    let folder = tempfile::tempdir()?;
    let python = jupyter_mcp_tests::python();
    let spec = kernels::KernelSpecInfo {
        id: "bench-python".into(),
        display_name: "Bench Python".into(),
        language: "python".into(),
        argv: vec![
            python.to_string_lossy().into_owned(),
            "-m".into(),
            "ipykernel_launcher".into(),
            "-f".into(),
            "{connection_file}".into(),
        ],
        env: Default::default(),
        interrupt_mode: kernels::InterruptMode::Signal,
        resource_dir: None,
        source: kernels::SpecSource::Other,
    };
    let local_provider = kernels::LocalProvider::new(
        kernels::DiscoveryConfig::from_env(Some(folder.path().to_path_buf())),
        kernels::LaunchConfig::default(),
    );
    let local = local_provider.start_local(&spec, folder.path()).await?;
    let local_cell = trivial_cell(&local, runs).await;
    local.shutdown().await?;

    let server = KernelServer::start(ServerKind::JupyterServer, folder.path(), &[])?;
    eprintln!("started a Jupyter Server at {}", server.url());
    // The same server over TLS, with a certificate of a CA made for the run.
    let ca = jupyter_mcp_tests::kernel_server::TestCa::new("jupyter-mcp bench CA")?;
    let tls_server = KernelServer::start_with_tls(
        ServerKind::JupyterServer,
        folder.path(),
        &[],
        Some(ca.issue("bench")?),
    )?;
    eprintln!("started a Jupyter Server at {}", tls_server.url());
    let remote = |server: &KernelServer, offer_binary: bool| {
        let mut profile = kernels::ConnectionProfile::jupyter_server(
            kernels::ServerUrl::parse(&server.url()).expect("URL"),
            kernels::ServerToken::new(server.token()).map(kernels::CredentialSource::Static),
        );
        profile.tls.extra_roots = vec![ca.ca_file()];
        let mut config = kernels::RemoteConfig::with_profile(profile);
        config.offer_binary_protocol = offer_binary;
        config.served_root = Some(folder.path().to_path_buf());
        kernels::RemoteProvider::new(config).expect("a usable profile")
    };
    // Per transport and protocol: our client's trivial execute, then the raw floor on the same
    // kernel (a minimal WebSocket client of its own, `raw_ws`).
    let mut remote_cells = Vec::new();
    for (transport, server, tls_ca) in [
        ("HTTP", &server, None),
        ("HTTPS", &tls_server, Some(ca.ca_file())),
    ] {
        for offer_binary in [true, false] {
            let provider = remote(server, offer_binary);
            let discovery = provider.discover(None).await?;
            let spec = discovery
                .find("remote:python3")
                .ok_or_else(|| anyhow::anyhow!("the server has no python3 kernelspec"))?;
            let kernel = provider.start_remote(spec, folder.path()).await?;
            let protocol = kernel.protocol().await.unwrap_or("?");
            let ours = trivial_cell(&kernel, runs).await;
            let kernel_id = kernel.kernel_id().expect("a kernel id");
            let mut raw = crate::raw_ws::RawKernel::connect(
                server.port(),
                tls_ca.as_deref(),
                server.token(),
                &kernel_id,
                offer_binary,
            )
            .await?;
            let raw_figures = measure_raw(&mut raw, runs).await?;
            drop(raw);
            remote_cells.push((transport, protocol, ours, raw_figures));
            kernel.shutdown().await?;
        }
    }

    let local_root = tempfile::tempdir()?;
    jupyter_mcp_tests::link_venv(local_root.path());
    let local_run = trivial_run(
        host_standalone::server::local_kernels(local_root.path(), None),
        local_root.path(),
        runs / 3,
    )
    .await?;
    // Notebooks outside the server's folder: kernels start in its root.
    let remote_root = tempfile::tempdir()?;
    let kernel_server = host_standalone::KernelServer::jupyter_server(
        kernels::ServerUrl::parse(&server.url())?,
        kernels::ServerToken::new(server.token()),
    );
    let remote_run = trivial_run(
        host_standalone::server::remote_kernels(remote_root.path(), None, &kernel_server)?,
        remote_root.path(),
        runs / 3,
    )
    .await?;

    let mut rows = vec![Row::reference(
        "execute `1 + 1`, local kernel (ZeroMQ)",
        local_cell,
    )];
    for (transport, protocol, figures, raw) in &remote_cells {
        let protocol = if *protocol == "json" {
            "JSON"
        } else {
            "v1 binary"
        };
        rows.push(Row::compared(
            format!(
                "execute `1 + 1`, Jupyter Server kernel, {transport}, {protocol} WebSocket protocol"
            ),
            *figures,
            local_cell,
            "local kernel",
        ));
        rows.push(Row::compared(
            format!(
                "the same, against that server's floor (a raw WebSocket execute round trip, {transport}, {protocol})"
            ),
            *figures,
            *raw,
            "raw client",
        ));
    }
    rows.push(Row::reference(
        "run_cells of one trivial cell, local kernel (tool call, outputs saved)",
        local_run,
    ));
    rows.push(Row::compared(
        "run_cells of one trivial cell, Jupyter Server kernel",
        remote_run,
        local_run,
        "local kernel",
    ));
    print_rows(
        "Kernels: trivial-cell latency, local ZeroMQ against a Jupyter Server on loopback (HTTP and HTTPS), and against that server's own floor",
        &rows,
        report,
    );

    // File transfer through the Jupyter Server's kernel: every request is a WebSocket round
    // trip through the server, and download chunks come back as display buffers.
    let (size_mib, transfer_runs) = if runs < 50 { (4, 1) } else { (32, 3) };
    let transfer_root = tempfile::tempdir()?;
    let transfer_kernels =
        host_standalone::server::remote_kernels(transfer_root.path(), None, &kernel_server)?;
    let rows = transfer_rows(
        transfer_kernels,
        transfer_root.path(),
        size_mib,
        transfer_runs,
        Wire::Remote,
    )
    .await?;
    print_rows(
        &format!(
            "File transfer through a Jupyter Server kernel on loopback (median of {transfer_runs})"
        ),
        &rows,
        report,
    );
    Ok(())
}
