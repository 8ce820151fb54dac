//! [`Contents`]: the Jupyter Server Contents API (`api/contents/<path>`), the one client of it
//! for every host: listing folders, looking a file up, reading and writing files as base64
//! (whole or in Jupyter's chunks), creating, deleting. Paths are the server's (relative to its
//! root, `/`-separated) and are percent-encoded here, once, with [`encode_path`]; a status the
//! call cannot act on is [`Error::ServerStatus`], an answer that is not the API's model is
//! [`Error::ServerProtocol`].

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::{Value, json};

use super::client::ServerClient;
use super::path::encode_path;
use crate::error::{Error, Result};

/// The Contents API of one server, over a [`ServerClient`] (its transport, credential and
/// timeout).
#[derive(Debug, Clone)]
pub struct Contents {
    client: ServerClient,
}

impl Contents {
    /// The Contents API of `client`'s server.
    pub fn new(client: ServerClient) -> Contents {
        Contents { client }
    }

    /// `api/contents/<path, encoded><query>`.
    fn request_path(path: &str, query: &str) -> String {
        format!("api/contents/{}{query}", encode_path(path))
    }

    fn status_error(&self, operation: &'static str, status: StatusCode) -> Error {
        Error::ServerStatus {
            url: self.client.url().to_string(),
            operation,
            status: status.as_u16(),
        }
    }

    fn protocol_error(&self, operation: &'static str) -> Error {
        Error::ServerProtocol {
            url: self.client.url().to_string(),
            operation,
        }
    }

    /// One call: the status and the JSON body (`Null` when empty or not JSON).
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        operation: &'static str,
    ) -> Result<(StatusCode, Value)> {
        let answer = self.client.request(method, path, body, operation).await?;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, value))
    }

    /// The model of the file or folder at `path` without its content (name, type, size,
    /// dates), `None` when there is nothing there.
    pub async fn stat(&self, path: &str) -> Result<Option<Value>> {
        const OPERATION: &str = "looking up a file";
        let request = Self::request_path(path, "?content=0");
        match self.call(Method::GET, &request, None, OPERATION).await? {
            (status, model) if status.is_success() => Ok(Some(model)),
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }

    /// The entries of the folder at `path` (`""` for the root), as the API models them.
    pub async fn list(&self, path: &str) -> Result<Vec<Value>> {
        const OPERATION: &str = "listing the server's files";
        let request = Self::request_path(path, "?content=1");
        match self.call(Method::GET, &request, None, OPERATION).await? {
            (status, mut model) if status.is_success() => match model["content"].take() {
                Value::Array(entries) => Ok(entries),
                _ => Err(self.protocol_error(OPERATION)),
            },
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }

    /// The bytes of the file at `path`, `None` when there is none.
    pub async fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>> {
        const OPERATION: &str = "reading a file";
        let request = Self::request_path(path, "?content=1&format=base64&type=file");
        match self.call(Method::GET, &request, None, OPERATION).await? {
            (status, model) if status.is_success() => model["content"]
                .as_str()
                .and_then(|text| {
                    base64::engine::general_purpose::STANDARD
                        .decode(text.replace('\n', ""))
                        .ok()
                })
                .map(Some)
                .ok_or_else(|| self.protocol_error(OPERATION)),
            (StatusCode::NOT_FOUND, _) => Ok(None),
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }

    /// Writes `model` (a notebook, a text file, `{"type": "directory"}`) at `path`. The API
    /// replaces what is there: callers that must not overwrite look first with [`stat`].
    ///
    /// [`stat`]: Contents::stat
    pub async fn create(&self, path: &str, model: &Value) -> Result<()> {
        const OPERATION: &str = "creating a file";
        let request = Self::request_path(path, "");
        match self
            .call(Method::PUT, &request, Some(model), OPERATION)
            .await?
        {
            (status, _) if status.is_success() => Ok(()),
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }

    /// One chunk of Jupyter's chunked save of the file at `path`: `chunk` 1 starts the file,
    /// later numbers append, `-1` appends and closes it (a one-chunk file is a single `-1`).
    pub async fn save_chunk(&self, path: &str, chunk: i64, bytes: &[u8]) -> Result<()> {
        const OPERATION: &str = "writing a file";
        let name = path.rsplit('/').next().unwrap_or(path);
        let body = json!({
            "type": "file",
            "format": "base64",
            "name": name,
            "path": path,
            "chunk": chunk,
            "content": base64::engine::general_purpose::STANDARD.encode(bytes),
        });
        let request = Self::request_path(path, "");
        match self
            .call(Method::PUT, &request, Some(&body), OPERATION)
            .await?
        {
            (StatusCode::OK | StatusCode::CREATED, _) => Ok(()),
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }

    /// Deletes the file at `path`; one that is not there is already gone.
    pub async fn delete(&self, path: &str) -> Result<()> {
        const OPERATION: &str = "deleting a file";
        let request = Self::request_path(path, "");
        match self.call(Method::DELETE, &request, None, OPERATION).await? {
            (StatusCode::OK | StatusCode::NO_CONTENT | StatusCode::NOT_FOUND, _) => Ok(()),
            (status, _) => Err(self.status_error(OPERATION, status)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::remote::profile::ConnectionProfile;
    use crate::remote::server::ServerUrl;

    /// A server answering each request with the next of `answers` (status, body), recording
    /// the request lines and bodies it got, one connection per request.
    async fn server(answers: Vec<(u16, &'static str)>) -> (ServerClient, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            for (status, body) in answers {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // Read the head, then as many body bytes as it announces.
                loop {
                    let read = socket.read(&mut buffer).await.unwrap();
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|line| {
                                let (name, value) = line.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                    assert!(read > 0, "the client closed the connection early");
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let line = text.lines().next().unwrap_or_default().to_owned();
                let body_sent = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
                record
                    .lock()
                    .unwrap()
                    .push(format!("{line} {}", body_sent.unwrap_or_default()));
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                socket.write_all(reply.as_bytes()).await.unwrap();
                socket.shutdown().await.unwrap();
            }
        });
        let url = ServerUrl::parse(&format!("http://127.0.0.1:{port}/base/")).unwrap();
        let mut profile = ConnectionProfile::jupyter_server(url, None);
        // As Colab's proxy does: JSON answers may start with an XSSI guard.
        profile.strip_prefix = Some(")]}'\n".to_owned());
        let client = ServerClient::new(&profile, Duration::from_secs(10)).unwrap();
        (client, seen)
    }

    #[tokio::test]
    async fn paths_with_spaces_and_hashes_are_encoded_once_and_answers_are_read() {
        let (client, seen) = server(vec![
            (
                200,
                ")]}'\n{\"name\":\"a#1.txt\",\"size\":3,\"type\":\"file\"}",
            ),
            (404, r#"{"message":"no"}"#),
            (200, r#"{"content":"aGk=\n","format":"base64"}"#),
            (201, "{}"),
            (
                200,
                r#"{"content":[{"path":"my dir/x.ipynb","type":"notebook"}]}"#,
            ),
            (500, "{}"),
            (204, ""),
        ])
        .await;
        let contents = client.contents();
        let model = contents.stat("my dir/a#1.txt").await.unwrap().unwrap();
        assert_eq!(model["size"], 3);
        assert_eq!(contents.stat("gone?.txt").await.unwrap(), None);
        assert_eq!(
            contents.read_file("my dir/a#1.txt").await.unwrap(),
            Some(b"hi".to_vec())
        );
        contents
            .save_chunk("my dir/a#1.txt", -1, b"hi")
            .await
            .unwrap();
        let entries = contents.list("my dir").await.unwrap();
        assert_eq!(entries[0]["type"], "notebook");
        let refused = contents.delete("a b").await.unwrap_err();
        assert!(
            matches!(refused, Error::ServerStatus { status: 500, .. }),
            "{refused}"
        );
        contents.delete("a b").await.unwrap();

        let seen = seen.lock().unwrap().clone();
        let lines: Vec<&str> = seen
            .iter()
            .map(|request| request.split(" HTTP/1.1").next().unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                "GET /base/api/contents/my%20dir/a%231.txt?content=0",
                "GET /base/api/contents/gone%3F.txt?content=0",
                "GET /base/api/contents/my%20dir/a%231.txt?content=1&format=base64&type=file",
                "PUT /base/api/contents/my%20dir/a%231.txt",
                "GET /base/api/contents/my%20dir?content=1",
                "DELETE /base/api/contents/a%20b",
                "DELETE /base/api/contents/a%20b",
            ]
        );
        let chunk: Value =
            serde_json::from_str(seen[3].split_once(" HTTP/1.1 ").unwrap().1).unwrap();
        assert_eq!(
            chunk,
            json!({"type": "file", "format": "base64", "name": "a#1.txt",
                   "path": "my dir/a#1.txt", "chunk": -1, "content": "aGk="})
        );
    }
}
