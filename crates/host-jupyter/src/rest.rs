//! The Jupyter Server REST calls this host makes: the Contents API (listing notebooks, creating
//! new files, never writing an open notebook), the collaboration session endpoint (a
//! notebook's room) and the sessions API (the notebook's kernel, shared with JupyterLab).

use http::{Method, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::connection::{ServerConnection, encode_path, encode_segment};
use crate::error::JupyterError;

/// Listing stops after this many folders (a huge server root), and this deep.
const MAX_FOLDERS: usize = 2_000;
const MAX_DEPTH: usize = 12;

/// The REST client of one server, over the kernels crate's transport (HTTP or HTTPS, the
/// token in a header and renewed when refused).
#[derive(Clone)]
pub(crate) struct Rest {
    connection: ServerConnection,
}

/// What the collaboration session endpoint says about a document.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct RoomSession {
    /// The document's stable id (the server's file-id database).
    #[serde(rename = "fileId")]
    pub file_id: String,
    /// The server process's session; a new one means the server restarted.
    #[serde(rename = "sessionId")]
    pub session_id: String,
}

/// A server-side session (a notebook and its kernel), as `/api/sessions` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerSession {
    pub id: String,
    pub path: String,
    pub kernel_id: String,
    pub kernel_name: String,
}

impl Rest {
    pub(crate) fn new(connection: ServerConnection) -> Rest {
        Rest { connection }
    }

    pub(crate) fn connection(&self) -> &ServerConnection {
        &self.connection
    }

    /// One request; the status and the JSON body (`Null` when empty or not JSON).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(StatusCode, Value), JupyterError> {
        let answer = self
            .connection
            .client()
            .request(method, path, body.as_ref(), "a Jupyter Server API call")
            .await
            .map_err(|failure| server_error(&self.connection, failure))?;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, value))
    }

    fn status(what: &str, status: StatusCode) -> JupyterError {
        JupyterError::Status {
            what: what.to_owned(),
            status: status.as_u16(),
        }
    }

    fn malformed(what: &str) -> JupyterError {
        JupyterError::Malformed {
            what: what.to_owned(),
        }
    }

    /// The server's Contents API (the kernels crate's one client of it).
    fn contents(&self) -> kernels::Contents {
        self.connection.client().contents()
    }

    /// A Contents API failure as this host's error.
    fn contents_error(&self, failure: kernels::Error) -> JupyterError {
        server_error(&self.connection, failure)
    }

    /// Every notebook under the server's root (paths relative to it, `/`-separated, sorted),
    /// and folders that could not be listed.
    pub(crate) async fn list_notebooks(&self) -> Result<Vec<String>, JupyterError> {
        let contents = self.contents();
        let mut notebooks = Vec::new();
        let mut folders = vec![(String::new(), 0usize)];
        let mut listed = 0;
        while let Some((folder, depth)) = folders.pop() {
            listed += 1;
            if listed > MAX_FOLDERS {
                break;
            }
            let entries = match contents.list(&folder).await {
                Ok(entries) => entries,
                // A folder below the root that cannot be listed is left out.
                Err(kernels::Error::ServerStatus { .. }) if !folder.is_empty() => continue,
                Err(failure) => return Err(self.contents_error(failure)),
            };
            for entry in &entries {
                let kind = entry.get("type").and_then(Value::as_str);
                let Some(entry_path) = entry.get("path").and_then(Value::as_str) else {
                    continue;
                };
                match kind {
                    Some("notebook") => notebooks.push(entry_path.to_owned()),
                    Some("directory") if depth < MAX_DEPTH => {
                        folders.push((entry_path.to_owned(), depth + 1));
                    }
                    _ => {}
                }
            }
        }
        notebooks.sort();
        Ok(notebooks)
    }

    /// Whether the server has a file or folder at `path`.
    pub(crate) async fn exists(&self, path: &str) -> Result<bool, JupyterError> {
        match self.contents().stat(path).await {
            Ok(model) => Ok(model.is_some()),
            Err(failure) => Err(self.contents_error(failure)),
        }
    }

    /// Writes a new file through the Contents API (a notebook as nbformat JSON, or text). The
    /// caller has checked that nothing is there; the API itself cannot refuse to overwrite.
    pub(crate) async fn create(&self, path: &str, model: Value) -> Result<(), JupyterError> {
        self.contents()
            .create(path, &model)
            .await
            .map_err(|failure| self.contents_error(failure))
    }

    /// Creates the folders of `path` that do not exist yet.
    pub(crate) async fn ensure_folders(&self, path: &str) -> Result<(), JupyterError> {
        let parts: Vec<&str> = path.split('/').collect();
        let mut folder = String::new();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !folder.is_empty() {
                folder.push('/');
            }
            folder.push_str(part);
            if !self.exists(&folder).await? {
                self.create(&folder, json!({"type": "directory"})).await?;
            }
        }
        Ok(())
    }

    /// Checks that the server answers with the token and has real-time collaboration, without
    /// touching a file: the session endpoint takes only `PUT`, so a `GET` of it is refused
    /// (405) where it exists and not found (404) where it does not.
    pub(crate) async fn probe(&self) -> Result<(), JupyterError> {
        let (status, _) = self.call(Method::GET, "api/status", None).await?;
        if !status.is_success() {
            return Err(Self::status("asking for the server's status", status));
        }
        let (status, _) = self
            .call(Method::GET, "api/collaboration/session/probe.ipynb", None)
            .await?;
        if status == StatusCode::NOT_FOUND {
            return Err(JupyterError::NoCollaboration {
                url: self.connection.base_url(),
            });
        }
        Ok(())
    }

    /// The collaboration session of a notebook: its room id and the server's session.
    pub(crate) async fn room_session(&self, path: &str) -> Result<RoomSession, JupyterError> {
        let request = format!("api/collaboration/session/{}", encode_path(path));
        let (status, value) = self
            .call(
                Method::PUT,
                &request,
                Some(json!({"format": "json", "type": "notebook"})),
            )
            .await?;
        match status {
            status if status.is_success() => serde_json::from_value(value)
                .map_err(|_| Self::malformed("opening a collaboration session")),
            StatusCode::NOT_FOUND => Err(JupyterError::NoCollaboration {
                url: self.connection.base_url(),
            }),
            status => Err(Self::status("opening a collaboration session", status)),
        }
    }

    /// The server session of the notebook at `path`, if one exists.
    pub(crate) async fn find_session(
        &self,
        path: &str,
    ) -> Result<Option<ServerSession>, JupyterError> {
        let (status, value) = self.call(Method::GET, "api/sessions", None).await?;
        if !status.is_success() {
            return Err(Self::status("listing sessions", status));
        }
        let sessions = value
            .as_array()
            .ok_or_else(|| Self::malformed("listing sessions"))?;
        Ok(sessions
            .iter()
            .filter_map(server_session)
            .find(|session| session.path == path))
    }

    /// Creates the notebook's server session with a kernel of `kernel_name` (the server's
    /// default when `None`), as JupyterLab does when it opens a notebook without one.
    pub(crate) async fn create_session(
        &self,
        path: &str,
        kernel_name: Option<&str>,
    ) -> Result<ServerSession, JupyterError> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut kernel = json!({});
        if let Some(kernel_name) = kernel_name {
            kernel["name"] = Value::from(kernel_name);
        }
        let body = json!({"path": path, "type": "notebook", "name": name, "kernel": kernel});
        let (status, value) = self.call(Method::POST, "api/sessions", Some(body)).await?;
        if !status.is_success() {
            return Err(Self::status(
                "starting the notebook's kernel session",
                status,
            ));
        }
        server_session(&value).ok_or_else(|| Self::malformed("starting a session"))
    }

    /// Gives the server session `session_id` a new kernel of `kernel_name`, as JupyterLab's
    /// Change Kernel does (`PATCH /api/sessions/<id>`): the server starts the new kernel and
    /// shuts the old one down before it answers.
    pub(crate) async fn change_session_kernel(
        &self,
        session_id: &str,
        kernel_name: &str,
    ) -> Result<ServerSession, JupyterError> {
        let request = format!("api/sessions/{}", encode_segment(session_id));
        let body = json!({"kernel": {"name": kernel_name}});
        let (status, value) = self.call(Method::PATCH, &request, Some(body)).await?;
        if !status.is_success() {
            return Err(Self::status(
                "changing the notebook session's kernel",
                status,
            ));
        }
        server_session(&value).ok_or_else(|| Self::malformed("changing a session's kernel"))
    }
}

/// A failure of the kernels crate's transport as this host's error: a refused certificate
/// says why and which option fixes it, as for remote kernels.
pub(crate) fn server_error(connection: &ServerConnection, failure: kernels::Error) -> JupyterError {
    let url = connection.base_url();
    match failure {
        kernels::Error::ServerCertificate { problem, .. } => JupyterError::Certificate {
            url,
            problem: problem.to_owned(),
        },
        kernels::Error::ServerAuth { status, .. } => JupyterError::Unauthorized { url, status },
        kernels::Error::ServerUnreachable { .. } => JupyterError::Unreachable {
            url,
            reason: "no connection".to_owned(),
        },
        kernels::Error::Timeout { after, .. } => JupyterError::Unreachable {
            url,
            reason: format!("no answer within {} s", after.as_secs()),
        },
        kernels::Error::ServerStatus {
            operation, status, ..
        } => JupyterError::Status {
            what: operation.to_owned(),
            status,
        },
        kernels::Error::ServerProtocol { operation, .. } => JupyterError::Malformed {
            what: operation.to_owned(),
        },
        other => JupyterError::Config {
            message: other.to_string(),
        },
    }
}

fn server_session(value: &Value) -> Option<ServerSession> {
    let kernel = value.get("kernel")?;
    Some(ServerSession {
        id: value.get("id")?.as_str()?.to_owned(),
        path: value.get("path")?.as_str()?.to_owned(),
        kernel_id: kernel.get("id")?.as_str()?.to_owned(),
        kernel_name: kernel
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_read_from_the_api_model() {
        let model = json!({"id": "s1", "path": "a/b.ipynb", "name": "b.ipynb", "type": "notebook",
                           "kernel": {"id": "k1", "name": "python3", "execution_state": "idle"}});
        assert_eq!(
            server_session(&model),
            Some(ServerSession {
                id: "s1".into(),
                path: "a/b.ipynb".into(),
                kernel_id: "k1".into(),
                kernel_name: "python3".into(),
            })
        );
        assert_eq!(
            server_session(&json!({"id": "s", "path": "p", "kernel": null})),
            None
        );
    }
}
