//! [`MemoryFiles`]: host files for transfers, in memory.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use crate::files::{HostFileReader, HostFileWriter, HostFiles};
use crate::host::HostError;
use mcp_contract::BoxFuture;

/// In-memory host files for transfers, by absolute path (`/` + the `hostPath`).
#[derive(Debug, Default)]
pub struct MemoryFiles {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
}

impl MemoryFiles {
    /// No files yet.
    pub fn new() -> Arc<MemoryFiles> {
        Arc::new(MemoryFiles::default())
    }

    /// Puts a file at `path`.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.lock().insert(absolute(path), bytes);
    }

    /// The file at `path`.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        self.lock().get(&absolute(path)).cloned()
    }

    /// Every path that has a file.
    pub fn paths(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.files.lock().expect("files lock")
    }
}

fn absolute(path: &str) -> String {
    format!("/{}", path.trim_start_matches('/'))
}

struct MemoryReader {
    bytes: Vec<u8>,
}

impl HostFileReader for MemoryReader {
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&mut self, offset: u64, len: usize) -> BoxFuture<'_, io::Result<Vec<u8>>> {
        let start = (offset as usize).min(self.bytes.len());
        let end = start.saturating_add(len).min(self.bytes.len());
        let slice = self.bytes[start..end].to_vec();
        Box::pin(async move { Ok(slice) })
    }
}

struct MemoryWriter {
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    path: String,
}

impl HostFileWriter for MemoryWriter {
    fn write_at(&mut self, offset: u64, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>> {
        let mut files = self.files.lock().expect("files lock");
        let file = files.entry(self.path.clone()).or_default();
        let end = offset as usize + bytes.len();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[offset as usize..end].copy_from_slice(&bytes);
        Box::pin(async { Ok(()) })
    }

    fn sync_and_close(self: Box<Self>) -> BoxFuture<'static, io::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

impl HostFiles for MemoryFiles {
    fn resolve<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            if reference.split('/').any(|part| part == "..") {
                return Err(HostError::OutsideRoot {
                    reference: reference.to_owned(),
                    root: "/".to_owned(),
                });
            }
            Ok(absolute(reference))
        })
    }

    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn HostFileReader>, HostError>> {
        Box::pin(async move {
            let bytes = self.get(path).ok_or_else(|| HostError::InvalidPath {
                reference: path.to_owned(),
                reason: "it does not exist".to_owned(),
            })?;
            Ok(Box::new(MemoryReader { bytes }) as Box<dyn HostFileReader>)
        })
    }

    fn create<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<Box<dyn HostFileWriter>>> {
        Box::pin(async move {
            let path = absolute(path);
            let mut files = self.lock();
            if files.contains_key(&path) {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            files.insert(path.clone(), Vec::new());
            Ok(Box::new(MemoryWriter {
                files: self.files.clone(),
                path,
            }) as Box<dyn HostFileWriter>)
        })
    }

    fn promote<'a>(
        &'a self,
        temp: &'a str,
        destination: &'a str,
        overwrite: bool,
    ) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            let mut files = self.lock();
            let (temp, destination) = (absolute(temp), absolute(destination));
            if !overwrite && files.contains_key(&destination) {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            let bytes = files.get(&temp).cloned().ok_or(io::ErrorKind::NotFound)?;
            files.insert(destination, bytes);
            if overwrite {
                files.remove(&temp);
            }
            Ok(())
        })
    }

    fn remove<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<()>> {
        Box::pin(async move {
            self.lock().remove(&absolute(path));
            Ok(())
        })
    }
}
