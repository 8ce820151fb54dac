//! Property tests of undo steps: undone right after, a batch of edits restores the notebook
//! exactly; with unrelated changes in between, undo keeps them; with a change to a cell the batch
//! touched, undo is refused.

use std::collections::HashSet;

use notebook_model::{
    Cell, CellKind, CellRef, DocChange, EditOp, EditPolicy, Notebook, UndoStep, apply_edits,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn source() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z =#\n]{0,12}",
        Just(String::new()),
        Just("# plot\nx".to_owned())
    ]
}

/// A cell's content before ids are given: kind, source, a metadata value, output text.
type CellSeed = (u8, String, Option<u8>, Option<String>);

fn cell_seed() -> impl Strategy<Value = CellSeed> {
    (
        0u8..3,
        source(),
        proptest::option::of(0u8..4),
        proptest::option::of("[a-z]{0,5}"),
    )
}

fn notebook_of(seeds: &[CellSeed]) -> Notebook {
    let mut notebook = Notebook::new();
    notebook
        .metadata_mut()
        .insert("kernelspec".to_owned(), json!({"name": "python3"}));
    for (index, (kind, source, tag, output)) in seeds.iter().enumerate() {
        let kind = [CellKind::Code, CellKind::Markdown, CellKind::Raw][*kind as usize];
        let mut cell = Cell::new(kind, source.clone(), format!("cell-{index}"));
        if let Some(tag) = tag {
            cell.metadata_mut().insert("tag".to_owned(), json!(tag));
        }
        if let (CellKind::Code, Some(text)) = (kind, output) {
            cell.set_outputs(
                vec![json!({"output_type": "stream", "name": "stdout", "text": text})],
                Some(3),
            );
        }
        notebook.push_cell(cell);
    }
    notebook
}

/// One operation of a batch, its cell positions taken modulo the cells there are then.
#[derive(Debug, Clone)]
enum OpSeed {
    Insert(usize, String, bool),
    Edit(usize, Option<String>, Option<u8>, bool),
    Delete(usize),
    Move(usize, usize, usize),
    Clear(usize),
    NotebookMetadata(Option<u8>),
}

fn op_seed() -> impl Strategy<Value = OpSeed> {
    prop_oneof![
        (0usize..20, source(), any::<bool>())
            .prop_map(|(at, text, top)| OpSeed::Insert(at, text, top)),
        (
            0usize..20,
            proptest::option::of(source()),
            proptest::option::of(0u8..4),
            any::<bool>()
        )
            .prop_map(|(at, text, tag, rename)| OpSeed::Edit(at, text, tag, rename)),
        (0usize..20).prop_map(OpSeed::Delete),
        (0usize..20, 0usize..20, 0usize..20).prop_map(|(a, b, to)| OpSeed::Move(a, b, to)),
        (0usize..20).prop_map(OpSeed::Clear),
        proptest::option::of(0u8..3).prop_map(OpSeed::NotebookMetadata),
    ]
}

/// The operations the seeds stand for against a notebook of `len` cells (`None` for one that
/// cannot apply, such as a delete in an empty notebook).
fn ops_of(seeds: &[OpSeed], mut len: usize) -> Vec<EditOp> {
    let mut ops = Vec::new();
    for (number, seed) in seeds.iter().enumerate() {
        let op = match seed {
            OpSeed::Insert(at, text, top) => {
                let anchor = if *top {
                    Some(CellRef::from("TOP"))
                } else if len == 0 {
                    None
                } else {
                    Some(CellRef::Index((at % len) as u64))
                };
                len += 1;
                EditOp::insert(anchor, CellKind::Code, text.clone())
            }
            _ if len == 0 => continue,
            OpSeed::Edit(at, text, tag, rename) => EditOp::Edit {
                target: CellRef::Index((at % len) as u64),
                expected_rev: None,
                source: text
                    .clone()
                    .or_else(|| tag.is_none().then(|| "edited".to_owned())),
                language: None,
                metadata: tag.map(|tag| Map::from_iter([("tag".to_owned(), json!(tag))])),
                name: rename.then(|| format!("renamed-{number}")),
            },
            OpSeed::Delete(at) => {
                len -= 1;
                EditOp::Delete {
                    target: CellRef::Index((at % (len + 1)) as u64),
                    expected_rev: None,
                }
            }
            OpSeed::Move(a, b, to) => {
                let (a, b) = (a % len, b % len);
                let mut targets = vec![CellRef::Index(a as u64)];
                if a != b {
                    targets.push(CellRef::Index(b as u64));
                }
                let stay = len - targets.len();
                EditOp::Move {
                    targets,
                    to_index: (to % (stay + 1)) as u64,
                }
            }
            OpSeed::Clear(at) => EditOp::ClearOutputs {
                targets: vec![CellRef::Index((at % len) as u64)],
            },
            OpSeed::NotebookMetadata(value) => EditOp::MergeNotebookMetadata {
                metadata: Map::from_iter([(
                    "agent".to_owned(),
                    value.map_or(Value::Null, |value| json!(value)),
                )]),
            },
        };
        ops.push(op);
    }
    ops
}

/// A person's change to a cell: new source, new metadata, new outputs (a run).
#[derive(Debug, Clone)]
enum PersonSeed {
    Type(usize, String),
    Tag(usize),
    Run(usize),
    Insert(usize),
    Delete(usize),
}

fn person_seed() -> impl Strategy<Value = PersonSeed> {
    prop_oneof![
        (0usize..20, "[a-z]{1,6}").prop_map(|(at, text)| PersonSeed::Type(at, text)),
        (0usize..20).prop_map(PersonSeed::Tag),
        (0usize..20).prop_map(PersonSeed::Run),
        (0usize..20).prop_map(PersonSeed::Insert),
        (0usize..20).prop_map(PersonSeed::Delete),
    ]
}

fn replay(now: &Notebook, changes: &[DocChange]) -> Notebook {
    let mut notebook = now.clone();
    for change in changes {
        change.apply_to(&mut notebook);
    }
    notebook
}

/// Ids of the cells the batch added or changed (the ones undo checks).
fn touched(before: &Notebook, after: &Notebook) -> Vec<String> {
    after
        .cells()
        .iter()
        .filter(|cell| {
            before
                .position_of_id(cell.id())
                .is_none_or(|index| *before.cells()[index] != ***cell)
        })
        .map(|cell| cell.id().to_owned())
        .collect()
}

/// The notebook the seeds stand for, and the same after the batch (the case is rejected when
/// the batch is refused).
fn applied(seeds: &[CellSeed], batch: &[OpSeed]) -> Result<(Notebook, Notebook), TestCaseError> {
    let before = notebook_of(seeds);
    let ops = ops_of(batch, before.len());
    let after = apply_edits(&before, &ops, EditPolicy::default())
        .map_err(|_| TestCaseError::reject("the batch is refused"))?
        .notebook;
    Ok((before, after))
}

fn ids(notebook: &Notebook) -> Vec<String> {
    notebook
        .cells()
        .iter()
        .map(|cell| cell.id().to_owned())
        .collect()
}

proptest! {
    #![proptest_config(crate::config(256, "proptest-regressions/undo.txt"))]

    #[test]
    fn undone_right_after_a_batch_restores_the_notebook_exactly(
        seeds in prop::collection::vec(cell_seed(), 0..7),
        batch in prop::collection::vec(op_seed(), 1..5),
    ) {
        let (before, after) = applied(&seeds, &batch)?;
        let step = UndoStep::between(&before, &after);
        prop_assert_eq!(step.is_empty(), before.cells() == after.cells() && before.metadata() == after.metadata());
        let restoration = step.restore(&after).unwrap();
        prop_assert_eq!(restoration.notebook.cells(), before.cells());
        prop_assert_eq!(restoration.notebook.metadata(), before.metadata());
        prop_assert_eq!(&replay(&after, &restoration.changes), &restoration.notebook, "the changes lead to the notebook");
    }

    #[test]
    fn unrelated_changes_in_between_survive_the_undo(
        seeds in prop::collection::vec(cell_seed(), 1..7),
        batch in prop::collection::vec(op_seed(), 1..5),
        person in prop::collection::vec(person_seed(), 1..5),
    ) {
        let (before, after) = applied(&seeds, &batch)?;
        let step = UndoStep::between(&before, &after);
        let touched = touched(&before, &after);
        // The person changes only cells the batch neither added nor changed.
        let mut now = after.clone();
        let mut deleted = HashSet::new();
        let mut inserted = 0;
        for (number, seed) in person.iter().enumerate() {
            let free: Vec<usize> = (0..now.len())
                .filter(|&index| !touched.contains(&now.cells()[index].id().to_owned()))
                .collect();
            let pick = |at: usize| (!free.is_empty()).then(|| free[at % free.len()]);
            match seed {
                PersonSeed::Type(at, text) => if let Some(index) = pick(*at) {
                    let cell = now.cell_mut(index).unwrap();
                    let source = format!("{}{text}", cell.source());
                    cell.set_source(source);
                },
                PersonSeed::Tag(at) => if let Some(index) = pick(*at) {
                    now.cell_mut(index).unwrap().metadata_mut().insert("person".to_owned(), json!(number));
                },
                PersonSeed::Run(at) => if let Some(index) = pick(*at) {
                    now.cell_mut(index).unwrap().set_outputs(Vec::new(), Some(99));
                },
                PersonSeed::Insert(at) => {
                    let index = at % (now.len() + 1);
                    now.insert_cell(index, Cell::new(CellKind::Markdown, "person", format!("person-{number}")));
                    inserted += 1;
                }
                // Cells from before only (so the count below holds).
                PersonSeed::Delete(at) => if let Some(index) = pick(*at)
                    && before.position_of_id(now.cells()[index].id()).is_some()
                {
                    deleted.insert(now.remove_cell(index).id().to_owned());
                },
            }
        }
        let restoration = step.restore(&now);
        prop_assert!(restoration.is_ok(), "{:?}", restoration.err());
        let restored = restoration.unwrap();
        prop_assert_eq!(&replay(&now, &restored.changes), &restored.notebook, "the changes lead to the notebook");
        // Every cell the person changed or added is as they left it.
        for cell in now.cells() {
            if touched.contains(&cell.id().to_owned()) {
                continue;
            }
            let index = restored.notebook.position_of_id(cell.id());
            prop_assert!(index.is_some(), "{} is kept", cell.id());
            prop_assert_eq!(&*restored.notebook.cells()[index.unwrap()], &**cell);
        }
        prop_assert_eq!(restored.notebook.len(), before.len() - deleted.len() + inserted);
        // The cells from before are back, in their order, with their content where the person
        // did not change it since.
        let expected_order: Vec<String> = ids(&before).into_iter().filter(|id| !deleted.contains(id)).collect();
        let restored_order: Vec<String> = ids(&restored.notebook).into_iter().filter(|id| before.position_of_id(id).is_some()).collect();
        prop_assert_eq!(restored_order, expected_order);
        for cell in before.cells() {
            let Some(index) = restored.notebook.position_of_id(cell.id()) else {
                continue;
            };
            let left_alone = match (now.position_of_id(cell.id()), after.position_of_id(cell.id())) {
                (Some(now_index), Some(after_index)) => now.cells()[now_index] == after.cells()[after_index],
                _ => true,
            };
            if left_alone {
                prop_assert_eq!(&*restored.notebook.cells()[index], &**cell);
            }
        }
        prop_assert_eq!(restored.notebook.metadata(), before.metadata());
    }

    #[test]
    fn a_change_since_to_a_touched_cell_refuses_the_undo(
        seeds in prop::collection::vec(cell_seed(), 0..7),
        batch in prop::collection::vec(op_seed(), 1..5),
        at in 0usize..20,
    ) {
        let (before, after) = applied(&seeds, &batch)?;
        let touched = touched(&before, &after);
        prop_assume!(!touched.is_empty());
        let step = UndoStep::between(&before, &after);
        let id = &touched[at % touched.len()];
        let mut now = after.clone();
        let index = now.position_of_id(id).unwrap();
        let cell = now.cell_mut(index).unwrap();
        let source = format!("{} # person", cell.source());
        cell.set_source(source);
        let unchanged = now.clone();
        let conflict = step.restore(&now).unwrap_err();
        prop_assert_eq!(&now, &unchanged);
        let named = conflict.cells.iter().find(|cell| cell.id == *id);
        prop_assert!(named.is_some(), "{} is named in {:?}", id, conflict);
        let current = named.unwrap().current.as_ref().unwrap();
        prop_assert_eq!(&current.cell.rev, &now.cells()[index].rev());
        prop_assert_eq!(&current.source, now.cells()[index].source());
    }
}
