// The native module (crates/host-napi), typed by the declarations napi generates.
import * as path from 'path';
import type * as Native from '../native/index';

export type { Native };

export function loadNative(): typeof Native {
  const modulePath = process.env.JUPYTER_MCP_NATIVE_MODULE ?? path.join(__dirname, '..', 'native', 'jupyter-mcp.node');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(modulePath) as typeof Native;
}
