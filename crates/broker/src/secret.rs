//! The broker secret and the files that carry it.
//!
//! Each broker makes a random 256-bit secret when it takes the shared port and writes it, as
//! hex, to `<runtime dir>/broker-<port>.token`: a file only its user can read (mode 0600 in a
//! 0700 folder). Peers read it to authenticate. The secret itself never crosses a socket: a
//! registration carries an HMAC of its body, the broker's answer an HMAC of the peer's nonce,
//! and the token the broker presents to a peer is an HMAC of the peer's id and port. So no
//! other local user can register as a peer, invoke a peer, or learn anything from a process
//! that squats the port.

use std::io::Write;
use std::path::{Path, PathBuf};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::error::BrokerError;

/// Random bytes from the operating system, as lower-case hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    SystemRandom::new()
        .fill(&mut buffer)
        .expect("the operating system's random generator is available");
    hex(&buffer)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    let text = text.trim();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|index| u8::from_str_radix(text.get(index..index + 2)?, 16).ok())
        .collect()
}

/// A broker secret: an HMAC-SHA256 key.
#[derive(Clone)]
pub struct Secret {
    key: hmac::Key,
    hex: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Secret(..)")
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        // Compared only to tell whether a file still holds our own secret.
        self.sign("compare", &[]) == other.sign("compare", &[])
    }
}

impl Secret {
    /// A fresh random secret.
    pub fn generate() -> Secret {
        Secret::from_hex(&random_hex(32)).expect("fresh hex parses")
    }

    /// A secret from its hex text (at least 128 bits).
    pub fn from_hex(text: &str) -> Option<Secret> {
        let bytes = unhex(text).filter(|bytes| bytes.len() >= 16)?;
        Some(Secret {
            key: hmac::Key::new(hmac::HMAC_SHA256, &bytes),
            hex: text.trim().to_owned(),
        })
    }

    fn message(purpose: &str, parts: &[&[u8]]) -> Vec<u8> {
        // Length-prefixed parts, so that no two different inputs give the same message.
        let mut message = Vec::new();
        for part in std::iter::once(purpose.as_bytes()).chain(parts.iter().copied()) {
            message.extend_from_slice(&(part.len() as u64).to_be_bytes());
            message.extend_from_slice(part);
        }
        message
    }

    /// The HMAC (hex) of `parts` for `purpose`.
    pub fn sign(&self, purpose: &str, parts: &[&[u8]]) -> String {
        hex(hmac::sign(&self.key, &Secret::message(purpose, parts)).as_ref())
    }

    /// Checks an HMAC in constant time.
    pub fn verify(&self, purpose: &str, parts: &[&[u8]], tag: &str) -> bool {
        let Some(tag) = unhex(tag) else {
            return false;
        };
        hmac::verify(&self.key, &Secret::message(purpose, parts), &tag).is_ok()
    }

    /// The token the broker presents to the peer `id` listening on `port`.
    pub fn peer_token(&self, id: &str, port: u16) -> String {
        self.sign("peer", &[id.as_bytes(), &port.to_be_bytes()])
    }

    fn to_hex(&self) -> &str {
        &self.hex
    }
}

/// Where token files live by default: `$XDG_RUNTIME_DIR/jupyter-mcp` (private to the user and
/// cleared at logout), else `jupyter-mcp/run` in the user's cache folder.
pub fn default_runtime_dir() -> PathBuf {
    if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").filter(|value| !value.is_empty()) {
        return PathBuf::from(runtime).join("jupyter-mcp");
    }
    dirs::cache_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("jupyter-mcp")
        .join("run")
}

/// A file holding one secret value, readable only by its user.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
}

impl TokenFile {
    /// The broker secret file of `port`.
    pub fn broker_secret(runtime_dir: &Path, port: u16) -> TokenFile {
        TokenFile {
            path: runtime_dir.join(format!("broker-{port}.token")),
        }
    }

    /// The file holding the `/mcp` access token shared by every server on `port`.
    pub fn shared_access_token(runtime_dir: &Path, port: u16) -> TokenFile {
        TokenFile {
            path: runtime_dir.join(format!("mcp-{port}.token")),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn folder(&self) -> Result<&Path, BrokerError> {
        let folder = self.path.parent().expect("a token file has a folder");
        private_folder_builder()
            .create(folder)
            .map_err(|source| BrokerError::TokenFile {
                path: folder.to_path_buf(),
                problem: format!("cannot create the folder: {source}"),
            })?;
        Ok(folder)
    }

    /// Replaces the file's contents atomically (a private temporary file, then a rename), so a
    /// reader sees the old value or the new one, never a part.
    pub fn write(&self, contents: &str) -> Result<(), BrokerError> {
        let folder = self.folder()?;
        let temporary = folder.join(format!(".{}.{}", random_hex(8), "tmp"));
        let problem = |source: std::io::Error| BrokerError::TokenFile {
            path: self.path.clone(),
            problem: source.to_string(),
        };
        let result = (|| {
            let mut file = private_new_file().open(&temporary)?;
            file.write_all(contents.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        result.map_err(problem)
    }

    /// Reads the file, refusing one that another user owns or that others may read or write
    /// (someone could have planted or seen it).
    pub fn read(&self) -> Result<String, BrokerError> {
        let problem = |problem: String| BrokerError::TokenFile {
            path: self.path.clone(),
            problem,
        };
        let metadata = std::fs::symlink_metadata(&self.path)
            .map_err(|source| problem(format!("cannot read it: {source}")))?;
        if !metadata.is_file() {
            return Err(problem("it is not a regular file".to_owned()));
        }
        if let Some(unsafe_file) = exposure(&metadata) {
            return Err(problem(unsafe_file.to_owned()));
        }
        let text = std::fs::read_to_string(&self.path)
            .map_err(|source| problem(format!("cannot read it: {source}")))?;
        Ok(text.trim().to_owned())
    }

    /// Reads the file, or makes it with `make()` when it does not exist yet. When several
    /// processes race, the first write wins and everyone reads it.
    pub fn read_or_create(&self, make: impl FnOnce() -> String) -> Result<String, BrokerError> {
        match self.read() {
            Ok(text) if !text.is_empty() => return Ok(text),
            Ok(_) => {}
            Err(_) if !self.path.exists() => {}
            Err(error) => return Err(error),
        }
        self.folder()?;
        let value = make();
        let created = private_new_file().open(&self.path).and_then(|mut file| {
            file.write_all(value.as_bytes())?;
            file.sync_all()
        });
        match created {
            Ok(()) => Ok(value),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => self.read(),
            Err(source) => Err(BrokerError::TokenFile {
                path: self.path.clone(),
                problem: source.to_string(),
            }),
        }
    }

    /// Writes a broker secret.
    pub fn write_secret(&self, secret: &Secret) -> Result<(), BrokerError> {
        self.write(secret.to_hex())
    }

    /// Reads a broker secret.
    pub fn read_secret(&self) -> Result<Secret, BrokerError> {
        let text = self.read()?;
        Secret::from_hex(&text).ok_or_else(|| BrokerError::TokenFile {
            path: self.path.clone(),
            problem: "it does not hold a broker secret".to_owned(),
        })
    }

    /// Removes the file if it still holds `secret` (a newer broker's file stays).
    pub fn remove_if_holds(&self, secret: &Secret) {
        if self.read_secret().is_ok_and(|current| current == *secret) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Creates folders only the user may enter (0700 on Unix; elsewhere the folder inherits the
/// user profile's access rules, which is where the runtime folder lives there).
fn private_folder_builder() -> std::fs::DirBuilder {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
}

/// Opens a new file (failing if one exists) only the user may read (0600 on Unix).
fn private_new_file() -> std::fs::OpenOptions {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
}

/// Why a secret file cannot be trusted: another user owns it, or others may read or write it.
#[cfg(unix)]
fn exposure(metadata: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    if metadata.uid() != rustix::process::getuid().as_raw() {
        return Some("it belongs to another user");
    }
    (metadata.permissions().mode() & 0o077 != 0)
        .then_some("other users may read or change it (its mode must be 0600)")
}

/// Elsewhere the user profile's access rules protect the runtime folder.
#[cfg(not(unix))]
fn exposure(_metadata: &std::fs::Metadata) -> Option<&'static str> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_bind_purpose_and_parts() {
        let secret = Secret::generate();
        let tag = secret.sign("register", &[b"body"]);
        assert!(secret.verify("register", &[b"body"], &tag));
        assert!(!secret.verify("register", &[b"body2"], &tag));
        assert!(!secret.verify("unregister", &[b"body"], &tag));
        assert!(!secret.verify("register", &[b"bo", b"dy"], &tag));
        assert!(!secret.verify("register", &[b"body"], "zz"));
        assert!(!Secret::generate().verify("register", &[b"body"], &tag));
        assert_ne!(secret.peer_token("w", 1), secret.peer_token("w", 2));
        assert!(Secret::from_hex("abcd").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn secret_files_are_private_and_checked() {
        use std::os::unix::fs::PermissionsExt;
        let folder = tempfile::tempdir().unwrap();
        let runtime = folder.path().join("run");
        let file = TokenFile::broker_secret(&runtime, 4242);
        let secret = Secret::generate();
        file.write_secret(&secret).unwrap();
        let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let folder_mode = std::fs::metadata(&runtime).unwrap().permissions().mode();
        assert_eq!(folder_mode & 0o777, 0o700);
        assert_eq!(file.read_secret().unwrap(), secret);

        // A newer secret replaces it; removing with the old one keeps the new file.
        let newer = Secret::generate();
        file.write_secret(&newer).unwrap();
        file.remove_if_holds(&secret);
        assert!(file.path().exists());
        file.remove_if_holds(&newer);
        assert!(!file.path().exists());

        // A file others can read is refused.
        file.write_secret(&secret).unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = file.read_secret().unwrap_err().to_string();
        assert!(error.contains("0600"), "{error}");
    }

    #[test]
    fn shared_tokens_are_made_once() {
        let folder = tempfile::tempdir().unwrap();
        let file = TokenFile::shared_access_token(folder.path(), 7);
        let first = file.read_or_create(|| "first".to_owned()).unwrap();
        let second = file.read_or_create(|| "second".to_owned()).unwrap();
        assert_eq!((first.as_str(), second.as_str()), ("first", "first"));
    }
}
