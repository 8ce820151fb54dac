//! Snapshots: before every edit, the bytes it replaces are kept in the cache folder (at most
//! [`MAX_SNAPSHOTS`] per notebook, surviving server restarts), as `<n>.ipynb` beside `<n>.json`
//! (which notebook, what change, when) in a folder per notebook. They are a safety net for
//! recovering a file by hand; `undo_last` is the tools' own history and does not read them.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Snapshots kept per notebook.
pub const MAX_SNAPSHOTS: usize = 20;

/// What a snapshot records next to the bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotMeta {
    pub notebook: String,
    pub description: String,
    pub taken_at: String,
}

/// A snapshot on disk, as a test reads it back.
#[cfg(test)]
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub meta: SnapshotMeta,
    pub bytes: Vec<u8>,
}

/// Snapshots of every notebook, under one folder.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    folder: PathBuf,
}

use host_core::host::rfc3339;

impl SnapshotStore {
    pub fn new(folder: PathBuf) -> SnapshotStore {
        SnapshotStore { folder }
    }

    /// The default folder: `$XDG_CACHE_HOME/jupyter-mcp/snapshots` (or the platform cache dir).
    pub fn default_folder() -> PathBuf {
        dirs::cache_dir()
            .unwrap_or_else(std::env::temp_dir)
            .join("jupyter-mcp")
            .join("snapshots")
    }

    fn folder_for(&self, notebook: &Path) -> PathBuf {
        let digest = Sha256::digest(notebook.as_os_str().as_encoded_bytes());
        let key: String = digest
            .iter()
            .take(8)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        self.folder.join(key)
    }

    fn sequence_numbers(folder: &Path) -> Vec<u64> {
        let mut numbers: Vec<u64> = std::fs::read_dir(folder)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                name.strip_suffix(".ipynb")?.parse().ok()
            })
            .collect();
        numbers.sort_unstable();
        numbers
    }

    /// Keeps `bytes` as the newest snapshot of `notebook`, then trims to [`MAX_SNAPSHOTS`].
    pub fn push(&self, notebook: &Path, bytes: &[u8], description: &str) -> std::io::Result<()> {
        self.push_with(notebook, description, |data| {
            crate::atomic::write_atomically(data, bytes, crate::atomic::WriteMode::REPLACE)
        })
    }

    /// Keeps the file `notebook` as it is now as its newest snapshot, then trims to
    /// [`MAX_SNAPSHOTS`]; for a caller about to replace the file by a rename.
    ///
    /// The snapshot is a hard link to the file, so nothing is copied: the rename that follows
    /// gives the notebook a new file and leaves the linked one to the snapshot alone. The linked
    /// file is synced first, since it may hold a write that was not (saved outputs). Where a
    /// link cannot be made (the snapshot folder on another file system, a notebook that is not
    /// a plain file), the file is copied instead.
    pub fn push_file(&self, notebook: &Path, description: &str) -> std::io::Result<()> {
        self.push_with(notebook, description, |data| {
            let plain_file = std::fs::symlink_metadata(notebook)?.file_type().is_file();
            if plain_file && std::fs::hard_link(notebook, data).is_ok() {
                crate::atomic::sync_file(data)?;
                crate::atomic::sync_folder_of(data);
                return Ok(());
            }
            let mut temporary = crate::atomic::Temporary::create(data)?;
            std::io::copy(&mut std::fs::File::open(notebook)?, temporary.file())?;
            temporary.promote(crate::atomic::WriteMode::REPLACE)
        })
    }

    /// Records a snapshot whose data file `write_data` makes, then trims to [`MAX_SNAPSHOTS`].
    fn push_with(
        &self,
        notebook: &Path,
        description: &str,
        write_data: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let folder = self.folder_for(notebook);
        std::fs::create_dir_all(&folder)?;
        let numbers = Self::sequence_numbers(&folder);
        let next = numbers.last().map_or(1, |last| last + 1);
        let meta = SnapshotMeta {
            notebook: notebook.display().to_string(),
            description: description.to_owned(),
            taken_at: rfc3339(SystemTime::now()),
        };
        std::fs::write(
            folder.join(format!("{next:012}.json")),
            serde_json::to_vec(&meta)?,
        )?;
        // The data file is what makes a snapshot exist, so it appears whole or not at all: a
        // process killed while writing it leaves no truncated snapshot to mislead a recovery.
        write_data(&folder.join(format!("{next:012}.ipynb")))?;
        let excess = (numbers.len() + 1).saturating_sub(MAX_SNAPSHOTS);
        for old in numbers.iter().take(excess) {
            let _ = std::fs::remove_file(folder.join(format!("{old:012}.ipynb")));
            let _ = std::fs::remove_file(folder.join(format!("{old:012}.json")));
        }
        Ok(())
    }

    /// The newest snapshot of `notebook`, if any, and how many there are.
    #[cfg(test)]
    pub fn newest(&self, notebook: &Path) -> std::io::Result<Option<(Snapshot, usize)>> {
        let folder = self.folder_for(notebook);
        let numbers = Self::sequence_numbers(&folder);
        let Some(last) = numbers.last() else {
            return Ok(None);
        };
        let data_path = folder.join(format!("{last:012}.ipynb"));
        let meta_path = folder.join(format!("{last:012}.json"));
        let bytes = std::fs::read(&data_path)?;
        let meta = std::fs::read(&meta_path)
            .ok()
            .and_then(|text| serde_json::from_slice(&text).ok())
            .unwrap_or_else(|| SnapshotMeta {
                notebook: notebook.display().to_string(),
                description: "an earlier change".to_owned(),
                taken_at: "unknown".to_owned(),
            });
        Ok(Some((Snapshot { meta, bytes }, numbers.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_twenty() {
        let folder = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(folder.path().to_path_buf());
        let notebook = Path::new("/x/a.ipynb");
        for index in 0..25 {
            store
                .push(notebook, format!("{index}").as_bytes(), "edit")
                .unwrap();
        }
        let (newest, count) = store.newest(notebook).unwrap().unwrap();
        assert_eq!(newest.bytes, b"24");
        assert_eq!(count, MAX_SNAPSHOTS);
        assert!(store.newest(Path::new("/x/other.ipynb")).unwrap().is_none());
    }

    #[test]
    fn a_file_snapshot_keeps_the_bytes_it_had_when_the_file_is_replaced() {
        let folder = tempfile::tempdir().unwrap();
        let store = SnapshotStore::new(folder.path().join("snapshots"));
        let notebook = folder.path().join("a.ipynb");
        std::fs::write(&notebook, "before").unwrap();
        store.push_file(&notebook, "edit").unwrap();
        crate::atomic::write_atomically(&notebook, b"after", crate::atomic::WriteMode::REPLACE)
            .unwrap();
        let (newest, count) = store.newest(&notebook).unwrap().unwrap();
        assert_eq!(newest.bytes, b"before");
        assert_eq!(newest.meta.description, "edit");
        assert_eq!(count, 1);
        assert_eq!(std::fs::read(&notebook).unwrap(), b"after");
    }
}
