//! The host files seam: the files a transfer reads and writes on the host's side
//! (`hostPath`), confined to the host's allowed folders. A host that has such files hands out
//! one [`HostFiles`] ([`crate::NotebookHost::files`]); without it the transfer tools are not
//! listed. The `host-files` crate implements it over folders on disk for the standalone and
//! VS Code hosts.

use std::io;

use super::location::HostError;
use mcp_contract::BoxFuture;

/// Files on the host's side of a transfer. Every path argument is one [`HostFiles::resolve`]
/// returned or one the `transfer` machine derived from it (a temporary file beside it), and
/// every operation confines it to the allowed folders again.
pub trait HostFiles: Send + Sync + 'static {
    /// Resolves a transfer's `hostPath` (relative to the first allowed folder, absolute, or a
    /// `file:` URI) to the absolute path of a file inside the allowed folders, refusing anything
    /// outside them and folders. The file need not exist.
    fn resolve<'a>(&'a self, reference: &'a str) -> BoxFuture<'a, Result<String, HostError>>;

    /// Opens an existing regular file for an upload to read.
    fn open<'a>(
        &'a self,
        path: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn HostFileReader>, HostError>>;

    /// Creates a download's temporary file exclusively (`AlreadyExists` if anything is there),
    /// creating missing folders inside the allowed ones, and keeps it open for writing.
    fn create<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<Box<dyn HostFileWriter>>>;

    /// Promotes a synced temporary file to `destination`: with `overwrite` an atomic rename over
    /// it; without, a hard link (failing with `AlreadyExists` when the destination exists, so an
    /// existing file is never replaced, even in a race) and the temporary file stays for
    /// [`HostFiles::remove`]. A failure leaves the destination untouched.
    fn promote<'a>(
        &'a self,
        temp: &'a str,
        destination: &'a str,
        overwrite: bool,
    ) -> BoxFuture<'a, io::Result<()>>;

    /// Deletes a transfer's temporary file; a missing file counts as removed.
    fn remove<'a>(&'a self, path: &'a str) -> BoxFuture<'a, io::Result<()>>;
}

/// A host file opened for an upload.
pub trait HostFileReader: Send {
    /// The opened file's size.
    fn size(&self) -> u64;

    /// Reads `len` bytes at `offset` (fewer only at the end of the file).
    fn read_at(&mut self, offset: u64, len: usize) -> BoxFuture<'_, io::Result<Vec<u8>>>;
}

/// A download's temporary file, open for writing in order.
pub trait HostFileWriter: Send {
    /// Writes all of `bytes` at `offset`.
    fn write_at(&mut self, offset: u64, bytes: Vec<u8>) -> BoxFuture<'_, io::Result<()>>;

    /// Flushes and syncs the written bytes to disk and closes the file.
    fn sync_and_close(self: Box<Self>) -> BoxFuture<'static, io::Result<()>>;
}
