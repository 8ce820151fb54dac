//! `jupyter-mcp`: the standalone MCP server for Jupyter notebooks.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use host_standalone::snapshots::SnapshotStore;
use host_standalone::{ServeConfig, Transport};

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
        } => {
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
            };
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
                .block_on(host_standalone::serve(config))
        }
    }
}
