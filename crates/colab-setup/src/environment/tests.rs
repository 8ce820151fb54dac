use super::*;

fn folder(uri: &str, name: &str) -> WindowFolder {
    WindowFolder {
        uri: uri.to_owned(),
        canonical_uri: uri.to_lowercase(),
        name: name.to_owned(),
    }
}

#[test]
fn open_work_blockers_come_in_a_fixed_order_and_only_for_open_work() {
    assert!(OpenWork::default().blockers().is_empty());
    let everything = OpenWork {
        notebooks_open: 1,
        dirty_documents: 0,
        untitled_documents: 2,
        terminals: 1,
        debug_sessions: 1,
    };
    assert_eq!(
        everything.blockers(),
        [
            "notebooks_open",
            "documents_unsaved",
            "terminals_open",
            "debugging_active"
        ]
    );
    let dirty = OpenWork {
        dirty_documents: 1,
        ..OpenWork::default()
    };
    assert_eq!(dirty.blockers(), ["documents_unsaved"]);
}

#[test]
fn preflight_counts_open_work_only_outside_a_workspace() {
    let open_work = OpenWork {
        terminals: 3,
        ..OpenWork::default()
    };
    let facts = WindowFacts {
        extension_installed: false,
        activation_failed: true,
        native_configured: true,
        native_reachable: false,
        is_workspace: false,
        open_work,
    };
    assert_eq!(
        preflight_blockers(&facts),
        [
            "colab_extension_missing",
            "colab_activation_failed",
            "native_unreachable",
            "terminals_open"
        ]
    );
    let workspace = WindowFacts {
        extension_installed: true,
        activation_failed: false,
        native_configured: false,
        native_reachable: false,
        is_workspace: true,
        open_work,
    };
    assert_eq!(preflight_blockers(&workspace), ["native_not_configured"]);
}

#[test]
fn listed_terminals_are_bounded_and_only_positive_pids_are_shells() {
    assert_eq!(listed_terminal_name(&"x".repeat(100)).chars().count(), 64);
    assert_eq!(listed_shell_type(&"é".repeat(40)).chars().count(), 32);
    assert_eq!(listed_shell_pid(Some(42)), Some(42));
    assert_eq!(listed_shell_pid(Some(0)), None);
    assert_eq!(listed_shell_pid(Some(-1)), None);
    assert_eq!(listed_shell_pid(Some(i64::from(u32::MAX) + 1)), None);
    assert_eq!(listed_shell_pid(None), None);
}

fn inventory() -> TerminalInventory<&'static str> {
    TerminalInventory::new(
        "inv-1".to_owned(),
        1_000,
        [("t1".to_owned(), "bash"), ("t2".to_owned(), "colab")],
    )
}

/// The terminals `references` name in the latest inventory, asked for at once.
fn targets(references: &[&str]) -> Result<Vec<(String, &'static str)>, InventoryRefusal> {
    let references: Vec<String> = references
        .iter()
        .map(|&reference| reference.into())
        .collect();
    inventory().targets("inv-1", &references, 1_000)
}

#[test]
fn an_inventory_names_its_terminals_in_the_order_asked() {
    assert_eq!(
        targets(&["t2", "t1"]).unwrap(),
        [("t2".to_owned(), "colab"), ("t1".to_owned(), "bash")]
    );
}

#[test]
fn an_inventory_lives_sixty_seconds_and_only_while_latest() {
    let inventory = inventory();
    assert!(inventory.targets("inv-1", &[], 61_000).is_ok());
    assert_eq!(
        inventory.targets("inv-1", &[], 61_001),
        Err(InventoryRefusal::Expired {
            inventory_id: "inv-1".to_owned()
        })
    );
    assert_eq!(
        inventory.targets("inv-0", &[], 1_000),
        Err(InventoryRefusal::NotLatest {
            inventory_id: "inv-0".to_owned()
        })
    );
    assert_eq!(
        close_targets::<&str>(None, "inv-1", &[], 1_000),
        Err(InventoryRefusal::NotLatest {
            inventory_id: "inv-1".to_owned()
        })
    );
}

#[test]
fn one_unknown_reference_closes_nothing() {
    let refusal = targets(&["t1", "t9"]).unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "`t9` is not a terminalRef of inventory `inv-1`. Nothing was closed"
    );
}

#[test]
fn only_a_clear_answer_is_a_closure() {
    assert_eq!(
        ClosureOutcome::from_answer(Some("closed")),
        ClosureOutcome::Closed
    );
    assert_eq!(
        ClosureOutcome::from_answer(Some("already_gone")).as_str(),
        "already_gone"
    );
    assert_eq!(
        ClosureOutcome::from_answer(Some("weird")),
        ClosureOutcome::Uncertain
    );
    assert_eq!(ClosureOutcome::from_answer(None), ClosureOutcome::Uncertain);
    assert!(!closure_partial(&[ClosureOutcome::Closed]));
    assert!(closure_partial(&[
        ClosureOutcome::Closed,
        ClosureOutcome::AlreadyGone
    ]));
}

#[test]
fn a_workspace_keeps_its_folder_and_never_gains_another() {
    let folders = [
        folder("colab://m1/", "Colab"),
        folder("file:///a", "a"),
        folder("file:///b", "b"),
    ];
    assert_eq!(
        plan_folder(true, &folders, None, "prep-1"),
        Ok(FolderPlan::Keep {
            uri: "file:///a".to_owned(),
            name: "a".to_owned()
        })
    );
    assert_eq!(
        plan_folder(true, &folders, Some(("file:///B", "file:///b")), "prep-1"),
        Ok(FolderPlan::Keep {
            uri: "file:///b".to_owned(),
            name: "b".to_owned()
        })
    );
    let refusal = plan_folder(true, &folders, Some(("file:///c", "file:///c")), "prep-1");
    assert_eq!(refusal, Err(FolderRefusal::NotInWorkspace));
    assert_eq!(refusal.unwrap_err().blocker(), Some("folder_mismatch"));
}

#[test]
fn a_single_folder_is_converted_under_its_colab_name() {
    let folders = [folder("file:///work/project", "project")];
    assert_eq!(
        plan_folder(false, &folders, None, "prep-1"),
        Ok(FolderPlan::Convert {
            uri: "file:///work/project".to_owned(),
            name: "project (Colab)".to_owned(),
            must_exist: false
        })
    );
    assert_eq!(
        plan_folder(
            false,
            &folders,
            Some(("file:///other", "file:///other")),
            "p"
        ),
        Err(FolderRefusal::AnotherFolderOpen)
    );
}

#[test]
fn an_empty_window_converts_to_the_named_folder_or_a_generated_one() {
    assert_eq!(
        plan_folder(
            false,
            &[],
            Some(("file:///Work/Data", "file:///work/data")),
            "p"
        ),
        Ok(FolderPlan::Convert {
            uri: "file:///work/data".to_owned(),
            name: "data (Colab)".to_owned(),
            must_exist: true
        })
    );
    assert_eq!(
        plan_folder(false, &[], None, "prep-7"),
        Ok(FolderPlan::Generate {
            name: "prep-7 (Colab)".to_owned()
        })
    );
}

#[test]
fn several_folders_without_a_workspace_and_remote_uris_are_refused() {
    let folders = [folder("file:///a", "a"), folder("file:///b", "b")];
    let refusal = plan_folder(false, &folders, None, "p").unwrap_err();
    assert_eq!(refusal.blocker(), Some("folders_without_workspace"));
    let remote = plan_folder(
        false,
        &[],
        Some(("vscode-remote://x/a", "vscode-remote://x/a")),
        "p",
    )
    .unwrap_err();
    assert_eq!(remote.blocker(), None);
    assert!(remote.to_string().contains("vscode-remote://x/a"));
}

#[test]
fn restart_modes_are_refused_with_what_to_do() {
    assert_eq!(
        restart_mode_refusal("restore-clean-workspace"),
        RestartModeRefusal::Unsupported
    );
    assert!(
        restart_mode_refusal("reboot")
            .to_string()
            .starts_with("restartMode `reboot` is not a mode")
    );
}

fn record(status: PreparationStatus) -> PreparationRecord<'static> {
    PreparationRecord {
        folder_uri: "file:///a",
        folder_name: "a (Colab)",
        converted: true,
        generated: true,
        status,
    }
}

fn view<'a>(folders: &'a [(&'a str, &'a str)]) -> PreparationView<'a> {
    PreparationView {
        folders,
        is_workspace: true,
        trusted: true,
        generated_folder_owned: true,
        native_blocker: None,
    }
}

#[test]
fn a_preparation_is_ready_only_when_nothing_blocks() {
    let folders = [("file:///a", "a (Colab)")];
    assert_eq!(
        check_preparation(&record(PreparationStatus::Converting), &view(&folders)),
        (PreparationStatus::Ready, Vec::new())
    );
}

#[test]
fn a_converting_preparation_stays_converting_until_it_settles() {
    let folders = [("file:///a", "a")];
    let window = PreparationView {
        is_workspace: false,
        ..view(&folders)
    };
    assert_eq!(
        check_preparation(&record(PreparationStatus::Converting), &window),
        (
            PreparationStatus::Converting,
            vec![
                "folder_renamed".to_owned(),
                "workspace_not_converted".to_owned()
            ]
        )
    );
    let (status, blockers) = check_preparation(
        &record(PreparationStatus::Ready),
        &PreparationView {
            trusted: false,
            generated_folder_owned: false,
            native_blocker: Some("marker_missing"),
            ..view(&[])
        },
    );
    assert_eq!(status, PreparationStatus::Failed);
    assert_eq!(
        blockers,
        [
            "folder_missing",
            "workspace_untrusted",
            "generated_folder_changed",
            "marker_missing"
        ]
    );
}

#[test]
fn stored_statuses_round_trip_and_unknown_ones_fail() {
    for status in [
        PreparationStatus::Converting,
        PreparationStatus::Ready,
        PreparationStatus::Failed,
    ] {
        assert_eq!(PreparationStatus::parse(status.as_str()), status);
    }
    assert_eq!(PreparationStatus::parse("??"), PreparationStatus::Failed);
}
