//! Paths and URIs under a root folder. Everything a client names is resolved here, and anything
//! that leaves the root (`..`, absolute paths elsewhere, symlinks that escape) is refused.

use std::path::{Component, Path, PathBuf};

use host_core::HostError;

/// The allowed root, canonicalised once.
#[derive(Debug, Clone)]
pub struct Root {
    canonical: PathBuf,
}

/// A path inside the root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RootedPath {
    /// Absolute path (symlinks in existing ancestors resolved).
    pub absolute: PathBuf,
    /// Relative to the root, `/`-separated.
    pub relative: String,
}

pub use host_core::refs::file_uri;

/// Resolves `.` and `..` without touching the filesystem; `None` when `..` climbs above `/`.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut normalized = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => normalized.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !normalized.pop() {
                    return None;
                }
            }
            Component::Normal(part) => normalized.push(part),
        }
    }
    Some(normalized)
}

/// The path of a `file:` URI after its `file://`.
#[cfg(not(windows))]
fn file_uri_path(rest: &str) -> Option<PathBuf> {
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    host_core::refs::percent_decode(rest).map(PathBuf::from)
}

/// The path of a `file:` URI after its `file://` (`/c%3A/a`, `/C:/a`, `server/share/a`).
#[cfg(windows)]
fn file_uri_path(rest: &str) -> Option<PathBuf> {
    host_core::windows_paths::WinPath::from_file_uri(&format!("file://{rest}"))
        .map(|path| PathBuf::from(path.to_string()))
}

/// The path as people write it: on Windows without the `\\?\` that `canonicalize` adds.
#[cfg(not(windows))]
fn plain(path: PathBuf) -> PathBuf {
    path
}

#[cfg(windows)]
fn plain(path: PathBuf) -> PathBuf {
    host_core::windows_paths::WinPath::parse(&path.to_string_lossy())
        .map_or(path, |parsed| PathBuf::from(parsed.to_string()))
}

impl Root {
    /// The root folder `path`, canonicalised; it must exist and be a folder.
    pub fn new(path: &Path) -> std::io::Result<Root> {
        let canonical = plain(path.canonicalize()?);
        if !canonical.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a folder", canonical.display()),
            ));
        }
        Ok(Root { canonical })
    }

    /// The canonical folder.
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// The folder's name, for the window label.
    pub fn label(&self) -> String {
        self.canonical.file_name().map_or_else(
            || "/".to_owned(),
            |name| name.to_string_lossy().into_owned(),
        )
    }

    fn outside(&self, reference: &str) -> HostError {
        HostError::OutsideRoot {
            reference: reference.to_owned(),
            root: self.canonical.display().to_string(),
        }
    }

    /// Resolves a `file:` URI, an absolute path or a root-relative path.
    pub fn resolve(&self, reference: &str) -> Result<RootedPath, HostError> {
        if reference.contains('\0') {
            return Err(HostError::InvalidPath {
                reference: reference.escape_debug().to_string(),
                reason: "a path cannot contain a NUL character; name the file without it"
                    .to_owned(),
            });
        }
        let raw = if let Some(rest) = reference.strip_prefix("file://") {
            file_uri_path(rest).ok_or_else(|| HostError::NotFound {
                reference: reference.to_owned(),
            })?
        } else if reference.starts_with("file:") || reference.contains("://") {
            return Err(HostError::NotFound {
                reference: reference.to_owned(),
            });
        } else {
            #[cfg(windows)]
            if host_core::windows_paths::WinPath::parse(reference)
                == Err(host_core::windows_paths::NotAbsolute::Ambiguous)
            {
                return Err(HostError::InvalidPath {
                    reference: reference.to_owned(),
                    reason: "a path relative to a drive (`C:name`) or to the current drive's \
                             root (`\\name`) is ambiguous; name it from the root folder or \
                             in full (`C:\\folder\\name.ipynb`)"
                        .to_owned(),
                });
            }
            let path = Path::new(reference);
            if path.is_absolute() {
                path.to_path_buf()
            } else {
                self.canonical.join(path)
            }
        };
        let normalized = normalize(&raw).ok_or_else(|| self.outside(reference))?;
        // Resolve symlinks in the longest existing ancestor, then re-attach the rest.
        let mut existing = normalized.clone();
        let mut remainder = Vec::new();
        let resolved = loop {
            match existing.canonicalize() {
                Ok(canonical) => break canonical,
                Err(_) => {
                    let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                        return Err(self.outside(reference));
                    };
                    remainder.push(name);
                    if !existing.pop() {
                        return Err(self.outside(reference));
                    }
                }
            }
        };
        let mut absolute = plain(resolved);
        for part in remainder.into_iter().rev() {
            absolute.push(part);
        }
        let relative = self
            .relative(&absolute)
            .ok_or_else(|| self.outside(reference))?;
        Ok(RootedPath { absolute, relative })
    }

    /// `absolute` under the root, `/`-separated; `None` when it is elsewhere.
    #[cfg(not(windows))]
    fn relative(&self, absolute: &Path) -> Option<String> {
        let relative = absolute.strip_prefix(&self.canonical).ok()?;
        Some(
            relative
                .components()
                .map(|component| component.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/"),
        )
    }

    /// `absolute` under the root, `/`-separated; `None` when it is elsewhere (names compared
    /// without regard to case, as Windows compares them).
    #[cfg(windows)]
    fn relative(&self, absolute: &Path) -> Option<String> {
        use host_core::windows_paths::WinPath;
        let root = WinPath::parse(&self.canonical.to_string_lossy()).ok()?;
        WinPath::parse(&absolute.to_string_lossy())
            .ok()?
            .relative_to(&root)
    }

    /// Like [`Root::resolve`], and the path must name an `.ipynb` file (not the root itself).
    pub fn resolve_notebook(&self, reference: &str) -> Result<RootedPath, HostError> {
        let rooted = self.resolve(reference)?;
        let is_notebook = rooted
            .absolute
            .extension()
            .is_some_and(|extension| extension.eq_ignore_ascii_case("ipynb"));
        if rooted.relative.is_empty() || !is_notebook || rooted.absolute.is_dir() {
            return Err(HostError::NotANotebook {
                reference: reference.to_owned(),
            });
        }
        Ok(rooted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_core::refs::percent_decode;

    #[test]
    fn uris_round_trip_with_escapes() {
        let path = Path::new("/tmp/a b/ü\"q'.ipynb");
        let uri = file_uri(path);
        assert_eq!(uri, "file:///tmp/a%20b/%C3%BC%22q%27.ipynb");
        assert_eq!(
            percent_decode(&uri["file://".len()..]).unwrap(),
            path.to_str().unwrap()
        );
    }

    #[test]
    fn confinement() {
        let outer = tempfile::tempdir().unwrap();
        let root_dir = outer.path().join("root");
        std::fs::create_dir_all(root_dir.join("sub")).unwrap();
        std::fs::write(outer.path().join("secret.ipynb"), "{}").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(outer.path(), root_dir.join("escape")).unwrap();
        let root = Root::new(&root_dir).unwrap();
        let inside = root.resolve_notebook("sub/new.ipynb").unwrap();
        assert_eq!(inside.relative, "sub/new.ipynb");
        let via_uri = root.resolve_notebook(&file_uri(&inside.absolute)).unwrap();
        assert_eq!(via_uri, inside);
        for bad in [
            "../secret.ipynb",
            "sub/../../secret.ipynb",
            #[cfg(unix)]
            "escape/secret.ipynb",
            "/etc/passwd.ipynb",
        ] {
            assert!(
                matches!(
                    root.resolve_notebook(bad),
                    Err(HostError::OutsideRoot { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            root.resolve_notebook("sub/file.txt"),
            Err(HostError::NotANotebook { .. })
        ));
        assert!(matches!(
            root.resolve_notebook("a\0.ipynb"),
            Err(HostError::InvalidPath { .. })
        ));
        assert!(root.resolve_notebook("http://x/a.ipynb").is_err());
    }
}
