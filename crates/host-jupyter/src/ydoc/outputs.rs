//! A run's outputs written into the live document as they arrive, the way JupyterLab writes
//! the outputs of its own runs, so a person watching the notebook sees them appear.
//!
//! What a cell's outputs are after each kernel message is `execution-tracker`'s
//! `OutputAccumulator` (stream merging, `clear_output` with `wait`, display updates, carriage
//! returns, memory bounds); this module only writes the difference into the document. Text that
//! a stream gains is appended to the end of the last output's text, which is the only stream
//! change JupyterLab 4 renders live (it applies a remote insert into a stream with
//! `appendStreamOutput`); any other change replaces the outputs from the first that differs.

use execution_tracker::{IopubEvent, OutputAccumulator, OutputLimits};
use notebook_model::outputs::OutputView;
use serde_json::Value;
use yrs::{Any, Array, ArrayPrelim, ArrayRef, Map, MapRef, Out, Text, TransactionMut};

use super::write::{execution_count, output_prelim};

/// The outputs of one run of one cell, and what of them the document holds.
#[derive(Debug)]
pub struct OutputWriter {
    accumulator: OutputAccumulator,
    /// The outputs as last written.
    written: Vec<Value>,
}

impl Default for OutputWriter {
    fn default() -> Self {
        OutputWriter::new()
    }
}

impl OutputWriter {
    /// A writer for a new run.
    pub fn new() -> OutputWriter {
        OutputWriter {
            accumulator: OutputAccumulator::new(1, OutputLimits::default()),
            written: Vec::new(),
        }
    }

    /// The run started: no outputs and no count yet, and the cell shows as running (`[*]`).
    pub fn begin(&mut self, txn: &mut TransactionMut, cell: &MapRef) {
        let outputs = outputs_of(txn, cell);
        let count = outputs.len(txn);
        if count > 0 {
            outputs.remove_range(txn, 0, count);
        }
        self.written.clear();
        cell.insert(txn, "execution_count", Any::Null);
        cell.insert(txn, "execution_state", "running");
    }

    /// One output message of the run.
    pub fn output(&mut self, txn: &mut TransactionMut, cell: &MapRef, event: IopubEvent) {
        self.accumulator.apply(0, event);
        let outputs = self.accumulator.outputs(0);
        let live = outputs_of(txn, cell);
        sync_outputs(txn, &live, &self.written, &outputs);
        self.written = outputs;
    }

    /// The kernel replied (with the execution count it gave, if any).
    pub fn reply(&mut self, txn: &mut TransactionMut, cell: &MapRef, count: Option<u64>) {
        let count = count.and_then(|count| i64::try_from(count).ok());
        cell.insert(txn, "execution_count", execution_count(count));
    }

    /// The run of the cell is over, however it ended.
    pub fn finish(&mut self, txn: &mut TransactionMut, cell: &MapRef) {
        cell.insert(txn, "execution_state", "idle");
    }
}

/// The cell's outputs array (made when the cell has none).
fn outputs_of(txn: &mut TransactionMut, cell: &MapRef) -> ArrayRef {
    match cell.get(txn, "outputs") {
        Some(Out::YArray(outputs)) => outputs,
        _ => cell.insert(txn, "outputs", ArrayPrelim::default()),
    }
}

/// Turns the document's outputs, which hold `old` (as written), into `new`.
fn sync_outputs(txn: &mut TransactionMut, live: &ArrayRef, old: &[Value], new: &[Value]) {
    // Someone else changed the outputs meanwhile (cleared them): write them all again.
    let old = if live.len(txn) as usize == old.len() {
        old
    } else {
        &[]
    };
    let same = old
        .iter()
        .zip(new)
        .take_while(|(left, right)| left == right)
        .count();
    let mut first_new = same;
    if same + 1 == old.len()
        && same < new.len()
        && let Some(appended) = appended_stream_text(&old[same], &new[same])
        && let Some(Out::YMap(output)) = live.get(txn, same as u32)
        && let Some(Out::YText(text)) = output.get(txn, "text")
    {
        text.push(txn, appended);
        first_new = same + 1;
    } else if old.len() > same {
        live.remove_range(txn, same as u32, (old.len() - same) as u32);
    }
    for (index, output) in new.iter().enumerate().skip(first_new) {
        live.insert(txn, index as u32, output_prelim(output));
    }
}

/// The text `new` adds at the end of `old` when both are the same stream.
fn appended_stream_text<'a>(old: &Value, new: &'a Value) -> Option<&'a str> {
    let stream = |output: &Value| -> Option<(String, String)> {
        let OutputView::Stream { name, text } = OutputView::of(output) else {
            return None;
        };
        Some((name?.to_owned(), text?.as_str()?.to_owned()))
    };
    let (old_name, old_text) = stream(old)?;
    let (new_name, _) = stream(new)?;
    let new_text = new.get("text")?.as_str()?;
    (old_name == new_name && new_text.len() > old_text.len())
        .then(|| new_text.strip_prefix(old_text.as_str()))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ydoc::{Roots, new_doc_with_client, read};
    use notebook_model::{Cell, CellKind, Notebook};
    use serde_json::json;
    use yrs::updates::decoder::Decode;
    use yrs::{Doc, ReadTxn as _, Transact, Update};

    fn setup() -> (Doc, Roots, MapRef) {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Code, "print(1)", "c"));
        let doc = new_doc_with_client(1);
        let roots = Roots::of(&doc);
        crate::ydoc::write::fill(&mut doc.transact_mut(), &roots, &notebook);
        let cell = {
            let txn = doc.transact();
            let Some(Out::YMap(cell)) = roots.cells.get(&txn, 0) else {
                panic!("a cell");
            };
            cell
        };
        (doc, roots, cell)
    }

    /// [`setup`] with a writer that has begun writing the cell's outputs.
    fn writing() -> (Doc, Roots, MapRef, OutputWriter) {
        let (doc, roots, cell) = setup();
        let mut writer = OutputWriter::new();
        writer.begin(&mut doc.transact_mut(), &cell);
        (doc, roots, cell, writer)
    }

    fn stream(text: &str) -> IopubEvent {
        IopubEvent::Stream {
            name: "stdout".into(),
            text: text.into(),
        }
    }

    #[test]
    fn stream_text_is_appended_to_the_last_output_as_it_arrives() {
        let (doc, _, cell) = setup();
        let peer = new_doc_with_client(2);
        let initial = doc
            .transact()
            .encode_state_as_update_v1(&yrs::StateVector::default());
        let mut seen_updates = vec![initial];
        let mut writer = OutputWriter::new();
        let (sender, receiver) = std::sync::mpsc::channel();
        doc.observe_update_v1("test", move |_, event| {
            let _ = sender.send(event.update.clone());
        })
        .unwrap();
        writer.begin(&mut doc.transact_mut(), &cell);
        writer.output(&mut doc.transact_mut(), &cell, stream("tick 0\n"));
        let text_before = {
            let txn = doc.transact();
            let Some(Out::YArray(outputs)) = cell.get(&txn, "outputs") else {
                panic!()
            };
            let Some(Out::YMap(first)) = outputs.get(&txn, 0) else {
                panic!()
            };
            first.get(&txn, "text")
        };
        writer.output(&mut doc.transact_mut(), &cell, stream("tick 1\n"));
        {
            let txn = doc.transact();
            let Some(Out::YArray(outputs)) = cell.get(&txn, "outputs") else {
                panic!()
            };
            assert_eq!(outputs.len(&txn), 1, "one stream output, grown");
            let Some(Out::YMap(first)) = outputs.get(&txn, 0) else {
                panic!()
            };
            assert_eq!(first.get(&txn, "text"), text_before, "the same shared text");
        }
        writer.output(
            &mut doc.transact_mut(),
            &cell,
            IopubEvent::ExecuteResult {
                data: json!({"text/plain": "42"}),
                metadata: json!({}),
                execution_count: Some(3),
                transient: None,
            },
        );
        writer.reply(&mut doc.transact_mut(), &cell, Some(3));
        writer.finish(&mut doc.transact_mut(), &cell);
        while let Ok(update) = receiver.try_recv() {
            seen_updates.push(update);
        }
        for update in seen_updates {
            peer.transact_mut()
                .apply_update(Update::decode_v1(&update).unwrap())
                .unwrap();
        }
        let peer_roots = Roots::of(&peer);
        let notebook = read::notebook(&peer.transact(), &peer_roots).unwrap();
        let cell = notebook.cell(0).unwrap();
        assert_eq!(cell.execution_count(), Some(3));
        assert_eq!(
            cell.outputs(),
            [
                json!({"output_type": "stream", "name": "stdout", "text": "tick 0\ntick 1\n"}),
                json!({"output_type": "execute_result", "execution_count": 3,
                       "data": {"text/plain": "42"}, "metadata": {}}),
            ]
        );
        let txn = peer.transact();
        let Some(Out::YMap(live)) = peer_roots.cells.get(&txn, 0) else {
            panic!()
        };
        assert_eq!(
            live.get(&txn, "execution_state")
                .map(|state| state.to_string(&txn)),
            Some("idle".to_owned())
        );
    }

    #[test]
    fn a_clear_output_replaces_what_was_written() {
        let (doc, roots, cell, mut writer) = writing();
        writer.output(&mut doc.transact_mut(), &cell, stream("50%"));
        writer.output(
            &mut doc.transact_mut(),
            &cell,
            IopubEvent::ClearOutput { wait: false },
        );
        writer.output(&mut doc.transact_mut(), &cell, stream("100%"));
        let notebook = read::notebook(&doc.transact(), &roots).unwrap();
        assert_eq!(
            notebook.cell(0).unwrap().outputs(),
            [json!({"output_type": "stream", "name": "stdout", "text": "100%"})]
        );
    }

    #[test]
    fn outputs_cleared_by_someone_else_are_written_again() {
        let (doc, roots, cell, mut writer) = writing();
        writer.output(&mut doc.transact_mut(), &cell, stream("a"));
        {
            let mut txn = doc.transact_mut();
            let Some(Out::YArray(outputs)) = cell.get(&txn, "outputs") else {
                panic!()
            };
            outputs.remove_range(&mut txn, 0, 1);
        }
        writer.output(&mut doc.transact_mut(), &cell, stream("b"));
        let notebook = read::notebook(&doc.transact(), &roots).unwrap();
        assert_eq!(
            notebook.cell(0).unwrap().outputs(),
            [json!({"output_type": "stream", "name": "stdout", "text": "ab"})]
        );
    }
}
