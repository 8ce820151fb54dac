//! The driver against a fake debugging endpoint (no browser): binding, refusals, the mapping
//! of projection answers, rechecks and deadlines.

use std::sync::Arc;
use std::time::Duration;

use colab_setup::{PickerRow, PickerView};
use serde_json::{Value, json};

use super::*;
use crate::native::fake::{Address, Behaviour, FakeChromium, FakeTarget};

const MARKER: &str = "jmcp-0123456789abcdef0123456789abcdef";

fn driver(fake: &FakeChromium) -> NativeDriver {
    NativeDriver::new(fake.port, MARKER.to_owned())
}

/// A page answering the marker projection with `marker` and every other projection through
/// `others`, keyed by projection name.
fn page_with(
    id: &str,
    marker: &'static str,
    others: impl Fn(&str, &Value) -> Option<Value> + Send + Sync + 'static,
) -> FakeTarget {
    FakeTarget::page(id, move |expression| {
        let name = expression
            .strip_prefix("/*jmcp:")
            .and_then(|rest| rest.split_once("*/"))
            .map(|(name, _)| name)
            .unwrap_or_default();
        // The arguments are the JSON after the function's closing `})(`.
        let args = expression
            .rsplit_once("})(")
            .and_then(|(_, args)| args.strip_suffix(')'))
            .and_then(|args| serde_json::from_str::<Value>(args).ok())
            .unwrap_or(Value::Null);
        if args["marker"] != json!(MARKER) {
            return Some(json!({ "status": "marker", "marker": "stale" }));
        }
        if marker != "ours" || name == "marker" {
            return Some(
                json!({ "status": if marker == "ours" { "ok" } else { "marker" }, "marker": marker }),
            );
        }
        others(name, &args)
    })
}

fn ours(id: &str) -> FakeTarget {
    page_with(id, "ours", |_, _| {
        Some(json!({ "status": "ok", "marker": "ours", "kind": "closed" }))
    })
}

#[tokio::test]
async fn a_foreign_host_or_port_in_the_catalog_is_refused_without_connecting() {
    for address in [
        "ws://192.0.2.1:{port}/devtools/page/B",
        "ws://localhost:{port}/devtools/page/B",
        "ws://127.0.0.1:1/devtools/page/B",
    ] {
        let fake = FakeChromium::start(vec![
            ours("A"),
            ours("B").at(Address::Literal(address.into())),
        ])
        .await;
        assert_eq!(driver(&fake).bind().await, Err(NativeBlocker::ForeignHost));
        assert!(fake.record.upgrades().is_empty(), "{address}");
    }
}

#[tokio::test]
async fn a_redirected_catalog_is_not_followed() {
    let behaviour = Behaviour {
        redirect: Some("http://192.0.2.1:9222/json/list".into()),
        ..Behaviour::default()
    };
    let fake = FakeChromium::start_with(vec![ours("A")], behaviour).await;
    assert_eq!(driver(&fake).bind().await, Err(NativeBlocker::ForeignHost));
    assert!(fake.record.upgrades().is_empty());
    assert_eq!(
        NativeDriver::page_candidates(fake.port).await,
        Err(NativeBlocker::ForeignHost)
    );
}

#[tokio::test]
async fn targets_that_are_not_pages_are_never_candidates() {
    let fake = FakeChromium::start(vec![
        FakeTarget::other("SW", "service_worker"),
        FakeTarget::other("IF", "iframe"),
        FakeTarget::other("UI", "browser_ui"),
        FakeTarget::other("W", "worker"),
    ])
    .await;
    assert_eq!(driver(&fake).bind().await, Err(NativeBlocker::NoPageTarget));
    assert!(fake.record.upgrades().is_empty());
    assert_eq!(NativeDriver::page_candidates(fake.port).await, Ok(0));
}

#[tokio::test]
async fn the_one_page_with_our_marker_is_bound_among_others() {
    let fake = FakeChromium::start(vec![
        FakeTarget::other("SW", "service_worker"),
        page_with("OLD", "stale", |_, _| None),
        page_with("BLANK", "missing", |_, _| None),
        ours("MINE"),
        FakeTarget::other("UI", "browser_ui"),
    ])
    .await;
    let binding = driver(&fake).bind().await.unwrap();
    assert_eq!(
        binding,
        Binding {
            target_id: "MINE".into(),
            pages_seen: 3
        }
    );
    let mut upgraded = fake.record.upgrades();
    upgraded.sort();
    assert_eq!(upgraded, ["BLANK", "MINE", "OLD"]);
    // The binding only read the marker.
    assert_eq!(
        fake.record.methods(),
        ["Runtime.evaluate", "Runtime.evaluate", "Runtime.evaluate"]
    );
    assert_eq!(fake.record.evaluations("marker").len(), 3);
}

#[tokio::test]
async fn page_candidates_only_reads_the_catalog() {
    let fake = FakeChromium::start(vec![
        ours("A"),
        page_with("B", "stale", |_, _| None),
        FakeTarget::other("SW", "service_worker"),
    ])
    .await;
    assert_eq!(NativeDriver::page_candidates(fake.port).await, Ok(2));
    assert!(fake.record.upgrades().is_empty());
    assert!(fake.record.methods().is_empty());
}

#[tokio::test]
async fn a_stale_marker_is_refused() {
    let fake = FakeChromium::start(vec![page_with("OLD", "stale", |_, _| None)]).await;
    let driver = driver(&fake);
    assert_eq!(driver.bind().await, Err(NativeBlocker::MarkerStale));
    assert_eq!(driver.observe().await, Err(NativeBlocker::MarkerStale));
    assert_eq!(
        driver.choose_row("Colab").await,
        Err(NativeBlocker::MarkerStale)
    );
    // Nothing but marker reads reached the page.
    assert!(fake.record.evaluations("click_row").is_empty());
}

#[tokio::test]
async fn no_marker_at_all_is_missing() {
    let fake = FakeChromium::start(vec![
        page_with("A", "missing", |_, _| None),
        ours("B").at(Address::Absent),
    ])
    .await;
    assert_eq!(
        driver(&fake).bind().await,
        Err(NativeBlocker::MarkerMissing)
    );
    assert_eq!(fake.record.upgrades(), ["A"]);
}

#[tokio::test]
async fn two_pages_with_our_marker_are_ambiguous() {
    let fake = FakeChromium::start(vec![ours("A"), ours("B")]).await;
    let driver = driver(&fake);
    assert_eq!(driver.bind().await, Err(NativeBlocker::AmbiguousWindow));
    assert_eq!(driver.observe().await, Err(NativeBlocker::AmbiguousWindow));
}

#[tokio::test]
async fn a_missing_port_or_marker_is_not_configured() {
    let unconfigured = NativeDriver::new(0, MARKER.to_owned());
    assert_eq!(unconfigured.bind().await, Err(NativeBlocker::NotConfigured));
    assert_eq!(
        NativeDriver::page_candidates(0).await,
        Err(NativeBlocker::NotConfigured)
    );
    let fake = FakeChromium::start(vec![ours("A")]).await;
    for marker in ["", "jmcp-xyz", "jmcp-0123456789ABCDEF0123456789ABCDEF"] {
        let driver = NativeDriver::new(fake.port, marker.to_owned());
        assert_eq!(driver.bind().await, Err(NativeBlocker::NotConfigured));
    }
    assert_eq!(
        fake.record
            .catalog_requests
            .load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let driver = NativeDriver::new(port, MARKER.to_owned());
    assert_eq!(driver.observe().await, Err(NativeBlocker::Unreachable));
    assert_eq!(
        NativeDriver::page_candidates(port).await,
        Err(NativeBlocker::Unreachable)
    );
}

#[tokio::test]
async fn observe_maps_the_projection_to_a_picker_view() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, _| {
        (name == "observe").then(|| {
            json!({
                "status": "ok", "marker": "ours", "kind": "quick_pick",
                "title": "Select a Colab server type", "busy": false, "focused": true,
                "total": 3, "complete": true,
                "rows": [
                    { "label": "CPU", "enabled": true },
                    { "label": "GPU", "enabled": true },
                    { "label": "TPU", "enabled": false },
                ],
            })
        })
    })])
    .await;
    let driver = driver(&fake);
    // Bound lazily by the first call.
    let view = driver.observe().await.unwrap();
    assert_eq!(
        view,
        PickerView::QuickPick {
            title: "Select a Colab server type".into(),
            rows: vec![
                PickerRow::new("CPU"),
                PickerRow::new("GPU"),
                PickerRow {
                    label: "TPU".into(),
                    enabled: false
                },
            ],
            busy: false,
        }
    );
    let full = driver.observe_full().await.unwrap();
    assert!(full.complete && full.focused);
    // One binding served both reads; reads never bring the page to the front.
    assert_eq!(fake.record.upgrades(), ["A"]);
    assert!(!fake.record.called("Page.bringToFront"));
}

#[tokio::test]
async fn choose_row_clicks_only_what_the_page_confirms() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, args| {
        (name == "click_row").then(|| {
            if args["label"] == json!("CPU") {
                json!({ "status": "clicked", "marker": "ours" })
            } else {
                json!({ "status": "row_changed", "marker": "ours" })
            }
        })
    })])
    .await;
    let driver = driver(&fake);
    assert_eq!(driver.choose_row("CPU").await, Ok(Chosen::Clicked));
    assert_eq!(
        driver.choose_row("New Colab Server").await,
        Ok(Chosen::RowChanged)
    );
    let clicks = fake.record.evaluations("click_row");
    assert_eq!(clicks.len(), 2);
    assert!(clicks[0].contains(r#""label":"CPU""#));
    assert!(clicks[0].contains(MARKER));
    // Each write brought the bound page to the front first.
    let methods = fake.record.methods();
    assert_eq!(
        methods,
        [
            "Runtime.evaluate",
            "Page.bringToFront",
            "Runtime.evaluate",
            "Page.bringToFront",
            "Runtime.evaluate"
        ]
    );
}

#[tokio::test]
async fn choose_listed_sends_the_listing_and_maps_refusals() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, args| {
        (name == "click_listed").then(|| {
            if args["listing"] == json!(["Python 3 (ipykernel)", "R"])
                && args["position"] == json!(0)
            {
                json!({ "status": "clicked", "marker": "ours" })
            } else if args["listing"] == json!([]) {
                json!({ "status": "unexpected", "marker": "ours", "why": "not_a_quick_pick" })
            } else {
                json!({ "status": "row_changed", "marker": "ours" })
            }
        })
    })])
    .await;
    let driver = driver(&fake);
    let listing = vec!["Python 3 (ipykernel)".to_owned(), "R".to_owned()];
    assert_eq!(
        driver
            .choose_listed(0, "Python 3 (ipykernel)", &listing)
            .await,
        Ok(Chosen::Clicked)
    );
    assert_eq!(
        driver.choose_listed(1, "R", &listing[..1]).await,
        Ok(Chosen::RowChanged)
    );
    assert_eq!(
        driver.choose_listed(0, "R", &[]).await,
        Err(NativeBlocker::UnexpectedUi(
            "the quick input is an input box, not a quick pick".into()
        ))
    );
}

#[tokio::test]
async fn typing_submitting_and_dismissing_go_through_their_projections() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, args| match name {
        "set_input" if args["prompt_contains"] == json!("Colab GPU") => {
            Some(json!({ "status": "unexpected", "marker": "ours", "why": "prompt_changed" }))
        }
        "set_input" => Some(json!({ "status": "typed", "marker": "ours", "value": args["value"] })),
        "press_enter" if args["value"] == json!("stale") => {
            Some(json!({ "status": "unexpected", "marker": "ours", "why": "value_changed" }))
        }
        "press_enter" => Some(json!({ "status": "pressed", "marker": "ours" })),
        "press_escape" => Some(json!({ "status": "pressed", "marker": "ours", "open": true })),
        _ => None,
    })])
    .await;
    let driver = driver(&fake);
    assert_eq!(driver.type_text("m0123abcd").await.unwrap(), "m0123abcd");
    let guard = InputGuard {
        title: Some("Alias your server".into()),
        prompt_contains: Some("Colab GPU".into()),
    };
    assert_eq!(
        driver.type_text_guarded("m0123abcd", &guard).await,
        Err(NativeBlocker::UnexpectedUi(
            "the input box's prompt is not the expected one".into()
        ))
    );
    assert!(driver.type_text(&"x".repeat(201)).await.is_err());
    assert_eq!(driver.submit().await, Ok(()));
    assert_eq!(driver.submit_value("m0123abcd").await, Ok(()));
    assert!(matches!(
        driver.submit_value("stale").await,
        Err(NativeBlocker::UnexpectedUi(_))
    ));
    // The in-page Escape left the widget open: the key goes once more through CDP.
    assert_eq!(driver.dismiss().await, Ok(()));
    let methods = fake.record.methods();
    assert_eq!(
        &methods[methods.len() - 4..],
        [
            "Page.bringToFront",
            "Runtime.evaluate",
            "Input.dispatchKeyEvent",
            "Input.dispatchKeyEvent"
        ]
    );
    let typed = fake.record.evaluations("set_input");
    assert!(typed[1].contains(r#""title":"Alias your server""#));
}

#[tokio::test]
async fn dismiss_with_nothing_open_is_ok() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, _| {
        (name == "press_escape").then(|| json!({ "status": "closed", "marker": "ours" }))
    })])
    .await;
    assert_eq!(driver(&fake).dismiss().await, Ok(()));
    assert!(!fake.record.called("Input.dispatchKeyEvent"));
}

#[tokio::test]
async fn a_call_that_is_never_answered_times_out_and_unbinds() {
    let fake = FakeChromium::start(vec![page_with("A", "ours", |name, _| {
        (name == "press_escape").then(|| json!({ "status": "closed", "marker": "ours" }))
    })])
    .await;
    let config = NativeConfig {
        call_timeout: Duration::from_millis(300),
        ..NativeConfig::default()
    };
    let driver = NativeDriver::with_config(fake.port, MARKER.to_owned(), config);
    assert_eq!(
        driver.observe().await,
        Err(NativeBlocker::Timeout("evaluate"))
    );
    // The unanswered socket was dropped: the next call binds again.
    assert_eq!(driver.dismiss().await, Ok(()));
    assert_eq!(fake.record.upgrades(), ["A", "A"]);
}

#[tokio::test]
async fn a_dropped_socket_is_rebound_for_reads() {
    let behaviour = Behaviour {
        close_after_evaluations: Some(2),
        ..Behaviour::default()
    };
    let fake = FakeChromium::start_with(vec![ours("A")], behaviour).await;
    let driver = driver(&fake);
    assert_eq!(driver.bind().await.map(|binding| binding.pages_seen), Ok(1));
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));
    // The page closed the socket after that answer; the next read rebinds and succeeds.
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));
    assert_eq!(fake.record.upgrades(), ["A", "A"]);
}

#[tokio::test]
async fn a_marker_that_changes_after_binding_unbinds() {
    let state = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let replaced = state.clone();
    let fake = FakeChromium::start(vec![FakeTarget::page("A", move |expression| {
        let marker = if replaced.load(std::sync::atomic::Ordering::SeqCst) {
            "stale"
        } else {
            "ours"
        };
        if expression.starts_with("/*jmcp:marker*/") || marker != "ours" {
            return Some(json!({ "status": "marker", "marker": marker }));
        }
        Some(json!({ "status": "ok", "marker": "ours", "kind": "closed" }))
    })])
    .await;
    let driver = driver(&fake);
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));
    state.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        driver.choose_row("CPU").await,
        Err(NativeBlocker::MarkerStale)
    );
    // The stale session was dropped; binding again finds only the stale marker.
    assert_eq!(driver.observe().await, Err(NativeBlocker::MarkerStale));
    assert_eq!(fake.record.upgrades(), ["A", "A"]);
}

#[test]
fn every_blocker_has_a_stable_code_and_a_next_step() {
    let blockers = [
        NativeBlocker::NotConfigured,
        NativeBlocker::Unreachable,
        NativeBlocker::ForeignHost,
        NativeBlocker::NotAPage,
        NativeBlocker::NoPageTarget,
        NativeBlocker::MarkerMissing,
        NativeBlocker::MarkerStale,
        NativeBlocker::AmbiguousWindow,
        NativeBlocker::UnexpectedUi("no quick input is open".into()),
        NativeBlocker::Timeout("evaluate"),
        NativeBlocker::Protocol("x".into()),
    ];
    let mut codes: Vec<&str> = blockers.iter().map(NativeBlocker::code).collect();
    assert!(codes.iter().all(|code| code.starts_with("native_")));
    codes.sort();
    codes.dedup();
    assert_eq!(codes.len(), blockers.len());
    assert_eq!(NativeBlocker::MarkerStale.code(), "native_marker_stale");
    for blocker in &blockers {
        let sentence = blocker.to_string();
        assert!(
            sentence.contains(':') || sentence.contains(';'),
            "{sentence}"
        );
    }
}
