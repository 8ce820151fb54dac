//! `notebookRef`s: short, opaque handles for notebooks, `nb_` + the first 24 lower-case hex
//! characters of SHA-256 over the JSON text of `[windowId, uri]`. They are deterministic for one
//! window id, so every host and the broker compute the same ref for the same notebook.

use sha2::{Digest, Sha256};

/// The notebookRef of `uri` in window `window_id`.
pub fn notebook_ref(window_id: &str, uri: &str) -> String {
    let json = serde_json::to_string(&[window_id, uri]).expect("two strings serialise");
    let digest = Sha256::digest(json.as_bytes());
    let mut text = String::from("nb_");
    for byte in digest.iter().take(12) {
        text.push_str(&format!("{byte:02x}"));
    }
    text
}

/// Characters kept as they are in `file:` URIs (RFC 3986 unreserved, plus `/`), as VS Code's
/// `Uri.toString()` keeps them.
fn keep_in_uri(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/')
}

/// The `file:` URI of an absolute path, every other byte percent-encoded. On Windows, as VS
/// Code writes it: `file:///c%3A/a/b`, `file://server/share/a`.
pub fn file_uri(path: &std::path::Path) -> String {
    #[cfg(windows)]
    if let Ok(path) = crate::windows_paths::WinPath::parse(&path.to_string_lossy()) {
        return path.file_uri();
    }
    format!("file://{}", encode_uri_path(&path.to_string_lossy()))
}

/// `text` with every byte but the unreserved ones and `/` percent-encoded.
pub fn encode_uri_path(text: &str) -> String {
    percent_encode(text, keep_in_uri)
}

/// `text` with every byte that `keep` refuses percent-encoded.
pub(crate) fn percent_encode(text: &str, keep: fn(u8) -> bool) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if keep(byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// Decodes `%XX` escapes; `None` for a malformed escape or a result that is not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// What a notebook reference string is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefKind<'a> {
    /// A well-formed `nb_` handle.
    Handle(&'a str),
    /// Starts with `nb_` but is not `nb_` + 24 hex characters.
    Malformed,
    /// Anything else: a URI or a path.
    Location(&'a str),
}

/// Classifies a reference.
pub fn classify(reference: &str) -> RefKind<'_> {
    let trimmed = reference.trim();
    match trimmed.strip_prefix("nb_") {
        Some(hex)
            if hex.len() == 24
                && hex
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)) =>
        {
            RefKind::Handle(trimmed)
        }
        Some(_) => RefKind::Malformed,
        None => RefKind::Location(trimmed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_deterministic_and_well_formed() {
        let first = notebook_ref("w1", "file:///a.ipynb");
        assert_eq!(first, notebook_ref("w1", "file:///a.ipynb"));
        assert_ne!(first, notebook_ref("w2", "file:///a.ipynb"));
        assert_eq!(first.len(), 27);
        assert_eq!(classify(&first), RefKind::Handle(&first));
        assert_eq!(classify("nb_xyz"), RefKind::Malformed);
        assert_eq!(classify("a/b.ipynb"), RefKind::Location("a/b.ipynb"));
    }

    #[test]
    fn matches_the_reference_algorithm() {
        // sha256('["w","u"]') computed independently with Python's hashlib.
        assert_eq!(notebook_ref("w", "u"), "nb_a3d88f44c57d1839ea07d28d");
    }
}
