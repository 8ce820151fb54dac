//! Windows paths and `file:` URIs as pure text, so that their rules hold, and are tested, on
//! every platform: drive paths (`C:\a\b`, `C:/a/b`), UNC paths (`\\server\share\a`), the
//! verbatim forms `canonicalize` returns (`\\?\C:\a`, `\\?\UNC\server\share\a`), and the URIs
//! VS Code writes for them (`file:///c%3A/a/b`, `file://server/share/a`). Windows compares
//! names without regard to case, and so does [`WinPath::relative_to`].

use crate::refs::percent_decode;

/// Where an absolute Windows path starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WinPrefix {
    /// A drive letter, upper-case.
    Drive(char),
    /// A network share: `\\server\share`.
    Unc {
        /// The server's name.
        server: String,
        /// The share's name on it.
        share: String,
    },
}

/// An absolute Windows path with `.` and `..` resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WinPath {
    /// The drive or share.
    pub prefix: WinPrefix,
    /// The names after the prefix, as written.
    pub parts: Vec<String>,
}

/// Why a text is not an absolute Windows path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAbsolute {
    /// Relative to the current folder (`a\b`, `..\x`): resolve it against a folder first.
    Relative,
    /// Relative to a drive's current folder (`C:a`) or to the current drive's root (`\a`):
    /// ambiguous, so never accepted.
    Ambiguous,
    /// `..` climbs above the drive or share.
    AboveRoot,
    /// A device path (`\\.\`), a verbatim path of another kind, or an empty share name.
    Unsupported,
}

fn separators(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\\', '/'])
}

/// Resolves `.` and `..` of `names` onto `parts`.
fn push_names<'a>(
    parts: &mut Vec<String>,
    names: impl Iterator<Item = &'a str>,
) -> Result<(), NotAbsolute> {
    for name in names {
        match name {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(NotAbsolute::AboveRoot);
                }
            }
            name => parts.push(name.to_owned()),
        }
    }
    Ok(())
}

fn drive_letter(text: &str) -> Option<char> {
    let mut chars = text.chars();
    let letter = chars.next().filter(char::is_ascii_alphabetic)?;
    (chars.next() == Some(':')).then(|| letter.to_ascii_uppercase())
}

impl WinPath {
    /// Parses an absolute Windows path.
    pub fn parse(text: &str) -> Result<WinPath, NotAbsolute> {
        // Verbatim forms first: `\\?\C:\a`, `\\?\UNC\server\share\a`.
        let text = if let Some(rest) = text.strip_prefix(r"\\?\") {
            if let Some(unc) = rest
                .strip_prefix("UNC\\")
                .or_else(|| rest.strip_prefix("unc\\"))
            {
                return WinPath::unc(unc);
            }
            if drive_letter(rest).is_none() {
                return Err(NotAbsolute::Unsupported);
            }
            rest
        } else {
            text
        };
        if text.starts_with(r"\\.\") || text.starts_with("//./") {
            return Err(NotAbsolute::Unsupported);
        }
        if let Some(unc) = text.strip_prefix(r"\\").or_else(|| text.strip_prefix("//")) {
            return WinPath::unc(unc);
        }
        if let Some(letter) = drive_letter(text) {
            let rest = &text[2..];
            if !(rest.starts_with('\\') || rest.starts_with('/')) {
                return Err(NotAbsolute::Ambiguous);
            }
            let mut parts = Vec::new();
            push_names(&mut parts, separators(rest))?;
            return Ok(WinPath {
                prefix: WinPrefix::Drive(letter),
                parts,
            });
        }
        if text.starts_with('\\') || text.starts_with('/') {
            return Err(NotAbsolute::Ambiguous);
        }
        Err(NotAbsolute::Relative)
    }

    fn unc(rest: &str) -> Result<WinPath, NotAbsolute> {
        let mut names = separators(rest);
        let server = names.next().unwrap_or_default();
        let share = names.next().unwrap_or_default();
        if server.is_empty() || share.is_empty() || server == "." || server == "?" {
            return Err(NotAbsolute::Unsupported);
        }
        let mut parts = Vec::new();
        push_names(&mut parts, names)?;
        Ok(WinPath {
            prefix: WinPrefix::Unc {
                server: server.to_owned(),
                share: share.to_owned(),
            },
            parts,
        })
    }

    /// The `/`-separated path of this one under `root`, compared without regard to case
    /// (empty for the root itself); `None` when it is not under `root`.
    pub fn relative_to(&self, root: &WinPath) -> Option<String> {
        let prefix_matches = match (&self.prefix, &root.prefix) {
            (WinPrefix::Drive(mine), WinPrefix::Drive(theirs)) => mine == theirs,
            (
                WinPrefix::Unc { server, share },
                WinPrefix::Unc {
                    server: root_server,
                    share: root_share,
                },
            ) => same_name(server, root_server) && same_name(share, root_share),
            _ => false,
        };
        if !prefix_matches || self.parts.len() < root.parts.len() {
            return None;
        }
        let under = self
            .parts
            .iter()
            .zip(&root.parts)
            .all(|(mine, theirs)| same_name(mine, theirs));
        under.then(|| self.parts[root.parts.len()..].join("/"))
    }

    /// The `file:` URI as VS Code writes it: the drive letter lower-case and its colon
    /// escaped (`file:///c%3A/a%20b`), a share as the URI's authority (`file://server/share/a`).
    pub fn file_uri(&self) -> String {
        let mut uri = String::from("file://");
        match &self.prefix {
            WinPrefix::Drive(letter) => {
                uri.push('/');
                uri.push(letter.to_ascii_lowercase());
                uri.push_str("%3A");
            }
            WinPrefix::Unc { server, share } => {
                uri.push_str(&crate::refs::encode_uri_path(server));
                uri.push('/');
                uri.push_str(&crate::refs::encode_uri_path(share));
            }
        }
        if self.parts.is_empty() {
            uri.push('/');
        }
        for part in &self.parts {
            uri.push('/');
            uri.push_str(&crate::refs::encode_uri_path(part));
        }
        uri
    }

    /// The path of a `file:` URI: `file:///C:/a`, `file:///c%3A/a`, `file://localhost/C:/a`,
    /// `file://server/share/a`. `None` for other URIs and malformed escapes.
    pub fn from_file_uri(uri: &str) -> Option<WinPath> {
        let rest = uri.strip_prefix("file:")?;
        let rest = rest.split(['?', '#']).next().unwrap_or(rest);
        let rest = rest.strip_prefix("//")?;
        let slash = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(slash);
        let path = percent_decode(path)?;
        if authority.is_empty() || authority.eq_ignore_ascii_case("localhost") {
            // `/C:/a` → `C:/a`.
            WinPath::parse(path.strip_prefix('/')?).ok()
        } else {
            let server = percent_decode(authority)?;
            WinPath::parse(&format!(r"\\{server}{path}")).ok()
        }
    }
}

impl std::fmt::Display for WinPath {
    /// `C:\a\b`, `\\server\share\a`; a drive's root as `C:\`.
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.prefix {
            WinPrefix::Drive(letter) => write!(out, "{letter}:")?,
            WinPrefix::Unc { server, share } => write!(out, r"\\{server}\{share}")?,
        }
        if self.parts.is_empty() {
            return write!(out, "\\");
        }
        for part in &self.parts {
            write!(out, "\\{part}")?;
        }
        Ok(())
    }
}

/// Two names as Windows compares them: without regard to case.
fn same_name(left: &str, right: &str) -> bool {
    left.chars()
        .flat_map(char::to_uppercase)
        .eq(right.chars().flat_map(char::to_uppercase))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> WinPath {
        WinPath::parse(text).unwrap_or_else(|why| panic!("{text}: {why:?}"))
    }

    #[test]
    fn drive_unc_and_verbatim_forms_parse_to_one_path() {
        let plain = path(r"C:\Users\Ada\notes\a.ipynb");
        assert_eq!(plain.prefix, WinPrefix::Drive('C'));
        assert_eq!(plain.parts, ["Users", "Ada", "notes", "a.ipynb"]);
        assert_eq!(path("c:/Users/Ada/notes/a.ipynb"), {
            let mut lower = plain.clone();
            lower.prefix = WinPrefix::Drive('C');
            lower
        });
        assert_eq!(path(r"\\?\C:\Users\Ada\notes\a.ipynb"), plain);
        assert_eq!(path(r"C:\Users\.\Ada\x\..\notes\a.ipynb"), plain);
        assert_eq!(plain.to_string(), r"C:\Users\Ada\notes\a.ipynb");

        let share = path(r"\\files\team\q3\a.ipynb");
        assert_eq!(
            share.prefix,
            WinPrefix::Unc {
                server: "files".into(),
                share: "team".into()
            }
        );
        assert_eq!(path(r"\\?\UNC\files\team\q3\a.ipynb"), share);
        assert_eq!(share.to_string(), r"\\files\team\q3\a.ipynb");
        assert_eq!(path(r"D:\").to_string(), r"D:\");
    }

    #[test]
    fn relative_ambiguous_and_escaping_paths_are_not_absolute() {
        assert_eq!(WinPath::parse(r"a\b.ipynb"), Err(NotAbsolute::Relative));
        assert_eq!(WinPath::parse(r"..\..\x"), Err(NotAbsolute::Relative));
        assert_eq!(WinPath::parse(r"C:a.ipynb"), Err(NotAbsolute::Ambiguous));
        assert_eq!(
            WinPath::parse(r"\Windows\win.ini"),
            Err(NotAbsolute::Ambiguous)
        );
        assert_eq!(WinPath::parse(r"C:\..\x"), Err(NotAbsolute::AboveRoot));
        assert_eq!(
            WinPath::parse(r"\\.\PhysicalDrive0"),
            Err(NotAbsolute::Unsupported)
        );
        assert_eq!(WinPath::parse(r"\\server"), Err(NotAbsolute::Unsupported));
    }

    #[test]
    fn containment_ignores_case_and_refuses_other_drives_and_shares() {
        let root = path(r"C:\Work\Project");
        let inside = path(r"c:\work\PROJECT\data\A.ipynb");
        assert_eq!(inside.relative_to(&root).as_deref(), Some("data/A.ipynb"));
        assert_eq!(root.relative_to(&root).as_deref(), Some(""));
        for outside in [
            r"C:\Windows\win.ini",
            r"C:\Work\Projects\a.ipynb",
            r"C:\Work",
            r"D:\Work\Project\a.ipynb",
            r"\\server\share\Work\Project\a.ipynb",
        ] {
            assert_eq!(path(outside).relative_to(&root), None, "{outside}");
        }
        let share_root = path(r"\\Files\Team");
        assert_eq!(
            path(r"\\files\TEAM\q3\a.ipynb")
                .relative_to(&share_root)
                .as_deref(),
            Some("q3/a.ipynb")
        );
        assert_eq!(
            path(r"\\files\other\a.ipynb").relative_to(&share_root),
            None
        );
        assert_eq!(
            path(r"C:\A\ü.ipynb").relative_to(&path(r"c:\a")).as_deref(),
            Some("ü.ipynb"),
            "non-ASCII names compare without case too"
        );
    }

    #[test]
    fn file_uris_are_written_as_vscode_writes_them_and_read_in_every_form() {
        let plain = path(r"C:\Users\Ada\my notes\ü (1).ipynb");
        let uri = plain.file_uri();
        assert_eq!(
            uri,
            "file:///c%3A/Users/Ada/my%20notes/%C3%BC%20%281%29.ipynb"
        );
        assert_eq!(WinPath::from_file_uri(&uri), Some(plain.clone()));
        for form in [
            "file:///C:/Users/Ada/my%20notes/%C3%BC%20%281%29.ipynb",
            "file://localhost/c:/Users/Ada/my%20notes/%C3%BC%20%281%29.ipynb",
            "file:///c%3A/Users/Ada/my notes/ü (1).ipynb",
        ] {
            assert_eq!(WinPath::from_file_uri(form), Some(plain.clone()), "{form}");
        }
        let share = path(r"\\files\team\a b.ipynb");
        assert_eq!(share.file_uri(), "file://files/team/a%20b.ipynb");
        assert_eq!(WinPath::from_file_uri(&share.file_uri()), Some(share));
        assert_eq!(WinPath::from_file_uri("file:///tmp/a.ipynb"), None);
        assert_eq!(WinPath::from_file_uri("https://x/a.ipynb"), None);
        assert_eq!(WinPath::from_file_uri("file:///c%3A/%ZZ"), None);
    }
}
