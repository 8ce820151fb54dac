//! Starting one kernel process ("generation"): connection file, spawn, handshake, pump.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jupyter_protocol::{ConnectionInfo, JupyterMessage, KernelInfoRequest, Transport};
use jupyter_zmq_client::{
    ClientControlConnection, ClientIoPubConnection, ClientShellConnection, RawMessage,
    create_client_control_connection, create_client_iopub_connection,
    create_client_shell_connection_with_identity, peek_ports_with_listeners,
    peer_identity_for_session,
};
use tokio::io::AsyncReadExt as _;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use uuid::Uuid;
use zeromq::SocketRecv;

use super::LaunchConfig;
use super::process::{BoundedLog, GroupSignal, Inheritance, ProcessGroup};
use super::pump::{Pump, PumpCommand, StopReason, queue, read_socket, write_socket};
use crate::error::{Error, Result};
use crate::spec::{InterruptMode, KernelSpecInfo};
use crate::status::{KernelInfo, ProcessExit, StatusHub};
use crate::tasks::AbortOnDrop;
use crate::wire::{WireMessage, kernel_info};

/// A started kernel process and everything attached to it. Dropping it kills the process
/// group and removes the connection file.
pub(crate) struct Generation {
    pub epoch: u64,
    pub pid: u32,
    pub info: KernelInfo,
    pub connection: ConnectionInfo,
    pub commands: mpsc::UnboundedSender<PumpCommand>,
    pub exit: watch::Receiver<Option<ProcessExit>>,
    pub group: Arc<ProcessGroup>,
    pub log: Arc<BoundedLog>,
    pump: Option<JoinHandle<()>>,
    connection_file: PathBuf,
    _tasks: AbortOnDrop,
}

impl Generation {
    /// The exit status, once the process has exited.
    pub(crate) fn exited(&self) -> Option<ProcessExit> {
        *self.exit.borrow()
    }

    /// Stops the process on purpose: asks nicely on control, waits, then kills the group.
    /// Pending requests end with the terminal event of `reason`. Returns the exit status.
    ///
    /// ipykernel only exits once its main thread is free, so a busy kernel is interrupted
    /// too (`interrupt` says how); otherwise stopping it would always take the full timeout.
    pub(crate) async fn stop(
        mut self,
        reason: StopReason,
        interrupt: Option<InterruptMode>,
        config: &LaunchConfig,
    ) -> Option<ProcessExit> {
        match interrupt {
            Some(InterruptMode::Signal) => {
                let _ = self.group.signal(GroupSignal::Interrupt);
            }
            Some(InterruptMode::Message) => {
                let (reply, _ignored) = tokio::sync::oneshot::channel();
                let _ = self.commands.send(PumpCommand::Control {
                    request: jupyter_protocol::InterruptRequest {}.into(),
                    reply,
                });
            }
            None => {}
        }
        let request: JupyterMessage = jupyter_protocol::ShutdownRequest {
            restart: reason == StopReason::Restart,
        }
        .into();
        let asked = self
            .commands
            .send(PumpCommand::Stop {
                reason,
                request: Some(request),
            })
            .is_ok();
        let patience = if asked {
            config.shutdown_timeout
        } else {
            Duration::ZERO
        };
        if !wait_for_exit(&mut self.exit, patience).await {
            tracing::info!(
                pid = self.pid,
                "the kernel did not exit when asked; killing it"
            );
            let _ = self.group.signal(GroupSignal::Kill);
            wait_for_exit(&mut self.exit, KILL_PATIENCE).await;
        }
        self.group.kill_and_disarm();
        // Let the pump hand out the terminal events before its task is torn down.
        if let Some(pump) = self.pump.as_mut() {
            let _ = tokio::time::timeout(KILL_PATIENCE, pump).await;
        }
        self.exited()
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        self.group.kill_and_disarm();
        if let Some(pump) = &self.pump {
            pump.abort();
        }
        let _ = std::fs::remove_file(&self.connection_file);
    }
}

/// How long a SIGKILLed process may take to be reaped.
const KILL_PATIENCE: Duration = Duration::from_secs(2);

async fn wait_for_exit(
    exit: &mut watch::Receiver<Option<ProcessExit>>,
    patience: Duration,
) -> bool {
    matches!(
        tokio::time::timeout(patience, exit.wait_for(Option::is_some)).await,
        Ok(Ok(_))
    )
}

pub(crate) struct LaunchRequest<'a> {
    pub spec: &'a KernelSpecInfo,
    pub cwd: &'a Path,
    pub config: &'a LaunchConfig,
    pub hub: &'a Arc<StatusHub>,
    pub epoch: u64,
}

enum Failure {
    /// Another process took one of our ports between choosing and binding: try new ones.
    PortCollision {
        diagnostics: String,
    },
    Fatal(Error),
}

/// Starts the kernel, retrying with fresh ports when the kernel reports a port collision.
pub(crate) async fn launch(request: &LaunchRequest<'_>) -> Result<Generation> {
    let mut attempt = 0;
    loop {
        match launch_once(request).await {
            Ok(generation) => return Ok(generation),
            Err(Failure::PortCollision { .. }) if attempt < request.config.port_retries => {
                attempt += 1;
                tracing::info!(attempt, "kernel port collision; retrying with new ports");
            }
            Err(Failure::PortCollision { diagnostics }) => {
                return Err(Error::PortsTaken {
                    spec_id: request.spec.id.clone(),
                    attempts: attempt + 1,
                    diagnostics,
                });
            }
            Err(Failure::Fatal(error)) => return Err(error),
        }
    }
}

async fn launch_once(request: &LaunchRequest<'_>) -> Result<Generation, Failure> {
    let LaunchRequest {
        spec,
        cwd,
        config,
        hub,
        epoch,
    } = *request;
    let fatal = Failure::Fatal;
    if !cwd.is_dir() {
        return Err(fatal(Error::Spawn {
            spec_id: spec.id.clone(),
            reason: format!("the working folder `{}` does not exist", cwd.display()),
        }));
    }
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let (ports, listeners) = peek_ports_with_listeners(ip, 5).await.map_err(|source| {
        fatal(Error::Transport {
            context: "choosing free ports",
            source,
        })
    })?;
    let connection = ConnectionInfo {
        transport: Transport::TCP,
        ip: ip.to_string(),
        stdin_port: ports[0],
        control_port: ports[1],
        hb_port: ports[2],
        shell_port: ports[3],
        iopub_port: ports[4],
        signature_scheme: "hmac-sha256".to_owned(),
        key: format!("{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple()),
        kernel_name: Some(spec.id.clone()),
    };
    let connection_file = write_connection_file(&config.runtime_dir, &connection).map_err(fatal)?;
    let remove_file_on_error = scopeguard_remove(&connection_file);
    let inheritance = Inheritance::new().map_err(|source| {
        fatal(Error::Io {
            context: "could not create the handles a kernel inherits".to_owned(),
            source,
        })
    })?;

    let mut command =
        tokio::process::Command::new(substitute(&spec.argv[0], spec, &connection_file));
    command
        .args(
            spec.argv[1..]
                .iter()
                .map(|arg| substitute(arg, spec, &connection_file)),
        )
        .envs(&spec.env)
        // ipykernel watches its parent and exits when it is orphaned; on Windows it also
        // waits for interrupts on an event.
        .envs(inheritance.env())
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(false);
    // Its own process group, so that an interrupt or a kill reaches the helpers it starts.
    #[cfg(unix)]
    command.process_group(0);
    crate::discovery::hide_console(&mut command);
    let mut child = command.spawn().map_err(|error| {
        let program = &spec.argv[0];
        let reason = match error.kind() {
            std::io::ErrorKind::NotFound => format!("the program `{program}` was not found"),
            std::io::ErrorKind::PermissionDenied => {
                format!("the program `{program}` is not executable")
            }
            _ => format!("the operating system refused to run `{program}`"),
        };
        fatal(Error::Spawn {
            spec_id: spec.id.clone(),
            reason,
        })
    })?;
    // The kernel binds the ports as its first action; until the spawn they were ours.
    drop(listeners);
    let pid = child.id().unwrap_or_default();
    let group = Arc::new(ProcessGroup::new(pid, inheritance));
    let log = Arc::new(BoundedLog::new(config.log_capacity));
    let mut log_readers = Vec::new();
    if let Some(stdout) = child.stdout.take() {
        log_readers.push(tokio::spawn(capture(stdout, Arc::clone(&log), "stdout")));
    }
    if let Some(stderr) = child.stderr.take() {
        log_readers.push(tokio::spawn(capture(stderr, Arc::clone(&log), "stderr")));
    }
    let (exit_sender, exit) = watch::channel(None);
    let waiter = tokio::spawn(async move {
        let exit = match child.wait().await {
            Ok(status) => ProcessExit::from_status(status),
            Err(_) => ProcessExit::default(),
        };
        exit_sender.send_replace(Some(exit));
    });
    let mut tasks = AbortOnDrop::default();
    tasks.push(waiter);

    let session = Uuid::new_v4().to_string();
    let mut exit_watch = exit.clone();
    enum Outcome<T> {
        Ready(T),
        Exited(ProcessExit),
        PortTaken,
        TimedOut,
    }
    let outcome = tokio::select! {
        result = handshake(&connection, &session) => Outcome::Ready(result),
        exited = exit_watch.wait_for(Option::is_some) => {
            Outcome::Exited(exited.ok().and_then(|exit| *exit).unwrap_or_default())
        }
        // ipykernel does not exit when a port is taken: it reports the error and hangs.
        () = log.wait_for(ADDRESS_IN_USE) => Outcome::PortTaken,
        () = tokio::time::sleep(config.startup_timeout) => Outcome::TimedOut,
    };
    let handshake_result = match outcome {
        Outcome::Ready(result) => result.map_err(fatal),
        Outcome::Exited(exit) => {
            // Collect what the kernel said before it died; the pipes close with it.
            for reader in &mut log_readers {
                let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
            }
            Err(classify_exit(spec, exit, log.snapshot()))
        }
        Outcome::PortTaken => Err(Failure::PortCollision {
            diagnostics: log.snapshot(),
        }),
        Outcome::TimedOut => Err(fatal(Error::StartTimeout {
            spec_id: spec.id.clone(),
            timeout: config.startup_timeout,
            diagnostics: log.snapshot(),
        })),
    };
    let (iopub, shell, control, info) = match handshake_result {
        Ok(handshake) => handshake,
        Err(failure) => {
            let _ = group.signal(GroupSignal::Kill);
            wait_for_exit(&mut exit_watch, KILL_PATIENCE).await;
            group.kill_and_disarm();
            for reader in log_readers {
                reader.abort();
            }
            return Err(failure);
        }
    };
    for reader in log_readers {
        tasks.push(reader);
    }

    let (iopub_sender, iopub_receiver) = queue();
    let (shell_sender, shell_receiver) = queue();
    let (control_sender, control_receiver) = queue();
    let (shell_out, shell_out_receiver) = mpsc::unbounded_channel();
    let (control_out, control_out_receiver) = mpsc::unbounded_channel();
    let (shell_send, shell_recv) = shell.split();
    let (control_send, control_recv) = control.split();
    let mut io_tasks = AbortOnDrop::default();
    io_tasks.push(tokio::spawn(read_socket(iopub, iopub_sender, "iopub")));
    io_tasks.push(tokio::spawn(read_socket(shell_recv, shell_sender, "shell")));
    io_tasks.push(tokio::spawn(read_socket(
        control_recv,
        control_sender,
        "control",
    )));
    io_tasks.push(tokio::spawn(write_socket(
        shell_send,
        shell_out_receiver,
        "shell",
    )));
    io_tasks.push(tokio::spawn(write_socket(
        control_send,
        control_out_receiver,
        "control",
    )));
    let (commands, command_receiver) = mpsc::unbounded_channel();
    let pump = Pump {
        epoch,
        hub: Arc::clone(hub),
        group: Arc::clone(&group),
        commands: command_receiver,
        iopub: iopub_receiver,
        shell: shell_receiver,
        control: control_receiver,
        shell_out,
        control_out,
        exit: exit.clone(),
        reply_grace: config.reply_grace,
        _io_tasks: io_tasks,
    };
    let pump = tokio::spawn(pump.run());
    remove_file_on_error.disarm();
    Ok(Generation {
        epoch,
        pid,
        info,
        connection,
        commands,
        exit,
        group,
        log,
        pump: Some(pump),
        connection_file,
        _tasks: tasks,
    })
}

/// What a kernel prints when one of its ports was taken (ipykernel's ZeroMQ error, and the
/// operating system's wording that other kernels pass on).
const ADDRESS_IN_USE: &str = "Address already in use";

fn classify_exit(spec: &KernelSpecInfo, exit: ProcessExit, diagnostics: String) -> Failure {
    if diagnostics.contains(ADDRESS_IN_USE) {
        return Failure::PortCollision { diagnostics };
    }
    if diagnostics.contains("No module named ipykernel") {
        return Failure::Fatal(Error::IpykernelMissing {
            python: PathBuf::from(&spec.argv[0]),
        });
    }
    Failure::Fatal(Error::StartFailed {
        spec_id: spec.id.clone(),
        exit,
        diagnostics,
    })
}

/// Connects the client sockets, asks for `kernel_info` and waits until IOPub delivers that
/// request's `idle`: a SUB socket only receives once its subscription has reached the kernel,
/// and outputs published before that would be lost (the "slow joiner" problem).
async fn handshake(
    connection: &ConnectionInfo,
    session: &str,
) -> Result<(
    ClientIoPubConnection,
    ClientShellConnection,
    ClientControlConnection,
    KernelInfo,
)> {
    let transport = |context| move |source| Error::Transport { context, source };
    wait_until_listening(connection.iopub_port).await;
    let mut iopub = connect_retrying("connecting to IOPub", || {
        create_client_iopub_connection(connection, "", session)
    })
    .await;
    let identity = peer_identity_for_session(session).map_err(transport("connecting to shell"))?;
    let mut shell = connect_retrying("connecting to shell", || {
        create_client_shell_connection_with_identity(connection, session, identity.clone())
    })
    .await;
    let control = connect_retrying("connecting to control", || {
        create_client_control_connection(connection, session)
    })
    .await;
    // Every `kernel_info_request` sent, and whether IOPub has delivered anything yet.
    let mut ours: Vec<String> = Vec::new();
    let mut heard = false;
    loop {
        let request: JupyterMessage = KernelInfoRequest {}.into();
        let msg_id = request.header.msg_id.clone();
        shell
            .send(request)
            .await
            .map_err(transport("sending kernel_info_request"))?;
        let info = loop {
            let reply = read_one(&mut shell)
                .await
                .map_err(transport("waiting for kernel_info_reply"))?;
            if reply.msg_type == "kernel_info_reply"
                && reply.parent_msg_id.as_deref() == Some(&msg_id)
            {
                break kernel_info(&reply.content);
            }
        };
        ours.push(msg_id);
        // Settled once IOPub brings the `idle` of one of our requests: the kernel's startup
        // chatter (its `busy`/`idle` around them) is then behind us, so the status the caller
        // sets next is not overturned by a late `busy`. Until IOPub has delivered anything, the
        // subscription may not have reached the kernel: after a short wait, ask again so the
        // kernel publishes another status. Once it has, the `idle` will come (a busy machine
        // only delays it): wait for it, within the caller's start-up deadline.
        let settled =
            tokio::time::timeout(IOPUB_SETTLE, our_idle(&mut iopub, &ours, &mut heard)).await;
        let settled = match settled {
            Ok(settled) => settled,
            Err(_) if heard => our_idle(&mut iopub, &ours, &mut heard).await,
            Err(_) => continue,
        };
        return match settled {
            Ok(()) => Ok((iopub, shell, control, info)),
            Err(source) => Err(Error::Transport {
                context: "waiting for IOPub",
                source,
            }),
        };
    }
}

/// Reads IOPub until the `idle` of one of the requests in `ours`; sets `heard` on any message.
async fn our_idle(
    iopub: &mut ClientIoPubConnection,
    ours: &[String],
    heard: &mut bool,
) -> jupyter_zmq_client::Result<()> {
    loop {
        let message = read_one(iopub).await?;
        *heard = true;
        if message.msg_type == "status"
            && message.content["execution_state"] == "idle"
            && message
                .parent_msg_id
                .as_ref()
                .is_some_and(|parent| ours.contains(parent))
        {
            return Ok(());
        }
    }
}

/// Waits until something accepts connections on the kernel's port. The kernel binds its
/// sockets as soon as Python has imported ipykernel; polling briefly here beats the growing
/// back-off of the ZeroMQ connect loop by up to half a second.
async fn wait_until_listening(port: u16) {
    while let Err(error) = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await {
        if error.kind() != std::io::ErrorKind::ConnectionRefused {
            return;
        }
        tokio::time::sleep(PORT_POLL_INTERVAL).await;
    }
}

const PORT_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Connects, retrying until it works. While the kernel starts, its port can be held by
/// something else: the reserved listener still open in a process another thread was forking at
/// that moment, or, between our releasing the port and the kernel binding it (seconds on a
/// loaded machine), another program that was handed the same free port. A connect then fails
/// with a reset or a handshake error. Either the kernel binds the port a moment later, or it
/// fails to bind and reports "Address already in use" (ipykernel then hangs, other kernels
/// exit), which the caller watches for and answers with fresh ports. So no attempt count ends
/// this loop: the caller's start-up deadline, the kernel's exit and that report do. Each
/// attempt is bounded, so a listener that never answers the ZeroMQ greeting does not hold the
/// loop.
async fn connect_retrying<T, F, Fut>(context: &'static str, mut connect: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = jupyter_zmq_client::Result<T>>,
{
    let mut attempt = 0u32;
    loop {
        match tokio::time::timeout(CONNECT_ATTEMPT_TIMEOUT, connect()).await {
            Ok(Ok(connected)) => return connected,
            Ok(Err(error)) => {
                attempt += 1;
                tracing::debug!(context, attempt, %error, "kernel connect failed; retrying");
            }
            Err(_) => {
                attempt += 1;
                tracing::debug!(context, attempt, "kernel connect timed out; retrying");
            }
        }
        tokio::time::sleep(CONNECT_RETRY_DELAY).await;
    }
}

const CONNECT_RETRY_DELAY: Duration = Duration::from_millis(100);
const CONNECT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);

/// How long to wait for the first IOPub message before asking for `kernel_info` again.
const IOPUB_SETTLE: Duration = Duration::from_millis(500);

async fn read_one<S: SocketRecv>(
    connection: &mut jupyter_zmq_client::Connection<S>,
) -> jupyter_zmq_client::Result<WireMessage> {
    loop {
        let multipart = connection.socket.recv().await?;
        // A message that fails its signature is not from our kernel (a port another program
        // held while ours started): skip it, as the pump does.
        let raw = match RawMessage::from_multipart(multipart, &connection.mac) {
            Ok(raw) => raw,
            Err(error) => {
                tracing::debug!(%error, "skipping an unverifiable message during the handshake");
                continue;
            }
        };
        if let Some(message) = WireMessage::from_raw(&raw) {
            return Ok(message);
        }
    }
}

async fn capture(
    mut stream: impl tokio::io::AsyncRead + Unpin,
    log: Arc<BoundedLog>,
    name: &'static str,
) {
    let mut buffer = vec![0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let chunk = &buffer[..read];
                tracing::debug!(stream = name, output = %String::from_utf8_lossy(chunk), "kernel output");
                log.push(chunk);
            }
        }
    }
}

fn substitute(arg: &str, spec: &KernelSpecInfo, connection_file: &Path) -> String {
    let mut arg = arg.replace("{connection_file}", &connection_file.to_string_lossy());
    if let Some(resource_dir) = &spec.resource_dir {
        arg = arg.replace("{resource_dir}", &resource_dir.to_string_lossy());
    }
    arg
}

/// Writes the connection file readable by the owner only: it holds the HMAC key.
fn write_connection_file(runtime_dir: &Path, connection: &ConnectionInfo) -> Result<PathBuf> {
    use std::io::Write as _;
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let io_error = |context: &str| {
        let context = context.to_owned();
        move |source| Error::Io { context, source }
    };
    let mut folder = std::fs::DirBuilder::new();
    folder.recursive(true);
    #[cfg(unix)]
    folder.mode(0o700);
    folder.create(runtime_dir).map_err(io_error(&format!(
        "could not create the Jupyter runtime folder `{}`",
        runtime_dir.display()
    )))?;
    let path = runtime_dir.join(format!("kernel-{}.json", Uuid::new_v4()));
    let json = serde_json::to_vec_pretty(connection).map_err(|error| Error::Io {
        context: "could not encode the connection file".to_owned(),
        source: std::io::Error::other(error),
    })?;
    let context = format!("could not write the connection file `{}`", path.display());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    // On Windows the file inherits the runtime folder's ACL, which is the user's own profile.
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(&path).map_err(io_error(&context))?;
    file.write_all(&json).map_err(io_error(&context))?;
    Ok(path)
}

/// Removes the connection file unless disarmed (the launch succeeded).
struct RemoveOnError<'a> {
    path: &'a Path,
    armed: bool,
}

fn scopeguard_remove(path: &Path) -> RemoveOnError<'_> {
    RemoveOnError { path, armed: true }
}

impl RemoveOnError<'_> {
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for RemoveOnError<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{InterruptMode, SpecSource};
    use std::collections::BTreeMap;

    fn spec(argv: &[&str]) -> KernelSpecInfo {
        KernelSpecInfo {
            id: "k".into(),
            display_name: "K".into(),
            language: "python".into(),
            argv: argv.iter().map(|arg| (*arg).to_owned()).collect(),
            env: BTreeMap::new(),
            interrupt_mode: InterruptMode::Signal,
            resource_dir: Some(PathBuf::from("/specs/k")),
            source: SpecSource::User,
        }
    }

    #[test]
    fn placeholders_are_substituted() {
        let spec = spec(&["x"]);
        let file = Path::new("/run/kernel-1.json");
        assert_eq!(
            substitute("-f={connection_file}", &spec, file),
            "-f=/run/kernel-1.json"
        );
        assert_eq!(
            substitute("{resource_dir}/logo", &spec, file),
            "/specs/k/logo"
        );
    }

    #[test]
    fn exit_with_missing_ipykernel_names_the_interpreter() {
        let spec = spec(&["/p/bin/python", "-m", "ipykernel_launcher"]);
        let failure = classify_exit(
            &spec,
            ProcessExit::default(),
            "/p/bin/python: No module named ipykernel_launcher\n".into(),
        );
        let Failure::Fatal(error) = failure else {
            panic!("not fatal")
        };
        assert_eq!(
            error.to_string(),
            "the Python interpreter `/p/bin/python` has no ipykernel: install it with `/p/bin/python -m pip install ipykernel` or select another kernel"
        );
    }

    #[test]
    fn start_failure_message_keeps_the_log_out() {
        let failure = classify_exit(
            &spec(&["x"]),
            ProcessExit {
                code: Some(1),
                signal: None,
            },
            "secret traceback text".into(),
        );
        let Failure::Fatal(error) = failure else {
            panic!("not fatal")
        };
        assert!(!error.to_string().contains("secret"));
        assert_eq!(error.diagnostics(), Some("secret traceback text"));
    }

    #[test]
    fn address_in_use_is_a_port_collision() {
        let failure = classify_exit(
            &spec(&["x"]),
            ProcessExit::default(),
            "zmq.error.ZMQError: Address already in use".into(),
        );
        assert!(matches!(failure, Failure::PortCollision { .. }));
    }

    #[cfg(unix)]
    #[test]
    fn connection_file_is_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let connection = ConnectionInfo {
            transport: Transport::TCP,
            ip: "127.0.0.1".into(),
            stdin_port: 1,
            control_port: 2,
            hb_port: 3,
            shell_port: 4,
            iopub_port: 5,
            signature_scheme: "hmac-sha256".into(),
            key: "k".into(),
            kernel_name: None,
        };
        let path = write_connection_file(&dir.path().join("runtime"), &connection).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(written["shell_port"], 4);
        assert_eq!(written["key"], "k");
    }
}
