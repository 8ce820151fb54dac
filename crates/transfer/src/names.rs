//! Validated kernel paths and nonces, and the temp-file names derived from them.

use std::fmt;

use crate::error::TransferError;

/// An absolute POSIX path in the kernel's filesystem.
///
/// Backslashes become `/` before the check, so a Windows path such as `C:\data.csv` is refused
/// (it becomes `C:/data.csv`, which is not absolute).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KernelPath(String);

impl KernelPath {
    /// Normalises and validates a `kernelPath` argument.
    pub fn parse(raw: &str) -> Result<KernelPath, TransferError> {
        let invalid = |reason: String| TransferError::InvalidArgument {
            argument: "kernelPath",
            reason,
        };
        let path = raw.replace('\\', "/");
        if path.is_empty() {
            return Err(invalid(
                "it is empty; give an absolute POSIX path such as /content/data.csv".into(),
            ));
        }
        if !path.starts_with('/') {
            return Err(invalid(format!(
                "{path:?} is not an absolute POSIX path (backslashes count as '/'); \
                 give a kernel-side path such as /content/data.csv"
            )));
        }
        if path.contains('\0') {
            return Err(invalid("it contains a NUL character".into()));
        }
        let file_name = path.rsplit('/').next().unwrap_or_default();
        if file_name.is_empty() || file_name == "." || file_name == ".." {
            return Err(invalid(format!(
                "{path:?} names a directory; give the path of a file"
            )));
        }
        Ok(KernelPath(path))
    }

    /// The normalised path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KernelPath {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// The random per-transfer token that names temp files and tags receipts.
///
/// The host supplies it (a random UUID is the intended value); this crate only checks that it is
/// 8 to 64 characters of `[A-Za-z0-9_-]`, so it is safe in file names and receipt lines.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Nonce(String);

impl Nonce {
    /// Validates a nonce.
    pub fn parse(raw: &str) -> Result<Nonce, TransferError> {
        let acceptable = (8..=64).contains(&raw.len())
            && raw
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
        if acceptable {
            Ok(Nonce(raw.to_owned()))
        } else {
            Err(TransferError::InvalidArgument {
                argument: "nonce",
                reason: "a nonce is 8 to 64 characters of letters, digits, '-' and '_' (a random UUID fits)".into(),
            })
        }
    }

    /// The nonce text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// The suffix appended to a destination path to name its temp file: `.jupyter-mcp-<nonce>.part`.
///
/// Hosts whose paths are not UTF-8 can append this to their native path themselves.
pub fn temp_file_suffix(nonce: &Nonce) -> String {
    format!(".jupyter-mcp-{nonce}.part")
}

/// `<path>.jupyter-mcp-<nonce>.part`.
pub fn temp_file_path(path: &str, nonce: &Nonce) -> String {
    format!("{path}{}", temp_file_suffix(nonce))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(raw: &str) -> String {
        match KernelPath::parse(raw) {
            Ok(path) => format!("ok {path}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn kernel_paths_must_be_absolute_posix_files() {
        expect_test::expect![[r#"
            ok /content/data.csv
            ok /content/sub/data.csv
            invalid kernelPath: "C:/x" is not an absolute POSIX path (backslashes count as '/'); give a kernel-side path such as /content/data.csv
            invalid kernelPath: "data.csv" is not an absolute POSIX path (backslashes count as '/'); give a kernel-side path such as /content/data.csv
            invalid kernelPath: it is empty; give an absolute POSIX path such as /content/data.csv
            invalid kernelPath: "/content/" names a directory; give the path of a file
            invalid kernelPath: "/content/.." names a directory; give the path of a file
            invalid kernelPath: "/" names a directory; give the path of a file
            invalid kernelPath: it contains a NUL character
            ok /tmp/dätä "q" 'x'.bin
        "#]]
        .assert_eq(
            &[
                "/content/data.csv",
                "\\content\\sub\\data.csv",
                "C:\\x",
                "data.csv",
                "",
                "/content/",
                "/content/..",
                "/",
                "/a\0b",
                "/tmp/dätä \"q\" 'x'.bin",
            ]
            .iter()
            .map(|raw| reason(raw) + "\n")
            .collect::<String>(),
        );
    }

    #[test]
    fn nonces_are_short_safe_tokens() {
        assert!(Nonce::parse("0f8fad5b-d9cb-469f-a165-70867728950e").is_ok());
        assert!(Nonce::parse("short").is_err());
        assert!(Nonce::parse(&"a".repeat(65)).is_err());
        assert!(Nonce::parse("abcdefgh:").is_err());
        assert!(Nonce::parse("abcdefgh/").is_err());
        let nonce = Nonce::parse("abcdefgh").unwrap();
        assert_eq!(
            temp_file_path("/x/y.bin", &nonce),
            "/x/y.bin.jupyter-mcp-abcdefgh.part"
        );
    }
}
