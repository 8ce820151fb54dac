//! [`JupyterHost`]: `NotebookHost` over the notebooks of a Jupyter Server with
//! jupyter-collaboration. Notebooks are the server's (the Contents API lists them); an open
//! notebook is the server's shared document ([`crate::room::Room`]); nothing writes an open
//! notebook's file: saving is the server's.

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use host_core::{
    Commit, Document, DocumentCapabilities, HostError, Listing, NotebookHost, NotebookLocation,
    OpenStatus, WindowInfo,
};
use notebook_model::Notebook;
use serde_json::{Value, json};

use crate::connection::{ServerConnection, encode_path};
use crate::error::JupyterError;
use crate::kernels::JupyterKernels;
use crate::presence::Presence;
use crate::rest::Rest;
use crate::rooms::Rooms;

/// What a [`JupyterHost`] serves.
#[derive(Debug, Clone)]
pub struct JupyterHostConfig {
    /// The Jupyter Server.
    pub connection: ServerConnection,
    /// The local folder whose files `upload_file` and `download_file` read and write (the
    /// agent's side of a transfer through the kernel); `None`: no transfers.
    pub transfer_root: Option<PathBuf>,
    /// Run cells on the notebooks' kernels (off: documents only).
    pub kernels: bool,
}

/// The notebooks of one Jupyter Server, edited live in their collaboration rooms.
pub struct JupyterHost {
    rest: Rest,
    rooms: Arc<Rooms>,
    presence: Arc<Presence>,
    kernels: Option<Arc<JupyterKernels>>,
    files: Option<host_files::ConfinedFiles>,
    window: WindowInfo,
    /// `<base>lab/tree/`: a notebook's URI is where JupyterLab shows it.
    uri_prefix: String,
}

kernels::debug_fields!(JupyterHost { window });

/// A failure of the server as a host error about `location`.
pub(crate) fn host_error(location: &NotebookLocation, failure: JupyterError) -> HostError {
    let path = location
        .path
        .clone()
        .unwrap_or_else(|| location.uri.clone());
    match failure {
        JupyterError::NotFound { .. } => HostError::NotFound {
            reference: location.uri.clone(),
        },
        other => HostError::Io {
            action: "reach",
            path,
            reason: other.to_string(),
        },
    }
}

impl JupyterHost {
    /// A host over the server `config` names. Nothing is contacted until the first call.
    pub fn new(config: JupyterHostConfig) -> Result<JupyterHost, JupyterError> {
        let rest = Rest::new(config.connection.clone());
        let presence = Presence::new();
        let rooms = Rooms::new(rest.clone(), presence.clone());
        let kernels = if config.kernels {
            let kernels = JupyterKernels::new(rest.clone(), rooms.clone())?;
            rooms.set_kernels(&kernels);
            Some(kernels)
        } else {
            None
        };
        let files = match &config.transfer_root {
            Some(folder) => Some(
                host_files::ConfinedFiles::new(std::slice::from_ref(folder)).map_err(
                    |failure| JupyterError::Config {
                        message: format!(
                            "the transfer folder {} cannot be used: {}",
                            folder.display(),
                            failure.kind()
                        ),
                    },
                )?,
            ),
            None => None,
        };
        let base = config.connection.base_url();
        let id: String = uuid::Uuid::new_v4().simple().to_string()[..16].to_owned();
        Ok(JupyterHost {
            rest,
            rooms,
            presence,
            kernels,
            files,
            window: WindowInfo {
                id: format!("jupyter-{id}"),
                label: format!("JupyterLab at {base}"),
            },
            uri_prefix: format!("{base}lab/tree/"),
        })
    }

    /// Who the agent is shown as in JupyterLab.
    pub fn presence(&self) -> &Arc<Presence> {
        &self.presence
    }

    /// Checks that the server answers, that the token works and that it has real-time
    /// collaboration (the session endpoint exists), and joins its collaborator list.
    pub async fn connect(&self) -> Result<(), JupyterError> {
        self.rest.probe().await?;
        self.presence.start(self.rest.clone());
        Ok(())
    }

    /// Leaves every room and the collaborator list, and lets go of the kernels (which keep
    /// running: they are the notebooks' sessions).
    pub async fn shutdown(&self) {
        if let Some(kernels) = &self.kernels {
            host_core::NotebookKernels::shutdown_all(kernels.as_ref()).await;
        }
        self.rooms.close_all().await;
        self.presence.stop().await;
    }

    /// The URI of the notebook at `path`: where JupyterLab shows it.
    fn location(&self, path: &str) -> NotebookLocation {
        NotebookLocation {
            uri: format!("{}{}", self.uri_prefix, encode_path(path)),
            path: Some(path.to_owned()),
        }
    }

    fn path<'a>(&self, location: &'a NotebookLocation) -> Result<&'a str, HostError> {
        location.path.as_deref().ok_or_else(|| HostError::NotFound {
            reference: location.uri.clone(),
        })
    }

    /// A path relative to the server root, checked: `/`-separated, no `.`, `..` or empty
    /// segments.
    fn checked_path(reference: &str) -> Result<String, HostError> {
        let trimmed = reference.trim_start_matches("./").trim_start_matches('/');
        let invalid = |reason: &str| HostError::InvalidPath {
            reference: reference.to_owned(),
            reason: reason.to_owned(),
        };
        if trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        if trimmed.contains('\\') {
            return Err(invalid("use / between folders"));
        }
        for segment in trimmed.split('/') {
            match segment {
                "" | "." => return Err(invalid("it has an empty or `.` segment")),
                ".." => {
                    return Err(HostError::OutsideRoot {
                        reference: reference.to_owned(),
                        root: "the Jupyter server's root".to_owned(),
                    });
                }
                _ => {}
            }
        }
        Ok(trimmed.to_owned())
    }

    /// The room of `location`, in sync.
    async fn room(
        &self,
        location: &NotebookLocation,
    ) -> Result<(bool, crate::room::Room), HostError> {
        let path = self.path(location)?;
        let (was_open, room) = self.rooms.open(location, path);
        if let Some(kernels) = &self.kernels {
            kernels.watch(path);
        }
        if let Err(failure) = room.synced().await {
            if room.is_gone() {
                self.rooms.forget(path);
                if let Ok(false) = self.rest.exists(path).await {
                    return Err(HostError::NotFound {
                        reference: location.uri.clone(),
                    });
                }
            }
            return Err(failure);
        }
        Ok((was_open, room))
    }
}

impl NotebookHost for JupyterHost {
    fn window(&self) -> WindowInfo {
        self.window.clone()
    }

    fn document_capabilities(&self) -> DocumentCapabilities {
        DocumentCapabilities { shared_live: true }
    }

    fn kernels(&self) -> Option<host_core::SharedKernels> {
        self.kernels
            .clone()
            .map(|kernels| kernels as host_core::SharedKernels)
    }

    fn files(&self) -> Option<Arc<dyn host_core::HostFiles>> {
        self.files
            .clone()
            .map(|files| Arc::new(files) as Arc<dyn host_core::HostFiles>)
    }

    async fn list(&self) -> Result<Listing, HostError> {
        let paths = self
            .rest
            .list_notebooks()
            .await
            .map_err(|failure| HostError::Io {
                action: "list",
                path: "the Jupyter server's notebooks".to_owned(),
                reason: failure.to_string(),
            })?;
        Ok(Listing {
            notebooks: paths.iter().map(|path| self.location(path)).collect(),
            unreadable: Vec::new(),
        })
    }

    async fn locate(&self, reference: &str) -> Result<NotebookLocation, HostError> {
        let reference = reference.trim();
        let path = if let Some(encoded) = reference.strip_prefix(&self.uri_prefix) {
            host_core::refs::percent_decode(encoded).ok_or_else(|| HostError::InvalidPath {
                reference: reference.to_owned(),
                reason: "it is not a valid URI".to_owned(),
            })?
        } else if reference.contains("://") || reference.starts_with("file:") {
            return Err(HostError::NotFound {
                reference: format!(
                    "{reference} (this server serves the notebooks of {}; name them by path or by the URI list_notebooks gives)",
                    self.uri_prefix
                ),
            });
        } else {
            reference.to_owned()
        };
        let path = Self::checked_path(&path)?;
        if !path.ends_with(".ipynb") {
            return Err(HostError::NotANotebook {
                reference: reference.to_owned(),
            });
        }
        Ok(self.location(&path))
    }

    async fn open(
        &self,
        location: &NotebookLocation,
    ) -> Result<(OpenStatus, Arc<Document>), HostError> {
        let (was_open, room) = self.room(location).await?;
        self.presence.touched(room.path());
        let status = if was_open {
            OpenStatus::AlreadyOpen
        } else {
            OpenStatus::Opened
        };
        Ok((status, room.document()?))
    }

    async fn load(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        let (_, room) = self.room(location).await?;
        room.document()
    }

    async fn commit(&self, base: &Document, commit: Commit) -> Result<Arc<Document>, HostError> {
        let (_, room) = self.room(&base.location).await?;
        room.commit(base.version, &commit.notebook, &commit.changes)
            .await
    }

    async fn create(
        &self,
        location: &NotebookLocation,
        notebook: Notebook,
    ) -> Result<Arc<Document>, HostError> {
        let path = self.path(location)?;
        let fail = |failure| host_error(location, failure);
        if self.rest.exists(path).await.map_err(fail)? {
            return Err(HostError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        self.rest.ensure_folders(path).await.map_err(fail)?;
        let content: Value =
            serde_json::from_str(&notebook.to_ipynb_string()).expect("our own output parses");
        self.rest
            .create(
                path,
                json!({"type": "notebook", "format": "json", "content": content}),
            )
            .await
            .map_err(fail)?;
        let (_, room) = self.room(location).await?;
        self.presence.touched(path);
        room.document()
    }

    async fn save(&self, location: &NotebookLocation) -> Result<host_core::Saved, HostError> {
        let (_, room) = self.room(location).await?;
        room.save().await?;
        Ok(host_core::Saved::Written)
    }

    async fn write_new_file(&self, path: &str, contents: Vec<u8>) -> Result<String, HostError> {
        let path = Self::checked_path(path)?;
        let location = self.location(&path);
        let fail = |failure| host_error(&location, failure);
        if self.rest.exists(&path).await.map_err(fail)? {
            return Err(HostError::AlreadyExists { path });
        }
        self.rest.ensure_folders(&path).await.map_err(fail)?;
        let model = match String::from_utf8(contents) {
            Ok(text) => json!({"type": "file", "format": "text", "content": text}),
            Err(binary) => json!({"type": "file", "format": "base64",
                                  "content": base64::engine::general_purpose::STANDARD
                                      .encode(binary.as_bytes())}),
        };
        self.rest.create(&path, model).await.map_err(fail)?;
        Ok(location.uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> JupyterHost {
        JupyterHost::new(JupyterHostConfig {
            connection: ServerConnection::new("http://127.0.0.1:8888/", Some("t")).unwrap(),
            transfer_root: None,
            kernels: false,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn notebooks_are_located_by_path_or_by_their_jupyterlab_uri() {
        let host = host();
        let location = host.locate("sub dir/a.ipynb").await.unwrap();
        assert_eq!(
            location.uri,
            "http://127.0.0.1:8888/lab/tree/sub%20dir/a.ipynb"
        );
        assert_eq!(location.path.as_deref(), Some("sub dir/a.ipynb"));
        assert_eq!(host.locate(&location.uri).await.unwrap(), location);
        assert_eq!(host.locate("/sub dir/a.ipynb").await.unwrap(), location);
        assert!(matches!(
            host.locate("../a.ipynb").await,
            Err(HostError::OutsideRoot { .. })
        ));
        assert!(matches!(
            host.locate("a.txt").await,
            Err(HostError::NotANotebook { .. })
        ));
        assert!(matches!(
            host.locate("file:///tmp/a.ipynb").await,
            Err(HostError::NotFound { .. })
        ));
        assert!(host.locate("a//b.ipynb").await.is_err());
    }
}
