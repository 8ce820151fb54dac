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

/// Whose conventions Jupyter's folders and virtual environments follow. The rules are plain
/// functions of it (and of the environment variables and home folder passed in), so every
/// platform's rules are tested wherever the tests run; [`Platform::CURRENT`] is this build's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// Linux and other Unix systems: XDG folders, `bin/python`.
    Unix,
    /// macOS: as Unix, but the user data directory is `~/Library/Jupyter`.
    MacOs,
    /// Windows: `%APPDATA%` and `%PROGRAMDATA%`, `Scripts\python.exe`.
    Windows,
}

impl Platform {
    /// The platform this build runs on.
    pub const CURRENT: Platform = if cfg!(windows) {
        Platform::Windows
    } else if cfg!(target_os = "macos") {
        Platform::MacOs
    } else {
        Platform::Unix
    };

    /// Jupyter's user data directory (as jupyter_core's `jupyter_data_dir`):
    /// `JUPYTER_DATA_DIR`; else on macOS `~/Library/Jupyter`; on Windows `%APPDATA%\jupyter`,
    /// or without `APPDATA` `<JUPYTER_CONFIG_DIR or ~\.jupyter>\data`; elsewhere
    /// `$XDG_DATA_HOME/jupyter` (`~/.local/share/jupyter`). `var` reads an environment
    /// variable (empty counts as unset); `home` is the user's home folder.
    pub fn user_data_dir(
        self,
        var: &dyn Fn(&str) -> Option<OsString>,
        home: Option<&Path>,
    ) -> Option<PathBuf> {
        let var = |name: &str| var(name).filter(|value| !value.is_empty());
        if let Some(dir) = var("JUPYTER_DATA_DIR") {
            return Some(PathBuf::from(dir));
        }
        match self {
            Platform::MacOs => home.map(|home| home.join("Library").join("Jupyter")),
            Platform::Windows => {
                if let Some(appdata) = var("APPDATA") {
                    return Some(PathBuf::from(appdata).join("jupyter"));
                }
                var("JUPYTER_CONFIG_DIR")
                    .map(PathBuf::from)
                    .or_else(|| home.map(|home| home.join(".jupyter")))
                    .map(|config| config.join("data"))
            }
            // As `dirs::data_dir`: a relative XDG_DATA_HOME is ignored.
            Platform::Unix => var("XDG_DATA_HOME")
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .or_else(|| home.map(|home| home.join(".local").join("share")))
                .map(|data| data.join("jupyter")),
        }
    }

    /// The system-wide data directories, searched last: `%PROGRAMDATA%\jupyter` on Windows
    /// (nothing without `PROGRAMDATA`), `/usr/local/share/jupyter` and `/usr/share/jupyter`
    /// elsewhere.
    pub fn system_dirs(self, var: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
        match self {
            Platform::Windows => var("PROGRAMDATA")
                .filter(|value| !value.is_empty())
                .map(|programdata| PathBuf::from(programdata).join("jupyter"))
                .into_iter()
                .collect(),
            Platform::Unix | Platform::MacOs => vec![
                PathBuf::from("/usr/local/share/jupyter"),
                PathBuf::from("/usr/share/jupyter"),
            ],
        }
    }

    /// The Python looked for on `PATH`: `python` on Windows (where `python3` is often only
    /// the Microsoft Store's installer stub), `python3` elsewhere.
    pub fn path_python(self) -> &'static str {
        match self {
            Platform::Windows => "python",
            Platform::Unix | Platform::MacOs => "python3",
        }
    }

    /// The folder of a virtual environment's programs, which activating it puts first on
    /// `PATH`: `Scripts` on Windows, `bin` elsewhere.
    pub fn venv_bin(self, venv: &Path) -> PathBuf {
        match self {
            Platform::Windows => venv.join("Scripts"),
            Platform::Unix | Platform::MacOs => venv.join("bin"),
        }
    }

    /// The Python in the same folder as `program` (`python`, or `python.exe` on Windows, as in
    /// a virtual environment's `bin` or `Scripts`), not checked on disk.
    pub fn python_beside(self, program: &Path) -> Option<PathBuf> {
        let folder = program.parent()?;
        Some(match self {
            Platform::Windows => folder.join("python.exe"),
            Platform::Unix | Platform::MacOs => folder.join("python"),
        })
    }

    /// A virtual environment's Python: `Scripts\python.exe` on Windows, `bin/python`
    /// elsewhere.
    pub fn venv_python(self, venv: &Path) -> PathBuf {
        match self {
            Platform::Windows => self.venv_bin(venv).join("python.exe"),
            Platform::Unix | Platform::MacOs => self.venv_bin(venv).join("python"),
        }
    }
}

/// Where to look. `from_env` reads what Jupyter reads; tests build one by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryConfig {
    /// Whose virtual environment layout to expect.
    pub platform: Platform,
    /// `JUPYTER_PATH` entries, searched first.
    pub jupyter_path: Vec<PathBuf>,
    /// `JUPYTER_DATA_DIR`, or the platform's user data directory for Jupyter.
    pub user_data_dir: Option<PathBuf>,
    /// The Python whose `sys.prefix` is searched and which may itself become a choice.
    /// `None` skips both.
    pub python: Option<OsString>,
    /// The Python of the environment this program was installed into (`pip` and `uv` put
    /// `jupyter-mcp` in the folder beside it): asked before `python`, and used instead when it
    /// has ipykernel, as Jupyter's own commands use the Python they are installed in.
    pub env_python: Option<PathBuf>,
    /// How long asking that Python may take.
    pub python_probe_timeout: Duration,
    /// System-wide data directories, searched last.
    pub system_dirs: Vec<PathBuf>,
    /// The folder the server serves; its `.venv`/`venv` is a choice for every notebook, and
    /// virtual environment ids are relative to it.
    pub server_root: Option<PathBuf>,
}

impl DiscoveryConfig {
    /// Reads `JUPYTER_PATH`, `JUPYTER_DATA_DIR` and the platform's folders, and uses the
    /// platform's Python on `PATH`.
    pub fn from_env(server_root: Option<PathBuf>) -> Self {
        let mut config = Self::for_platform(
            Platform::CURRENT,
            &|name| std::env::var_os(name),
            dirs::home_dir().as_deref(),
            server_root,
        );
        config.env_python = std::env::current_exe()
            .ok()
            .and_then(|exe| Platform::CURRENT.python_beside(&exe))
            .filter(|python| python.is_file());
        config
    }

    /// What [`DiscoveryConfig::from_env`] builds, for a given platform, environment (`var`)
    /// and home folder. `JUPYTER_PATH` is split by this system's rules.
    pub fn for_platform(
        platform: Platform,
        var: &dyn Fn(&str) -> Option<OsString>,
        home: Option<&Path>,
        server_root: Option<PathBuf>,
    ) -> Self {
        DiscoveryConfig {
            platform,
            jupyter_path: var("JUPYTER_PATH")
                .map(|value| {
                    std::env::split_paths(&value)
                        .filter(|path| !path.as_os_str().is_empty())
                        .collect()
                })
                .unwrap_or_default(),
            user_data_dir: platform.user_data_dir(var, home),
            python: Some(OsString::from(platform.path_python())),
            env_python: None,
            python_probe_timeout: Duration::from_secs(5),
            system_dirs: platform.system_dirs(var),
            server_root,
        }
    }
}

/// Jupyter's user data directory on this system: see [`Platform::user_data_dir`].
pub fn user_data_dir() -> Option<PathBuf> {
    Platform::CURRENT.user_data_dir(&|name| std::env::var_os(name), dirs::home_dir().as_deref())
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
    hide_console(&mut command);
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
                config.platform,
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
            display_name: format!(
                "Python {} ({})",
                python.version,
                python.executable.display()
            ),
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

fn scan_venv(
    platform: Platform,
    venv: &Path,
    server_root: Option<&Path>,
    discovery: &mut Discovery,
) {
    let python = platform.venv_python(venv);
    if !python.exists() {
        return;
    }
    let shown = server_root
        .and_then(|root| venv.strip_prefix(root).ok())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| venv.to_path_buf());
    let Some(version) = venv_ipykernel_version(platform, venv) else {
        discovery.venvs_without_ipykernel.push(shown);
        return;
    };
    let mut env = BTreeMap::new();
    env.insert(
        "VIRTUAL_ENV".to_owned(),
        venv.to_string_lossy().into_owned(),
    );
    // `!pip install` in a cell then installs into the environment, as after `activate`.
    let mut path = vec![platform.venv_bin(venv)];
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

/// `Some(python version)` when ipykernel is installed in the environment: checked on disk so
/// that listing kernels never spawns anything. On Unix that is
/// `<venv>/lib/python3*/site-packages/ipykernel`, the folder naming the version; on Windows
/// `<venv>\Lib\site-packages\ipykernel`, the version coming from `pyvenv.cfg`.
fn venv_ipykernel_version(platform: Platform, venv: &Path) -> Option<String> {
    if platform == Platform::Windows {
        if !venv
            .join("Lib")
            .join("site-packages")
            .join("ipykernel")
            .is_dir()
        {
            return None;
        }
        let version = std::fs::read_to_string(venv.join("pyvenv.cfg"))
            .ok()
            .and_then(|cfg| pyvenv_cfg_version(&cfg));
        return Some(version.unwrap_or_else(|| "3".to_owned()));
    }
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

/// `major.minor` of the Python a `pyvenv.cfg` names: its `version` (the venv module) or
/// `version_info` (virtualenv, uv) line.
fn pyvenv_cfg_version(cfg: &str) -> Option<String> {
    cfg.lines()
        .filter_map(|line| line.split_once('='))
        .filter(|(key, _)| matches!(key.trim(), "version" | "version_info"))
        .find_map(|(_, value)| {
            let mut parts = value.trim().split('.');
            let major = parts.next().filter(|part| !part.is_empty())?;
            let minor = parts.next()?;
            Some(format!("{major}.{minor}"))
        })
}

/// Keeps a console program started from a process without a console (the VS Code extension
/// host) from opening a console window, as jupyter_client does (`CREATE_NO_WINDOW`).
pub(crate) fn hide_console(command: &mut tokio::process::Command) {
    #[cfg(windows)]
    command.creation_flags(windows_sys::Win32::System::Threading::CREATE_NO_WINDOW);
    #[cfg(not(windows))]
    let _ = command;
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
            platform: Platform::Unix,
            jupyter_path,
            user_data_dir: user,
            python: None,
            env_python: None,
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

    /// An environment of the given variables only.
    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let pairs: Vec<(String, OsString)> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), OsString::from(value)))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        }
    }

    #[test]
    fn user_data_dir_follows_jupyter_core() {
        let home = Path::new("/home/u");
        let user_dir = |platform: Platform, env: &[(&str, &str)]| {
            platform.user_data_dir(&vars(env), Some(home))
        };
        for platform in [Platform::Unix, Platform::MacOs, Platform::Windows] {
            assert_eq!(
                user_dir(platform, &[("JUPYTER_DATA_DIR", "/d"), ("APPDATA", "/a")]),
                Some(PathBuf::from("/d")),
                "JUPYTER_DATA_DIR wins on {platform:?}"
            );
        }
        let cases = [
            (
                Platform::Unix,
                &[("JUPYTER_DATA_DIR", "")],
                "/home/u/.local/share/jupyter",
            ),
            (Platform::Unix, &[("XDG_DATA_HOME", "/x")], "/x/jupyter"),
            (
                Platform::Unix,
                &[("XDG_DATA_HOME", "relative")],
                "/home/u/.local/share/jupyter",
            ),
            (
                Platform::MacOs,
                &[("XDG_DATA_HOME", "/x")],
                "/home/u/Library/Jupyter",
            ),
            (
                Platform::Windows,
                &[("APPDATA", "/roaming")],
                "/roaming/jupyter",
            ),
            (
                Platform::Windows,
                &[("JUPYTER_CONFIG_DIR", "/conf")],
                "/conf/data",
            ),
            (
                Platform::Windows,
                &[("APPDATA", "")],
                "/home/u/.jupyter/data",
            ),
        ];
        for (platform, env, expected) in cases {
            assert_eq!(
                user_dir(platform, env),
                Some(PathBuf::from(expected)),
                "{platform:?} with {env:?}"
            );
        }
        assert_eq!(Platform::Windows.user_data_dir(&vars(&[]), None), None);
    }

    #[test]
    fn windows_config_uses_programdata_and_python() {
        let env = vars(&[
            ("APPDATA", r"C:\Users\u\AppData\Roaming"),
            ("PROGRAMDATA", r"C:\ProgramData"),
        ]);
        let config = DiscoveryConfig::for_platform(Platform::Windows, &env, None, None);
        assert_eq!(config.platform, Platform::Windows);
        assert_eq!(
            config.user_data_dir,
            Some(Path::new(r"C:\Users\u\AppData\Roaming").join("jupyter"))
        );
        assert_eq!(
            config.system_dirs,
            [Path::new(r"C:\ProgramData").join("jupyter")]
        );
        assert_eq!(config.python, Some(OsString::from("python")));
        assert!(
            Platform::Windows.system_dirs(&vars(&[])).is_empty(),
            "without PROGRAMDATA only sys.prefix is searched, as in jupyter_core"
        );
        let unix = DiscoveryConfig::for_platform(Platform::Unix, &env, Some(Path::new("/h")), None);
        assert_eq!(
            unix.system_dirs,
            [
                PathBuf::from("/usr/local/share/jupyter"),
                PathBuf::from("/usr/share/jupyter")
            ]
        );
        assert_eq!(unix.python, Some(OsString::from("python3")));
    }

    #[test]
    fn pyvenv_cfg_names_the_version() {
        assert_eq!(
            pyvenv_cfg_version(
                "home = C:\\Python311\ninclude-system-site-packages = false\nversion = 3.11.4\n"
            ),
            Some("3.11".to_owned())
        );
        assert_eq!(
            pyvenv_cfg_version(
                "home = x\nimplementation = CPython\nversion_info = 3.12.1.final.0\n"
            ),
            Some("3.12".to_owned())
        );
        assert_eq!(pyvenv_cfg_version("home = x\n"), None);
    }

    #[test]
    fn windows_venvs_use_scripts_and_lib() {
        let root = tempfile::tempdir().unwrap();
        let with = root.path().join(".venv");
        fs::create_dir_all(with.join("Scripts")).unwrap();
        fs::write(with.join("Scripts").join("python.exe"), "").unwrap();
        fs::create_dir_all(with.join("Lib").join("site-packages").join("ipykernel")).unwrap();
        fs::write(with.join("pyvenv.cfg"), "version = 3.13.0\n").unwrap();
        let without = root.path().join("venv");
        fs::create_dir_all(without.join("Scripts")).unwrap();
        fs::write(without.join("Scripts").join("python.exe"), "").unwrap();
        // A Unix layout is not a Windows environment.
        let unix = root.path().join("nb").join(".venv");
        fs::create_dir_all(unix.join("bin")).unwrap();
        fs::write(unix.join("bin").join("python"), "").unwrap();
        fs::create_dir_all(unix.join("lib/python3.11/site-packages/ipykernel")).unwrap();
        let mut config = config(Vec::new(), None);
        config.platform = Platform::Windows;
        config.server_root = Some(root.path().into());
        let found = discover_blocking(&config, None, Some(&root.path().join("nb")));
        assert_eq!(found.specs.len(), 1);
        let venv = &found.specs[0];
        assert_eq!(venv.id, "venv:.venv");
        assert_eq!(venv.display_name, "Python 3.13 (.venv)");
        assert_eq!(
            venv.argv[0],
            with.join("Scripts").join("python.exe").to_string_lossy()
        );
        let path = venv.env.get("PATH").expect("PATH is set");
        assert_eq!(
            std::env::split_paths(path).next(),
            Some(with.join("Scripts"))
        );
        assert_eq!(found.venvs_without_ipykernel, [PathBuf::from("venv")]);
    }
}
