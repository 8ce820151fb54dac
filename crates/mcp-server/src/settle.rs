//! One JSON body for a POST whose reply is ready soon, in every protocol version.
//!
//! rmcp answers a session's POST (protocol 2025-11-25 and older) with an SSE stream even when
//! the reply is the only thing on it, and its `json_response` setting applies only to stateless
//! requests. A stream costs the client an SSE parse, caps the reply at the client's event size
//! (the Python SDK's is 1 MiB), and clients that stop reading at the reply leave the stream
//! unfinished, so their connection cannot be reused: every call then opens a new one.
//!
//! [`settle`] reads the stream for at most [`REPLY_WAIT`]: when the first message on it is the
//! reply, the answer becomes that message as `application/json`; when something comes first (a
//! progress notification, a request to the client) or nothing final arrives in time, the stream
//! is passed on whole, from its first byte, as rmcp made it.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use crate::http::Body;

/// How long a reply is awaited before the stream is passed on as a stream. Long calls (a run
/// that waits for its cells, a large transfer) stream, with their keep-alives, after this.
pub const REPLY_WAIT: Duration = Duration::from_secs(1);

/// Whether a request may be answered with one JSON body: a POST that accepts `application/json`.
pub fn may_settle(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::POST
        && headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(|item| item.split(';').next().unwrap_or("").trim())
            .any(|item| {
                item.eq_ignore_ascii_case("application/json")
                    || item == "*/*"
                    || item.eq_ignore_ascii_case("application/*")
            })
}

/// The answer to a POST: `response` itself unless it is an SSE stream whose first message is
/// the reply and arrives within `wait`, in which case that message as `application/json`.
pub async fn settle(response: Response<Body>, wait: Duration) -> Response<Body> {
    let is_stream = response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
    if !is_stream {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let deadline = tokio::time::Instant::now() + wait;
    // What has arrived: the first frame as it came (rmcp sends an event in one frame, so a large
    // reply is never copied), later frames appended to it.
    let mut read = BytesMut::new();
    let mut examined = 0;
    loop {
        while let Some(length) = event_length(&read[examined..]) {
            let event = examined..examined + length;
            examined += length;
            let data = match single_data_line(&read[event.clone()]) {
                Some(line) => EventData::Line(event.start + line.start..event.start + line.end),
                None => event_data(&read[event]),
            };
            let reply = match data {
                // A comment, a keep-alive or a priming event (an id and no data).
                EventData::Nothing => continue,
                EventData::Line(range) if is_reply(&read[range.clone()]) => {
                    read.freeze().slice(range)
                }
                EventData::Message(data) if is_reply(&data) => Bytes::from(data),
                EventData::Line(_) | EventData::Message(_) | EventData::Other => {
                    return Response::from_parts(parts, prefixed(read.freeze(), body));
                }
            };
            parts.headers.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.remove(header::TRANSFER_ENCODING);
            parts.headers.remove(header::CACHE_CONTROL);
            return Response::from_parts(parts, Full::new(reply).boxed());
        }
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if read.is_empty() {
                        read = BytesMut::from(data);
                    } else {
                        read.extend_from_slice(&data);
                    }
                }
            }
            Ok(Some(Err(never))) => match never {},
            // The stream ended or the reply is not ready: pass on what there is, as it comes.
            Ok(None) | Err(_) => return Response::from_parts(parts, prefixed(read.freeze(), body)),
        }
    }
}

/// Where the data of `event` is when it is one `data:` line (what rmcp writes, after optional
/// `id:`, `retry:` or `event: message` lines): its range in `event`, found without copying.
fn single_data_line(event: &[u8]) -> Option<std::ops::Range<usize>> {
    let mut data = None;
    let mut start = 0;
    while start < event.len() {
        let end = memchr::memchr(b'\n', &event[start..]).map_or(event.len(), |at| start + at);
        let line = &event[start..end];
        if line.contains(&b'\r') {
            return None;
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            if data.is_some() {
                return None;
            }
            let skip = usize::from(value.first() == Some(&b' '));
            data = Some(start + 5 + skip..end);
        } else if !(line.is_empty()
            || line.starts_with(b"id:")
            || line.starts_with(b"retry:")
            || line == b"event: message"
            || line == b"event:message")
        {
            return None;
        }
        start = end + 1;
    }
    data.filter(|range| !range.is_empty())
}

/// The length of the first complete event in `bytes` (up to and including the blank line that
/// ends it), if there is one.
fn event_length(bytes: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    let mut index = 0;
    while index < bytes.len() {
        // To the next line end, at memchr's speed: a reply is one line of up to megabytes.
        index += memchr::memchr2(b'\n', b'\r', &bytes[index..])?;
        let end = match bytes.get(index + 1) {
            Some(b'\n') if bytes[index] == b'\r' => index + 2,
            // A lone `\r` at the end may be the first half of `\r\n`: wait for more.
            None if bytes[index] == b'\r' => return None,
            _ => index + 1,
        };
        if index == line_start {
            return Some(end);
        }
        line_start = end;
        index = end;
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
enum EventData {
    /// No data: a comment, a keep-alive, a priming event.
    Nothing,
    /// A `message` event's data, joined from its lines.
    Message(Vec<u8>),
    /// A `message` event's data, where it is in what was read (one `data:` line).
    Line(std::ops::Range<usize>),
    /// Something this module does not take apart (a named event type, a malformed line).
    Other,
}

/// The data of one event, its `data:` lines joined by `\n` as the SSE standard says.
fn event_data(event: &[u8]) -> EventData {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|&byte| byte == b'\n' || byte == b'\r') {
        if line.is_empty() || line[0] == b':' {
            continue;
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => match &mut data {
                Some(joined) => {
                    joined.push(b'\n');
                    joined.extend_from_slice(value);
                }
                None => data = Some(value.to_vec()),
            },
            b"event" if value != b"message" => return EventData::Other,
            b"event" | b"id" | b"retry" => {}
            _ => return EventData::Other,
        }
    }
    match data {
        Some(data) if !data.is_empty() => EventData::Message(data),
        _ => EventData::Nothing,
    }
}

/// Whether `data` is a JSON-RPC reply (a result or an error), not a notification or a request.
fn is_reply(data: &[u8]) -> bool {
    // How rmcp writes a reply: `{"jsonrpc":"2.0","id":<id>,"result":` (or `"error":`). Checked
    // without parsing the whole body, which may be megabytes; anything else is parsed.
    if let Some(rest) = data.strip_prefix(br#"{"jsonrpc":"2.0","id":"#) {
        let id_end = if rest.first() == Some(&b'"') {
            rest[1..]
                .iter()
                .position(|&byte| byte == b'"' || byte == b'\\')
                .filter(|&end| rest[1 + end] == b'"')
                .map(|end| end + 2)
        } else {
            rest.iter()
                .position(|&byte| !(byte.is_ascii_digit() || byte == b'-'))
        };
        if let Some(id_end) = id_end.filter(|&end| end > 0) {
            let after = &rest[id_end..];
            if after.starts_with(br#","result":"#) || after.starts_with(br#","error":"#) {
                return true;
            }
            if after.starts_with(br#","method":"#) {
                return false;
            }
        }
    }
    // The top-level keys only; every value is skipped unread.
    serde_json::from_slice::<std::collections::HashMap<String, serde::de::IgnoredAny>>(data)
        .is_ok_and(|keys| {
            !keys.contains_key("method")
                && (keys.contains_key("result") || keys.contains_key("error"))
        })
}

/// `read` followed by the rest of `body`.
fn prefixed(read: Bytes, body: Body) -> Body {
    Prefixed {
        prefix: (!read.is_empty()).then_some(read),
        rest: body,
    }
    .boxed()
}

struct Prefixed {
    prefix: Option<Bytes>,
    rest: Body,
}

impl HttpBody for Prefixed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        Pin::new(&mut self.rest).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.rest.size_hint();
        if let Some(prefix) = &self.prefix {
            let length = prefix.len() as u64;
            hint.set_lower(hint.lower() + length);
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper + length);
            }
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event stream of `frames`, which then ends or, `then_pending`, stays open.
    fn stream_of(frames: Vec<&'static str>, then_pending: bool) -> Response<Body> {
        use futures::stream::{self, StreamExt};
        let frames = stream::iter(frames)
            .map(|frame| Ok::<_, Infallible>(Frame::data(Bytes::from(frame))))
            .chain(stream::iter(then_pending.then(stream::pending)).flatten());
        Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .header("mcp-session-id", "s1")
            .body(BodyExt::boxed(http_body_util::StreamBody::new(frames)))
            .unwrap()
    }

    async fn body_of(response: Response<Body>) -> String {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn content_type(response: &Response<Body>) -> &str {
        response.headers()[header::CONTENT_TYPE].to_str().unwrap()
    }

    #[tokio::test]
    async fn a_reply_after_a_priming_event_becomes_one_json_body() {
        let reply =
            r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a\nb"}]}}"#;
        // The priming event and the reply split across frames where a line is cut in two.
        let response = stream_of(
            vec![
                "id: 0/7\nretry: 3000\ndata: \n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"content\"",
                ":[{\"type\":\"text\",\"text\":\"a\\nb\"}]}}\nid: 1/7\n\n",
            ],
            true,
        );
        let settled = settle(response, Duration::from_secs(30)).await;
        assert_eq!(content_type(&settled), "application/json");
        assert_eq!(settled.headers()["mcp-session-id"], "s1");
        assert!(settled.headers().get(header::CACHE_CONTROL).is_none());
        assert_eq!(body_of(settled).await, reply);
    }

    #[tokio::test]
    async fn a_notification_first_keeps_the_whole_stream() {
        let frames = vec![
            "id: 0/3\ndata: \n\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n",
        ];
        let whole: String = frames.concat();
        let settled = settle(stream_of(frames, false), Duration::from_secs(30)).await;
        assert_eq!(content_type(&settled), "text/event-stream");
        assert_eq!(body_of(settled).await, whole);
    }

    #[tokio::test]
    async fn a_reply_not_ready_in_time_streams_from_the_first_byte() {
        let settled = settle(
            stream_of(vec!["id: 0/4\ndata: \n\n", ": keep-alive\n\n"], true),
            Duration::from_millis(50),
        )
        .await;
        assert_eq!(content_type(&settled), "text/event-stream");
        let mut body = settled.into_body();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"id: 0/4\ndata: \n\n: keep-alive\n\n");
    }

    #[tokio::test]
    async fn other_answers_pass_unchanged() {
        let accepted = Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Full::new(Bytes::new()).boxed())
            .unwrap();
        assert_eq!(
            settle(accepted, REPLY_WAIT).await.status(),
            StatusCode::ACCEPTED
        );
        let json = crate::http::json_response(StatusCode::OK, serde_json::json!({"a": 1}));
        let settled = settle(json, REPLY_WAIT).await;
        assert_eq!(content_type(&settled), "application/json");
        assert_eq!(body_of(settled).await, r#"{"a":1}"#);
    }

    #[test]
    fn events_are_cut_at_blank_lines_of_any_line_ending() {
        assert_eq!(event_length(b"data: x\n\nrest"), Some(9));
        assert_eq!(event_length(b"data: x\r\n\r\nrest"), Some(11));
        assert_eq!(event_length(b"data: x\r\rrest"), Some(9));
        assert_eq!(event_length(b"data: x\r"), None);
        assert_eq!(event_length(b"data: x\n"), None);
        assert_eq!(event_length(b"\n"), Some(1));
    }

    #[test]
    fn a_one_line_event_is_found_in_place_and_anything_else_is_joined() {
        let event = b"id: 7\nevent: message\ndata: {\"a\": 1}\n\n";
        let range = single_data_line(event).unwrap();
        assert_eq!(&event[range], br#"{"a": 1}"#);
        assert_eq!(single_data_line(b"data:{}\n\n").map(|r| r.start), Some(5));
        // Two data lines, a carriage return, another event type, no data: the general path.
        for other in [
            &b"data: a\ndata: b\n\n"[..],
            b"data: a\r\n\r\n",
            b"event: ping\ndata: a\n\n",
            b"id: 1\ndata:\n\n",
            b": keep-alive\n\n",
        ] {
            assert_eq!(single_data_line(other), None, "{other:?}");
        }
    }

    #[tokio::test]
    async fn a_large_reply_in_one_frame_arrives_whole() {
        let reply = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"text":"{}"}}}}"#,
            "x".repeat(3 << 20)
        );
        let frame: &'static str = Box::leak(format!("id: 0/1\ndata: {reply}\n\n").into_boxed_str());
        let settled = settle(stream_of(vec![frame], false), Duration::from_secs(5)).await;
        assert_eq!(content_type(&settled), "application/json");
        assert_eq!(body_of(settled).await, reply);
    }

    #[test]
    fn event_data_joins_lines_and_tells_comments_and_named_events() {
        assert_eq!(event_data(b": ping\n\n"), EventData::Nothing);
        assert_eq!(event_data(b"id: 1\ndata:\n\n"), EventData::Nothing);
        assert_eq!(
            event_data(b"data: a\ndata:b\n\n"),
            EventData::Message(b"a\nb".to_vec())
        );
        assert_eq!(
            event_data(b"event: message\ndata: x\n\n"),
            EventData::Message(b"x".to_vec())
        );
        assert_eq!(
            event_data(b"event: endpoint\ndata: x\n\n"),
            EventData::Other
        );
        assert_eq!(event_data(b"bogus: x\n\n"), EventData::Other);
    }

    #[test]
    fn replies_are_told_from_notifications_and_requests() {
        for reply in [
            r#"{"jsonrpc":"2.0","id":12,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a-1","error":{"code":-1,"message":"m"}}"#,
            r#"{"id":1,"jsonrpc":"2.0","result":null}"#,
            r#"{ "jsonrpc": "2.0", "result": 1, "id": 3 }"#,
        ] {
            assert!(is_reply(reply.as_bytes()), "{reply}");
        }
        for other in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"x"}"#,
            "not json",
        ] {
            assert!(!is_reply(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn json_must_be_acceptable() {
        let headers = |accept: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, accept.parse().unwrap());
            headers
        };
        let both = headers("application/json, text/event-stream");
        assert!(may_settle(&Method::POST, &both));
        assert!(may_settle(&Method::POST, &headers("*/*")));
        assert!(may_settle(
            &Method::POST,
            &headers("text/event-stream;q=1, Application/JSON;q=0.9")
        ));
        assert!(!may_settle(&Method::POST, &headers("text/event-stream")));
        assert!(!may_settle(&Method::GET, &both));
        assert!(!may_settle(&Method::POST, &HeaderMap::new()));
    }
}
