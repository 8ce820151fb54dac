//! Finding kernels the way Jupyter does, plus project virtual environments.
//!
//! Jupyter's search path is `JUPYTER_PATH`, the user data directory, `sys.prefix/share/jupyter`
//! of the Python on `PATH` and the system directories; each holds `kernels/<name>/kernel.json`
//! and the first folder of a name wins. On top of that, a `.venv` or `venv` folder next to the
//! notebook or at the server root whose Python has ipykernel is a choice of its own, and so is
//! the Python on `PATH` when it has ipykernel and no kernelspec is called `python3`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::spec::{Discovery, InterruptMode, KernelSpecInfo, SpecSource};

/// Where to look. `from_env` reads what Jupyter reads; tests build one by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// `JUPYTER_PATH` entries, searched first.
    pub jupyter_path: Vec<PathBuf>,
    /// `JUPYTER_DATA_DIR`, or the platform's user data directory for Jupyter.
    pub user_data_dir: Option<PathBuf>,
    /// The Python whose `sys.prefix` is searched and which may itself become a choice.
    /// `None` skips both.
    pub python: Option<OsString>,
    /// How long asking that Python may take.
    pub python_probe_timeout: Duration,
    /// System-wide data directories, searched last.
    pub system_dirs: Vec<PathBuf>,
    /// The folder the server serves; its `.venv`/`venv` is a choice for every notebook, and
    /// virtual environment ids are relative to it.
    pub server_root: Option<PathBuf>,
}

impl DiscoveryConfig {
    /// Reads `JUPYTER_PATH` and `JUPYTER_DATA_DIR` and uses `python3` and the usual system
    /// directories.
    pub fn from_env(server_root: Option<PathBuf>) -> Self {
        DiscoveryConfig {
            jupyter_path: std::env::var_os("JUPYTER_PATH")
                .map(|value| {
                    std::env::split_paths(&value)
                        .filter(|path| !path.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            user_data_dir: user_data_dir(),
            python: Some(OsString::from("python3")),
            python_probe_timeout: Duration::from_secs(5),
            system_dirs: vec![
                PathBuf::from("/usr/local/share/jupyter"),
                PathBuf::from("/usr/share/jupyter"),
            ],
            server_root,
        }
    }
}

/// Jupyter's user data directory: `JUPYTER_DATA_DIR`, else `~/Library/Jupyter` on macOS and
/// `$XDG_DATA_HOME/jupyter` (`~/.local/share/jupyter`) elsewhere.
pub fn user_data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("JUPYTER_DATA_DIR").filter(|dir| !dir.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if cfg!(target_os = "macos") {
        return dirs::home_dir().map(|home| home.join("Library").join("Jupyter"));
    }
    dirs::data_dir().map(|data| data.join("jupyter"))
}

/// Jupyter's runtime directory (where connection files go): `JUPYTER_RUNTIME_DIR`, else
/// `<user data dir>/runtime`, else the temporary directory.
pub fn runtime_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("JUPYTER_RUNTIME_DIR").filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir);
    }
    user_data_dir()
        .map(|dir| dir.join("runtime"))
        .unwrap_or_else(std::env::temp_dir)
}

/// What the Python on `PATH` said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonProbe {
    pub executable: PathBuf,
    pub prefix: PathBuf,
    /// e.g. `3.11`.
    pub version: String,
    pub has_ipykernel: bool,
}

const PROBE_SCRIPT: &str = "import sys, importlib.util\n\
print(sys.executable)\n\
print(sys.prefix)\n\
print('%d.%d' % sys.version_info[:2])\n\
print(importlib.util.find_spec('ipykernel') is not None)\n";

/// Runs the Python once (with a timeout) and reads `sys.executable`, `sys.prefix`, its version
/// and whether ipykernel is importable. `None` when there is no such Python or it misbehaves.
pub async fn probe_python(python: &std::ffi::OsStr, timeout: Duration) -> Option<PythonProbe> {
    let mut command = tokio::process::Command::new(python);
    command
        .args(["-c", PROBE_SCRIPT])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(timeout, command.output()).await {
        Ok(Ok(output)) if output.status.success() => output,
        Ok(Ok(_)) | Ok(Err(_)) => return None,
        Err(_) => {
            tracing::warn!(?python, "asking Python for sys.prefix timed out");
            return None;
        }
    };
    let text = String::from_utf8(output.stdout).ok()?;
    let mut lines = text.lines();
    Some(PythonProbe {
        executable: PathBuf::from(lines.next()?),
        prefix: PathBuf::from(lines.next()?),
        version: lines.next()?.to_owned(),
        has_ipykernel: lines.next()? == "True",
    })
}

/// Finds every kernel choice for a notebook in `notebook_dir` (or, without one, for the
/// server root only). `python` is the result of [`probe_python`], asked once by the caller.
pub async fn discover(
    config: &DiscoveryConfig,
    python: Option<&PythonProbe>,
    notebook_dir: Option<&Path>,
) -> Result<Discovery> {
    let config = config.clone();
    let python = python.cloned();
    let notebook_dir = notebook_dir.map(Path::to_path_buf);
    tokio::task::spawn_blocking(move || {
        discover_blocking(&config, python.as_ref(), notebook_dir.as_deref())
    })
    .await
    .map_err(|join_error| Error::Io {
        context: "kernel discovery stopped unexpectedly".to_owned(),
        source: std::io::Error::other(join_error.to_string()),
    })
}

/// The synchronous body of [`discover`].
pub fn discover_blocking(
    config: &DiscoveryConfig,
    python: Option<&PythonProbe>,
    notebook_dir: Option<&Path>,
) -> Discovery {
    let mut discovery = Discovery::default();
    let mut search: Vec<(PathBuf, SpecSource)> = Vec::new();
    search.extend(
        config
            .jupyter_path
            .iter()
            .map(|dir| (dir.clone(), SpecSource::JupyterPath)),
    );
    search.extend(
        config
            .user_data_dir
            .iter()
            .map(|dir| (dir.clone(), SpecSource::User)),
    );
    if let Some(python) = python {
        search.push((
            python.prefix.join("share").join("jupyter"),
            SpecSource::SysPrefix,
        ));
    }
    search.extend(
        config
            .system_dirs
            .iter()
            .map(|dir| (dir.clone(), SpecSource::System)),
    );
    for (data_dir, source) in &search {
        scan_kernels_dir(&data_dir.join("kernels"), *source, python, &mut discovery);
    }

    let mut venv_parents: Vec<&Path> = Vec::new();
    for dir in [notebook_dir, config.server_root.as_deref()]
        .into_iter()
        .flatten()
    {
        if !venv_parents.contains(&dir) {
            venv_parents.push(dir);
        }
    }
    for parent in venv_parents {
        for name in [".venv", "venv"] {
            scan_venv(
                &parent.join(name),
                config.server_root.as_deref(),
                &mut discovery,
            );
        }
    }

    if let Some(python) = python
        && python.has_ipykernel
        && discovery.find("python3").is_none()
    {
        discovery.specs.push(KernelSpecInfo {
            id: "python3".to_owned(),
            display_name: format!("Python {} (python3 on PATH)", python.version),
            language: "python".to_owned(),
            argv: launcher_argv(&python.executable),
            env: BTreeMap::new(),
            interrupt_mode: InterruptMode::Signal,
            resource_dir: None,
            source: SpecSource::PathPython,
        });
    }
    discovery
}

/// The fields of `kernel.json` this crate uses; others are ignored.
#[derive(Deserialize)]
struct KernelJson {
    argv: Vec<String>,
    display_name: String,
    #[serde(default)]
    language: String,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    interrupt_mode: Option<String>,
}

fn scan_kernels_dir(
    kernels_dir: &Path,
    source: SpecSource,
    python: Option<&PythonProbe>,
    discovery: &mut Discovery,
) {
    let Ok(entries) = std::fs::read_dir(kernels_dir) else {
        return;
    };
    let mut folders: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_dir())
        .collect();
    folders.sort();
    for folder in folders {
        let Some(name) = folder.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let id = name.to_lowercase();
        if discovery.find(&id).is_some() {
            continue;
        }
        match read_kernelspec(&folder, &id, source, python) {
            Ok(Some(spec)) => discovery.specs.push(spec),
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(folder = %folder.display(), %reason, "skipping kernelspec");
                discovery
                    .skipped
                    .push(format!("{}: {reason}", folder.display()));
            }
        }
    }
}

fn read_kernelspec(
    folder: &Path,
    id: &str,
    source: SpecSource,
    python: Option<&PythonProbe>,
) -> Result<Option<KernelSpecInfo>, String> {
    let file = folder.join("kernel.json");
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err("kernel.json is unreadable".to_owned()),
    };
    let json: KernelJson =
        serde_json::from_str(&text).map_err(|error| format!("kernel.json is invalid: {error}"))?;
    if json.argv.is_empty() {
        return Err("kernel.json has an empty argv".to_owned());
    }
    let interrupt_mode = match json.interrupt_mode.as_deref() {
        None | Some("signal") => InterruptMode::Signal,
        Some("message") => InterruptMode::Message,
        Some(other) => return Err(format!("unknown interrupt_mode `{other}`")),
    };
    let mut argv = json.argv;
    // Like jupyter_client, a bare `python` in argv means the Python that Jupyter itself runs
    // on; for us that is the Python on PATH.
    if let Some(python) = python
        && is_bare_python(&argv[0], &python.version)
    {
        argv[0] = python.executable.to_string_lossy().into_owned();
    }
    Ok(Some(KernelSpecInfo {
        id: id.to_owned(),
        display_name: json.display_name,
        language: json.language,
        argv,
        env: json.env,
        interrupt_mode,
        resource_dir: Some(folder.to_path_buf()),
        source,
    }))
}

fn is_bare_python(program: &str, version: &str) -> bool {
    program == "python" || program == "python3" || program.strip_prefix("python") == Some(version)
}

fn scan_venv(venv: &Path, server_root: Option<&Path>, discovery: &mut Discovery) {
    let python = venv.join("bin").join("python");
    if !python.exists() {
        return;
    }
    let shown = server_root
        .and_then(|root| venv.strip_prefix(root).ok())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| venv.to_path_buf());
    let Some(version) = venv_ipykernel_version(venv) else {
        discovery.venvs_without_ipykernel.push(shown);
        return;
    };
    let mut env = BTreeMap::new();
    env.insert(
        "VIRTUAL_ENV".to_owned(),
        venv.to_string_lossy().into_owned(),
    );
    // `!pip install` in a cell then installs into the environment, as after `activate`.
    let mut path = vec![venv.join("bin")];
    if let Some(current) = std::env::var_os("PATH") {
        path.extend(std::env::split_paths(&current));
    }
    if let Ok(joined) = std::env::join_paths(path) {
        env.insert("PATH".to_owned(), joined.to_string_lossy().into_owned());
    }
    let shown_text = shown.to_string_lossy().into_owned();
    discovery.specs.push(KernelSpecInfo {
        id: format!("venv:{shown_text}"),
        display_name: format!("Python {version} ({shown_text})"),
        language: "python".to_owned(),
        argv: launcher_argv(&python),
        env,
        interrupt_mode: InterruptMode::Signal,
        resource_dir: Some(venv.to_path_buf()),
        source: SpecSource::Venv,
    });
}

/// `Some(python version)` when `<venv>/lib/python3*/site-packages/ipykernel` exists: checked
/// on disk so that listing kernels never spawns anything.
fn venv_ipykernel_version(venv: &Path) -> Option<String> {
    let entries = std::fs::read_dir(venv.join("lib")).ok()?;
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name.strip_prefix("python")?.to_owned();
            entry
                .path()
                .join("site-packages")
                .join("ipykernel")
                .is_dir()
                .then_some(version)
        })
        .next()
}

fn launcher_argv(python: &Path) -> Vec<String> {
    vec![
        python.to_string_lossy().into_owned(),
        "-m".to_owned(),
        "ipykernel_launcher".to_owned(),
        "-f".to_owned(),
        "{connection_file}".to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_spec(data_dir: &Path, name: &str, body: &str) {
        let folder = data_dir.join("kernels").join(name);
        fs::create_dir_all(&folder).unwrap();
        fs::write(folder.join("kernel.json"), body).unwrap();
    }

    fn config(jupyter_path: Vec<PathBuf>, user: Option<PathBuf>) -> DiscoveryConfig {
        DiscoveryConfig {
            jupyter_path,
            user_data_dir: user,
            python: None,
            python_probe_timeout: Duration::from_secs(1),
            system_dirs: Vec::new(),
            server_root: None,
        }
    }

    const SPEC: &str = r#"{"argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "First", "language": "python"}"#;

    #[test]
    fn earlier_paths_win_and_names_are_lower_cased() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        write_spec(first.path(), "Py", SPEC);
        write_spec(
            second.path(),
            "py",
            r#"{"argv": ["x"], "display_name": "Second", "language": "python", "interrupt_mode": "message"}"#,
        );
        write_spec(
            second.path(),
            "other",
            r#"{"argv": ["x"], "display_name": "Other", "language": "r", "interrupt_mode": "message", "env": {"A": "b"}}"#,
        );
        let found = discover_blocking(
            &config(vec![first.path().into()], Some(second.path().into())),
            None,
            None,
        );
        let ids: Vec<_> = found.specs.iter().map(|spec| spec.id.as_str()).collect();
        assert_eq!(ids, ["py", "other"]);
        assert_eq!(found.specs[0].display_name, "First");
        assert_eq!(found.specs[0].source, SpecSource::JupyterPath);
        assert_eq!(found.specs[1].source, SpecSource::User);
        assert_eq!(found.specs[1].interrupt_mode, InterruptMode::Message);
        assert_eq!(found.specs[1].env.get("A").map(String::as_str), Some("b"));
    }

    #[test]
    fn invalid_specs_are_skipped_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        write_spec(dir.path(), "broken", "{not json");
        write_spec(dir.path(), "empty", r#"{"argv": [], "display_name": "E"}"#);
        let found = discover_blocking(&config(vec![dir.path().into()], None), None, None);
        assert!(found.specs.is_empty());
        assert_eq!(found.skipped.len(), 2);
    }

    #[test]
    fn bare_python_becomes_the_probed_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        write_spec(dir.path(), "python3", SPEC);
        let probe = PythonProbe {
            executable: PathBuf::from("/opt/py/bin/python3.11"),
            prefix: PathBuf::from("/opt/py"),
            version: "3.11".into(),
            has_ipykernel: true,
        };
        let found = discover_blocking(&config(vec![dir.path().into()], None), Some(&probe), None);
        assert_eq!(found.specs.len(), 1, "no path_python duplicate of python3");
        assert_eq!(found.specs[0].argv[0], "/opt/py/bin/python3.11");
        assert!(is_bare_python("python3.11", "3.11"));
        assert!(!is_bare_python("python3.12", "3.11"));
    }

    #[test]
    fn python_on_path_with_ipykernel_is_a_choice() {
        let probe = PythonProbe {
            executable: PathBuf::from("/usr/bin/python3"),
            prefix: PathBuf::from("/nonexistent-prefix"),
            version: "3.12".into(),
            has_ipykernel: true,
        };
        let found = discover_blocking(&config(Vec::new(), None), Some(&probe), None);
        assert_eq!(found.specs.len(), 1);
        assert_eq!(found.specs[0].id, "python3");
        assert_eq!(found.specs[0].source, SpecSource::PathPython);
        assert_eq!(found.specs[0].argv[0], "/usr/bin/python3");
        let without = PythonProbe {
            has_ipykernel: false,
            ..probe
        };
        assert!(
            discover_blocking(&config(Vec::new(), None), Some(&without), None)
                .specs
                .is_empty()
        );
    }

    #[test]
    fn venvs_are_found_by_their_site_packages() {
        let root = tempfile::tempdir().unwrap();
        let notebook_dir = root.path().join("nb");
        let with = notebook_dir.join(".venv");
        fs::create_dir_all(with.join("bin")).unwrap();
        fs::write(with.join("bin/python"), "").unwrap();
        fs::create_dir_all(with.join("lib/python3.11/site-packages/ipykernel")).unwrap();
        let without = root.path().join("venv");
        fs::create_dir_all(without.join("bin")).unwrap();
        fs::write(without.join("bin/python"), "").unwrap();
        fs::create_dir_all(without.join("lib/python3.11/site-packages")).unwrap();
        let mut config = config(Vec::new(), None);
        config.server_root = Some(root.path().into());
        let found = discover_blocking(&config, None, Some(&notebook_dir));
        assert_eq!(found.specs.len(), 1);
        let venv = &found.specs[0];
        assert_eq!(venv.id, "venv:nb/.venv");
        assert_eq!(venv.display_name, "Python 3.11 (nb/.venv)");
        assert_eq!(venv.argv[0], with.join("bin/python").to_string_lossy());
        assert_eq!(
            venv.env.get("VIRTUAL_ENV"),
            Some(&with.to_string_lossy().into_owned())
        );
        assert_eq!(found.venvs_without_ipykernel, [PathBuf::from("venv")]);
    }
}
