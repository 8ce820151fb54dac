//! Real kernel servers for the remote-kernel tests: a Jupyter Server or a Jupyter Kernel
//! Gateway from the test Python environment, on loopback, on a free port, with a random token,
//! over plain HTTP or TLS with a certificate of a CA made here ([`TestCa`]), stopped when
//! dropped; and a TCP proxy that can cut every connection through it.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::python;

/// Which server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// `jupyter server`: kernels start in the folder named by the request's `path`.
    JupyterServer,
    /// `jupyter kernelgateway`, started in the given folder (its root for kernel paths).
    KernelGateway,
}

/// A running Jupyter Server or Kernel Gateway, stopped (SIGTERM, which shuts its kernels
/// down) when dropped.
pub struct KernelServer {
    kind: ServerKind,
    /// The Python environment the server runs from.
    python: PathBuf,
    child: Option<Child>,
    port: u16,
    token: String,
    root: PathBuf,
    extra_args: Vec<String>,
    /// Serve TLS with these certificate and key files, trusted through this CA file.
    tls: Option<ServerTls>,
    /// Runtime, config and data folders of its own, so nothing of the user's is read or
    /// written; also holds the token file.
    home: tempfile::TempDir,
}

/// A server's TLS files: its certificate and key, and the CA that signed them.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// A certificate authority made for one test run (rcgen, ECDSA P-256), and the server
/// certificates it signs (for `127.0.0.1` and `localhost`). Its files live as long as it does.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    folder: tempfile::TempDir,
}

impl TestCa {
    /// A new CA called `name`, its certificate written to [`TestCa::ca_file`].
    pub fn new(name: &str) -> Result<TestCa> {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        let certificate = params.self_signed(&key)?;
        let folder = tempfile::tempdir()?;
        std::fs::write(folder.path().join("ca.pem"), certificate.pem())?;
        Ok(TestCa {
            issuer: rcgen::Issuer::new(params, key),
            folder,
        })
    }

    /// The CA's certificate (PEM), for `--kernel-server-ca`.
    pub fn ca_file(&self) -> PathBuf {
        self.folder.path().join("ca.pem")
    }

    /// A server certificate for `127.0.0.1` and `localhost`, written as `<stem>.pem` and
    /// `<stem>.key` next to the CA.
    pub fn issue(&self, stem: &str) -> Result<ServerTls> {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let certificate = params.signed_by(&key, &self.issuer)?;
        let cert = self.folder.path().join(format!("{stem}.pem"));
        let key_file = self.folder.path().join(format!("{stem}.key"));
        std::fs::write(&cert, certificate.pem())?;
        std::fs::write(&key_file, key.serialize_pem())?;
        Ok(ServerTls {
            cert,
            key: key_file,
            ca: self.ca_file(),
        })
    }
}

impl KernelServer {
    /// Starts a server of `kind` serving (or working in) `root`, with `extra_args`, and waits
    /// until it answers `/api/kernelspecs` with its token.
    pub fn start(kind: ServerKind, root: &Path, extra_args: &[&str]) -> Result<KernelServer> {
        KernelServer::start_with_tls(kind, root, extra_args, None)
    }

    /// Like [`KernelServer::start`], serving HTTPS with `tls` when given.
    pub fn start_with_tls(
        kind: ServerKind,
        root: &Path,
        extra_args: &[&str],
        tls: Option<ServerTls>,
    ) -> Result<KernelServer> {
        KernelServer::start_from(&python(), kind, root, extra_args, tls)
    }

    /// Like [`KernelServer::start_with_tls`], the server run by `python` (another environment
    /// than the test one).
    pub fn start_from(
        python: &Path,
        kind: ServerKind,
        root: &Path,
        extra_args: &[&str],
        tls: Option<ServerTls>,
    ) -> Result<KernelServer> {
        let home = tempfile::tempdir()?;
        let token = format!("{:016x}{:016x}", random_u64(), random_u64().rotate_left(17));
        std::fs::write(home.path().join("token"), &token)?;
        let mut server = KernelServer {
            kind,
            python: python.to_path_buf(),
            child: None,
            port: free_port()?,
            token,
            root: root.to_path_buf(),
            extra_args: extra_args.iter().map(|arg| (*arg).to_owned()).collect(),
            tls,
            home,
        };
        server.launch()?;
        Ok(server)
    }

    /// `http://127.0.0.1:<port>/` (`https://` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// A file holding the token, for `--kernel-server-token-file`.
    pub fn token_file(&self) -> PathBuf {
        self.home.path().join("token")
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops the server (its kernels with it) and starts a new process on the same port with
    /// the same token.
    pub fn restart(&mut self) -> Result<()> {
        self.stop()?;
        self.launch()
    }

    /// Kills the server (SIGKILL, as a crash would: it closes nothing) and starts a new
    /// process on the same port with the same token.
    pub fn crash_and_restart(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        self.launch()
    }

    fn launch(&mut self) -> Result<()> {
        let port = self.port.to_string();
        let home = self.home.path();
        let mut command = Command::new(&self.python);
        match self.kind {
            ServerKind::JupyterServer => {
                command
                    .args(["-m", "jupyter_server", "--ServerApp.ip=127.0.0.1"])
                    .arg(format!("--ServerApp.port={port}"))
                    .args([
                        "--ServerApp.port_retries=0",
                        "--ServerApp.open_browser=False",
                        "--ServerApp.allow_root=True",
                    ])
                    .arg(format!("--ServerApp.root_dir={}", self.root.display()))
                    .env("JUPYTER_TOKEN", &self.token);
                if let Some(tls) = &self.tls {
                    command
                        .arg(format!("--ServerApp.certfile={}", tls.cert.display()))
                        .arg(format!("--ServerApp.keyfile={}", tls.key.display()));
                }
            }
            ServerKind::KernelGateway => {
                command
                    .args(["-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1"])
                    .arg(format!("--KernelGatewayApp.port={port}"))
                    .arg("--KernelGatewayApp.port_retries=0")
                    .env("KG_AUTH_TOKEN", &self.token);
            }
        }
        command
            .args(&self.extra_args)
            .current_dir(&self.root)
            .env("JUPYTER_RUNTIME_DIR", home.join("runtime"))
            .env("JUPYTER_CONFIG_DIR", home.join("config"))
            .env("JUPYTER_DATA_DIR", home.join("data"))
            .env_remove("JUPYTER_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(home.join("server.log"))?,
            ));
        let child = command.spawn().context("starting the kernel server")?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = self.child.as_mut().and_then(|child| child.try_wait().ok()?) {
                bail!(
                    "the {:?} exited during startup ({status}); its log:\n{}",
                    self.kind,
                    self.log()
                );
            }
            let answered = match &self.tls {
                None => http_status(self.port, "/api/kernelspecs", Some(&self.token)),
                Some(tls) => https_request(
                    self.port,
                    &tls.ca,
                    "GET",
                    "/api/kernelspecs",
                    &[("Authorization", &format!("token {}", self.token))],
                    "",
                )
                .ok()
                .map(|(status, _)| status),
            };
            if answered == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "the {:?} did not answer within 90 s; its log:\n{}",
                    self.kind,
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's own log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("server.log")).unwrap_or_default()
    }

    /// Installs the kernelspec `name` (`spec` is its `kernel.json`) in the server's own Jupyter
    /// data folder, where it looks for kernelspecs again at every listing.
    pub fn install_kernelspec(&self, name: &str, spec: &serde_json::Value) -> Result<()> {
        let folder = self.home.path().join("data/kernels").join(name);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(folder.join("kernel.json"), serde_json::to_vec_pretty(spec)?)?;
        Ok(())
    }

    /// SIGTERM (the server shuts its kernels down), then waits for the exit.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if child.try_wait()?.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("the {:?} did not exit within 30 s of SIGTERM", self.kind);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many kernels the server runs now (`GET /api/kernels`; a Kernel Gateway lists
    /// them only when `--KernelGatewayApp.list_kernels=True`).
    pub fn kernel_count(&self) -> Option<usize> {
        let body = match &self.tls {
            None => http_get(self.port, "/api/kernels", Some(&self.token))?,
            Some(tls) => {
                let authorization = format!("token {}", self.token);
                match https_request(
                    self.port,
                    &tls.ca,
                    "GET",
                    "/api/kernels",
                    &[("Authorization", &authorization)],
                    "",
                ) {
                    Ok((200, body)) => body,
                    _ => return None,
                }
            }
        };
        let value: serde_json::Value = serde_json::from_str(&body).ok()?;
        value.as_array().map(Vec::len)
    }
}

impl Drop for KernelServer {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn random_u64() -> u64 {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

/// A plain HTTP/1.0 GET on loopback: the status code and the body.
fn http_exchange(port: u16, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    let mut stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let authorization = token
        .map(|token| format!("Authorization: token {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{authorization}\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

/// A TLS client configuration that trusts only the CA certificates in the PEM file `ca`.
pub fn client_config_trusting(ca: &Path) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_file_iter(ca)? {
        roots.add(certificate?)?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// One HTTP/1.0 request over TLS to `127.0.0.1:port`, trusting only the CA in `ca`: the status
/// and the body.
pub fn https_request(
    port: u16,
    ca: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String)> {
    let config = client_config_trusting(ca)?;
    let connection = rustls::ClientConnection::new(
        Arc::new(config),
        rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned(),
    )?;
    let stream =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let mut request = format!(
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n",
        body.len()
    );
    crate::finish_request(&mut request, headers, body);
    tls.write_all(request.as_bytes())?;
    let mut answer = Vec::new();
    match tls.read_to_end(&mut answer) {
        Ok(_) => {}
        // Some servers close without close_notify after an HTTP/1.0 answer.
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(error) => return Err(error.into()),
    }
    crate::status_and_body(&String::from_utf8_lossy(&answer))
}

/// The status of `GET path`, `None` when nothing answered.
pub fn http_status(port: u16, path: &str, token: Option<&str>) -> Option<u16> {
    http_exchange(port, path, token).map(|(status, _)| status)
}

fn http_get(port: u16, path: &str, token: Option<&str>) -> Option<String> {
    match http_exchange(port, path, token)? {
        (200, body) => Some(body),
        _ => None,
    }
}

/// A TCP proxy on loopback in front of `upstream`; [`SeveringProxy::sever`] cuts every
/// connection open through it (as a network failure would), while new ones are still
/// accepted. [`SeveringProxy::sever_and_hold`] also refuses new connections (an outage) until
/// [`SeveringProxy::release`].
pub struct SeveringProxy {
    port: u16,
    connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
    outage: Arc<Outage>,
    accept: tokio::task::JoinHandle<()>,
}

/// Whether the proxy refuses connections, and how many it refused.
#[derive(Default)]
struct Outage {
    held: std::sync::atomic::AtomicBool,
    refused: tokio::sync::watch::Sender<usize>,
}

impl SeveringProxy {
    pub async fn start(upstream_port: u16) -> Result<SeveringProxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let connections: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let outage: Arc<Outage> = Arc::default();
        let registry = Arc::clone(&connections);
        let refusing = Arc::clone(&outage);
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if refusing.held.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    refusing.refused.send_modify(|count| *count += 1);
                    continue;
                }
                let task = tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream_port)).await
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
                registry.lock().unwrap().push(task.abort_handle());
            }
        });
        Ok(SeveringProxy {
            port,
            connections,
            outage,
            accept,
        })
    }

    /// `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Closes every connection open now; returns how many there were.
    pub fn sever(&self) -> usize {
        let open: Vec<_> = self.connections.lock().unwrap().drain(..).collect();
        let live = open.iter().filter(|task| !task.is_finished()).count();
        for task in open {
            task.abort();
        }
        live
    }

    /// Like [`SeveringProxy::sever`], and refuses new connections until [`SeveringProxy::release`].
    pub fn sever_and_hold(&self) -> usize {
        self.outage
            .held
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.sever()
    }

    /// Waits until `count` connections were refused since the proxy started.
    pub async fn refused_at_least(&self, count: usize) {
        let mut refused = self.outage.refused.subscribe();
        let _ = refused.wait_for(|refused| *refused >= count).await;
    }

    /// Accepts connections again.
    pub fn release(&self) {
        self.outage
            .held
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for SeveringProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.sever();
    }
}
