//! Notebooks as files under a root folder.
//!
//! - Every successful change is on disk before the tool returns: written to a temporary file in
//!   the same folder, fsynced, renamed over the notebook, and the folder fsynced, so a crash leaves
//!   either the old or the new file, never a mix. A run's outputs skip the fsyncs, and the file
//!   they replace is closed later on a thread of its own (`close_later`).
//! - A notebook changed on disk by someone else since we read it is reloaded and the change is
//!   refused, so an agent never overwrites a human's save.
//! - Before each edit the replaced bytes become a snapshot (the replaced file itself,
//!   hard-linked into the snapshot folder, where it can be): an on-disk safety net for recovery
//!   by hand. `undo_last` is the tools' (host-core), not this host's.
//! - The new text is serialised once, in pieces, straight into the temporary file: a large
//!   notebook's text is never held whole, nor hashed.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use host_core::{
    Commit, CommitKind, Document, HostError, Listing, NotebookHost, NotebookLocation, OpenStatus,
    WindowInfo,
};
use notebook_model::Notebook;
use sha2::{Digest, Sha256};

use crate::atomic::{Temporary, close_later, remove_stale_temporaries};
pub use crate::atomic::{WriteMode, write_atomically};
use crate::snapshots::SnapshotStore;
use host_files::{Root, RootedPath, file_uri};

/// Folders never searched for notebooks.
const SKIPPED_FOLDERS: &[&str] = &["node_modules", "__pycache__", "site-packages"];

/// Most notebooks listed (a safety bound for huge trees).
const MAX_LISTED: usize = 10_000;

/// Largest notebook file read (128 MiB): a parsed notebook takes a few times its size in
/// memory, and a larger file is refused before a byte of it is read.
pub const MAX_NOTEBOOK_BYTES: u64 = 128 * 1024 * 1024;

/// Refuses a notebook file larger than [`MAX_NOTEBOOK_BYTES`].
fn refuse_huge(rooted: &RootedPath, metadata: &fs::Metadata) -> Result<(), HostError> {
    if metadata.len() > MAX_NOTEBOOK_BYTES {
        return Err(HostError::TooLarge {
            path: rooted.relative.clone(),
            size_mib: metadata.len().div_ceil(1024 * 1024),
            limit_mib: MAX_NOTEBOOK_BYTES / (1024 * 1024),
        });
    }
    Ok(())
}

/// What the file looked like when we last read or wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DiskStamp {
    len: u64,
    modified_ns: i128,
    /// Which file this is: its inode on Unix, its creation time on Windows (a file replaced by
    /// a rename, as editors save, is a new file on both).
    identity: u64,
}

impl DiskStamp {
    fn of(metadata: &fs::Metadata) -> DiskStamp {
        let modified_ns = metadata
            .modified()
            .ok()
            .and_then(|modified| modified.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos() as i128);
        DiskStamp {
            len: metadata.len(),
            modified_ns,
            identity: file_identity(metadata),
        }
    }
}

#[cfg(unix)]
fn file_identity(metadata: &fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(metadata)
}

#[cfg(windows)]
fn file_identity(metadata: &fs::Metadata) -> u64 {
    std::os::windows::fs::MetadataExt::creation_time(metadata)
}

#[derive(Debug)]
struct Cached {
    document: Arc<Document>,
    stamp: DiskStamp,
    bytes: KnownBytes,
}

/// What is known of a cached file's bytes, to tell a touch (same bytes, new timestamp) from a
/// change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KnownBytes {
    /// The SHA-256 of the bytes the document was parsed from.
    Read { sha256: [u8; 32] },
    /// The file holds exactly the document's text: we wrote it. Nothing is hashed on the write
    /// path; a touch is told apart by writing the text again and comparing.
    Written,
}

/// How much of a notebook's text is serialised before it is written out (or compared).
const CHUNK_BYTES: usize = 1024 * 1024;

/// Files larger than this are parsed as they are read. Reading the bytes whole first opens a
/// notebook about twice as fast (serde_json parses a slice far faster than a reader), but holds
/// the file's size in memory beside the model, which for a 58 MB notebook was most of the
/// server's peak.
const STREAM_READ_BYTES: u64 = 8 * 1024 * 1024;

/// The read buffer of a notebook parsed as it is read.
const READ_BUFFER_BYTES: usize = 1024 * 1024;

/// A reader that hashes what passes through it.
struct Hashed<R> {
    inner: R,
    hasher: Sha256,
}

impl<R: std::io::Read> std::io::Read for Hashed<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.hasher.update(&buffer[..read]);
        Ok(read)
    }
}

/// Files up to this size are committed on the calling task when the commit need not be durable
/// (a run's outputs): serialising and writing them takes tens of microseconds, less than the two
/// thread hand-offs a blocking task costs, and those hand-offs were most of what `run_cells`
/// added to the kernel's own round trip.
const INLINE_COMMIT_BYTES: u64 = 64 * 1024;

/// Settings of the file host.
#[derive(Debug, Clone)]
pub struct FileHostConfig {
    pub root: PathBuf,
    /// Where the snapshots of replaced files go.
    pub snapshot_folder: PathBuf,
}

/// A file host and the kernels of its notebooks.
#[derive(Clone)]
pub struct StandaloneHost {
    /// The notebooks.
    pub files: Arc<FileHost>,
    /// The notebooks' kernels, one per notebook file.
    pub kernels: Option<Arc<host_kernels::ManagedKernels>>,
    /// The files transfers read and write: those under the root.
    transfers: host_files::ConfinedFiles,
    /// The Colab runtime the kernels run on, for the Colab tools.
    pub colab: Option<host_core::colab::SharedColab>,
}

impl StandaloneHost {
    /// The host of `files`, running code on the kernels of `manager` (none: documents only).
    pub fn new(files: Arc<FileHost>, manager: Option<kernels::KernelManager>) -> StandaloneHost {
        let kernels = manager.map(|manager| Arc::new(files.kernels(manager)));
        StandaloneHost::with_kernels(files, kernels)
    }

    /// The host of `files` with these kernels (see [`FileHost::kernels`]).
    pub fn with_kernels(
        files: Arc<FileHost>,
        kernels: Option<Arc<host_kernels::ManagedKernels>>,
    ) -> StandaloneHost {
        let transfers = host_files::ConfinedFiles::from_roots(vec![files.root.clone()]);
        StandaloneHost {
            files,
            kernels,
            transfers,
            colab: None,
        }
    }
}

kernels::debug_fields!(StandaloneHost { files, kernels });

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
    /// One lock per notebook file, held while it is read into the cache or written: a read that
    /// overlapped a write could otherwise see the new file before the cache does and give the
    /// same bytes a second version, which later looks like a change on disk.
    file_locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
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

/// Compares text handed over piece by piece with a file's bytes, reading the file only as far
/// as the two agree.
struct SameBytes {
    file: std::io::BufReader<File>,
    same: bool,
    buffer: Vec<u8>,
}

impl SameBytes {
    fn open(path: &Path) -> std::io::Result<SameBytes> {
        Ok(SameBytes {
            file: std::io::BufReader::with_capacity(64 * 1024, File::open(path)?),
            same: true,
            buffer: Vec::new(),
        })
    }

    fn feed(&mut self, piece: &[u8]) -> std::io::Result<()> {
        if !self.same {
            return Ok(());
        }
        self.buffer.resize(piece.len(), 0);
        match std::io::Read::read_exact(&mut self.file, &mut self.buffer) {
            Ok(()) => self.same = self.buffer == piece,
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => self.same = false,
            Err(error) => return Err(error),
        }
        Ok(())
    }

    /// Whether the file held exactly the pieces fed, nothing more.
    fn finish(mut self) -> std::io::Result<bool> {
        if !self.same {
            return Ok(false);
        }
        let mut rest = [0u8; 1];
        Ok(std::io::Read::read(&mut self.file, &mut rest)? == 0)
    }
}

/// Whether the file at `path` holds exactly `notebook`'s text (written again, piece by piece,
/// never whole).
fn file_holds(path: &Path, notebook: &Notebook) -> std::io::Result<bool> {
    let mut compare = SameBytes::open(path)?;
    notebook.write_ipynb_chunks(CHUNK_BYTES, |piece| compare.feed(piece.as_bytes()))?;
    compare.finish()
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
            file_locks: Mutex::new(HashMap::new()),
        })
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The notebooks' kernels from `manager`: one per notebook file under the root, discovered
    /// also from the root (a project `.venv`).
    pub fn kernels(&self, manager: kernels::KernelManager) -> host_kernels::ManagedKernels {
        let root = self.root.clone();
        host_kernels::ManagedKernels::new(
            manager,
            Some(root.path().to_path_buf()),
            move |location| {
                root.resolve_notebook(&location.uri)
                    .ok()
                    .map(|rooted| rooted.absolute)
            },
        )
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
        let size = match fs::metadata(path) {
            Ok(metadata) => {
                refuse_huge(rooted, &metadata)?;
                metadata.len()
            }
            Err(_) => 0,
        };
        let not_found = |error: std::io::Error| match error.kind() {
            std::io::ErrorKind::NotFound => HostError::NotFound {
                reference: rooted.relative.clone(),
            },
            _ => io_error("read", path, &error),
        };
        // A large file is parsed as it is read (and hashed on the way), so that its bytes never
        // sit whole in memory beside its model. Smaller files, and a large one that does not
        // parse (for the precise problem: the line, invalid UTF-8), are read whole first.
        if size > STREAM_READ_BYTES {
            let file = File::open(path).map_err(not_found)?;
            let mut reader = std::io::BufReader::with_capacity(
                READ_BUFFER_BYTES,
                Hashed {
                    inner: file,
                    hasher: Sha256::new(),
                },
            );
            if let Ok(notebook) = Notebook::parse_reader(&mut reader) {
                let sha256 = reader.into_inner().hasher.finalize().into();
                let metadata =
                    fs::metadata(path).map_err(|error| io_error("read", path, &error))?;
                return Ok(self.cache_read(rooted, notebook, &metadata, sha256));
            }
        }
        let bytes = fs::read(path).map_err(not_found)?;
        let metadata = fs::metadata(path).map_err(|error| io_error("read", path, &error))?;
        match Notebook::parse(&bytes) {
            Ok(notebook) => {
                let sha256 = Sha256::digest(&bytes).into();
                drop(bytes);
                Ok(self.cache_read(rooted, notebook, &metadata, sha256))
            }
            Err(problem) => {
                self.unreadable.lock().expect("unreadable lock").insert(
                    path.clone(),
                    (DiskStamp::of(&metadata), problem.to_string()),
                );
                Err(HostError::Unreadable {
                    path: rooted.relative.clone(),
                    problem: problem.to_string(),
                })
            }
        }
    }

    /// Caches `notebook`, read from the file whose metadata and hash are given, as its document.
    fn cache_read(
        &self,
        rooted: &RootedPath,
        notebook: Notebook,
        metadata: &fs::Metadata,
        sha256: [u8; 32],
    ) -> Arc<Document> {
        self.unreadable
            .lock()
            .expect("unreadable lock")
            .remove(&rooted.absolute);
        let document = Arc::new(Document {
            location: self.location(rooted),
            notebook,
            version: self.next_version(),
        });
        self.cache.lock().expect("cache lock").insert(
            rooted.absolute.clone(),
            Cached {
                document: document.clone(),
                stamp: DiskStamp::of(metadata),
                bytes: KnownBytes::Read { sha256 },
            },
        );
        document
    }

    /// The lock of one notebook file (see `file_locks`).
    fn file_lock(&self, path: &Path) -> Arc<Mutex<()>> {
        self.file_locks
            .lock()
            .expect("file locks lock")
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }

    /// The cached document if the file is unchanged, else a fresh read.
    fn load_sync(&self, rooted: &RootedPath) -> Result<Arc<Document>, HostError> {
        let lock = self.file_lock(&rooted.absolute);
        let _guard = lock.lock().expect("file lock");
        self.load_locked(rooted)
    }

    /// The cached document if the file is unchanged, found with one `stat` and no waiting: none
    /// when the file is being written, is not cached, or changed (then [`FileHost::load_sync`]
    /// reads it, off the executor).
    fn cached_unchanged(&self, rooted: &RootedPath) -> Option<Arc<Document>> {
        let path = &rooted.absolute;
        let lock = self.file_lock(path);
        let _guard = lock.try_lock().ok()?;
        let stamp = DiskStamp::of(&fs::metadata(path).ok()?);
        let cache = self.cache.lock().expect("cache lock");
        cache
            .get(path)
            .filter(|cached| cached.stamp == stamp)
            .map(|cached| cached.document.clone())
    }

    /// Whether a commit of `notebook` as `kind` is small and light enough for the calling task:
    /// outputs (no snapshot, no fsync) of a small cached file that is unchanged on disk (so
    /// nothing is read), whose new text stays small.
    fn commits_inline(&self, rooted: &RootedPath, notebook: &Notebook, kind: CommitKind) -> bool {
        kind == CommitKind::Outputs
            && self.cached_unchanged(rooted).is_some()
            && text_size_within(notebook, INLINE_COMMIT_BYTES)
    }

    /// [`FileHost::load_sync`] for a caller that holds the file's lock.
    fn load_locked(&self, rooted: &RootedPath) -> Result<Arc<Document>, HostError> {
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
                let same_bytes = cached.stamp.len == stamp.len
                    && match cached.bytes {
                        KnownBytes::Read { sha256 } => fs::read(path)
                            .is_ok_and(|bytes| <[u8; 32]>::from(Sha256::digest(&bytes)) == sha256),
                        KnownBytes::Written => {
                            file_holds(path, &cached.document.notebook).unwrap_or(false)
                        }
                    };
                if same_bytes {
                    cached.stamp = stamp;
                    return Ok(cached.document.clone());
                }
            }
        }
        self.read_from_disk(rooted)
    }

    /// Writes `notebook` over the file if the file is still what `base_version` was read from.
    ///
    /// The text is serialised once, piece by piece, into a temporary file beside the notebook
    /// (never whole in memory). Unless the change is sure to alter the text (cells inserted,
    /// deleted or rewritten, a code cell's execution count changed), the pieces are compared
    /// with the file as they go, and an unchanged text leaves the file alone. For an edit, the
    /// file about to be replaced becomes a snapshot before the rename.
    fn commit_sync(
        &self,
        rooted: &RootedPath,
        base_version: u64,
        notebook: Notebook,
        description: &str,
        kind: CommitKind,
    ) -> Result<Arc<Document>, HostError> {
        let path = &rooted.absolute;
        let lock = self.file_lock(path);
        let _guard = lock.lock().expect("file lock");
        let current = self.load_locked(rooted)?;
        if current.version != base_version {
            return Err(HostError::ChangedOnDisk {
                path: rooted.relative.clone(),
            });
        }
        let read_error = |error: std::io::Error| io_error("read", path, &error);
        let write_error = |error: std::io::Error| io_error("write", path, &error);
        let mut compare = if notebook.surely_writes_differently(&current.notebook) {
            None
        } else {
            Some(SameBytes::open(path).map_err(read_error)?)
        };
        let mut temporary = match Temporary::create(path) {
            Ok(temporary) => temporary,
            Err(error) => {
                // A folder we cannot write in still lets a commit that changes nothing succeed.
                if let Some(mut compare) = compare {
                    notebook
                        .write_ipynb_chunks(CHUNK_BYTES, |piece| compare.feed(piece.as_bytes()))
                        .map_err(read_error)?;
                    if compare.finish().map_err(read_error)? {
                        return Ok(current);
                    }
                }
                refuse_read_only(path)?;
                return Err(write_error(error));
            }
        };
        let mut compare_failure = None;
        notebook
            .write_ipynb_chunks(CHUNK_BYTES, |piece| {
                if let Some(compare) = &mut compare
                    && let Err(error) = compare.feed(piece.as_bytes())
                {
                    compare_failure.get_or_insert(error);
                }
                temporary.file().write_all(piece.as_bytes())
            })
            .map_err(write_error)?;
        if let Some(error) = compare_failure {
            return Err(read_error(error));
        }
        if let Some(compare) = compare
            && compare.finish().map_err(read_error)?
        {
            return Ok(current);
        }
        refuse_read_only(path)?;
        let mode = match kind {
            CommitKind::Edit => {
                self.snapshots
                    .push_file(path, description)
                    .map_err(|error| io_error("snapshot", path, &error))?;
                WriteMode::REPLACE
            }
            CommitKind::Outputs => WriteMode {
                exclusive: false,
                durable: false,
            },
        };
        // Without a snapshot linking it, the replaced file would be freed inside the
        // rename; held open, it is freed when the closer thread drops it, off this path.
        let replaced = match kind {
            CommitKind::Outputs => File::open(path).ok(),
            CommitKind::Edit => None,
        };
        temporary.promote(mode).map_err(write_error)?;
        if let Some(replaced) = replaced {
            close_later(replaced);
        }
        let metadata = fs::metadata(path).map_err(write_error)?;
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
                bytes: KnownBytes::Written,
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
}

/// Whether `notebook`'s text is at most about `limit` bytes: its sources' and outputs' string
/// lengths, counted until they pass the limit (so a large notebook costs no more than a small one).
fn text_size_within(notebook: &Notebook, limit: u64) -> bool {
    fn add(total: &mut u64, value: &serde_json::Value, limit: u64) {
        if *total > limit {
            return;
        }
        match value {
            serde_json::Value::String(text) => *total += text.len() as u64 + 2,
            serde_json::Value::Array(items) => {
                items.iter().for_each(|item| add(total, item, limit))
            }
            serde_json::Value::Object(map) => map.iter().for_each(|(key, item)| {
                *total += key.len() as u64 + 4;
                add(total, item, limit);
            }),
            _ => *total += 8,
        }
    }
    let mut total = 0;
    for cell in notebook.cells() {
        total += cell.source().len() as u64 + 64;
        cell.outputs()
            .iter()
            .for_each(|output| add(&mut total, output, limit));
        if total > limit {
            return false;
        }
    }
    total <= limit
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

    fn kernels(&self) -> Option<host_core::SharedKernels> {
        self.kernels
            .clone()
            .map(|kernels| kernels as host_core::SharedKernels)
    }

    fn files(&self) -> Option<Arc<dyn host_core::HostFiles>> {
        Some(Arc::new(self.transfers.clone()))
    }

    fn colab(&self) -> Option<host_core::colab::SharedColab> {
        self.colab.clone()
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
        if let Some(document) = self.files.cached_unchanged(&rooted) {
            return Ok((OpenStatus::AlreadyOpen, document));
        }
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
        if let Some(document) = self.files.cached_unchanged(&rooted) {
            return Ok(document);
        }
        let host = self.files.clone();
        blocking(move || host.load_sync(&rooted)).await
    }

    async fn commit(&self, base: &Document, commit: Commit) -> Result<Arc<Document>, HostError> {
        let rooted = self.files.rooted(&base.location)?;
        let base_version = base.version;
        if self
            .files
            .commits_inline(&rooted, &commit.notebook, commit.kind)
        {
            return self.files.commit_sync(
                &rooted,
                base_version,
                commit.notebook,
                &commit.description,
                commit.kind,
            );
        }
        let host = self.files.clone();
        blocking(move || {
            host.commit_sync(
                &rooted,
                base_version,
                commit.notebook,
                &commit.description,
                commit.kind,
            )
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
            write_atomically(
                path,
                notebook.to_ipynb_string().as_bytes(),
                WriteMode::CREATE,
            )
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::AlreadyExists => HostError::AlreadyExists {
                    path: rooted.relative.clone(),
                },
                _ => io_error("create", path, &error),
            })?;
            let lock = host.file_lock(path);
            let _guard = lock.lock().expect("file lock");
            host.read_from_disk(&rooted)
        })
        .await
    }

    async fn save(&self, location: &NotebookLocation) -> Result<host_core::Saved, HostError> {
        let rooted = self.files.rooted(location)?;
        let host = self.files.clone();
        blocking(move || {
            let document = host.load_sync(&rooted)?;
            host.commit_sync(
                &rooted,
                document.version,
                document.notebook.clone(),
                // The snapshot's description: a save, not a tool's change.
                "save",
                CommitKind::Edit,
            )?;
            Ok(host_core::Saved::Written)
        })
        .await
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
            write_atomically(destination, &contents, WriteMode::CREATE).map_err(
                |error| match error.kind() {
                    std::io::ErrorKind::AlreadyExists => HostError::AlreadyExists {
                        path: rooted.relative.clone(),
                    },
                    _ => io_error("write", destination, &error),
                },
            )?;
            Ok(file_uri(destination))
        })
        .await
    }
}
