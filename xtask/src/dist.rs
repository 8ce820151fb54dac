//! `cargo xtask dist [--ci]`: everything users install, in `dist/`.
//!
//! - `dist/wheels/`: the Python wheel (`jupyter-mcp-rs`, `packaging/python/`): maturin with
//!   `bindings = "bin"`, built by the `dist` profile with zig as the linker so that it runs on
//!   glibc 2.17 (`manylinux2014`), checked by `auditwheel`. It carries the binary, the
//!   `jupyter-mcp-rs` command and the Jupyter Server extension.
//! - `dist/bin/<platform>/`: the binary taken out of the wheel, for the other packages.
//! - `dist/npm/`, `dist/mcpb/`, `dist/server.json`: the npm packages, the Claude Desktop bundle
//!   and the MCP Registry's entry (see `packages.rs`).
//! - the VS Code package (`vscode::dist`), unless `--ci`: CI packages the extension in its
//!   e2e-vscode and Windows steps already.
//!
//! The packaging tools live in `.venv-dist` (`python/dist-requirements.txt`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::{install_venv, root, run};

/// The packaging tools' environment.
pub(crate) fn tools_bin() -> PathBuf {
    root().join(".venv-dist/bin")
}

pub(crate) fn dist_dir() -> PathBuf {
    root().join("dist")
}

pub(crate) fn dist(arguments: &[String]) -> Result<()> {
    let ci = crate::optional_flag(arguments, "--ci", "cargo xtask dist [--ci]")?;
    finish(start_wheel_build(false)?, ci)
}

/// Where the `dist` profile builds: apart from `target/`'s own builds, so that a build of the
/// wheel in the background never waits for (or holds) the lock of the workspace's builds.
pub(crate) fn build_dir() -> PathBuf {
    crate::target_dir().join("dist-build")
}

/// A build of the wheel under way (`maturin build`).
pub(crate) struct WheelBuild {
    child: std::process::Child,
    started: Instant,
    /// Its output, when it runs in the background.
    log: Option<PathBuf>,
}

/// Starts `maturin build` of `packaging/python` for this machine's architecture (x86_64 Linux)
/// into `dist/wheels`: the `dist` profile, zig linking against glibc 2.17. `background` (CI,
/// while the tests run): at the lowest priority, its output in a log, so that it takes only the
/// processor time the tests leave.
pub(crate) fn start_wheel_build(background: bool) -> Result<WheelBuild> {
    install_venv(".venv-dist", "python/dist-requirements.txt")?;
    let out = dist_dir();
    // A stale wheel of another version would be taken for this one.
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("wheels"))?;
    let bin = tools_bin();
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))?;
    let mut command = if background {
        let mut nice = Command::new("nice");
        nice.args(["-n", "19"]).arg(bin.join("maturin"));
        nice
    } else {
        Command::new(bin.join("maturin"))
    };
    command
        .args([
            "build",
            "--zig",
            "--compatibility",
            "manylinux2014",
            "--out",
        ])
        .arg(out.join("wheels"))
        .current_dir(root().join("packaging/python"))
        .env("CARGO_TARGET_DIR", build_dir())
        // maturin finds zig (`python -m ziglang`) through the environment's Python on PATH.
        .env("PATH", path);
    let log = if background {
        std::fs::create_dir_all(build_dir())?;
        let log = build_dir().join("maturin.log");
        let file = std::fs::File::create(&log)?;
        command.stdout(file.try_clone()?).stderr(file);
        eprintln!(
            "dist: building the wheel in the background (log: {})",
            log.display()
        );
        Some(log)
    } else {
        None
    };
    let child = command.spawn().context("starting maturin")?;
    Ok(WheelBuild {
        child,
        started: Instant::now(),
        log,
    })
}

/// Waits for the wheel, checks it, and packages the rest around its binary.
pub(crate) fn finish(mut build: WheelBuild, ci: bool) -> Result<()> {
    let status = build.child.wait()?;
    let wheel_seconds = build.started.elapsed().as_secs_f64();
    if !status.success() {
        let log = build
            .log
            .as_ref()
            .and_then(|log| std::fs::read_to_string(log).ok())
            .unwrap_or_default();
        bail!("building the wheel (maturin with zig) failed ({status}):\n{log}");
    }
    // xtask takes the workspace's version, as every package of it does.
    let version = env!("CARGO_PKG_VERSION");
    let out = dist_dir();
    let wheels: Vec<PathBuf> = std::fs::read_dir(out.join("wheels"))?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()?;
    let wheel = match wheels.as_slice() {
        [wheel] => wheel.clone(),
        _ => bail!(
            "expected one wheel in {}, found {wheels:?}",
            out.join("wheels").display()
        ),
    };
    check_wheel(&wheel, "manylinux_2_17_x86_64")?;
    let binary = binary_from_wheel(&wheel, &out.join("bin/linux-x64"))?;
    let mut binaries = vec![(crate::packages::Platform::LinuxX64, binary.clone())];
    let mut wheels = vec![wheel.clone()];
    if !ci {
        // Linux on arm64: cross-built, then run under QEMU's user-mode emulation.
        let arm = cross_wheel(AARCH64)?;
        check_wheel(&arm, "manylinux_2_17_aarch64")?;
        let arm_binary = binary_from_wheel(&arm, &out.join("bin/linux-arm64"))?;
        smoke_under_qemu(&arm_binary)?;
        binaries.push((crate::packages::Platform::LinuxArm64, arm_binary));
        wheels.push(arm);
        // Windows x64: cross-built with MinGW-w64, then smoke-tested under Wine.
        let windows = cross_wheel(crate::windows::TARGET)?;
        let windows_binary = binary_from_wheel(&windows, &out.join("bin/win32-x64"))?;
        anyhow::ensure!(
            crate::windows::pe_file(&windows_binary)?,
            "{} is not a Windows PE file",
            windows_binary.display()
        );
        crate::windows::smoke(&windows_binary)?;
        binaries.push((crate::packages::Platform::Win32X64, windows_binary));
        wheels.push(windows);
    }

    let tarballs = crate::packages::npm(version, &binaries, &out.join("npm"))?;
    let bundle = crate::packages::mcpb(version, &binaries, &out.join("mcpb"))?;
    let registry = crate::packages::registry(version, &out)?;
    let vsix = if ci {
        None
    } else {
        let vsix = crate::vscode::dist()?;
        crate::packages::check_vsix(&vsix)?;
        Some(vsix)
    };

    let size = |path: &Path| {
        std::fs::metadata(path).map_or(0.0, |meta| meta.len() as f64 / (1024.0 * 1024.0))
    };
    eprintln!("dist: everything is in {}", out.display());
    for extra in &wheels[1..] {
        eprintln!("dist: wheel {:.1} MiB: {}", size(extra), extra.display());
    }
    eprintln!(
        "dist: binary {:.1} MiB (linux-x64), wheel {:.1} MiB ({:.0} s to build{}): {}",
        size(&binary),
        size(&wheel),
        wheel_seconds,
        if build.log.is_some() {
            ", in the background"
        } else {
            ""
        },
        wheel.display()
    );
    for tarball in &tarballs {
        eprintln!("dist: npm {:.1} MiB: {}", size(tarball), tarball.display());
    }
    eprintln!("dist: mcpb {:.1} MiB: {}", size(&bundle), bundle.display());
    eprintln!("dist: MCP Registry entry: {}", registry.display());
    if let Some(vsix) = vsix {
        eprintln!("dist: VS Code {:.1} MiB: {}", size(&vsix), vsix.display());
    }
    Ok(())
}

/// `auditwheel show`: the wheel must carry the platform tag `tag` (`manylinux_2_17_*`, glibc
/// 2.17) and link nothing outside what that policy allows.
fn check_wheel(wheel: &Path, tag: &str) -> Result<()> {
    let output = Command::new(tools_bin().join("auditwheel"))
        .arg("show")
        .arg(wheel)
        .output()
        .context("running auditwheel")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !text.contains(tag) {
        bail!(
            "auditwheel does not find {} {tag}-compatible:\n{text}{}",
            wheel.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    eprintln!(
        "dist: auditwheel: {}",
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    Ok(())
}

const AARCH64: &str = "aarch64-unknown-linux-gnu";

/// The wheel for another Linux architecture (`target`): rustup offers no other standard library
/// here, so the compiler is Debian's `rustc-web` (as for Windows, `windows.rs`), which builds the
/// standard library for the target with `-Zbuild-std`, and zig links against glibc 2.17.
fn cross_wheel(target: &str) -> Result<PathBuf> {
    let debian = crate::windows::debian_toolchain()?;
    let out = dist_dir().join("wheels");
    let started = Instant::now();
    let mut command = Command::new(tools_bin().join("maturin"));
    crate::windows::use_debian_toolchain(&mut command);
    let path = std::env::join_paths([tools_bin(), debian].into_iter().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    if target == crate::windows::TARGET {
        // MinGW-w64 links Windows programs (zig's manylinux rules are Linux's).
        command.args(["build", "--target", target]).env(
            "CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER",
            crate::windows::MINGW_GCC,
        );
    } else {
        command.args([
            "build",
            "--zig",
            "--compatibility",
            "manylinux2014",
            "--target",
            target,
        ]);
    }
    run(command
        .args(["-Z", "build-std=std,panic_abort", "--out"])
        .arg(&out)
        .current_dir(root().join("packaging/python"))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", build_dir().join("cross")))
    .with_context(|| format!("cross-building the {target} wheel"))?;
    let tag = match target.split('-').next().unwrap_or(target) {
        "x86_64" if target.contains("windows") => "win_amd64",
        arch => arch,
    };
    let wheel = std::fs::read_dir(&out)?
        .filter_map(|entry| Some(entry.ok()?.path()))
        .find(|path| path.to_string_lossy().ends_with(&format!("{tag}.whl")))
        .with_context(|| format!("no {tag} wheel in {}", out.display()))?;
    eprintln!(
        "dist: the {target} wheel built in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(wheel)
}

/// Runs the arm64 binary under QEMU's user-mode emulation with Debian's arm64 C library, as an
/// MCP client would: `initialize`, then `tools/list`, over stdio. It must list the tools.
fn smoke_under_qemu(binary: &Path) -> Result<()> {
    if crate::vscode::which("qemu-aarch64").is_none()
        || !Path::new("/usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1").exists()
    {
        crate::vscode::apt_install(&["qemu-user", "libc6-arm64-cross"])?;
    }
    use std::io::{BufRead as _, Write as _};
    let root = tempfile_dir("qemu-smoke")?;
    let mut child = Command::new("qemu-aarch64")
        .args(["-L", "/usr/aarch64-linux-gnu"])
        .arg(binary)
        .args(["serve", "--stdio", "--no-kernels", "--root"])
        .arg(&root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("running the arm64 binary under qemu-aarch64")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut stdout = std::io::BufReader::new(child.stdout.take().context("stdout")?);
    let mut ask = |line: &str, id: Option<u64>| -> Result<String> {
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        let Some(id) = id else {
            return Ok(String::new());
        };
        loop {
            let mut answer = String::new();
            if stdout.read_line(&mut answer)? == 0 {
                bail!("the arm64 server closed its output before answering request {id}");
            }
            let value: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
            if value["id"] == id {
                return Ok(answer);
            }
        }
    };
    ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"qemu-smoke","version":"0"}}}"#,
        Some(1),
    )?;
    ask(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        None,
    )?;
    let tools = ask(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#, Some(2))?;
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&root);
    let value: serde_json::Value = serde_json::from_str(&tools)?;
    let count = value["result"]["tools"].as_array().map_or(0, Vec::len);
    if count == 0 || !tools.contains("read_notebook") {
        bail!("the arm64 server under QEMU listed no tools: {tools}");
    }
    eprintln!("dist: the arm64 binary under qemu-aarch64 answered tools/list with {count} tools");
    Ok(())
}

/// A new empty folder under the build folder.
fn tempfile_dir(name: &str) -> Result<PathBuf> {
    let folder = build_dir().join(name);
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder)?;
    Ok(folder)
}

/// Takes the binary out of the wheel (a zip: `<name>.data/scripts/jupyter-mcp`, `.exe` on
/// Windows) into `folder`.
fn binary_from_wheel(wheel: &Path, folder: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(folder)?;
    let windows = wheel.to_string_lossy().ends_with("win_amd64.whl");
    let name = if windows {
        "jupyter-mcp.exe"
    } else {
        "jupyter-mcp"
    };
    let python = crate::venv_python_of(".venv-dist");
    let script = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    [name] = [n for n in wheel.namelist() if n.endswith(".data/scripts/" + sys.argv[3])]
    with open(sys.argv[2], "wb") as out:
        out.write(wheel.read(name))
"#;
    let binary = folder.join(name);
    run(Command::new(python)
        .args(["-c", script])
        .arg(wheel)
        .arg(&binary)
        .arg(name))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(binary)
}

/// Runs the package tests (`tests/tests/packages`) on what `dist` built.
pub(crate) fn test() -> Result<()> {
    run(crate::cargo()
        .args(["test", "-p", "jupyter-mcp-tests", "--test", "packages"])
        .env("JUPYTER_MCP_DIST", dist_dir())
        .env("JUPYTER_MCP_TEST_PYTHON", crate::venv_python()))
}

/// Deletes the `dist` profile's build (`--lean` CI: the disk may be nearly full); `dist/` stays.
pub(crate) fn remove_build() {
    let _ = std::fs::remove_dir_all(build_dir());
}
