//! The driver: binding to this window's page target and the operations on its quick input.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use colab_setup::PickerView;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::NativeBlocker;
use super::cdp::{self, CallError, Connection};
use super::projections::{CODE_SERVER_4_139_1, MAX_CHARS, Projection, Projections};
use super::view::{self, MarkerState, Observation};

/// How long the driver waits and how many targets it considers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeConfig {
    /// The deadline of each step: the catalog request, a WebSocket connection, one CDP call.
    pub call_timeout: Duration,
    /// The most page targets a binding inspects; a catalog with more refuses to bind.
    pub max_page_targets: usize,
}

impl Default for NativeConfig {
    fn default() -> Self {
        NativeConfig {
            call_timeout: Duration::from_secs(5),
            max_page_targets: 16,
        }
    }
}

/// The page target a driver is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Chromium's id of the page target.
    pub target_id: String,
    /// How many page targets were checked for the marker.
    pub pages_seen: usize,
}

/// What a row choice did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// The row was there, as expected, and was clicked.
    Clicked,
    /// The rows were not what the caller saw (label gone, doubled, disabled, moved, or the
    /// list still loading); nothing was clicked.
    RowChanged,
}

/// What an input-box write rechecks in the page before it writes, besides the marker, the
/// widget and focus.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputGuard {
    /// The input box's title must equal this (as [`PickerView::InputBox`] reports it).
    pub title: Option<String>,
    /// The input box's prompt (with VS Code's "Press 'Enter'…" suffix) must contain this.
    pub prompt_contains: Option<String>,
}

/// The native driver of one window: cheap to clone, binds on first use and again after the
/// socket drops or the marker stops matching. Operations are serialised.
#[derive(Clone)]
pub struct NativeDriver {
    inner: Arc<Inner>,
}

impl fmt::Debug for NativeDriver {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("NativeDriver")
            .field("port", &self.inner.port)
            .finish_non_exhaustive()
    }
}

struct Inner {
    port: u16,
    marker: String,
    config: NativeConfig,
    projections: Projections,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    session: Option<Session>,
    /// The target of the last binding, to tell "no longer a page" from "gone".
    last_target: Option<String>,
}

struct Session {
    target_id: String,
    connection: Connection,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Reads only: retried once on a fresh binding when a kept socket turns out dropped.
    Read,
    /// Changes the page: the page is brought to the front first, and never retried once the
    /// script may have been sent.
    Write,
}

/// Whether `marker` is `jmcp-` and 32 lower-case hex digits.
fn marker_is_valid(marker: &str) -> bool {
    marker.strip_prefix("jmcp-").is_some_and(|hex| {
        hex.len() == 32
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

impl NativeDriver {
    /// A driver for the window whose status bar shows `marker`, on the debugging port `port`,
    /// with the default deadlines. Nothing is connected until the first call.
    pub fn new(port: u16, marker: String) -> NativeDriver {
        NativeDriver::with_config(port, marker, NativeConfig::default())
    }

    /// [`NativeDriver::new`] with explicit deadlines.
    pub fn with_config(port: u16, marker: String, config: NativeConfig) -> NativeDriver {
        NativeDriver {
            inner: Arc::new(Inner {
                port,
                marker,
                config,
                projections: CODE_SERVER_4_139_1,
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// The debugging port.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// Binds afresh: the target catalog at `http://127.0.0.1:{port}/json/list`, its page
    /// targets only (each must name `ws://127.0.0.1:{port}/devtools/page/<id>`, or nothing is
    /// connected: [`NativeBlocker::ForeignHost`]), the marker projection on each; exactly one
    /// page must carry this window's marker.
    pub async fn bind(&self) -> Result<Binding, NativeBlocker> {
        let mut state = self.inner.state.lock().await;
        state.session = None;
        let previous = state.last_target.take();
        let (session, binding) = self.inner.connect(previous.as_deref()).await?;
        state.last_target = Some(session.target_id.clone());
        state.session = Some(session);
        Ok(binding)
    }

    /// How many page targets the catalog on `port` lists: one HTTP request, no WebSocket, no
    /// page script.
    pub async fn page_candidates(port: u16) -> Result<usize, NativeBlocker> {
        if port == 0 {
            return Err(NativeBlocker::NotConfigured);
        }
        let targets = cdp::catalog(port, NativeConfig::default().call_timeout).await?;
        Ok(targets
            .iter()
            .filter(|target| target.kind == "page")
            .count())
    }

    /// The open quick pick, input box or dialog, as the setup machine reads it.
    pub async fn observe(&self) -> Result<PickerView, NativeBlocker> {
        Ok(self.observe_full().await?.view)
    }

    /// [`NativeDriver::observe`] with whether every row was seen and whether the quick input
    /// has focus.
    pub async fn observe_full(&self) -> Result<Observation, NativeBlocker> {
        let answer = self
            .run(self.inner.projections.observe, json!({}), Access::Read)
            .await?;
        view::parse_observation(&answer)
    }

    /// Clicks the one enabled row labelled `label` ("…" and "..." are the same), after
    /// rechecking in the page that the quick pick is open, focused, not loading and shows all
    /// its rows.
    pub async fn choose_row(&self, label: &str) -> Result<Chosen, NativeBlocker> {
        let answer = self
            .write(self.inner.projections.click_row, json!({ "label": label }))
            .await?;
        chosen(&answer)
    }

    /// Clicks the row at `position` only if the visible labels are exactly `listing`, in order,
    /// and that row is labelled `label` and enabled.
    pub async fn choose_listed(
        &self,
        position: usize,
        label: &str,
        listing: &[String],
    ) -> Result<Chosen, NativeBlocker> {
        let answer = self
            .write(
                self.inner.projections.click_listed,
                json!({ "position": position, "label": label, "listing": listing }),
            )
            .await?;
        chosen(&answer)
    }

    /// Sets the open input box's value to `value` and returns the value read back.
    pub async fn type_text(&self, value: &str) -> Result<String, NativeBlocker> {
        self.type_text_guarded(value, &InputGuard::default()).await
    }

    /// [`NativeDriver::type_text`], also rechecking the input box's title and prompt.
    pub async fn type_text_guarded(
        &self,
        value: &str,
        guard: &InputGuard,
    ) -> Result<String, NativeBlocker> {
        if value.chars().count() > MAX_CHARS {
            return Err(NativeBlocker::UnexpectedUi(format!(
                "the value is longer than the {MAX_CHARS} characters the driver types"
            )));
        }
        let answer = self
            .write(
                self.inner.projections.set_input,
                json!({
                    "value": value,
                    "title": guard.title,
                    "prompt_contains": guard.prompt_contains,
                }),
            )
            .await?;
        match view::status(&answer)? {
            "typed" => Ok(answer["value"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(MAX_CHARS)
                .collect()),
            _ => Err(unknown_status()),
        }
    }

    /// Presses Enter in the open input box.
    pub async fn submit(&self) -> Result<(), NativeBlocker> {
        self.press_enter(None).await
    }

    /// Presses Enter in the open input box only while its value is still `expected`.
    pub async fn submit_value(&self, expected: &str) -> Result<(), NativeBlocker> {
        self.press_enter(Some(expected)).await
    }

    async fn press_enter(&self, expected: Option<&str>) -> Result<(), NativeBlocker> {
        let answer = self
            .write(
                self.inner.projections.press_enter,
                json!({ "value": expected }),
            )
            .await?;
        match view::status(&answer)? {
            "pressed" => Ok(()),
            _ => Err(unknown_status()),
        }
    }

    /// Presses Escape in the open quick input; `Ok(())` when none is open. When the in-page
    /// key leaves the widget open, the key is sent once more through CDP's input domain.
    pub async fn dismiss(&self) -> Result<(), NativeBlocker> {
        let answer = self
            .write(self.inner.projections.press_escape, json!({}))
            .await?;
        match view::status(&answer)? {
            "closed" => Ok(()),
            "pressed" if answer["open"].as_bool() == Some(false) => Ok(()),
            "pressed" => {
                for kind in ["keyDown", "keyUp"] {
                    let key = json!({
                        "type": kind, "key": "Escape", "code": "Escape",
                        "windowsVirtualKeyCode": 27, "nativeVirtualKeyCode": 27,
                    });
                    self.call("Input.dispatchKeyEvent", key, "key").await?;
                }
                Ok(())
            }
            _ => Err(unknown_status()),
        }
    }

    /// Runs `projection` with `args` (and the marker) in the bound page, binding first when
    /// needed. A marker that no longer matches, or any transport failure, unbinds.
    /// Runs a projection that acts on the page (brought to the front first, never retried).
    async fn write(&self, projection: Projection, args: Value) -> Result<Value, NativeBlocker> {
        self.run(projection, args, Access::Write).await
    }

    async fn run(
        &self,
        projection: Projection,
        mut args: Value,
        access: Access,
    ) -> Result<Value, NativeBlocker> {
        args["marker"] = Value::String(self.inner.marker.clone());
        let expression = projection.expression(&args);
        let limit = self.inner.config.call_timeout;
        let mut state = self.inner.state.lock().await;
        let mut first_attempt = true;
        loop {
            let reused = state.session.is_some();
            let retry_allowed = reused && first_attempt;
            first_attempt = false;
            if state.session.is_none() {
                let previous = state.last_target.take();
                let (session, _) = self.inner.connect(previous.as_deref()).await?;
                state.last_target = Some(session.target_id.clone());
                state.session = Some(session);
            }
            let Some(session) = state.session.as_mut() else {
                continue;
            };
            if access == Access::Write {
                let front = session
                    .connection
                    .call("Page.bringToFront", json!({}), limit, "bring_to_front")
                    .await;
                match front {
                    Ok(_) => {}
                    // Nothing was written yet: a dropped kept socket can be rebound and retried.
                    Err(CallError::Dropped) if retry_allowed => {
                        state.session = None;
                        continue;
                    }
                    Err(error) => {
                        state.session = None;
                        return Err(error.into());
                    }
                }
            }
            match session.connection.evaluate(expression.clone(), limit).await {
                Ok(answer) => {
                    if view::marker_state(&answer).ok() != Some(MarkerState::Ours) {
                        state.session = None;
                    }
                    return Ok(answer);
                }
                Err(CallError::Dropped) if retry_allowed && access == Access::Read => {
                    state.session = None;
                }
                Err(error) => {
                    state.session = None;
                    return Err(error.into());
                }
            }
        }
    }

    /// One CDP call on the bound page (no rebinding: it follows a projection that just ran).
    async fn call(
        &self,
        method: &str,
        params: Value,
        step: &'static str,
    ) -> Result<Value, NativeBlocker> {
        let mut state = self.inner.state.lock().await;
        let Some(session) = state.session.as_mut() else {
            return Err(NativeBlocker::Unreachable);
        };
        let result = session
            .connection
            .call(method, params, self.inner.config.call_timeout, step)
            .await;
        if result.is_err() {
            state.session = None;
        }
        result.map_err(NativeBlocker::from)
    }
}

impl Inner {
    /// The catalog, the page targets, the marker on each; the one page with ours.
    async fn connect(&self, previous: Option<&str>) -> Result<(Session, Binding), NativeBlocker> {
        if self.port == 0 || !marker_is_valid(&self.marker) {
            return Err(NativeBlocker::NotConfigured);
        }
        let limit = self.config.call_timeout;
        let targets = cdp::catalog(self.port, limit).await?;
        if let Some(previous) = previous
            && targets
                .iter()
                .any(|target| target.id == previous && target.kind != "page")
        {
            return Err(NativeBlocker::NotAPage);
        }
        let pages = cdp::page_targets(self.port, &targets)?;
        if pages.is_empty() {
            let any_page = targets.iter().any(|target| target.kind == "page");
            return Err(if any_page {
                NativeBlocker::MarkerMissing
            } else {
                NativeBlocker::NoPageTarget
            });
        }
        if pages.len() > self.config.max_page_targets {
            return Err(NativeBlocker::Protocol(format!(
                "the catalog lists more than {} page targets",
                self.config.max_page_targets
            )));
        }
        let expression = self
            .projections
            .marker
            .expression(&json!({ "marker": self.marker }));
        let mut ours = Vec::new();
        let mut stale = false;
        for page in &pages {
            let mut connection = Connection::open(self.port, page, limit).await?;
            let answer = connection
                .evaluate(expression.clone(), limit)
                .await
                .map_err(NativeBlocker::from)?;
            match view::marker_state(&answer)? {
                MarkerState::Ours => ours.push(Session {
                    target_id: page.id.clone(),
                    connection,
                }),
                MarkerState::Stale => {
                    stale = true;
                    connection.close().await;
                }
                MarkerState::Missing => connection.close().await,
            }
        }
        if ours.len() > 1 {
            for session in ours {
                session.connection.close().await;
            }
            return Err(NativeBlocker::AmbiguousWindow);
        }
        match ours.pop() {
            Some(session) => {
                let binding = Binding {
                    target_id: session.target_id.clone(),
                    pages_seen: pages.len(),
                };
                Ok((session, binding))
            }
            None if stale => Err(NativeBlocker::MarkerStale),
            None => Err(NativeBlocker::MarkerMissing),
        }
    }
}

fn unknown_status() -> NativeBlocker {
    NativeBlocker::Protocol("the page's projection answered with an unknown status".into())
}

fn chosen(answer: &Value) -> Result<Chosen, NativeBlocker> {
    match view::status(answer)? {
        "clicked" => Ok(Chosen::Clicked),
        "row_changed" => Ok(Chosen::RowChanged),
        _ => Err(unknown_status()),
    }
}

#[cfg(test)]
mod tests;
