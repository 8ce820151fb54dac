//! Where a provider's kernels run, as the tools show it.

/// Where kernels run. URLs never carry credentials (they are kept apart from URLs throughout).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum KernelPlace {
    /// On this machine.
    #[default]
    Local,
    /// On a Jupyter Server or Kernel Gateway at this URL.
    Server {
        /// The server's base URL.
        url: String,
    },
    /// On a JupyterHub user's server.
    JupyterHub {
        /// The hub's public URL.
        hub: String,
        /// The token's user, once the hub said it.
        user: Option<String>,
        /// The named server; empty for the default one.
        server: String,
        /// The user server's URL, once it ran.
        url: Option<String>,
    },
}
