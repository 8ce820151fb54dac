//! The projection table in a real headless Chromium, against a static page that mimics the
//! DOM of VS Code's quick input (the facts checked on code-server 4.139.1), through the real
//! DevTools endpoint: catalog, page WebSocket, `Page.bringToFront`, the scripts themselves.
//!
//! The page is a stand-in for the workbench (its widget is a few lines of script that accept a
//! clicked row, an Enter or an Escape the way VS Code's does); the real workbench is driven by
//! the e2e test. Chromium is `JUPYTER_MCP_CHROMIUM` or `chromium` on `PATH`; without it the
//! test fails saying how to install it (`cargo xtask ci` does).

use std::process::Stdio;
use std::time::Duration;

use colab_setup::{PickerRow, PickerView};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

use super::cdp::{self, Connection};
use super::{Chosen, InputGuard, NativeBlocker, NativeDriver};

const MARKER: &str = "jmcp-00112233445566778899aabbccddeeff";

const PAGE: &str = r#"<!doctype html>
<html><body>
<div class="statusbar-item right" id="jupyter-mcp.jupyter-mcp.jupyterMcp.native"
     aria-label="Jupyter MCP window MARKER" custom-hover="true">
  <a class="statusbar-item-label disabled" role="button" tabindex="-1"
     aria-label="Jupyter MCP window MARKER"><span class="codicon codicon-plug"></span> MCP</a>
</div>
<div class="quick-input-widget" style="display: none;">
  <div class="quick-input-titlebar" style="display: none;"><div class="quick-input-title">&nbsp;</div></div>
  <div class="quick-input-box"><div class="monaco-inputbox"><input class="input" type="text"></div></div>
  <div class="quick-input-message" id="quickInput_message" style="display: none;"></div>
  <div class="monaco-progress-container quick-input-progress done" aria-hidden="true"></div>
  <div class="quick-input-list"><div class="monaco-list" role="listbox" id="quickInput_list"></div></div>
</div>
<script>
  window.accepted = [];
  window.inputs = 0;
  const w = document.querySelector('.quick-input-widget');
  const input = w.querySelector('input');
  const list = w.querySelector('.quick-input-list');
  const listbox = w.querySelector('.monaco-list');
  const message = w.querySelector('.quick-input-message');
  const titlebar = w.querySelector('.quick-input-titlebar');
  const hide = () => { w.style.display = 'none'; };
  const open = (title) => {
    titlebar.style.display = title ? '' : 'none';
    w.querySelector('.quick-input-title').textContent = title || '\u00a0';
    w.style.display = '';
    input.focus();
  };
  input.addEventListener('input', () => { window.inputs++; });
  w.addEventListener('keydown', (e) => {
    if (e.keyCode === 13 && list.style.display === 'none') { window.accepted.push({ value: input.value }); hide(); }
    if (e.keyCode === 27) hide();
  });
  window.showPick = (title, placeholder, rows, total) => {
    input.value = ''; input.placeholder = placeholder;
    message.style.display = 'none';
    list.style.display = '';
    listbox.textContent = '';
    rows.forEach((row, index) => {
      const el = document.createElement('div');
      el.className = 'monaco-list-row' + (index === 0 ? ' focused' : '');
      el.setAttribute('role', 'option');
      el.setAttribute('data-index', String(index));
      el.setAttribute('aria-setsize', String(total || rows.length));
      el.setAttribute('aria-label', row.label + ', description');
      if (row.disabled) el.setAttribute('aria-disabled', 'true');
      el.innerHTML = '<div class="quick-input-list-entry"><div class="monaco-icon-label">'
        + '<span class="label-name"></span><span class="label-description">description</span></div></div>';
      const name = el.querySelector('.label-name');
      if (row.icon) { name.innerHTML = '<span class="codicon codicon-gear"></span> '; }
      name.appendChild(document.createTextNode(row.label));
      el.addEventListener('click', () => { window.accepted.push({ row: row.label }); hide(); });
      // Rows are positioned, so the DOM order need not be the list order.
      listbox.insertBefore(el, listbox.firstChild);
    });
    open(title);
  };
  window.showInput = (title, prompt, value) => {
    list.style.display = 'none';
    input.value = value; input.placeholder = '';
    message.textContent = prompt + " (Press 'Enter' to confirm or 'Escape' to cancel)";
    message.style.display = '';
    open(title);
  };
</script>
</body></html>"#;

/// The Chromium binary, when there is one.
fn chromium() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("JUPYTER_MCP_CHROMIUM") {
        return Some(path.into());
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|folder| folder.join("chromium"))
        .find(|candidate| candidate.exists())
}

/// Evaluates test-only script in the page (the page's own helpers, not the driver's table).
async fn script(page: &mut Connection, expression: &str) -> Value {
    page.evaluate(expression.to_owned(), Duration::from_secs(10))
        .await
        .unwrap_or_else(|error| panic!("{expression}: {error:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projections_drive_a_quick_input_in_real_chromium() {
    let binary = chromium().expect(
        "this test needs Chromium: apt-get install chromium (or set JUPYTER_MCP_CHROMIUM); \
         `cargo xtask ci` installs it",
    );
    let profile = tempfile::tempdir().unwrap();
    let html = profile.path().join("quick-input.html");
    std::fs::write(&html, PAGE.replace("MARKER", MARKER)).unwrap();
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.path().join("profile").display()
        ))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start chromium");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let port: u16 = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.split("ws://127.0.0.1:").nth(1) {
                return rest.split('/').next().unwrap().parse().unwrap();
            }
        }
        panic!("chromium exited before listening");
    })
    .await
    .expect("chromium listens within 60 s");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    // The page target, once the file has loaded (the catalog lists it by its file URL).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let target = loop {
        let targets = cdp::catalog(port, Duration::from_secs(5)).await.unwrap();
        let pages = cdp::page_targets(port, &targets).unwrap();
        if let Some(page) = pages.into_iter().next() {
            let mut probe = Connection::open(port, &page, Duration::from_secs(5))
                .await
                .unwrap();
            let ready = script(&mut probe, "typeof window.showPick === 'function'").await;
            if ready == json!(true) {
                break page;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the page did not load"
        );
        // Nothing announces that a file page has loaded to a client not yet attached: poll.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut page = Connection::open(port, &target, Duration::from_secs(5))
        .await
        .unwrap();

    let driver = NativeDriver::new(port, MARKER.to_owned());
    let binding = driver.bind().await.unwrap();
    assert_eq!(
        (binding.target_id.as_str(), binding.pages_seen),
        (target.id.as_str(), 1)
    );
    assert_eq!(NativeDriver::page_candidates(port).await, Ok(1));
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));
    assert_eq!(driver.dismiss().await, Ok(()));

    // A quick pick: icons removed, DOM order ignored, a disabled row, placeholder as title.
    script(
        &mut page,
        r#"showPick('', "Change kernel for 'analysis.ipynb'", [
            { label: 'Install suggested', icon: true }, { label: 'CPU' },
            { label: 'GPU', disabled: true }, { label: 'Select Another Kernel\u2026' }])"#,
    )
    .await;
    let rows = vec![
        PickerRow::new("Install suggested"),
        PickerRow::new("CPU"),
        PickerRow {
            label: "GPU".into(),
            enabled: false,
        },
        PickerRow::new("Select Another Kernel…"),
    ];
    let observation = driver.observe_full().await.unwrap();
    assert_eq!(
        observation.view,
        PickerView::QuickPick {
            title: "Change kernel for 'analysis.ipynb'".into(),
            rows: rows.clone(),
            busy: false,
        }
    );
    assert!(observation.complete && observation.focused);
    assert_eq!(driver.choose_row("TPU").await, Ok(Chosen::RowChanged));
    assert_eq!(driver.choose_row("GPU").await, Ok(Chosen::RowChanged));
    let listing: Vec<String> = rows.iter().map(|row| row.label.clone()).collect();
    assert_eq!(
        driver.choose_listed(1, "CPU", &listing[..3]).await,
        Ok(Chosen::RowChanged)
    );
    assert_eq!(script(&mut page, "window.accepted").await, json!([]));
    assert_eq!(
        driver.choose_row("Select Another Kernel...").await,
        Ok(Chosen::Clicked)
    );
    assert_eq!(
        script(&mut page, "window.accepted").await,
        json!([{ "row": "Select Another Kernel…" }])
    );
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));

    script(
        &mut page,
        "showPick('Select a Colab server type', 'x', [{ label: 'CPU' }, { label: 'GPU' }])",
    )
    .await;
    let listing = vec!["CPU".to_owned(), "GPU".to_owned()];
    assert_eq!(
        driver.choose_listed(0, "CPU", &listing).await,
        Ok(Chosen::Clicked)
    );
    // A list with rows out of view (virtualised) is not acted on.
    script(
        &mut page,
        "showPick('Colab', 'x', [{ label: 'm0123abcd' }], 40)",
    )
    .await;
    assert_eq!(
        driver.choose_row("m0123abcd").await,
        Err(NativeBlocker::UnexpectedUi(
            "the quick pick does not show all its rows".into()
        ))
    );
    // Busy: the list may still change.
    script(
        &mut page,
        "document.querySelector('.quick-input-progress').className = 'monaco-progress-container quick-input-progress active infinite'; document.querySelector('.quick-input-progress').removeAttribute('aria-hidden')",
    )
    .await;
    let PickerView::QuickPick { busy, .. } = driver.observe().await.unwrap() else {
        panic!("not a quick pick");
    };
    assert!(busy);
    assert_eq!(driver.dismiss().await, Ok(()));
    assert_eq!(driver.observe().await, Ok(PickerView::Closed));

    // The alias box.
    script(
        &mut page,
        "showInput('Alias your server', 'Provide a local alias for the new Colab CPU server', 'Colab CPU')",
    )
    .await;
    assert_eq!(
        driver.observe().await,
        Ok(PickerView::InputBox {
            title: "Alias your server".into(),
            prompt: "Provide a local alias for the new Colab CPU server".into(),
            value: "Colab CPU".into(),
        })
    );
    assert!(matches!(
        driver.choose_row("CPU").await,
        Err(NativeBlocker::UnexpectedUi(_))
    ));
    let wrong = InputGuard {
        title: None,
        prompt_contains: Some("Colab GPU".into()),
    };
    assert!(matches!(
        driver.type_text_guarded("m0123abcd", &wrong).await,
        Err(NativeBlocker::UnexpectedUi(_))
    ));
    assert_eq!(
        script(
            &mut page,
            "[window.inputs, document.querySelector('input').value]"
        )
        .await,
        json!([0, "Colab CPU"])
    );
    let guard = InputGuard {
        title: Some("Alias your server".into()),
        prompt_contains: Some("Colab CPU".into()),
    };
    assert_eq!(
        driver.type_text_guarded("m0123abcd", &guard).await,
        Ok("m0123abcd".into())
    );
    assert_eq!(script(&mut page, "window.inputs").await, json!(1));
    assert!(matches!(
        driver.submit_value("m9999abcd").await,
        Err(NativeBlocker::UnexpectedUi(_))
    ));
    script(
        &mut page,
        "document.querySelector('.monaco-inputbox').classList.add('error')",
    )
    .await;
    assert_eq!(
        driver.submit().await,
        Err(NativeBlocker::UnexpectedUi(
            "the input box shows a validation message".into()
        ))
    );
    script(
        &mut page,
        "document.querySelector('.monaco-inputbox').classList.remove('error')",
    )
    .await;
    assert_eq!(driver.submit_value("m0123abcd").await, Ok(()));
    assert_eq!(
        script(&mut page, "window.accepted.slice(-1)").await,
        json!([{ "value": "m0123abcd" }])
    );

    // Another activation's marker: nothing more is done in that page.
    script(
        &mut page,
        "showPick('t', 'x', [{ label: 'CPU' }]); document.querySelector('.statusbar-item').setAttribute('aria-label', 'Jupyter MCP window jmcp-ffffffffffffffffffffffffffffffff')",
    )
    .await;
    assert_eq!(
        driver.choose_row("CPU").await,
        Err(NativeBlocker::MarkerStale)
    );
    assert_eq!(driver.dismiss().await, Err(NativeBlocker::MarkerStale));
    assert_eq!(script(&mut page, "window.accepted.length").await, json!(3));

    page.close().await;
    let _ = child.kill().await;
}
