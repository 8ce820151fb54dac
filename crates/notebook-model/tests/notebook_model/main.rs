//! Integration tests of the notebook model: byte-for-byte agreement with Python's nbformat over a
//! corpus of real notebooks, and property tests of parsing, writing, identity, edits, undo and the live-document planner.

mod corpus;
mod plan;
mod properties;
mod undo;

use proptest::test_runner::{Config, FileFailurePersistence};

/// `cases` cases, with failures kept in `regressions` (under `proptest-regressions/`, committed).
fn config(cases: u32, regressions: &'static str) -> Config {
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}
