//! Cell references: how a caller names a cell.
//!
//! A reference is a JSON number (a 0-based index) or a string. Strings resolve in this order:
//! `TOP` / `BOTTOM` (any case), an exact cell id, an exact cell name, `#<id>`, `index:<N>`, and last
//! a string of digits as an index (so a numeric-looking id such as `"40025805"` stays an id).

use crate::error::CellRefError;
use crate::identity;
use crate::notebook::Notebook;

/// A reference to a cell as a caller wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CellRef {
    /// A 0-based index, as given by a JSON number.
    Index(u64),
    /// A string: `TOP`, `BOTTOM`, an id, a name, `#<id>`, `index:<N>` or digits.
    Text(String),
}

impl CellRef {
    /// The reference as the caller would recognise it in a message.
    pub fn display(&self) -> String {
        match self {
            CellRef::Index(index) => index.to_string(),
            CellRef::Text(text) => text.clone(),
        }
    }
}

impl From<u64> for CellRef {
    fn from(index: u64) -> Self {
        CellRef::Index(index)
    }
}

impl From<&str> for CellRef {
    fn from(text: &str) -> Self {
        CellRef::Text(text.to_owned())
    }
}

/// Resolves references against one notebook. Build it once per batch step: it caches names.
#[derive(Debug)]
pub struct Resolver<'a> {
    notebook: &'a Notebook,
    names: Vec<String>,
}

impl<'a> Resolver<'a> {
    /// A resolver for `notebook`, with its cells' effective names computed once.
    pub fn new(notebook: &'a Notebook) -> Resolver<'a> {
        Resolver {
            notebook,
            names: identity::effective_names(notebook),
        }
    }

    /// Effective names of all cells, in document order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The index of the cell a reference names.
    pub fn resolve(&self, reference: &CellRef) -> Result<usize, CellRefError> {
        let count = self.notebook.len();
        let check_index = |index: u64| {
            usize::try_from(index)
                .ok()
                .filter(|&index| index < count)
                .ok_or(CellRefError::IndexOutOfRange { index, count })
        };
        match reference {
            CellRef::Index(index) => check_index(*index),
            CellRef::Text(text) => {
                let trimmed = text.trim();
                if trimmed.is_empty() {
                    return Err(CellRefError::Invalid {
                        reference: text.clone(),
                    });
                }
                if trimmed.eq_ignore_ascii_case("TOP") || trimmed.eq_ignore_ascii_case("BOTTOM") {
                    if count == 0 {
                        return Err(CellRefError::EmptyNotebook {
                            reference: text.clone(),
                        });
                    }
                    return Ok(if trimmed.eq_ignore_ascii_case("TOP") {
                        0
                    } else {
                        count - 1
                    });
                }
                if let Some(index) = self.notebook.position_of_id(trimmed) {
                    return Ok(index);
                }
                if let Some(index) = self.names.iter().position(|name| name == trimmed) {
                    return Ok(index);
                }
                if let Some(id) = trimmed.strip_prefix('#')
                    && let Some(index) = self.notebook.position_of_id(id)
                {
                    return Ok(index);
                }
                let digits = trimmed.strip_prefix("index:").unwrap_or(trimmed);
                if !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit()) {
                    let index = digits.parse::<u64>().unwrap_or(u64::MAX);
                    return check_index(index);
                }
                Err(CellRefError::NotFound {
                    reference: text.clone(),
                })
            }
        }
    }

    /// Where an insert anchored at `reference` goes: `TOP` before the first cell, `BOTTOM` (or no
    /// anchor) after the last, any other reference right after that cell.
    pub fn insert_position(&self, reference: Option<&CellRef>) -> Result<usize, CellRefError> {
        let count = self.notebook.len();
        match reference {
            None => Ok(count),
            Some(CellRef::Text(text)) if text.trim().eq_ignore_ascii_case("TOP") => Ok(0),
            Some(CellRef::Text(text)) if text.trim().eq_ignore_ascii_case("BOTTOM") => Ok(count),
            Some(other) => self.resolve(other).map(|index| index + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::sample_notebook;

    fn resolve(reference: &CellRef) -> Result<usize, CellRefError> {
        Resolver::new(&sample_notebook()).resolve(reference)
    }

    fn insert_position(anchor: Option<&CellRef>) -> Result<usize, CellRefError> {
        Resolver::new(&sample_notebook()).insert_position(anchor)
    }

    #[test]
    fn resolution_order() {
        for (reference, index) in [
            (CellRef::Index(2), 2),
            ("top".into(), 0),
            ("BOTTOM".into(), 4),
            // The numeric id stays an id.
            ("40025805".into(), 1),
            // The stored name wins the plain name its cell would derive.
            ("load-data".into(), 3),
            ("load-data-2".into(), 1),
            ("#plot".into(), 2),
            ("index:0".into(), 0),
            // An id before an index, and an index where no cell has that id.
            ("1".into(), 4),
            ("2".into(), 2),
        ] {
            assert_eq!(resolve(&reference), Ok(index), "{reference:?}");
        }
        assert!(matches!(
            resolve(&CellRef::Index(5)),
            Err(CellRefError::IndexOutOfRange { index: 5, count: 5 })
        ));
        assert!(matches!(
            resolve(&"nope".into()),
            Err(CellRefError::NotFound { .. })
        ));
    }

    #[test]
    fn insert_anchors() {
        assert_eq!(insert_position(None), Ok(5));
        assert_eq!(insert_position(Some(&"TOP".into())), Ok(0));
        assert_eq!(insert_position(Some(&"bottom".into())), Ok(5));
        assert_eq!(insert_position(Some(&CellRef::Index(0))), Ok(1));
    }
}
