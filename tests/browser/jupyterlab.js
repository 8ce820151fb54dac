// JupyterLab in headless Chromium, for the end-to-end test of the JupyterLab host: opens a
// notebook as a person would and answers the test's commands, one JSON line each way.
//
//   node jupyterlab.js BASE_URL TOKEN NOTEBOOK_PATH CHROMIUM
//
// Prints {"ready": true} once the notebook and its kernel are up. Commands (stdin):
//   {"cmd": "run_first"}            click the first code cell and press Shift+Enter
//   {"cmd": "wait_cell", "source", "output", "screenshot"}
//                                    wait (60 s) for a cell whose editor shows `source`, whose
//                                    outputs show `output` and whose prompt shows its count;
//                                    save a screenshot
//   {"cmd": "close"}
// Every wait is Playwright's own wait on the DOM with a deadline.
const readline = require('readline');
const { chromium } = require('playwright-core');

const [base, token, notebookPath, executablePath] = process.argv.slice(2);
const panel = '.jp-NotebookPanel:not(.lm-mod-hidden)';

function answer(value) {
  process.stdout.write(JSON.stringify(value) + '\n');
}

async function main() {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const started = Date.now();
    const encoded = notebookPath.split('/').map(encodeURIComponent).join('/');
    await page.goto(`${base}lab/tree/${encoded}?reset&token=${encodeURIComponent(token)}`);
    await page.waitForSelector(`${panel} .jp-CodeCell .cm-content`, { timeout: 90000 });
    await page.waitForSelector(`${panel} .jp-Notebook-ExecutionIndicator[data-status="idle"]`, { timeout: 90000 });
    answer({ ready: true, ms: Date.now() - started });
    const lines = readline.createInterface({ input: process.stdin });
    for await (const line of lines) {
      const command = JSON.parse(line);
      try {
        if (command.cmd === 'close') {
          answer({ ok: true });
          break;
        } else if (command.cmd === 'run_first') {
          await page.click(`${panel} .jp-CodeCell .cm-content`);
          await page.keyboard.press('Shift+Enter');
          answer({ ok: true });
        } else if (command.cmd === 'wait_cell') {
          const found = await page.waitForFunction(({ panel, source, output }) => {
            for (const cell of document.querySelectorAll(`${panel} .jp-Cell`)) {
              const editor = cell.querySelector('.jp-InputArea-editor .cm-content');
              if (!editor || !editor.innerText.includes(source)) continue;
              const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')].map((o) => o.innerText);
              const prompt = cell.querySelector('.jp-InputPrompt');
              const promptText = prompt ? prompt.innerText : '';
              // Settled: the prompt shows the execution count ([3]:), not [*]: or [ ]:.
              if (outputs.some((text) => text.includes(output)) && /\[\d+\]/.test(promptText)) {
                return { prompt: promptText, outputs };
              }
            }
            return null;
          }, { panel, source: command.source, output: command.output }, { timeout: 60000 });
          const seen = await found.jsonValue();
          if (command.screenshot) {
            await page.screenshot({ path: command.screenshot, fullPage: true });
          }
          answer({ ok: true, ...seen });
        } else {
          answer({ ok: false, error: `unknown command ${command.cmd}` });
        }
      } catch (error) {
        answer({ ok: false, error: String(error) });
      }
    }
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  answer({ ok: false, error: String(error) });
  process.exit(1);
});
