// A small Chrome DevTools Protocol client for the Colab e2e test's own moves in the workbench
// (reloading the window, running a command through the palette, reading the quick input). The
// extension's native driver (Rust) is what the test exercises; this is the test's independent
// hand, written against the same DOM facts (/work/notes/dom.md, code-server 4.139.1 / VS Code 1.139.1).
// Node 24: global fetch and WebSocket. Also a CLI for exploring by hand:
//   node cdp.js PORT snapshot | eval EXPR | key NAME | palette TEXT | click LABEL | type TEXT | enter | reload
'use strict';

const KEYS = {
  Enter: { code: 'Enter', keyCode: 13, text: '\r' },
  Escape: { code: 'Escape', keyCode: 27 },
  F1: { code: 'F1', keyCode: 112 },
  ArrowDown: { code: 'ArrowDown', keyCode: 40 },
};

/** The quick input as the workbench renders it: visibility, title, input, prompt, rows, busy. */
const SNAPSHOT = `(() => {
  const widget = document.querySelector('.quick-input-widget');
  if (!widget || widget.style.display === 'none') return { visible: false };
  const q = (selector) => widget.querySelector(selector);
  const shown = (element) => element && element.style.display !== 'none';
  const input = q('.quick-input-box input');
  const list = q('.quick-input-list');
  const message = q('.quick-input-message');
  const rows = shown(list) ? [...widget.querySelectorAll('.monaco-list-row')].map((row) => ({
    label: (row.querySelector('.label-name')?.textContent ?? '').trim(),
    description: (row.querySelector('.label-description')?.textContent ?? '').trim(),
    focused: row.classList.contains('focused'),
    index: Number(row.dataset.index),
    setSize: Number(row.getAttribute('aria-setsize')),
  })) : [];
  return {
    visible: true,
    title: shown(q('.quick-input-titlebar')) ? q('.quick-input-title').textContent.replace(/\\u00a0/g, ' ').trim() : '',
    placeholder: input?.placeholder ?? '',
    value: input?.value ?? '',
    inputFocused: document.activeElement === input,
    message: shown(message) ? message.textContent : '',
    list: shown(list),
    busy: q('.quick-input-progress')?.classList.contains('active') ?? false,
    rows,
  };
})()`;

class Page {
  static async connect(port, { urlIncludes = '' } = {}) {
    const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
    const pages = targets.filter((target) => target.type === 'page' && target.url.includes(urlIncludes));
    if (pages.length !== 1) throw new Error(`expected one page target, found ${pages.length}`);
    const page = new Page(pages[0]);
    await page.open();
    return page;
  }

  constructor(target) {
    this.target = target;
    this.nextId = 0;
    this.pending = new Map();
  }

  open() {
    return new Promise((resolve, reject) => {
      this.socket = new WebSocket(this.target.webSocketDebuggerUrl);
      this.socket.onopen = resolve;
      this.socket.onerror = () => reject(new Error('DevTools WebSocket failed'));
      this.socket.onclose = () => {
        for (const { reject: fail } of this.pending.values()) fail(new Error('DevTools WebSocket closed'));
        this.pending.clear();
      };
      this.socket.onmessage = (event) => {
        const message = JSON.parse(event.data);
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.error) waiter.reject(new Error(`${message.error.message}`));
        else waiter.resolve(message.result);
      };
    });
  }

  send(method, params = {}, timeoutMs = 10000) {
    this.nextId += 1;
    const id = this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} timed out`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (value) => (clearTimeout(timer), resolve(value)),
        reject: (error) => (clearTimeout(timer), reject(error)),
      });
      this.socket.send(JSON.stringify({ id, method, params }));
    });
  }

  async evaluate(expression) {
    const result = await this.send('Runtime.evaluate', { expression, returnByValue: true, awaitPromise: true });
    if (result.exceptionDetails) throw new Error(`page: ${result.exceptionDetails.exception?.description ?? result.exceptionDetails.text}`);
    return result.result.value;
  }

  async key(name, modifiers = 0) {
    const key = KEYS[name];
    const base = { key: name, code: key.code, windowsVirtualKeyCode: key.keyCode, nativeVirtualKeyCode: key.keyCode, modifiers };
    await this.send('Input.dispatchKeyEvent', { type: 'keyDown', ...base, ...(key.text ? { text: key.text } : {}) });
    await this.send('Input.dispatchKeyEvent', { type: 'keyUp', ...base });
  }

  snapshot() {
    return this.evaluate(SNAPSHOT);
  }

  /** Waits until `test(snapshot)` holds; returns that snapshot. */
  async waitFor(what, test, timeoutMs = 15000) {
    const deadline = Date.now() + timeoutMs;
    let last;
    while (Date.now() < deadline) {
      last = await this.snapshot();
      if (test(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    throw new Error(`timed out waiting for ${what}; last quick input: ${JSON.stringify(last)}`);
  }

  /** Sets the quick input's value the way typing does (value + an input event). */
  type(value) {
    return this.evaluate(`(() => {
      const input = document.querySelector('.quick-input-widget .quick-input-box input');
      input.value = ${JSON.stringify(value)};
      input.dispatchEvent(new Event('input', { bubbles: true }));
      return input.value;
    })()`);
  }

  /** Clicks the visible row whose label is exactly `label`. */
  click(label) {
    return this.evaluate(`(() => {
      const rows = [...document.querySelectorAll('.quick-input-widget .monaco-list-row')]
        .filter((row) => (row.querySelector('.label-name')?.textContent ?? '').trim() === ${JSON.stringify(label)});
      if (rows.length !== 1) return false;
      rows[0].click();
      return true;
    })()`);
  }

  /** Runs a command through the palette by its exact title ("Colab: Open Terminal"). */
  async runCommand(title) {
    await this.key('Escape');
    await this.key('F1');
    await this.waitFor('the command palette', (view) => view.visible && view.value.startsWith('>'));
    await this.type(`>${title}`);
    await this.waitFor(`the palette row ${title}`, (view) => view.rows.some((row) => row.label === title));
    if (!(await this.click(title))) throw new Error(`no single palette row ${title}`);
  }

  /** Opens a workspace file through Quick Open by its exact file name. */
  async openFile(name) {
    await this.runCommand('Go to File...');
    await this.waitFor('Quick Open', (view) => view.visible && view.placeholder.startsWith('Search files by name'));
    await this.type(name);
    await this.waitFor(`the file row ${name}`, (view) => view.rows.some((row) => row.label === name));
    if (!(await this.click(name))) throw new Error(`no single file row ${name}`);
  }

  /** Reloads the page (the workbench window) and waits for the load event. */
  async reload() {
    await this.send('Page.enable');
    const loaded = new Promise((resolve) => {
      const previous = this.socket.onmessage;
      this.socket.onmessage = (event) => {
        const message = JSON.parse(event.data);
        if (message.method === 'Page.loadEventFired') {
          this.socket.onmessage = previous;
          resolve();
        } else {
          previous(event);
        }
      };
    });
    await this.send('Page.reload', { ignoreCache: false });
    await loaded;
  }

  close() {
    this.socket.close();
  }
}

module.exports = { Page, SNAPSHOT };

if (require.main === module) {
  const [port, command, argument] = process.argv.slice(2);
  (async () => {
    const page = await Page.connect(port);
    let result;
    if (command === 'snapshot') result = await page.snapshot();
    else if (command === 'eval') result = await page.evaluate(argument);
    else if (command === 'key') result = await page.key(argument);
    else if (command === 'palette') result = await page.runCommand(argument);
    else if (command === 'open') result = await page.openFile(argument);
    else if (command === 'click') result = await page.click(argument);
    else if (command === 'type') result = await page.type(argument);
    else if (command === 'enter') result = await page.key('Enter');
    else if (command === 'reload') result = await page.reload();
    console.log(JSON.stringify(result, null, 1));
    page.close();
  })().catch((error) => {
    console.error(String(error.stack ?? error));
    process.exit(1);
  });
}
