//! Atomic writes: a temporary file beside its destination that takes the destination's place
//! only when promoted (fsync, rename or hard link, fsync of the folder), the removal of
//! temporaries a killed write left, and files closed off the caller's thread.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::mpsc::SyncSender;

/// The prefix and suffix of the temporary files [`write_atomically`] makes next to `destination`.
fn temporary_affixes(destination: &Path) -> (String, &'static str) {
    let name = destination
        .file_name()
        .map_or_else(|| "notebook".into(), |name| name.to_string_lossy());
    (format!(".{name}.jupyter-mcp-"), ".tmp")
}

/// Removes temporary files that a write of `destination` left behind when the process was
/// killed in the middle of it (they are never renamed into place afterwards).
pub(crate) fn remove_stale_temporaries(destination: &Path) {
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

/// How a write is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMode {
    /// Never replace an existing destination (the temporary file is hard-linked into place).
    pub exclusive: bool,
    /// fsync the file and its folder, so the write survives a power loss, not only a crash.
    pub durable: bool,
}

impl WriteMode {
    pub const REPLACE: WriteMode = WriteMode {
        exclusive: false,
        durable: true,
    };
    pub const CREATE: WriteMode = WriteMode {
        exclusive: true,
        durable: true,
    };
}

/// A new file beside its destination that takes the destination's place only when
/// [`Temporary::promote`] is called; dropped before that, it is removed.
pub(crate) struct Temporary {
    path: PathBuf,
    destination: PathBuf,
    file: File,
    promoted: bool,
}

impl Temporary {
    /// Creates the temporary file of `destination`, with the destination's permissions when it
    /// exists.
    pub(crate) fn create(destination: &Path) -> std::io::Result<Temporary> {
        let folder = destination.parent().unwrap_or_else(|| Path::new("."));
        let (prefix, suffix) = temporary_affixes(destination);
        let path = folder.join(format!("{prefix}{}{suffix}", uuid::Uuid::new_v4().simple()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        let temporary = Temporary {
            path,
            destination: destination.to_path_buf(),
            file,
            promoted: false,
        };
        if let Ok(existing) = fs::metadata(destination) {
            let _ = temporary.file.set_permissions(existing.permissions());
        }
        Ok(temporary)
    }

    /// The file, to write into.
    pub(crate) fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Puts the written file in the destination's place: fsync, rename (or, when `exclusive`, a
    /// hard link that never replaces an existing file), fsync of the folder (without the fsyncs
    /// when not `durable`). A crash leaves the old file or the new one, never a mix.
    pub(crate) fn promote(mut self, mode: WriteMode) -> std::io::Result<()> {
        if mode.durable {
            self.file.sync_all()?;
        }
        if mode.exclusive {
            fs::hard_link(&self.path, &self.destination)?;
            self.promoted = true;
            fs::remove_file(&self.path)?;
        } else {
            fs::rename(&self.path, &self.destination)?;
            self.promoted = true;
        }
        if mode.durable {
            sync_folder_of(&self.destination);
        }
        Ok(())
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.promoted {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Closes `file` on a thread of its own. Closing the last handle of a replaced file frees its
/// blocks, and some file systems wait on the disk for that (ext4 mounted with `discard` issues
/// the discard and waits for it), so a caller that must not wait hands the file over here.
/// When the thread cannot be started or is behind, the file is closed at once.
pub(crate) fn close_later(file: File) {
    const CLOSE_DELAY: std::time::Duration = std::time::Duration::from_millis(2);
    static CLOSER: OnceLock<Option<SyncSender<File>>> = OnceLock::new();
    let closer = CLOSER.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::sync_channel::<File>(64);
        std::thread::Builder::new()
            .name("jupyter-mcp-closer".to_owned())
            .spawn(move || {
                while let Ok(file) = receiver.recv() {
                    // Woken by the caller, this thread may take its processor at once: it
                    // steps aside first, so the caller's reply goes out before the close.
                    std::thread::sleep(CLOSE_DELAY);
                    drop(file);
                    receiver.try_iter().for_each(drop);
                }
            })
            .ok()
            .map(|_| sender)
    });
    if let Some(closer) = closer {
        // A full or closed queue hands the file back, and it is closed here.
        let _ = closer.try_send(file);
    }
}

/// Syncs the folder that holds `path`, so that a rename or link in it survives a power loss
/// (best effort: not every platform can open a folder for syncing).
/// Flushes the file at `path` to the disk. Windows flushes only through a handle that may
/// write; elsewhere a read-only handle does, and works on files without write permission too.
pub(crate) fn sync_file(path: &Path) -> std::io::Result<()> {
    #[cfg(windows)]
    let file = OpenOptions::new().write(true).open(path)?;
    #[cfg(not(windows))]
    let file = File::open(path)?;
    file.sync_all()
}

pub(crate) fn sync_folder_of(path: &Path) {
    let folder = path.parent().unwrap_or_else(|| Path::new("."));
    if let Ok(directory) = File::open(folder) {
        let _ = directory.sync_all();
    }
}

/// Writes `bytes` to `destination` atomically: a temporary file in the same folder, fsync,
/// rename, fsync of the folder (without the fsyncs when not `durable`). A crash leaves the old
/// file or the new one, never a mix.
pub fn write_atomically(destination: &Path, bytes: &[u8], mode: WriteMode) -> std::io::Result<()> {
    let mut temporary = Temporary::create(destination)?;
    temporary.file().write_all(bytes)?;
    temporary.promote(mode)
}
