//! Execution ids: `exec_<milliseconds in base 36>_<6 base-36 characters>`.
//!
//! The registry never reads a clock or draws random numbers; the caller hands both in, so an id
//! is a pure function of its inputs and tests can name the ids they expect.

use std::fmt;

use notebook_model::identity::push_base36;

/// Number of base-36 characters in the random suffix.
const SUFFIX_LEN: usize = 6;
/// 36^6: the number of distinct suffixes.
const SUFFIX_SPACE: u64 = 36u64.pow(SUFFIX_LEN as u32);

/// The opaque id of one tracked run, as returned to clients in `executionId`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExecutionId(String);

impl ExecutionId {
    /// Builds `exec_<now_ms base 36>_<suffix>`, where the suffix is `random` reduced to six
    /// base-36 digits (zero-padded, lowercase).
    pub fn from_parts(now_ms: u64, random: u64) -> Self {
        let mut id = String::from("exec_");
        push_base36(&mut id, now_ms, 1);
        id.push('_');
        push_base36(&mut id, random % SUFFIX_SPACE, SUFFIX_LEN);
        ExecutionId(id)
    }

    /// The id as clients see it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ExecutionId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl serde::Serialize for ExecutionId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl PartialEq<str> for ExecutionId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ExecutionId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_has_the_reference_shape() {
        // 1_700_000_000_000 ms is "loyw3v28" in base 36 (as JavaScript's toString(36) prints it).
        let id = ExecutionId::from_parts(1_700_000_000_000, 35);
        assert_eq!(id.as_str(), "exec_loyw3v28_00000z");
    }

    #[test]
    fn suffix_is_reduced_to_six_digits() {
        let id = ExecutionId::from_parts(0, SUFFIX_SPACE + 36);
        assert_eq!(id.as_str(), "exec_0_000010");
        let id = ExecutionId::from_parts(0, SUFFIX_SPACE - 1);
        assert_eq!(id.as_str(), "exec_0_zzzzzz");
    }

    #[test]
    fn serializes_as_a_plain_string() {
        let id = ExecutionId::from_parts(36, 1);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"exec_10_000001\"");
        assert_eq!(id.to_string(), "exec_10_000001");
        assert!(id == "exec_10_000001");
    }
}
