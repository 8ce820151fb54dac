//! The property tests: random scenarios, each run against the model of what may have happened
//! to the destination and the temp files.

use super::run::*;
use super::*;

pub(super) fn scenario(max_len: usize) -> impl Strategy<Value = Scenario> {
    let data = (0..=max_len, any::<u64>(), any::<bool>())
        .prop_map(|(len, seed, compressible)| test_bytes(len, seed, compressible));
    let chunk_size = prop_oneof![Just(CHUNK_SIZE), 1usize..=CHUNK_SIZE];
    let chunks_per_request = prop_oneof![Just(CHUNKS_PER_REQUEST), 1usize..=CHUNKS_PER_REQUEST];
    let buffered_chunks_per_request =
        prop_oneof![Just(CHUNKS_PER_REQUEST), 1usize..=CHUNKS_PER_REQUEST];
    let existing = proptest::option::weighted(0.3, proptest::collection::vec(any::<u8>(), 0..64));
    let reply_fault = prop_oneof![
        Just(ReplyFault::Missing),
        Just(ReplyFault::WrongNonce),
        (0.0f64..1.0).prop_map(ReplyFault::Truncate),
        Just(ReplyFault::Duplicate),
        Just(ReplyFault::CorruptNumber),
        Just(ReplyFault::CorruptData),
        Just(ReplyFault::DropChunk),
    ];
    let kernel_failure = prop_oneof![
        Just(KernelFailure::Busy),
        Just(KernelFailure::Timeout),
        Just(KernelFailure::Died),
        Just(KernelFailure::Restarted),
        Just(KernelFailure::Exception {
            ename: "KeyboardInterrupt".into()
        }),
    ];
    let host_error = prop_oneof![
        Just(ErrorKind::PermissionDenied),
        Just(ErrorKind::WriteZero),
        Just(ErrorKind::Other)
    ];
    let fault = prop_oneof![
        2 => Just(Fault::None),
        3 => (any::<usize>(), reply_fault).prop_map(|(step, fault)| Fault::Reply { step, fault }),
        2 => (any::<usize>(), kernel_failure, any::<bool>()).prop_map(|(step, failure, ran)| Fault::Kernel { step, failure, ran }),
        1 => (any::<usize>(), host_error).prop_map(|(action, kind)| Fault::Host { action, kind }),
        1 => any::<usize>().prop_map(|action| Fault::Cancel { action }),
    ];
    (
        data,
        chunk_size,
        (chunks_per_request, buffered_chunks_per_request),
        (any::<bool>(), any::<bool>()),
        existing,
        fault,
    )
        .prop_map(
            |(
                data,
                chunk_size,
                (chunks_per_request, buffered_chunks_per_request),
                (overwrite, messages),
                existing_destination,
                fault,
            )| {
                // Keep the number of steps small enough for quick runs.
                let chunk_size = chunk_size.max(data.len() / 48).clamp(1, CHUNK_SIZE);
                Scenario {
                    data,
                    chunk_size,
                    chunks_per_request,
                    overwrite,
                    existing_destination,
                    max_bytes: DEFAULT_MAX_BYTES,
                    wire: if messages {
                        KernelWire::Messages
                    } else {
                        KernelWire::CodeOnly
                    },
                    buffered_chunks_per_request,
                    fault,
                }
            },
        )
}

/// Maps a fault's free index onto the steps a fault-free run takes.
pub(super) fn pin_fault(
    fault: &Fault,
    kernel_steps: usize,
    host_actions: usize,
    actions: usize,
) -> Fault {
    match fault.clone() {
        Fault::Reply { step, fault } => Fault::Reply {
            step: step % kernel_steps,
            fault,
        },
        Fault::Kernel { step, failure, ran } => Fault::Kernel {
            step: step % kernel_steps,
            failure,
            ran,
        },
        Fault::Host { action, kind } if host_actions > 0 => Fault::Host {
            action: action % host_actions,
            kind,
        },
        Fault::Host { .. } => Fault::None,
        Fault::Cancel { action } => Fault::Cancel {
            action: action % actions,
        },
        Fault::None => Fault::None,
    }
}

pub(super) fn upload_world(scenario: &Scenario) -> (Upload, SimKernel, SimHost) {
    let config = UploadConfig {
        overwrite: scenario.overwrite,
        chunk_size: scenario.chunk_size,
        chunks_per_request: scenario.chunks_per_request,
        max_bytes: scenario.max_bytes,
        wire: scenario.wire,
        ..UploadConfig::new(SOURCE_HOST, KERNEL_FILE, NONCE, scenario.data.len() as u64)
    };
    let mut kernel = SimKernel::default();
    if let Some(existing) = &scenario.existing_destination {
        kernel.files.insert(KERNEL_FILE.into(), existing.clone());
    }
    let mut host = SimHost::default();
    host.files.insert(SOURCE_HOST.into(), scenario.data.clone());
    (Upload::new(config).unwrap(), kernel, host)
}

pub(super) fn download_world(scenario: &Scenario) -> (Download, SimKernel, SimHost) {
    let config = DownloadConfig {
        overwrite: scenario.overwrite,
        chunk_size: scenario.chunk_size,
        chunks_per_request: scenario.chunks_per_request,
        max_bytes: scenario.max_bytes,
        wire: scenario.wire,
        buffered_chunks_per_request: scenario.buffered_chunks_per_request,
        ..DownloadConfig::new(DEST_HOST, KERNEL_FILE, NONCE)
    };
    let mut kernel = SimKernel::default();
    kernel
        .files
        .insert(KERNEL_FILE.into(), scenario.data.clone());
    let mut host = SimHost::default();
    if let Some(existing) = &scenario.existing_destination {
        host.files.insert(DEST_HOST.into(), existing.clone());
    }
    (Download::new(config).unwrap(), kernel, host)
}

/// Counts the steps of a fault-free run, so faults can be pinned to steps that happen:
/// `kernel_steps` besides one per batch of chunks, one host action per batch and `host_fixed`
/// others.
pub(super) fn counts(
    kernel_steps: usize,
    batches: usize,
    host_fixed: usize,
) -> (usize, usize, usize) {
    let host = batches + host_fixed;
    (kernel_steps + batches, host, kernel_steps + batches + host)
}

/// The batches of a fault-free upload.
pub(super) fn upload_batches(scenario: &Scenario) -> usize {
    scenario
        .data
        .len()
        .div_ceil(scenario.chunk_size * scenario.chunks_per_request)
}

/// The batches of a fault-free download: the first of `chunks_per_request` chunks, the rest of
/// `buffered_chunks_per_request` when the kernel sends buffers.
pub(super) fn download_batches(scenario: &Scenario) -> usize {
    let len = scenario.data.len();
    let first = scenario.chunk_size * scenario.chunks_per_request;
    if !(scenario.wire == KernelWire::Messages) || len <= first {
        return len.div_ceil(first);
    }
    1 + (len - first).div_ceil(scenario.chunk_size * scenario.buffered_chunks_per_request)
}

/// The model: what the destination and temp files may look like after an outcome.
pub(super) fn check_outcome(
    run: &Run,
    scenario: &Scenario,
    fault: &Fault,
    destination: Option<&Vec<u8>>,
    temps: Vec<String>,
) -> Result<(), TestCaseError> {
    let data = &scenario.data;
    let before = scenario.existing_destination.as_ref();
    let refused_existing = before.is_some() && !scenario.overwrite;
    match &run.outcome {
        Action::Done(receipt) => {
            prop_assert!(
                !fault.is_harmful(),
                "a harmful fault went unnoticed: {fault:?}"
            );
            prop_assert!(
                !refused_existing,
                "an existing destination was replaced without overwrite"
            );
            prop_assert_eq!(destination, Some(data));
            prop_assert_eq!(receipt.bytes, data.len() as u64);
            prop_assert_eq!(&receipt.sha256, &sha256_hex(data));
            prop_assert_eq!(run.budget.used(), data.len() as u64);
            prop_assert!(temps.is_empty(), "temp files left after success: {temps:?}");
        }
        Action::Failed(TransferError::Failed { cause, .. }) => {
            prop_assert_eq!(
                destination,
                before,
                "a failure before commit touched the destination"
            );
            if matches!(fault, Fault::None) {
                prop_assert!(refused_existing);
                prop_assert_eq!(cause, &Cause::DestinationExists);
            }
        }
        Action::Failed(TransferError::Uncertain { .. }) => {
            prop_assert!(fault.is_harmful());
            prop_assert!(destination == before || destination == Some(data));
        }
        Action::Failed(TransferError::CommittedCleanupUnconfirmed { receipt, .. }) => {
            prop_assert!(fault.is_harmful());
            prop_assert_eq!(destination, Some(data));
            prop_assert_eq!(&receipt.sha256, &sha256_hex(data));
        }
        Action::Failed(TransferError::InvalidArgument { .. })
        | Action::ReadHostChunk { .. }
        | Action::ExecuteKernel(_)
        | Action::CreateHostTemp { .. }
        | Action::WriteHostChunk { .. }
        | Action::PromoteHostFile { .. }
        | Action::RemoveHostTemp { .. } => {
            prop_assert!(false, "unexpected outcome {:?}", run.outcome)
        }
    }
    match reported_leftover(&run.outcome) {
        None => prop_assert!(
            temps.is_empty(),
            "unreported temp files: {temps:?} after {:?}",
            run.outcome
        ),
        Some(leftover) => {
            prop_assert!(temps.iter().all(|temp| *temp == leftover.path));
            // In the simulator cleanup works whenever it is attempted, so a leftover is reported
            // only when cleanup was impossible (the kernel is gone) or was itself the fault.
            let committed = matches!(
                run.outcome,
                Action::Failed(TransferError::CommittedCleanupUnconfirmed { .. })
            );
            prop_assert!(
                run.kernel.gone || committed || run.fault_hit_cleanup,
                "cleanup was skipped: {:?}",
                run.outcome
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn uploads_round_trip_or_fail_safely(scenario in scenario(700_000)) {
        let (kernel_steps, host_actions, actions) = counts(2, upload_batches(&scenario), 0);
        let fault = pin_fault(&scenario.fault, kernel_steps, host_actions, actions);
        let (upload, kernel, host) = upload_world(&scenario);
        let temp = upload.temp_path().to_owned();
        let run = run(upload, kernel, host, KernelBudget::new(), &fault);
        let temps = temp_files(&run.kernel.files);
        prop_assert!(temps.iter().all(|name| *name == temp));
        check_outcome(&run, &scenario, &fault, run.kernel.files.get(KERNEL_FILE), temps)?;
        // Batches were sent at increasing offsets, each of at most `chunks_per_request` chunks of
        // exactly the chunk size, except the file's last chunk.
        let mut expected_offset = 0;
        for operation in &run.kernel.executed {
            if let KernelOperation::AppendChunks { offset, chunks, .. } = operation {
                prop_assert_eq!(*offset, expected_offset);
                prop_assert!(!chunks.is_empty() && chunks.len() <= scenario.chunks_per_request);
                for chunk in chunks {
                    expected_offset += chunk.raw_len;
                    let last = expected_offset == scenario.data.len() as u64;
                    prop_assert!(chunk.raw_len as usize == scenario.chunk_size || (last && chunk.raw_len as usize <= scenario.chunk_size));
                }
            }
        }
    }

    #[test]
    fn downloads_round_trip_or_fail_safely(scenario in scenario(700_000)) {
        let (kernel_steps, host_actions, actions) =
            counts(2, download_batches(&scenario), 2 + usize::from(!scenario.overwrite));
        let fault = pin_fault(&scenario.fault, kernel_steps, host_actions, actions);
        let (download, kernel, host) = download_world(&scenario);
        let run = run(download, kernel, host, KernelBudget::new(), &fault);
        let read_only = run.kernel.executed.iter().all(|operation| matches!(
            operation,
            KernelOperation::InspectSource { .. } | KernelOperation::ReadChunks { .. } | KernelOperation::HashSource { .. }
        ));
        prop_assert!(read_only, "a download changed the kernel's files");
        // Batches were asked for at increasing offsets, in chunks of the chunk size: the first of
        // `chunks_per_request` chunks, after a buffered reply of `buffered_chunks_per_request`,
        // every one but the last full.
        let batches: Vec<(u64, u64)> = run.kernel.executed.iter().filter_map(|operation| match operation {
            KernelOperation::ReadChunks { offset, len, chunk_size, .. } => {
                assert_eq!(*chunk_size, scenario.chunk_size as u64);
                Some((*offset, *len))
            }
            _ => None,
        }).collect();
        let mut expected_offset = 0;
        for (index, (offset, len)) in batches.iter().enumerate() {
            prop_assert_eq!(*offset, expected_offset);
            let chunks = if (scenario.wire == KernelWire::Messages) && index > 0 {
                scenario.buffered_chunks_per_request
            } else {
                scenario.chunks_per_request
            };
            let full = (scenario.chunk_size * chunks) as u64;
            let last = index + 1 == batches.len();
            prop_assert!(*len == full || (last && *len > 0 && *len < full), "batch {} of {} bytes, expected {}", index, len, full);
            expected_offset += len;
        }
        let temps = temp_files(&run.host.files);
        check_outcome(&run, &scenario, &fault, run.host.files.get(DEST_HOST), temps)?;
    }

    #[test]
    fn budgets_refuse_before_dispatch(scenario in scenario(300_000), spare in 0u64..1000) {
        prop_assume!(!scenario.data.is_empty());
        let limit = (scenario.data.len() as u64 - 1).saturating_sub(spare);
        let scenario = Scenario { fault: Fault::None, ..scenario };

        let (upload, kernel, host) = upload_world(&scenario);
        let run_upload = run(upload, kernel, host, KernelBudget::with_limit(limit), &Fault::None);
        prop_assert!(run_upload.kernel.executed.is_empty(), "an upload over budget sent code");
        prop_assert_eq!(run_upload.budget.used(), 0);
        let is_budget_refusal = matches!(
            &run_upload.outcome,
            Action::Failed(TransferError::Failed { phase: Phase::ValidateSource, cause: Cause::BudgetExhausted { .. }, leftover: None, .. })
        );
        prop_assert!(is_budget_refusal, "{:?}", run_upload.outcome);

        let (download, kernel, host) = download_world(&scenario);
        let run_download = run(download, kernel, host, KernelBudget::with_limit(limit), &Fault::None);
        prop_assert_eq!(run_download.kernel.executed.len(), 1, "a download over budget read chunks");
        prop_assert!(run_download.host.files.is_empty() || run_download.host.files.keys().all(|name| name == DEST_HOST));
        let is_budget_refusal = matches!(
            &run_download.outcome,
            Action::Failed(TransferError::Failed { phase: Phase::InspectRemoteSource, cause: Cause::BudgetExhausted { .. }, leftover: None, .. })
        );
        prop_assert!(is_budget_refusal, "{:?}", run_download.outcome);
    }

    #[test]
    fn restarts_invalidate_and_silence_the_kernel(scenario in scenario(200_000), step in any::<usize>(), ran in any::<bool>()) {
        let (kernel_steps, _, _) = counts(2, upload_batches(&scenario), 0);
        let fault = Fault::Kernel { step: step % kernel_steps, failure: KernelFailure::Restarted, ran };
        let (upload, kernel, host) = upload_world(&scenario);
        // `SimKernel::execute` panics if anything is sent after the restart.
        let upload_run = run(upload, kernel, host, KernelBudget::new(), &fault);
        let invalidated = matches!(upload_run.outcome, Action::Failed(TransferError::Failed { .. } | TransferError::Uncertain { .. }));
        prop_assert!(invalidated, "{:?}", upload_run.outcome);
        prop_assert_eq!(upload_run.kernel_steps, step % kernel_steps + 1);

        let (download_steps, _, _) = counts(2, download_batches(&scenario), 0);
        let fault = Fault::Kernel { step: step % download_steps, failure: KernelFailure::Restarted, ran };
        let (download, kernel, host) = download_world(&scenario);
        let download_run = run(download, kernel, host, KernelBudget::new(), &fault);
        let is_failure = matches!(&download_run.outcome, Action::Failed(TransferError::Failed { .. }));
        prop_assert!(is_failure);
        prop_assert!(temp_files(&download_run.host.files).is_empty());
    }

    #[test]
    fn reply_parsing_never_panics(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_reply_parsing(&data);
    }

    #[test]
    fn damaged_receipts_never_panic(json in "\\{(\"[a-z]{1,8}\":(-?[0-9]{1,20}|\"[A-Za-z0-9+/=]{0,12}\"|true|null|\\[\\]),?){0,6}\\}") {
        let nonce = Nonce::parse("fuzz-nonce").unwrap();
        drive_with_constant_reply(&format!("{RECEIPT_MARKER}fuzz-nonce:{json}\n").into(), &nonce);
        check_reply_parsing(format!("{RECEIPT_MARKER}fuzz-nonce:{json}").as_bytes());
    }
}

/// Drives a machine through the simulator and returns the outcome's message.
pub(super) fn message(outcome: &Action) -> String {
    match outcome {
        Action::Done(receipt) => format!(
            "done: {} bytes, sha256 {}",
            receipt.bytes,
            &receipt.sha256[..12]
        ),
        Action::Failed(error) => error.to_string(),
        other => format!("not terminal: {other:?}"),
    }
}

/// Ten bytes in chunks of four, two chunks per request: batches of 8 and 2 bytes.
pub(super) fn small_scenario(fault: Fault) -> Scenario {
    Scenario {
        data: test_bytes(10, 1, false),
        chunk_size: 4,
        chunks_per_request: 2,
        overwrite: false,
        existing_destination: None,
        max_bytes: DEFAULT_MAX_BYTES,
        wire: KernelWire::CodeOnly,
        buffered_chunks_per_request: 2,
        fault,
    }
}
