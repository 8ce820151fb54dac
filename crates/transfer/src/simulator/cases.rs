//! Worked examples: outcomes as messages, budgets, host protocol violations, arguments, deadlines.

use super::model::*;
use super::run::*;
use super::*;

#[test]
fn outcomes_read_well() {
    let with_destination = || Scenario {
        existing_destination: Some(b"old".to_vec()),
        ..small_scenario(Fault::None)
    };
    let too_large = || Scenario {
        max_bytes: 9,
        ..small_scenario(Fault::None)
    };
    let reply = |step, fault| small_scenario(Fault::Reply { step, fault });
    let kernel = |step, failure, ran| small_scenario(Fault::Kernel { step, failure, ran });
    let buffered = |scenario| Scenario {
        wire: KernelWire::Messages,
        ..scenario
    };
    let host = |action, kind| small_scenario(Fault::Host { action, kind });
    let uploads = vec![
        ("clean", small_scenario(Fault::None)),
        ("destination exists", with_destination()),
        ("too large", too_large()),
        ("promote timed out", kernel(3, KernelFailure::Timeout, true)),
        (
            "chunk receipt corrupted",
            reply(2, ReplyFault::CorruptNumber),
        ),
        ("chunk count short", reply(1, ReplyFault::DropChunk)),
        ("kernel died", kernel(1, KernelFailure::Died, false)),
        ("create receipt duplicated", reply(0, ReplyFault::Duplicate)),
        ("host read failed", host(1, ErrorKind::PermissionDenied)),
    ];
    let downloads = vec![
        ("clean", small_scenario(Fault::None)),
        ("destination exists", with_destination()),
        ("chunk data corrupted", reply(1, ReplyFault::CorruptData)),
        (
            "clean, chunks as buffers",
            buffered(small_scenario(Fault::None)),
        ),
        (
            "chunk buffer corrupted",
            buffered(reply(1, ReplyFault::CorruptData)),
        ),
        ("wrong nonce", reply(2, ReplyFault::WrongNonce)),
        ("chunk left out", reply(1, ReplyFault::DropChunk)),
        (
            "temp cleanup after commit failed",
            host(4, ErrorKind::PermissionDenied),
        ),
        ("restarted", kernel(2, KernelFailure::Restarted, true)),
        ("cancelled", small_scenario(Fault::Cancel { action: 3 })),
        ("too large", too_large()),
    ];
    let mut lines = Vec::new();
    for (direction, cases) in [
        (Direction::Upload, uploads),
        (Direction::Download, downloads),
    ] {
        for (label, scenario) in cases {
            let run = match direction {
                Direction::Upload => {
                    let (machine, kernel, host) = upload_world(&scenario);
                    run(machine, kernel, host, KernelBudget::new(), &scenario.fault)
                }
                Direction::Download => {
                    let (machine, kernel, host) = download_world(&scenario);
                    run(machine, kernel, host, KernelBudget::new(), &scenario.fault)
                }
            };
            lines.push(format!("{direction}, {label}: {}", message(&run.outcome)));
        }
    }
    expect_test::expect![[r#"
        upload, clean: done: 10 bytes, sha256 1797cf887cb7
        upload, destination exists: upload failed before destination commit during verify and promote destination: the destination already exists; pass overwrite: true to replace it
        upload, too large: upload failed before destination commit during validate source: the file has 10 bytes, more than maxBytes (9); raise maxBytes if this is intended
        upload, promote timed out: upload outcome is uncertain: promotion of /content/däta "q".bin was requested but not confirmed (the kernel did not answer before the deadline); check the destination before retrying
        upload, chunk receipt corrupted: upload failed before destination commit during transfer chunk: invalid receipt: field "offset" is 9, expected 8
        upload, chunk count short: upload failed before destination commit during transfer chunk: invalid receipt: field "count" is 1, expected 2
        upload, kernel died: upload failed before destination commit during transfer chunk: the kernel died or disappeared; the kernel temporary file /content/däta "q".bin.jupyter-mcp-6f1c2a9e-5b0d-4c1e-9a53-0d8f2b7c4e11.part may remain
        upload, create receipt duplicated: upload failed before destination commit during initialize remote temporary file: invalid receipt: 2 receipt lines for this transfer, expected one
        upload, host read failed: upload failed before destination commit during transfer chunk: host file operation failed: permission denied
        download, clean: done: 10 bytes, sha256 1797cf887cb7
        download, destination exists: download failed before destination commit during promote destination: the destination already exists; pass overwrite: true to replace it
        download, chunk data corrupted: download failed before destination commit during verify remote source: the kernel's SHA-256 of the source differs from the transferred bytes; the source changed or data was corrupted
        download, clean, chunks as buffers: done: 10 bytes, sha256 1797cf887cb7
        download, chunk buffer corrupted: download failed before destination commit during verify remote source: the kernel's SHA-256 of the source differs from the transferred bytes; the source changed or data was corrupted
        download, wrong nonce: download failed before destination commit during transfer chunk: invalid receipt: no receipt line for this transfer
        download, chunk left out: download failed before destination commit during transfer chunk: invalid receipt: field "chunks" is 1, expected 2
        download, temp cleanup after commit failed: download was committed to /host/dest.bin but temporary-file cleanup could not be confirmed: the host temporary file /host/dest.bin.jupyter-mcp-6f1c2a9e-5b0d-4c1e-9a53-0d8f2b7c4e11.part may remain
        download, restarted: download failed before destination commit during transfer chunk: a kernel restart was observed, which invalidates the transfer
        download, cancelled: download failed before destination commit during transfer chunk: cancelled
        download, too large: download failed before destination commit during inspect remote source: the file has 10 bytes, more than maxBytes (9); raise maxBytes if this is intended
    "#]].assert_eq(&(lines.join("\n") + "\n"));
}

#[test]
fn a_budget_used_up_mid_transfer_refuses_the_next_chunk_before_dispatch() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, mut host) = upload_world(&scenario);
    let mut budget = KernelBudget::with_limit(12);
    let mut sent_chunks = 0;
    let outcome = loop {
        let action = upload.next_action(&mut budget);
        let event = match &action {
            Action::ExecuteKernel(step) => {
                if let KernelOperation::AppendChunks { .. } = step.request.operation {
                    sent_chunks += 1;
                    // Another transfer on the same kernel object uses up the rest.
                    let remaining = budget.remaining();
                    budget.try_charge(remaining).unwrap();
                }
                Event::KernelReply(kernel.execute(&step.request))
            }
            Action::Done(_) | Action::Failed(_) => break action,
            other => host.perform(other).unwrap(),
        };
        upload.handle(event);
    };
    assert_eq!(sent_chunks, 1);
    assert!(matches!(
        kernel.executed.last(),
        Some(KernelOperation::RemoveTemp { .. })
    ));
    assert!(kernel.files.is_empty(), "the temp file was cleaned up");
    expect_test::expect!["upload failed before destination commit during transfer chunk: this kernel may carry only 0 more bytes of its 12-byte chunk-transfer budget, and 2 are needed; restart the kernel to reset the budget, or move the file another way"].assert_eq(&message(&outcome));
}

#[test]
fn host_protocol_violations_fail_safely() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, _) = upload_world(&scenario);
    let mut budget = KernelBudget::new();
    let Action::ExecuteKernel(step) = upload.next_action(&mut budget) else {
        panic!()
    };
    upload.handle(Event::KernelReply(kernel.execute(&step.request)));
    // The machine asks for a host read; the host answers as if it were a kernel step.
    assert!(matches!(
        upload.next_action(&mut budget),
        Action::ReadHostChunk { .. }
    ));
    upload.handle(Event::HostDone);
    let Action::ExecuteKernel(cleanup) = upload.next_action(&mut budget) else {
        panic!()
    };
    assert!(matches!(
        cleanup.request.operation,
        KernelOperation::RemoveTemp { .. }
    ));
    assert_eq!(cleanup.deadline, Deadline::Cleanup);
    upload.handle(Event::KernelReply(kernel.execute(&cleanup.request)));
    expect_test::expect!["upload failed before destination commit during transfer chunk: internal error: the host answered a transfer step out of order"].assert_eq(&message(&upload.next_action(&mut budget)));
    // Events after the end change nothing.
    upload.handle(Event::HostDone);
    assert!(upload.next_action(&mut budget).is_terminal());

    // Asking twice without answering: the outstanding inspect step is abandoned.
    let (mut download, _, _) = download_world(&scenario);
    let _ = download.next_action(&mut budget);
    expect_test::expect!["download failed before destination commit during inspect remote source: internal error: the host answered a transfer step out of order"].assert_eq(&message(&download.next_action(&mut budget)));
}

#[test]
fn invalid_arguments_are_refused_up_front() {
    let errors: Vec<String> = [
        UploadConfig::new("/h", "C:\\x", NONCE, 1),
        UploadConfig::new("/h", "/k", "short", 1),
        UploadConfig {
            max_bytes: 0,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig {
            chunk_size: CHUNK_SIZE + 1,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig {
            chunks_per_request: CHUNKS_PER_REQUEST + 1,
            ..UploadConfig::new("/h", "/k", NONCE, 1)
        },
        UploadConfig::new("", "/k", NONCE, 1),
    ]
    .into_iter()
    .map(|config| Upload::new(config).map(|_| ()).unwrap_err().to_string())
    .collect();
    expect_test::expect![[r#"
        invalid kernelPath: "C:/x" is not an absolute POSIX path (backslashes count as '/'); give a kernel-side path such as /content/data.csv
        invalid nonce: a nonce is 8 to 64 characters of letters, digits, '-' and '_' (a random UUID fits)
        invalid maxBytes: it must be a positive safe integer
        invalid chunkSize: it must be between 1 and 262144
        invalid chunksPerRequest: it must be between 1 and 8
        invalid hostPath: it is empty
    "#]].assert_eq(&(errors.join("\n") + "\n"));
    let refused = Download::new(DownloadConfig {
        buffered_chunks_per_request: 0,
        ..DownloadConfig::new("/h", "/k", NONCE)
    })
    .map(|_| ())
    .unwrap_err()
    .to_string();
    expect_test::expect!["invalid bufferedChunksPerRequest: it must be between 1 and 8"]
        .assert_eq(&refused);
}

#[test]
fn deadlines_match_the_steps() {
    let scenario = small_scenario(Fault::None);
    let (mut upload, mut kernel, mut host) = upload_world(&scenario);
    let mut budget = KernelBudget::new();
    let mut seen = Vec::new();
    loop {
        let action = upload.next_action(&mut budget);
        let event = match &action {
            Action::ExecuteKernel(step) => {
                seen.push(format!(
                    "{:?} {:?} ({})",
                    step.deadline,
                    step.deadline.duration(),
                    step.phase
                ));
                Event::KernelReply(kernel.execute(&step.request))
            }
            Action::Done(_) | Action::Failed(_) => break,
            other => host.perform(other).unwrap(),
        };
        upload.handle(event);
    }
    expect_test::expect![[r#"
        Lookup 60s (initialize remote temporary file)
        Payload 120s (transfer chunk)
        Payload 120s (transfer chunk)
        Lookup 60s (verify and promote destination)
    "#]]
    .assert_eq(&(seen.join("\n") + "\n"));
}
