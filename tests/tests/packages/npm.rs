//! The npm packages: the main tarball and the linux-x64 one installed by `npm install` into an
//! empty folder, offline with an empty cache (nothing can come from the registry, so what runs is
//! what `cargo xtask dist` packed), then started as an MCP client starts them,
//! `npx jupyter-mcp-rs serve --stdio`, with no Rust toolchain on `PATH`.

use std::path::{Path, PathBuf};

use crate::{check_stdio_server, dist_dir, path_without_rust, run};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A tarball of `dist/npm/`, by its package name.
fn tarball(package: &str) -> PathBuf {
    let path = dist_dir()
        .join("npm")
        .join(format!("{package}-{VERSION}.tgz"));
    assert!(
        path.is_file(),
        "no {} (cargo xtask dist packs it)",
        path.display()
    );
    path
}

/// The folder of the `node` (and `npm`, `npx`) on the caller's `PATH`.
fn node_folder() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .find(|folder| folder.join("node").is_file() && folder.join("npx").is_file())
        .expect("node and npx on PATH")
}

/// `PATH` as a user without Rust has it: `first`, node's folder, the system's folders.
fn user_path(first: &[&Path]) -> std::ffi::OsString {
    let node = node_folder();
    let mut folders: Vec<&Path> = first.to_vec();
    folders.push(&node);
    path_without_rust(&folders)
}

/// An app folder with `tarballs` installed, and its npm cache, in one scratch folder.
struct Installed {
    _scratch: tempfile::TempDir,
    app: PathBuf,
    cache: PathBuf,
}

/// `npm install` of `tarballs` into a new empty app folder, offline, with a new empty cache.
fn npm_install(tarballs: &[PathBuf], extra: &[&str]) -> Installed {
    let scratch = tempfile::tempdir().unwrap();
    let app = scratch.path().join("app");
    let cache = scratch.path().join("npm-cache");
    std::fs::create_dir_all(&app).unwrap();
    run(std::process::Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--offline", "--cache"])
        .arg(&cache)
        .args(extra)
        .args(tarballs)
        .current_dir(&app)
        .env("PATH", user_path(&[]))
        .env("npm_config_update_notifier", "false"));
    Installed {
        _scratch: scratch,
        app,
        cache,
    }
}

#[test]
fn npm_tarballs_run_through_npx() {
    let Installed { app, cache, .. } = &npm_install(
        &[
            tarball("jupyter-mcp-rs"),
            tarball("jupyter-mcp-rs-linux-x64"),
        ],
        &[],
    );
    // Both commands, and the binary installed executable from the platform package.
    for command in ["jupyter-mcp", "jupyter-mcp-rs"] {
        assert!(
            app.join("node_modules/.bin").join(command).exists(),
            "npm linked the command {command}"
        );
    }
    let binary = app.join("node_modules/jupyter-mcp-rs-linux-x64/bin/jupyter-mcp");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&binary).unwrap().permissions());
    assert_eq!(mode & 0o111, 0o111, "{} is executable", binary.display());

    // The kernel is the test Python's: its environment's bin folder first on PATH, as a user
    // with an activated environment has it.
    let python = jupyter_mcp_tests::python();
    let venv_bin = python.parent().expect("<venv>/bin/python").to_path_buf();
    assert!(
        !venv_bin.join("jupyter-mcp").exists(),
        "{} holds a jupyter-mcp of its own",
        venv_bin.display()
    );
    let root = tempfile::tempdir().unwrap();
    let server_cache = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new("npx");
    command
        .args([
            "--yes",
            "--offline",
            "jupyter-mcp-rs",
            "serve",
            "--stdio",
            "--root",
        ])
        .arg(root.path())
        .arg("--cache-dir")
        .arg(server_cache.path())
        .current_dir(app)
        .env("PATH", user_path(&[&venv_bin]))
        .env("npm_config_cache", cache)
        .env("npm_config_update_notifier", "false")
        .env_remove("VIRTUAL_ENV")
        .env_remove("JUPYTER_PATH");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let prefix = runtime.block_on(check_stdio_server(command, root.path()));
    let venv = venv_bin.parent().unwrap();
    assert_eq!(
        PathBuf::from(&prefix).canonicalize().unwrap(),
        venv.canonicalize().unwrap(),
        "the cell ran on the ipykernel of the python3 on PATH"
    );
}

/// Without its platform package (optional dependencies left out), the launcher says what is
/// missing and what to do, and fails.
#[test]
fn the_launcher_explains_a_missing_platform_package() {
    let Installed { app, cache, .. } =
        &npm_install(&[tarball("jupyter-mcp-rs")], &["--omit=optional"]);
    assert!(!app.join("node_modules/jupyter-mcp-rs-linux-x64").exists());
    let output = std::process::Command::new("npx")
        .args(["--offline", "jupyter-mcp-rs", "--version"])
        .current_dir(app)
        .env("PATH", user_path(&[]))
        .env("npm_config_cache", cache)
        .env("npm_config_update_notifier", "false")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(output.stdout.is_empty());
    for wanted in [
        "jupyter-mcp-rs-linux-x64",
        "is not installed",
        "npm install jupyter-mcp-rs --include=optional",
    ] {
        assert!(stderr.contains(wanted), "{wanted:?} in {stderr}");
    }
}
