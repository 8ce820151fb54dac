//! Notebooks as files under a root folder.
//!
//! - Every successful change is on disk before the tool returns: written to a temporary file in
//!   the same folder, fsynced, renamed over the notebook, and the folder fsynced, so a crash leaves
//!   either the old or the new file, never a mix.
//! - A notebook changed on disk by someone else since we read it is reloaded and the change is
//!   refused, so an agent never overwrites a human's save.
//! - Before each change the replaced bytes become an undo snapshot.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use host_core::{
    Commit, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus, Restored,
    WindowInfo,
};
use notebook_model::Notebook;
use sha2::{Digest, Sha256};

use crate::paths::{Root, RootedPath, file_uri};
use crate::snapshots::SnapshotStore;

/// Folders never searched for notebooks.
const SKIPPED_FOLDERS: &[&str] = &["node_modules", "__pycache__", "site-packages"];

/// Most notebooks listed (a safety bound for huge trees).
const MAX_LISTED: usize = 10_000;

/// What the file looked like when we last read or wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DiskStamp {
    len: u64,
    modified_ns: i128,
    inode: u64,
}

impl DiskStamp {
    fn of(metadata: &fs::Metadata) -> DiskStamp {
        DiskStamp {
            len: metadata.len(),
            modified_ns: i128::from(metadata.mtime()) * 1_000_000_000
                + i128::from(metadata.mtime_nsec()),
            inode: metadata.ino(),
        }
    }
}

#[derive(Debug)]
struct Cached {
    document: Arc<Document>,
    stamp: DiskStamp,
    sha256: [u8; 32],
}

/// Settings of the file host.
#[derive(Debug, Clone)]
pub struct FileHostConfig {
    pub root: PathBuf,
    /// Where undo snapshots go.
    pub snapshot_folder: PathBuf,
}

/// A file host and the kernels of its notebooks.
#[derive(Debug, Clone)]
pub struct StandaloneHost {
    pub files: Arc<FileHost>,
    pub kernels: Option<Arc<kernels::KernelManager>>,
}

/// The standalone host's documents.
#[derive(Debug)]
pub struct FileHost {
    root: Root,
    window: WindowInfo,
    snapshots: SnapshotStore,
    cache: Mutex<HashMap<PathBuf, Cached>>,
    /// Files that failed to parse, with the file's stamp at the time and the problem.
    unreadable: Mutex<HashMap<PathBuf, (DiskStamp, String)>>,
    versions: AtomicU64,
}

fn io_error(action: &'static str, path: &Path, error: &std::io::Error) -> HostError {
    HostError::Io {
        action,
        path: path.display().to_string(),
        reason: match error.kind() {
            std::io::ErrorKind::StorageFull => "the disk is full".to_owned(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
            std::io::ErrorKind::ReadOnlyFilesystem => "the file system is read-only".to_owned(),
            std::io::ErrorKind::NotFound => "it does not exist".to_owned(),
            kind => format!("{kind}"),
        },
    }
}

/// The prefix and suffix of the temporary files [`write_atomically`] makes next to `destination`.
fn temporary_affixes(destination: &Path) -> (String, &'static str) {
    let name = destination
        .file_name()
        .map_or_else(|| "notebook".into(), |name| name.to_string_lossy());
    (format!(".{name}.jupyter-mcp-"), ".tmp")
}

/// Removes temporary files that a write of `destination` left behind when the process was
/// killed in the middle of it (they are never renamed into place afterwards).
fn remove_stale_temporaries(destination: &Path) {
    let folder = destination.parent().unwrap_or_else(|| Path::new("."));
    let (prefix, suffix) = temporary_affixes(destination);
    let Ok(entries) = fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(&prefix) && name.ends_with(suffix) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Refuses to replace a file whose permissions say it is read-only (renaming over it would
/// succeed, and the superuser could even write into it, but the owner asked for it to stay).
fn refuse_read_only(path: &Path) -> Result<(), HostError> {
    if fs::metadata(path).is_ok_and(|metadata| metadata.permissions().readonly()) {
        return Err(HostError::Io {
            action: "write",
            path: path.display().to_string(),
            reason: "the file is read-only".to_owned(),
        });
    }
    Ok(())
}

/// Writes `bytes` to `destination` atomically: a temporary file in the same folder, fsync,
/// rename, fsync of the folder. With `exclusive`, an existing destination is never replaced (the
/// temporary file is hard-linked into place instead of renamed).
pub fn write_atomically(destination: &Path, bytes: &[u8], exclusive: bool) -> std::io::Result<()> {
    let folder = destination.parent().unwrap_or_else(|| Path::new("."));
    let (prefix, suffix) = temporary_affixes(destination);
    let temporary = folder.join(format!("{prefix}{}{suffix}", uuid::Uuid::new_v4().simple()));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        if let Ok(existing) = fs::metadata(destination) {
            let _ = file.set_permissions(existing.permissions());
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        if exclusive {
            fs::hard_link(&temporary, destination)?;
            fs::remove_file(&temporary)?;
        } else {
            fs::rename(&temporary, destination)?;
        }
        if let Ok(directory) = File::open(folder) {
            let _ = directory.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    result
}

impl FileHost {
    pub fn new(config: FileHostConfig) -> std::io::Result<FileHost> {
        let root = Root::new(&config.root)?;
        // A window id derived from the root keeps notebookRefs valid across server restarts.
        let digest = Sha256::digest(root.path().as_os_str().as_encoded_bytes());
        let id: String = digest
            .iter()
            .take(8)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Ok(FileHost {
            window: WindowInfo {
                id: format!("standalone-{id}"),
                label: root.label(),
            },
            root,
            snapshots: SnapshotStore::new(config.snapshot_folder),
            cache: Mutex::new(HashMap::new()),
            unreadable: Mutex::new(HashMap::new()),
            versions: AtomicU64::new(1),
        })
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    fn location(&self, rooted: &RootedPath) -> NotebookLocation {
        NotebookLocation {
            uri: file_uri(&rooted.absolute),
            path: Some(rooted.relative.clone()),
        }
    }

    fn rooted(&self, location: &NotebookLocation) -> Result<RootedPath, HostError> {
        self.root.resolve_notebook(&location.uri)
    }

    fn next_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::Relaxed)
    }

    /// Reads and parses the file, replacing the cached copy.
    fn read_from_disk(&self, rooted: &RootedPath) -> Result<Arc<Document>, HostError> {
        let path = &rooted.absolute;
        let first_read = !self.cache.lock().expect("cache lock").contains_key(path);
        if first_read {
            remove_stale_temporaries(path);
        }
        let bytes = fs::read(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => HostError::NotFound {
                reference: rooted.relative.clone(),
            },
            _ => io_error("read", path, &error),
        })?;
        let metadata = fs::metadata(path).map_err(|error| io_error("read", path, &error))?;
        let notebook = match Notebook::parse(&bytes) {
            Ok(notebook) => {
                self.unreadable
                    .lock()
                    .expect("unreadable lock")
                    .remove(path);
                notebook
            }
            Err(problem) => {
                self.unreadable.lock().expect("unreadable lock").insert(
                    path.clone(),
                    (DiskStamp::of(&metadata), problem.to_string()),
                );
                return Err(HostError::Unreadable {
                    path: rooted.relative.clone(),
                    problem: problem.to_string(),
                });
            }
        };
        let document = Arc::new(Document {
            location: self.location(rooted),
            notebook,
            version: self.next_version(),
        });
        self.cache.lock().expect("cache lock").insert(
            path.clone(),
            Cached {
                document: document.clone(),
                stamp: DiskStamp::of(&metadata),
                sha256: Sha256::digest(&bytes).into(),
            },
        );
        Ok(document)
    }

    /// The cached document if the file is unchanged, else a fresh read.
    fn load_sync(&self, rooted: &RootedPath) -> Result<Arc<Document>, HostError> {
        let path = &rooted.absolute;
        let metadata = fs::metadata(path).map_err(|error| match error.kind() {
            std::io::ErrorKind::NotFound => HostError::NotFound {
                reference: rooted.relative.clone(),
            },
            _ => io_error("read", path, &error),
        })?;
        let stamp = DiskStamp::of(&metadata);
        {
            let mut cache = self.cache.lock().expect("cache lock");
            if let Some(cached) = cache.get_mut(path) {
                if cached.stamp == stamp {
                    return Ok(cached.document.clone());
                }
                // Same bytes with a new timestamp (a touch, or a save without changes).
                if cached.stamp.len == stamp.len
                    && let Ok(bytes) = fs::read(path)
                    && <[u8; 32]>::from(Sha256::digest(&bytes)) == cached.sha256
                {
                    cached.stamp = stamp;
                    return Ok(cached.document.clone());
                }
            }
        }
        self.read_from_disk(rooted)
    }

    /// Writes `notebook` over the file if the file is still what `base_version` was read from.
    fn commit_sync(
        &self,
        rooted: &RootedPath,
        base_version: u64,
        notebook: Notebook,
        description: &str,
    ) -> Result<Arc<Document>, HostError> {
        let path = &rooted.absolute;
        let current = self.load_sync(rooted)?;
        if current.version != base_version {
            return Err(HostError::ChangedOnDisk {
                path: rooted.relative.clone(),
            });
        }
        let text = notebook.to_ipynb_string();
        let old_bytes = fs::read(path).map_err(|error| io_error("read", path, &error))?;
        if old_bytes == text.as_bytes() {
            return Ok(current);
        }
        refuse_read_only(path)?;
        self.snapshots
            .push(path, &old_bytes, description)
            .map_err(|error| io_error("snapshot", path, &error))?;
        write_atomically(path, text.as_bytes(), false)
            .map_err(|error| io_error("write", path, &error))?;
        let metadata = fs::metadata(path).map_err(|error| io_error("write", path, &error))?;
        let document = Arc::new(Document {
            location: self.location(rooted),
            notebook,
            version: self.next_version(),
        });
        self.cache.lock().expect("cache lock").insert(
            path.clone(),
            Cached {
                document: document.clone(),
                stamp: DiskStamp::of(&metadata),
                sha256: Sha256::digest(text.as_bytes()).into(),
            },
        );
        Ok(document)
    }

    fn list_sync(&self) -> Listing {
        let mut notebooks = Vec::new();
        let mut unreadable = Vec::new();
        let mut pending = vec![self.root.path().to_path_buf()];
        while let Some(folder) = pending.pop() {
            let Ok(entries) = fs::read_dir(&folder) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(fs::DirEntry::file_name);
            for entry in entries.into_iter().rev() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    if !SKIPPED_FOLDERS.contains(&name.as_str()) {
                        pending.push(path);
                    }
                } else if name.to_ascii_lowercase().ends_with(".ipynb") {
                    // Symlinked files are listed only when they resolve inside the root.
                    let Ok(rooted) = self.root.resolve_notebook(&path.to_string_lossy()) else {
                        continue;
                    };
                    if !rooted.absolute.is_file() {
                        continue;
                    }
                    let location = self.location(&rooted);
                    let known_problem = self
                        .unreadable
                        .lock()
                        .expect("unreadable lock")
                        .get(&rooted.absolute)
                        .filter(|(stamp, _)| {
                            fs::metadata(&rooted.absolute)
                                .is_ok_and(|metadata| DiskStamp::of(&metadata) == *stamp)
                        })
                        .map(|(_, problem)| problem.clone());
                    if let Some(problem) = known_problem {
                        unreadable.push((location.clone(), problem));
                    }
                    notebooks.push(location);
                    if notebooks.len() >= MAX_LISTED {
                        return Listing {
                            notebooks,
                            unreadable,
                        };
                    }
                }
            }
        }
        notebooks.sort_by(|left, right| left.path.cmp(&right.path));
        Listing {
            notebooks,
            unreadable,
        }
    }

    fn undo_sync(&self, rooted: &RootedPath) -> Result<Restored, HostError> {
        let path = &rooted.absolute;
        let current = self.load_sync(rooted)?;
        let (snapshot, count) = self
            .snapshots
            .newest(path)
            .map_err(|error| io_error("read the snapshot of", path, &error))?
            .ok_or_else(|| HostError::NothingToUndo {
                path: rooted.relative.clone(),
            })?;
        let notebook =
            Notebook::parse(&snapshot.bytes).map_err(|problem| HostError::Unreadable {
                path: format!("the snapshot of {}", rooted.relative),
                problem: problem.to_string(),
            })?;
        refuse_read_only(path)?;
        write_atomically(path, &snapshot.bytes, false)
            .map_err(|error| io_error("write", path, &error))?;
        self.snapshots.remove(&snapshot);
        let metadata = fs::metadata(path).map_err(|error| io_error("write", path, &error))?;
        let document = Arc::new(Document {
            location: self.location(rooted),
            notebook: notebook.clone(),
            version: self.next_version(),
        });
        self.cache.lock().expect("cache lock").insert(
            path.clone(),
            Cached {
                document,
                stamp: DiskStamp::of(&metadata),
                sha256: Sha256::digest(&snapshot.bytes).into(),
            },
        );
        Ok(Restored {
            notebook,
            replaced: current.notebook.clone(),
            description: snapshot.meta.description,
            taken_at: snapshot.meta.taken_at,
            remaining: count - 1,
        })
    }
}

/// Runs blocking file work off the async executor.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HostError> + Send + 'static,
) -> Result<T, HostError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|join_error| {
            Err(HostError::Io {
                action: "finish",
                path: "a file operation".to_owned(),
                reason: join_error.to_string(),
            })
        })
}

impl NotebookHost for StandaloneHost {
    fn window(&self) -> WindowInfo {
        self.files.window.clone()
    }

    fn kernel_manager(&self) -> Option<Arc<kernels::KernelManager>> {
        self.kernels.clone()
    }

    fn kernel_key(&self, location: &NotebookLocation) -> Option<PathBuf> {
        self.files
            .root
            .resolve_notebook(&location.uri)
            .ok()
            .map(|rooted| rooted.absolute)
    }

    fn kernel_root(&self) -> Option<PathBuf> {
        Some(self.files.root.path().to_path_buf())
    }

    async fn list(&self) -> Result<Listing, HostError> {
        let host = self.files.clone();
        blocking(move || Ok(host.list_sync())).await
    }

    async fn locate(&self, reference: &str) -> Result<NotebookLocation, HostError> {
        let rooted = self.files.root.resolve_notebook(reference)?;
        Ok(self.files.location(&rooted))
    }

    async fn open(
        &self,
        location: &NotebookLocation,
    ) -> Result<(OpenStatus, Arc<Document>), HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || {
            let was_cached = host
                .cache
                .lock()
                .expect("cache lock")
                .contains_key(&rooted.absolute);
            let document = host.load_sync(&rooted)?;
            let status = if was_cached {
                OpenStatus::AlreadyOpen
            } else {
                OpenStatus::Opened
            };
            Ok((status, document))
        })
        .await
    }

    async fn load(&self, location: &NotebookLocation) -> Result<Arc<Document>, HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || host.load_sync(&rooted)).await
    }

    async fn commit(
        &self,
        location: &NotebookLocation,
        base_version: u64,
        commit: Commit,
    ) -> Result<Arc<Document>, HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || {
            host.commit_sync(&rooted, base_version, commit.notebook, &commit.description)
        })
        .await
    }

    async fn create(
        &self,
        location: &NotebookLocation,
        notebook: Notebook,
    ) -> Result<Arc<Document>, HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || {
            let path = &rooted.absolute;
            if path.exists() {
                return Err(HostError::AlreadyExists {
                    path: rooted.relative.clone(),
                });
            }
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(|error| io_error("create", parent, &error))?;
            }
            write_atomically(path, notebook.to_ipynb_string().as_bytes(), true).map_err(
                |error| match error.kind() {
                    std::io::ErrorKind::AlreadyExists => HostError::AlreadyExists {
                        path: rooted.relative.clone(),
                    },
                    _ => io_error("create", path, &error),
                },
            )?;
            host.read_from_disk(&rooted)
        })
        .await
    }

    async fn save(&self, location: &NotebookLocation) -> Result<(), HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || {
            let document = host.load_sync(&rooted)?;
            host.commit_sync(
                &rooted,
                document.version,
                document.notebook.clone(),
                "save_notebooks",
            )?;
            Ok(())
        })
        .await
    }

    async fn undo(&self, location: &NotebookLocation) -> Result<Restored, HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || host.undo_sync(&rooted)).await
    }

    async fn write_new_file(&self, path: &str, contents: Vec<u8>) -> Result<String, HostError> {
        let rooted = self.files.root.resolve(path)?;
        if rooted.relative.is_empty() {
            return Err(HostError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        blocking(move || {
            let destination = &rooted.absolute;
            if let Some(parent) = destination.parent() {
                fs::create_dir_all(parent).map_err(|error| io_error("create", parent, &error))?;
            }
            write_atomically(destination, &contents, true).map_err(|error| match error.kind() {
                std::io::ErrorKind::AlreadyExists => HostError::AlreadyExists {
                    path: rooted.relative.clone(),
                },
                _ => io_error("write", destination, &error),
            })?;
            Ok(file_uri(destination))
        })
        .await
    }
}
