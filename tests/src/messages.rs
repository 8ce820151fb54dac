//! A STAND-IN of the Anthropic Messages API (the real one is not reachable from tests): a local
//! HTTP server that answers `POST /v1/messages` with one summary per cell id in the request, and
//! records what it received.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A request the stand-in received: its headers (lower-cased names) and JSON body.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

/// A local HTTP server that answers `POST /v1/messages` like the Messages API: one summary per
/// cell id in the request.
pub async fn messages_stand_in() -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 8192];
                let (head_end, length) = loop {
                    let read = stream.read(&mut chunk).await.unwrap();
                    if read == 0 {
                        return;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                    if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|line| line.strip_prefix("content-length:"))
                            .and_then(|value| value.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while buffer.len() < head_end + length {
                    let read = stream.read(&mut chunk).await.unwrap();
                    if read == 0 {
                        break;
                    }
                    buffer.extend_from_slice(&chunk[..read]);
                }
                let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
                let headers = head
                    .lines()
                    .skip(1)
                    .filter_map(|line| line.split_once(':'))
                    .map(|(name, value)| (name.trim().to_lowercase(), value.trim().to_owned()))
                    .collect();
                let body: Value =
                    serde_json::from_slice(&buffer[head_end..]).unwrap_or(Value::Null);
                let cells: Value =
                    serde_json::from_str(body["messages"][0]["content"].as_str().unwrap_or("[]"))
                        .unwrap_or(json!([]));
                let summaries: Vec<Value> = cells
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|cell| {
                        json!({"id": cell["id"], "tldr": format!("Model tldr of {}", cell["id"].as_str().unwrap_or("")),
                               "description": "What the model says.", "outputSummary": ""})
                    })
                    .collect();
                log.lock().unwrap().push(Received { headers, body });
                let answer = json!({
                    "id": "msg_test", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
                    "content": [{"type": "text", "text": Value::Array(summaries).to_string()}],
                    "stop_reason": "end_turn"
                })
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    (format!("http://{address}"), received)
}
