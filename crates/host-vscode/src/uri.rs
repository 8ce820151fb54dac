//! Notebook URIs as VS Code writes them (`Uri.toString()`), so that a reference a client passes
//! and the URI VS Code lists are the same key.

use std::path::PathBuf;

pub use host_core::refs::file_uri;
#[cfg(not(windows))]
use host_core::refs::percent_decode;

/// The path of a `file:` URI (`file:///a/b`, `file://localhost/a/b` or `file:/a/b`).
#[cfg(not(windows))]
pub fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file:")?;
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let path = if let Some(authority_and_path) = rest.strip_prefix("//") {
        let slash = authority_and_path.find('/')?;
        let authority = &authority_and_path[..slash];
        if !(authority.is_empty() || authority == "localhost") {
            return None;
        }
        &authority_and_path[slash..]
    } else {
        rest
    };
    Some(PathBuf::from(percent_decode(path)?))
}

/// The path of a `file:` URI as VS Code writes it on Windows (`file:///c%3A/a/b`, a share as
/// `file://server/share/a`), by the shared rules of `windows_paths`.
#[cfg(windows)]
pub fn file_path(uri: &str) -> Option<PathBuf> {
    let uri = uri.replacen(
        "file:/",
        "file:///",
        usize::from(!uri.starts_with("file://")),
    );
    host_core::windows_paths::WinPath::from_file_uri(&uri)
        .map(|path| PathBuf::from(path.to_string()))
}

/// The canonical form of a notebook URI: `file:` URIs re-encoded as VS Code does; other schemes
/// (`untitled:`, remote schemes) as given.
pub fn canonical(uri: &str) -> String {
    match file_path(uri) {
        Some(path) if path.is_absolute() => file_uri(&path),
        _ => uri.to_owned(),
    }
}

/// Whether the text starts with a URI scheme (`name:`, more than one letter so that Windows
/// drive letters are not schemes).
pub fn has_scheme(text: &str) -> bool {
    match text.find(':') {
        Some(colon) if colon > 1 => text[..colon]
            .chars()
            .all(|character| character.is_ascii_alphanumeric() || "+-.".contains(character)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn file_uris_are_encoded_as_vscode_encodes_them() {
        let path = Path::new("/tmp/my notebooks/ünï (1).ipynb");
        let uri = file_uri(path);
        assert_eq!(
            uri,
            "file:///tmp/my%20notebooks/%C3%BCn%C3%AF%20%281%29.ipynb"
        );
        assert_eq!(file_path(&uri).unwrap(), path);
        for (given, expected) in [
            ("file:///tmp/my notebooks/ünï (1).ipynb", uri.as_str()),
            ("file://localhost/tmp/a.ipynb", "file:///tmp/a.ipynb"),
            ("untitled:Untitled-1.ipynb", "untitled:Untitled-1.ipynb"),
        ] {
            assert_eq!(canonical(given), expected, "{given}");
        }
    }

    #[test]
    fn schemes_are_told_from_paths() {
        for (reference, scheme) in [
            ("file:///a.ipynb", true),
            ("untitled:x.ipynb", true),
            ("notes/a.ipynb", false),
            ("C:\\a.ipynb", false),
        ] {
            assert_eq!(has_scheme(reference), scheme, "{reference}");
        }
        assert_eq!(
            file_path("file:///a/%ZZ.ipynb"),
            None,
            "a malformed escape is no path"
        );
    }
}
