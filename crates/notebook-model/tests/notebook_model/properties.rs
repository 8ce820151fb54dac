//! Property tests: parse∘write is the identity, edits agree with a naive model, names stay unique,
//! revs change exactly when content changes.

use std::collections::HashSet;

use notebook_model::{
    Cell, CellKind, CellRef, EditOp, EditPolicy, Notebook, apply_edits, identity,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z #=()\n]{0,30}",
        "\\PC{0,20}",
        Just(String::new()),
        Just("# heading\nline\r\nx\u{2028}y\n".to_owned()),
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e20f64..1e20).prop_map(Value::from),
        text().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn output() -> impl Strategy<Value = Value> {
    prop_oneof![
        (prop_oneof![Just("stdout"), Just("stderr")], text())
            .prop_map(|(name, text)| json!({"output_type": "stream", "name": name, "text": text})),
        (text(), json_value()).prop_map(|(plain, extra)| json!({
            "output_type": "display_data",
            "data": {"text/plain": plain, "image/png": "iVBORw0KGgo=", "application/json": extra},
            "metadata": {}
        })),
        (text(), 1i64..50).prop_map(|(plain, count)| json!({
            "output_type": "execute_result", "execution_count": count,
            "data": {"text/html": plain}, "metadata": {}
        })),
        (text(), text()).prop_map(|(ename, evalue)| json!({
            "output_type": "error", "ename": ename, "evalue": evalue, "traceback": ["a", "b"]
        })),
    ]
}

fn cell_json() -> impl Strategy<Value = Value> {
    (
        prop_oneof![Just("code"), Just("markdown"), Just("raw")],
        text(),
        prop::collection::btree_map("[a-z]{1,5}", json_value(), 0..3),
        prop::collection::vec(output(), 0..3),
        proptest::option::of(1i64..100),
    )
        .prop_map(|(kind, source, metadata, outputs, count)| {
            let mut cell = json!({
                "cell_type": kind,
                "source": source,
                "metadata": Value::Object(metadata.into_iter().collect()),
            });
            if kind == "code" {
                cell["outputs"] = Value::Array(outputs);
                cell["execution_count"] = count.map_or(Value::Null, Value::from);
            }
            cell
        })
}

fn notebook_json() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(cell_json(), 0..8),
        0u64..=5,
        json_value(),
    )
        .prop_map(|(mut cells, minor, extra)| {
            if minor == 5 {
                for (index, cell) in cells.iter_mut().enumerate() {
                    cell["id"] = Value::String(format!("cell-{index}"));
                }
            }
            json!({"nbformat": 4, "nbformat_minor": minor, "cells": cells,
                   "metadata": {"custom": extra}})
        })
}

proptest! {
    #![proptest_config(crate::config(256, "proptest-regressions/properties.txt"))]

    #[test]
    fn writing_is_a_fixed_point_and_keeps_everything(value in notebook_json()) {
        let first = Notebook::from_value(value).unwrap();
        let written = first.to_ipynb_string();
        let second = Notebook::parse(written.as_bytes()).unwrap();
        prop_assert_eq!(&first, &second);
        prop_assert_eq!(second.to_ipynb_string(), written);
    }

    #[test]
    fn reading_as_a_stream_gives_the_same_notebook(value in notebook_json(), bom in any::<bool>(), chunk in 1usize..64) {
        let mut text = if bom { b"\xef\xbb\xbf".to_vec() } else { Vec::new() };
        text.extend_from_slice(serde_json::to_string_pretty(&value).unwrap().as_bytes());
        // A reader that hands out at most `chunk` bytes a call, as a slow file or pipe would.
        struct Trickle<'a>(&'a [u8], usize);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
                let count = self.0.len().min(buffer.len()).min(self.1);
                buffer[..count].copy_from_slice(&self.0[..count]);
                self.0 = &self.0[count..];
                Ok(count)
            }
        }
        let streamed =
            Notebook::parse_reader(std::io::BufReader::with_capacity(chunk, Trickle(&text, chunk))).unwrap();
        prop_assert_eq!(&streamed, &Notebook::parse(&text).unwrap());
    }

    #[test]
    fn a_sure_difference_is_a_different_text(left in notebook_json(), right in notebook_json()) {
        let left = Notebook::from_value(left).unwrap();
        let right = Notebook::from_value(right).unwrap();
        if left.surely_writes_differently(&right) {
            prop_assert_ne!(left.to_ipynb_string(), right.to_ipynb_string());
        }
        let mut pieces = String::new();
        left.write_ipynb_chunks(64, |piece| {
            pieces.push_str(piece);
            Ok::<(), ()>(())
        }).unwrap();
        prop_assert_eq!(pieces, left.to_ipynb_string());
    }

    #[test]
    fn revs_change_exactly_when_content_changes(a in text(), b in text()) {
        let same = identity::rev(CellKind::Code, &a) == identity::rev(CellKind::Code, &b);
        prop_assert_eq!(same, a == b);
    }
}

/// A naive model: a list of (id, kind, source, metadata, outputs-cleared flag).
#[derive(Clone, Debug, PartialEq)]
struct NaiveCell {
    id: String,
    kind: CellKind,
    source: String,
    outputs_len: usize,
}

#[derive(Clone, Debug)]
enum Step {
    Insert {
        anchor: Option<usize>,
        source: String,
        markdown: bool,
    },
    Edit {
        target: usize,
        source: String,
        stale: bool,
    },
    Delete {
        target: usize,
    },
    Replace {
        target: usize,
    },
    Move {
        first: usize,
        second: usize,
        to: usize,
    },
    Clear {
        target: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (proptest::option::of(0usize..12), text(), any::<bool>()).prop_map(
            |(anchor, source, markdown)| Step::Insert {
                anchor,
                source,
                markdown
            }
        ),
        (0usize..12, text(), prop::bool::weighted(0.1)).prop_map(|(target, source, stale)| {
            Step::Edit {
                target,
                source,
                stale,
            }
        }),
        (0usize..12).prop_map(|target| Step::Delete { target }),
        (0usize..12).prop_map(|target| Step::Replace { target }),
        (0usize..12, 0usize..12, 0usize..12).prop_map(|(first, second, to)| Step::Move {
            first,
            second,
            to
        }),
        (0usize..12).prop_map(|target| Step::Clear { target }),
    ]
}

fn starting_notebook() -> Notebook {
    let mut notebook = Notebook::new();
    for index in 0..4 {
        let mut cell = Cell::new(
            CellKind::Code,
            format!("# step {index}\nx{index} = {index}"),
            format!("c{index}"),
        );
        cell.set_outputs(
            vec![json!({"output_type": "stream", "name": "stdout", "text": "x"})],
            Some(1),
        );
        notebook.push_cell(cell);
    }
    notebook
}

fn naive_of(notebook: &Notebook) -> Vec<NaiveCell> {
    notebook
        .cells()
        .iter()
        .map(|cell| NaiveCell {
            id: cell.id().to_owned(),
            kind: cell.kind(),
            source: cell.source().to_owned(),
            outputs_len: cell.outputs().len(),
        })
        .collect()
}

proptest! {
    #![proptest_config(crate::config(128, "proptest-regressions/properties.txt"))]

    #[test]
    fn edit_sequences_agree_with_a_naive_model(steps in prop::collection::vec(step(), 1..12)) {
        let mut notebook = starting_notebook();
        let mut model = naive_of(&notebook);
        let policy = EditPolicy { require_expected_rev: true };
        for step in steps {
            let len = model.len();
            let rev_of = |index: usize| notebook.cells()[index].rev();
            let (op, expect_ok): (EditOp, bool) = match &step {
                Step::Insert { anchor, source, markdown } => {
                    let anchor = anchor.filter(|&index| index < len);
                    let kind = if *markdown { CellKind::Markdown } else { CellKind::Code };
                    let anchor = anchor.map(|index| CellRef::Index(index as u64));
                    (EditOp::insert(anchor, kind, source.clone()), true)
                }
                Step::Edit { target, source, stale } if *target < len => (EditOp::Edit {
                    target: CellRef::Text(model[*target].id.clone()),
                    expected_rev: Some(if *stale { "00000000".to_owned() } else { rev_of(*target) }),
                    source: Some(source.clone()),
                    language: None,
                    metadata: Some(Map::from_iter([("k".to_owned(), json!(1))])),
                    name: None,
                }, !*stale || rev_of(*target) == "00000000"),
                Step::Delete { target } if *target < len => (EditOp::Delete {
                    target: CellRef::Index(*target as u64),
                    expected_rev: Some(rev_of(*target)),
                }, true),
                Step::Replace { target } if *target < len => {
                    let source = &model[*target].source;
                    let once = source.chars().next().map(String::from).filter(|first| source.matches(first.as_str()).count() == 1);
                    (EditOp::Replace {
                        target: CellRef::Index(*target as u64),
                        expected_rev: Some(rev_of(*target)),
                        old_text: once.clone().unwrap_or_else(|| "\u{0}never".to_owned()),
                        new_text: "Z".to_owned(),
                        metadata: None,
                    }, once.is_some())
                }
                Step::Move { first, second, to } if *first < len && *second < len => {
                    let moving = if first == second { 1 } else { 2 };
                    let mut targets = vec![CellRef::Index(*first as u64)];
                    if first != second { targets.push(CellRef::Index(*second as u64)); }
                    (EditOp::Move { targets, to_index: *to as u64 }, *to <= len - moving)
                }
                Step::Clear { target } if *target < len => (EditOp::ClearOutputs {
                    targets: vec![CellRef::Index(*target as u64)],
                }, true),
                Step::Edit { target, .. } | Step::Delete { target } | Step::Replace { target }
                | Step::Clear { target } | Step::Move { first: target, .. } => {
                    (EditOp::Delete { target: CellRef::Index(*target as u64), expected_rev: None }, false)
                }
            };
            let before_bytes = notebook.to_ipynb_string();
            match apply_edits(&notebook, std::slice::from_ref(&op), policy) {
                Ok(outcome) => {
                    prop_assert!(expect_ok, "{:?} should have failed", step);
                    match &step {
                        Step::Insert { anchor, source, markdown } => {
                            let at = anchor.filter(|&index| index < len).map_or(len, |index| index + 1);
                            let inserted = &outcome.notebook.cells()[at];
                            prop_assert_eq!(inserted.source(), source.as_str());
                            model.insert(at, NaiveCell {
                                id: inserted.id().to_owned(),
                                kind: if *markdown { CellKind::Markdown } else { CellKind::Code },
                                source: source.clone(),
                                outputs_len: 0,
                            });
                        }
                        Step::Edit { target, source, .. } => model[*target].source = source.clone(),
                        Step::Delete { target } => { model.remove(*target); }
                        Step::Replace { target } => {
                            let source = &mut model[*target].source;
                            let first = source.chars().next().unwrap();
                            *source = source.replacen(first, "Z", 1);
                        }
                        Step::Move { first, second, to } => {
                            let mut order = vec![*first];
                            if first != second { order.push(*second); }
                            let block: Vec<NaiveCell> = order.iter().map(|&index| model[index].clone()).collect();
                            let mut rest: Vec<NaiveCell> = model.iter().enumerate()
                                .filter(|(index, _)| !order.contains(index)).map(|(_, cell)| cell.clone()).collect();
                            rest.splice(*to..*to, block);
                            model = rest;
                        }
                        Step::Clear { target } => model[*target].outputs_len = 0,
                    }
                    notebook = outcome.notebook;
                }
                Err(_) => {
                    prop_assert!(!expect_ok, "{:?} failed unexpectedly", step);
                    prop_assert_eq!(notebook.to_ipynb_string(), before_bytes, "a failed batch changed nothing");
                }
            }
            prop_assert_eq!(naive_of(&notebook), model.clone());
            let names = identity::effective_names(&notebook);
            let unique: HashSet<&String> = names.iter().collect();
            prop_assert_eq!(unique.len(), names.len(), "names are unique: {:?}", names);
            prop_assert!(names.iter().all(|name| identity::is_valid_name(name)));
            let ids: HashSet<&str> = notebook.cells().iter().map(|cell| cell.id()).collect();
            prop_assert_eq!(ids.len(), notebook.len(), "ids are unique");
        }
    }
}
