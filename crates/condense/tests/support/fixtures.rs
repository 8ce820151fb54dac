//! The snapshot fixtures, listed once for the snapshot tests and the `measure` example.

use std::path::{Path, PathBuf};

/// `tests/fixtures`, where each `NAME.json` holds a list of nbformat outputs.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every fixture's `.json` file, sorted by name.
pub fn fixture_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| {
            path.extension()
                .is_some_and(|extension| extension == "json")
        })
        .collect();
    paths.sort();
    paths
}
