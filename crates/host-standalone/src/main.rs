//! `jupyter-mcp`: the standalone MCP server for Jupyter notebooks.

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use host_standalone::snapshots::SnapshotStore;
use host_standalone::{Auth, KernelServer, ServeConfig, Transport};

/// mimalloc: replies are JSON trees of many small allocations (a whole outline of a 2,000-cell
/// notebook is about 60,000), built, serialised and freed on every call; glibc's allocator spent
/// a quarter of such a call in `malloc` and `free`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        /// Where snapshots of replaced notebook files are kept (default: the user's cache folder).
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
        /// Run kernels on this Jupyter Server or Kernel Gateway (https://host/base/, or
        /// http:// on loopback) instead of locally. Its token comes from
        /// --kernel-server-token-file or JUPYTER_MCP_KERNEL_SERVER_TOKEN, never from the URL.
        #[arg(long, value_name = "URL", conflicts_with = "no_kernels")]
        kernel_server: Option<String>,
        /// Read the kernel server's (or the --jupyter server's) token from this file (read
        /// again when it changes, and when the server refuses the token).
        #[arg(long, value_name = "PATH")]
        kernel_server_token_file: Option<PathBuf>,
        /// Trust this certificate authority (a PEM file) for https:// kernel servers, hubs,
        /// --jupyter servers and ANTHROPIC_BASE_URL (summaries), besides the system's
        /// (SSL_CERT_FILE replaces the system's). Repeatable.
        #[arg(long, value_name = "FILE")]
        kernel_server_ca: Vec<PathBuf>,
        /// Allow plain http:// to a kernel server, hub or --jupyter server that is not on
        /// loopback. The token and all code and outputs then cross the network unencrypted.
        #[arg(long)]
        allow_insecure_http: bool,
        /// Run kernels on your server of this JupyterHub (https://hub.example.org/): it is
        /// found through the hub's API, started if it is not running, and used through the
        /// hub's proxy. The token comes from --jupyterhub-token-file or JUPYTERHUB_API_TOKEN.
        #[arg(long, value_name = "URL", conflicts_with_all = ["no_kernels", "kernel_server"])]
        jupyterhub: Option<String>,
        /// Read the JupyterHub API token from this file (read again when it changes, and when
        /// the hub refuses the token).
        #[arg(long, value_name = "PATH", requires = "jupyterhub")]
        jupyterhub_token_file: Option<PathBuf>,
        /// Use this named server of yours instead of the default one.
        #[arg(long, value_name = "NAME", requires = "jupyterhub")]
        jupyterhub_server: Option<String>,
        /// Start your server again when the hub stopped or culled it while jupyter-mcp used
        /// it (without it, such a run ends and the next one says how to start the server).
        #[arg(long, requires = "jupyterhub")]
        jupyterhub_start: bool,
        /// Run kernels on the Colab runtime of this google-colab-cli session (a name from
        /// `colab ls`); its URL and proxy token come from the CLI's sessions file, read again
        /// when the proxy refuses the token.
        #[arg(long, value_name = "NAME", conflicts_with_all = ["no_kernels", "kernel_server", "jupyterhub"])]
        colab_session: Option<String>,
        /// google-colab-cli's sessions file (default: ~/.config/colab-cli/sessions.json).
        #[arg(long, value_name = "PATH", requires = "colab_session")]
        colab_sessions_file: Option<PathBuf>,
        /// Run kernels on the Colab runtime at this proxy URL (https://8080-….prod.colab.dev/);
        /// its proxy token comes from --colab-token-file.
        #[arg(long, value_name = "URL", conflicts_with_all = ["no_kernels", "kernel_server", "jupyterhub", "colab_session"], requires = "colab_token_file")]
        colab_runtime_url: Option<String>,
        /// The file holding the runtime's proxy token (read again when it changes, and when
        /// the proxy refuses the token).
        #[arg(long, value_name = "PATH", requires = "colab_runtime_url")]
        colab_token_file: Option<PathBuf>,
        /// EXPERIMENTAL: let configure_kernel (runtime "colab") assign and release Colab
        /// runtimes through Colab's tunnel API with your Google application-default credentials
        /// (`gcloud auth application-default login` with the Colab scope). Not a public Google
        /// API; it may change or stop working.
        #[arg(long, conflicts_with_all = ["no_kernels", "kernel_server", "jupyterhub", "colab_session", "colab_runtime_url"])]
        colab_tunnel: bool,
        /// The tunnel API's base URL (default: Colab's own).
        #[arg(long, value_name = "URL", requires = "colab_tunnel")]
        colab_tunnel_url: Option<String>,
        /// The Google credentials file (default: $GOOGLE_APPLICATION_CREDENTIALS, else
        /// gcloud's application_default_credentials.json).
        #[arg(long, value_name = "PATH", requires = "colab_tunnel")]
        colab_credentials_file: Option<PathBuf>,
        /// Work alongside JupyterLab: serve the notebooks of this Jupyter Server
        /// (https://host/base/, or http:// on loopback; with jupyter-collaboration) live in
        /// their shared documents, on the kernels their JupyterLab tabs use. Its token comes
        /// from --kernel-server-token-file or JUPYTER_MCP_KERNEL_SERVER_TOKEN, its certificate
        /// is checked as for kernel servers (--kernel-server-ca); --root is then the folder
        /// file transfers read and write.
        #[arg(long, value_name = "URL", conflicts_with_all = ["kernel_server", "jupyterhub", "colab_session", "colab_runtime_url", "colab_tunnel"])]
        jupyter: Option<String>,
        /// Accept HTTP requests without a token. Any process on this machine can then read,
        /// change and run your notebooks; use only on a machine you alone use.
        #[arg(long)]
        no_auth: bool,
        /// Stop when stdin closes (HTTP only). For a program that runs the server as its child
        /// (the Jupyter Server extension does): the server then stops with that program, even
        /// when it is killed.
        #[arg(long, conflicts_with = "stdio")]
        exit_on_stdin_close: bool,
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
            exit_on_stdin_close,
            kernel_server,
            kernel_server_token_file,
            jupyter,
            kernel_server_ca,
            allow_insecure_http,
            jupyterhub,
            jupyterhub_token_file,
            jupyterhub_server,
            jupyterhub_start,
            colab_session,
            colab_sessions_file,
            colab_runtime_url,
            colab_token_file,
            colab_tunnel,
            colab_tunnel_url,
            colab_credentials_file,
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
            let tls = kernels::TlsTrust {
                extra_roots: kernel_server_ca,
            };
            // One summarizer for whichever host is served, trusting what kernel servers are
            // trusted with.
            let services = host_core::Services {
                summarizer: summarizer::from_env(&tls)?,
            };
            // The same transport as for kernel servers: the token file read again when it
            // changes and when the server refuses the token, the same certificate authorities,
            // plain http:// on loopback only unless the network on the way is the user's.
            let (jupyter, kernel_server_token_file) = match jupyter {
                Some(url) => {
                    let profile =
                        server_profile(&url, kernel_server_token_file, &tls, allow_insecure_http)?;
                    if !profile.base_url.is_https() && !profile.base_url.is_loopback() {
                        tracing::warn!(
                            "--allow-insecure-http: the token, the notebooks and every cell's code and output cross the network to {} unencrypted; anyone on the way can read them and run code as you",
                            profile.base_url
                        );
                    }
                    (
                        Some(host_jupyter::ServerConnection::with_profile(profile)?),
                        None,
                    )
                }
                None => (None, kernel_server_token_file),
            };
            let colab = match (colab_session, colab_runtime_url) {
                (Some(session), _) => Some(host_standalone::colab::ColabSource::SessionsFile {
                    path: colab_sessions_file
                        .or_else(host_standalone::colab::default_sessions_file)
                        .ok_or_else(|| {
                            anyhow::anyhow!("no home folder: pass --colab-sessions-file")
                        })?,
                    session,
                }),
                (None, Some(url)) => {
                    let token_file = colab_token_file.expect("clap requires it");
                    token_from(Some(&token_file), "").map_err(|error| {
                        anyhow::anyhow!("{error} (given with --colab-token-file)")
                    })?;
                    Some(host_standalone::colab::ColabSource::RuntimeUrl { url, token_file })
                }
                (None, None) if colab_tunnel => Some(host_standalone::colab::ColabSource::Tunnel {
                    base_url: colab_tunnel_url.unwrap_or_else(|| {
                        host_standalone::colab::tunnel::DEFAULT_TUNNEL_BASE_URL.to_owned()
                    }),
                    credentials_file: colab_credentials_file,
                }),
                (None, None) => None,
            };
            let kernel_server = match (kernel_server, jupyterhub) {
                _ if colab.is_some() => Some(KernelServer::Colab(
                    host_standalone::colab::ColabRuntime::open(
                        colab.expect("just checked"),
                        tls.clone(),
                    )?,
                )),
                (Some(url), _) => Some(KernelServer::Server(server_profile(
                    &url,
                    kernel_server_token_file,
                    &tls,
                    allow_insecure_http,
                )?)),
                (None, Some(url)) => {
                    let credential = credential_from(
                        jupyterhub_token_file,
                        "JUPYTERHUB_API_TOKEN",
                        "--jupyterhub-token-file",
                    )?
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "--jupyterhub needs your hub API token: put it in a file and pass --jupyterhub-token-file FILE, or set JUPYTERHUB_API_TOKEN (the hub's Token page makes one; it needs the scopes read:servers, servers and access:servers)"
                        )
                    })?;
                    let mut hub = kernels::JupyterHubConfig::new(
                        kernels::ServerUrl::parse(&url)?,
                        credential,
                    );
                    hub.server_name = jupyterhub_server.unwrap_or_default();
                    hub.restart_stopped = jupyterhub_start;
                    hub.tls = tls;
                    hub.allow_insecure_http = allow_insecure_http;
                    hub.profile().check_transport()?;
                    Some(KernelServer::JupyterHub(hub))
                }
                (None, None) => None,
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
                services,
                exit_on_stdin_close,
            };
            let runtime = runtime()?;
            let served = runtime.block_on(host_standalone::serve(config));
            // A read of stdin (`--exit-on-stdin-close`) may still hold a thread of the blocking
            // pool, which a plain drop of the runtime would wait for.
            runtime.shutdown_background();
            served
        }
    }
}

/// The server's runtime: one async worker unless `TOKIO_WORKER_THREADS` asks for more.
///
/// A call crosses many tasks (the HTTP connection, the MCP session, the tool, the run's driver,
/// the kernel's pump), each woken by the one before. On one worker these hand-offs stay on its
/// thread; with two, each may wake a parked thread on the other processor, which on a virtual
/// machine costs tens of microseconds: a trivial run's overhead over the kernel's own round trip
/// was about a third smaller on one worker (`cargo xtask bench`, execution section). Work that
/// holds a processor for long (reading and writing large notebooks) runs on the blocking pool.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        builder.worker_threads(1);
    }
    builder.enable_all().build()
}

/// Where a server credential comes from: `file` (read now, to fail early, and again whenever it
/// changes), else the environment variable `variable` when it is set, else none.
/// The connection profile of the Jupyter server at `url` (`--jupyter`, `--kernel-server`):
/// its token from `token_file` or `JUPYTER_MCP_KERNEL_SERVER_TOKEN`, the trusted CAs, and
/// whether plain HTTP may leave loopback (checked here).
fn server_profile(
    url: &str,
    token_file: Option<PathBuf>,
    tls: &kernels::TlsTrust,
    allow_insecure_http: bool,
) -> anyhow::Result<kernels::ConnectionProfile> {
    let credential = credential_from(
        token_file,
        "JUPYTER_MCP_KERNEL_SERVER_TOKEN",
        "--kernel-server-token-file",
    )?;
    let mut profile =
        kernels::ConnectionProfile::jupyter_server(kernels::ServerUrl::parse(url)?, credential);
    profile.tls = tls.clone();
    profile.allow_insecure_http = allow_insecure_http;
    profile.check_transport()?;
    Ok(profile)
}

fn credential_from(
    file: Option<PathBuf>,
    variable: &str,
    option: &str,
) -> anyhow::Result<Option<kernels::CredentialSource>> {
    if let Some(file) = file {
        token_from(Some(&file), variable)
            .map_err(|error| anyhow::anyhow!("{error} (given with {option})"))?;
        return Ok(Some(kernels::CredentialSource::File(file)));
    }
    Ok(token_from(None, variable)?
        .map(|_| kernels::CredentialSource::Environment(variable.to_owned())))
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
