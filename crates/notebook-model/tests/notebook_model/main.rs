//! Integration tests of the notebook model: byte-for-byte agreement with Python's nbformat over a
//! corpus of real notebooks, and property tests of parsing, writing, identity, edits, undo and the live-document planner.

mod corpus;
mod plan;
mod properties;
mod undo;
