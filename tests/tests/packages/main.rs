//! The packages users install, tested the way a user meets them: the wheel installed with `pip`
//! into a fresh virtual environment and run through `uvx`, its Jupyter Server extension in a real
//! `jupyter server` and in a real JupyterHub user's server, and the npm tarballs run through
//! `npx`. Nothing here builds them: `cargo xtask dist` does, and `cargo xtask ci` runs this test
//! binary afterwards with `JUPYTER_MCP_DIST` naming its output (this target has `test = false`:
//! a plain `cargo test` neither builds the packages nor runs it).

mod npm;
mod server_extension;
mod wheel;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jupyter_mcp_tests::{Client, write_code_notebook};
use serde_json::json;

/// The folder `cargo xtask dist` wrote (`dist/`).
pub fn dist_dir() -> PathBuf {
    let folder = std::env::var_os("JUPYTER_MCP_DIST").map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "JUPYTER_MCP_DIST is not set: these tests check built packages; run `cargo xtask dist` \
             and then `JUPYTER_MCP_DIST=dist cargo test -p jupyter-mcp-tests --test packages` \
             (`cargo xtask ci` does both)"
        )
    });
    // A relative folder is the workspace's (tests run in the tests crate's folder).
    let folder = jupyter_mcp_tests::workspace_root().join(folder);
    assert!(
        folder.is_dir(),
        "JUPYTER_MCP_DIST={} is not a folder",
        folder.display()
    );
    folder
}

/// The one file in `folder` whose name ends with `suffix` and holds `part`.
pub fn find_file(folder: &Path, part: &str, suffix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|error| panic!("reading {}: {error}", folder.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.contains(part) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one *{part}*{suffix} in {}: {found:?}",
        folder.display()
    );
    found.into_iter().next().unwrap()
}

/// A `PATH` of `first` then the system's own folders, checked to hold no Rust toolchain: what a
/// user without Rust has.
pub fn path_without_rust(first: &[&Path]) -> std::ffi::OsString {
    let mut folders: Vec<PathBuf> = first.iter().map(|folder| folder.to_path_buf()).collect();
    folders.extend(["/usr/bin", "/bin"].map(PathBuf::from));
    for folder in &folders {
        for tool in ["cargo", "rustc", "rustup"] {
            assert!(
                !folder.join(tool).exists(),
                "{} holds {tool}: the test must run without a Rust toolchain",
                folder.display()
            );
        }
    }
    std::env::join_paths(folders).unwrap()
}

/// The pinned version of `package` in `python/requirements.txt` (`name==version`).
pub fn pinned(package: &str) -> String {
    let requirements = std::fs::read_to_string(
        jupyter_mcp_tests::workspace_root().join("python/requirements.txt"),
    )
    .unwrap();
    requirements
        .lines()
        .find_map(|line| {
            let (name, version) = line.split_once("==")?;
            (name.trim().eq_ignore_ascii_case(package)).then(|| version.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("python/requirements.txt pins no {package}"))
}

/// Speaks MCP over stdio to the server `command` starts (serving `root`), and checks what a user
/// checks first: the tools are listed, and a cell runs on a real kernel. Returns the kernel's
/// `sys.prefix`, so the caller can say which environment's ipykernel ran it.
pub async fn check_stdio_server(command: tokio::process::Command, root: &Path) -> String {
    write_code_notebook(
        root,
        "first.ipynb",
        &["import sys\nprint('prefix=' + sys.prefix)"],
    );
    let client = Client::stdio_command(command)
        .await
        .expect("the MCP handshake over stdio");
    let tools = client.tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for wanted in ["list_notebooks", "read_notebook", "edit_cells", "run_cells"] {
        assert!(names.contains(&wanted), "{wanted} is listed: {names:?}");
    }
    let run = client
        .call(
            "run_cells",
            json!({"notebookRef": "first.ipynb", "cellIds": ["c0"], "waitMs": 120000}),
        )
        .await;
    let receipt = run.ok();
    assert_eq!(receipt["status"], "completed", "{receipt}");
    let text = receipt.to_string();
    let prefix = text
        .split("prefix=")
        .nth(1)
        .unwrap_or_else(|| panic!("the cell printed its prefix: {receipt}"));
    prefix.split(['\\', '"']).next().unwrap().trim().to_owned()
}

/// Runs `command` to its end, failing with its output when it fails.
pub fn run(command: &mut std::process::Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("running {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The environment every wheel test shares: a fresh virtual environment with the wheel, and with
/// ipykernel, Jupyter Server, jupyter-collaboration and JupyterHub (for the single-user server) at
/// the versions the other tests use, installed by `pip` from the registry.
pub struct WheelEnv {
    pub folder: tempfile::TempDir,
}

impl WheelEnv {
    pub fn shared() -> &'static WheelEnv {
        static SHARED: OnceLock<WheelEnv> = OnceLock::new();
        SHARED.get_or_init(WheelEnv::install)
    }

    fn install() -> WheelEnv {
        let wheel = wheel::x86_64_wheel();
        let folder = tempfile::tempdir().unwrap();
        let venv = folder.path().join("venv");
        // A new environment from the test Python's interpreter.
        run(std::process::Command::new(jupyter_mcp_tests::python())
            .args(["-m", "venv"])
            .arg(&venv));
        let bin = venv.join("bin");
        let mut pip = std::process::Command::new(bin.join("python"));
        pip.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(&wheel)
        .arg(format!("ipykernel=={}", pinned("ipykernel")))
        .arg(format!("jupyter_server=={}", pinned("jupyter_server")))
        .arg(format!(
            "jupyter-collaboration=={}",
            pinned("jupyter-collaboration")
        ))
        .arg(format!(
            "jupyter-server-ydoc=={}",
            pinned("jupyter-server-ydoc")
        ))
        .arg(format!("jupyter-ydoc=={}", pinned("jupyter-ydoc")))
        .arg(format!("pycrdt=={}", pinned("pycrdt")))
        .arg(format!("jupyterhub=={}", pinned("jupyterhub")))
        .env("PATH", path_without_rust(&[&bin]));
        run(&mut pip);
        WheelEnv { folder }
    }

    pub fn venv(&self) -> PathBuf {
        self.folder.path().join("venv")
    }

    pub fn bin(&self) -> PathBuf {
        self.venv().join("bin")
    }

    /// The `jupyter-mcp` binary pip installed.
    pub fn binary(&self) -> PathBuf {
        self.bin().join("jupyter-mcp")
    }
}

/// The pids of running processes whose program is `binary` and whose command line holds
/// `marker` (tests run at once: each names its own server this way).
pub fn processes_of(binary: &Path, marker: &str) -> Vec<u32> {
    let binary = binary
        .canonicalize()
        .unwrap_or_else(|_| binary.to_path_buf());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == binary)
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|line| String::from_utf8_lossy(&line).contains(marker))
                && jupyter_mcp_tests::process_alive(*pid)
        })
        .collect()
}
