//! Project automation. `cargo xtask <command>`:
//!
//! - `setup`: the project-local Python environment (`.venv`) with ipykernel, nbformat, the
//!   test client, Jupyter Server, Kernel Gateway and JupyterHub, from
//!   `python/requirements.txt`, and JupyterHub's proxy (`tests/hub`, from npm).
//! - `corpus`: the nbformat/nbclient/nbconvert/jupyter_client test notebooks in `.work/corpus`.
//! - `deps`: fails when a workspace edge or an I/O dependency is not in ARCHITECTURE.md's code
//!   map, or a domain crate (or a pure module) depends on tokio, hyper, rmcp, napi or does I/O
//!   (see `deps.rs`).
//! - `ci [--lean]`: everything CI checks: setup, corpus, deps, fmt, clippy, build, tests, the MCP
//!   conformance suite, the extension's tests, `e2e-vscode`, `windows`, `docs`, `dist --ci` and
//!   `dist-test`; `--lean` (CI) removes scratch builds once checked.
//! - `serve`: setup, then run the server on the example notebooks.
//! - `bench [--quick]`: the benchmarks (release build), reported as ratios against baselines and
//!   side by side with datalayer's `jupyter-mcp-server`, in `.venv-bench`
//!   (`python/bench-requirements.txt`); results in `bench/results/`.
//! - `fuzz [--seconds N] [--target NAME]... [--asan]`: seed and run the cargo-fuzz targets.
//! - `codegen [--check]`: the committed generated files from their sources: the tool schemas
//!   (`schemas/tools.json`) from the contract and the native module's TypeScript declarations
//!   (`extension/native/index.d.ts`); `--check` fails when one drifted.
//! - `dist [--ci]`: everything users install, into `dist/`: the wheel (with the Jupyter Server
//!   extension), the npm packages, the Claude Desktop bundle, the MCP Registry entry and (not
//!   with `--ci`) the VS Code package (see `dist.rs`, `packages.rs`); `dist-test`: the package
//!   tests (`tests/tests/packages`) on what `dist` built.
//! - `extension-test`, `e2e-vscode`: the VS Code extension (see `vscode.rs`).
//! - `conformance`: the official MCP conformance suite against the standalone server, compared
//!   with `conformance/expected-failures.yml` (see `conformance.rs`).
//! - `windows [--check]`: the Windows build, checked (`--check`, in CI) or built and smoke-tested
//!   under Wine (see `windows.rs`).
//! - `docs`: the links of README.md and the book checked, and the book built into `target/book`
//!   (see `docs.rs`).

mod conformance;
mod deps;
mod dist;
mod docs;
mod packages;
mod vscode;
mod windows;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

mod fuzz;

/// Sub-folders of `.work/corpus` and the source distributions whose test notebooks they hold.
const CORPUS: &[&str] = &[
    "nbformat==5.11.1",
    "nbclient==0.11.0",
    "nbconvert==7.17.2",
    "jupyter_client==8.10.0",
];

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

pub(crate) fn run(command: &mut Command) -> Result<()> {
    eprintln!("$ {command:?}");
    let status = command
        .status()
        .with_context(|| format!("could not start {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

/// The standard output of `command` (`what` names it in errors), which must succeed: else its
/// standard error is the error.
pub(crate) fn stdout_of(command: &mut Command, what: &str) -> Result<Vec<u8>> {
    let output = command.output().with_context(|| what.to_owned())?;
    if !output.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(output.stdout)
}

pub(crate) fn cargo() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command.current_dir(root());
    command
}

pub(crate) fn venv_python() -> PathBuf {
    venv_python_of(".venv")
}

/// The Python of the project-local environment `folder` (`.venv`, `.venv-dist`, …).
pub(crate) fn venv_python_of(folder: &str) -> PathBuf {
    root().join(folder).join("bin/python")
}

/// Creates `.venv` and installs `python/requirements.txt` when they changed, and JupyterHub's
/// proxy for the hub tests (`tests/hub`, `npm ci` from its lock file).
pub(crate) fn setup() -> Result<()> {
    install_venv(".venv", "python/requirements.txt")?;
    install_hub_proxy()
}

/// `npm ci` in `tests/hub/` when `node_modules` is older than the lock file: the
/// configurable-http-proxy the JupyterHub of the end-to-end tests runs.
fn install_hub_proxy() -> Result<()> {
    let folder = root().join("tests/hub");
    let lock = folder.join("package-lock.json");
    let marker = folder.join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&marker)) {
        (Ok(lock), Ok(marker)) => marker.modified()? >= lock.modified()?,
        _ => false,
    };
    if !fresh {
        run(Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&folder))
        .context("installing configurable-http-proxy for the JupyterHub tests needs node and npm (Debian: apt-get install nodejs npm)")?;
    }
    Ok(())
}

/// Creates the virtual environment `folder` and installs `requirements` into it when they
/// changed since the last install.
pub(crate) fn install_venv(folder: &str, requirements: &str) -> Result<()> {
    let root = root();
    let venv = root.join(folder);
    let python = venv.join("bin/python");
    let requirements = root.join(requirements);
    let marker = venv.join(".jupyter-mcp-requirements");
    let mut wanted = std::fs::read_to_string(&requirements)
        .with_context(|| format!("reading {}", requirements.display()))?;
    // A file that includes python/requirements.txt changes when that one does.
    if wanted.contains("-r requirements.txt") {
        wanted.push_str(&std::fs::read_to_string(
            root.join("python/requirements.txt"),
        )?);
    }
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    if !python.exists() {
        let system_python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run(Command::new(&system_python).args(["-m", "venv"]).arg(&venv)).context(
            "creating the virtual environment failed: install Python 3.10+ with the venv module (Debian: apt-get install python3-venv)",
        )?;
    }
    run(pip(&python, "install").args(["--upgrade", "pip"]))?;
    run(pip(&python, "install").arg("-r").arg(&requirements))?;
    std::fs::write(marker, wanted)?;
    Ok(())
}

/// Whether a subcommand's only optional `flag` was given; anything else is answered with `usage`.
pub(crate) fn optional_flag(arguments: &[String], flag: &str, usage: &str) -> Result<bool> {
    match arguments {
        [] => Ok(false),
        [given] if given == flag => Ok(true),
        _ => bail!("usage: {usage}"),
    }
}

/// `python -m pip <command>`, quiet and without the version check.
pub(crate) fn pip(python: &Path, command: &str) -> Command {
    let mut pip = Command::new(python);
    pip.args([
        "-m",
        "pip",
        command,
        "--quiet",
        "--disable-pip-version-check",
    ]);
    pip
}

/// Downloads the source distributions and unpacks their `.ipynb` files.
fn corpus() -> Result<()> {
    let target = root().join(".work/corpus");
    let marker = target.join(".complete");
    let wanted = CORPUS.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(());
    }
    setup()?;
    let downloads = root().join(".work/sdists");
    std::fs::create_dir_all(&downloads)?;
    let mut download = pip(&venv_python(), "download");
    download
        .args(["--no-binary", ":all:", "--no-deps", "--dest"])
        .arg(&downloads)
        .args(CORPUS);
    run(&mut download)?;
    let script = r#"
import pathlib, sys, tarfile
downloads, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
count = 0
for archive in sorted(downloads.glob("*.tar.gz")):
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".ipynb"):
                destination = target / archive.name[: -len(".tar.gz")] / member.name
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(tar.extractfile(member).read())
                count += 1
print(f"corpus: {count} notebooks in {target}")
"#;
    run(Command::new(venv_python())
        .arg("-c")
        .arg(script)
        .arg(&downloads)
        .arg(&target))?;
    std::fs::write(marker, wanted)?;
    Ok(())
}

/// `cargo xtask ci [--lean]`. `--lean` (what `.ci/run` uses on a fresh machine whose disk may be
/// nearly full) deletes each scratch build as soon as its check is done and reports free disk space
/// before and after, so that a failure for lack of space says so.
fn ci(arguments: &[String]) -> Result<()> {
    let lean = match arguments {
        [] => false,
        [flag] if flag == "--lean" => true,
        _ => bail!("usage: cargo xtask ci [--lean]"),
    };
    report_free_space("ci: start");
    // mdBook compiles while the Python environment and the corpus download.
    let mdbook = docs::install_in_background()?;
    setup()?;
    corpus()?;
    deps::deps()?;
    codegen(true)?;
    run(cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The package tests (they need `dist`) and the minute-long load test are no default test
    // targets: linted by name.
    run(cargo().args([
        "clippy",
        "-p",
        "jupyter-mcp-tests",
        "--test",
        "packages",
        "--test",
        "load",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["build", "--workspace", "--all-targets"]))?;
    // README's and the book's links, and the book (mdBook, installed in the background above).
    docs::docs_after(mdbook)?;
    // The wheel (a release build of its own, with LTO) compiles at the lowest priority while the
    // tests below run: it takes only the processor time they leave.
    let wheel = dist::start_wheel_build(true)?;
    fuzz::build()?;
    if lean {
        fuzz::remove_build()?;
        report_free_space("ci: fuzz targets built and removed");
    }
    // The output viewer's and JupyterLab's browser tests drive Chromium.
    vscode::system_packages()?;
    run(cargo()
        .args(["test", "--workspace"])
        .env("JUPYTER_MCP_TEST_PYTHON", venv_python())
        // The build above made the server binary with the same features the tests use.
        .env("JUPYTER_MCP_SKIP_BUILD", "1"))?;
    // 32 clients for a minute against one server, left out of `cargo test` so that a developer's
    // run does not wait on it.
    run(cargo()
        .args(["test", "-p", "jupyter-mcp-tests", "--test", "load"])
        .env("JUPYTER_MCP_TEST_PYTHON", venv_python())
        .env("JUPYTER_MCP_SKIP_BUILD", "1"))?;
    conformance::conformance()?;
    vscode::extension_test()?;
    // The extension in a real extension host, with the debug native module built above.
    vscode::e2e(&["--debug-native".to_owned(), "--prebuilt-server".to_owned()])?;
    // The Windows build of the server and the extension's module, the server smoke-tested under
    // Wine, and the `win32-x64` package.
    windows::windows(&[])?;
    if lean {
        let _ = std::fs::remove_dir_all(windows::target_dir());
    }
    // What users install (the wheel, npm packages, the Claude Desktop bundle), built as
    // released, then installed and run as users do.
    dist::finish(wheel, true)?;
    dist::test()?;
    if lean {
        dist::remove_build();
    }
    report_free_space("ci: end");
    eprintln!("ci: all checks passed");
    Ok(())
}

/// Prints the free space of the file system holding the workspace (`df`), best effort.
fn report_free_space(when: &str) {
    let output = Command::new("df")
        .args(["-h", "--output=avail,size,target"])
        .arg(root())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let text = String::from_utf8_lossy(&output.stdout);
            let line = text.lines().nth(1).unwrap_or_default().trim().to_owned();
            eprintln!("{when}: free disk (avail, size, mount): {line}");
        }
        _ => eprintln!("{when}: free disk unknown (df failed)"),
    }
}

fn serve(arguments: &[String]) -> Result<()> {
    setup()?;
    let venv_bin = root().join(".venv/bin");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![venv_bin];
    paths.extend(std::env::split_paths(&path));
    let mut command = cargo();
    command
        .args([
            "run",
            "--release",
            "-p",
            "host-standalone",
            "--bin",
            "jupyter-mcp",
            "--",
            "serve",
        ])
        .env("PATH", std::env::join_paths(paths)?);
    if arguments.iter().all(|argument| argument != "--root") {
        command.arg("--root").arg(root().join("examples/notebooks"));
    }
    command.args(arguments);
    run(&mut command)
}

/// The benchmarks run in their own environment, `.venv-bench` (the test requirements plus the
/// peer server and the Jupyter server it drives), so that `ci` never installs the peer.
fn bench(arguments: &[String]) -> Result<()> {
    install_venv(".venv-bench", "python/bench-requirements.txt")?;
    // One build for the bench and the server it drives: built apart, the two packages resolve
    // their dependencies' features differently and the second build recompiles half the tree.
    run(cargo().args([
        "build",
        "--release",
        "-p",
        "jupyter-mcp-bench",
        "--bin",
        "bench",
        "-p",
        "host-standalone",
        "--bin",
        "jupyter-mcp",
    ]))?;
    let release = target_dir().join("release");
    let mut command = Command::new(release.join("bench"));
    command
        .current_dir(root())
        .args(arguments)
        .env("JUPYTER_MCP_SERVER_BINARY", release.join("jupyter-mcp"))
        .env(
            "JUPYTER_MCP_TEST_PYTHON",
            root().join(".venv-bench/bin/python"),
        );
    run(&mut command)
}

/// Cargo's target folder for this workspace.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// The tool catalogue as committed JSON: what `tools/list` describes, for reviews and clients.
fn tool_schemas() -> String {
    let tools: Vec<serde_json::Value> = mcp_contract::all_tools()
        .iter()
        .map(|spec| {
            serde_json::json!({
                "name": spec.name,
                "title": spec.title,
                "description": spec.description,
                "annotations": {
                    "readOnlyHint": spec.annotations.read_only,
                    "destructiveHint": spec.annotations.destructive,
                    "idempotentHint": spec.annotations.idempotent,
                    "openWorldHint": spec.annotations.open_world,
                },
                "inputSchema": mcp_contract::catalog::portable_input_schema(spec),
                "outputSchema": mcp_contract::catalog::portable_output_schema(spec),
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&serde_json::json!({ "tools": tools }))
        .expect("schemas serialise");
    text.push('\n');
    text
}

fn codegen(check: bool) -> Result<()> {
    let path = root().join("schemas/tools.json");
    let generated = tool_schemas();
    if check {
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed != generated {
            bail!(
                "schemas/tools.json is out of date with the contract crate: run `cargo xtask codegen` and commit it"
            );
        }
        eprintln!("codegen: schemas/tools.json matches the contract");
        return Ok(());
    }
    std::fs::create_dir_all(path.parent().expect("schemas folder"))?;
    std::fs::write(&path, generated)?;
    eprintln!("codegen: wrote {}", path.display());
    Ok(())
}

fn main() -> Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match arguments.first().map(String::as_str) {
        Some("setup") => setup(),
        Some("corpus") => corpus(),
        Some("deps") => deps::deps(),
        Some("ci") => ci(&arguments[1..]),
        Some("serve") => serve(&arguments[1..]),
        Some("bench") => bench(&arguments[1..]),
        Some("fuzz") => fuzz::fuzz(&arguments[1..]),
        Some("dist") => dist::dist(&arguments[1..]),
        Some("dist-test") => dist::test(),
        Some("codegen") => {
            let check = arguments.iter().any(|argument| argument == "--check");
            codegen(check)?;
            vscode::codegen(check)
        }
        Some("extension-test") => vscode::extension_test(),
        Some("e2e-vscode") => vscode::e2e(&arguments[1..]),
        Some("conformance") => conformance::conformance(),
        Some("windows") => windows::windows(&arguments[1..]),
        Some("docs") => docs::docs(),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup | corpus | deps | ci | serve [args] | bench [args] | dist [--ci] | dist-test | codegen [--check] | extension-test | e2e-vscode | conformance | windows [--check] | docs | fuzz [args]>"
            );
            std::process::exit(2);
        }
    }
}
