//! Integration tests of the notebook model: byte-for-byte agreement with Python's nbformat over a
//! corpus of real notebooks, and property tests of parsing, writing, identity, edits and undo.

mod corpus;
mod properties;
mod undo;
