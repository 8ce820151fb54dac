//! The open rooms of one server, by notebook path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use host_core::NotebookLocation;

use crate::kernels::JupyterKernels;
use crate::presence::Presence;
use crate::rest::Rest;
use crate::room::Room;

/// Every room this host has open.
pub(crate) struct Rooms {
    rest: Rest,
    presence: Arc<Presence>,
    /// The kernels, for the epoch of runs others make (set once the kernels exist).
    kernels: Arc<OnceLock<Weak<JupyterKernels>>>,
    rooms: Mutex<HashMap<String, Room>>,
}

impl Rooms {
    pub(crate) fn new(rest: Rest, presence: Arc<Presence>) -> Arc<Rooms> {
        Arc::new(Rooms {
            rest,
            presence,
            kernels: Arc::new(OnceLock::new()),
            rooms: Mutex::new(HashMap::new()),
        })
    }

    /// Lets rooms ask `kernels` for the live epoch of their notebook's kernel.
    pub(crate) fn set_kernels(&self, kernels: &Arc<JupyterKernels>) {
        let _ = self.kernels.set(Arc::downgrade(kernels));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Room>> {
        self.rooms
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The open room of `path`.
    pub(crate) fn get(&self, path: &str) -> Option<Room> {
        self.lock().get(path).cloned()
    }

    /// The room of `location` (at `path`), opened when it is not (or is gone); whether it was
    /// open already.
    pub(crate) fn open(&self, location: &NotebookLocation, path: &str) -> (bool, Room) {
        let mut rooms = self.lock();
        if let Some(room) = rooms.get(path)
            && !room.is_gone()
        {
            return (true, room.clone());
        }
        let kernels = Arc::clone(&self.kernels);
        let room = Room::open(
            location.clone(),
            path.to_owned(),
            self.rest.clone(),
            self.presence.clone(),
            Arc::new(move |path: &str| kernels.get()?.upgrade()?.epoch_of(path)),
        );
        rooms.insert(path.to_owned(), room.clone());
        (false, room)
    }

    /// Forgets a room that could not be used.
    pub(crate) fn forget(&self, path: &str) {
        let room = self.lock().remove(path);
        if let Some(room) = room {
            self.presence.left(room.path());
            tokio::spawn(async move { room.close().await });
        }
    }

    /// Leaves every room.
    pub(crate) async fn close_all(&self) {
        let rooms: Vec<Room> = self.lock().drain().map(|(_, room)| room).collect();
        for room in rooms {
            room.close().await;
        }
    }
}
