//! `cargo xtask bench`: the benchmarks, each reported as a ratio against a baseline measured in
//! the same run. Nothing here asserts a timing; targets are printed next to the figures.
#![allow(
    clippy::print_stdout,
    reason = "the benchmark report is printed to stdout"
)]

mod brokered;
mod chart;
mod condensation;
mod execution;
mod jupyter;
mod kernel_latency;
mod notebook;
mod peers;
mod raw_http;
mod raw_ws;
mod report;
mod transfer;

use std::time::{Duration, Instant};

/// Median and p90 of a set of durations.
#[derive(Debug, Clone, Copy)]
struct Stats {
    median: Duration,
    p90: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort_unstable();
    let at = |fraction: f64| samples[((samples.len() - 1) as f64 * fraction).round() as usize];
    Stats {
        median: at(0.5),
        p90: at(0.9),
    }
}

fn measure(runs: usize, mut work: impl FnMut()) -> Stats {
    work();
    stats(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                work();
                start.elapsed()
            })
            .collect(),
    )
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

struct Row {
    name: String,
    figure: String,
    baseline: String,
    ratio: String,
    target: &'static str,
    pass: Option<bool>,
}

impl Row {
    /// The row the others of its table are compared with: its own baseline.
    fn reference(name: impl Into<String>, figure: Stats) -> Row {
        Row {
            name: name.into(),
            figure: format!("{} ({})", ms(figure.median), ms(figure.p90)),
            baseline: "—".to_owned(),
            ratio: "1×".to_owned(),
            target: "",
            pass: None,
        }
    }

    /// `figure` against `baseline` (what `baseline_is` says it is), as the ratio of the medians,
    /// with no target.
    fn compared(name: impl Into<String>, figure: Stats, baseline: Stats, baseline_is: &str) -> Row {
        Row {
            name: name.into(),
            figure: format!("{} ({})", ms(figure.median), ms(figure.p90)),
            baseline: format!("{} ({baseline_is})", ms(baseline.median)),
            ratio: format!(
                "{:.2}×",
                figure.median.as_secs_f64() / baseline.median.as_secs_f64()
            ),
            target: "",
            pass: None,
        }
    }
}

fn print_rows(title: &str, rows: &[Row], report: &mut String) {
    let mut table = format!(
        "\n### {title}\n\n| measurement | median (p90) | baseline median | ratio | target | |\n|---|---|---|---|---|---|\n"
    );
    for row in rows {
        let mark = match row.pass {
            Some(true) => "pass",
            Some(false) => "MISS",
            None => "",
        };
        table.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            row.name, row.figure, row.baseline, row.ratio, row.target, mark
        ));
    }
    print!("{table}");
    report.push_str(&table);
}

/// Median and p90 of `runs` awaited calls of `work`, after one warm-up call.
async fn measure_async<F, Fut>(runs: usize, mut work: F) -> Stats
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    work().await;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        work().await;
        samples.push(start.elapsed());
    }
    stats(samples)
}

fn machine_line() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |count| count.get());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1))
                .map(|model| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!(
        "{cpus} CPUs ({cpu_model}), jupyter-mcp {}",
        env!("CARGO_PKG_VERSION")
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let quick = arguments.iter().any(|argument| argument == "--quick");
    // `--no-peer` leaves the datalayer server out of the side-by-side section (minutes saved);
    // like `--only`, it prints without replacing the full report.
    let skip_peer = arguments.iter().any(|argument| argument == "--no-peer");
    // `--only <section>` runs one section and prints it without replacing the full report.
    let only = arguments
        .iter()
        .position(|argument| argument == "--only")
        .and_then(|index| arguments.get(index + 1))
        .map(String::as_str);
    let wanted = |section: &str| only.is_none_or(|only| only == section);
    let mut report = format!("# jupyter-mcp benchmarks\n\nMachine: {}\n", machine_line());
    let started = Instant::now();
    let mut section_started = Instant::now();
    let mut took = |section: &str| {
        eprintln!(
            "bench: {section} took {:.1} s",
            section_started.elapsed().as_secs_f64()
        );
        section_started = Instant::now();
    };
    if wanted("notebook") {
        notebook::notebook_model_bench(&mut report, quick).await?;
        took("notebook");
    }
    if wanted("execution") {
        execution::execution_bench(&mut report, if quick { 30 } else { 200 }).await?;
        took("execution");
    }
    if wanted("condensation") {
        condensation::condensation_bench(&mut report).await?;
        took("condensation");
    }
    if wanted("transfer") {
        transfer::transfer_bench(&mut report, quick).await?;
        took("transfer");
    }
    if wanted("broker") {
        brokered::broker_bench(&mut report, quick).await?;
        took("broker");
    }
    // Starting a Jupyter Server alone takes about ten seconds on a busy machine: `--quick` skips
    // the sections that start one, and says so in their place.
    let skipped_by_quick = |report: &mut String, title: &str, section: &str| {
        let note = format!(
            "\n### {title}\n\nSkipped by --quick (it starts a Jupyter Server); `--only {section}` or the full run measures it.\n"
        );
        print!("{note}");
        report.push_str(&note);
    };
    if quick && only.is_none() {
        skipped_by_quick(
            &mut report,
            "Kernels: trivial-cell latency, local ZeroMQ against a Jupyter Server on loopback",
            "kernels",
        );
    } else if wanted("kernels") {
        kernel_latency::remote_kernel_bench(&mut report, if quick { 15 } else { 100 }).await?;
        took("kernels");
    }
    if quick && only.is_none() {
        skipped_by_quick(&mut report, "Working alongside JupyterLab", "jupyter");
    } else if wanted("jupyter") {
        jupyter::jupyter_bench(&mut report, if quick { 15 } else { 60 }).await?;
        took("jupyter");
    }
    let side_by_side = if wanted("peers") {
        let side_by_side = peers::run(quick, skip_peer).await?;
        print!("{}", side_by_side.markdown);
        report.push_str(&side_by_side.markdown);
        took("peers");
        Some(side_by_side)
    } else {
        None
    };
    eprintln!(
        "bench: everything took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    if only.is_none() && !skip_peer {
        report.insert_str(
            report.find('\n').map_or(0, |end| end + 1),
            &format!(
                "\n{}\nCaveat: measured on a shared 2-core machine while other builds may run; read the ratios, not the absolute times.\n",
                report::environment(&jupyter_mcp_tests::python())
            ),
        );
        let chart = side_by_side.and_then(|side_by_side| {
            chart::draw(&side_by_side.lines, &side_by_side.context)
                .inspect_err(|error| eprintln!("chart not drawn: {error:#}"))
                .ok()
        });
        report::write_results(&report, chart.as_deref(), quick)?;
    }
    Ok(())
}
