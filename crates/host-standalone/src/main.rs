//! `jupyter-mcp`: the standalone MCP server for Jupyter notebooks.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use host_standalone::snapshots::SnapshotStore;
use host_standalone::{Auth, ServeConfig, Transport};

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
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,zeromq=error")),
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
        } => {
            let auth = if no_auth {
                Auth::None
            } else if let Some(file) = token_file {
                let token = std::fs::read_to_string(&file)
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
                Auth::Token(token)
            } else if let Some(token) = mcp_server::token_from_env() {
                Auth::Token(token)
            } else {
                Auth::RandomToken
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
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(host_standalone::serve(config))
        }
    }
}
