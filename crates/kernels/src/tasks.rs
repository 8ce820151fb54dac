//! Background tasks tied to the lifetime of a value.

use tokio::task::JoinHandle;

/// Tasks that are aborted when this value is dropped.
#[derive(Debug, Default)]
pub(crate) struct AbortOnDrop(Vec<JoinHandle<()>>);

impl AbortOnDrop {
    pub(crate) fn push(&mut self, handle: JoinHandle<()>) {
        self.0.push(handle);
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.abort();
        }
    }
}
