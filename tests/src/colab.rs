//! A Colab stand-in for the end-to-end tests (`tests/colab/standin.py`): a real Jupyter Server
//! behind a small HTTPS proxy that speaks, on the wire, like the parts of Colab the standalone
//! host uses. It is not Colab and reaches no Google service; every test that uses it says
//! `stand_in` in its name.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::kernel_server::{TestCa, https_request};

/// One running stand-in, with its own CA-signed certificate.
pub struct ColabStandIn {
    child: Child,
    port: u16,
    ca: PathBuf,
    state: tempfile::TempDir,
    /// The runtimes assigned at start: (endpoint, url, token).
    pub runtimes: Vec<StandInRuntime>,
}

/// A runtime the stand-in serves.
#[derive(Debug, Clone)]
pub struct StandInRuntime {
    pub endpoint: String,
    /// `https://127.0.0.1:<port>/rt/<endpoint>/`.
    pub url: String,
    /// Its proxy token at start.
    pub token: String,
}

impl ColabStandIn {
    /// Starts a stand-in with one runtime, signed by `ca`, tokens living `token_ttl_s`.
    pub fn start(ca: &TestCa, token_ttl_s: u64) -> Result<ColabStandIn> {
        let tls = ca.issue("colab-standin")?;
        let state = tempfile::tempdir()?;
        let script = crate::workspace_root().join("tests/colab/standin.py");
        let mut child = Command::new(crate::python())
            .arg(&script)
            .arg("--cert")
            .arg(&tls.cert)
            .arg("--key")
            .arg(&tls.key)
            .arg("--state-dir")
            .arg(state.path())
            .arg("--token-ttl")
            .arg(token_ttl_s.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(std::fs::File::create(
                state.path().join("standin.log"),
            )?))
            .spawn()
            .context("starting the Colab stand-in")?;
        let stdout = child.stdout.take().context("the stand-in's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.trim().is_empty() {
            let _ = child.kill();
            bail!(
                "the Colab stand-in did not start; its logs:\n{}\n{}",
                std::fs::read_to_string(state.path().join("standin.log")).unwrap_or_default(),
                std::fs::read_to_string(state.path().join("jupyter.log")).unwrap_or_default()
            );
        }
        let ready: Value = serde_json::from_str(&line)?;
        let runtimes = ready["runtimes"]
            .as_array()
            .context("runtimes")?
            .iter()
            .map(|runtime| StandInRuntime {
                endpoint: runtime["endpoint"].as_str().unwrap_or_default().to_owned(),
                url: runtime["url"].as_str().unwrap_or_default().to_owned(),
                token: runtime["token"].as_str().unwrap_or_default().to_owned(),
            })
            .collect();
        Ok(ColabStandIn {
            child,
            port: ready["port"].as_u64().context("port")? as u16,
            ca: tls.ca,
            state,
            runtimes,
        })
    }

    /// The first runtime.
    pub fn runtime(&self) -> &StandInRuntime {
        &self.runtimes[0]
    }

    /// `https://127.0.0.1:<port>/`: the tunnel API's base.
    pub fn base_url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    /// The Google access token the tunnel stand-in accepts.
    pub fn google_token(&self) -> &'static str {
        "standin-google-access-token"
    }

    /// The refresh token the stand-in's OAuth token endpoint accepts.
    pub fn google_refresh_token(&self) -> &'static str {
        "standin-google-refresh-token"
    }

    /// The stand-in's OAuth token endpoint (the refresh-token grant), for an ADC file's
    /// `token_uri`.
    pub fn token_uri(&self) -> String {
        format!("{}standin/oauth/token", self.base_url())
    }

    /// The folder the runtime's kernels see as `/content`.
    pub fn content_folder(&self) -> PathBuf {
        self.state.path().join("root/content")
    }

    /// The stand-in's logs (the proxy's and the Jupyter Server's).
    pub fn logs(&self) -> String {
        let read = |name: &str| std::fs::read_to_string(self.state.path().join(name));
        format!(
            "{}\n{}",
            read("standin.log").unwrap_or_default(),
            read("jupyter.log").unwrap_or_default()
        )
    }

    fn control(&self, method: &str, path: &str) -> Result<Value> {
        let (status, body) = https_request(self.port, &self.ca, method, path, &[], "")?;
        if status != 200 {
            bail!("stand-in control {path}: {status} {body}");
        }
        Ok(serde_json::from_str(&body)?)
    }

    /// A new token for `endpoint`; the older ones keep working until [`Self::expire_tokens`].
    pub fn issue_token(&self, endpoint: &str) -> Result<String> {
        Ok(
            self.control("POST", &format!("/standin/issue-token?endpoint={endpoint}"))?["token"]
                .as_str()
                .context("token")?
                .to_owned(),
        )
    }

    /// Every token of `endpoint` but the newest stops working; with `drop`, its kernel sockets
    /// close. Returns how many sockets closed.
    pub fn expire_tokens(&self, endpoint: &str, drop: bool) -> Result<u64> {
        let drop = if drop { 1 } else { 0 };
        Ok(self.control(
            "POST",
            &format!("/standin/expire-tokens?endpoint={endpoint}&drop={drop}"),
        )?["dropped"]
            .as_u64()
            .unwrap_or_default())
    }

    /// Releases the runtime (as Colab reclaiming it would): its sockets close, its kernels stop,
    /// it answers 404 from now on.
    pub fn release(&self, endpoint: &str) -> Result<()> {
        self.control("POST", &format!("/standin/release?endpoint={endpoint}"))
            .map(|_| ())
    }

    /// The tunnel stand-in's answer to assignment requests: `ok`, `too_many`, `unavailable`,
    /// `quota` (an `outcome` quota denial), `stuck`.
    pub fn set_assign_mode(&self, mode: &str) -> Result<()> {
        self.control("POST", &format!("/standin/assign-mode?mode={mode}"))
            .map(|_| ())
    }

    /// Counters and runtimes, as JSON.
    pub fn state(&self) -> Result<Value> {
        self.control("GET", "/standin/state")
    }

    /// An authenticated `GET` of a runtime's path with its proxy token: (status, body).
    pub fn runtime_get(&self, token: &str, endpoint: &str, path: &str) -> Result<(u16, String)> {
        https_request(
            self.port,
            &self.ca,
            "GET",
            &format!("/rt/{endpoint}/{path}"),
            &[("X-Colab-Runtime-Proxy-Token", token)],
            "",
        )
    }

    /// The CA file the stand-in's certificate chains to.
    pub fn ca_file(&self) -> &Path {
        &self.ca
    }
}

impl Drop for ColabStandIn {
    fn drop(&mut self) {
        // SIGTERM lets it stop its Jupyter Server (and the kernels) first.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}
