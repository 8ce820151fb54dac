"""jupyter-mcp as a Python package.

The wheel carries the `jupyter-mcp` binary (so `jupyter mcp ...` works too), the
`jupyter-mcp-rs` binary that runs it (for `uvx jupyter-mcp-rs`; maturin allows no Python entry
points beside binaries), and a Jupyter Server extension, enabled when installed,
that serves MCP at `<base_url>mcp` on the server's live documents (see `serverextension`).
"""


def _jupyter_server_extension_points():
    return [{"module": "jupyter_mcp_rs.serverextension"}]
