//! The generated Python, run for real.
//!
//! A `python3` subprocess stands in for a kernel: it runs each request through IPython's own
//! `InteractiveShell.run_cell`, with ipykernel's compiler (so cell names and `linecache`
//! behaviour are those of a real ipykernel). The test is the host: it performs file actions with
//! `std::fs` in a temp dir and enforces deadlines while waiting for the stand-in. It checks
//! byte-exact round trips, hashes, that no `.part` file is left, that the shell's user
//! namespace gains no names, and that `linecache` keeps no transfer source.
//!
//! Python is found through `JUPYTER_MCP_TEST_PYTHON`, else `<workspace>/.venv/bin/python`.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead as _, BufReader, ErrorKind, Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use transfer::{
    Action, Cause, Download, DownloadConfig, Event, KernelBudget, KernelFailure, KernelOutput,
    KernelStep, TransferError, TransferMachine, TransferReceipt, Upload, UploadConfig,
};

/// Reads one JSON command per line, answers one JSON line. `run` executes a cell the way
/// ipykernel does and returns its captured stdout.
const STAND_IN: &str = r#"
import base64, contextlib, io, json, linecache, sys, types
from IPython.core.interactiveshell import InteractiveShell
from ipykernel.compiler import XCachingCompiler

shell = InteractiveShell.instance(compiler_class=XCachingCompiler)
answer_to = sys.stdout

def answer(value):
    answer_to.write(json.dumps(value) + "\n")
    answer_to.flush()

for line in sys.stdin:
    command = json.loads(line)
    if command["op"] == "run":
        # The request's buffers, as ipykernel hands them out: the parent message's memoryviews.
        parent = {"buffers": [memoryview(base64.b64decode(b)) for b in command.get("buffers", [])]}
        kernel = types.SimpleNamespace(get_parent=lambda channel=None: parent)
        sent = []
        if command.get("session", True):
            # ipykernel's Session.send on the IOPub socket: the display messages a step sends
            # answering this request, whose buffers a host hands back with the stdout.
            def send(socket, msg_type, content, parent=None, buffers=None):
                if socket is kernel.iopub_socket and msg_type == "display_data" and parent is parent_of_run:
                    sent.extend(bytes(buffer) for buffer in buffers or [])
            kernel.session = types.SimpleNamespace(send=send)
            kernel.iopub_socket = object()
        parent_of_run = parent
        shell.kernel = kernel
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            result = shell.run_cell(command["code"], store_history=command["store_history"])
        error = result.error_in_exec or result.error_before_exec
        answer({
            "stdout": captured.getvalue(),
            "buffers": [base64.b64encode(buffer).decode() for buffer in sent],
            "error": type(error).__name__ if error else None,
        })
    elif command["op"] == "user_ns":
        answer({"keys": sorted(shell.user_ns)})
    elif command["op"] == "linecache_hits":
        needle = command["needle"]
        hits = [key for key, entry in list(linecache.cache.items())
                if len(entry) > 2 and needle in "".join(entry[2])]
        answer({"hits": len(hits)})
"#;

struct StandIn {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
    /// Whether requests run with IPython history on (a "normal" execute_request).
    store_history: bool,
    /// Whether steps are sent as source only (`KernelRequest::to_python`), without buffers.
    source_only: bool,
    /// Whether the stand-in's kernel has no session to send display messages with (a kernel
    /// other than ipykernel): downloads then inline their chunks.
    no_session: bool,
    /// How many binary buffers display messages have carried back so far.
    buffers_received: usize,
}

impl StandIn {
    fn start(ipython_dir: &Path) -> StandIn {
        let python = python();
        let mut child = Command::new(&python)
            .args(["-c", STAND_IN])
            .env("IPYTHONDIR", ipython_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", python.display()));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, answers) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        StandIn {
            child,
            stdin,
            answers,
            store_history: false,
            source_only: false,
            no_session: false,
            buffers_received: 0,
        }
    }

    fn ask(
        &mut self,
        command: Value,
        deadline: std::time::Duration,
    ) -> Result<Value, RecvTimeoutError> {
        writeln!(self.stdin, "{command}").expect("the stand-in's stdin is open");
        self.stdin.flush().unwrap();
        let line = self.answers.recv_timeout(deadline)?;
        Ok(serde_json::from_str(&line).expect("the stand-in answers JSON"))
    }

    /// Runs a machine's step the way a host does: its source with its buffers, or, when
    /// `source_only`, the request's source-only rendering.
    fn execute_step(&mut self, step: &KernelStep) -> Event {
        let deadline = step.deadline.duration();
        if self.source_only {
            return self.execute(&step.request.to_python(), &[], deadline);
        }
        self.execute(&step.code, &step.buffers, deadline)
    }

    fn execute(&mut self, code: &str, buffers: &[Vec<u8>], deadline: std::time::Duration) -> Event {
        let buffers: Vec<String> = buffers.iter().map(|buffer| BASE64.encode(buffer)).collect();
        match self.ask(
            json!({
                "op": "run",
                "code": code,
                "buffers": buffers,
                "store_history": self.store_history,
                "session": !self.no_session,
            }),
            deadline,
        ) {
            Ok(answer) => match answer["error"].as_str() {
                Some(ename) => Event::KernelFailed(KernelFailure::Exception {
                    ename: ename.to_owned(),
                }),
                None => {
                    let buffers: Vec<Vec<u8>> = answer["buffers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|buffer| BASE64.decode(buffer.as_str().unwrap_or_default()).unwrap())
                        .collect();
                    self.buffers_received += buffers.len();
                    Event::KernelReply(KernelOutput {
                        stdout: answer["stdout"].as_str().unwrap_or_default().to_owned(),
                        buffers,
                    })
                }
            },
            Err(RecvTimeoutError::Timeout) => Event::KernelFailed(KernelFailure::Timeout),
            Err(RecvTimeoutError::Disconnected) => Event::KernelFailed(KernelFailure::Died),
        }
    }

    fn user_namespace(&mut self) -> BTreeSet<String> {
        let answer = self
            .ask(json!({"op": "user_ns"}), std::time::Duration::from_secs(30))
            .unwrap();
        answer["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|key| key.as_str().unwrap().to_owned())
            .collect()
    }

    fn linecache_hits(&mut self, needle: &str) -> u64 {
        let answer = self.ask(
            json!({"op": "linecache_hits", "needle": needle}),
            std::time::Duration::from_secs(30),
        );
        answer.unwrap()["hits"].as_u64().unwrap()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("JUPYTER_MCP_TEST_PYTHON") {
        return PathBuf::from(python);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = workspace.join(".venv/bin/python");
    assert!(
        python.exists(),
        "no Python with IPython and ipykernel: set JUPYTER_MCP_TEST_PYTHON or create {}",
        python.display()
    );
    python
}

/// The host side: real files, one open temp file for downloads.
#[derive(Default)]
struct Host {
    temp_file: Option<File>,
}

impl Host {
    fn perform(&mut self, source: &Path, action: &Action) -> Result<Event, std::io::Error> {
        match action {
            Action::ReadHostChunk { offset, len } => {
                let mut file = File::open(source)?;
                file.seek(SeekFrom::Start(*offset))?;
                let mut bytes = Vec::with_capacity(*len);
                file.take(*len as u64).read_to_end(&mut bytes)?;
                Ok(Event::HostChunkRead(bytes))
            }
            Action::CreateHostTemp { temp_path } => {
                self.temp_file = Some(
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(temp_path)?,
                );
                Ok(Event::HostDone)
            }
            Action::WriteHostChunk { offset, bytes, .. } => {
                let file = self.temp_file.as_mut().ok_or(ErrorKind::NotFound)?;
                file.seek(SeekFrom::Start(*offset))?;
                file.write_all(bytes)?;
                Ok(Event::HostDone)
            }
            Action::PromoteHostFile {
                temp_path,
                destination_path,
                overwrite,
            } => {
                if let Some(file) = self.temp_file.take() {
                    file.sync_all()?;
                }
                if *overwrite {
                    fs::rename(temp_path, destination_path)?;
                } else {
                    fs::hard_link(temp_path, destination_path)?;
                }
                Ok(Event::HostDone)
            }
            Action::RemoveHostTemp { temp_path } => {
                self.temp_file = None;
                match fs::remove_file(temp_path) {
                    Err(error) if error.kind() != ErrorKind::NotFound => Err(error),
                    _ => Ok(Event::HostDone),
                }
            }
            Action::ExecuteKernel(_) | Action::Done(_) | Action::Failed(_) => unreachable!(),
        }
    }
}

/// The whole host loop.
fn drive(
    mut machine: impl TransferMachine,
    kernel: &mut StandIn,
    budget: &mut KernelBudget,
    source: &Path,
) -> Result<TransferReceipt, TransferError> {
    let mut host = Host::default();
    loop {
        let event = match machine.next_action(budget) {
            Action::Done(receipt) => return Ok(receipt),
            Action::Failed(error) => return Err(error),
            Action::ExecuteKernel(step) => kernel.execute_step(&step),
            action => host
                .perform(source, &action)
                .unwrap_or_else(|error| Event::HostFailed(error.kind())),
        };
        machine.handle(event);
    }
}

fn nonce(index: usize) -> String {
    format!("5d6c1a2b-0000-4000-8000-{index:012}")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 32) as u8
        })
        .collect()
}

/// Asserts that a transfer was refused because its destination exists, leaving nothing behind.
fn assert_refused_as_existing(refused: &TransferError) {
    assert!(
        matches!(
            refused,
            TransferError::Failed {
                cause: Cause::DestinationExists,
                leftover: None,
                ..
            }
        ),
        "{refused}"
    );
}

fn part_files(directory: &Path) -> Vec<String> {
    fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".part"))
        .collect()
}

struct World {
    _root: tempfile::TempDir,
    host: PathBuf,
    kernel_dir: PathBuf,
    back: PathBuf,
    kernel: StandIn,
    budget: KernelBudget,
    transfers: usize,
}

impl World {
    fn new() -> World {
        let root = tempfile::tempdir().unwrap();
        let [host, kernel_dir, back, ipython] =
            ["host", "kernel", "back", "ipython"].map(|name| root.path().join(name));
        for directory in [&host, &kernel_dir, &back, &ipython] {
            fs::create_dir(directory).unwrap();
        }
        let kernel = StandIn::start(&ipython);
        World {
            _root: root,
            host,
            kernel_dir,
            back,
            kernel,
            budget: KernelBudget::new(),
            transfers: 0,
        }
    }

    fn upload(&mut self, name: &str, overwrite: bool) -> Result<TransferReceipt, TransferError> {
        self.transfers += 1;
        let source = self.host.join(name);
        let size = fs::metadata(&source).unwrap().len();
        let config = UploadConfig {
            overwrite,
            ..UploadConfig::new(
                source.to_str().unwrap(),
                self.kernel_dir.join(name).to_str().unwrap(),
                nonce(self.transfers),
                size,
            )
        };
        drive(
            Upload::new(config).unwrap(),
            &mut self.kernel,
            &mut self.budget,
            &source,
        )
    }

    fn download(&mut self, name: &str) -> Result<TransferReceipt, TransferError> {
        self.transfers += 1;
        let config = DownloadConfig::new(
            self.back.join(name).to_str().unwrap(),
            self.kernel_dir.join(name).to_str().unwrap(),
            nonce(self.transfers),
        );
        drive(
            Download::new(config).unwrap(),
            &mut self.kernel,
            &mut self.budget,
            Path::new("/nonexistent"),
        )
    }

    fn assert_no_part_files(&self) {
        for directory in [&self.host, &self.kernel_dir, &self.back] {
            assert_eq!(
                part_files(directory),
                Vec::<String>::new(),
                "temp files left in {}",
                directory.display()
            );
        }
    }

    /// Uploads and downloads `data` under `name`, checking everything on the way.
    fn round_trip(&mut self, name: &str, data: &[u8]) {
        fs::write(self.host.join(name), data).unwrap();
        let up = self
            .upload(name, false)
            .unwrap_or_else(|error| panic!("upload of {name}: {error}"));
        assert_eq!(
            fs::read(self.kernel_dir.join(name)).unwrap(),
            data,
            "uploaded bytes of {name}"
        );
        let down = self
            .download(name)
            .unwrap_or_else(|error| panic!("download of {name}: {error}"));
        assert_eq!(
            fs::read(self.back.join(name)).unwrap(),
            data,
            "downloaded bytes of {name}"
        );
        let expected = sha256_hex(data);
        assert_eq!((up.bytes, &up.sha256), (data.len() as u64, &expected));
        assert_eq!((down.bytes, &down.sha256), (data.len() as u64, &expected));
        self.assert_no_part_files();
        assert_eq!(
            self.kernel.linecache_hits("jupyter-mcp-transfer"),
            0,
            "transfer sources stay in linecache after {name}"
        );
    }
}

#[test]
fn generated_python_round_trips_files_through_ipython() {
    let mut world = World::new();
    let namespace_before = world.kernel.user_namespace();

    let compressible: Vec<u8> = b"id,name,value\n1,\"caf\xc3\xa9\",3.25\n"
        .iter()
        .copied()
        .cycle()
        .take(5 * 1024 * 1024)
        .collect();
    let cases: [(&str, Vec<u8>); 4] = [
        ("empty.bin", Vec::new()),
        ("seventeen.bin", b"seventeen bytes!\n".to_vec()),
        ("random.bin", random_bytes(3 * 1024 * 1024)),
        ("d\u{e4}t\u{e4} \"quoted\" 'name'.csv", compressible),
    ];
    for (name, data) in &cases {
        world.round_trip(name, data);
    }
    // Downloads came back as display buffers: one per chunk of the random and the compressible
    // file (12 + 20 chunks of 256 KiB) and one for the 17 bytes.
    assert_eq!(world.kernel.buffers_received, 33);
    assert_eq!(
        world.budget.used(),
        2 * (17 + 3 * 1024 * 1024 + 5 * 1024 * 1024)
    );
    assert_eq!(
        world.kernel.user_namespace(),
        namespace_before,
        "a transfer defined names in the user namespace"
    );

    // No overwrite is the default: an existing destination stays as it was, and nothing is left.
    fs::write(world.host.join("seventeen.bin"), b"a different text\n").unwrap();
    let refused = world.upload("seventeen.bin", false).unwrap_err();
    assert_refused_as_existing(&refused);
    assert_eq!(
        fs::read(world.kernel_dir.join("seventeen.bin")).unwrap(),
        b"seventeen bytes!\n"
    );
    let refused = world.download("seventeen.bin").unwrap_err();
    assert_refused_as_existing(&refused);
    world.assert_no_part_files();
    world.upload("seventeen.bin", true).unwrap();
    assert_eq!(
        fs::read(world.kernel_dir.join("seventeen.bin")).unwrap(),
        b"a different text\n"
    );

    // A missing source is reported by exception class only.
    let missing = world.download("missing.bin").unwrap_err();
    assert_eq!(
        missing.to_string(),
        "download failed before destination commit during inspect remote source: the kernel raised FileNotFoundError"
    );

    // Requests sent like a normal execute_request (history on) are dropped from linecache too;
    // only IPython's own history names appear.
    world.kernel.store_history = true;
    world.round_trip("history.bin", b"with history on");
    let added: Vec<String> = world
        .kernel
        .user_namespace()
        .difference(&namespace_before)
        .cloned()
        .collect();
    assert!(
        added.iter().all(|name| name.starts_with("_i")),
        "unexpected names {added:?}"
    );
    world.kernel.store_history = false;

    // Hosts that can send only source put the chunks in base64 literals: the same files.
    world.kernel.source_only = true;
    world.round_trip("source-only.bin", &random_bytes(600 * 1024));
    world.kernel.source_only = false;

    // A kernel without ipykernel's session (another kernel flavour) gets the same files, its
    // download chunks inlined in the receipt.
    world.kernel.no_session = true;
    let before = world.kernel.buffers_received;
    world.round_trip("no-session.bin", &random_bytes(600 * 1024));
    assert_eq!(world.kernel.buffers_received, before);
    world.kernel.no_session = false;

    // The check above can fail: IPython does cache ordinary cells in this stand-in.
    assert!(matches!(
        world.kernel.execute(
            "'jupyter-mcp-control'\n",
            &[],
            std::time::Duration::from_secs(30)
        ),
        Event::KernelReply(_)
    ));
    assert_eq!(world.kernel.linecache_hits("jupyter-mcp-control"), 1);
}
