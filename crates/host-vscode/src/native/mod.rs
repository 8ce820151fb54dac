//! The native driver: VS Code's quick pick and input box, operated in this window's page over
//! the Chrome DevTools Protocol on a loopback debugging port.
//!
//! The Colab extension exports no API, so its setup goes through VS Code's normal kernel
//! picker. The driver binds to the one page target of this window (the target catalog at
//! `http://127.0.0.1:{port}/json/list`, page targets only, the one whose status bar carries
//! this activation's marker) and runs fixed page scripts from one table
//! ([`projections::CODE_SERVER_4_139_1`]): reads that report bounded labels, and writes that
//! recheck the marker, the widget, focus and the row or input they are about to touch in the
//! same synchronous run. Every step has a deadline ([`NativeConfig::call_timeout`]), and every
//! failure is a [`NativeBlocker`] with a stable code rather than a guess.
//!
//! The driver decides nothing about the setup: that is `colab_setup`'s state machine, which
//! reads [`colab_setup::PickerView`]s and asks for one row or one value at a time.

mod cdp;
mod driver;
pub mod projections;
mod view;

#[cfg(test)]
mod browser;
#[cfg(test)]
pub(crate) mod fake;

pub use driver::{Binding, Chosen, InputGuard, NativeConfig, NativeDriver};
pub use view::Observation;

/// Why the native driver did not do what it was asked. The driver changed nothing in the page
/// when it returns one of these, except where a variant says otherwise.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NativeBlocker {
    /// No debugging port (or no valid marker) is configured.
    #[error(
        "no native debugging port is configured: start VS Code with --remote-debugging-port=<port> and set jupyterMcp.nativeDebugPort (or JUPYTER_MCP_NATIVE_DEBUG_PORT) to that port"
    )]
    NotConfigured,
    /// Nothing answers on the port, or the connection dropped.
    #[error(
        "nothing answers on the native debugging port at 127.0.0.1: check that VS Code was started with --remote-debugging-port=<port> and that the configured port is that one, then retry"
    )]
    Unreachable,
    /// The endpoint named (or redirected to) another host or port.
    #[error(
        "the debugging endpoint pointed somewhere other than 127.0.0.1 on the configured port, so the driver did not connect: check what listens on that port"
    )]
    ForeignHost,
    /// The bound target is no longer a page.
    #[error("the bound debugging target is no longer a page: reload the window, then retry")]
    NotAPage,
    /// The catalog lists no page target.
    #[error(
        "the debugging endpoint lists no page target: open the VS Code window that uses this port, then retry"
    )]
    NoPageTarget,
    /// No page shows this window's marker.
    #[error(
        "no page on the debugging port shows this window's Jupyter MCP marker: check that the status bar is visible and that the port belongs to this window, then retry"
    )]
    MarkerMissing,
    /// A page shows another activation's marker (or several markers).
    #[error(
        "the page on the debugging port shows another Jupyter MCP activation's marker: reload this window, or configure the port of the window this extension runs in"
    )]
    MarkerStale,
    /// More than one page shows this window's marker.
    #[error(
        "more than one page on the debugging port shows this window's marker: close the duplicate window, then retry"
    )]
    AmbiguousWindow,
    /// The picker is not what the step expected (the reason is one of a fixed set).
    #[error(
        "the picker is not what the driver expected ({0}); nothing was changed: look at the window, close the unexpected prompt if needed, then retry"
    )]
    UnexpectedUi(String),
    /// A step did not finish within its deadline.
    #[error(
        "the native step '{0}' did not finish in time: check that the window is responsive, then retry"
    )]
    Timeout(&'static str),
    /// The endpoint answered in a way the driver cannot use.
    #[error(
        "the debugging endpoint answered unexpectedly ({0}): retry, and reload the window if it persists"
    )]
    Protocol(String),
}

impl NativeBlocker {
    /// The stable code of this blocker.
    pub fn code(&self) -> &'static str {
        match self {
            NativeBlocker::NotConfigured => "native_not_configured",
            NativeBlocker::Unreachable => "native_unreachable",
            NativeBlocker::ForeignHost => "native_foreign_host",
            NativeBlocker::NotAPage => "native_not_a_page",
            NativeBlocker::NoPageTarget => "native_no_page_target",
            NativeBlocker::MarkerMissing => "native_marker_missing",
            NativeBlocker::MarkerStale => "native_marker_stale",
            NativeBlocker::AmbiguousWindow => "native_ambiguous_window",
            NativeBlocker::UnexpectedUi(_) => "native_unexpected_ui",
            NativeBlocker::Timeout(_) => "native_timeout",
            NativeBlocker::Protocol(_) => "native_protocol",
        }
    }
}
