//! The `check_colab` kernel program, run for real.
//!
//! A `python3` subprocess stands in for the kernel and `std::fs` for the runtime's file service.
//! A temporary directory stands in for `/content` (the test rewrites the probe path in the
//! generated code), and a stub `google.colab` package on `PYTHONPATH` stands in for Colab's
//! module; `COLAB_RELEASE_TAG` is set the way Colab sets it. This checks the Python itself: the
//! exclusive create, the diagnostics, the removal that touches only our own probe, and that the
//! program leaves no name in the namespace it runs in.
//!
//! Python is found through `JUPYTER_MCP_TEST_PYTHON`, else `<workspace>/.venv/bin/python`, else
//! `python3` on the `PATH`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use colab_setup::{
    CheckAction, CheckCommandKind, CheckEvent, CheckOutcome, CheckReply, CheckTimeouts,
    CleanupState, ColabCheck, FileServiceRoot, Nonce, PROBE_DIRECTORY,
};

const RELEASE_TAG: &str = "release-colab_20260801-060000_RC00";

fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("JUPYTER_MCP_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

/// A scratch directory with `content/` and a stub `google.colab` package, removed on drop.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "colab-setup-python-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("content")).unwrap();
        let package = root.join("packages/google/colab");
        fs::create_dir_all(&package).unwrap();
        fs::write(root.join("packages/google/__init__.py"), "").unwrap();
        fs::write(package.join("__init__.py"), "").unwrap();
        Scratch { root }
    }

    fn content(&self) -> PathBuf {
        self.root.join("content")
    }

    /// Where a kernel path lands in the scratch directory.
    fn local(&self, kernel_path: &str) -> PathBuf {
        let relative = kernel_path
            .strip_prefix(&format!("{PROBE_DIRECTORY}/"))
            .expect("probes live in /content");
        self.content().join(relative)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Runs generated kernel code the way a kernel would, in a fresh interpreter, and returns its
/// stdout. The code is followed by a line that prints the names left in the namespace.
fn run_kernel(scratch: &Scratch, code: &str) -> (String, String) {
    let content = format!("{}/", scratch.content().display());
    let code = code.replace(&format!("{PROBE_DIRECTORY}/"), &content);
    let code = format!(
        "{code}print('__NAMES__', sorted(n for n in globals() if not n.startswith('__')))\n"
    );
    let output = Command::new(python())
        .arg("-c")
        .arg(&code)
        .env("PYTHONPATH", scratch.root.join("packages"))
        .env("COLAB_RELEASE_TAG", RELEASE_TAG)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let (program, names) = stdout
        .split_once("__NAMES__ ")
        .expect("the namespace line is printed");
    (program.to_owned(), names.trim().to_owned())
}

/// Performs every step of a check, answering each command with `answer`, until it finishes.
fn drive_with(
    check: &mut ColabCheck,
    mut actions: Vec<CheckAction>,
    mut answer: impl FnMut(&CheckCommandKind) -> CheckReply,
) -> bool {
    let mut now = 0;
    loop {
        let command = match actions.pop().expect("the check stopped without finishing") {
            CheckAction::Finished { verified } => return verified,
            CheckAction::Perform(command) => command,
        };
        let reply = answer(&command.kind);
        now += 10;
        actions = check.apply(
            CheckEvent::Reply {
                step: command.step,
                reply,
            },
            now,
        );
    }
}

/// What the file service says of `path`'s existence.
fn stat(path: &Path) -> CheckReply {
    if path.exists() {
        CheckReply::FileExists
    } else {
        CheckReply::FileMissing
    }
}

/// Performs every step of a check against the scratch directory until it finishes.
fn drive(check: &mut ColabCheck, scratch: &Scratch, actions: Vec<CheckAction>) -> bool {
    drive_with(check, actions, |kind| match kind {
        CheckCommandKind::ExecuteKernel { code } => {
            let (stdout, names) = run_kernel(scratch, code);
            assert_eq!(names, "[]", "the program left names behind");
            CheckReply::KernelOutput { stdout }
        }
        CheckCommandKind::ReadBuildInfo => CheckReply::BuildInfo {
            release_tag: Some(RELEASE_TAG.to_owned()),
        },
        CheckCommandKind::ReadFile { path, .. } => {
            match fs::read(scratch.local(&format!("/{path}"))) {
                Ok(bytes) => CheckReply::FileContent(bytes),
                Err(_) => CheckReply::FileMissing,
            }
        }
        CheckCommandKind::StatFile { path, .. } => stat(&scratch.local(&format!("/{path}"))),
    })
}

fn new_check(nonce: &Nonce) -> ColabCheck {
    let root = FileServiceRoot::parse("colab://m0123abcd/").unwrap();
    ColabCheck::new(root, nonce.clone(), CheckTimeouts::default(), 0)
}

#[test]
fn the_probe_is_written_read_removed_and_confirmed_gone() {
    let scratch = Scratch::new();
    let nonce = Nonce::from_bytes(*b"0123456789abcdef");
    let mut check = new_check(&nonce);
    let actions = check.start(0);
    let verified = drive(&mut check, &scratch, actions);
    let receipt = check.receipt();
    assert!(verified, "{receipt:#?}");
    assert!(receipt.pid.is_some_and(|pid| pid > 0));
    assert!(receipt.python_version.unwrap().starts_with("3."));
    assert_eq!(receipt.system.as_deref(), Some("Linux"));
    assert_eq!(
        receipt.identity.kernel_release_tag.as_deref(),
        Some(RELEASE_TAG)
    );
    assert_eq!(receipt.identity.release_tags_agree, Some(true));
    assert_eq!(receipt.cleanup, CleanupState::Confirmed);
    assert!(!scratch.local(&nonce.kernel_path()).exists());
    assert_eq!(fs::read_dir(scratch.content()).unwrap().count(), 0);
}

#[test]
fn an_existing_file_with_the_probes_name_is_left_alone() {
    let scratch = Scratch::new();
    let nonce = Nonce::from_bytes([7; 16]);
    let existing = scratch.local(&nonce.kernel_path());
    fs::write(&existing, "the user's data").unwrap();
    let mut check = new_check(&nonce);
    let actions = check.start(0);
    assert!(!drive(&mut check, &scratch, actions));
    let receipt = check.receipt();
    assert_eq!(receipt.checks[0].outcome, CheckOutcome::Failed);
    assert_eq!(receipt.checks[0].detail, Some("already_exists"));
    assert_eq!(receipt.cleanup, CleanupState::NotNeeded);
    assert_eq!(fs::read_to_string(&existing).unwrap(), "the user's data");
}

#[test]
fn a_probe_replaced_before_cleanup_is_not_removed() {
    let scratch = Scratch::new();
    let nonce = Nonce::from_bytes([9; 16]);
    let probe = scratch.local(&nonce.kernel_path());
    let mut check = new_check(&nonce);
    let actions = check.start(0);
    // Perform the steps by hand; after the nonce read, someone replaces the file.
    let verified = drive_with(&mut check, actions, |kind| match kind {
        CheckCommandKind::ExecuteKernel { code } => CheckReply::KernelOutput {
            stdout: run_kernel(&scratch, code).0,
        },
        CheckCommandKind::ReadBuildInfo => CheckReply::ServiceUnavailable,
        CheckCommandKind::ReadFile { .. } => {
            let bytes = fs::read(&probe).unwrap();
            fs::write(&probe, "replaced").unwrap();
            CheckReply::FileContent(bytes)
        }
        CheckCommandKind::StatFile { .. } => stat(&probe),
    });
    assert!(!verified);
    let receipt = check.receipt();
    assert_eq!(receipt.checks[3].detail, Some("content_differs"));
    assert_eq!(receipt.cleanup, CleanupState::Failed);
    assert_eq!(fs::read_to_string(&probe).unwrap(), "replaced");
}
