//! `cargo xtask fuzz`: seeds each fuzz target's corpus from real data and runs the targets with
//! cargo-fuzz; `cargo xtask ci` only builds them ([`build`]).
//!
//! Runs use stable Rust without a sanitizer (`-s none`, fast: every domain crate forbids unsafe
//! code, so AddressSanitizer adds little but its cost) unless `--asan` asks for the image's
//! nightly toolchain and AddressSanitizer. A crash stops its target; the input is kept in
//! `fuzz/artifacts/<target>/` for a regression test in the owning crate.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The cargo-fuzz release the xtask installs when `cargo fuzz` is missing.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Largest real file used as a seed: bigger ones slow every execution down for little coverage.
const MAX_SEED_BYTES: u64 = 100_000;

/// Where a target's seeds come from, besides its committed `fuzz/seeds/<target>/`.
#[derive(Clone, Copy)]
enum RealSeeds {
    /// The `.work/corpus` and example notebooks as they are.
    Notebooks,
    /// Each committed seed, a NUL, then a notebook (the targets' input format).
    SeedThenNotebook,
    /// Files with this extension under this folder of the workspace.
    Files(&'static str, &'static str),
    None,
}

struct Target {
    name: &'static str,
    function: &'static str,
    seeds: RealSeeds,
}

const TARGETS: &[Target] = &[
    Target {
        name: "notebook_parse_write",
        function: "notebook_model::check_parse_write",
        seeds: RealSeeds::Notebooks,
    },
    Target {
        name: "notebook_cell_refs",
        function: "notebook_model::check_cell_refs",
        seeds: RealSeeds::SeedThenNotebook,
    },
    Target {
        name: "notebook_edit_batch",
        function: "notebook_model::check_edit_batch",
        seeds: RealSeeds::SeedThenNotebook,
    },
    Target {
        name: "mcp_arguments",
        function: "mcp_contract::check_arguments",
        seeds: RealSeeds::None,
    },
    Target {
        name: "tracker_event_sequence",
        function: "execution_tracker::check_event_sequence",
        seeds: RealSeeds::None,
    },
    Target {
        name: "transfer_reply_parsing",
        function: "transfer::check_reply_parsing",
        seeds: RealSeeds::None,
    },
    Target {
        name: "dataflow_python",
        function: "dataflow::check_python_dataflow",
        seeds: RealSeeds::Files("crates/dataflow/tests/data", "py"),
    },
    Target {
        name: "condense_format_outputs",
        function: "condense::check_format_outputs",
        seeds: RealSeeds::Files("crates/condense/tests/fixtures", "json"),
    },
    Target {
        name: "colab_setup",
        function: "colab_setup::check_setup_sequence",
        seeds: RealSeeds::None,
    },
];

struct Options {
    seconds: u64,
    targets: Vec<String>,
    asan: bool,
}

fn parse_options(arguments: &[String]) -> Result<Options> {
    let mut options = Options {
        seconds: 60,
        targets: Vec::new(),
        asan: false,
    };
    let mut arguments = arguments.iter();
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--seconds" => {
                options.seconds = arguments
                    .next()
                    .context("--seconds needs a number")?
                    .parse()
                    .context("--seconds needs a number")?;
            }
            "--target" => options
                .targets
                .push(arguments.next().context("--target needs a name")?.clone()),
            "--asan" => options.asan = true,
            other => bail!(
                "unknown argument {other}: cargo xtask fuzz [--seconds N] [--target NAME]... [--asan]"
            ),
        }
    }
    for name in &options.targets {
        if !TARGETS.iter().any(|target| target.name == name) {
            bail!(
                "no fuzz target {name}; the targets are {}",
                TARGETS
                    .iter()
                    .map(|target| target.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(options)
}

fn fuzz_dir() -> PathBuf {
    super::root().join("fuzz")
}

/// `cargo fuzz` with the chosen toolchain, run from the workspace root.
fn cargo_fuzz(asan: bool) -> Command {
    let mut command = if asan {
        let mut command = Command::new("rustup");
        command.args(["run", "nightly", "cargo", "fuzz"]);
        command
    } else {
        let mut command = super::cargo();
        command.arg("fuzz");
        command
    };
    command.current_dir(super::root());
    command
}

fn toolchain_arguments(asan: bool) -> Vec<String> {
    let mut arguments = vec![
        "--fuzz-dir".to_owned(),
        fuzz_dir().display().to_string(),
        "--target-dir".to_owned(),
        fuzz_dir().join("target").display().to_string(),
    ];
    if !asan {
        arguments.extend(["-s".to_owned(), "none".to_owned()]);
    }
    arguments
}

/// Installs cargo-fuzz from crates.io when `cargo fuzz` is missing.
fn ensure_cargo_fuzz() -> Result<()> {
    let installed = super::cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !installed {
        super::run(super::cargo().args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
        ]))?;
    }
    Ok(())
}

/// Compiles every fuzz target on stable (CI's check that the targets still build).
pub fn build() -> Result<()> {
    ensure_cargo_fuzz()?;
    super::run(
        cargo_fuzz(false)
            .arg("build")
            .args(toolchain_arguments(false))
            .arg("--dev"),
    )
}

/// Deletes the fuzz targets' build directory (CI only checks that they compile).
pub fn remove_build() -> Result<()> {
    let target = fuzz_dir().join("target");
    match std::fs::remove_dir_all(&target) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("removing {}", target.display())),
    }
}

/// Every `.ipynb` under `folder`, smallest seeds only.
fn notebooks_under(folder: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            notebooks_under(&path, found);
        } else if path
            .extension()
            .is_some_and(|extension| extension == "ipynb")
            && entry
                .metadata()
                .is_ok_and(|metadata| metadata.len() <= MAX_SEED_BYTES)
        {
            found.push(path);
        }
    }
}

fn files_with_extension(folder: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|found| found == extension))
        .collect();
    files.sort();
    files
}

/// Fills `fuzz/corpus/<target>` with the committed seeds and the real data the target reads.
fn seed(target: &Target) -> Result<PathBuf> {
    let root = super::root();
    let corpus = fuzz_dir().join("corpus").join(target.name);
    std::fs::create_dir_all(&corpus)?;
    let committed = files_in(&fuzz_dir().join("seeds").join(target.name));
    let mut written = 0usize;
    let mut write = |name: String, bytes: &[u8]| -> Result<()> {
        std::fs::write(corpus.join(name), bytes)?;
        written += 1;
        Ok(())
    };
    for path in &committed {
        write(file_label(path), &std::fs::read(path)?)?;
    }
    let mut notebooks = Vec::new();
    notebooks_under(&root.join(".work/corpus"), &mut notebooks);
    notebooks_under(&root.join("examples/notebooks"), &mut notebooks);
    notebooks.sort();
    match target.seeds {
        RealSeeds::Notebooks => {
            for path in &notebooks {
                write(file_label(path), &std::fs::read(path)?)?;
            }
        }
        RealSeeds::SeedThenNotebook => {
            for (index, path) in notebooks.iter().enumerate() {
                let Some(prefix) = committed.get(index % committed.len().max(1)) else {
                    break;
                };
                let mut bytes = std::fs::read(prefix)?;
                bytes.push(0);
                bytes.extend(std::fs::read(path)?);
                write(
                    format!("{}+{}", file_label(prefix), file_label(path)),
                    &bytes,
                )?;
            }
        }
        RealSeeds::Files(folder, extension) => {
            for path in files_with_extension(&root.join(folder), extension) {
                write(file_label(&path), &std::fs::read(&path)?)?;
            }
        }
        RealSeeds::None => {}
    }
    eprintln!(
        "fuzz: {} seeds for {} in {}",
        written,
        target.name,
        corpus.display()
    );
    Ok(corpus)
}

fn files_in(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// A file name for a seed that says where it came from.
fn file_label(path: &Path) -> String {
    let relative = path.strip_prefix(super::root()).unwrap_or(path);
    relative
        .display()
        .to_string()
        .replace(['/', ' '], "_")
        .trim_start_matches('.')
        .to_owned()
}

/// What one run of one target did.
struct Outcome {
    name: &'static str,
    function: &'static str,
    executions: u64,
    per_second: u64,
    corpus_units: u64,
    peak_rss_mb: u64,
    crash: Option<String>,
}

fn stat(output: &str, key: &str) -> u64 {
    output
        .lines()
        .find_map(|line| line.strip_prefix(&format!("stat::{key}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

fn run_target(target: &Target, options: &Options) -> Result<Outcome> {
    let corpus = seed(target)?;
    let artifacts = fuzz_dir().join("artifacts").join(target.name);
    std::fs::create_dir_all(&artifacts)?;
    let before = files_in(&artifacts);
    let mut command = cargo_fuzz(options.asan);
    command
        .args(["run", target.name])
        .args(toolchain_arguments(options.asan))
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={}", options.seconds))
        .args(["-timeout=20", "-print_final_stats=1", "-rss_limit_mb=4096"]);
    eprintln!("$ {command:?}");
    let output = command
        .output()
        .with_context(|| format!("running {}", target.name))?;
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    std::fs::write(
        fuzz_dir()
            .join("artifacts")
            .join(format!("{}.log", target.name)),
        &log,
    )?;
    let crash = files_in(&artifacts)
        .into_iter()
        .find(|path| !before.contains(path))
        // Named from the repository's root, so that the report holds no machine's paths.
        .map(|path| {
            path.strip_prefix(super::root())
                .unwrap_or(&path)
                .display()
                .to_string()
        })
        .or_else(|| {
            (!output.status.success()).then(|| {
                format!(
                    "exit {} (see fuzz/artifacts/{}.log)",
                    output.status, target.name
                )
            })
        });
    Ok(Outcome {
        name: target.name,
        function: target.function,
        executions: stat(&log, "number_of_executed_units"),
        per_second: stat(&log, "average_exec_per_sec"),
        corpus_units: files_in(&corpus).len() as u64,
        peak_rss_mb: stat(&log, "peak_rss_mb"),
        crash,
    })
}

/// Seeds and runs the chosen targets (all by default) for `--seconds` each, and writes the table
/// to `bench/results/fuzz.md`.
pub fn fuzz(arguments: &[String]) -> Result<()> {
    let options = parse_options(arguments)?;
    ensure_cargo_fuzz()?;
    super::corpus()?;
    let chosen: Vec<&Target> = TARGETS
        .iter()
        .filter(|target| {
            options.targets.is_empty() || options.targets.iter().any(|name| name == target.name)
        })
        .collect();
    let mut outcomes = Vec::new();
    for target in chosen {
        let outcome = run_target(target, &options)?;
        eprintln!(
            "fuzz: {}: {} executions, {}",
            outcome.name,
            outcome.executions,
            outcome.crash.as_deref().unwrap_or("no crash")
        );
        outcomes.push(outcome);
    }
    let mut report = format!(
        "# Fuzzing\n\n`cargo xtask fuzz --seconds {}{}` ({}); seeds from `fuzz/seeds` and real data.\n\n\
         | Target | Checks | Executions | Exec/s | Corpus | Peak RSS (MB) | Crash |\n\
         |---|---|---:|---:|---:|---:|---|\n",
        options.seconds,
        if options.asan { " --asan" } else { "" },
        if options.asan {
            "nightly, AddressSanitizer"
        } else {
            "stable, no sanitizer"
        },
    );
    for outcome in &outcomes {
        report.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} | {} | {} |\n",
            outcome.name,
            outcome.function,
            outcome.executions,
            outcome.per_second,
            outcome.corpus_units,
            outcome.peak_rss_mb,
            outcome.crash.as_deref().unwrap_or("none")
        ));
    }
    let results = super::root().join("bench/results");
    std::fs::create_dir_all(&results)?;
    std::fs::write(results.join("fuzz.md"), &report)?;
    eprintln!("{report}");
    let crashed: Vec<&str> = outcomes
        .iter()
        .filter(|outcome| outcome.crash.is_some())
        .map(|outcome| outcome.name)
        .collect();
    if !crashed.is_empty() {
        bail!(
            "fuzz targets crashed: {}; the inputs are in fuzz/artifacts/",
            crashed.join(", ")
        );
    }
    Ok(())
}
