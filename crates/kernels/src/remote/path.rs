//! Paths and query values of a server's API, percent-encoded once, here: every request path
//! that carries a name from outside (a file in the Contents API, a hub user, a session id, a
//! token in a WebSocket query) is built with these two functions.

/// One path segment or query component with every byte but RFC 3986's unreserved characters
/// (`A-Z a-z 0-9 - . _ ~`) percent-encoded, so `/`, `?`, `#`, `%` and spaces stay data.
pub fn encode_segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// A `/`-separated path with each segment encoded by [`encode_segment`] and the `/`s kept
/// (a Contents API path such as `sub dir/a#1.ipynb`).
pub fn encode_path(path: &str) -> String {
    path.split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_hashes_and_slashes_in_names_stay_data() {
        assert_eq!(encode_path("my dir/a#1.ipynb"), "my%20dir/a%231.ipynb");
        assert_eq!(encode_segment("a/b?c#d e"), "a%2Fb%3Fc%23d%20e");
        assert_eq!(encode_path("é.ipynb"), "%C3%A9.ipynb");
        assert_eq!(encode_segment("a%20b"), "a%2520b");
        assert_eq!(encode_path("plain-name_1.~txt"), "plain-name_1.~txt");
        assert_eq!(encode_path(""), "");
    }
}
