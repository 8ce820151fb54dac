//! Progress notifications of one tool call, held back while the call is young.
//!
//! A client that sends a progress token (rmcp's client sends one with every request) is told of
//! progress only once a call has lasted [`PROGRESS_GRACE`] (or what [`PROGRESS_GRACE_ENV`] says):
//! what the tool reported before then
//! is kept, latest only, and sent when the grace ends if the call is still going. A call that
//! ends within the grace (a trivial cell, a small transfer) sends no notification at all, so
//! over HTTP its reply is the first message on its stream and goes out as one JSON body on a
//! connection the client keeps (see `settle`), instead of an SSE stream the client abandons.
//!
//! After the grace, reports go out in the order they were made, through one forwarding task
//! per call, and [`CallProgress::finish`] waits for that task to hand every report to the
//! session before the reply follows them.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mcp_contract::{BoxFuture, ProgressSink};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long a call's progress is held back by default. Long enough that a call a person would
/// not wait on reports nothing; short enough that a long one shows its first progress at once to
/// a person.
pub const PROGRESS_GRACE: Duration = Duration::from_millis(500);

/// The environment variable that sets the grace in milliseconds (`0`: every report at once).
pub const PROGRESS_GRACE_ENV: &str = "JUPYTER_MCP_PROGRESS_GRACE_MS";

/// The grace in force: [`PROGRESS_GRACE_ENV`] when it holds a number, else [`PROGRESS_GRACE`].
fn grace() -> Duration {
    static GRACE: OnceLock<Duration> = OnceLock::new();
    *GRACE.get_or_init(|| match std::env::var(PROGRESS_GRACE_ENV) {
        Ok(value) => value.trim().parse().map_or_else(
            |_| {
                tracing::warn!(
                    "{PROGRESS_GRACE_ENV}={value:?} is not a number of milliseconds; using {} ms",
                    PROGRESS_GRACE.as_millis()
                );
                PROGRESS_GRACE
            },
            Duration::from_millis,
        ),
        Err(_) => PROGRESS_GRACE,
    })
}

/// Where a call's progress notifications go (the session's peer, or a test's recorder).
pub(crate) trait ProgressOut: Send + Sync + 'static {
    fn send(&self, param: ProgressNotificationParam) -> BoxFuture<'_, ()>;
}

/// The session's peer, with the token the client gave.
pub(crate) struct PeerOut {
    pub peer: Peer<RoleServer>,
}

impl ProgressOut for PeerOut {
    fn send(&self, param: ProgressNotificationParam) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Err(error) = self.peer.notify_progress(param).await {
                tracing::debug!(%error, "progress notification not delivered");
            }
        })
    }
}

enum State {
    /// Nothing reported yet.
    Quiet,
    /// Within the grace: the latest report, kept for when it ends.
    Holding(ProgressNotificationParam),
    /// After the grace: reports go to the forwarding task in order.
    Forwarding(mpsc::UnboundedSender<ProgressNotificationParam>),
    /// The call has ended; later reports are dropped.
    Finished,
}

struct Shared<O> {
    out: O,
    token: ProgressToken,
    held_until: Instant,
    state: Mutex<State>,
    forwarder: Mutex<Option<JoinHandle<()>>>,
}

/// The progress of one call: a [`ProgressSink`] for the tool, and [`CallProgress::finish`] for
/// the handler once the tool has answered. Dropped without `finish` (the call was cancelled),
/// it stops at once.
pub(crate) struct CallProgress<O: ProgressOut> {
    shared: Arc<Shared<O>>,
}

impl<O: ProgressOut> CallProgress<O> {
    /// Starts holding back the progress of a call that starts now, for the grace in force.
    pub fn start(out: O, token: ProgressToken) -> CallProgress<O> {
        CallProgress::with_grace(out, token, grace())
    }

    fn with_grace(out: O, token: ProgressToken, grace: Duration) -> CallProgress<O> {
        CallProgress {
            shared: Arc::new(Shared {
                out,
                token,
                held_until: Instant::now() + grace,
                state: Mutex::new(State::Quiet),
                forwarder: Mutex::new(None),
            }),
        }
    }

    /// The sink the tool reports to.
    pub fn sink(&self) -> Arc<dyn ProgressSink> {
        Arc::new(Sink {
            shared: self.shared.clone(),
        })
    }

    /// Ends the call's progress: what was held back is dropped; what was already let through
    /// is handed to the session before this returns, so the reply comes after it.
    pub async fn finish(self) {
        let forwarding = self.stop();
        let forwarder = self.shared.forwarder.lock().expect("forwarder lock").take();
        if let Some(forwarder) = forwarder {
            if forwarding {
                let _ = forwarder.await;
            } else {
                forwarder.abort();
            }
        }
    }

    /// Marks the call finished; whether reports were being let through.
    fn stop(&self) -> bool {
        let mut state = self.shared.state.lock().expect("progress state lock");
        // Dropping the sender ends the forwarder once it has sent what it holds.
        matches!(
            std::mem::replace(&mut *state, State::Finished),
            State::Forwarding(_)
        )
    }
}

impl<O: ProgressOut> Drop for CallProgress<O> {
    fn drop(&mut self) {
        let forwarding = self.stop();
        if !forwarding
            && let Some(forwarder) = self.shared.forwarder.lock().expect("forwarder lock").take()
        {
            forwarder.abort();
        }
    }
}

struct Sink<O> {
    shared: Arc<Shared<O>>,
}

impl<O: ProgressOut> ProgressSink for Sink<O> {
    fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let mut param = ProgressNotificationParam::new(self.shared.token.clone(), progress);
        param.total = total;
        param.message = message;
        let mut state = self.shared.state.lock().expect("progress state lock");
        match &mut *state {
            State::Quiet => {
                let forwarder = if Instant::now() < self.shared.held_until {
                    *state = State::Holding(param);
                    tokio::spawn(hold_then_forward(self.shared.clone()))
                } else {
                    // The grace is over already: straight through.
                    let (sender, receiver) = mpsc::unbounded_channel();
                    let _ = sender.send(param);
                    *state = State::Forwarding(sender);
                    tokio::spawn(forward(self.shared.clone(), receiver))
                };
                *self.shared.forwarder.lock().expect("forwarder lock") = Some(forwarder);
            }
            State::Holding(latest) => *latest = param,
            State::Forwarding(sender) => {
                let _ = sender.send(param);
            }
            State::Finished => {}
        }
    }
}

/// Waits out the grace, sends the latest report held back, then every later one in order.
async fn hold_then_forward<O: ProgressOut>(shared: Arc<Shared<O>>) {
    tokio::time::sleep_until(shared.held_until).await;
    let (sender, receiver) = mpsc::unbounded_channel();
    let held = {
        let mut state = shared.state.lock().expect("progress state lock");
        match std::mem::replace(&mut *state, State::Forwarding(sender)) {
            State::Holding(held) => held,
            other => {
                // Finished meanwhile (a cancelled call whose abort came too late).
                *state = other;
                return;
            }
        }
    };
    shared.out.send(held).await;
    forward(shared, receiver).await;
}

/// Sends every report in order, until the call has finished and all are sent.
async fn forward<O: ProgressOut>(
    shared: Arc<Shared<O>>,
    mut receiver: mpsc::UnboundedReceiver<ProgressNotificationParam>,
) {
    while let Some(param) = receiver.recv().await {
        shared.out.send(param).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// When (paused time since the call started) a notification went out, its progress and
    /// message.
    type Sent = (Duration, f64, Option<String>);

    /// Records what would have been sent, with the (paused) time it was sent at.
    #[derive(Clone, Default)]
    struct Recorder {
        sent: Arc<Mutex<Vec<Sent>>>,
        started: Arc<Mutex<Option<Instant>>>,
    }

    impl ProgressOut for Recorder {
        fn send(&self, param: ProgressNotificationParam) -> BoxFuture<'_, ()> {
            Box::pin(async move {
                let started = self.started.lock().unwrap().expect("started");
                self.sent
                    .lock()
                    .unwrap()
                    .push((started.elapsed(), param.progress, param.message));
            })
        }
    }

    fn start() -> (Recorder, CallProgress<Recorder>) {
        let recorder = Recorder::default();
        *recorder.started.lock().unwrap() = Some(Instant::now());
        let progress = CallProgress::with_grace(
            recorder.clone(),
            ProgressToken(rmcp::model::NumberOrString::String("token".into())),
            PROGRESS_GRACE,
        );
        (recorder, progress)
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_ends_within_the_grace_sends_nothing() {
        let (recorder, progress) = start();
        let sink = progress.sink();
        sink.report(0.0, Some(1.0), None);
        tokio::time::sleep(Duration::from_millis(10)).await;
        sink.report(1.0, Some(1.0), Some("done".into()));
        progress.finish().await;
        // Past the grace, the forwarder (aborted) sends nothing, and a late report is dropped.
        tokio::time::sleep(PROGRESS_GRACE * 2).await;
        sink.report(1.0, Some(1.0), None);
        assert!(recorder.sent.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_call_sends_the_latest_held_report_at_the_grace_then_the_rest_in_order() {
        let (recorder, progress) = start();
        let sink = progress.sink();
        sink.report(0.0, Some(3.0), None);
        sink.report(1.0, Some(3.0), Some("first".into()));
        tokio::time::sleep(PROGRESS_GRACE + Duration::from_millis(100)).await;
        for step in 2..=3 {
            sink.report(f64::from(step), Some(3.0), Some(format!("step {step}")));
        }
        progress.finish().await;
        let sent = recorder.sent.lock().unwrap().clone();
        let steps: Vec<(f64, Option<String>)> = sent
            .iter()
            .map(|(_, progress, message)| (*progress, message.clone()))
            .collect();
        assert_eq!(
            steps,
            vec![
                (1.0, Some("first".to_owned())),
                (2.0, Some("step 2".to_owned())),
                (3.0, Some("step 3".to_owned())),
            ]
        );
        assert_eq!(
            sent[0].0, PROGRESS_GRACE,
            "the held report goes out as the grace ends"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_report_after_the_grace_goes_out_at_once() {
        let (recorder, progress) = start();
        let sink = progress.sink();
        tokio::time::sleep(PROGRESS_GRACE * 3).await;
        sink.report(5.0, None, None);
        progress.finish().await;
        let sent = recorder.sent.lock().unwrap().clone();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            sent[0].0,
            PROGRESS_GRACE * 3,
            "sent when reported, not later"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_call_stops_its_forwarder() {
        let (recorder, progress) = start();
        let sink = progress.sink();
        sink.report(0.0, None, None);
        let forwarder = progress.shared.forwarder.lock().unwrap().take().unwrap();
        drop(progress);
        // Dropped within the grace: the held report is never sent and the forwarder ends.
        tokio::time::timeout(PROGRESS_GRACE * 2, forwarder)
            .await
            .expect("the forwarder ends")
            .expect("not aborted: it was taken out before the drop");
        assert!(recorder.sent.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_cancelled_after_the_grace_ends_its_forwarder_after_what_it_let_through() {
        let (recorder, progress) = start();
        let sink = progress.sink();
        sink.report(0.0, None, None);
        tokio::time::sleep(PROGRESS_GRACE * 2).await;
        sink.report(1.0, None, None);
        let forwarder = progress.shared.forwarder.lock().unwrap().take().unwrap();
        drop(progress);
        tokio::time::timeout(PROGRESS_GRACE, forwarder)
            .await
            .expect("the forwarder ends once its sender is gone")
            .expect("it ends by itself");
        let sent: Vec<f64> = recorder
            .sent
            .lock()
            .unwrap()
            .iter()
            .map(|(_, progress, _)| *progress)
            .collect();
        assert_eq!(sent, vec![0.0, 1.0]);
    }
}
