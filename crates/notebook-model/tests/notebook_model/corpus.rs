//! Our writer against Python's `nbformat.writes`, byte for byte, on real notebooks.
//!
//! The corpus is the test notebooks shipped in the nbformat, nbclient, nbconvert and
//! jupyter_client source distributions; `cargo xtask corpus` (run by `cargo xtask ci`) downloads
//! and unpacks them into `.work/corpus`. `JUPYTER_MCP_CORPUS` points elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use notebook_model::Notebook;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let path = std::env::var_os("JUPYTER_MCP_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    assert!(
        path.exists(),
        "no Python for the nbformat reference at {}: run `cargo xtask ci` (or `cargo xtask setup`), \
         or set JUPYTER_MCP_TEST_PYTHON",
        path.display()
    );
    path
}

fn corpus_files() -> Vec<PathBuf> {
    let dir = std::env::var_os("JUPYTER_MCP_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".work/corpus"));
    let mut files = Vec::new();
    let mut pending = vec![dir.clone()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path
                .extension()
                .is_some_and(|extension| extension == "ipynb")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(
        files.len() >= 40,
        "the notebook corpus at {} has {} notebooks; run `cargo xtask corpus` to fetch it",
        dir.display(),
        files.len()
    );
    files
}

#[test]
fn writes_exactly_what_nbformat_writes() {
    let files = corpus_files();
    let output = Command::new(python())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/notebook_model/nbformat_reference.py"),
        )
        .args(&files)
        .output()
        .expect("the reference script runs");
    assert!(
        output.status.success(),
        "reference script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut compared = 0;
    let mut refused_by_both = 0;
    let mut mismatches = Vec::new();
    for line in String::from_utf8(output.stdout).unwrap().lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        let path = record["path"].as_str().unwrap();
        let bytes = std::fs::read(path).unwrap();
        let ours = Notebook::parse(&bytes);
        match record["status"].as_str().unwrap() {
            "written" => {
                let expected = record["text"].as_str().unwrap();
                match ours {
                    Ok(notebook) => {
                        let written = notebook.to_ipynb_string();
                        if written != expected {
                            let at = written
                                .bytes()
                                .zip(expected.bytes())
                                .position(|(left, right)| left != right)
                                .unwrap_or(written.len().min(expected.len()));
                            let from = at.saturating_sub(80);
                            mismatches.push(format!(
                                "{path}: differs at byte {at}\n ours: {:?}\n nbformat: {:?}",
                                &written[from..(at + 80).min(written.len())],
                                &expected[from..(at + 80).min(expected.len())]
                            ));
                        }
                        compared += 1;
                    }
                    // nbformat reads some notebooks that its own validator rejects, and minor
                    // versions above 4.5; we refuse those with an error that says why.
                    Err(error) => {
                        let outside_range = record["minor"].as_u64().is_none_or(|minor| minor > 5);
                        if record["valid"] == false || outside_range {
                            if outside_range {
                                let message = error.to_string();
                                assert!(
                                    message.contains("only nbformat 4.0 to 4.5")
                                        || message.contains("nbformat_minor"),
                                    "{path}: {message}"
                                );
                            }
                            refused_by_both += 1;
                        } else {
                            mismatches.push(format!(
                                "{path}: nbformat reads it but we refuse it: {error}"
                            ));
                        }
                    }
                }
            }
            _ => {
                let error = ours.expect_err(&format!(
                    "{path}: nbformat refuses it ({}) but we read it",
                    record["reason"]
                ));
                if record["reason"].as_str().unwrap().starts_with("nbformat ")
                    && !record["reason"].as_str().unwrap().ends_with('4')
                {
                    assert!(error.to_string().contains("nbformat"), "{path}: {error}");
                }
                refused_by_both += 1;
            }
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(compared >= 40, "only {compared} notebooks compared");
    eprintln!("corpus: {compared} notebooks byte-identical, {refused_by_both} refused by both");
}
