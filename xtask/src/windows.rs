//! `cargo xtask windows [--check]`: the Windows build (`x86_64-pc-windows-gnu`), with no
//! Windows machine. rustup offers no Windows standard library here, so the compiler is Debian's
//! `rustc-web` (with its standard library's source, built for Windows by `-Zbuild-std`),
//! unpacked into `.work/windows/root` (it conflicts with rustup as an installed package), and
//! the linker is MinGW-w64's. `--check` type-checks `host-standalone` and `host-napi` (what CI
//! runs); without it, `jupyter-mcp.exe` and the extension's `.node` are built and the server is
//! smoke-tested under Wine by a real MCP client (`tests/src/bin/windows_smoke.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};

use crate::{root, run};

pub(crate) const TARGET: &str = "x86_64-pc-windows-gnu";
/// MinGW-w64's C compiler with POSIX threads (Rust's `std` needs them).
pub(crate) const MINGW_GCC: &str = "x86_64-w64-mingw32-gcc-posix";

fn work() -> PathBuf {
    root().join(".work/windows")
}

fn toolchain_root() -> PathBuf {
    work().join("root")
}

/// Where the Windows build's artefacts go: apart from the Linux build, whose compiler differs.
pub(crate) fn target_dir() -> PathBuf {
    work().join("target")
}

pub(crate) fn windows(arguments: &[String]) -> Result<()> {
    let check = crate::optional_flag(arguments, "--check", "cargo xtask windows [--check]")?;
    system_packages(!check)?;
    toolchain()?;
    let libnode = libnode_stub()?;
    let subcommand = if check { "check" } else { "build" };
    run(cross(&libnode).args([
        subcommand,
        // A build to test, made quickly: no debug info, dependencies unoptimised.
        "--config",
        "profile.dev.debug=false",
        "--config",
        "profile.dev.package.\"*\".opt-level=0",
        "-Zbuild-std=std,panic_abort",
        "--target",
        TARGET,
        "-p",
        "host-standalone",
        "-p",
        "host-napi",
    ]))?;
    if check {
        eprintln!("windows: host-standalone and host-napi check for {TARGET}");
        return Ok(());
    }
    let built = target_dir().join(TARGET).join("debug");
    let exe = built.join("jupyter-mcp.exe");
    let node = built.join("host_napi.dll");
    for (file, what) in [(&exe, "jupyter-mcp.exe"), (&node, "the native module")] {
        anyhow::ensure!(
            pe_file(file)?,
            "{what} ({}) is not a Windows PE file",
            file.display()
        );
    }
    smoke(&exe)?;
    let vsix = crate::vscode::package_for("win32-x64", &node)?;
    eprintln!(
        "windows: built {} and {}, the server passed its smoke test under Wine, and {} holds the Windows module",
        exe.display(),
        node.display(),
        vsix.display()
    );
    Ok(())
}

/// The native module of the Windows build, once `cargo xtask windows` has built it.
pub(crate) fn native_module() -> PathBuf {
    target_dir()
        .join(TARGET)
        .join("debug")
        .join("host_napi.dll")
}

/// Whether `file` starts as a PE file does (`MZ`).
pub(crate) fn pe_file(file: &Path) -> Result<bool> {
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    Ok(bytes.starts_with(b"MZ"))
}

/// MinGW-w64, the libraries Debian's `cargo` links to, and (for the smoke test) Wine.
fn system_packages(with_wine: bool) -> Result<()> {
    let mut missing = Vec::new();
    if crate::vscode::which(MINGW_GCC).is_none() {
        missing.push("gcc-mingw-w64-x86-64-posix");
    }
    for (library, package) in [
        ("libgit2.so.1.5", "libgit2-1.5"),
        ("libssh2.so.1", "libssh2-1"),
        ("libcurl.so.4", "libcurl4"),
    ] {
        if !Path::new("/usr/lib/x86_64-linux-gnu")
            .join(library)
            .exists()
        {
            missing.push(package);
        }
    }
    if with_wine && crate::vscode::which("wine").is_none() {
        missing.push("wine");
    }
    if missing.is_empty() {
        return Ok(());
    }
    crate::vscode::apt_install(&missing)
}

/// Debian's `rustc-web`, `cargo-web` and the standard library's source, unpacked (not
/// installed) into `.work/windows/root`, once.
fn toolchain() -> Result<()> {
    let done = toolchain_root().join(".unpacked");
    if done.exists() {
        return Ok(());
    }
    let debs = work().join("debs");
    std::fs::create_dir_all(&debs)?;
    let mut packages = vec![
        "rustc-web".to_owned(),
        "cargo-web".to_owned(),
        "rust-web-src".to_owned(),
        "libstd-rust-web-dev".to_owned(),
    ];
    // The versioned runtime libraries they need (`libstd-rust-web-1.96`, `libllvm22`), as
    // the archive names them today.
    let mut index = 0;
    while index < packages.len() {
        let output = Command::new("apt-cache")
            .args(["depends", "--no-recommends", "--no-suggests"])
            .arg(&packages[index])
            .output()
            .context("running apt-cache")?;
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let Some(name) = line.trim().strip_prefix("Depends: ") else {
                continue;
            };
            let wanted = name.starts_with("libstd-rust-web") || name.starts_with("libllvm");
            if wanted && !packages.iter().any(|known| known == name) {
                packages.push(name.to_owned());
            }
        }
        index += 1;
    }
    let download = || {
        run(Command::new("apt-get")
            .current_dir(&debs)
            .arg("download")
            .args(&packages))
    };
    if download().is_err() {
        // A machine whose package lists were never fetched knows no versions to download.
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        download()?;
    }
    for entry in std::fs::read_dir(&debs)? {
        let path = entry?.path();
        if path.extension().is_some_and(|extension| extension == "deb") {
            run(Command::new("dpkg-deb")
                .arg("-x")
                .arg(&path)
                .arg(toolchain_root()))?;
        }
    }
    std::fs::write(&done, packages.join("\n"))?;
    Ok(())
}

/// A `libnode.dll` with nothing in it. napi's build script for `windows-gnu` insists on finding
/// one to link; with napi's `dyn-symbols` the module takes Node's functions from the running
/// process instead, so nothing is imported from it (the module's import table shows none).
fn libnode_stub() -> Result<PathBuf> {
    let folder = work().join("libnode");
    let dll = folder.join("libnode.dll");
    if !dll.exists() {
        std::fs::create_dir_all(&folder)?;
        let source = folder.join("stub.c");
        std::fs::write(&source, "void jupyter_mcp_libnode_stub(void) {}\n")?;
        run(Command::new(MINGW_GCC)
            .arg("-shared")
            .arg("-o")
            .arg(&dll)
            .arg(&source))?;
    }
    Ok(folder)
}

/// Debian's `cargo` for the Windows target.
fn cross(libnode: &Path) -> Command {
    let mut command = Command::new(toolchain_root().join("usr/bin/cargo"));
    use_debian_toolchain(&mut command);
    command
        .current_dir(root())
        .env("CARGO_TARGET_DIR", target_dir())
        .env("CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER", MINGW_GCC)
        .env("LIBNODE_PATH", libnode);
    command
}

/// Debian's `rustc-web` and `cargo-web` (unpacked by [`debian_toolchain`]) for `command`, with
/// `-Zbuild-std` allowed on their stable compiler: on `PATH` first and named by `CARGO` and
/// `RUSTC`, so that a tool that runs cargo itself (maturin) runs theirs, not rustup's.
pub(crate) fn use_debian_toolchain(command: &mut Command) {
    let bin = toolchain_root().join("usr/bin");
    let path = std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH entries without separators");
    command
        .env("PATH", path)
        .env("CARGO", bin.join("cargo"))
        .env("RUSTC", bin.join("rustc"))
        .env(
            "LD_LIBRARY_PATH",
            toolchain_root().join("usr/lib/x86_64-linux-gnu"),
        )
        // `-Zbuild-std` on a stable compiler.
        .env("RUSTC_BOOTSTRAP", "1")
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER");
}

/// Debian's toolchain and what its cargo links against, installed or unpacked once; the
/// directory holding its `cargo` and `rustc`.
pub(crate) fn debian_toolchain() -> Result<PathBuf> {
    system_packages(false)?;
    toolchain()?;
    Ok(toolchain_root().join("usr/bin"))
}

/// Wine 8.0 lacks `bcryptprimitives.dll`, whose `ProcessPrng` Rust's `std` has used since 1.78
/// for random numbers: a stand-in for the smoke test only, over `RtlGenRandom`.
const PROCESS_PRNG: &str = r#"#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
    if (!SystemFunction036(data, chunk)) return FALSE;
    data += chunk;
    length -= chunk;
  }
  return TRUE;
}
"#;

/// The server under Wine, driven by a real MCP client (`windows_smoke`), against the Linux
/// build's output for the same edit.
pub(crate) fn smoke(exe: &Path) -> Result<()> {
    system_packages(true)?;
    let folder = work().join("smoke");
    std::fs::create_dir_all(&folder)?;
    let source = folder.join("process_prng.c");
    std::fs::write(&source, PROCESS_PRNG)?;
    run(Command::new(MINGW_GCC)
        .arg("-shared")
        .arg("-o")
        .arg(folder.join("bcryptprimitives.dll"))
        .arg(&source)
        .arg("-ladvapi32"))?;
    let copied = folder.join("jupyter-mcp.exe");
    std::fs::copy(exe, &copied)?;
    // The workspace build CI has just made (nothing to do then): building single packages
    // would unify other features and compile much of the workspace again.
    run(crate::cargo().args(["build", "--workspace", "--all-targets"]))?;
    let debug = crate::target_dir().join("debug");
    run(Command::new(debug.join("windows_smoke"))
        .arg(&copied)
        .env("JUPYTER_MCP_SERVER_BINARY", debug.join("jupyter-mcp"))
        .env("WINEPREFIX", folder.join("wine-prefix"))
        .env("WINEDEBUG", "-all"))
}
