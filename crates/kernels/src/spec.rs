//! Kernel choices and how one is chosen for a notebook.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// How to interrupt a kernel, from `kernel.json`'s `interrupt_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InterruptMode {
    /// SIGINT to the kernel's process group (Jupyter's default).
    #[default]
    Signal,
    /// An `interrupt_request` on the control channel.
    Message,
}

/// Where a kernel choice was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecSource {
    /// A directory listed in `JUPYTER_PATH`.
    JupyterPath,
    /// The user data directory (`JUPYTER_DATA_DIR` or `~/.local/share/jupyter`).
    User,
    /// `sys.prefix/share/jupyter` of the `python3` on `PATH`.
    SysPrefix,
    /// `/usr/local/share/jupyter` or `/usr/share/jupyter`.
    System,
    /// A project virtual environment (`.venv` or `venv`) with ipykernel.
    Venv,
    /// The `python3` on `PATH` itself, which has ipykernel.
    PathPython,
    /// A kernelspec of a Jupyter Server or Kernel Gateway (`remote:<name>`).
    Remote,
    /// Supplied by the caller.
    Other,
}

impl SpecSource {
    /// A stable snake-case name, for listings.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecSource::JupyterPath => "jupyter_path",
            SpecSource::User => "user",
            SpecSource::SysPrefix => "sys_prefix",
            SpecSource::System => "system",
            SpecSource::Venv => "venv",
            SpecSource::PathPython => "path_python",
            SpecSource::Remote => "remote",
            SpecSource::Other => "other",
        }
    }
}

/// One kernel the host can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSpecInfo {
    /// Stable id: the kernelspec folder name (lower-cased), `venv:<path relative to the server
    /// root>` for project virtual environments, or `python3` for the interpreter on `PATH`.
    pub id: String,
    pub display_name: String,
    /// e.g. `python`.
    pub language: String,
    /// The command line; `{connection_file}` and `{resource_dir}` are substituted at launch.
    pub argv: Vec<String>,
    /// Merged over the server's environment at launch.
    pub env: BTreeMap<String, String>,
    pub interrupt_mode: InterruptMode,
    /// The kernelspec folder; for a virtual environment, the environment's folder.
    pub resource_dir: Option<PathBuf>,
    pub source: SpecSource,
}

impl KernelSpecInfo {
    /// The virtual environment folder of a `Venv` choice.
    pub fn venv_dir(&self) -> Option<&Path> {
        match self.source {
            SpecSource::Venv => self.resource_dir.as_deref(),
            _ => None,
        }
    }

    /// The kernelspec name as a notebook's `metadata.kernelspec.name` would give it: the id,
    /// without the `remote:` prefix of a server's kernelspec.
    pub fn kernel_name(&self) -> &str {
        match self.source {
            SpecSource::Remote => self.id.strip_prefix("remote:").unwrap_or(&self.id),
            _ => &self.id,
        }
    }

    fn is_language(&self, language: &str) -> bool {
        self.language.eq_ignore_ascii_case(language)
    }
}

/// What discovery found, plus what it found unusable (so errors can say what to fix).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// Usable choices; kernelspecs first in Jupyter's path order, then virtual environments,
    /// then the interpreter on `PATH`.
    pub specs: Vec<KernelSpecInfo>,
    /// Project virtual environments that lack ipykernel, as shown to the user (relative to
    /// the server root when under it).
    pub venvs_without_ipykernel: Vec<PathBuf>,
    /// Kernelspecs that were skipped, with the reason (for diagnostics).
    pub skipped: Vec<String>,
}

/// What the caller knows about the kernel a notebook wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecPreference {
    /// An explicit choice (a `KernelSpecInfo::id`); an unknown id is an error.
    pub spec_id: Option<String>,
    /// The notebook's `metadata.kernelspec.name`.
    pub notebook_kernel_name: Option<String>,
    /// The notebook's language (`metadata.kernelspec.language` or `language_info.name`).
    pub notebook_language: Option<String>,
}

impl Discovery {
    /// Finds a choice by id.
    pub fn find(&self, id: &str) -> Option<&KernelSpecInfo> {
        self.specs.iter().find(|spec| spec.id == id)
    }

    /// Chooses the kernel for a notebook in `notebook_dir`.
    ///
    /// An explicit `spec_id` wins. For a notebook in another language than Python, the
    /// kernelspec the notebook names, else the first of that language. Otherwise: a virtual
    /// environment next to the notebook, one at the server root, the kernelspec the notebook
    /// names, `python3`, the first Python kernel, and (when the language is unknown) the
    /// first kernel at all.
    pub fn choose(
        &self,
        preference: &SpecPreference,
        notebook_dir: Option<&Path>,
        server_root: Option<&Path>,
    ) -> Result<&KernelSpecInfo> {
        if let Some(id) = &preference.spec_id {
            return self.find(id).ok_or_else(|| Error::UnknownSpec {
                id: id.clone(),
                available: self.specs.iter().map(|spec| spec.id.clone()).collect(),
            });
        }
        let named = preference.notebook_kernel_name.as_deref().and_then(|name| {
            self.specs
                .iter()
                .find(|spec| spec.kernel_name().eq_ignore_ascii_case(name))
        });
        let language = preference
            .notebook_language
            .as_deref()
            .filter(|language| !language.is_empty());
        if let Some(language) = language.filter(|language| !language.eq_ignore_ascii_case("python"))
        {
            return named
                .filter(|spec| spec.is_language(language))
                .or_else(|| self.specs.iter().find(|spec| spec.is_language(language)))
                .ok_or_else(|| Error::NoKernel {
                    advice: format!(
                        "the notebook's language is `{language}` and no kernel for it is installed; install one (a kernelspec folder with a kernel.json in a Jupyter data directory) or select a kernel explicitly"
                    ),
                });
        }
        let venv_in = |dir: Option<&Path>| {
            dir.and_then(|dir| {
                self.specs
                    .iter()
                    .find(|spec| spec.venv_dir().and_then(Path::parent) == Some(dir))
            })
        };
        venv_in(notebook_dir)
            .or_else(|| venv_in(server_root))
            .or(named)
            .or_else(|| {
                self.specs
                    .iter()
                    .find(|spec| spec.kernel_name() == "python3")
            })
            .or_else(|| self.specs.iter().find(|spec| spec.is_language("python")))
            .or_else(|| language.is_none().then(|| self.specs.first()).flatten())
            .ok_or_else(|| Error::NoKernel {
                advice: self.python_advice(),
            })
    }

    fn python_advice(&self) -> String {
        match self.venvs_without_ipykernel.first() {
            Some(venv) => format!(
                "the virtual environment `{venv}` has no ipykernel; install it with `{venv}/bin/pip install ipykernel`, or run `cargo xtask serve`, which prepares one",
                venv = venv.display()
            ),
            None => "install ipykernel into the project's virtual environment (`.venv/bin/pip install ipykernel`) or run `cargo xtask serve`, which prepares one".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, language: &str, source: SpecSource, dir: Option<&str>) -> KernelSpecInfo {
        KernelSpecInfo {
            id: id.to_owned(),
            display_name: id.to_owned(),
            language: language.to_owned(),
            argv: vec!["k".into()],
            env: BTreeMap::new(),
            interrupt_mode: InterruptMode::Signal,
            resource_dir: dir.map(PathBuf::from),
            source,
        }
    }

    fn catalog() -> Discovery {
        Discovery {
            specs: vec![
                spec("ir", "R", SpecSource::User, None),
                spec("python3", "python", SpecSource::User, None),
                spec(
                    "venv:.venv",
                    "python",
                    SpecSource::Venv,
                    Some("/root/.venv"),
                ),
                spec(
                    "venv:sub/.venv",
                    "python",
                    SpecSource::Venv,
                    Some("/root/sub/.venv"),
                ),
            ],
            ..Discovery::default()
        }
    }

    /// A preference for a kernel id, a notebook's kernel name and its language.
    fn prefer(
        spec_id: Option<&str>,
        kernel_name: Option<&str>,
        language: Option<&str>,
    ) -> SpecPreference {
        SpecPreference {
            spec_id: spec_id.map(str::to_owned),
            notebook_kernel_name: kernel_name.map(str::to_owned),
            notebook_language: language.map(str::to_owned),
        }
    }

    fn choose(preference: &SpecPreference, notebook_dir: &str) -> Result<String> {
        catalog()
            .choose(
                preference,
                Some(Path::new(notebook_dir)),
                Some(Path::new("/root")),
            )
            .map(|spec| spec.id.clone())
    }

    #[test]
    fn venv_next_to_the_notebook_wins_then_the_root_one() {
        let preference = SpecPreference::default();
        assert_eq!(choose(&preference, "/root/sub").unwrap(), "venv:sub/.venv");
        assert_eq!(choose(&preference, "/root/other").unwrap(), "venv:.venv");
    }

    #[test]
    fn explicit_choice_wins_and_unknown_ids_are_errors() {
        let preference = prefer(Some("python3"), None, None);
        assert_eq!(choose(&preference, "/root/sub").unwrap(), "python3");
        let unknown = prefer(Some("julia"), None, None);
        let error = choose(&unknown, "/root").unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown kernel `julia`; available kernels: ir, python3, venv:.venv, venv:sub/.venv"
        );
    }

    #[test]
    fn other_languages_pick_their_own_kernel() {
        let preference = prefer(None, Some("ir"), Some("R"));
        assert_eq!(choose(&preference, "/root").unwrap(), "ir");
        let julia = prefer(None, None, Some("julia"));
        assert!(matches!(
            choose(&julia, "/root"),
            Err(Error::NoKernel { advice }) if advice.contains("`julia`")
        ));
    }

    #[test]
    fn without_venvs_the_named_kernel_then_python3() {
        let mut discovery = catalog();
        discovery
            .specs
            .retain(|spec| spec.source != SpecSource::Venv);
        discovery
            .specs
            .push(spec("other-py", "python", SpecSource::User, None));
        let named = prefer(None, Some("OTHER-PY"), None);
        let pick = |preference: &SpecPreference| {
            discovery
                .choose(preference, Some(Path::new("/x")), None)
                .unwrap()
                .id
                .clone()
        };
        assert_eq!(pick(&named), "other-py");
        assert_eq!(pick(&SpecPreference::default()), "python3");
    }

    #[test]
    fn remote_choices_match_notebook_kernel_names_without_their_prefix() {
        let discovery = Discovery {
            specs: vec![
                spec("remote:ir", "R", SpecSource::Remote, None),
                spec("remote:other-py", "python", SpecSource::Remote, None),
                spec("remote:python3", "python", SpecSource::Remote, None),
            ],
            ..Discovery::default()
        };
        let pick = |name: Option<&str>| {
            discovery
                .choose(&prefer(None, name, None), None, None)
                .unwrap()
                .id
                .clone()
        };
        assert_eq!(pick(Some("other-py")), "remote:other-py");
        assert_eq!(pick(None), "remote:python3");
        assert_eq!(pick(Some("python3")), "remote:python3");
    }

    #[test]
    fn nothing_usable_says_what_to_install() {
        let with_bare_venv = Discovery {
            venvs_without_ipykernel: vec![PathBuf::from(".venv")],
            ..Discovery::default()
        };
        for (discovery, advice) in [
            (
                Discovery::default(),
                "no Jupyter kernel found: install ipykernel into the project's virtual environment (`.venv/bin/pip install ipykernel`) or run `cargo xtask serve`, which prepares one",
            ),
            (
                with_bare_venv,
                "no Jupyter kernel found: the virtual environment `.venv` has no ipykernel; install it with `.venv/bin/pip install ipykernel`, or run `cargo xtask serve`, which prepares one",
            ),
        ] {
            let error = discovery
                .choose(&SpecPreference::default(), None, None)
                .unwrap_err();
            assert_eq!(error.to_string(), advice);
        }
    }
}
