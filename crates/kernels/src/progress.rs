//! Progress of slow kernel starts (a JupyterHub spawning the user's server), for callers that
//! want to relay it (MCP progress notifications).
//!
//! Progress travels in a task-local scope rather than through every provider signature: only a
//! provider that waits on something slow reports any, and the manager's one path from a
//! notebook to a started kernel (lock, discover, start) stays as it is. A report made outside
//! a scope goes nowhere.

use std::future::Future;
use std::sync::Arc;

/// One step of a slow start.
#[derive(Debug, Clone, PartialEq)]
pub struct StartProgress {
    /// How far along, from 0 to 1 (as far as the thing waited on says).
    pub fraction: f64,
    /// What is happening, in words fit to show (already sanitised).
    pub message: String,
}

/// Receives [`StartProgress`] reports.
pub type ProgressReporter = Arc<dyn Fn(StartProgress) + Send + Sync>;

tokio::task_local! {
    static REPORTER: ProgressReporter;
}

/// Runs `future` with `reporter` receiving the progress of kernel starts made inside it (on
/// this task).
pub async fn with_start_progress<F: Future>(reporter: ProgressReporter, future: F) -> F::Output {
    REPORTER.scope(reporter, future).await
}

/// Reports progress to the reporter of the current scope, if any.
#[cfg_attr(
    not(feature = "remote"),
    allow(dead_code, reason = "only remote providers report progress")
)]
pub(crate) fn report(fraction: f64, message: impl Into<String>) {
    let progress = StartProgress {
        fraction: fraction.clamp(0.0, 1.0),
        message: message.into(),
    };
    let _ = REPORTER.try_with(|reporter| reporter(progress));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn reports_reach_the_scope_they_are_made_in_only() {
        let seen: Arc<Mutex<Vec<StartProgress>>> = Arc::default();
        let sink = Arc::clone(&seen);
        report(0.5, "outside: lost");
        with_start_progress(
            Arc::new(move |progress| sink.lock().unwrap().push(progress)),
            async {
                report(2.0, "clamped");
            },
        )
        .await;
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].fraction, 1.0);
        assert_eq!(seen[0].message, "clamped");
    }
}
