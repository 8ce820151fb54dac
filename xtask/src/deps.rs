//! `cargo xtask deps`: the layers of ARCHITECTURE.md's code map, checked.
//!
//! - Every workspace edge (a member depending on another member, with the features it asks
//!   for) and every direct dependency on an I/O crate ([`WATCHED`]) must be on the allow-list
//!   ([`RULES`]), and the allow-list must say what the code map's "May depend on" column says:
//!   a new edge fails until both name it.
//! - Domain crates stay pure: no tokio, hyper, rmcp, napi, randomness (`cargo tree`, so
//!   through others too) and no files, network, processes, environment or clocks in their
//!   source outside tests; some crates above them keep narrower rules ([`LAYER_RULES`]), and
//!   some modules of layer-3 crates are pure as well ([`PURE_MODULES`]).
//! - No source file is longer than [`MAX_LINES_BEFORE_TESTS`] lines before its tests, and
//!   host-core's modules form no import cycle of more than [`MAX_CYCLE_FILES`] files.
//! - No crate but `mcp-contract` writes a tool name as a string in its code (tests aside): it
//!   names a `ToolName`.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, root, stdout_of};

/// The most lines a source file may have before its `#[cfg(test)]`.
const MAX_LINES_BEFORE_TESTS: usize = 1000;

/// The most files one import cycle of host-core's modules may hold.
const MAX_CYCLE_FILES: usize = 3;

/// Domain crates: pure, synchronous, sans-I/O.
const DOMAIN_CRATES: &[&str] = &[
    "notebook-model",
    "mcp-contract",
    "execution-tracker",
    "transfer",
    "dataflow",
    "condense",
    "colab-setup",
];

/// External crates that mean I/O, a runtime, a binding or a heavy codec: a crate depends on one
/// directly only when its rule allows it (and the code map names it).
const WATCHED: &[&str] = &[
    "tokio",
    "mio",
    "async-std",
    "hyper",
    "hyper-util",
    "hyper-rustls",
    "http",
    "http-body-util",
    "reqwest",
    "rustls",
    "rustls-pki-types",
    "rustls-native-certs",
    "tokio-rustls",
    "openssl",
    "tungstenite",
    "tokio-tungstenite",
    "socket2",
    "rmcp",
    "napi",
    "napi-derive",
    "nix",
    "rustix",
    "libc",
    "windows-sys",
    "zeromq",
    "jupyter-zmq-client",
    "jupyter-protocol",
    "ring",
    "yrs",
    "image",
];

/// Watched crates the code map need not name: every layer-3 crate is async on tokio (the code
/// map names it where a crate below layer 3 uses it; the allow-list still says who may).
const UNNAMED_IN_CODE_MAP: &[&str] = &["tokio"];

/// What one workspace crate may depend on.
struct CrateRule {
    /// The package name.
    name: &'static str,
    /// Its workspace dependencies, or `None` for any (the test and bench crates).
    workspace: Option<&'static [Edge]>,
    /// The [`WATCHED`] crates it may depend on directly; `None` for any.
    external: Option<&'static [&'static str]>,
}

/// An allowed workspace edge: the crate and the features it may ask for (`default` for its
/// default features); `None` for any.
struct Edge {
    name: &'static str,
    features: Option<&'static [&'static str]>,
}

const fn to(name: &'static str) -> Edge {
    Edge {
        name,
        features: None,
    }
}

const fn with(name: &'static str, features: &'static [&'static str]) -> Edge {
    Edge {
        name,
        features: Some(features),
    }
}

const NOTHING: Option<&[Edge]> = Some(&[]);
const NO_IO: Option<&[&str]> = Some(&[]);

/// The allow-list: ARCHITECTURE.md's code map, "May depend on", as data. A change here is a
/// change of the architecture: make it in the code map too (`deps` compares the two).
const RULES: &[CrateRule] = &[
    CrateRule {
        name: "notebook-model",
        workspace: NOTHING,
        external: NO_IO,
    },
    CrateRule {
        name: "mcp-contract",
        // `OutputMode` only: the condensing itself stays out of the contract.
        workspace: Some(&[with("condense", &[])]),
        external: NO_IO,
    },
    CrateRule {
        name: "execution-tracker",
        // `OutputMode` only; the condensing comes in as a function.
        workspace: Some(&[to("notebook-model"), with("condense", &[])]),
        external: NO_IO,
    },
    CrateRule {
        name: "dataflow",
        workspace: NOTHING,
        external: NO_IO,
    },
    CrateRule {
        name: "condense",
        // Its `render` feature reads outputs through notebook-model's `OutputView`.
        workspace: Some(&[to("notebook-model")]),
        external: Some(&["image"]),
    },
    CrateRule {
        name: "transfer",
        workspace: NOTHING,
        external: NO_IO,
    },
    CrateRule {
        name: "colab-setup",
        // The fuzz byte source and the base-36 digits of ids only.
        workspace: Some(&[to("notebook-model")]),
        external: NO_IO,
    },
    CrateRule {
        name: "host-core",
        workspace: Some(&[
            to("notebook-model"),
            to("mcp-contract"),
            to("execution-tracker"),
            to("dataflow"),
            to("condense"),
            to("transfer"),
            to("colab-setup"),
        ]),
        external: Some(&["tokio"]),
    },
    CrateRule {
        name: "host-kernels",
        workspace: Some(&[
            to("host-core"),
            with("kernels", &[]),
            to("execution-tracker"),
        ]),
        external: Some(&["tokio"]),
    },
    CrateRule {
        name: "host-files",
        workspace: Some(&[to("host-core")]),
        external: Some(&["tokio"]),
    },
    CrateRule {
        name: "mcp-server",
        workspace: Some(&[to("mcp-contract")]),
        external: Some(&[
            "tokio",
            "rmcp",
            "hyper",
            "hyper-util",
            "http",
            "http-body-util",
        ]),
    },
    CrateRule {
        name: "broker",
        workspace: Some(&[to("mcp-contract"), to("mcp-server")]),
        external: Some(&[
            "tokio",
            "hyper",
            "hyper-util",
            "http",
            "http-body-util",
            "ring",
            "rustix",
        ]),
    },
    CrateRule {
        name: "kernels",
        workspace: NOTHING,
        external: Some(&[
            "tokio",
            "jupyter-zmq-client",
            "jupyter-protocol",
            "zeromq",
            "nix",
            "windows-sys",
            "hyper",
            "hyper-util",
            "hyper-rustls",
            "http",
            "http-body-util",
            "rustls",
            "rustls-pki-types",
            "rustls-native-certs",
            "tokio-rustls",
            "tokio-tungstenite",
            "socket2",
        ]),
    },
    CrateRule {
        name: "host-standalone",
        workspace: Some(&[
            to("host-core"),
            to("host-kernels"),
            to("host-files"),
            to("host-jupyter"),
            to("mcp-server"),
            to("broker"),
            to("notebook-model"),
            with("kernels", &["local", "remote"]),
            to("colab-setup"),
            to("summarizer"),
        ]),
        // Its HTTP goes through `kernels`, its serving through `mcp-server` and `broker`.
        external: Some(&["tokio"]),
    },
    CrateRule {
        name: "host-vscode",
        workspace: Some(&[
            to("host-core"),
            to("host-kernels"),
            to("host-files"),
            to("mcp-contract"),
            to("mcp-server"),
            to("broker"),
            to("notebook-model"),
            to("execution-tracker"),
            with("kernels", &["local"]),
            to("colab-setup"),
            to("summarizer"),
        ]),
        // The native driver's loopback Chrome DevTools client.
        external: Some(&[
            "tokio",
            "tokio-tungstenite",
            "hyper",
            "hyper-util",
            "http-body-util",
        ]),
    },
    CrateRule {
        name: "host-jupyter",
        workspace: Some(&[
            to("host-core"),
            to("host-kernels"),
            to("host-files"),
            with("kernels", &["remote"]),
            to("mcp-contract"),
            to("notebook-model"),
            to("execution-tracker"),
        ]),
        external: Some(&["tokio", "yrs", "http", "tokio-tungstenite"]),
    },
    CrateRule {
        name: "host-napi",
        workspace: Some(&[to("host-vscode")]),
        external: Some(&["napi", "napi-derive"]),
    },
    CrateRule {
        name: "summarizer",
        workspace: Some(&[to("host-core"), with("kernels", &["remote"])]),
        external: Some(&["http"]),
    },
    CrateRule {
        name: "embedded-host",
        workspace: Some(&[
            to("host-core"),
            to("mcp-server"),
            to("notebook-model"),
            to("summarizer"),
        ]),
        external: Some(&["tokio"]),
    },
    CrateRule {
        name: "xtask",
        workspace: Some(&[to("mcp-contract")]),
        external: NO_IO,
    },
    CrateRule {
        name: "jupyter-mcp-tests",
        workspace: None,
        external: None,
    },
    CrateRule {
        name: "jupyter-mcp-bench",
        workspace: None,
        external: None,
    },
];

/// Packages a domain crate must never depend on, directly or through others.
const FORBIDDEN_PACKAGES: &[&str] = &[
    "tokio",
    "mio",
    "hyper",
    "hyper-util",
    "reqwest",
    "rmcp",
    "napi",
    "napi-derive",
    "async-std",
    "zeromq",
    "jupyter-zmq-client",
    "rand",
    "getrandom",
    "uuid",
];

/// Source patterns that mean I/O, clocks or randomness in a domain crate.
const FORBIDDEN_SOURCE: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env::var",
    "SystemTime::now",
    "Instant::now",
    "tokio::",
];

/// Crates above the domain layer that must still stay clear of some packages and of some
/// I/O in their own source: what each may not depend on (transitively, normal dependencies)
/// and may not use outside tests.
struct LayerRule {
    crates: &'static [&'static str],
    packages: &'static [&'static str],
    /// Source patterns, in groups (such as [`OWN_CONNECTIONS`]).
    source: &'static [&'static [&'static str]],
    why: &'static str,
}

/// Source patterns of files, processes and connections opened by a crate itself.
const OWN_CONNECTIONS: &[&str] = &[
    "std::fs",
    "std::process",
    "tokio::process",
    "std::net",
    "tokio::net",
];

const LAYER_RULES: &[LayerRule] = &[
    LayerRule {
        crates: &["host-core"],
        packages: &[
            "kernels",
            "nix",
            "zeromq",
            "jupyter-zmq-client",
            "hyper",
            "rmcp",
            "napi",
        ],
        source: &[&[
            "std::process",
            "tokio::process",
            "std::fs",
            "std::net",
            "std::os::unix",
        ]],
        why: "host-core holds the tools and the seams: no kernels, processes, files or sockets of its own",
    },
    LayerRule {
        crates: &["mcp-server", "broker"],
        packages: &["host-core", "kernels", "nix", "ruff_python_parser", "image"],
        source: &[],
        why: "transports move JSON: they compile without the tool layer",
    },
    LayerRule {
        crates: &["host-jupyter"],
        packages: &["rmcp", "napi", "zeromq", "jupyter-zmq-client", "openssl"],
        source: &[OWN_CONNECTIONS, &["connect_async"]],
        why: "the JupyterLab host starts no local kernels, serves no MCP itself, never touches the notebook files and opens no connection of its own (its REST calls and WebSockets go through the kernels crate's transport: its rustls, never the system's OpenSSL)",
    },
    LayerRule {
        crates: &["summarizer"],
        packages: &[
            "rmcp",
            "napi",
            "zeromq",
            "jupyter-zmq-client",
            "openssl",
            "mcp-server",
            "broker",
            "host-files",
            "host-kernels",
        ],
        source: &[
            OWN_CONNECTIONS,
            &["hyper_util", "hyper_rustls", "tokio_rustls"],
        ],
        why: "the summarizer reaches the API only through the kernels crate's HttpClient (the trust of kernel servers, its rustls): no connection or TLS of its own, no files, no kernels, no MCP",
    },
    LayerRule {
        crates: &["mcp-server"],
        packages: &[],
        source: &[
            &["std::process", "tokio::process", "std::fs", "std::net"],
            // Tool arguments about notebooks are the contract's to build (`run_task`).
            &[
                "\"notebookRef\"",
                "\"notebookRefs\"",
                "\"cellIds\"",
                "\"executionId\"",
            ],
        ],
        why: "the MCP binding touches no files or processes, binds through tokio and knows no notebooks",
    },
    LayerRule {
        crates: &["host-standalone"],
        packages: &[],
        source: &[&["hyper", "rustls", "tokio_tungstenite", "TcpStream"]],
        why: "the standalone host's HTTP and TLS (kernel servers, Colab's runtime, the summaries) go through the kernels crate's clients, its serving through mcp-server and broker",
    },
];

/// Modules of layer-3 crates that hold decisions only: no runtime, no HTTP, no I/O, no clock.
/// A folder stands for every file under it.
const PURE_MODULES: &[&str] = &[
    "crates/broker/src/routing.rs",
    "crates/kernels/src/remote/hub.rs",
    "crates/host-jupyter/src/ydoc",
    "crates/host-jupyter/src/ydoc.rs",
    "crates/host-jupyter/src/protocol.rs",
];

/// What a pure module may not use outside its tests.
const PURE_MODULE_SOURCE: &[&str] = &[
    "tokio",
    "hyper",
    "http::",
    "reqwest",
    "tungstenite",
    "rustls",
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "std::io::stdin",
    "SystemTime::now",
    "Instant::now",
    "rand::",
    "Uuid::new_v4",
];

/// `cargo xtask deps`.
pub(crate) fn deps() -> Result<()> {
    let stdout = stdout_of(
        cargo().args(["metadata", "--format-version", "1", "--no-deps"]),
        "cargo metadata",
    )?;
    let metadata: Value = serde_json::from_slice(&stdout).context("cargo metadata's JSON")?;
    let workspace = Workspace::from_metadata(&metadata)?;
    let mut problems = check_edges(&workspace, RULES);
    let architecture = std::fs::read_to_string(root().join("ARCHITECTURE.md"))
        .context("reading ARCHITECTURE.md")?;
    problems.extend(check_code_map(&architecture, &workspace, RULES));
    for domain in DOMAIN_CRATES {
        check_purity(domain, FORBIDDEN_PACKAGES, FORBIDDEN_SOURCE, &mut problems)?;
    }
    for rule in LAYER_RULES {
        for krate in rule.crates {
            let before = problems.len();
            check_purity(krate, rule.packages, &rule.source.concat(), &mut problems)?;
            for problem in &mut problems[before..] {
                problem.push_str(&format!(": {}", rule.why));
            }
        }
    }
    for module in PURE_MODULES {
        let path = root().join(module);
        let before = problems.len();
        source::scan(&path, module, PURE_MODULE_SOURCE, &mut problems)?;
        for problem in &mut problems[before..] {
            problem.push_str(": this module holds decisions only (no runtime, HTTP, I/O or clock)");
        }
    }
    problems.extend(source::long_files(
        &root(),
        &workspace.folders(),
        MAX_LINES_BEFORE_TESTS,
    )?);
    let names: Vec<&str> = mcp_contract::ToolName::ALL
        .iter()
        .map(|tool| tool.as_str())
        .collect();
    problems.extend(source::tool_name_strings(
        &root(),
        &workspace.folders(),
        &names,
    )?);
    problems.extend(source::module_cycles(
        &root().join("crates/host-core/src"),
        MAX_CYCLE_FILES,
    )?);
    let mut layered: Vec<&str> = LAYER_RULES
        .iter()
        .flat_map(|rule| rule.crates.iter().copied())
        .collect();
    layered.sort_unstable();
    layered.dedup();
    if !problems.is_empty() {
        bail!(
            "the layers must stay as ARCHITECTURE.md says:\n  {}",
            problems.join("\n  ")
        );
    }
    eprintln!(
        "deps: {} workspace crates keep the code map's edges; {} domain crates are pure; {} and {} pure modules keep their layers",
        workspace.members.len(),
        DOMAIN_CRATES.len(),
        layered.join(", "),
        PURE_MODULES.len()
    );
    Ok(())
}

/// `cargo tree -p` resolves features for that package alone, as a build of it would (the
/// workspace's metadata unifies them across every member, tests included): what `krate`
/// reaches through its normal dependencies, and its own source outside tests.
fn check_purity(
    krate: &str,
    packages_forbidden: &[&str],
    source_forbidden: &[&str],
    problems: &mut Vec<String>,
) -> Result<()> {
    let stdout = stdout_of(
        cargo().args([
            "tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ]),
        &format!("cargo tree -p {krate}"),
    )?;
    let tree = String::from_utf8_lossy(&stdout);
    let mut found: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| packages_forbidden.contains(name))
        .collect();
    found.sort_unstable();
    found.dedup();
    for name in found {
        problems.push(format!(
            "{krate} depends on {name} (`cargo tree -p {krate} -e normal -i {name}` shows how)"
        ));
    }
    let source = root().join("crates").join(krate).join("src");
    source::scan(&source, krate, source_forbidden, problems)
}

/// The workspace's members as `cargo metadata` describes them.
struct Workspace {
    members: Vec<Member>,
}

struct Member {
    name: String,
    /// Its folder relative to the workspace root, such as `crates/host-core`.
    folder: String,
    /// Its normal dependencies (build and dev dependencies are not the layers).
    dependencies: Vec<Dependency>,
}

struct Dependency {
    name: String,
    /// The features asked for, `default` included when the default features are.
    features: BTreeSet<String>,
}

impl Workspace {
    fn from_metadata(metadata: &Value) -> Result<Workspace> {
        let root = metadata["workspace_root"]
            .as_str()
            .context("metadata without workspace_root")?;
        let members: BTreeSet<&str> = metadata["workspace_members"]
            .as_array()
            .context("metadata without workspace_members")?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut result = Vec::new();
        for package in metadata["packages"].as_array().into_iter().flatten() {
            if !package["id"]
                .as_str()
                .is_some_and(|id| members.contains(id))
            {
                continue;
            }
            let name = package["name"].as_str().context("package without name")?;
            let manifest = package["manifest_path"]
                .as_str()
                .context("package without manifest_path")?;
            let folder = Path::new(manifest)
                .parent()
                .and_then(|folder| folder.strip_prefix(root).ok())
                .map(|folder| folder.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            let dependencies = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|dependency| dependency["kind"].is_null())
                .filter_map(|dependency| {
                    let mut features: BTreeSet<String> = dependency["features"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                    if dependency["uses_default_features"].as_bool() != Some(false) {
                        features.insert("default".to_owned());
                    }
                    Some(Dependency {
                        name: dependency["name"].as_str()?.to_owned(),
                        features,
                    })
                })
                .collect();
            result.push(Member {
                name: name.to_owned(),
                folder,
                dependencies,
            });
        }
        result.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Workspace { members: result })
    }

    fn is_member(&self, name: &str) -> bool {
        self.members.iter().any(|member| member.name == name)
    }

    fn folders(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|member| member.folder.clone())
            .collect()
    }
}

const FIX: &str = "if the architecture changes, name it in ARCHITECTURE.md's code map (\"May depend on\") and in RULES (xtask/src/deps.rs)";

/// Every workspace edge and every direct dependency on a watched crate, against the rules.
fn check_edges(workspace: &Workspace, rules: &[CrateRule]) -> Vec<String> {
    let mut problems = Vec::new();
    for member in &workspace.members {
        let Some(rule) = rules.iter().find(|rule| rule.name == member.name) else {
            problems.push(format!(
                "{} is a workspace crate without a rule: give it a row in ARCHITECTURE.md's code map and a rule in RULES (xtask/src/deps.rs)",
                member.name
            ));
            continue;
        };
        for dependency in &member.dependencies {
            if workspace.is_member(&dependency.name) {
                let Some(allowed) = rule.workspace else {
                    continue;
                };
                let Some(edge) = allowed.iter().find(|edge| edge.name == dependency.name) else {
                    problems.push(format!(
                        "{} depends on {}, which the code map does not allow: {FIX}",
                        member.name, dependency.name
                    ));
                    continue;
                };
                if let Some(features) = edge.features {
                    let extra: Vec<&str> = dependency
                        .features
                        .iter()
                        .map(String::as_str)
                        .filter(|feature| !features.contains(feature))
                        .collect();
                    if !extra.is_empty() {
                        problems.push(format!(
                            "{} asks {} for the features {}, which the code map does not allow: {FIX}",
                            member.name,
                            dependency.name,
                            extra.join(", ")
                        ));
                    }
                }
            } else if WATCHED.contains(&dependency.name.as_str())
                && rule
                    .external
                    .is_some_and(|allowed| !allowed.contains(&dependency.name.as_str()))
            {
                problems.push(format!(
                    "{} depends on {} directly, which the code map does not allow: {FIX}",
                    member.name, dependency.name
                ));
            }
        }
    }
    problems
}

/// The allow-list against the code map: for every member, the workspace crates and watched
/// crates its row's "May depend on" names are exactly those its rule allows.
fn check_code_map(architecture: &str, workspace: &Workspace, rules: &[CrateRule]) -> Vec<String> {
    let rows = code_map_rows(architecture);
    let mut problems = Vec::new();
    for member in &workspace.members {
        let Some(rule) = rules.iter().find(|rule| rule.name == member.name) else {
            continue;
        };
        let Some(may_depend_on) = rows.get(member.folder.as_str()) else {
            problems.push(format!(
                "{} ({}) has no row in ARCHITECTURE.md's code map",
                member.name, member.folder
            ));
            continue;
        };
        let named = names_in(may_depend_on);
        let mut mentioned: BTreeSet<&str> = workspace
            .members
            .iter()
            .map(|other| other.name.as_str())
            .filter(|name| named.contains(*name))
            .collect();
        if may_depend_on.contains("the domain crates") {
            mentioned.extend(DOMAIN_CRATES);
        }
        match rule.workspace {
            None => {
                if !may_depend_on.contains("everything") {
                    problems.push(format!(
                        "{}: RULES allow any workspace crate, so its code map row should say \"everything\"",
                        member.name
                    ));
                }
            }
            Some(allowed) => {
                let allowed: BTreeSet<&str> = allowed.iter().map(|edge| edge.name).collect();
                for name in allowed.difference(&mentioned) {
                    problems.push(format!(
                        "{}: RULES allow {name} but its code map row does not name it in \"May depend on\"",
                        member.name
                    ));
                }
                for name in mentioned.difference(&allowed) {
                    problems.push(format!(
                        "{}: its code map row names {name} in \"May depend on\" but RULES do not allow it",
                        member.name
                    ));
                }
            }
        }
        if let Some(external) = rule.external {
            for name in external {
                if !UNNAMED_IN_CODE_MAP.contains(name) && !named.contains(*name) {
                    problems.push(format!(
                        "{}: RULES allow {name} but its code map row does not name it in \"May depend on\"",
                        member.name
                    ));
                }
            }
            for name in WATCHED {
                if named.contains(*name) && !external.contains(name) && !workspace.is_member(name) {
                    problems.push(format!(
                        "{}: its code map row names {name} in \"May depend on\" but RULES do not allow it",
                        member.name
                    ));
                }
            }
        }
    }
    problems
}

/// The code map's rows: the first column's path (without backticks) to the "May depend on"
/// column.
fn code_map_rows(architecture: &str) -> BTreeMap<&str, &str> {
    let mut rows = BTreeMap::new();
    let mut in_code_map = false;
    for line in architecture.lines() {
        if line.starts_with("## ") {
            in_code_map = line.trim() == "## Code map";
            continue;
        }
        if !in_code_map || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| path | layer | job | may depend on | must never know |` splits into seven.
        if cells.len() < 7 {
            continue;
        }
        let path = cells[1].trim_matches('`').trim_end_matches('/');
        rows.insert(path, cells[cells.len() - 3]);
    }
    rows
}

/// The words of a code map cell that could be crate names: outside parentheses, which say
/// what for (\"ring (HMAC, randomness)\", \"kernels (`remote`)\", \"rustls (ring)\").
fn names_in(cell: &str) -> BTreeSet<String> {
    let mut outside = String::new();
    let mut depth = 0usize;
    for character in cell.chars() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            character if depth == 0 => outside.push(character),
            _ => outside.push(' '),
        }
    }
    outside
        .split(|character: char| {
            !(character.is_ascii_alphanumeric() || character == '-' || character == '_')
        })
        .filter(|word| !word.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests;
