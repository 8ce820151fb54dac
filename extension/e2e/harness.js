// What the extension's end-to-end checks (`cargo xtask e2e-vscode`) share: numbered steps
// printed as TAP, the summary and exit status, and an MCP client whose calls fail on a tool
// error.
'use strict';
const assert = require('node:assert/strict');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');

const counts = { passed: 0, failed: 0 };

/** Runs one named check; a failure is printed and ends the run. */
async function step(name, body) {
  const started = Date.now();
  try {
    await body();
    counts.passed += 1;
    console.log(`ok ${counts.passed + counts.failed} - ${name} (${Date.now() - started} ms)`);
  } catch (error) {
    counts.failed += 1;
    console.log(`not ok ${counts.passed + counts.failed} - ${name}\n  ${String(error && error.stack ? error.stack : error).split('\n').join('\n  ')}`);
    throw error;
  }
}

/** Runs `main`, prints the summary and exits with its status. */
function finish(main) {
  main()
    .catch((error) => {
      if (counts.failed === 0) {
        counts.failed += 1;
        console.log(`not ok - ${error && error.stack ? error.stack : error}`);
      }
    })
    .finally(() => {
      console.log(`${counts.passed} passed, ${counts.failed} failed`);
      // An aborted session may leave connections open: exit now rather than wait for them.
      process.exit(counts.failed === 0 ? 0 : 1);
    });
}

/** An MCP client named `name` on `url`, and `call`, which returns a tool's parsed answer and fails on a tool error. */
async function connect(url, name) {
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const call = async (tool, args) => {
    const result = await client.callTool({ name: tool, arguments: args });
    const body = JSON.parse(result.content[0].text);
    assert.ok(!result.isError, `${tool} failed: ${JSON.stringify(body)}`);
    return body;
  };
  return { client, call };
}

module.exports = { step, finish, connect };
