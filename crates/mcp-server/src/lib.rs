//! The MCP transports of jupyter-mcp.
//!
//! Layer 3 (adapter). Binds a [`mcp_contract::ToolDispatch`] to rmcp: Streamable HTTP on loopback
//! (with the DNS-rebinding defence and the token check in front of it) and stdio. It knows
//! nothing about notebooks, files or kernels.

pub mod handler;
pub mod http;
mod progress;
mod settle;
mod subscriptions;
mod tasks;

pub use handler::McpHandler;
pub use http::{
    HttpApp, HttpSecurity, TOKEN_ENV, bind_loopback, mcp_url, random_token, serve, token_from_env,
};

/// Serves MCP over stdin/stdout until the client closes the stream.
pub async fn serve_stdio(handler: McpHandler) -> std::io::Result<()> {
    use rmcp::ServiceExt;
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(())
}
