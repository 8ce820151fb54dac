//! `read_notebook` through the broker against the same call served by the owner directly.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_core::Tools;
use host_standalone::{FileHost, FileHostConfig, StandaloneHost};
use jupyter_mcp_tests::Client;
use notebook_model::Notebook;
use serde_json::{Value, json};

use crate::{Row, ms, print_rows, stats};

fn standalone_tools(root: &Path) -> anyhow::Result<Arc<Tools<StandaloneHost>>> {
    let host = FileHost::new(FileHostConfig {
        root: root.to_path_buf(),
        snapshot_folder: root.join(".snapshots"),
    })?;
    Ok(Arc::new(Tools::new(Arc::new(StandaloneHost::new(
        Arc::new(host),
        None,
    )))))
}

async fn timed_read(client: &Client, arguments: &Value) -> Duration {
    let start = Instant::now();
    let call = client.call("read_notebook", arguments.clone()).await;
    let elapsed = start.elapsed();
    assert!(!call.is_error(), "{}", call.text());
    elapsed
}

/// `read_notebook` through the broker to the peer that owns the notebook, against the same
/// call served by the owner directly: the same `Tools` instance behind both, real MCP clients
/// over loopback HTTP, calls interleaved so that both see the same machine.
pub(crate) async fn broker_bench(report: &mut String, quick: bool) -> anyhow::Result<()> {
    use host_core::NotebookHost;
    let broker_root = tempfile::tempdir()?;
    let owner_root = tempfile::tempdir()?;
    let runtime = tempfile::tempdir()?;
    let text = Notebook::from_value(crate::notebook::medium_notebook(60))?.to_ipynb_string();
    std::fs::write(owner_root.path().join("work.ipynb"), &text)?;

    let owner_tools = standalone_tools(owner_root.path())?;
    let owner_window = owner_tools.host().window();
    let broker_tools = standalone_tools(broker_root.path())?;
    let broker_window = broker_tools.host().window();

    // The owner's own server, as `--port 0` runs it.
    let cancel = tokio_util::sync::CancellationToken::new();
    let (listener, address) = mcp_server::bind_loopback(0).await?;
    let app = mcp_server::HttpApp::new(
        mcp_server::McpHandler::new(owner_tools.clone()),
        mcp_server::HttpSecurity::default(),
        None,
        cancel.clone(),
    );
    tokio::spawn(mcp_server::serve(listener, app, cancel.clone()));

    // The broker (an empty root) and the owner as its peer, on one shared port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let coordinator = |window, local| broker::CoordinatorConfig {
        port,
        window,
        local,
        runtime_dir: runtime.path().to_path_buf(),
        security: mcp_server::HttpSecurity::default(),
        timings: broker::Timings::default(),
    };
    let (broker, _) = broker::Coordinator::start(coordinator(broker_window, broker_tools)).await?;
    let (peer, joined) =
        broker::Coordinator::start(coordinator(owner_window.clone(), owner_tools)).await?;
    anyhow::ensure!(
        matches!(joined, broker::Joined::Peer { .. }),
        "the owner did not join as a peer"
    );

    let direct = Client::http(&format!("http://{address}/mcp")).await?;
    let routed = Client::http(&broker.url()).await?;
    routed.call("list_notebooks", json!({})).await.ok();
    let notebook_ref = host_core::refs::notebook_ref(
        &owner_window.id,
        &host_files::file_uri(&owner_root.path().canonicalize()?.join("work.ipynb")),
    );
    let arguments = json!({"notebookRef": notebook_ref});
    let (mut direct_samples, mut routed_samples) = (Vec::new(), Vec::new());
    let rounds = if quick { 60 } else { 320 };
    for round in 0..rounds {
        // Interleaved, alternating which goes first; the first 20 rounds warm both paths up.
        let (direct_sample, routed_sample) = if round % 2 == 0 {
            let direct_sample = timed_read(&direct, &arguments).await;
            (direct_sample, timed_read(&routed, &arguments).await)
        } else {
            let routed_sample = timed_read(&routed, &arguments).await;
            (timed_read(&direct, &arguments).await, routed_sample)
        };
        if round >= 20 {
            direct_samples.push(direct_sample);
            routed_samples.push(routed_sample);
        }
    }
    let answer_bytes = routed
        .call("read_notebook", arguments.clone())
        .await
        .text()
        .len();
    direct.close().await?;
    routed.close().await?;
    peer.stop().await;
    broker.stop().await;
    cancel.cancel();

    let direct_stats = stats(direct_samples);
    let routed_stats = stats(routed_samples);
    let added = |routed: Duration, direct: Duration| routed.saturating_sub(direct);
    let added_median = added(routed_stats.median, direct_stats.median);
    let added_p90 = added(routed_stats.p90, direct_stats.p90);
    let ratio = routed_stats.median.as_secs_f64() / direct_stats.median.as_secs_f64();
    print_rows(
        &format!(
            "Broker: read_notebook (outline of a 60-cell notebook, {:.1} kB answer), {} calls each",
            answer_bytes as f64 / 1e3,
            rounds - 20
        ),
        &[
            Row {
                name: "served by the owner directly (MCP over loopback HTTP)".to_owned(),
                figure: format!("{} ({})", ms(direct_stats.median), ms(direct_stats.p90)),
                baseline: "".to_owned(),
                ratio: "1×".to_owned(),
                target: "",
                pass: None,
            },
            Row {
                name: "through the broker to the owning peer (/mcp, then /peer/invoke)".to_owned(),
                figure: format!("{} ({})", ms(routed_stats.median), ms(routed_stats.p90)),
                baseline: format!("{} (direct)", ms(direct_stats.median)),
                ratio: format!("{ratio:.2}×"),
                target: "",
                pass: None,
            },
            Row {
                name: "added by the broker hop, p50 (p90)".to_owned(),
                figure: format!("{} ({})", ms(added_median), ms(added_p90)),
                baseline: format!("{} (direct)", ms(direct_stats.median)),
                ratio: "".to_owned(),
                target: "≤ 1.5 ms at p50",
                pass: Some(added_median <= Duration::from_micros(1500)),
            },
        ],
        report,
    );
    Ok(())
}
