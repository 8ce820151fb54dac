//! The packages of the standalone server besides the Python wheel, all named `jupyter-mcp-rs`
//! (the command stays `jupyter-mcp`), for `cargo xtask dist` to call with the binaries it built:
//!
//! - [`npm`]: esbuild's layout. One package per platform holds the binary and declares its `os`
//!   and `cpu`; the main package pins them all as `optionalDependencies`, so npm installs only the
//!   one that fits, and its `bin` is a small launcher (`packaging/npm/launcher.js`) that runs
//!   that binary with stdio inherited.
//! - [`mcpb`]: the Claude Desktop bundle (`.mcpb`), made and validated by `@anthropic-ai/mcpb`,
//!   which is installed under the target folder (`tools/mcpb`), never globally.
//! - [`registry`]: the MCP Registry's `server.json` (`packaging/registry/server.json` with the
//!   version filled in), pointing at the PyPI and npm packages.
//! - [`check_vsix`]: the VS Code package holds what it should and nothing of the tests.
//!
//! What they stage goes to `<target>/packages/`; what users get goes to `out`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Map, Value, json};

use crate::{root, run, target_dir};

/// The distribution name on PyPI and npm.
pub const DISTRIBUTION: &str = "jupyter-mcp-rs";
/// The server's name in the MCP Registry: npm's `mcpName` and the PyPI README's `mcp-name:`
/// line prove to the registry that its publisher owns those packages.
pub const MCP_NAME: &str = "io.github.jupyter-mcp/jupyter-mcp-rs";
/// The CLI that validates and packs Claude Desktop bundles.
const MCPB_CLI_PACKAGE: &str = "@anthropic-ai/mcpb";
const MCPB_CLI_VERSION: &str = "2.1.2";
const MCPB_MANIFEST_VERSION: &str = "0.3";
const DESCRIPTION: &str =
    "An MCP server for Jupyter notebooks: read cheaply, edit safely, run what needs running.";
const AUTHORS: &str = "The jupyter-mcp authors";
const KEYWORDS: &[&str] = &[
    "jupyter",
    "notebook",
    "mcp",
    "model-context-protocol",
    "ipykernel",
];

/// A platform a package carries a binary for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    LinuxX64,
    #[allow(
        dead_code,
        reason = "no arm64 build yet (CI has no arm64 cross toolchain); the packages are ready for one"
    )]
    LinuxArm64,
    Win32X64,
}

impl Platform {
    /// Node's `process.platform`, which npm's `os` field and MCPB's platforms use.
    pub fn os(self) -> &'static str {
        match self {
            Platform::LinuxX64 | Platform::LinuxArm64 => "linux",
            Platform::Win32X64 => "win32",
        }
    }

    /// Node's `process.arch`, which npm's `cpu` field uses.
    pub fn cpu(self) -> &'static str {
        match self {
            Platform::LinuxX64 | Platform::Win32X64 => "x64",
            Platform::LinuxArm64 => "arm64",
        }
    }

    pub fn exe_suffix(self) -> &'static str {
        match self {
            Platform::Win32X64 => ".exe",
            Platform::LinuxX64 | Platform::LinuxArm64 => "",
        }
    }

    /// `linux-x64`: the launcher finds the package as `jupyter-mcp-rs-${platform}-${arch}`.
    pub fn key(self) -> String {
        format!("{}-{}", self.os(), self.cpu())
    }

    /// The npm package that holds this platform's binary.
    pub fn npm_package(self) -> String {
        format!("{DISTRIBUTION}-{}", self.key())
    }

    /// The binary's file name.
    pub fn binary_name(self) -> String {
        format!("jupyter-mcp{}", self.exe_suffix())
    }

    /// Whether `head` (a file's first bytes) starts an executable of this platform: a PE file
    /// for Windows, an ELF file of the right machine for Linux.
    fn fits(self, head: &[u8]) -> bool {
        match self {
            Platform::Win32X64 => head.starts_with(b"MZ"),
            Platform::LinuxX64 | Platform::LinuxArm64 => {
                // e_machine, little-endian at offset 18: EM_X86_64 = 62, EM_AARCH64 = 183.
                let machine = if self == Platform::LinuxX64 {
                    62u16
                } else {
                    183
                };
                head.len() >= 20
                    && head.starts_with(b"\x7fELF")
                    && u16::from_le_bytes([head[18], head[19]]) == machine
            }
        }
    }
}

/// Fails unless each binary exists, is an executable of its platform, and no platform is given
/// twice.
fn check_binaries(binaries: &[(Platform, PathBuf)]) -> Result<()> {
    ensure!(!binaries.is_empty(), "no binaries to package");
    for (index, (platform, binary)) in binaries.iter().enumerate() {
        ensure!(
            !binaries[..index].iter().any(|(seen, _)| seen == platform),
            "two binaries for {}",
            platform.key()
        );
        let mut head = [0u8; 20];
        let read = {
            use std::io::Read as _;
            let mut file = std::fs::File::open(binary)
                .with_context(|| format!("opening {}", binary.display()))?;
            file.read(&mut head)?
        };
        ensure!(
            platform.fits(&head[..read]),
            "{} is not a {} executable",
            binary.display(),
            platform.key()
        );
    }
    Ok(())
}

/// A fresh staging folder `<target>/packages/<name>`.
fn staging(name: &str) -> Result<PathBuf> {
    let folder = target_dir().join("packages").join(name);
    if folder.exists() {
        std::fs::remove_dir_all(&folder)
            .with_context(|| format!("removing {}", folder.display()))?;
    }
    std::fs::create_dir_all(&folder)?;
    Ok(folder)
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Copies `from` to `to` as an executable (the mode travels in npm's tarball and in the bundle).
fn copy_executable(from: &Path, to: &Path) -> Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

fn packaging(path: &str) -> PathBuf {
    root().join("packaging").join(path)
}

fn read_template(path: &str) -> Result<String> {
    let path = packaging(path);
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

fn copy_license(folder: &Path) -> Result<()> {
    std::fs::copy(root().join("LICENSE"), folder.join("LICENSE")).context("copying LICENSE")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// npm

/// The npm packages, packed into `out`: one per platform in `binaries`, then the main package
/// `jupyter-mcp-rs` that pins exactly those. Publish them in that order (the platform packages
/// first), so that the main package never names a version npm does not have.
pub fn npm(version: &str, binaries: &[(Platform, PathBuf)], out: &Path) -> Result<Vec<PathBuf>> {
    check_binaries(binaries)?;
    std::fs::create_dir_all(out)?;
    let platform_readme = read_template("npm/platform-README.md")?;
    let mut tarballs = Vec::new();
    for (platform, binary) in binaries {
        let folder = staging(&format!("npm/{}", platform.npm_package()))?;
        write_json(
            &folder.join("package.json"),
            &platform_package_json(version, *platform),
        )?;
        copy_executable(binary, &folder.join("bin").join(platform.binary_name()))?;
        copy_license(&folder)?;
        let readme = platform_readme
            .replace("{package}", &platform.npm_package())
            .replace("{platform}", &platform.key());
        std::fs::write(folder.join("README.md"), readme)?;
        tarballs.push(npm_pack(&folder, out)?);
    }
    let platforms: Vec<Platform> = binaries.iter().map(|(platform, _)| *platform).collect();
    let folder = staging(&format!("npm/{DISTRIBUTION}"))?;
    write_json(
        &folder.join("package.json"),
        &main_package_json(version, &platforms),
    )?;
    copy_executable(
        &packaging("npm/launcher.js"),
        &folder.join("bin/jupyter-mcp.js"),
    )?;
    copy_license(&folder)?;
    std::fs::copy(packaging("npm/README.md"), folder.join("README.md"))?;
    tarballs.push(npm_pack(&folder, out)?);
    Ok(tarballs)
}

/// The main package: the launcher as both commands, and the platform packages pinned to this
/// very version (a newer launcher with an older binary is a combination nobody tested).
fn main_package_json(version: &str, platforms: &[Platform]) -> Value {
    let optional: Map<String, Value> = platforms
        .iter()
        .map(|platform| (platform.npm_package(), json!(version)))
        .collect();
    json!({
        "name": DISTRIBUTION,
        "version": version,
        "description": DESCRIPTION,
        "license": "MIT",
        "author": AUTHORS,
        "keywords": KEYWORDS,
        "mcpName": MCP_NAME,
        "bin": {
            "jupyter-mcp": "bin/jupyter-mcp.js",
            DISTRIBUTION: "bin/jupyter-mcp.js",
        },
        "files": ["bin/jupyter-mcp.js"],
        "engines": { "node": ">=18" },
        "optionalDependencies": optional,
    })
}

/// A platform package: the binary and the `os`/`cpu` that make npm skip it elsewhere.
fn platform_package_json(version: &str, platform: Platform) -> Value {
    json!({
        "name": platform.npm_package(),
        "version": version,
        "description": format!("The jupyter-mcp binary for {} (installed by {DISTRIBUTION}).", platform.key()),
        "license": "MIT",
        "author": AUTHORS,
        "os": [platform.os()],
        "cpu": [platform.cpu()],
        "files": [format!("bin/{}", platform.binary_name())],
        // Yarn PnP would otherwise run the binary from inside a zip archive.
        "preferUnplugged": true,
    })
}

/// `npm pack` of `folder` into `out`; the tarball's path.
fn npm_pack(folder: &Path, out: &Path) -> Result<PathBuf> {
    let mut command = Command::new("npm");
    command
        .current_dir(folder)
        .args(["pack", "--json", "--pack-destination"])
        .arg(out)
        .stderr(Stdio::inherit());
    eprintln!("$ {command:?}");
    let output = command.output().context("running npm pack")?;
    ensure!(
        output.status.success(),
        "npm pack in {} failed with {}",
        folder.display(),
        output.status
    );
    let packed: Value = serde_json::from_slice(&output.stdout).context("npm pack --json")?;
    let filename = packed[0]["filename"]
        .as_str()
        .context("npm pack --json names no file")?;
    let tarball = out.join(filename);
    eprintln!("packages: {} ({})", tarball.display(), size_text(&tarball));
    Ok(tarball)
}

fn size_text(path: &Path) -> String {
    std::fs::metadata(path).map_or_else(
        |_| "missing".to_owned(),
        |metadata| format!("{:.1} MiB", metadata.len() as f64 / (1024.0 * 1024.0)),
    )
}

// ---------------------------------------------------------------------------------------------
// Claude Desktop bundle

/// The Claude Desktop bundle `jupyter-mcp-rs-<version>.mcpb` in `out`, with the binaries of the
/// platforms given, validated by `mcpb validate` and packed by `mcpb pack`.
///
/// MCPB chooses a command by operating system only, not by CPU: a bundle holds one Linux
/// binary, x64 when both are given (Claude Desktop itself runs on macOS and Windows).
pub fn mcpb(version: &str, binaries: &[(Platform, PathBuf)], out: &Path) -> Result<PathBuf> {
    check_binaries(binaries)?;
    let bundled = bundled_binaries(binaries);
    let folder = staging("mcpb")?;
    let platforms: Vec<Platform> = bundled.iter().map(|(platform, _)| *platform).collect();
    let manifest = mcpb_manifest(
        version,
        &platforms,
        &read_template("mcpb/long_description.md")?,
    );
    write_json(&folder.join("manifest.json"), &manifest)?;
    for (platform, binary) in &bundled {
        copy_executable(binary, &folder.join("server").join(platform.binary_name()))?;
    }
    copy_license(&folder)?;
    // The extension's icon drawn at the 512 px Claude Desktop asks for (packaging/icon).
    std::fs::copy(packaging("mcpb/icon.png"), folder.join("icon.png"))
        .context("copying the icon")?;

    let cli = mcpb_cli()?;
    run(Command::new(&cli)
        .arg("validate")
        .arg(folder.join("manifest.json")))
    .context("the bundle's manifest is not valid")?;
    std::fs::create_dir_all(out)?;
    let bundle = out.join(format!("{DISTRIBUTION}-{version}.mcpb"));
    if bundle.exists() {
        std::fs::remove_file(&bundle)?;
    }
    run(Command::new(&cli).arg("pack").arg(&folder).arg(&bundle))?;
    ensure!(bundle.exists(), "mcpb pack made no {}", bundle.display());
    eprintln!("packages: {} ({})", bundle.display(), size_text(&bundle));
    Ok(bundle)
}

/// The binaries a bundle carries: one per operating system.
fn bundled_binaries(binaries: &[(Platform, PathBuf)]) -> Vec<(Platform, PathBuf)> {
    let has_linux_x64 = binaries
        .iter()
        .any(|(platform, _)| *platform == Platform::LinuxX64);
    binaries
        .iter()
        .filter(|(platform, _)| {
            let left_out = *platform == Platform::LinuxArm64 && has_linux_x64;
            if left_out {
                eprintln!(
                    "packages: the bundle carries the linux-x64 binary; linux-arm64 is left out (MCPB picks a binary by OS, not CPU)"
                );
            }
            !left_out
        })
        .cloned()
        .collect()
}

/// The bundle's manifest for binaries of `platforms` (at most one per OS).
fn mcpb_manifest(version: &str, platforms: &[Platform], long_description: &str) -> Value {
    let has_windows = platforms.contains(&Platform::Win32X64);
    let has_unix = platforms.iter().any(|platform| platform.os() != "win32");
    let unix = "server/jupyter-mcp";
    let windows = "server/jupyter-mcp.exe";
    let entry_point = if has_unix { unix } else { windows };
    let mut mcp_config = json!({
        "command": format!("${{__dirname}}/{entry_point}"),
        "args": ["serve", "--stdio", "--root", "${user_config.notebooks_folder}"],
    });
    if has_unix && has_windows {
        mcp_config["platform_overrides"] = json!({
            "win32": { "command": format!("${{__dirname}}/{windows}") }
        });
    }
    let mut oses: Vec<&str> = platforms.iter().map(|platform| platform.os()).collect();
    oses.dedup();
    json!({
        "manifest_version": MCPB_MANIFEST_VERSION,
        "name": DISTRIBUTION,
        "display_name": "Jupyter MCP",
        "version": version,
        "description": DESCRIPTION,
        "long_description": long_description,
        "author": { "name": AUTHORS },
        "license": "MIT",
        "keywords": KEYWORDS,
        "icon": "icon.png",
        "server": {
            "type": "binary",
            "entry_point": entry_point,
            "mcp_config": mcp_config,
        },
        "tools": bundled_tools(),
        // The Colab tools appear when a Colab runtime is configured.
        "tools_generated": true,
        "user_config": {
            "notebooks_folder": {
                "type": "directory",
                "title": "Notebooks folder",
                "description": "The folder whose notebooks the server reads, edits and runs. Nothing outside it is reachable.",
                "required": true,
                "default": "${DOCUMENTS}",
            }
        },
        "compatibility": { "platforms": oses },
    })
}

/// The tools the standalone server lists with local kernels, with the first sentence of each
/// description (the manifest is for a store page; `tools/list` stays authoritative).
fn bundled_tools() -> Vec<Value> {
    use mcp_contract::catalog::Capability;
    mcp_contract::all_tools()
        .iter()
        .filter(|spec| {
            !matches!(
                spec.capability,
                Capability::Colab | Capability::ColabMount | Capability::ColabEnvironment
            )
        })
        .map(|spec| {
            let description = spec
                .description
                .split_once(". ")
                .map_or(spec.description, |(first, _)| first)
                .trim_end_matches('.');
            json!({ "name": spec.name, "description": format!("{description}.") })
        })
        .collect()
}

/// The `mcpb` command, installed with npm under `<target>/tools/mcpb` when it is not there at the
/// pinned version.
fn mcpb_cli() -> Result<PathBuf> {
    let prefix = target_dir().join("tools/mcpb");
    let installed = prefix
        .join("node_modules")
        .join(MCPB_CLI_PACKAGE)
        .join("package.json");
    let current = std::fs::read_to_string(&installed)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|package| package["version"] == MCPB_CLI_VERSION);
    if !current {
        std::fs::create_dir_all(&prefix)?;
        run(Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(format!("{MCPB_CLI_PACKAGE}@{MCPB_CLI_VERSION}")))?;
    }
    Ok(prefix.join("node_modules/.bin/mcpb"))
}

// ---------------------------------------------------------------------------------------------
// VS Code package

/// Fails when the packaged extension `vsix` holds what `.vscodeignore` should keep out (the
/// sources, the tests, the end-to-end harness, source maps) or lacks what the Marketplace page
/// and the extension need.
pub fn check_vsix(vsix: &Path) -> Result<()> {
    let output = Command::new("unzip")
        .arg("-Z1")
        .arg(vsix)
        .output()
        .context("running unzip")?;
    ensure!(
        output.status.success(),
        "unzip -Z1 {} failed with {}",
        vsix.display(),
        output.status
    );
    let listing = String::from_utf8_lossy(&output.stdout);
    let names: Vec<&str> = listing.lines().collect();
    let problems = vsix_problems(&names);
    ensure!(
        problems.is_empty(),
        "{}:\n  {}",
        vsix.display(),
        problems.join("\n  ")
    );
    eprintln!(
        "packages: {} holds {} files, none of them tests or sources",
        vsix.display(),
        names.len()
    );
    Ok(())
}

fn vsix_problems(names: &[&str]) -> Vec<String> {
    const LEFT_OUT: &[&str] = &[
        "extension/e2e/",
        "extension/test/",
        "extension/src/",
        "extension/node_modules/",
    ];
    const REQUIRED: &[&str] = &[
        "extension/package.json",
        "extension/LICENSE.txt",
        "extension/readme.md",
        "extension/icon.png",
        "extension/out/extension.js",
        "extension/native/jupyter-mcp.node",
    ];
    let mut problems: Vec<String> = names
        .iter()
        .filter(|name| {
            LEFT_OUT.iter().any(|prefix| name.starts_with(prefix))
                || name.ends_with(".map")
                || name.ends_with(".vsix")
                || (name.ends_with(".ts") && !name.ends_with(".d.ts"))
        })
        .map(|name| format!("{name} should be left out (.vscodeignore)"))
        .collect();
    problems.extend(
        REQUIRED
            .iter()
            .filter(|required| !names.contains(required))
            .map(|required| format!("{required} is missing")),
    );
    problems
}

// ---------------------------------------------------------------------------------------------
// MCP Registry

/// The MCP Registry's `server.json` for `version`, in `out`: `packaging/registry/server.json`
/// with its `0.0.0` placeholders replaced, checked for what the registry's schema requires.
pub fn registry(version: &str, out: &Path) -> Result<PathBuf> {
    let server = registry_server_json(version, &read_template("registry/server.json")?)?;
    check_server_json(&server)?;
    std::fs::create_dir_all(out)?;
    let path = out.join("server.json");
    write_json(&path, &server)?;
    eprintln!("packages: {}", path.display());
    Ok(path)
}

fn registry_server_json(version: &str, template: &str) -> Result<Value> {
    let mut server: Value =
        serde_json::from_str(template).context("packaging/registry/server.json")?;
    server["version"] = json!(version);
    for package in server["packages"]
        .as_array_mut()
        .context("server.json has no packages")?
    {
        package["version"] = json!(version);
    }
    Ok(server)
}

/// What the registry's schema (2025-12-11) and its publishing rules require of the fields we
/// use. The schema itself is not reachable offline, so these are its rules, written out.
fn check_server_json(server: &Value) -> Result<()> {
    let text = |value: &Value, what: &str| -> Result<String> {
        Ok(value
            .as_str()
            .with_context(|| format!("server.json: {what} is not a string"))?
            .to_owned())
    };
    let schema = text(&server["$schema"], "$schema")?;
    ensure!(
        schema.starts_with("https://static.modelcontextprotocol.io/schemas/")
            && schema.ends_with("/server.schema.json"),
        "server.json: $schema {schema} is not a registry schema"
    );
    let name = text(&server["name"], "name")?;
    let (namespace, server_name) = name
        .split_once('/')
        .context("server.json: name has no slash")?;
    let allowed = |part: &str, extra: &str| {
        !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || extra.contains(c))
    };
    ensure!(
        allowed(namespace, "") && allowed(server_name, "_") && (3..=200).contains(&name.len()),
        "server.json: name {name} is not reverse-DNS namespace/name"
    );
    ensure!(
        name == MCP_NAME,
        "server.json: name {name} is not {MCP_NAME}"
    );
    let description = text(&server["description"], "description")?;
    ensure!(
        (1..=100).contains(&description.chars().count()),
        "server.json: the description must have 1 to 100 characters"
    );
    let version = text(&server["version"], "version")?;
    ensure!(
        is_exact_version(&version),
        "server.json: version {version} is not one exact version"
    );
    let packages = server["packages"]
        .as_array()
        .context("server.json: packages is not an array")?;
    ensure!(!packages.is_empty(), "server.json: no packages");
    for package in packages {
        let registry_type = text(&package["registryType"], "registryType")?;
        let identifier = text(&package["identifier"], "identifier")?;
        let package_version = text(&package["version"], "a package's version")?;
        ensure!(
            is_exact_version(&package_version),
            "server.json: {identifier} version {package_version} is not one exact version"
        );
        let base = text(&package["registryBaseUrl"], "registryBaseUrl")?;
        let expected_base = match registry_type.as_str() {
            "npm" => "https://registry.npmjs.org",
            "pypi" => "https://pypi.org",
            other => bail!("server.json: unexpected registryType {other}"),
        };
        ensure!(
            base == expected_base,
            "server.json: {registry_type} packages must come from {expected_base}"
        );
        ensure!(
            package["transport"]["type"] == "stdio",
            "server.json: {registry_type} {identifier} is not stdio"
        );
        for argument in package["packageArguments"].as_array().into_iter().flatten() {
            match argument["type"].as_str() {
                Some("positional") => ensure!(
                    argument["value"].is_string() || argument["valueHint"].is_string(),
                    "server.json: a positional argument needs value or valueHint"
                ),
                Some("named") => ensure!(
                    argument["name"]
                        .as_str()
                        .is_some_and(|flag| flag.starts_with('-')),
                    "server.json: a named argument needs its flag as name"
                ),
                _ => bail!("server.json: an argument is neither positional nor named"),
            }
        }
    }
    Ok(())
}

/// One exact version: the registry rejects `latest` and ranges (`^1.2.3`, `>=1`, `1.x`, `1.*`).
fn is_exact_version(version: &str) -> bool {
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION: &str = "1.2.3";
    const ALL: [Platform; 3] = [Platform::LinuxX64, Platform::LinuxArm64, Platform::Win32X64];

    #[test]
    fn platform_packages_declare_their_os_and_cpu_and_hold_the_binary() {
        let cases = [
            (
                Platform::LinuxX64,
                "jupyter-mcp-rs-linux-x64",
                "linux",
                "x64",
                "bin/jupyter-mcp",
            ),
            (
                Platform::LinuxArm64,
                "jupyter-mcp-rs-linux-arm64",
                "linux",
                "arm64",
                "bin/jupyter-mcp",
            ),
            (
                Platform::Win32X64,
                "jupyter-mcp-rs-win32-x64",
                "win32",
                "x64",
                "bin/jupyter-mcp.exe",
            ),
        ];
        for (platform, name, os, cpu, file) in cases {
            let package = platform_package_json(VERSION, platform);
            assert_eq!(package["name"], name);
            assert_eq!(package["version"], VERSION);
            assert_eq!(package["os"], json!([os]));
            assert_eq!(package["cpu"], json!([cpu]));
            assert_eq!(package["files"], json!([file]));
            assert!(
                package.get("bin").is_none(),
                "only the main package has commands"
            );
        }
    }

    #[test]
    fn the_main_package_pins_each_platform_package_to_its_own_version() {
        let package = main_package_json(VERSION, &ALL);
        assert_eq!(package["name"], "jupyter-mcp-rs");
        assert_eq!(package["version"], VERSION);
        assert_eq!(
            package["optionalDependencies"],
            json!({
                "jupyter-mcp-rs-linux-x64": VERSION,
                "jupyter-mcp-rs-linux-arm64": VERSION,
                "jupyter-mcp-rs-win32-x64": VERSION,
            })
        );
        // Only the platforms given: a package never names one that was not published.
        let linux_only = main_package_json(VERSION, &[Platform::LinuxX64]);
        assert_eq!(
            linux_only["optionalDependencies"],
            json!({ "jupyter-mcp-rs-linux-x64": VERSION })
        );
        assert!(package.get("dependencies").is_none());
    }

    #[test]
    fn the_main_package_runs_the_launcher_as_both_commands() {
        let package = main_package_json(VERSION, &ALL);
        // `npx jupyter-mcp-rs` runs the command named after the package.
        assert_eq!(
            package["bin"],
            json!({ "jupyter-mcp": "bin/jupyter-mcp.js", "jupyter-mcp-rs": "bin/jupyter-mcp.js" })
        );
        assert_eq!(package["files"], json!(["bin/jupyter-mcp.js"]));
        assert_eq!(package["mcpName"], MCP_NAME);
        let launcher = std::fs::read_to_string(packaging("npm/launcher.js")).unwrap();
        assert!(launcher.starts_with("#!/usr/bin/env node\n"));
        // The launcher derives the platform package's name the way `Platform::npm_package` does.
        assert!(launcher.contains("`${manifest.name}-${platformKey}`"));
        assert!(launcher.contains("`${process.platform}-${process.arch}`"));
    }

    #[test]
    fn binaries_are_checked_against_their_platform() {
        let mut elf_x64 = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0".to_vec();
        elf_x64.extend_from_slice(&62u16.to_le_bytes());
        let mut elf_arm64 = elf_x64[..18].to_vec();
        elf_arm64.extend_from_slice(&183u16.to_le_bytes());
        assert!(Platform::LinuxX64.fits(&elf_x64));
        assert!(!Platform::LinuxArm64.fits(&elf_x64));
        assert!(Platform::LinuxArm64.fits(&elf_arm64));
        assert!(!Platform::Win32X64.fits(&elf_x64));
        assert!(Platform::Win32X64.fits(b"MZ\x90\0"));
        assert!(!Platform::LinuxX64.fits(b"MZ\x90\0"));
    }

    #[test]
    fn the_bundle_runs_the_binary_on_the_chosen_folder() {
        let manifest = mcpb_manifest(VERSION, &[Platform::LinuxX64, Platform::Win32X64], "long");
        assert_eq!(manifest["manifest_version"], "0.3");
        assert_eq!(manifest["version"], VERSION);
        let server = &manifest["server"];
        assert_eq!(server["type"], "binary");
        assert_eq!(server["entry_point"], "server/jupyter-mcp");
        assert_eq!(
            server["mcp_config"]["command"],
            "${__dirname}/server/jupyter-mcp"
        );
        assert_eq!(
            server["mcp_config"]["args"],
            json!([
                "serve",
                "--stdio",
                "--root",
                "${user_config.notebooks_folder}"
            ])
        );
        assert_eq!(
            server["mcp_config"]["platform_overrides"]["win32"]["command"],
            "${__dirname}/server/jupyter-mcp.exe"
        );
        assert_eq!(
            manifest["user_config"]["notebooks_folder"]["type"],
            "directory"
        );
        assert_eq!(
            manifest["compatibility"]["platforms"],
            json!(["linux", "win32"])
        );

        let windows_only = mcpb_manifest(VERSION, &[Platform::Win32X64], "long");
        assert_eq!(
            windows_only["server"]["entry_point"],
            "server/jupyter-mcp.exe"
        );
        assert!(
            windows_only["server"]["mcp_config"]
                .get("platform_overrides")
                .is_none()
        );
        assert_eq!(windows_only["compatibility"]["platforms"], json!(["win32"]));
    }

    #[test]
    fn the_bundle_carries_one_linux_binary() {
        let all: Vec<(Platform, PathBuf)> = ALL
            .iter()
            .map(|platform| (*platform, PathBuf::from(platform.key())))
            .collect();
        let bundled: Vec<Platform> = bundled_binaries(&all).into_iter().map(|(p, _)| p).collect();
        assert_eq!(bundled, [Platform::LinuxX64, Platform::Win32X64]);
        let arm_only = [(Platform::LinuxArm64, PathBuf::from("arm"))];
        assert_eq!(bundled_binaries(&arm_only).len(), 1);
    }

    #[test]
    fn the_bundle_lists_the_tools_of_local_kernels() {
        let names: Vec<String> = bundled_tools()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap().to_owned())
            .collect();
        for name in [
            "list_notebooks",
            "read_notebook",
            "edit_cells",
            "run_cells",
            "upload_file",
        ] {
            assert!(
                names.iter().any(|listed| listed == name),
                "{name} in {names:?}"
            );
        }
        assert!(
            !names.iter().any(|name| name.contains("colab")),
            "{names:?}"
        );
    }

    #[test]
    fn the_vsix_check_wants_the_shipped_files_and_no_tests() {
        let shipped = [
            "extension.vsixmanifest",
            "[Content_Types].xml",
            "extension/LICENSE.txt",
            "extension/readme.md",
            "extension/icon.png",
            "extension/package.json",
            "extension/native/jupyter-mcp.node",
            "extension/out/extension.js",
            "extension/out/shell.js",
        ];
        assert_eq!(vsix_problems(&shipped), Vec::<String>::new());
        let mut leaky = shipped.to_vec();
        leaky.extend(["extension/e2e/e2e.js", "extension/out/shell.js.map"]);
        assert_eq!(
            vsix_problems(&leaky).len(),
            2,
            "{:?}",
            vsix_problems(&leaky)
        );
        let bare = [
            "extension/package.json",
            "extension/out/extension.js",
            "extension/native/jupyter-mcp.node",
        ];
        assert_eq!(vsix_problems(&bare).len(), 3, "{:?}", vsix_problems(&bare));
    }

    #[test]
    fn the_registry_entry_names_both_packages_with_the_required_fields() {
        let template = std::fs::read_to_string(packaging("registry/server.json")).unwrap();
        let server = registry_server_json(VERSION, &template).unwrap();
        check_server_json(&server).unwrap();
        assert_eq!(
            server["$schema"],
            "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
        );
        assert_eq!(server["name"], MCP_NAME);
        assert_eq!(server["version"], VERSION);
        let packages = server["packages"].as_array().unwrap();
        let kinds: Vec<(&str, &str)> = packages
            .iter()
            .map(|package| {
                assert_eq!(package["version"], VERSION);
                assert_eq!(package["transport"], json!({ "type": "stdio" }));
                let arguments: Vec<&str> = package["packageArguments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|argument| {
                        argument["value"]
                            .as_str()
                            .or(argument["name"].as_str())
                            .unwrap()
                    })
                    .collect();
                assert_eq!(arguments, ["serve", "--stdio", "--root"]);
                (
                    package["registryType"].as_str().unwrap(),
                    package["identifier"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(kinds, [("pypi", DISTRIBUTION), ("npm", DISTRIBUTION)]);
    }

    /// A name for a change that makes a `server.json` invalid, and the change.
    type Breakage = (&'static str, fn(&mut Value));

    #[test]
    fn the_registry_check_refuses_what_the_registry_refuses() {
        let template = std::fs::read_to_string(packaging("registry/server.json")).unwrap();
        let good = registry_server_json(VERSION, &template).unwrap();
        let broken: [Breakage; 5] = [
            ("range", |server| server["version"] = json!("^1.2.3")),
            ("latest", |server| {
                server["packages"][0]["version"] = json!("latest")
            }),
            ("long description", |server| {
                server["description"] = json!("x".repeat(101))
            }),
            ("no slash", |server| {
                server["name"] = json!("jupyter-mcp-rs")
            }),
            ("other registry", |server| {
                server["packages"][1]["registryBaseUrl"] = json!("https://npm.example")
            }),
        ];
        for (what, breaks) in broken {
            let mut server = good.clone();
            breaks(&mut server);
            assert!(check_server_json(&server).is_err(), "{what} passed");
        }
    }

    #[test]
    fn the_pypi_readme_names_the_server_for_the_registry() {
        // The registry looks for the text in the README PyPI shows (an HTML comment will do).
        let readme = std::fs::read_to_string(packaging("python/README.md")).unwrap();
        assert!(
            readme.contains(&format!("mcp-name: {MCP_NAME}")),
            "packaging/python/README.md lacks `mcp-name: {MCP_NAME}`"
        );
    }
}
