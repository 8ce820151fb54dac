//! Routes IOPub and shell messages to the execute request they belong to.
//!
//! The router is the pure part of a kernel's pump: messages and the current time go in,
//! events go out to each request's channel. It keeps the promised order per request (`Busy`,
//! outputs, `Idle`, `Reply`) although IOPub and shell are separate sockets and the reply
//! usually overtakes the final `idle`: a reply that arrives first is held until `idle` (and
//! announced at once with `Replied`, so a consumer can start on what the finished code left). If
//! `idle` never comes (IOPub can drop messages under a flood), the reply is released after a
//! grace period that restarts with every IOPub message of that request. And if the reply never
//! comes after `idle` (ipykernel drops it when an interrupt lands in its own code rather than
//! the user's), the request ends with a synthetic `aborted` reply after the same grace period
//! instead of hanging.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::execute::{
    ExecuteEvent, ExecuteReply, JsonObject, ReplyStatus, StreamBacklog, StreamName,
};
use crate::status::KernelStatus;
use crate::wire::{IopubItem, WireMessage, execute_reply, iopub_item};

/// Most bytes of stream text queued for one request and not yet taken by its handle. Beyond it,
/// stream text is held back: the latest [`HELD_TAIL_BYTES`] of it are kept and the rest is
/// dropped, and once the handle catches up a marker saying how much was dropped and the held tail
/// are sent. So a kernel that writes faster than the run consumes cannot grow the server's memory
/// without bound, and the last lines (where errors and summaries are) still arrive.
pub(crate) const MAX_QUEUED_STREAM_BYTES: usize = 8 * 1024 * 1024;

/// Bytes of the latest held-back stream text kept per stream.
pub(crate) const HELD_TAIL_BYTES: usize = 64 * 1024;

/// Written to stderr where the connection to a remote kernel dropped while a request ran.
pub(crate) const GAP_MARKER: &str = "\n[jupyter-mcp: the connection to the kernel server dropped \
     here; output the kernel sent at that moment may be missing]\n";

/// Stream text held back while the handle's queue is full.
struct Held {
    name: StreamName,
    /// Characters dropped before `tail`.
    dropped: usize,
    tail: String,
}

struct PendingRequest {
    sink: mpsc::UnboundedSender<ExecuteEvent>,
    backlog: StreamBacklog,
    held: Vec<Held>,
    busy_seen: bool,
    idle_seen: bool,
    held_reply: Option<ExecuteReply>,
    release_at: Option<Instant>,
}

impl PendingRequest {
    fn emit(&mut self, event: ExecuteEvent) {
        if let ExecuteEvent::Stream { name, text } = &event {
            let queued = self.backlog.load(Ordering::Relaxed);
            if queued > 0 && queued + text.len() > MAX_QUEUED_STREAM_BYTES {
                self.hold(*name, text);
                return;
            }
        }
        self.flush_held();
        self.send(event);
    }

    fn hold(&mut self, name: StreamName, text: &str) {
        let index = match self.held.iter().position(|held| held.name == name) {
            Some(index) => index,
            None => {
                self.held.push(Held {
                    name,
                    dropped: 0,
                    tail: String::new(),
                });
                self.held.len() - 1
            }
        };
        let held = &mut self.held[index];
        held.tail.push_str(text);
        if held.tail.len() > HELD_TAIL_BYTES {
            let mut cut = held.tail.len() - HELD_TAIL_BYTES;
            while !held.tail.is_char_boundary(cut) {
                cut += 1;
            }
            held.dropped += held.tail[..cut].chars().count();
            held.tail.replace_range(..cut, "");
        }
    }

    /// Sends, for each stream with held-back text, a marker for what was dropped and the tail.
    fn flush_held(&mut self) {
        for held in std::mem::take(&mut self.held) {
            let mut text = String::new();
            if held.dropped > 0 {
                text = format!(
                    "\n… [{} characters dropped: the kernel wrote faster than the server could \
                     take them] …\n",
                    held.dropped
                );
            }
            text.push_str(&held.tail);
            self.send(ExecuteEvent::Stream {
                name: held.name,
                text,
            });
        }
    }

    fn send(&self, event: ExecuteEvent) {
        if let ExecuteEvent::Stream { text, .. } = &event {
            self.backlog.fetch_add(text.len(), Ordering::Relaxed);
        }
        // A caller that dropped its handle is simply no longer listening.
        let _ = self.sink.send(event);
    }
}

pub(crate) struct Router {
    pending: HashMap<String, PendingRequest>,
    grace: Duration,
}

impl Router {
    pub(crate) fn new(grace: Duration) -> Self {
        Router {
            pending: HashMap::new(),
            grace,
        }
    }

    pub(crate) fn register(
        &mut self,
        msg_id: String,
        sink: mpsc::UnboundedSender<ExecuteEvent>,
        backlog: StreamBacklog,
    ) {
        self.pending.insert(
            msg_id,
            PendingRequest {
                sink,
                backlog,
                held: Vec::new(),
                busy_seen: false,
                idle_seen: false,
                held_reply: None,
                release_at: None,
            },
        );
    }

    #[cfg(test)]
    pub(crate) fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Routes one IOPub message. Returns the kernel-wide busy/idle state it reports, if any.
    pub(crate) fn on_iopub(&mut self, message: WireMessage, now: Instant) -> Option<KernelStatus> {
        let parent = message.parent_msg_id.clone();
        let item = iopub_item(message);
        let reported = match &item {
            IopubItem::Status(status) => Some(status.clone()),
            _ => None,
        };
        let Some(parent) = parent.as_deref() else {
            return reported;
        };
        let Some(request) = self.pending.get_mut(parent) else {
            return reported;
        };
        match item {
            IopubItem::Status(KernelStatus::Busy) => {
                request.busy_seen = true;
                request.emit(ExecuteEvent::Busy);
            }
            IopubItem::Status(_) => {
                request.idle_seen = true;
                request.emit(ExecuteEvent::Idle);
                if let Some(reply) = request.held_reply.take() {
                    request.emit(ExecuteEvent::Reply(reply));
                    self.pending.remove(parent);
                } else {
                    request.release_at = Some(now + self.grace);
                }
            }
            IopubItem::Output(event) => {
                request.emit(event);
                if request.held_reply.is_some() {
                    request.release_at = Some(now + self.grace);
                }
            }
            IopubItem::Ignored => {}
        }
        reported
    }

    /// Delivers a non-terminal `event` to the request `parent`, if it is still pending.
    #[cfg_attr(
        not(feature = "remote"),
        allow(dead_code, reason = "used by remote kernels")
    )]
    pub(crate) fn notify(&mut self, parent: &str, event: ExecuteEvent) {
        if let Some(request) = self.pending.get_mut(parent) {
            request.emit(event);
        }
    }

    /// Routes one shell message (only `execute_reply` matters).
    pub(crate) fn on_shell(&mut self, message: &WireMessage, now: Instant) {
        if message.msg_type != "execute_reply" {
            return;
        }
        let Some(parent) = message.parent_msg_id.as_deref() else {
            return;
        };
        let Some(request) = self.pending.get_mut(parent) else {
            return;
        };
        let reply = execute_reply(&message.content);
        if request.idle_seen {
            request.emit(ExecuteEvent::Reply(reply));
            self.pending.remove(parent);
        } else {
            request.emit(ExecuteEvent::Replied {
                execution_count: reply.execution_count,
            });
            request.held_reply = Some(reply);
            request.release_at = Some(now + self.grace);
        }
    }

    /// When the next held reply must be released.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.pending
            .values()
            .filter_map(|request| request.release_at)
            .min()
    }

    /// Ends requests whose grace period is over: a held reply is released with the `Idle`
    /// that never came; an `Idle` without a reply gets a synthetic `aborted` reply.
    pub(crate) fn on_timer(&mut self, now: Instant) {
        self.pending.retain(|_, request| {
            if request.release_at.is_none_or(|at| at > now) {
                return true;
            }
            match request.held_reply.take() {
                Some(reply) => {
                    request.emit(ExecuteEvent::Idle);
                    request.emit(ExecuteEvent::Reply(reply));
                }
                None => request.emit(ExecuteEvent::Reply(ExecuteReply {
                    status: ReplyStatus::Aborted,
                    execution_count: None,
                    user_expressions: JsonObject::new(),
                    payload: Vec::new(),
                    error: None,
                })),
            }
            false
        });
    }

    /// Ends a request whose reply has not arrived with `terminal`. A request whose reply is
    /// held (waiting for its `idle`) is left to the grace period.
    #[cfg_attr(
        not(feature = "remote"),
        allow(dead_code, reason = "used by remote kernels")
    )]
    pub(crate) fn end_if_unanswered(&mut self, msg_id: &str, terminal: &ExecuteEvent) {
        if self
            .pending
            .get(msg_id)
            .is_some_and(|request| request.held_reply.is_none())
            && let Some(mut request) = self.pending.remove(msg_id)
        {
            request.emit(terminal.clone());
        }
    }

    /// Marks, in the output of every request the kernel is working on, the place where the
    /// connection to it dropped: what the kernel sent at that moment may never arrive (a server
    /// only buffers for a session once it has noticed the drop), so the output says so there
    /// instead of silently missing a piece.
    #[cfg_attr(
        not(feature = "remote"),
        allow(dead_code, reason = "used by remote kernels")
    )]
    pub(crate) fn mark_gap(&mut self) {
        for request in self.pending.values_mut() {
            if request.busy_seen && !request.idle_seen {
                request.emit(ExecuteEvent::Stream {
                    name: StreamName::Stderr,
                    text: GAP_MARKER.to_owned(),
                });
            }
        }
    }

    /// Ends every pending request with the same terminal event.
    pub(crate) fn end_all(&mut self, terminal: &ExecuteEvent) {
        for (_, mut request) in self.pending.drain() {
            request.emit(terminal.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::ProcessExit;
    use serde_json::json;

    const GRACE: Duration = Duration::from_secs(5);

    fn status(parent: &str, state: &str) -> WireMessage {
        WireMessage::for_test("status", Some(parent), json!({"execution_state": state}))
    }

    fn stream(parent: &str, text: &str) -> WireMessage {
        WireMessage::for_test(
            "stream",
            Some(parent),
            json!({"name": "stdout", "text": text}),
        )
    }

    fn reply(parent: &str) -> WireMessage {
        WireMessage::for_test(
            "execute_reply",
            Some(parent),
            json!({"status": "ok", "execution_count": 1}),
        )
    }

    fn drain(receiver: &mut mpsc::UnboundedReceiver<ExecuteEvent>) -> Vec<String> {
        let mut names = Vec::new();
        while let Ok(event) = receiver.try_recv() {
            names.push(match event {
                ExecuteEvent::Busy => "busy".to_owned(),
                ExecuteEvent::Idle => "idle".to_owned(),
                ExecuteEvent::Stream { text, .. } => format!("stream:{text}"),
                ExecuteEvent::Reply(reply) => format!("reply:{:?}", reply.status),
                ExecuteEvent::Replied { execution_count } => format!("replied:{execution_count:?}"),
                ExecuteEvent::KernelDied { .. } => "died".to_owned(),
                other => format!("{other:?}"),
            });
        }
        names
    }

    /// Feeds `messages` to `router` at `now`, each on its channel: an `execute_reply` on
    /// shell, the rest on IOPub.
    fn feed(router: &mut Router, now: Instant, messages: impl IntoIterator<Item = WireMessage>) {
        for message in messages {
            if message.msg_type == "execute_reply" {
                router.on_shell(&message, now);
            } else {
                router.on_iopub(message, now);
            }
        }
    }

    fn router_with(ids: &[&str]) -> (Router, Vec<mpsc::UnboundedReceiver<ExecuteEvent>>) {
        let mut router = Router::new(GRACE);
        let receivers = ids
            .iter()
            .map(|id| {
                let (sender, receiver) = mpsc::unbounded_channel();
                router.register((*id).to_owned(), sender, StreamBacklog::default());
                receiver
            })
            .collect();
        (router, receivers)
    }

    #[test]
    fn stream_text_beyond_the_backlog_is_dropped_with_a_marker() {
        let mut router = Router::new(GRACE);
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let backlog = StreamBacklog::default();
        router.register("a".to_owned(), sender, backlog.clone());
        let now = Instant::now();
        let chunk = "x".repeat(MAX_QUEUED_STREAM_BYTES / 2);
        for _ in 0..5 {
            router.on_iopub(stream("a", &chunk), now);
        }
        router.on_iopub(stream("a", "last words\n"), now);
        assert_eq!(backlog.load(Ordering::Relaxed), MAX_QUEUED_STREAM_BYTES);
        // The reader takes everything; the marker and the held tail come before what follows.
        while receiver.try_recv().is_ok() {}
        backlog.store(0, Ordering::Relaxed);
        router.on_iopub(status("a", "idle"), now);
        let dropped = 3 * chunk.len() + "last words\n".len() - HELD_TAIL_BYTES;
        let events = drain(&mut receiver);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(
            events[0].contains(&format!("[{dropped} characters dropped")),
            "{}",
            &events[0][..200]
        );
        assert!(events[0].ends_with("xxlast words\n"));
        let tail_start = events[0].find("] …\n").unwrap() + "] …\n".len();
        assert_eq!(events[0].len() - tail_start, HELD_TAIL_BYTES);
        assert_eq!(events[1], "idle");
    }

    #[test]
    fn reply_before_idle_is_held_until_idle() {
        let (mut router, mut receivers) = router_with(&["a"]);
        let now = Instant::now();
        let messages = [status("a", "busy"), stream("a", "2\n"), reply("a")];
        feed(&mut router, now, messages);
        // Announced as it arrives, delivered after `idle`; output still on its way keeps its
        // place before `idle`.
        assert_eq!(
            drain(&mut receivers[0]),
            ["busy", "stream:2\n", "replied:Some(1)"]
        );
        let messages = [stream("a", "late\n"), status("a", "idle")];
        feed(&mut router, now, messages);
        assert_eq!(
            drain(&mut receivers[0]),
            ["stream:late\n", "idle", "reply:Ok"]
        );
        assert_eq!(router.pending_count(), 0);
    }

    #[test]
    fn idle_before_reply_passes_straight_through() {
        let (mut router, mut receivers) = router_with(&["a"]);
        let messages = [status("a", "busy"), status("a", "idle"), reply("a")];
        feed(&mut router, Instant::now(), messages);
        assert_eq!(drain(&mut receivers[0]), ["busy", "idle", "reply:Ok"]);
    }

    #[test]
    fn a_gap_is_marked_only_in_requests_the_kernel_is_working_on() {
        let (mut router, mut receivers) = router_with(&["running", "queued", "finishing"]);
        let now = Instant::now();
        let messages = [
            status("running", "busy"),
            stream("running", "before\n"),
            status("finishing", "busy"),
            status("finishing", "idle"),
        ];
        feed(&mut router, now, messages);
        router.mark_gap();
        feed(&mut router, now, [stream("running", "after\n")]);
        assert_eq!(
            drain(&mut receivers[0]),
            [
                "busy".to_owned(),
                "stream:before\n".to_owned(),
                format!("stream:{GAP_MARKER}"),
                "stream:after\n".to_owned()
            ]
        );
        assert!(
            drain(&mut receivers[1]).is_empty(),
            "not started: nothing lost"
        );
        assert_eq!(drain(&mut receivers[2]), ["busy", "idle"]);
    }

    #[test]
    fn messages_are_routed_by_parent_only() {
        let (mut router, mut receivers) = router_with(&["a", "b"]);
        let messages = [
            stream("b", "for b"),
            stream("unknown", "nobody"),
            stream("a", "for a"),
        ];
        feed(&mut router, Instant::now(), messages);
        assert_eq!(drain(&mut receivers[0]), ["stream:for a"]);
        assert_eq!(drain(&mut receivers[1]), ["stream:for b"]);
    }

    #[test]
    fn status_is_reported_for_any_parent() {
        let (mut router, _receivers) = router_with(&[]);
        assert_eq!(
            router.on_iopub(status("x", "busy"), Instant::now()),
            Some(KernelStatus::Busy)
        );
    }

    #[test]
    fn held_reply_is_released_after_the_grace_period_which_output_extends() {
        let (mut router, mut receivers) = router_with(&["a"]);
        let start = Instant::now();
        router.on_shell(&reply("a"), start);
        assert_eq!(router.next_deadline(), Some(start + GRACE));
        let later = start + Duration::from_secs(3);
        router.on_iopub(stream("a", "late"), later);
        assert_eq!(router.next_deadline(), Some(later + GRACE));
        router.on_timer(start + GRACE);
        assert_eq!(drain(&mut receivers[0]), ["replied:Some(1)", "stream:late"]);
        router.on_timer(later + GRACE);
        assert_eq!(drain(&mut receivers[0]), ["idle", "reply:Ok"]);
        assert_eq!(router.next_deadline(), None);
    }

    #[test]
    fn idle_without_a_reply_ends_with_a_synthetic_abort() {
        let (mut router, mut receivers) = router_with(&["a"]);
        let start = Instant::now();
        let messages = [status("a", "busy"), status("a", "idle")];
        feed(&mut router, start, messages);
        assert_eq!(router.next_deadline(), Some(start + GRACE));
        router.on_timer(start + GRACE);
        assert_eq!(drain(&mut receivers[0]), ["busy", "idle", "reply:Aborted"]);
        assert_eq!(router.pending_count(), 0);
    }

    #[test]
    fn end_all_sends_the_terminal_event_to_every_request() {
        let (mut router, mut receivers) = router_with(&["a", "b"]);
        router.end_all(&ExecuteEvent::KernelDied {
            exit: ProcessExit::default(),
        });
        assert_eq!(drain(&mut receivers[0]), ["died"]);
        assert_eq!(drain(&mut receivers[1]), ["died"]);
        assert_eq!(router.pending_count(), 0);
    }

    #[test]
    fn only_unanswered_requests_are_ended_by_a_marker() {
        let (mut router, mut receivers) = router_with(&["answered", "lost", "idle-only"]);
        let messages = [reply("answered"), status("idle-only", "idle")];
        feed(&mut router, Instant::now(), messages);
        for id in ["answered", "lost", "idle-only", "unknown"] {
            router.end_if_unanswered(id, &ExecuteEvent::ConnectionLost);
        }
        assert_eq!(drain(&mut receivers[0]), ["replied:Some(1)"]);
        assert_eq!(drain(&mut receivers[1]), ["ConnectionLost"]);
        assert_eq!(drain(&mut receivers[2]), ["idle", "ConnectionLost"]);
        assert_eq!(router.pending_count(), 1);
    }

    #[test]
    fn reply_status_error_is_kept() {
        let (mut router, mut receivers) = router_with(&["a"]);
        let error = WireMessage::for_test(
            "execute_reply",
            Some("a"),
            json!({"status": "error", "ename": "E", "evalue": "v", "traceback": []}),
        );
        feed(&mut router, Instant::now(), [status("a", "idle"), error]);
        let events: Vec<_> = std::iter::from_fn(|| receivers[0].try_recv().ok()).collect();
        assert!(matches!(
            events.last(),
            Some(ExecuteEvent::Reply(reply)) if reply.status == ReplyStatus::Error
        ));
    }
}
