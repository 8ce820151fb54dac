//! Running cells through jupyter-mcp against running them on the kernel directly.

use std::time::{Duration, Instant};

use jupyter_mcp_tests::Client;
use serde_json::json;

use crate::{Row, Stats, ms, print_rows, stats};

/// The quiet pause before each run of the execution section's paused turn.
const QUIET_BEFORE_RUN: Duration = Duration::from_millis(5);

/// Fresh launches of the execution section's server and kernels, whose samples are pooled.
const EXECUTION_LAUNCHES: usize = 3;

/// One launch's samples: per client (kept, fresh, bare) and the direct runs in turn with them,
/// then the paused turn's kept-client and direct samples.
#[derive(Default)]
struct ExecutionSamples {
    through: [Vec<Duration>; 3],
    direct: Vec<Duration>,
    through_paused: Vec<Duration>,
    direct_after_pause: Vec<Duration>,
}

impl ExecutionSamples {
    fn append(&mut self, other: ExecutionSamples) {
        for (mine, theirs) in self.through.iter_mut().zip(other.through) {
            mine.extend(theirs);
        }
        self.direct.extend(other.direct);
        self.through_paused.extend(other.through_paused);
        self.direct_after_pause.extend(other.direct_after_pause);
    }

    /// The kept client's median over the direct median, back to back.
    fn target_ratio(&self) -> f64 {
        stats(self.through[0].clone()).median.as_secs_f64()
            / stats(self.direct.clone()).median.as_secs_f64()
    }
}

/// One launch of the execution section: a fresh server with its kernel and a fresh direct
/// kernel, each kernel with an IPython folder of its own (`IPYTHONDIR`), so the two never share
/// a history database (IPython writes every cell to it, with `fdatasync`) and the user's own
/// `~/.ipython` is left alone.
async fn execution_launch(runs: usize) -> anyhow::Result<ExecutionSamples> {
    use jupyter_mcp_tests::{HttpServer, example_root, write_code_notebook};
    let root = example_root();
    write_code_notebook(root.path(), "bench.ipynb", &["1+1"]);
    let ipython = tempfile::tempdir()?;
    let (ours_ipython, direct_ipython) =
        (ipython.path().join("ours"), ipython.path().join("direct"));
    let server = HttpServer::start_with_env(
        root.path(),
        &[],
        &[("IPYTHONDIR", &ours_ipython.to_string_lossy())],
    )?;
    // The client an agent's SDK is like (the TypeScript and Python SDKs keep their connection),
    // and rmcp's default transport, which opens a new connection for every call.
    let kept = Client::http_keep_alive(&server.url).await?;
    let fresh = Client::http(&server.url).await?;
    let arguments =
        json!({"notebookRef": "bench.ipynb", "cellIds": [0], "freshDeps": false, "waitMs": 30000});

    // The baseline: the same kind of kernel, driven directly over ZeroMQ.
    let kernel = crate::peers::start_local_kernel_in(root.path(), Some(&direct_ipython)).await?;
    let mut bare = crate::raw_http::RawMcp::connect(&server.url).await?;
    let mut samples = ExecutionSamples::default();
    // One run through a client, then one direct, in turn (the clients take turns): every side
    // sees the same machine, so a busy moment weighs on all alike. The first five rounds warm
    // both kernels.
    for round in 0..runs + 5 {
        for client in 0..3 {
            let start = Instant::now();
            let status = match client {
                0 => kept.call("run_cells", arguments.clone()).await.ok()["status"].clone(),
                1 => fresh.call("run_cells", arguments.clone()).await.ok()["status"].clone(),
                _ => {
                    bare.call("run_cells", arguments.clone()).await?["structuredContent"]["status"]
                        .clone()
                }
            };
            let elapsed = start.elapsed();
            anyhow::ensure!(status == "completed", "a run ended {status}");
            let start = Instant::now();
            crate::peers::direct_trivial(&kernel).await?;
            if round >= 5 {
                samples.direct.push(start.elapsed());
                samples.through[client].push(elapsed);
            }
        }
    }
    // Then, apart, the kept client and the direct run in turn with a quiet pause before each.
    // Back to back, each side starts on a machine still warm from the other, and the server's
    // trailing work (it closes a replaced notebook file 2 ms after a run) lands in the direct
    // run; after a pause, both start as an agent's call does, on a quiet machine.
    for round in 0..runs + 5 {
        tokio::time::sleep(QUIET_BEFORE_RUN).await;
        let start = Instant::now();
        let status = kept.call("run_cells", arguments.clone()).await.ok()["status"].clone();
        let elapsed = start.elapsed();
        anyhow::ensure!(status == "completed", "a run ended {status}");
        tokio::time::sleep(QUIET_BEFORE_RUN).await;
        let start = Instant::now();
        crate::peers::direct_trivial(&kernel).await?;
        if round >= 5 {
            samples.direct_after_pause.push(start.elapsed());
            samples.through_paused.push(elapsed);
        }
    }
    kernels::KernelHandle::shutdown(&kernel).await?;
    drop(kept);
    drop(fresh);
    drop(server);
    Ok(samples)
}

/// A trivial cell through `run_cells` over HTTP against a direct ZeroMQ execute round trip,
/// pooled over [`EXECUTION_LAUNCHES`] fresh launches of the server and both kernels: where the
/// scheduler places a new kernel's threads beside the server's moves a launch's ratio by up to
/// a fifth, and one launch would report that luck as the result.
pub(crate) async fn execution_bench(report: &mut String, runs: usize) -> anyhow::Result<()> {
    let per_launch = runs.div_ceil(EXECUTION_LAUNCHES);
    let mut pooled = ExecutionSamples::default();
    let mut launch_ratios = Vec::new();
    for _ in 0..EXECUTION_LAUNCHES {
        let samples = execution_launch(per_launch).await?;
        launch_ratios.push(format!("{:.2}×", samples.target_ratio()));
        pooled.append(samples);
    }
    let ExecutionSamples {
        through,
        direct,
        through_paused,
        direct_after_pause,
    } = pooled;
    let [through_kept, through_fresh, through_bare] = through.map(stats);
    let through_paused = stats(through_paused);
    let direct = stats(direct);
    let direct_after_pause = stats(direct_after_pause);
    let baseline = format!(
        "{} ({}) direct ZeroMQ execute round trip, measured in turn with each run",
        ms(direct.median),
        ms(direct.p90)
    );
    let ratio = |figure: Stats| figure.median.as_secs_f64() / direct.median.as_secs_f64();
    // The first client carries the target; the others are read against the same baseline.
    let row = |name: &str, figure: Stats, target: Option<f64>| Row {
        name: name.to_owned(),
        figure: format!("{} ({})", ms(figure.median), ms(figure.p90)),
        baseline: if target.is_some() {
            baseline.clone()
        } else {
            "the same".to_owned()
        },
        ratio: format!("{:.2}×", ratio(figure)),
        target: if target.is_some() { "≤ 1.3×" } else { "" },
        pass: target.map(|limit| ratio(figure) <= limit),
    };
    print_rows(
        &format!(
            "Execution: a trivial cell (`1+1`), {} runs each, pooled over {EXECUTION_LAUNCHES} launches",
            per_launch * EXECUTION_LAUNCHES
        ),
        &[
            row(
                &format!(
                    "run_cells over HTTP (receipt with outputs, cell outputs written to disk; rmcp client keeping its connection); each launch alone: {}",
                    launch_ratios.join(", ")
                ),
                through_kept,
                Some(1.3),
            ),
            row(
                "the same through rmcp's default HTTP transport (a new connection for every call)",
                through_fresh,
                None,
            ),
            row(
                "the same through a bare HTTP client (hyper, one kept connection, the reply parsed into a serde_json `Value`): the server and transport without a client library",
                through_bare,
                None,
            ),
            Row {
                name: format!(
                    "run_cells over HTTP, rmcp client keeping its connection, each run (ours and the direct one) after a {} ms pause",
                    QUIET_BEFORE_RUN.as_millis()
                ),
                figure: format!("{} ({})", ms(through_paused.median), ms(through_paused.p90)),
                baseline: format!(
                    "{} ({}) direct round trip, also after the pause",
                    ms(direct_after_pause.median),
                    ms(direct_after_pause.p90)
                ),
                ratio: format!(
                    "{:.2}×",
                    through_paused.median.as_secs_f64() / direct_after_pause.median.as_secs_f64()
                ),
                target: "",
                pass: None,
            },
        ],
        report,
    );
    Ok(())
}
