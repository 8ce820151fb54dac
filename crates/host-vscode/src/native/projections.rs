//! The DOM projections: the only page scripts the native driver runs, in one table.
//!
//! Each entry is a JavaScript function expression of one argument (a JSON object built by the
//! driver) that runs synchronously inside the workbench page through `Runtime.evaluate` with
//! `returnByValue: true`. Every entry begins with the same prelude: the output limits, the
//! marker check and the readers of VS Code's quick input. A projection that writes (clicks a
//! row, sets the input, presses a key) rechecks, in that same synchronous run, the marker, that
//! the widget is visible and has focus, and the row label or input state it is about to act on;
//! when anything differs it does nothing and says why with a fixed code.
//!
//! Checked against code-server 4.139.1 (VS Code 1.139.1, commit
//! `53c2f3253bcf32886706fc023e794bbeb253c90f`) in headless Chromium 156; the DOM facts are those
//! of `.quick-input-widget` and the status bar item that carries the window marker. When a
//! VS Code release moves these classes, this table is the one place to update.

use serde_json::Value;

/// The most rows a projection reports.
pub const MAX_ROWS: usize = 64;

/// The most characters (Unicode code points) of any string a projection reports.
pub const MAX_CHARS: usize = 200;

/// The aria-label prefix of the status bar item that carries a window's marker.
pub const MARKER_LABEL_PREFIX: &str = "Jupyter MCP window ";

/// One page script of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Projection {
    /// Its name, also written into the evaluated expression as a leading comment.
    pub name: &'static str,
    /// Whether it changes the page (then it rechecks focus and state before acting).
    pub writes: bool,
    /// The function expression.
    pub source: &'static str,
}

impl Projection {
    /// The expression evaluated in the page: this projection applied to `args`.
    ///
    /// `args` is serialised as JSON, which is a valid JavaScript literal, so no page text or
    /// caller text is ever spliced into the script itself.
    pub fn expression(&self, args: &Value) -> String {
        format!("/*jmcp:{}*/({})({})", self.name, self.source, args)
    }
}

/// The table of projections for one VS Code version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Projections {
    /// The version the table was checked against.
    pub checked_against: &'static str,
    /// Reads only the marker state (binding).
    pub marker: Projection,
    /// Reads the open quick pick, input box or dialog.
    pub observe: Projection,
    /// Clicks the one enabled row with a label.
    pub click_row: Projection,
    /// Clicks the row at a position after checking every visible label.
    pub click_listed: Projection,
    /// Sets the input box's value and reads it back.
    pub set_input: Projection,
    /// Presses Enter in the open input box.
    pub press_enter: Projection,
    /// Presses Escape in the open quick input.
    pub press_escape: Projection,
}

/// The prelude every projection starts with (`a` is the argument object).
///
/// Status codes returned by writes: `marker` (with `marker`), `unexpected` (with a fixed `why`
/// code), `row_changed`, and the success codes of each entry.
macro_rules! prelude {
    () => {
        r#"
  const MAX_ROWS = 64;
  const MAX_CHARS = 200;
  const PREFIX = 'Jupyter MCP window jmcp-';
  const bound = (s) => Array.from(String(s == null ? '' : s)).slice(0, MAX_CHARS).join('');
  const cut = (s) => bound(String(s == null ? '' : s).replace(/\s+/g, ' ').trim());
  const shown = (el) => !!el && el.isConnected && el.style.display !== 'none'
    && getComputedStyle(el).display !== 'none';
  const markerState = () => {
    const items = document.querySelectorAll('.statusbar-item[aria-label^="' + PREFIX + '"]');
    if (items.length === 0) return 'missing';
    if (items.length === 1 && items[0].getAttribute('aria-label') === 'Jupyter MCP window ' + a.marker) return 'ours';
    return 'stale';
  };
  const dialog = () => {
    const box = document.querySelector('.monaco-dialog-box');
    return shown(box) ? box : null;
  };
  const widget = () => {
    const w = document.querySelector('.quick-input-widget');
    return shown(w) ? w : null;
  };
  const inputOf = (w) => w.querySelector('.quick-input-box input');
  const busyOf = (w) => {
    const p = w.querySelector('.quick-input-progress');
    return !!p && p.classList.contains('active') && p.getAttribute('aria-hidden') !== 'true';
  };
  const focusedIn = (w) => document.hasFocus() && w.contains(document.activeElement);
  const titleOf = (w) => {
    const bar = w.querySelector('.quick-input-titlebar');
    const t = w.querySelector('.quick-input-title');
    const title = bar && shown(bar) && t ? cut(t.textContent) : '';
    if (title) return title;
    const i = inputOf(w);
    return i ? cut(i.getAttribute('placeholder')) : '';
  };
  const promptOf = (w) => {
    const m = w.querySelector('.quick-input-message');
    return shown(m) ? cut(m.textContent) : '';
  };
  const labelOf = (row) => {
    const name = row.querySelector('.label-name');
    if (!name) return '';
    const copy = name.cloneNode(true);
    copy.querySelectorAll('.codicon').forEach((icon) => icon.remove());
    return cut(copy.textContent);
  };
  const enabledOf = (row) => row.getAttribute('aria-disabled') !== 'true' && !row.classList.contains('disabled');
  const rowsOf = (w) => {
    const list = w.querySelector('.quick-input-list');
    if (!shown(list)) return null;
    const els = Array.from(list.querySelectorAll('.monaco-list-row')).filter(shown);
    els.sort((x, y) => Number(x.getAttribute('data-index')) - Number(y.getAttribute('data-index')));
    const size = els.length ? Number(els[0].getAttribute('aria-setsize')) : 0;
    const total = Number.isFinite(size) && size > els.length ? size : els.length;
    return { els, total, complete: total === els.length };
  };
  const same = (seen, want) => seen === want || seen.replace(/\u2026/g, '...') === want;
  const m = markerState();
  if (m !== 'ours') return { status: 'marker', marker: m };
"#
    };
}

/// The guards every write runs first: no dialog, and a quick input open.
macro_rules! open_widget_guard {
    () => {
        r#"
  if (dialog()) return { status: 'unexpected', why: 'dialog_open' };
  const w = widget();
  if (!w) return { status: 'unexpected', why: 'closed' };"#
    };
}

/// The guards every quick-pick write runs after the prelude: no dialog, a visible quick pick
/// (not an input box) with focus, every row rendered.
macro_rules! pick_guard {
    () => {
        concat!(
            open_widget_guard!(),
            r#"
  const r = rowsOf(w);
  if (!r) return { status: 'unexpected', why: 'not_a_quick_pick' };
  if (!focusedIn(w)) return { status: 'unexpected', why: 'not_focused' };
  if (busyOf(w)) return { status: 'row_changed' };
  if (!r.complete) return { status: 'unexpected', why: 'rows_incomplete' };
"#
        )
    };
}

/// The guards every input-box write runs after the prelude.
macro_rules! input_guard {
    () => {
        concat!(
            open_widget_guard!(),
            r#"
  if (rowsOf(w)) return { status: 'unexpected', why: 'not_an_input_box' };
  const i = inputOf(w);
  if (!i || i.disabled) return { status: 'unexpected', why: 'no_input' };
  if (i.type === 'password') return { status: 'unexpected', why: 'password_box' };
  if (!focusedIn(w)) return { status: 'unexpected', why: 'not_focused' };
  if (a.title != null && titleOf(w) !== a.title) return { status: 'unexpected', why: 'title_changed' };
  if (a.prompt_contains != null && !promptOf(w).includes(a.prompt_contains)) return { status: 'unexpected', why: 'prompt_changed' };
"#
        )
    };
}

/// A projection's whole source: the prelude, then `body` (the guards and the entry's own
/// statements), wrapped so that every answer carries the marker state whichever path the body
/// returned by.
macro_rules! projection_source {
    ($($part:expr),+ $(,)?) => {
        concat!(
            "(a) => {",
            prelude!(),
            "\n  const body = () => {",
            $($part,)+
            "\n  };\n  return Object.assign(body(), { marker: m });\n}"
        )
    };
}

/// The projections checked against code-server 4.139.1 (VS Code 1.139.1).
pub const CODE_SERVER_4_139_1: Projections = Projections {
    checked_against: "code-server 4.139.1 (VS Code 1.139.1, 53c2f3253bcf32886706fc023e794bbeb253c90f)",
    marker: Projection {
        name: "marker",
        writes: false,
        source: projection_source!(
            r#"
  return { status: 'ok', marker: m };"#
        ),
    },
    observe: Projection {
        name: "observe",
        writes: false,
        source: projection_source!(
            r#"
  const d = dialog();
  if (d) {
    const text = d.querySelector('.dialog-message-text');
    return { status: 'ok', marker: m, kind: 'dialog', message: cut(text ? text.textContent : d.textContent) };
  }
  const w = widget();
  if (!w) return { status: 'ok', marker: m, kind: 'closed' };
  const r = rowsOf(w);
  const base = { status: 'ok', marker: m, title: titleOf(w), busy: busyOf(w), focused: focusedIn(w) };
  if (r) {
    const rows = r.els.slice(0, MAX_ROWS).map((row) => ({ label: labelOf(row), enabled: enabledOf(row) }));
    return Object.assign(base, { kind: 'quick_pick', rows, total: r.total, complete: r.complete && r.els.length <= MAX_ROWS });
  }
  const i = inputOf(w);
  return Object.assign(base, {
    kind: 'input_box',
    prompt: promptOf(w),
    value: i ? bound(i.value) : '',
    password: !!i && i.type === 'password',
  });"#
        ),
    },
    click_row: Projection {
        name: "click_row",
        writes: true,
        source: projection_source!(
            pick_guard!(),
            r#"
  const hits = r.els.filter((row) => same(labelOf(row), a.label));
  if (hits.length !== 1 || !enabledOf(hits[0])) return { status: 'row_changed' };
  hits[0].click();
  return { status: 'clicked' };"#
        ),
    },
    click_listed: Projection {
        name: "click_listed",
        writes: true,
        source: projection_source!(
            pick_guard!(),
            r#"
  const labels = r.els.map(labelOf);
  if (labels.length > MAX_ROWS || labels.length !== a.listing.length) return { status: 'row_changed' };
  for (let n = 0; n < labels.length; n++) {
    if (labels[n] !== a.listing[n]) return { status: 'row_changed' };
  }
  const row = r.els[a.position];
  if (!row || labels[a.position] !== a.label || !enabledOf(row)) return { status: 'row_changed' };
  row.click();
  return { status: 'clicked' };"#
        ),
    },
    set_input: Projection {
        name: "set_input",
        writes: true,
        source: projection_source!(
            input_guard!(),
            r#"
  i.value = a.value;
  i.dispatchEvent(new Event('input', { bubbles: true }));
  return { status: 'typed', value: bound(i.value) };"#
        ),
    },
    press_enter: Projection {
        name: "press_enter",
        writes: true,
        source: projection_source!(
            input_guard!(),
            r#"
  if (a.value != null && i.value !== a.value) return { status: 'unexpected', why: 'value_changed' };
  // VS Code ignores Enter while the box shows a validation error.
  if (w.querySelector('.monaco-inputbox.error')) return { status: 'unexpected', why: 'validation_error' };
  i.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', keyCode: 13, which: 13, bubbles: true, cancelable: true }));
  return { status: 'pressed' };"#
        ),
    },
    press_escape: Projection {
        name: "press_escape",
        writes: true,
        source: projection_source!(
            r#"
  const w = widget();
  if (!w) return { status: 'closed' };
  const target = inputOf(w) || w;
  target.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', code: 'Escape', keyCode: 27, which: 27, bubbles: true, cancelable: true }));
  return { status: 'pressed', open: !!widget() };"#
        ),
    },
};

impl Projections {
    /// Every entry, for checks over the whole table.
    pub fn all(&self) -> [Projection; 7] {
        [
            self.marker,
            self.observe,
            self.click_row,
            self.click_listed,
            self.set_input,
            self.press_enter,
            self.press_escape,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `(`, `[`, `{` balance outside string literals, comments and regex literals we use.
    fn delimiters_balance(source: &str) -> Result<(), String> {
        let mut stack = Vec::new();
        let mut chars = source.chars().peekable();
        let mut previous_significant = ' ';
        while let Some(c) = chars.next() {
            match c {
                '\'' | '"' | '`' => {
                    let quote = c;
                    loop {
                        match chars.next() {
                            Some('\\') => {
                                chars.next();
                            }
                            Some(inner) if inner == quote => break,
                            Some('\n') if quote != '`' => return Err("newline in string".into()),
                            Some(_) => {}
                            None => return Err("unterminated string".into()),
                        }
                    }
                }
                // A regex literal follows `(` or `,` or `=` in our scripts (e.g. `replace(/\s+/g`).
                '/' if matches!(previous_significant, '(' | ',' | '=') => {
                    if chars.peek() == Some(&'*') {
                        return Err("comment where a regex was expected".into());
                    }
                    loop {
                        match chars.next() {
                            Some('\\') => {
                                chars.next();
                            }
                            Some('/') => break,
                            Some('\n') | None => return Err("unterminated regex".into()),
                            Some(_) => {}
                        }
                    }
                }
                '(' | '[' | '{' => stack.push(c),
                ')' | ']' | '}' => {
                    let open = stack.pop().ok_or(format!("unmatched {c}"))?;
                    let expected = match open {
                        '(' => ')',
                        '[' => ']',
                        _ => '}',
                    };
                    if c != expected {
                        return Err(format!("{open} closed by {c}"));
                    }
                }
                _ => {}
            }
            if !c.is_whitespace() {
                previous_significant = c;
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn every_projection_is_a_balanced_function_of_one_argument() {
        for projection in CODE_SERVER_4_139_1.all() {
            assert!(
                projection.source.starts_with("(a) => {") && projection.source.ends_with('}'),
                "{}",
                projection.name
            );
            delimiters_balance(projection.source)
                .unwrap_or_else(|error| panic!("{}: {error}", projection.name));
        }
    }

    #[test]
    fn every_projection_embeds_the_output_limits_and_the_marker_check() {
        let rows = format!("const MAX_ROWS = {MAX_ROWS};");
        let chars = format!("const MAX_CHARS = {MAX_CHARS};");
        let prefix = format!("'{MARKER_LABEL_PREFIX}jmcp-'");
        for projection in CODE_SERVER_4_139_1.all() {
            let source = projection.source;
            assert!(source.contains(&rows), "{}", projection.name);
            assert!(source.contains(&chars), "{}", projection.name);
            assert!(source.contains(&prefix), "{}", projection.name);
            assert!(
                source.contains("if (m !== 'ours') return { status: 'marker', marker: m };"),
                "{}",
                projection.name
            );
            // Every answer carries the marker state, whichever path the body returned by.
            assert!(
                source.ends_with("return Object.assign(body(), { marker: m });\n}"),
                "{}",
                projection.name
            );
        }
        // Every string the observation reports goes through `cut` or `bound`; the rows through
        // the row limit.
        let observe = CODE_SERVER_4_139_1.observe.source;
        assert!(observe.contains("r.els.slice(0, MAX_ROWS)"));
        assert!(observe.contains("value: i ? bound(i.value) : ''"));
        assert!(observe.contains("message: cut("));
    }

    #[test]
    fn writes_recheck_focus_and_state_before_acting() {
        let table = CODE_SERVER_4_139_1;
        for projection in [table.click_row, table.click_listed] {
            let source = projection.source;
            let guard = source.find("if (!focusedIn(w))").expect("focus check");
            let act = source.find(".click()").expect("click");
            assert!(guard < act, "{}", projection.name);
            let label_check = source.find("a.label").expect("label check");
            assert!(label_check < act, "{}", projection.name);
            assert!(projection.writes);
        }
        for projection in [table.set_input, table.press_enter] {
            let source = projection.source;
            let guard = source.find("if (!focusedIn(w))").expect("focus check");
            let act = source
                .find("i.value = a.value")
                .or_else(|| source.find("dispatchEvent"))
                .expect("write");
            assert!(guard < act, "{}", projection.name);
        }
        assert!(!table.marker.writes && !table.observe.writes);
        for projection in [table.marker, table.observe] {
            for write in [".click()", "dispatchEvent", ".value ="] {
                assert!(
                    !projection.source.contains(write),
                    "{} {write}",
                    projection.name
                );
            }
        }
    }

    #[test]
    fn arguments_are_passed_as_json_never_spliced() {
        let args = serde_json::json!({ "marker": "jmcp-x", "label": "'); alert(1); ('" });
        let expression = CODE_SERVER_4_139_1.click_row.expression(&args);
        assert!(expression.starts_with("/*jmcp:click_row*/((a) => {"));
        assert!(expression.ends_with(&format!("}})({args})")));
        assert!(expression.contains(r#""label":"'); alert(1); ('""#));
    }
}
