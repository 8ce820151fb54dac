//! The Colab runtime that kernels and the file service use now. The sessions-file and
//! runtime-URL sources fix it at start; on the tunnel route a setup's assignment sets it (and
//! its release clears it), so the kernels' provider and the file service read it on every use.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

/// A boxed future, as `kernels`' provider trait takes them.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One runtime: how to reach it, and its file service's root.
pub struct ActiveRuntime {
    /// Its Colab endpoint id, when known.
    pub endpoint: Option<String>,
    /// The alias of the setup that assigned it (tunnel route).
    pub alias: Option<colab_setup::ServerAlias>,
    /// The runtime's proxy base URL (no token).
    pub base_url: String,
    /// How kernel choices name it (`Colab m0123abcd`, `Colab session a1b2c3`).
    pub label: String,
    /// Its REST API, kernels and Contents API.
    pub(crate) api: Arc<kernels::RemoteProvider>,
    /// Its Contents API as a file-service root.
    pub(crate) root: colab_setup::FileServiceRoot,
}

impl ActiveRuntime {
    /// The runtime `profile` reaches. A runtime's files are its own (`/content`), not the
    /// served folder's: no path is sent with its kernels.
    pub fn open(
        profile: kernels::ConnectionProfile,
        endpoint: Option<String>,
        alias: Option<colab_setup::ServerAlias>,
    ) -> anyhow::Result<ActiveRuntime> {
        let base_url = profile.base_url.to_string();
        let root = colab_setup::FileServiceRoot::parse(&base_url).map_err(|error| {
            anyhow::anyhow!("the Colab runtime URL cannot be a file-service root: {error}")
        })?;
        let api = kernels::RemoteProvider::new(kernels::RemoteConfig::with_profile(profile))?;
        let label = match &alias {
            Some(alias) => format!("Colab {alias}"),
            None => "Colab runtime".to_owned(),
        };
        Ok(ActiveRuntime {
            endpoint,
            alias,
            base_url,
            label,
            api: Arc::new(api),
            root,
        })
    }
}

/// The runtime in use, if any: the one set last that is still assigned (releasing the newest
/// goes back to the one before it).
#[derive(Default)]
pub struct RuntimeSlot {
    runtimes: RwLock<Vec<Arc<ActiveRuntime>>>,
}

impl std::fmt::Debug for RuntimeSlot {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RuntimeSlot")
            .field(
                "runtime",
                &self.current().map(|runtime| runtime.base_url.clone()),
            )
            .finish()
    }
}

impl RuntimeSlot {
    /// A slot holding `runtime`.
    pub fn holding(runtime: ActiveRuntime) -> RuntimeSlot {
        RuntimeSlot {
            runtimes: RwLock::new(vec![Arc::new(runtime)]),
        }
    }

    /// The runtime in use now.
    pub fn current(&self) -> Option<Arc<ActiveRuntime>> {
        self.runtimes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned()
    }

    /// Uses `runtime` from now on (kernels already running stay where they are); an earlier
    /// entry for the same endpoint is replaced.
    pub fn set(&self, runtime: ActiveRuntime) {
        let mut runtimes = self
            .runtimes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(endpoint) = &runtime.endpoint {
            runtimes.retain(|known| known.endpoint.as_ref() != Some(endpoint));
        }
        runtimes.push(Arc::new(runtime));
    }

    /// Forgets the runtime at `endpoint` (it was released).
    pub fn clear_if(&self, endpoint: &str) {
        self.runtimes
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|runtime| runtime.endpoint.as_deref() != Some(endpoint));
    }

    /// Makes the held runtime of `alias` the one in use; its file-service root, if held.
    pub fn use_alias(
        &self,
        alias: &colab_setup::ServerAlias,
    ) -> Option<colab_setup::FileServiceRoot> {
        let mut runtimes = self
            .runtimes
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let position = runtimes
            .iter()
            .position(|runtime| runtime.alias.as_ref() == Some(alias))?;
        let runtime = runtimes.remove(position);
        let root = runtime.root.clone();
        runtimes.push(runtime);
        Some(root)
    }

    /// Whether the runtime at `endpoint` is still held (in use or to go back to).
    pub fn holds(&self, endpoint: &str) -> bool {
        self.runtimes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|runtime| runtime.endpoint.as_deref() == Some(endpoint))
    }
}

const NO_RUNTIME: &str = "no Colab runtime is assigned yet: call configure_kernel with runtime \"colab\" (it assigns one through Colab's tunnel API, experimental), or reuse one with serverAlias";

/// The kernels' provider: the slot's runtime at each call.
pub struct SlotProvider {
    slot: Arc<RuntimeSlot>,
}

impl SlotProvider {
    /// Kernels on whatever runtime `slot` holds.
    pub fn new(slot: Arc<RuntimeSlot>) -> SlotProvider {
        SlotProvider { slot }
    }

    fn runtime(&self) -> kernels::Result<Arc<ActiveRuntime>> {
        self.slot.current().ok_or_else(|| kernels::Error::NoKernel {
            advice: NO_RUNTIME.to_owned(),
        })
    }
}

impl kernels::KernelProvider for SlotProvider {
    fn discover<'a>(
        &'a self,
        notebook_dir: Option<&'a Path>,
    ) -> BoxFuture<'a, kernels::Result<kernels::Discovery>> {
        Box::pin(async move {
            let runtime = self.runtime()?;
            let mut found =
                kernels::KernelProvider::discover(runtime.api.as_ref(), notebook_dir).await?;
            // The choices say which runtime they run on.
            for spec in &mut found.specs {
                spec.display_name = format!("{} on {}", spec.display_name, runtime.label);
            }
            Ok(found)
        })
    }

    fn start<'a>(
        &'a self,
        spec: &'a kernels::KernelSpecInfo,
        cwd: &'a Path,
    ) -> BoxFuture<'a, kernels::Result<Arc<dyn kernels::KernelHandle>>> {
        Box::pin(async move {
            let runtime = self.runtime()?;
            kernels::KernelProvider::start(runtime.api.as_ref(), spec, cwd).await
        })
    }

    fn server_root(&self) -> Option<&Path> {
        None
    }

    fn place(&self) -> kernels::KernelPlace {
        match self.slot.current() {
            Some(runtime) => kernels::KernelPlace::Server {
                url: runtime.base_url.clone(),
            },
            None => kernels::KernelPlace::Server {
                url: "(no Colab runtime assigned yet)".to_owned(),
            },
        }
    }
}
