//! The Windows build's smoke test, run by `cargo xtask windows` (not by `cargo test`: it needs
//! the Windows build and Wine). `jupyter-mcp.exe serve --stdio --no-kernels` under Wine, driven
//! by a real MCP client (rmcp over the process's stdin and stdout): it lists its tools, reads a
//! notebook, applies an edit quoting the cell's rev and saves, and the saved file must be
//! byte-identical to what the Linux build writes for the same edit; paths outside the root are
//! refused. Kernels are not tried: there is no Windows Python here.
//!
//!     windows_smoke PATH/TO/jupyter-mcp.exe    (with WINEPREFIX set)

use std::path::Path;

use anyhow::{Context as _, Result, bail, ensure};
use jupyter_mcp_tests::{Client, server_binary};
use serde_json::{Value, json};

const NOTEBOOK: &str = r##"{
 "cells": [
  {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Quarterly ünï 🐍\n", "notes"]},
  {"cell_type": "code", "execution_count": 1, "id": "load", "metadata": {}, "outputs": [{"name": "stdout", "output_type": "stream", "text": ["42\n"]}], "source": ["x = 40\n", "print(x + 2)"]}
 ],
 "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

/// `/tmp/x` as Wine names it (`Z:` is the Unix root).
fn wine_path(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// Replaces the source of cell `load`, quoting `rev`.
async fn edit_load(client: &Client, rev: &Value, code: &str) -> jupyter_mcp_tests::Call {
    let edit = json!({"editType": "edit", "cellId": "load", "expectedRev": rev, "newCode": code});
    client
        .call(
            "edit_cells",
            json!({"notebookRef": "analysis.ipynb", "edits": [edit]}),
        )
        .await
}

/// Reads the outline, edits cell `load` quoting its rev, saves, and returns the saved bytes.
async fn edit_and_save(client: &Client, folder: &Path) -> Result<Vec<u8>> {
    let outline = client.outline_cells("analysis.ipynb").await;
    ensure!(outline.len() == 2, "two cells: {outline:?}");
    let rev = outline[1]["rev"].clone();
    ensure!(rev.is_string(), "a rev: {outline:?}");
    let edited = edit_load(client, &rev, "x = 41\nprint(x + 1)  # ü").await;
    ensure!(!edited.is_error(), "edit_cells: {}", edited.text());
    let saved = client
        .call(
            "save_notebooks",
            json!({"notebookRefs": ["analysis.ipynb"]}),
        )
        .await;
    ensure!(!saved.is_error(), "save_notebooks: {}", saved.text());
    let stale = edit_load(client, &rev, "y = 0").await;
    ensure!(
        stale.is_error() && stale.error_code() == "rev_mismatch",
        "an edit quoting the old rev is refused: {}",
        stale.text()
    );
    Ok(std::fs::read(folder.join("analysis.ipynb"))?)
}

#[tokio::main]
async fn main() -> Result<()> {
    let exe = std::env::args()
        .nth(1)
        .context("usage: windows_smoke PATH/TO/jupyter-mcp.exe")?;
    let on_windows = tempfile::tempdir()?;
    let on_linux = tempfile::tempdir()?;
    for folder in [on_windows.path(), on_linux.path()] {
        std::fs::write(folder.join("analysis.ipynb"), NOTEBOOK)?;
    }

    let mut wine = tokio::process::Command::new("wine");
    wine.arg(&exe)
        .args(["serve", "--stdio", "--no-kernels", "--root"])
        .arg(wine_path(on_windows.path()));
    let windows = Client::stdio_command(wine)
        .await
        .context("starting jupyter-mcp.exe under Wine")?;
    let tools = windows.tool_names().await?;
    for wanted in ["read_notebook", "edit_cells", "save_notebooks"] {
        ensure!(
            tools.iter().any(|tool| tool == wanted),
            "tools/list lacks {wanted}: {tools:?}"
        );
    }
    let from_windows = edit_and_save(&windows, on_windows.path()).await?;
    for outside in [
        r"C:\Windows\win.ini",
        r"..\..\x.ipynb",
        r"\\server\share\x.ipynb",
    ] {
        let answer = windows
            .call("read_notebook", json!({"notebookRef": outside}))
            .await;
        if !answer.is_error() || answer.error_code() != "path_outside_root" {
            bail!(
                "{outside} was not refused as outside the root: {}",
                answer.text()
            );
        }
    }
    windows.close().await?;

    let mut linux = tokio::process::Command::new(server_binary());
    linux
        .args(["serve", "--stdio", "--no-kernels", "--root"])
        .arg(on_linux.path());
    let linux = Client::stdio_command(linux).await?;
    let from_linux = edit_and_save(&linux, on_linux.path()).await?;
    linux.close().await?;
    ensure!(
        from_windows == from_linux,
        "the Windows build saved other bytes than the Linux build:\n{}\n---\n{}",
        String::from_utf8_lossy(&from_windows),
        String::from_utf8_lossy(&from_linux)
    );
    let text: Value = serde_json::from_slice(&from_windows)?;
    ensure!(
        text["cells"][1]["source"] == json!(["x = 41\n", "print(x + 1)  # ü"]),
        "the edit is in the file: {text}"
    );
    eprintln!(
        "windows smoke: {} tools listed under Wine; read, edit with rev, save: {} bytes, identical to the Linux build's; 3 paths outside the root refused",
        tools.len(),
        from_windows.len()
    );
    Ok(())
}
