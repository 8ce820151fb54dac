//! A real JupyterHub for the hub tests: JupyterHub from the test Python environment with its
//! real proxy (configurable-http-proxy from `tests/hub/node_modules`), the dummy authenticator
//! and the simple local-process spawner, on loopback, its public port served over TLS with a
//! certificate of a CA made here. One hub per test binary run ([`Hub::shared`]); each test
//! uses a named server of its own, so tests that stop servers do not disturb the others.
//!
//! The hub is started by a small shell watchdog whose standard input is a pipe from this
//! process: when the test binary exits (however it exits), the pipe closes and the watchdog
//! sends the hub SIGTERM, which stops every user server and the proxy. The hub's own standard
//! input is `/dev/null` (the proxy, a node program, would otherwise make a shared pipe
//! non-blocking under us).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::kernel_server::{TestCa, https_request};
use crate::{python, workspace_root};

/// The user whose token the tests hold.
pub const USER: &str = "alice";

/// A running JupyterHub.
pub struct Hub {
    port: u16,
    /// alice's API token (the user's own scopes).
    token: String,
    /// bob's API token: another user's, which alice's servers refuse.
    bob_token: String,
    /// A service token allowed to manage every user's servers and tokens (as an idle culler
    /// or an administrator would).
    admin_token: String,
    ca: TestCa,
    folder: tempfile::TempDir,
    /// The watchdog; its stdin is the pipe whose end stops the hub.
    _watchdog: Mutex<Child>,
}

static SHARED: OnceLock<Hub> = OnceLock::new();

/// The proxy that JupyterHub runs, installed by `cargo xtask setup`.
pub fn proxy_binary() -> PathBuf {
    let path = workspace_root().join("tests/hub/node_modules/.bin/configurable-http-proxy");
    assert!(
        path.exists(),
        "no configurable-http-proxy at {}: run `cargo xtask setup` (npm ci in tests/hub)",
        path.display()
    );
    path
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn random_hex() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    (0..2)
        .map(|round| {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_u128(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_nanos()
                    + round,
            );
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

const WATCHDOG: &str = r#"
"$@" </dev/null &
hub=$!
trap 'kill -TERM "$hub" 2>/dev/null; wait "$hub"; exit 0' TERM INT
# Our stdin is a pipe from the test process: it ends when that process does.
read -r _ignored || true
kill -TERM "$hub" 2>/dev/null
wait "$hub"
"#;

impl Hub {
    /// The hub of this test binary run, started on first use (about 5-15 s).
    pub fn shared() -> &'static Hub {
        SHARED.get_or_init(|| {
            let python = python();
            let bin = python.parent().expect("python is <venv>/bin/python");
            Hub::start(&bin.join("jupyterhub-singleuser")).expect("the JupyterHub starts")
        })
    }

    /// A hub of its own whose user servers run `singleuser` (a `jupyterhub-singleuser` of
    /// another environment than the test one, with the same JupyterHub version); stopped when
    /// dropped.
    pub fn start(singleuser: &Path) -> Result<Hub> {
        let python = python();
        let bin = python.parent().expect("python is <venv>/bin/python");
        let jupyterhub = bin.join("jupyterhub");
        if !jupyterhub.exists() {
            bail!(
                "no JupyterHub at {}: run `cargo xtask setup` (python/requirements.txt)",
                jupyterhub.display()
            );
        }
        let folder = tempfile::tempdir()?;
        let d = folder.path().canonicalize()?;
        let ca = TestCa::new("jupyter-mcp test CA")?;
        let tls = ca.issue("hub")?;
        let (public, hub, api) = (free_port()?, free_port()?, free_port()?);
        let token = format!("alice-{}", random_hex());
        let bob_token = format!("bob-{}", random_hex());
        let admin_token = format!("admin-{}", random_hex());
        let cookie = format!("{}{}", random_hex(), random_hex());
        let config = format!(
            r#"
from jupyterhub.spawner import SimpleLocalProcessSpawner
c = get_config()  # noqa
c.JupyterHub.bind_url = "https://127.0.0.1:{public}/"
c.JupyterHub.ssl_cert = {cert:?}
c.JupyterHub.ssl_key = {key:?}
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api}"
c.ConfigurableHTTPProxy.command = [{chp:?}]
c.ConfigurableHTTPProxy.auth_token = "proxy-{proxy_secret}"
c.JupyterHub.db_url = "sqlite:///{d}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret = bytes.fromhex("{cookie}")
c.JupyterHub.pid_file = "{d}/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"alice", "bob"}}
c.JupyterHub.allow_named_servers = True
c.JupyterHub.named_server_limit_per_user = 0
c.JupyterHub.api_tokens = {{{token:?}: "alice", {bob_token:?}: "bob"}}
c.JupyterHub.services = [{{"name": "test-admin", "api_token": {admin_token:?}}}]
c.JupyterHub.load_roles = [{{"name": "test-admin", "services": ["test-admin"],
    "scopes": ["admin:users", "admin:servers", "tokens", "access:servers", "read:hub"]}}]

def pre_spawn_hook(spawner):
    # A server whose program does not exist: the spawn fails at once, with the hub's reason.
    if spawner.name == "broken":
        spawner.cmd = ["/nonexistent/jupyterhub-singleuser"]

c.JupyterHub.spawner_class = SimpleLocalProcessSpawner
c.Spawner.pre_spawn_hook = pre_spawn_hook
c.SimpleLocalProcessSpawner.home_dir_template = "{d}/home/{{username}}"
c.Spawner.cmd = [{singleuser:?}]
c.Spawner.args = ["--allow-root"]
c.Spawner.start_timeout = 90
c.Spawner.http_timeout = 90
c.Spawner.poll_interval = 2
"#,
            cert = tls.cert.display().to_string(),
            key = tls.key.display().to_string(),
            chp = proxy_binary().display().to_string(),
            d = d.display(),
            proxy_secret = random_hex(),
            singleuser = singleuser.display().to_string(),
        );
        let config_file = d.join("jupyterhub_config.py");
        std::fs::write(&config_file, config)?;
        let log = std::fs::File::create(d.join("hub.log"))?;
        let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ))?;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("hub-watchdog")
            .arg(&jupyterhub)
            .arg("-f")
            .arg(&config_file)
            .current_dir(&d)
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the JupyterHub")?;
        let hub = Hub {
            port: public,
            token,
            bob_token,
            admin_token,
            ca,
            folder,
            _watchdog: Mutex::new(watchdog),
        };
        // The proxy answers 404 until the hub has registered its routes: wait for the API.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok((200, _)) = hub.request("GET", "/hub/api/", None, "") {
                return Ok(hub);
            }
            if let Some(status) = hub._watchdog.lock().unwrap().try_wait()? {
                bail!("the JupyterHub exited ({status}); its log:\n{}", hub.log());
            }
            if Instant::now() > deadline {
                bail!(
                    "the JupyterHub did not answer within 120 s; its log:\n{}",
                    hub.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `https://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// alice's API token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The home folder of `user`, which the spawner makes and the user's server serves.
    pub fn home(&self, user: &str) -> PathBuf {
        self.folder.path().join("home").join(user)
    }

    /// bob's API token.
    pub fn bob_token(&self) -> &str {
        &self.bob_token
    }

    /// The CA that signed the hub's certificate (for `--kernel-server-ca`).
    pub fn ca_file(&self) -> PathBuf {
        self.ca.ca_file()
    }

    /// The hub's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.folder.path().join("hub.log")).unwrap_or_default()
    }

    /// A file holding `token`, in a folder of its own.
    pub fn write_token_file(&self, folder: &Path, token: &str) -> PathBuf {
        let path = folder.join("hub-token");
        std::fs::write(&path, format!("{token}\n")).unwrap();
        path
    }

    /// One request to the hub with the admin token: status and body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
    ) -> Result<(u16, String)> {
        let authorization = format!("token {}", token.unwrap_or(&self.admin_token));
        https_request(
            self.port,
            &self.ca.ca_file(),
            method,
            path,
            &[
                ("Authorization", &authorization),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    }

    fn server_path(name: &str) -> String {
        if name.is_empty() {
            format!("/hub/api/users/{USER}/server")
        } else {
            format!("/hub/api/users/{USER}/servers/{name}")
        }
    }

    /// alice's server `name` as the hub's user model describes it (`None`: not running).
    pub fn server(&self, name: &str) -> Option<Value> {
        let (status, body) = self
            .request("GET", &format!("/hub/api/users/{USER}"), None, "")
            .ok()?;
        assert_eq!(status, 200, "{body}");
        let user: Value = serde_json::from_str(&body).ok()?;
        user["servers"].get(name).cloned()
    }

    /// Stops alice's server `name` through the hub's API, as an administrator or the idle
    /// culler does, and waits until the hub says it is gone.
    pub fn stop_server(&self, name: &str) {
        let (status, body) = self
            .request("DELETE", &Hub::server_path(name), None, "")
            .expect("the hub answers");
        assert!(matches!(status, 202 | 204), "stopping: {status} {body}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.server(name).is_some() {
            assert!(Instant::now() < deadline, "the server did not stop");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A new API token for alice (all her scopes): its id and value.
    pub fn new_token(&self, note: &str) -> (String, String) {
        let (status, body) = self
            .request(
                "POST",
                &format!("/hub/api/users/{USER}/tokens"),
                None,
                &serde_json::json!({"note": note}).to_string(),
            )
            .expect("the hub answers");
        assert_eq!(status, 201, "{body}");
        let made: Value = serde_json::from_str(&body).unwrap();
        (
            made["id"].as_str().unwrap().to_owned(),
            made["token"].as_str().unwrap().to_owned(),
        )
    }

    /// Revokes alice's token `id`.
    pub fn revoke_token(&self, id: &str) {
        let (status, body) = self
            .request(
                "DELETE",
                &format!("/hub/api/users/{USER}/tokens/{id}"),
                None,
                "",
            )
            .expect("the hub answers");
        assert_eq!(status, 204, "{body}");
    }

    /// Whether `token` is accepted by the hub now.
    pub fn accepts(&self, token: &str) -> bool {
        matches!(
            self.request("GET", "/hub/api/user", Some(token), ""),
            Ok((200, _))
        )
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        // Closing the watchdog's stdin stops the hub (a shared hub lives in a static and is
        // stopped this way when the process exits).
        if let Ok(mut watchdog) = self._watchdog.lock() {
            if let Some(mut stdin) = watchdog.stdin.take() {
                let _ = stdin.write_all(b"\n");
            }
            let _ = watchdog.wait();
        }
    }
}
