//! `jupyter-mcp`: the standalone MCP server for Jupyter notebooks.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use host_standalone::snapshots::SnapshotStore;
use host_standalone::{Auth, KernelServer, ServeConfig, Transport};

#[derive(Debug, Parser)]
#[command(
    name = "jupyter-mcp",
    version,
    about = "An MCP server for Jupyter notebooks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the notebooks under a folder.
    Serve {
        /// The folder whose .ipynb files are served (nothing outside it is reachable).
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// HTTP port on 127.0.0.1 (0 picks a free port).
        #[arg(long, default_value_t = 51303)]
        port: u16,
        /// Speak MCP over stdin/stdout instead of HTTP.
        #[arg(long, conflicts_with = "port")]
        stdio: bool,
        /// Where undo snapshots are kept (default: the user's cache folder).
        #[arg(long, env = "JUPYTER_MCP_CACHE_DIR")]
        cache_dir: Option<PathBuf>,
        /// Serve documents only: no kernels, no execution tools.
        #[arg(long)]
        no_kernels: bool,
        /// Shut a notebook's kernel down after this many idle seconds (0: never).
        #[arg(long, default_value_t = 3600)]
        kernel_idle_ttl: u64,
        /// Read the HTTP token from this file (default: a random token made at start, or
        /// JUPYTER_MCP_TOKEN). Never pass a token on the command line: it shows in process lists.
        #[arg(long, conflicts_with = "no_auth")]
        token_file: Option<PathBuf>,
        /// Where the servers sharing a port keep their private files (the broker secret and the
        /// shared access token). Default: $XDG_RUNTIME_DIR/jupyter-mcp, else the cache folder.
        #[arg(long, env = "JUPYTER_MCP_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
        /// Run kernels on this Jupyter Server or Kernel Gateway (http://host:port/base/)
        /// instead of locally. Its token comes from --kernel-server-token-file or
        /// JUPYTER_MCP_KERNEL_SERVER_TOKEN, never from the URL.
        #[arg(long, value_name = "URL", conflicts_with = "no_kernels")]
        kernel_server: Option<String>,
        /// Read the kernel server's (or the --jupyter server's) token from this file.
        #[arg(long, value_name = "PATH")]
        kernel_server_token_file: Option<PathBuf>,
        /// Work alongside JupyterLab: serve the notebooks of this Jupyter Server
        /// (http://host:port/base/, with jupyter-collaboration) live in their shared documents,
        /// on the kernels their JupyterLab tabs use. Its token comes from
        /// --kernel-server-token-file or JUPYTER_MCP_KERNEL_SERVER_TOKEN; --root is then the
        /// folder file transfers read and write.
        #[arg(long, value_name = "URL", conflicts_with = "kernel_server")]
        jupyter: Option<String>,
        /// Accept HTTP requests without a token. Any process on this machine can then read,
        /// change and run your notebooks; use only on a machine you alone use.
        #[arg(long)]
        no_auth: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("JUPYTER_MCP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,zeromq=error"))
                // The WebSocket client traces its whole handshake request, token header
                // included: never let that through, whatever the filter asks for.
                .add_directive(
                    "tungstenite::handshake::client=off"
                        .parse()
                        .expect("a valid directive"),
                ),
        )
        .init();
    match cli.command {
        Command::Serve {
            root,
            port,
            stdio,
            cache_dir,
            no_kernels,
            kernel_idle_ttl,
            token_file,
            runtime_dir,
            no_auth,
            kernel_server,
            kernel_server_token_file,
            jupyter,
        } => {
            anyhow::ensure!(
                kernel_server_token_file.is_none() || kernel_server.is_some() || jupyter.is_some(),
                "--kernel-server-token-file needs --kernel-server or --jupyter"
            );
            let auth = if no_auth {
                Auth::None
            } else if let Some(token) = token_from(token_file.as_deref(), "JUPYTER_MCP_TOKEN")? {
                Auth::Token(token)
            } else {
                Auth::RandomToken
            };
            let kernel_server = match kernel_server {
                Some(url) => {
                    let token = token_from(
                        kernel_server_token_file.as_deref(),
                        "JUPYTER_MCP_KERNEL_SERVER_TOKEN",
                    )?;
                    Some(KernelServer {
                        url: kernels::ServerUrl::parse(&url)?,
                        token: token.as_deref().and_then(kernels::ServerToken::new),
                    })
                }
                None => None,
            };
            let jupyter = match jupyter {
                Some(url) => {
                    let token = token_from(
                        kernel_server_token_file.as_deref(),
                        "JUPYTER_MCP_KERNEL_SERVER_TOKEN",
                    )?;
                    Some(host_jupyter::ServerConnection::new(&url, token.as_deref())?)
                }
                None => None,
            };
            let config = ServeConfig {
                root,
                transport: if stdio {
                    Transport::Stdio
                } else {
                    Transport::Http { port }
                },
                snapshot_folder: cache_dir
                    .map(|folder| folder.join("snapshots"))
                    .unwrap_or_else(SnapshotStore::default_folder),
                kernels: !no_kernels,
                kernel_idle_ttl: (kernel_idle_ttl > 0)
                    .then(|| std::time::Duration::from_secs(kernel_idle_ttl)),
                auth,
                runtime_dir: runtime_dir.unwrap_or_else(broker::secret::default_runtime_dir),
                kernel_server,
                jupyter,
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(host_standalone::serve(config))
        }
    }
}

/// A token from `file` (trimmed; an empty file is an error), else from the environment
/// variable `variable`, else none.
fn token_from(file: Option<&Path>, variable: &str) -> anyhow::Result<Option<String>> {
    if let Some(file) = file {
        let token = std::fs::read_to_string(file)
            .map_err(|error| {
                anyhow::anyhow!("cannot read the token file {}: {error}", file.display())
            })?
            .trim()
            .to_owned();
        anyhow::ensure!(
            !token.is_empty(),
            "the token file {} is empty",
            file.display()
        );
        return Ok(Some(token));
    }
    Ok(std::env::var(variable)
        .ok()
        .map(|token| token.trim().to_owned())
        .filter(|token| !token.is_empty()))
}
