//! Running a scenario: the simulated kernel and host answer every action, with the scenario's
//! fault injected where it says.

use super::*;

/// Whether `action` removes a transfer's temp file (cleanup or the unlink after a link).
pub(super) fn removes_temp(action: &Action) -> bool {
    match action {
        Action::RemoveHostTemp { .. } => true,
        Action::ExecuteKernel(step) => {
            matches!(step.request.operation, KernelOperation::RemoveTemp { .. })
        }
        _ => false,
    }
}

pub(super) fn damage(reply: KernelOutput, fault: ReplyFault, nonce: &str) -> KernelOutput {
    let KernelOutput {
        stdout,
        mut buffers,
    } = reply;
    // Corrupting a chunk that came as a buffer corrupts the buffer; the rest is in the text.
    if matches!(fault, ReplyFault::CorruptData)
        && let Some(last) = buffers.iter_mut().rev().find(|buffer| !buffer.is_empty())
    {
        last[0] ^= 0x01;
        return KernelOutput { stdout, buffers };
    }
    KernelOutput {
        stdout: damage_text(&stdout, fault, nonce),
        buffers,
    }
}

pub(super) fn damage_text(reply: &str, fault: ReplyFault, nonce: &str) -> String {
    match fault {
        ReplyFault::Missing => String::new(),
        ReplyFault::WrongNonce => reply.replace(nonce, "00000000-0000-4000-8000-000000000000"),
        ReplyFault::Truncate(fraction) => {
            let line = reply.trim_end_matches('\n');
            let cut = ((line.len() as f64) * fraction) as usize;
            line[..cut.min(line.len() - 1)].to_owned()
        }
        ReplyFault::Duplicate => format!("{reply}{reply}"),
        ReplyFault::CorruptNumber | ReplyFault::CorruptData | ReplyFault::DropChunk => {
            let (prefix, json) = reply.trim_end().split_at(reply.find('{').unwrap_or(0));
            let mut object: serde_json::Map<String, Value> =
                serde_json::from_str(json).unwrap_or_default();
            let corrupted = match fault {
                ReplyFault::CorruptData => corrupt_last_chunk_data(&mut object),
                ReplyFault::DropChunk => drop_last_chunk(&mut object),
                _ => corrupt_first_number(&mut object),
            };
            if !corrupted {
                object.insert("kind".into(), json!("other"));
            }
            format!("{prefix}{}\n", Value::Object(object))
        }
    }
}

/// Adds one to `offset` or `bytes`; false if the receipt has neither.
pub(super) fn corrupt_first_number(object: &mut serde_json::Map<String, Value>) -> bool {
    let Some(field) = ["offset", "bytes"]
        .into_iter()
        .find(|field| object.contains_key(*field))
    else {
        return false;
    };
    let value = object[field].as_u64().unwrap_or(0);
    object.insert(field.into(), json!(value + 1));
    true
}

/// Changes the first character of the last chunk's data; false if there is no such data.
pub(super) fn corrupt_last_chunk_data(object: &mut serde_json::Map<String, Value>) -> bool {
    let Some(Value::Object(chunk)) = object
        .get_mut("chunks")
        .and_then(Value::as_array_mut)
        .and_then(|chunks| chunks.last_mut())
    else {
        return corrupt_first_number(object);
    };
    let Some(Value::String(data)) = chunk.get_mut("data") else {
        return false;
    };
    if data.is_empty() {
        return false;
    }
    let replacement = if data.starts_with('A') { "B" } else { "A" };
    data.replace_range(..1, replacement);
    true
}

/// Drops the last chunk of a download batch, or counts one chunk fewer in an upload receipt.
pub(super) fn drop_last_chunk(object: &mut serde_json::Map<String, Value>) -> bool {
    if let Some(chunks) = object.get_mut("chunks").and_then(Value::as_array_mut) {
        return chunks.pop().is_some();
    }
    match object.get("count").and_then(Value::as_u64) {
        Some(count) if count > 0 => {
            object.insert("count".into(), json!(count - 1));
            true
        }
        _ => false,
    }
}

/// Runs a machine to the end against the simulated kernel and host.
pub(super) fn run(
    mut machine: impl TransferMachine,
    mut kernel: SimKernel,
    mut host: SimHost,
    mut budget: KernelBudget,
    fault: &Fault,
) -> Run {
    let mut kernel_steps = 0;
    let mut host_actions = 0;
    let mut fault_hit_cleanup = false;
    for action_index in 0.. {
        assert!(action_index < 10_000, "the machine does not terminate");
        let action = machine.next_action(&mut budget);
        assert!(budget.used() <= budget.limit());
        if action.is_terminal() {
            // Terminal actions repeat.
            assert_eq!(machine.next_action(&mut budget), action);
            return Run {
                outcome: action,
                kernel,
                host,
                budget,
                kernel_steps,
                fault_hit_cleanup,
            };
        }
        if let Fault::Cancel {
            action: cancelled_index,
        } = fault
            && *cancelled_index == action_index
        {
            fault_hit_cleanup = removes_temp(&action);
            machine.handle(Event::Cancelled);
            continue;
        }
        let event = match &action {
            Action::ExecuteKernel(step) => {
                let rendered = match step.wire {
                    KernelWire::Messages => step.request.to_python_with_buffers(),
                    KernelWire::CodeOnly => (step.request.to_python(), Vec::new()),
                };
                assert_eq!((step.code.clone(), step.buffers.clone()), rendered);
                let step_index = kernel_steps;
                kernel_steps += 1;
                match fault {
                    Fault::Kernel { step, failure, ran } if *step == step_index => {
                        fault_hit_cleanup = removes_temp(&action);
                        if *ran && *failure != KernelFailure::Busy {
                            kernel.execute(&step_request(&action));
                        }
                        if !failure.kernel_still_usable() {
                            kernel.gone = true;
                        }
                        Event::KernelFailed(failure.clone())
                    }
                    Fault::Reply {
                        step: faulty_step,
                        fault,
                    } if *faulty_step == step_index => {
                        let reply = kernel.execute(&step.request);
                        Event::KernelReply(damage(reply, *fault, NONCE))
                    }
                    _ => {
                        // Benign noise around the receipt, including another transfer's receipt.
                        let mut reply = kernel.execute(&step.request);
                        let other = format!(
                            "{RECEIPT_MARKER}11111111-2222-3333-4444-555555555555:{{\"kind\":\"init\"}}\n"
                        );
                        reply.stdout = format!("progress\n{other}{}done\r\n", reply.stdout);
                        Event::KernelReply(reply)
                    }
                }
            }
            host_action => {
                let index = host_actions;
                host_actions += 1;
                match fault {
                    Fault::Host { action, kind } if *action == index => {
                        fault_hit_cleanup = removes_temp(host_action);
                        Event::HostFailed(*kind)
                    }
                    _ => host.perform(host_action).unwrap_or_else(Event::HostFailed),
                }
            }
        };
        machine.handle(event);
    }
    unreachable!()
}

pub(super) fn step_request(action: &Action) -> KernelRequest {
    match action {
        Action::ExecuteKernel(step) => step.request.clone(),
        _ => unreachable!(),
    }
}

pub(super) fn temp_files(files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    files
        .keys()
        .filter(|name| name.ends_with(".part"))
        .cloned()
        .collect()
}

/// The leftover an outcome reports, if any.
pub(super) fn reported_leftover(outcome: &Action) -> Option<Leftover> {
    match outcome {
        Action::Failed(
            TransferError::Failed { leftover, .. } | TransferError::Uncertain { leftover, .. },
        ) => leftover.clone(),
        Action::Failed(TransferError::CommittedCleanupUnconfirmed { leftover, .. }) => {
            Some(leftover.clone())
        }
        _ => None,
    }
}
