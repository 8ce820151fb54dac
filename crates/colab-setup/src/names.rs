//! Validated names: server aliases, google-colab-cli session names, setup ids, kernel choice ids,
//! check nonces and file-service roots.
//!
//! Nothing here draws random numbers: every generated name is a pure function of the bytes the
//! host hands in, so tests can name the values they expect.

use std::fmt;

use notebook_model::identity::push_base36;
use serde::Serialize;

use crate::error::SetupError;

/// Lowercase hexadecimal digits, used by every generated name.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends the lowercase hexadecimal form of `bytes`.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
}

/// Validated names that are their text: each struct with its derives, `as_str` and `Display`.
macro_rules! text_names {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident;
        $(#[$as_str_meta:meta])*
        fn as_str;
    )*) => {$(
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            $(#[$as_str_meta])*
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str(&self.0)
            }
        }
    )*};
}

text_names! {
    /// The name of an MCP-created Colab server: `m` followed by eight lowercase hexadecimal digits
    /// (nine characters, inside the Colab extension's limit of under ten for an alias).
    ///
    /// Generated from four random bytes the host supplies ([`ServerAlias::generate`]), or
    /// parsed strictly from a client's `serverAlias` ([`ServerAlias::parse`]): no trimming, no
    /// case folding, nothing but the exact form.
    pub struct ServerAlias;
    /// The alias as the picker and receipts show it.
    fn as_str;

    /// The name of a session google-colab-cli recorded in its sessions file (the key of the
    /// session's entry). The CLI lets users choose these, so the rule is looser than an alias's,
    /// but still strict: 1 to 64 characters of ASCII letters, digits, `.`, `_` and `-`, not
    /// starting with a `.`, matched exactly.
    pub struct SessionName;
    /// The name as the sessions file spells it.
    fn as_str;

    /// The opaque id of one tracked setup (`setupId`): `setup_<milliseconds in base 36>_<6 base-36
    /// characters>`, built from the admission time and a random number the host supplies.
    pub struct SetupId;
    /// The id as clients see it.
    fn as_str;

    /// The id of one entry of one kernel-choice listing (`kernelChoiceId`):
    /// `kc<listing number>-<8 hex from the listing's random token>-<position>`.
    ///
    /// Clients must treat it as opaque. The listing number makes ids of different listings of one
    /// setup distinct even when two random tokens collide; the token makes them unguessable.
    pub struct ChoiceId;
    /// The id as clients see it.
    fn as_str;
}

impl ServerAlias {
    /// The alias for these four random bytes: `m` and their lowercase hex.
    pub fn generate(random: [u8; 4]) -> Self {
        let mut alias = String::with_capacity(9);
        alias.push('m');
        push_hex(&mut alias, &random);
        ServerAlias(alias)
    }

    /// Accepts exactly `m` followed by eight characters of `0-9a-f`.
    pub fn parse(raw: &str) -> Result<Self, SetupError> {
        let invalid = |reason: &'static str| SetupError::AliasInvalid { reason };
        let Some(digits) = raw.strip_prefix('m') else {
            return Err(invalid(
                "an MCP server alias starts with 'm' (for example m0123abcd)",
            ));
        };
        if digits.len() != 8 {
            return Err(invalid(
                "an MCP server alias is 'm' followed by exactly eight hexadecimal digits",
            ));
        }
        if !digits
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
        {
            return Err(invalid(
                "an MCP server alias uses only lowercase hexadecimal digits after the 'm'",
            ));
        }
        Ok(ServerAlias(raw.to_owned()))
    }
}

impl SessionName {
    /// Validates a session name.
    pub fn parse(raw: &str) -> Result<Self, SetupError> {
        let invalid = |reason: &'static str| SetupError::SessionNameInvalid { reason };
        if raw.is_empty() || raw.len() > 64 {
            return Err(invalid("a session name has 1 to 64 characters"));
        }
        if raw.starts_with('.') {
            return Err(invalid("a session name does not start with '.'"));
        }
        if !raw
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
        {
            return Err(invalid(
                "a session name uses only ASCII letters, digits, '.', '_' and '-'",
            ));
        }
        Ok(SessionName(raw.to_owned()))
    }
}

impl SetupId {
    /// Builds `setup_<now_ms base 36>_<random reduced to six base-36 digits>`.
    pub fn from_parts(now_ms: u64, random: u64) -> Self {
        const SUFFIX_SPACE: u64 = 36u64.pow(6);
        let mut id = String::from("setup_");
        push_base36(&mut id, now_ms, 1);
        id.push('_');
        push_base36(&mut id, random % SUFFIX_SPACE, 6);
        SetupId(id)
    }
}

impl PartialEq<str> for SetupId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl ChoiceId {
    pub(crate) fn new(listing: u32, token: [u8; 4], position: usize) -> Self {
        let mut id = format!("kc{listing}-");
        push_hex(&mut id, &token);
        id.push('-');
        id.push_str(&position.to_string());
        ChoiceId(id)
    }
}

/// The random token of one `check_colab` probe: 32 lowercase hexadecimal characters made from 16
/// random bytes. It is both the probe file's content and part of its name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Nonce(String);

impl Nonce {
    /// The nonce for these random bytes.
    pub fn from_bytes(random: [u8; 16]) -> Self {
        let mut nonce = String::with_capacity(32);
        push_hex(&mut nonce, &random);
        Nonce(nonce)
    }

    /// The 32 hexadecimal characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The probe's path in the kernel's filesystem: a non-hidden file directly in `/content`.
    pub fn kernel_path(&self) -> String {
        format!("{PROBE_DIRECTORY}/{PROBE_PREFIX}{}.txt", self.0)
    }

    /// The probe's path relative to the root of the runtime's file service (the Contents API and
    /// the `colab://` file system both start at the runtime's `/`).
    pub fn service_path(&self) -> String {
        format!("content/{PROBE_PREFIX}{}.txt", self.0)
    }
}

/// Where a probe lives on the runtime.
pub const PROBE_DIRECTORY: &str = "/content";
/// The start of every probe file's name; not a dot, so the file is not hidden.
pub const PROBE_PREFIX: &str = "jupyter-mcp-check-";

/// The root of a Colab runtime's file service: the surface a check reads its nonce through,
/// independently of the kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(into = "String")]
pub enum FileServiceRoot {
    /// The Colab extension's `colab://<server>/` file system in VS Code (`colabFileUri`).
    ColabFs {
        /// The server part of the URI.
        authority: String,
    },
    /// The runtime's Jupyter Contents API behind Colab's proxy, reached by the standalone host
    /// with the runtime's proxy token: the base URL of the runtime.
    Contents {
        /// `https://…/`, without query or fragment.
        base_url: String,
    },
}

impl FileServiceRoot {
    /// Parses `colab://<server>/` (a root URI: nothing after the slash, no query or fragment) or
    /// an `https://` base URL ending in `/` without query or fragment.
    pub fn parse(raw: &str) -> Result<Self, SetupError> {
        let invalid = |reason: &'static str| SetupError::RootInvalid { reason };
        if raw.contains(['?', '#']) {
            return Err(invalid("a file-service root has no query or fragment"));
        }
        if raw.chars().any(char::is_control) || raw.contains(' ') {
            return Err(invalid(
                "a file-service root has no spaces or control characters",
            ));
        }
        if let Some(rest) = raw.strip_prefix("colab://") {
            let Some(authority) = rest.strip_suffix('/') else {
                return Err(invalid("a colab:// root ends with '/' (colab://<server>/)"));
            };
            if authority.is_empty() || authority.contains('/') {
                return Err(invalid(
                    "a colab:// root names one server and no path (colab://<server>/)",
                ));
            }
            return Ok(FileServiceRoot::ColabFs {
                authority: authority.to_owned(),
            });
        }
        if let Some(rest) = raw.strip_prefix("https://") {
            if rest.is_empty() || rest.starts_with('/') || !rest.ends_with('/') {
                return Err(invalid(
                    "a Contents root is an https:// base URL with a host, ending in '/'",
                ));
            }
            return Ok(FileServiceRoot::Contents {
                base_url: raw.to_owned(),
            });
        }
        Err(invalid(
            "a file-service root is colab://<server>/ or an https:// runtime base URL",
        ))
    }

    /// The root as a URI string.
    pub fn uri(&self) -> String {
        match self {
            FileServiceRoot::ColabFs { authority } => format!("colab://{authority}/"),
            FileServiceRoot::Contents { base_url } => base_url.clone(),
        }
    }
}

impl From<FileServiceRoot> for String {
    fn from(root: FileServiceRoot) -> String {
        root.uri()
    }
}

impl fmt::Display for FileServiceRoot {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.uri())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_aliases_have_the_mcp_form_and_parse_back() {
        let alias = ServerAlias::generate([0x01, 0x23, 0xab, 0xcd]);
        assert_eq!(alias.as_str(), "m0123abcd");
        assert_eq!(ServerAlias::parse("m0123abcd"), Ok(alias));
        assert_eq!(ServerAlias::generate([0xff; 4]).as_str(), "mffffffff");
    }

    #[test]
    fn alias_parsing_is_strict() {
        for raw in [
            "",
            "m",
            "m0123abc",
            "m0123abcd0",
            "M0123abcd",
            "m0123ABCD",
            " m0123abcd",
            "m0123abcd ",
            "n0123abcd",
            "m0123abcg",
            "m0123ab\u{0}d",
            "m０123abcd",
            "Colab CPU",
        ] {
            let error = ServerAlias::parse(raw).unwrap_err();
            assert_eq!(error.code(), "alias_invalid", "{raw:?}");
        }
    }

    #[test]
    fn session_names_are_checked() {
        assert!(SessionName::parse("my-runtime_2.cpu").is_ok());
        for raw in ["", ".hidden", "a b", "ü", "a/b", &"x".repeat(65)] {
            assert_eq!(
                SessionName::parse(raw).unwrap_err().code(),
                "session_name_invalid",
                "{raw:?}"
            );
        }
    }

    #[test]
    fn setup_ids_have_the_tracker_shape() {
        let id = SetupId::from_parts(1_700_000_000_000, 35);
        assert_eq!(id.as_str(), "setup_loyw3v28_00000z");
        assert_eq!(
            serde_json::to_string(&id).unwrap(),
            "\"setup_loyw3v28_00000z\""
        );
    }

    #[test]
    fn choice_ids_name_listing_token_and_position() {
        let id = ChoiceId::new(3, [0xde, 0xad, 0xbe, 0xef], 1);
        assert_eq!(id.as_str(), "kc3-deadbeef-1");
        assert_ne!(ChoiceId::new(4, [0xde, 0xad, 0xbe, 0xef], 1), id);
    }

    #[test]
    fn the_probe_is_a_visible_file_in_content() {
        let nonce = Nonce::from_bytes([0xa5; 16]);
        assert_eq!(nonce.as_str().len(), 32);
        let path = nonce.kernel_path();
        assert_eq!(
            path,
            "/content/jupyter-mcp-check-a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5.txt"
        );
        let file_name = path.rsplit('/').next().unwrap();
        assert!(!file_name.starts_with('.'));
        assert_eq!(format!("/{}", nonce.service_path()), path);
    }

    #[test]
    fn roots_are_root_uris_only() {
        assert_eq!(
            FileServiceRoot::parse("colab://m0123abcd/").unwrap().uri(),
            "colab://m0123abcd/"
        );
        assert!(matches!(
            FileServiceRoot::parse("https://8080-abc.prod.colab.dev/"),
            Ok(FileServiceRoot::Contents { .. })
        ));
        for raw in [
            "colab://server",
            "colab://server/content",
            "colab:///",
            "colab://server/?x=1",
            "colab://server/#f",
            "http://example.com/",
            "https:///",
            "https://host",
            "file:///content/",
            "colab://ser ver/",
        ] {
            assert_eq!(
                FileServiceRoot::parse(raw).unwrap_err().code(),
                "root_invalid",
                "{raw:?}"
            );
        }
    }
}
