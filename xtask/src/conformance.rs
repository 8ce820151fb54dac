//! `cargo xtask conformance`: the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, pinned in `conformance/package-lock.json`) against the
//! standalone server, on Node 24 from PyPI (the same one `e2e-vscode` uses).
//!
//! The server runs on loopback with a token that the suite sends as the `token` query parameter
//! of the URL (the TypeScript SDK client keeps the query on every request), so auth stays on.
//! Every server scenario of the suite runs (`--suite all`). A scenario fails when one of its
//! checks is a FAILURE or a WARNING (the suite's own rule). The run fails on a failing scenario
//! that `conformance/expected-failures.yml` does not list, and on a listed one that passes, so
//! that the list stays honest; each entry needs a reason, and entries may only name scenarios
//! that call the suite's own fixture tools, resources or prompts.
//!
//! While the server is up, the MCP Inspector's `--strict` schema check runs against it too
//! ([`inspector_strict`]): any portability warning on a published schema fails the run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::vscode::{
    Service, free_port, node24, port_open, run_token, server_binary, tail, wait_until,
};
use crate::{root, run, setup};

fn suite_dir() -> PathBuf {
    root().join("conformance")
}

/// `npm ci` in `conformance/` when `node_modules` is older than the lock file.
fn install_suite(wheel: &Path) -> Result<()> {
    let lock = suite_dir().join("package-lock.json");
    let marker = suite_dir().join("node_modules/.package-lock.json");
    let fresh = match (std::fs::metadata(&lock), std::fs::metadata(&marker)) {
        (Ok(lock), Ok(marker)) => marker.modified()? >= lock.modified()?,
        _ => false,
    };
    if fresh {
        return Ok(());
    }
    let node = wheel.join("bin/node");
    run(Command::new(&node)
        .arg(wheel.join("lib/node_modules/npm/bin/npm-cli.js"))
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(suite_dir())
        .env("PATH", path_with(&wheel.join("bin"))?))
}

fn path_with(folder: &Path) -> Result<std::ffi::OsString> {
    Ok(std::env::join_paths(
        std::iter::once(folder.to_path_buf()).chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        )),
    )?)
}

/// The expected failures: scenario name to reason. The file is the suite's own baseline format
/// (`server:` then `  - name # reason`), so it also works with `--expected-failures` by hand.
fn expected_failures(text: &str) -> Result<BTreeMap<String, String>> {
    let mut entries = BTreeMap::new();
    for line in text.lines() {
        let Some(entry) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let (name, reason) = entry.split_once('#').unwrap_or((entry, ""));
        let (name, reason) = (name.trim(), reason.trim());
        if reason.is_empty() {
            bail!("conformance/expected-failures.yml: `{name}` has no `# reason`");
        }
        if entries.insert(name.to_owned(), reason.to_owned()).is_some() {
            bail!("conformance/expected-failures.yml: `{name}` is listed twice");
        }
    }
    Ok(entries)
}

/// Scenario name to "passed", from the suite's `server-<scenario>-<timestamp>/checks.json`
/// folders.
fn results(folder: &Path) -> Result<BTreeMap<String, bool>> {
    let mut outcomes = BTreeMap::new();
    for entry in std::fs::read_dir(folder)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("server-") else {
            continue;
        };
        // The timestamp is `YYYY-MM-DDTHH-MM-SS-mmmZ`: six dash-separated fields.
        let scenario = rest
            .rsplitn(7, '-')
            .nth(6)
            .context("a result folder name")?;
        let checks: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(entry.path().join("checks.json"))
                .with_context(|| format!("{name}/checks.json"))?,
        )?;
        let passed = checks
            .as_array()
            .context("checks.json is an array")?
            .iter()
            .all(|check| !matches!(check["status"].as_str(), Some("FAILURE" | "WARNING")));
        outcomes.insert(scenario.to_owned(), passed);
    }
    Ok(outcomes)
}

/// `cargo xtask conformance`.
pub fn conformance() -> Result<()> {
    setup()?;
    let wheel = node24()?;
    install_suite(&wheel)?;
    // With `--workspace` the binary has the features of the workspace build (`ci` built it
    // already, so this is a no-op there).
    run(crate::cargo().args(["build", "--workspace", "--bin", "jupyter-mcp"]))?;

    let scratch = root().join(".work/conformance");
    let _ = std::fs::remove_dir_all(&scratch);
    let notebooks = scratch.join("notebooks");
    let output = scratch.join("results");
    std::fs::create_dir_all(&notebooks)?;
    std::fs::create_dir_all(&output)?;
    std::fs::create_dir_all(scratch.join("runtime"))?;
    for entry in std::fs::read_dir(root().join("examples/notebooks"))?.flatten() {
        if entry.path().extension().is_some_and(|ext| ext == "ipynb") {
            std::fs::copy(entry.path(), notebooks.join(entry.file_name()))?;
        }
    }
    let port = free_port()?;
    let token = run_token("conformance");
    let log = scratch.join("server.log");
    let mut command = Command::new(server_binary());
    command
        .args(["serve", "--port", &port.to_string(), "--root"])
        .arg(&notebooks)
        .arg("--cache-dir")
        .arg(scratch.join("cache"))
        .arg("--runtime-dir")
        .arg(scratch.join("runtime"))
        .env("JUPYTER_MCP_TOKEN", &token)
        .env("PATH", path_with(&root().join(".venv/bin"))?);
    let _server = Service::start("jupyter-mcp", &mut command, &log)?;
    wait_until("the server's port", Duration::from_secs(30), || {
        port_open(port)
    })
    .with_context(|| tail(&log))?;

    let url = format!("http://127.0.0.1:{port}/mcp?token={token}");
    let listed = std::fs::read_to_string(suite_dir().join("expected-failures.yml"))
        .context("conformance/expected-failures.yml")?;
    let expected = expected_failures(&listed)?;
    let suite = Command::new(wheel.join("bin/node"))
        .arg(suite_dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--suite", "all", "--url", &url, "--output-dir"])
        .arg(&output)
        .arg("--expected-failures")
        .arg(suite_dir().join("expected-failures.yml"))
        .current_dir(&scratch)
        .status()
        .context("could not start the conformance suite")?;

    let portability = inspector_strict(&wheel, &url, &scratch)?;

    let outcomes = results(&output)?;
    if outcomes.is_empty() {
        bail!("conformance: the suite wrote no results ({suite})");
    }
    let mut problems = Vec::new();
    for name in expected.keys() {
        match outcomes.get(name) {
            None => problems.push(format!(
                "`{name}` is listed but the suite has no such scenario"
            )),
            Some(true) => problems.push(format!(
                "`{name}` passes but is listed as an expected failure: remove it from the list"
            )),
            Some(false) => {}
        }
    }
    for (name, passed) in &outcomes {
        if !passed && !expected.contains_key(name) {
            problems.push(format!("`{name}` fails (see {})", output.display()));
        }
    }
    let passed = outcomes.values().filter(|passed| **passed).count();
    eprintln!(
        "conformance: {} server scenarios: {passed} passed, {} expected failures (fixture \
         tools, resources or prompts of the suite), {} unexpected",
        outcomes.len(),
        outcomes.len() - passed,
        problems.len()
    );
    if let Some(findings) = portability {
        problems.push(format!(
            "the MCP Inspector's --strict check of tools/list found portability problems:\n{findings}"
        ));
    } else {
        eprintln!("conformance: the MCP Inspector's --strict check found no schema warning");
    }
    if !problems.is_empty() || !suite.success() {
        bail!(
            "conformance failed (suite {suite}):\n  {}\nserver log:\n{}",
            problems.join("\n  "),
            tail(&log)
        );
    }
    Ok(())
}

/// Runs `inspector --cli URL --transport http --method tools/list --strict` (pinned in
/// `conformance/package.json`): its schema linter flags `type` arrays, schemas that accept
/// anything, bare boolean schemas and remote `$ref`s in every input and output schema. Errors
/// exit non-zero; warnings only print, so any `Warning:` line counts too. `None` when clean.
fn inspector_strict(wheel: &Path, url: &str, scratch: &Path) -> Result<Option<String>> {
    let launcher = suite_dir()
        .join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js");
    let output = Command::new(wheel.join("bin/node"))
        .arg(launcher)
        .args([
            "--cli",
            url,
            "--transport",
            "http",
            "--method",
            "tools/list",
            "--strict",
        ])
        .current_dir(scratch)
        .stdin(std::process::Stdio::null())
        .output()
        .context("could not start the MCP Inspector")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let listed = serde_json::from_str::<serde_json::Value>(&stdout)
        .ok()
        .and_then(|value| value["tools"].as_array().map(Vec::len));
    match listed {
        Some(count) if output.status.success() && !stderr.contains("Warning:") => {
            eprintln!("conformance: the inspector listed {count} tools");
            Ok(None)
        }
        Some(_) => Ok(Some(stderr.into_owned())),
        None => bail!(
            "the MCP Inspector did not list the tools ({}):\n{stderr}",
            output.status
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_expected_failure_needs_a_reason() {
        let parsed =
            expected_failures("server:\n  - tools-call-image # calls test_image_content\n")
                .unwrap();
        assert_eq!(parsed["tools-call-image"], "calls test_image_content");
        assert!(expected_failures("server:\n  - tools-call-image\n").is_err());
        assert!(expected_failures("server:\n  - a # x\n  - a # y\n").is_err());
    }

    #[test]
    fn the_committed_list_parses() {
        let text = std::fs::read_to_string(suite_dir().join("expected-failures.yml")).unwrap();
        assert!(!expected_failures(&text).unwrap().is_empty());
    }
}
