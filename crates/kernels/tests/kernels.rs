//! End-to-end tests against a real ipykernel.
//!
//! The Python comes from `JUPYTER_MCP_TEST_PYTHON`, else `<workspace>/.venv/bin/python`; the
//! tests fail (not skip) when neither exists. Every wait is an event with a deadline.
//!
//! Unix only: they signal process groups and read Unix exit statuses.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kernels::{
    DiscoveryConfig, ExecuteEvent, ExecuteHandle, ExecuteOptions, InterruptMode, KernelHandle,
    KernelManager, KernelProvider, KernelSpecInfo, KernelStatus, LaunchConfig, LocalProvider,
    ManagerConfig, Platform, ReplyStatus, SpecPreference, SpecSource, StreamName,
};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::timeout;

const EVENT_DEADLINE: Duration = Duration::from_secs(30);

fn test_python() -> PathBuf {
    if let Some(python) = std::env::var_os("JUPYTER_MCP_TEST_PYTHON") {
        return PathBuf::from(python);
    }
    let fallback = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    assert!(
        fallback.exists(),
        "no Python with ipykernel for the kernel tests: set JUPYTER_MCP_TEST_PYTHON (e.g. to /work/main/.venv/bin/python) or create {}",
        fallback.display()
    );
    fallback
}

/// The virtual environment folder of the test Python (`<venv>/bin/python`).
fn test_venv() -> PathBuf {
    let python = test_python();
    python
        .parent()
        .and_then(Path::parent)
        .expect("the test Python lives in <venv>/bin")
        .to_path_buf()
}

fn python_spec() -> KernelSpecInfo {
    KernelSpecInfo {
        id: "test-python".into(),
        display_name: "Test Python".into(),
        language: "python".into(),
        argv: vec![
            test_python().to_string_lossy().into_owned(),
            "-m".into(),
            "ipykernel_launcher".into(),
            "-f".into(),
            "{connection_file}".into(),
        ],
        env: Default::default(),
        interrupt_mode: InterruptMode::Signal,
        resource_dir: None,
        source: SpecSource::Other,
    }
}

/// A discovery that sees only what the test puts in `jupyter_path` and `server_root`.
fn isolated_discovery(jupyter_path: Vec<PathBuf>, server_root: Option<PathBuf>) -> DiscoveryConfig {
    DiscoveryConfig {
        platform: Platform::CURRENT,
        jupyter_path,
        user_data_dir: None,
        python: None,
        env_python: None,
        python_probe_timeout: Duration::from_secs(5),
        system_dirs: Vec::new(),
        server_root,
    }
}

fn launch_config(runtime_dir: &Path) -> LaunchConfig {
    LaunchConfig {
        runtime_dir: runtime_dir.to_path_buf(),
        shutdown_timeout: Duration::from_secs(3),
        ..LaunchConfig::default()
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    provider: LocalProvider,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        let provider = LocalProvider::new(
            isolated_discovery(Vec::new(), None),
            launch_config(&dir.path().join("runtime")),
        );
        Fixture { dir, provider }
    }

    async fn start(&self) -> Arc<dyn KernelHandle> {
        self.provider
            .start(&python_spec(), &self.dir.path().join("work"))
            .await
            .unwrap_or_else(|error| panic!("kernel did not start: {error}"))
    }
}

/// The events of `code` on `kernel`, without the `Replied` notice (checked here: when the reply
/// overtakes `idle`, the notice comes once, before `idle`, with the reply's execution count).
async fn run(kernel: &dyn KernelHandle, code: &str) -> Vec<ExecuteEvent> {
    let handle = kernel
        .execute(code, ExecuteOptions::default())
        .await
        .unwrap();
    let mut events = events_of(handle).await;
    let announced: Vec<usize> = (0..events.len())
        .filter(|&at| matches!(events[at], ExecuteEvent::Replied { .. }))
        .collect();
    if let [at] = announced[..] {
        let idle = events.iter().position(|event| *event == ExecuteEvent::Idle);
        assert!(idle.is_some_and(|idle| at < idle), "{events:?}");
        let Some(ExecuteEvent::Reply(reply)) = events.last() else {
            panic!("a notice without its reply: {events:?}");
        };
        let expected = ExecuteEvent::Replied {
            execution_count: reply.execution_count,
        };
        assert_eq!(events.remove(at), expected);
    } else {
        assert!(announced.is_empty(), "{events:?}");
    }
    events
}

async fn events_of(handle: ExecuteHandle) -> Vec<ExecuteEvent> {
    timeout(EVENT_DEADLINE, handle.collect_events())
        .await
        .expect("the request did not finish in time")
}

async fn next_event(handle: &mut ExecuteHandle) -> ExecuteEvent {
    timeout(EVENT_DEADLINE, handle.next())
        .await
        .expect("no event in time")
        .expect("the handle already ended")
}

/// Prints a marker once the user's code runs, then sleeps for a minute.
/// Prints its marker and sleeps in one statement: IPython compiles each top-level statement just
/// before running it, so with the sleep on a line of its own an interrupt sent on the marker
/// could land in that compile, where IPython fails to format the traceback and sends no `error`.
const SLEEPER: &str = "import time\nprint('sleeping', flush=True) or time.sleep(60)";

/// Runs [`SLEEPER`] on `kernel` and returns its handle once the marker has come: an interrupt
/// sent earlier may hit ipykernel's own code instead of the user's.
async fn start_sleeping(kernel: &dyn KernelHandle) -> ExecuteHandle {
    let mut handle = kernel
        .execute(SLEEPER, ExecuteOptions::default())
        .await
        .unwrap();
    loop {
        if let ExecuteEvent::Stream { text, .. } = next_event(&mut handle).await
            && text.contains("sleeping")
        {
            return handle;
        }
    }
}

async fn wait_for_status(
    status: &mut watch::Receiver<KernelStatus>,
    deadline: Duration,
    wanted: impl FnMut(&KernelStatus) -> bool,
) -> KernelStatus {
    timeout(deadline, status.wait_for(wanted))
        .await
        .expect("the status did not change in time")
        .expect("the status watch closed")
        .clone()
}

fn kind(event: &ExecuteEvent) -> &'static str {
    match event {
        ExecuteEvent::Busy => "busy",
        ExecuteEvent::Input { .. } => "input",
        ExecuteEvent::Stream { .. } => "stream",
        ExecuteEvent::ExecuteResult { .. } => "result",
        ExecuteEvent::DisplayData { .. } => "display",
        ExecuteEvent::UpdateDisplayData { .. } => "update",
        ExecuteEvent::Error(_) => "error",
        ExecuteEvent::ClearOutput { .. } => "clear",
        ExecuteEvent::Idle => "idle",
        ExecuteEvent::ActionRequired { .. } => "action-required",
        ExecuteEvent::Replied { .. } => "replied",
        ExecuteEvent::Reply(_) => "reply",
        ExecuteEvent::KernelRestarted => "restarted",
        ExecuteEvent::KernelDied { .. } => "died",
        ExecuteEvent::KernelShutdown => "shutdown",
        ExecuteEvent::ConnectionLost => "lost",
        ExecuteEvent::ServerStopped => "server-stopped",
    }
}

fn kinds(events: &[ExecuteEvent]) -> Vec<&'static str> {
    events.iter().map(kind).collect()
}

fn reply_status(events: &[ExecuteEvent]) -> ReplyStatus {
    match events.last() {
        Some(ExecuteEvent::Reply(reply)) => reply.status,
        other => panic!("the request did not end with a reply: {other:?}"),
    }
}

fn plain(data: &serde_json::Map<String, Value>) -> &str {
    data.get("text/plain")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Alive and not a zombie, by /proc.
fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|rest| rest.split_whitespace().next());
    !matches!(state, Some("Z" | "X"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_finds_a_jupyter_path_kernelspec_and_a_project_venv() {
    let dir = tempfile::tempdir().unwrap();
    let jupyter_path = dir.path().join("jupyter");
    write_ipykernel_spec(
        &jupyter_path.join("kernels").join("Test-Kernel"),
        serde_json::json!({"display_name": "Test Kernel", "interrupt_mode": "message"}),
    );
    let project = dir.path().join("project");
    let notebook_dir = project.join("notebooks");
    std::fs::create_dir_all(&notebook_dir).unwrap();
    std::os::unix::fs::symlink(test_venv(), project.join(".venv")).unwrap();

    let provider = LocalProvider::new(
        isolated_discovery(vec![jupyter_path], Some(project.clone())),
        launch_config(&dir.path().join("runtime")),
    );
    let discovery = provider.discover(Some(&notebook_dir)).await.unwrap();
    let ids: Vec<_> = discovery
        .specs
        .iter()
        .map(|spec| spec.id.as_str())
        .collect();
    assert_eq!(ids, ["test-kernel", "venv:.venv"]);
    let kernelspec = &discovery.specs[0];
    assert_eq!(kernelspec.source, SpecSource::JupyterPath);
    assert_eq!(kernelspec.interrupt_mode, InterruptMode::Message);
    let venv = discovery.find("venv:.venv").unwrap();
    assert_eq!(venv.source, SpecSource::Venv);
    assert_eq!(
        venv.argv[0],
        project.join(".venv/bin/python").to_string_lossy()
    );

    // The venv wins for a notebook under the project, and it really runs from the venv.
    let chosen = discovery
        .choose(
            &SpecPreference::default(),
            Some(&notebook_dir),
            Some(&project),
        )
        .unwrap();
    assert_eq!(chosen.id, "venv:.venv");
    let kernel = provider.start(chosen, &notebook_dir).await.unwrap();
    let summary = kernel
        .execute_collect("import os, sys; print(sys.prefix); print(os.getcwd())")
        .await
        .unwrap();
    let lines: Vec<_> = summary.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            project.join(".venv").to_str().unwrap(),
            notebook_dir.to_str().unwrap()
        ]
    );

    // Message-mode interrupts go over the control channel and are answered.
    let message_mode = provider.start(kernelspec, &notebook_dir).await.unwrap();
    let sleeper = start_sleeping(&*message_mode).await;
    message_mode.interrupt().await.unwrap();
    let rest = events_of(sleeper).await;
    assert!(rest.iter().any(
        |event| matches!(event, ExecuteEvent::Error(error) if error.ename == "KeyboardInterrupt")
    ));

    kernel.shutdown().await.unwrap();
    message_mode.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_reports_every_output_kind_in_order() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    let info = kernel.info();
    assert_eq!(info.language, "python");
    assert_eq!(info.implementation, "ipython");
    assert!(info.protocol_version.starts_with('5'), "{info:?}");
    assert!(!info.banner.is_empty());
    // The start-up handshake may still be settling (a resent kernel_info); idle comes next.
    let mut status = kernel.status();
    wait_for_status(&mut status, Duration::from_secs(10), |status| {
        *status == KernelStatus::Idle
    })
    .await;

    let printed = run(&*kernel, "print(1+1)").await;
    assert_eq!(
        kinds(&printed),
        ["busy", "input", "stream", "idle", "reply"]
    );
    assert_eq!(
        printed[2],
        ExecuteEvent::Stream {
            name: StreamName::Stdout,
            text: "2\n".into()
        }
    );
    assert_eq!(reply_status(&printed), ReplyStatus::Ok);

    let result = run(&*kernel, "1+1").await;
    assert_eq!(kinds(&result), ["busy", "input", "result", "idle", "reply"]);
    let ExecuteEvent::ExecuteResult {
        data,
        execution_count,
        ..
    } = &result[2]
    else {
        unreachable!()
    };
    assert_eq!(plain(data), "2");
    let ExecuteEvent::Reply(reply) = &result[4] else {
        unreachable!()
    };
    assert_eq!(*execution_count, reply.execution_count);

    let failed = run(&*kernel, "1/0").await;
    assert_eq!(kinds(&failed), ["busy", "input", "error", "idle", "reply"]);
    let ExecuteEvent::Error(error) = &failed[2] else {
        unreachable!()
    };
    assert_eq!(error.ename, "ZeroDivisionError");
    assert_eq!(error.evalue, "division by zero");
    assert!(error.traceback.len() > 1, "{:?}", error.traceback);
    assert_eq!(reply_status(&failed), ReplyStatus::Error);

    let displayed = run(
        &*kernel,
        "from IPython.display import display, update_display\nh = display('a', display_id=True)\nh.update('b')",
    )
    .await;
    assert_eq!(
        kinds(&displayed),
        ["busy", "input", "display", "update", "idle", "reply"]
    );
    let (
        ExecuteEvent::DisplayData {
            data: first,
            display_id: first_id,
            ..
        },
        ExecuteEvent::UpdateDisplayData {
            data: second,
            display_id: second_id,
            ..
        },
    ) = (&displayed[2], &displayed[3])
    else {
        unreachable!()
    };
    assert_eq!((plain(first), plain(second)), ("'a'", "'b'"));
    assert!(first_id.is_some());
    assert_eq!(first_id, second_id);

    let cleared = run(
        &*kernel,
        "import sys\nfrom IPython.display import clear_output\nsys.stdout.write('x\\n'); sys.stdout.flush()\nclear_output(wait=True)\nprint('y')",
    )
    .await;
    assert_eq!(
        kinds(&cleared),
        [
            "busy", "input", "stream", "clear", "stream", "idle", "reply"
        ]
    );
    assert_eq!(cleared[3], ExecuteEvent::ClearOutput { wait: true });

    // Two queued requests: each gets only its own outputs.
    let first = kernel
        .execute("print('one')", ExecuteOptions::default())
        .await
        .unwrap();
    let second = kernel
        .execute("print('two')", ExecuteOptions::default())
        .await
        .unwrap();
    let (first, second) = tokio::join!(events_of(first), events_of(second));
    let text = |events: &[ExecuteEvent]| -> String {
        events
            .iter()
            .filter_map(|event| match event {
                ExecuteEvent::Stream { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        (text(&first), text(&second)),
        ("one\n".into(), "two\n".into())
    );

    // Quiet collection: no result, no history, stdout and the reply's error still arrive.
    let quiet = kernel.execute_collect("print('quiet'); 5").await.unwrap();
    assert_eq!(quiet.stdout, "quiet\n");
    assert!(quiet.results.is_empty());
    let broken = kernel.execute_collect("1/0").await.unwrap();
    assert_eq!(broken.status, ReplyStatus::Error);
    assert_eq!(broken.error.unwrap().ename, "ZeroDivisionError");
    let mut options = ExecuteOptions::quiet();
    options.user_expressions.insert("v".into(), "6*7".into());
    let expressions = kernel.execute_collect_with("", options).await.unwrap();
    assert_eq!(
        expressions.user_expressions["v"]["data"]["text/plain"],
        Value::from("42")
    );

    assert_eq!(kernel.probe().await.unwrap(), KernelStatus::Idle);
    kernel.shutdown().await.unwrap();
    assert!(matches!(
        *kernel.status().borrow(),
        KernelStatus::Dead {
            requested: true,
            ..
        }
    ));
    assert!(matches!(
        kernel.execute("1", ExecuteOptions::default()).await,
        Err(kernels::Error::NotRunning)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_stops_a_long_sleep() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    let handle = start_sleeping(&*kernel).await;
    let started = Instant::now();
    kernel.interrupt().await.unwrap();
    let rest = timeout(Duration::from_secs(10), handle.collect_events())
        .await
        .expect("the interrupt did not stop the sleep");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        rest.iter()
            .any(|event| matches!(event, ExecuteEvent::Error(error) if error.ename == "KeyboardInterrupt")),
        "{rest:?}"
    );
    assert_eq!(reply_status(&rest), ReplyStatus::Error);
    // The kernel is still usable.
    assert_eq!(reply_status(&run(&*kernel, "1").await), ReplyStatus::Ok);

    // A stopped process cannot answer the heartbeat: the probe says so within its bound.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(kernel.process_id().unwrap()).unwrap());
    let mut status = kernel.status();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // The stop lands on each thread when it is next scheduled: probe once every thread
    // (the heartbeat's among them) is stopped.
    wait_until(Duration::from_secs(5), || {
        every_thread_stopped(pid.as_raw())
    })
    .await;
    let probed = timeout(Duration::from_secs(5), kernel.probe()).await;
    // Read before resuming: any IOPub status afterwards proves reachability again.
    let watched = status.borrow_and_update().clone();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(probed.unwrap().unwrap(), KernelStatus::Unreachable);
    assert_eq!(watched, KernelStatus::Unreachable);
    assert_eq!(kernel.probe().await.unwrap(), KernelStatus::Idle);
    kernel.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_bumps_the_epoch_and_forgets_variables() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    assert_eq!(
        reply_status(&run(&*kernel, "x = 41").await),
        ReplyStatus::Ok
    );
    let before = kernel.epoch();
    let old_pid = kernel.process_id().unwrap();

    let sleeper = start_sleeping(&*kernel).await;
    kernel.restart().await.unwrap();
    assert_eq!(
        kinds(&events_of(sleeper).await).last(),
        Some(&"restarted"),
        "a request in flight ends with KernelRestarted"
    );
    assert!(kernel.epoch() > before);
    // The new kernel's IOPub may still report the busy/idle pair of its startup request after
    // `restart` returned; it settles on idle.
    let mut status = kernel.status();
    timeout(
        Duration::from_secs(10),
        status.wait_for(|status| *status == KernelStatus::Idle),
    )
    .await
    .expect("the restarted kernel becomes idle within 10 s")
    .unwrap();
    assert!(!process_alive(old_pid));

    let lookup = run(&*kernel, "x").await;
    assert!(
        lookup
            .iter()
            .any(|event| matches!(event, ExecuteEvent::Error(error) if error.ename == "NameError")),
        "{lookup:?}"
    );
    kernel.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_kernel_ends_its_requests_and_is_dead() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    let mut status = kernel.status();
    let started = Instant::now();
    let events = run(&*kernel, "import os; os.kill(os.getpid(), 9)").await;
    assert!(started.elapsed() < Duration::from_secs(5));
    match events.last() {
        Some(ExecuteEvent::KernelDied { exit }) => assert_eq!(exit.signal, Some(9)),
        other => panic!("expected KernelDied, got {other:?}"),
    }
    let dead = wait_for_status(&mut status, Duration::from_secs(5), KernelStatus::is_dead).await;
    assert!(
        matches!(dead, KernelStatus::Dead { requested: false, exit: Some(exit) } if exit.signal == Some(9))
    );
    assert!(matches!(
        kernel.execute("1", ExecuteOptions::default()).await,
        Err(kernels::Error::KernelDied { .. })
    ));
    assert!(kernel.probe().await.unwrap().is_dead());
    // A dead kernel can be brought back.
    kernel.restart().await.unwrap();
    assert_eq!(reply_status(&run(&*kernel, "1").await), ReplyStatus::Ok);
    kernel.shutdown().await.unwrap();
}

/// A Python kernelspec in `spec_dir` that starts the test Python's ipykernel, with the
/// fields of `fields` (a JSON object) added.
fn write_ipykernel_spec(spec_dir: &Path, fields: Value) {
    let mut spec = serde_json::json!({
        "argv": [test_python(), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "language": "python",
    });
    for (key, value) in fields.as_object().expect("a JSON object") {
        spec[key] = value.clone();
    }
    std::fs::create_dir_all(spec_dir).unwrap();
    std::fs::write(spec_dir.join("kernel.json"), spec.to_string()).unwrap();
}

/// A project whose JUPYTER_PATH has a `python3` kernelspec running the test Python.
fn manager_project(idle_ttl: Option<Duration>) -> (tempfile::TempDir, KernelManager) {
    let dir = tempfile::tempdir().unwrap();
    write_ipykernel_spec(
        &dir.path().join("jupyter/kernels/python3"),
        serde_json::json!({"display_name": "Python 3"}),
    );
    for notebook_dir in ["a", "b"] {
        std::fs::create_dir_all(dir.path().join("project").join(notebook_dir)).unwrap();
    }
    let provider = LocalProvider::new(
        isolated_discovery(
            vec![dir.path().join("jupyter")],
            Some(dir.path().join("project")),
        ),
        launch_config(&dir.path().join("runtime")),
    );
    let manager = KernelManager::new(Arc::new(provider), ManagerConfig { idle_ttl });
    (dir, manager)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_all_leaves_no_kernel_process() {
    let (dir, manager) = manager_project(None);
    let first_notebook = dir.path().join("project/a/one.ipynb");
    let second_notebook = dir.path().join("project/b/two.ipynb");
    let preference = SpecPreference::default();
    let (first, second) = tokio::join!(
        manager.get_or_start(&first_notebook, &preference),
        manager.get_or_start(&second_notebook, &preference)
    );
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(first.spec().id, "python3");
    let again = manager
        .get_or_start(&first_notebook, &preference)
        .await
        .unwrap();
    assert_eq!(
        again.process_id(),
        first.process_id(),
        "one kernel per notebook"
    );
    let cwd = first
        .execute_collect("import os; print(os.getcwd())")
        .await
        .unwrap();
    assert_eq!(
        cwd.stdout.trim(),
        dir.path().join("project/a").to_str().unwrap()
    );

    let pids = [first.process_id().unwrap(), second.process_id().unwrap()];
    assert!(pids.iter().all(|pid| process_alive(*pid)));
    assert_eq!(
        std::fs::read_dir(dir.path().join("runtime"))
            .unwrap()
            .count(),
        2
    );
    manager.shutdown_all().await;
    for pid in pids {
        assert!(!process_alive(pid), "kernel {pid} survived shutdown_all");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
        assert_eq!(nix::sys::signal::kill(pid, None), Err(nix::Error::ESRCH));
    }
    assert_eq!(
        std::fs::read_dir(dir.path().join("runtime"))
            .unwrap()
            .count(),
        0,
        "connection files are removed"
    );
    assert!(manager.running().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_ttl_shuts_an_idle_kernel_down() {
    let (dir, manager) = manager_project(Some(Duration::from_millis(1500)));
    let notebook = dir.path().join("project/a/idle.ipynb");
    let kernel = manager
        .get_or_start(&notebook, &SpecPreference::default())
        .await
        .unwrap();
    let mut status = kernel.status();
    // A request longer than the TTL keeps the kernel alive while it runs.
    let long = run(&*kernel, "import time; time.sleep(2.5)").await;
    assert_eq!(reply_status(&long), ReplyStatus::Ok);
    let dead = wait_for_status(&mut status, Duration::from_secs(20), KernelStatus::is_dead).await;
    assert!(matches!(
        dead,
        KernelStatus::Dead {
            requested: true,
            ..
        }
    ));
    assert!(manager.get(&notebook).is_none());
    // The next use starts a fresh kernel with a newer epoch.
    let fresh = manager
        .get_or_start(&notebook, &SpecPreference::default())
        .await
        .unwrap();
    assert!(fresh.epoch() > kernel.epoch());
    manager.shutdown_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(
    clippy::print_stdout,
    reason = "the measurement is reported, not asserted"
)]
async fn measure_round_trip_of_small_executes() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    let mut round_trips = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        let events = run(&*kernel, "1+1").await;
        round_trips.push(started.elapsed());
        assert_eq!(reply_status(&events), ReplyStatus::Ok);
    }
    round_trips.sort();
    println!(
        "execute round trip over {} runs: median {:?}, p90 {:?}, max {:?}",
        round_trips.len(),
        round_trips[round_trips.len() / 2],
        round_trips[round_trips.len() * 9 / 10],
        round_trips[round_trips.len() - 1]
    );
    kernel.shutdown().await.unwrap();
}

/// Whether every thread of process `pid` is stopped (state `T` in `/proc/PID/task/*/stat`).
fn every_thread_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
            // The state follows the command name, which is in parentheses.
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
        })
    })
}

/// Polls a condition that has no event to wait on (another process's death) until a deadline.
async fn wait_until(deadline: Duration, mut condition: impl FnMut() -> bool) {
    let mut ticks = tokio::time::interval(Duration::from_millis(20));
    timeout(deadline, async {
        while !condition() {
            ticks.tick().await;
        }
    })
    .await
    .expect("the condition did not hold in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_kernel_kills_its_whole_process_group() {
    let fixture = Fixture::new();
    let kernel = fixture.start().await;
    let pid = kernel.process_id().unwrap();
    let spawned = kernel
        .execute_collect("import subprocess; print(subprocess.Popen(['sleep', '60']).pid)")
        .await
        .unwrap();
    let grandchild: u32 = spawned.stdout.trim().parse().unwrap();
    assert!(process_alive(pid) && process_alive(grandchild));
    drop(kernel);
    wait_until(Duration::from_secs(5), || {
        !process_alive(pid) && !process_alive(grandchild)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_failures_say_what_went_wrong() {
    let fixture = Fixture::new();
    let cwd = fixture.dir.path().join("work");
    let with_argv = |argv: &[&str]| KernelSpecInfo {
        argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
        ..python_spec()
    };
    let python = test_python();
    let python = python.to_str().unwrap();

    let missing_program = fixture
        .provider
        .start(
            &with_argv(&["/nonexistent/python", "-m", "ipykernel_launcher"]),
            &cwd,
        )
        .await
        .err()
        .unwrap();
    assert_eq!(
        missing_program.to_string(),
        "could not start kernel `test-python`: the program `/nonexistent/python` was not found"
    );

    // `-S` hides site-packages, so ipykernel cannot be imported.
    let no_ipykernel = fixture
        .provider
        .start(
            &with_argv(&[
                python,
                "-S",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
            ]),
            &cwd,
        )
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&no_ipykernel, kernels::Error::IpykernelMissing { python: p } if p.to_str() == Some(python)),
        "{no_ipykernel:?}"
    );

    let crashing = fixture
        .provider
        .start(
            &with_argv(&[
                python,
                "-c",
                "import sys; sys.stderr.write('secret detail'); sys.exit(3)",
            ]),
            &cwd,
        )
        .await
        .err()
        .unwrap();
    assert_eq!(
        crashing.to_string(),
        "kernel `test-python` exited during startup (exit code 3); its log is available for diagnostics"
    );
    assert_eq!(crashing.diagnostics(), Some("secret detail"));

    let slow_provider = LocalProvider::new(
        isolated_discovery(Vec::new(), None),
        LaunchConfig {
            startup_timeout: Duration::from_millis(700),
            ..launch_config(&fixture.dir.path().join("runtime"))
        },
    );
    let silent = slow_provider
        .start(
            &with_argv(&[python, "-c", "import time; time.sleep(30)"]),
            &cwd,
        )
        .await
        .err()
        .unwrap();
    assert!(
        matches!(silent, kernels::Error::StartTimeout { .. }),
        "{silent:?}"
    );
    assert_eq!(
        std::fs::read_dir(fixture.dir.path().join("runtime"))
            .unwrap()
            .count(),
        0,
        "failed starts leave no connection file"
    );
}

/// Stands in for a kernel that starts slowly while another program holds its IOPub port: on its
/// first launch it listens on that port itself, answers every connection with an HTTP error (as
/// a web server handed the same free port would), and only after three seconds starts the real
/// kernel, which cannot bind the port, says "Address already in use" and hangs (as ipykernel
/// does). Later launches are the real kernel.
const PORT_THIEF: &str = r#"
import json, os, socket, subprocess, sys, threading, time
connection_file, marker = sys.argv[1], sys.argv[2]
kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
if os.path.exists(marker):
    os.execv(sys.executable, kernel)
open(marker, "w").close()
port = json.load(open(connection_file))["iopub_port"]
thief = socket.socket()
thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
thief.bind(("127.0.0.1", port))
thief.listen()
def answer():
    while True:
        connection, _ = thief.accept()
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        connection.close()
threading.Thread(target=answer, daemon=True).start()
time.sleep(3)
sys.exit(subprocess.call(kernel))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_held_by_another_program_is_waited_out_then_replaced() {
    let fixture = Fixture::new();
    let script = fixture.dir.path().join("port_thief.py");
    std::fs::write(&script, PORT_THIEF).unwrap();
    let marker = fixture.dir.path().join("first-launch-done");
    let spec = KernelSpecInfo {
        argv: vec![
            test_python().to_string_lossy().into_owned(),
            script.to_string_lossy().into_owned(),
            "{connection_file}".into(),
            marker.to_string_lossy().into_owned(),
        ],
        ..python_spec()
    };
    // The connects to the stolen port fail for longer than any fixed retry budget would allow;
    // the start must neither give up nor report a broken connection, but notice the kernel's
    // "Address already in use" and start again on fresh ports.
    let kernel = fixture
        .provider
        .start(&spec, &fixture.dir.path().join("work"))
        .await
        .unwrap_or_else(|error| panic!("kernel did not start: {error}"));
    assert!(marker.exists(), "the first launch ran the port thief");
    let events = run(kernel.as_ref(), "print(6 * 7)").await;
    assert_eq!(reply_status(&events), ReplyStatus::Ok);
    assert!(
        events.iter().any(|event| matches!(
            event,
            ExecuteEvent::Stream { text, .. } if text == "42\n"
        )),
        "{events:?}"
    );
    kernel.shutdown().await.unwrap();
}
