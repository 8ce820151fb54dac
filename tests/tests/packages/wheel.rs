//! The wheel: a manylinux2014 wheel that `pip install` and `uvx --from` turn into a working
//! `jupyter-mcp` without a Rust toolchain, running cells on the kernel of the environment it
//! was installed into.

use std::path::PathBuf;

use crate::{WheelEnv, check_stdio_server, dist_dir, find_file, path_without_rust, pinned, run};

/// The x86_64 wheel `cargo xtask dist` built.
pub fn x86_64_wheel() -> PathBuf {
    find_file(&dist_dir().join("wheels"), "x86_64", ".whl")
}

/// The packaging tools' environment (`cargo xtask dist` installs maturin, auditwheel and uv
/// there).
fn tool(name: &str) -> PathBuf {
    let path = jupyter_mcp_tests::workspace_root()
        .join(".venv-dist/bin")
        .join(name);
    assert!(
        path.exists(),
        "no {} (cargo xtask dist installs it)",
        path.display()
    );
    path
}

#[test]
fn the_wheel_is_manylinux2014_and_small() {
    let wheel = x86_64_wheel();
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("jupyter_mcp_rs-"), "{name}");
    for tag in ["manylinux_2_17_x86_64", "manylinux2014_x86_64"] {
        assert!(name.contains(tag), "{name} carries {tag}");
    }
    let shown = run(std::process::Command::new(tool("auditwheel"))
        .arg("show")
        .arg(&wheel));
    assert!(
        shown.contains("manylinux_2_17_x86_64") || shown.contains("manylinux2014_x86_64"),
        "auditwheel show: {shown}"
    );
    let size = std::fs::metadata(&wheel).unwrap().len();
    assert!(
        size < 15 * 1024 * 1024,
        "the wheel is {size} bytes, over 15 MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_installed_wheel_answers_over_stdio_and_runs_on_its_environments_kernel() {
    let env = WheelEnv::shared();
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    // As a user runs it: the environment's command, from a folder of their own, no activation.
    let mut command = tokio::process::Command::new(env.binary());
    command
        .args(["serve", "--stdio", "--root"])
        .arg(root.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .current_dir(root.path())
        .env("PATH", path_without_rust(&[]))
        .env_remove("VIRTUAL_ENV")
        .env_remove("JUPYTER_PATH");
    let prefix = check_stdio_server(command, root.path()).await;
    assert_eq!(
        PathBuf::from(&prefix).canonicalize().unwrap(),
        env.venv().canonicalize().unwrap(),
        "the cell ran on the environment's own ipykernel"
    );

    // `jupyter mcp` is the same binary (Jupyter runs `jupyter-<name>` from PATH).
    let help = run(std::process::Command::new(env.bin().join("jupyter"))
        .args(["mcp", "serve", "--help"])
        .env("PATH", path_without_rust(&[&env.bin()])));
    assert!(help.contains("--exit-on-stdin-close"), "{help}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uvx_runs_the_wheel_by_its_package_name() {
    let wheel = x86_64_wheel();
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let uv_cache = jupyter_mcp_tests::workspace_root().join("target/uv-cache");
    // `uvx jupyter-mcp-rs ...` as the README says, the package taken from the wheel file, with
    // ipykernel beside it for the cell to run on.
    let mut command = tokio::process::Command::new(tool("uvx"));
    command
        .arg("--from")
        .arg(&wheel)
        .arg("--with")
        .arg(format!("ipykernel=={}", pinned("ipykernel")))
        .arg("--python")
        .arg(jupyter_mcp_tests::python())
        .args(["jupyter-mcp-rs", "serve", "--stdio", "--root"])
        .arg(root.path())
        .arg("--cache-dir")
        .arg(cache.path())
        .current_dir(root.path())
        .env("PATH", path_without_rust(&[]))
        .env("UV_CACHE_DIR", &uv_cache)
        .env("UV_PYTHON_DOWNLOADS", "never")
        .env("UV_NO_CONFIG", "1")
        .env_remove("VIRTUAL_ENV")
        .env_remove("JUPYTER_PATH");
    let prefix = check_stdio_server(command, root.path()).await;
    // The kernel ran in the environment uv made for the tool, not in any other.
    assert!(
        PathBuf::from(&prefix).starts_with(&uv_cache),
        "the kernel's sys.prefix {prefix} is uv's environment under {}",
        uv_cache.display()
    );
}
