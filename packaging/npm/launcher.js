#!/usr/bin/env node
// The `jupyter-mcp` command of the npm package jupyter-mcp-rs. The server is a native binary:
// npm installs the one package of `optionalDependencies` whose `os` and `cpu` fit this machine,
// and this launcher runs its binary with our arguments and stdio, so that MCP over stdin/stdout
// reaches it unchanged.
'use strict';

const { spawn } = require('node:child_process');

const manifest = require('../package.json');
const platformKey = `${process.platform}-${process.arch}`;
const platformPackage = `${manifest.name}-${platformKey}`;
const binaryName = process.platform === 'win32' ? 'jupyter-mcp.exe' : 'jupyter-mcp';
const supported = Object.keys(manifest.optionalDependencies || {}).map((name) =>
  name.slice(manifest.name.length + 1),
);

function fail(lines) {
  process.stderr.write(`jupyter-mcp-rs: ${lines.join('\n  ')}\n`);
  process.exit(1);
}

function findBinary() {
  try {
    return require.resolve(`${platformPackage}/bin/${binaryName}`);
  } catch {
    if (!supported.includes(platformKey)) {
      fail([
        `there is no jupyter-mcp binary for ${platformKey} in this package (it has ${supported.join(', ')}).`,
        'The Python package jupyter-mcp-rs (`uvx jupyter-mcp-rs`, `pip install jupyter-mcp-rs`) may have one,',
        'or build it from source: cargo build --release -p host-standalone.',
      ]);
    }
    fail([
      `the package ${platformPackage}, which holds the binary for ${platformKey}, is not installed.`,
      'npm skipped it: optional dependencies were left out (--omit=optional, --no-optional,',
      'npm_config_optional=false) or a lock file made on another platform was reused.',
      `Install it again with optional dependencies: npm install ${manifest.name} --include=optional`,
      `(or add ${platformPackage}@${manifest.version} yourself).`,
    ]);
  }
}

const binary = findBinary();
const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit', windowsHide: true });

// A client that stops the server signals this process: pass it on, then leave when the server has.
const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP'];
for (const signal of forwarded) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  });
}

child.on('error', (error) => {
  fail([`could not start ${binary}: ${error.message}`]);
});

child.on('exit', (code, signal) => {
  if (signal) {
    // End the same way, so that our parent sees what the server saw.
    for (const name of forwarded) {
      process.removeAllListeners(name);
    }
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
