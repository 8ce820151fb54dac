//! Files on a host's side of a transfer, confined to allowed folders.
//!
//! Layer 3 (adapter). [`ConfinedFiles`] is the [`host_core::HostFiles`] of the standalone host
//! (its root folder) and of a VS Code window (its workspace folders): every path is resolved
//! against the folders again before each operation, so `..`, absolute paths elsewhere and
//! symlinks that escape are refused; a download's temporary file is created exclusively and
//! synced before it is promoted, by a hard link that never replaces an existing file, or by an
//! atomic rename when overwriting was asked for. [`root`] resolves paths and URIs under one
//! folder, for notebooks as well as transfer files. Knows nothing of notebooks, kernels or
//! tools.
//!
//! ```
//! use host_core::HostFiles;
//! use host_files::ConfinedFiles;
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let folder = tempfile::tempdir().unwrap();
//! let files = ConfinedFiles::new(&[folder.path().to_path_buf()]).unwrap();
//! assert!(files.resolve("data/x.csv").await.unwrap().ends_with("x.csv"));
//! assert!(files.resolve("../escape.csv").await.is_err());
//! # });
//! ```
#![warn(missing_docs)]

pub mod root;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_core::{BoxFuture, HostError, HostFileReader, HostFileWriter, HostFiles};

pub use root::{Root, RootedPath, file_uri};

/// Transfer files inside a set of folders; relative paths are relative to the first.
#[derive(Debug, Clone)]
pub struct ConfinedFiles {
    roots: Arc<Vec<Root>>,
}

impl ConfinedFiles {
    /// Files inside `folders` (each must exist). Fails when there is none or one is not a
    /// folder.
    pub fn new(folders: &[PathBuf]) -> io::Result<ConfinedFiles> {
        if folders.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "transfers need at least one folder",
            ));
        }
        let roots = folders
            .iter()
            .map(|folder| Root::new(folder))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(ConfinedFiles {
            roots: Arc::new(roots),
        })
    }

    /// Files inside these already resolved roots.
    pub fn from_roots(roots: Vec<Root>) -> ConfinedFiles {
        assert!(!roots.is_empty(), "at least one root");
        ConfinedFiles {
            roots: Arc::new(roots),
        }
    }

    /// Resolves `reference` inside one of the folders: relative references against the first,
    /// absolute paths and `file:` URIs against the folder that holds them.
    fn rooted(&self, reference: &str) -> Result<RootedPath, HostError> {
        let mut first_failure = None;
        for root in self.roots.iter() {
            match root.resolve(reference) {
                Ok(rooted) => return Ok(rooted),
                Err(HostError::OutsideRoot { .. }) => {}
                Err(other) => {
                    first_failure.get_or_insert(other);
                }
            }
            if !Path::new(reference).is_absolute() && !reference.starts_with("file:") {
                // Relative references belong to the first folder only.
                break;
            }
        }
        Err(first_failure.unwrap_or_else(|| HostError::OutsideRoot {
            reference: reference.to_owned(),
            root: self.describe_roots(),
        }))
    }

    fn describe_roots(&self) -> String {
        let folders: Vec<String> = self
            .roots
            .iter()
            .map(|root| root.path().display().to_string())
            .collect();
        match folders.as_slice() {
            [one] => one.clone(),
            many => format!("one of {}", many.join(", ")),
        }
    }

    /// A path the transfer machine hands back (a resolved file or a temporary file beside it),
    /// confined again; never a folder itself.
    fn confined(&self, path: &str) -> io::Result<PathBuf> {
        match self.rooted(path) {
            Ok(rooted) if !rooted.relative.is_empty() => Ok(rooted.absolute),
            _ => Err(io::ErrorKind::PermissionDenied.into()),
        }
    }
}

fn io_error(action: &'static str, path: &Path, error: &io::Error) -> HostError {
    HostError::Io {
        action,
        path: path.display().to_string(),
        reason: error.kind().to_string(),
    }
}

/// Runs blocking file work off the async executor.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join_error| Err(io::Error::other(join_error)))
}

/// Syncs a folder so that a link or rename in it survives a crash (best effort; folders cannot
/// be opened for syncing on every platform).
fn sync_folder(path: &Path) {
    if let Some(folder) = path.parent()
        && let Ok(directory) = File::open(folder)
    {
        let _ = directory.sync_all();
    }
}

/// Reads `buffer.len()` bytes at `offset` (fewer only at the end of the file).
#[cfg(unix)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buffer, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buffer, offset)
}

/// Writes all of `bytes` at `offset`.
#[cfg(unix)]
fn write_all_at(file: &File, bytes: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(windows)]
fn write_all_at(file: &File, mut bytes: &[u8], mut offset: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        let written = std::os::windows::fs::FileExt::seek_write(file, bytes, offset)?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        bytes = &bytes[written..];
        offset += written as u64;
    }
    Ok(())
}

/// A host file an upload reads, kept open so that a file replaced by rename mid-way is not
/// mixed in.
struct Source {
    file: Arc<File>,
    size: u64,
}

impl HostFileReader for Source {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&mut self, offset: u64, len: usize) -> BoxFuture<'_, io::Result<Vec<u8>>> {
        let file = self.file.clone();
        Box::pin(blocking(move || {
            let mut bytes = vec![0; len];
            let mut filled = 0;
            while filled < len {
                match read_at(&file, &mut bytes[filled..], offset + filled as u64) {
                    Ok(0) => break,
                    Ok(read) => filled += read,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => return Err(error),
                }
            }
            bytes.truncate(filled);
            Ok(bytes)
        }))
    }
}

/// A download's temporary file.
struct Temp {
    file: Arc<File>,
}

impl HostFileWriter for Temp {
    fn write_at(&mut self, offset: u64, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        let file = self.file.clone();
        Box::pin(blocking(move || write_all_at(&file, &bytes, offset)))
    }

    fn sync_and_close(self: Box<Self>) -> BoxFuture<'static, io::Result<()>> {
        let file = self.file;
        Box::pin(blocking(move || file.sync_all()))
    }
}

impl HostFiles for ConfinedFiles {
    fn resolve<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            let rooted = self.rooted(reference)?;
            let invalid = |reason: &str| HostError::InvalidPath {
                reference: reference.to_owned(),
                reason: reason.to_owned(),
            };
            if rooted.relative.is_empty() || rooted.absolute.is_dir() {
                return Err(invalid("it names a folder; give the path of a file"));
            }
            rooted
                .absolute
                .to_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid("the path is not valid UTF-8"))
        })
    }

    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn HostFileReader>, HostError>> {
        Box::pin(async move {
            let absolute = self.confined(path).map_err(|_| HostError::OutsideRoot {
                reference: path.to_owned(),
                root: self.describe_roots(),
            })?;
            let reference = path.to_owned();
            let opened = blocking(move || {
                // Checked before opening, so that opening a FIFO cannot block.
                let metadata = fs::metadata(&absolute)?;
                if !metadata.is_file() {
                    return Ok(Err("it is not a regular file"));
                }
                let file = File::open(&absolute)?;
                let metadata = file.metadata()?;
                if !metadata.is_file() {
                    return Ok(Err("it is not a regular file"));
                }
                Ok(Ok(Source {
                    file: Arc::new(file),
                    size: metadata.len(),
                }))
            })
            .await;
            let invalid = |reason: &str| HostError::InvalidPath {
                reference: reference.clone(),
                reason: reason.to_owned(),
            };
            match opened {
                Ok(Ok(source)) => Ok(Box::new(source) as Box<dyn HostFileReader>),
                Ok(Err(reason)) => Err(invalid(reason)),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    Err(invalid("it does not exist"))
                }
                Err(error) => Err(io_error("open", Path::new(&reference), &error)),
            }
        })
    }

    fn create<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<Box<dyn HostFileWriter>>> {
        Box::pin(async move {
            let absolute = self.confined(path)?;
            let temp = blocking(move || {
                if let Some(parent) = absolute.parent() {
                    fs::create_dir_all(parent)?;
                }
                let file = OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&absolute)?;
                Ok(Temp {
                    file: Arc::new(file),
                })
            })
            .await?;
            Ok(Box::new(temp) as Box<dyn HostFileWriter>)
        })
    }

    fn promote<'a>(
        &'a self,
        temp: &'a str,
        destination: &'a str,
        overwrite: bool,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let temp = self.confined(temp)?;
            let destination = self.confined(destination)?;
            blocking(move || {
                if overwrite {
                    fs::rename(&temp, &destination)?;
                } else {
                    // A hard link fails when the destination exists, so an existing file is
                    // never replaced, even by a racing writer.
                    fs::hard_link(&temp, &destination)?;
                }
                sync_folder(&destination);
                Ok(())
            })
            .await
        })
    }

    fn remove<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let absolute = self.confined(path)?;
            blocking(move || match fs::remove_file(&absolute) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            })
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_path_stays_inside_one_of_the_folders() {
        let outer = tempfile::tempdir().unwrap();
        let first = outer.path().join("first");
        let second = outer.path().join("second");
        fs::create_dir_all(&first).unwrap();
        fs::create_dir_all(&second).unwrap();
        fs::write(outer.path().join("secret.txt"), "s").unwrap();
        fs::write(second.join("data.csv"), "a,b").unwrap();
        let files = ConfinedFiles::new(&[first.clone(), second.clone()]).unwrap();
        let relative = files.resolve("sub/x.bin").await.unwrap();
        assert!(Path::new(&relative).starts_with(first.canonicalize().unwrap()));
        let in_second = second.join("data.csv");
        let resolved = files.resolve(in_second.to_str().unwrap()).await.unwrap();
        assert!(Path::new(&resolved).starts_with(second.canonicalize().unwrap()));
        for outside in [
            "../secret.txt".to_owned(),
            outer.path().join("secret.txt").display().to_string(),
            file_uri(&outer.path().join("secret.txt")),
        ] {
            assert!(
                matches!(
                    files.resolve(&outside).await,
                    Err(HostError::OutsideRoot { .. })
                ),
                "{outside}"
            );
        }
        assert!(matches!(
            files.resolve("").await,
            Err(HostError::InvalidPath { .. })
        ));
        // A path the machine derives from a resolved one is confined again.
        assert!(files.create("/etc/x.part").await.is_err());
    }

    #[tokio::test]
    async fn promotion_never_replaces_without_overwrite() {
        let folder = tempfile::tempdir().unwrap();
        let files = ConfinedFiles::new(&[folder.path().to_path_buf()]).unwrap();
        let destination = files.resolve("out.bin").await.unwrap();
        let temp = format!("{destination}.part");
        let mut writer = files.create(&temp).await.unwrap();
        writer.write_at(0, b"new".to_vec()).await.unwrap();
        writer.sync_and_close().await.unwrap();
        assert!(
            files.create(&temp).await.is_err(),
            "created exclusively: a second create fails"
        );
        fs::write(&destination, "old").unwrap();
        let refused = files.promote(&temp, &destination, false).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read_to_string(&destination).unwrap(), "old");
        files.promote(&temp, &destination, true).await.unwrap();
        assert_eq!(fs::read_to_string(&destination).unwrap(), "new");
        files.remove(&temp).await.unwrap();
        let mut reader = files.open(&destination).await.unwrap();
        assert_eq!(reader.size(), 3);
        assert_eq!(reader.read_at(1, 10).await.unwrap(), b"ew");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn symlinks_out_of_the_folder_are_refused() {
        let outer = tempfile::tempdir().unwrap();
        let folder = outer.path().join("work");
        fs::create_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(outer.path(), folder.join("escape")).unwrap();
        let files = ConfinedFiles::new(&[folder]).unwrap();
        assert!(matches!(
            files.resolve("escape/x.bin").await,
            Err(HostError::OutsideRoot { .. })
        ));
    }
}
