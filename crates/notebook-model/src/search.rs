//! Searching cells: sources, saved output text and names.

use regex::{Regex, RegexBuilder};
use thiserror::Error;

use crate::identity;
use crate::notebook::Notebook;
use crate::outputs::output_texts;

/// What to search for and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    /// The text to find, or the pattern with `regex`; must not be empty.
    pub query: String,
    /// Match letter case exactly; otherwise case-insensitive.
    pub case_sensitive: bool,
    /// Treat `query` as a regular expression (Rust `regex` syntax).
    pub regex: bool,
    /// Search saved output text too.
    pub include_outputs: bool,
    /// Stop after this many matches in total.
    pub max_matches: usize,
}

/// Where a match was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchPlace {
    /// In the cell's source.
    Source,
    /// In the text of one of the cell's saved outputs.
    Output {
        /// 0-based position of the output in the cell.
        output_index: usize,
        /// The MIME type of the text that matched; for a stream its name (`stdout`, `stderr`),
        /// for an error `error`.
        mime: String,
    },
    /// In the cell's effective name.
    Name,
}

/// One match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchMatch {
    /// Where in the cell the match is.
    pub place: MatchPlace,
    /// 1-based line within the source or output text (1 for names).
    pub line: usize,
    /// The matching line, cut to 200 characters around the match.
    pub text: String,
}

/// Matches within one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellMatches {
    /// 0-based position of the cell.
    pub index: usize,
    /// The cell id.
    pub id: String,
    /// The cell's effective name.
    pub name: String,
    /// Its matches: the name first, then source lines, then outputs.
    pub matches: Vec<SearchMatch>,
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResult {
    /// The cells with at least one match, in document order.
    pub cells: Vec<CellMatches>,
    /// Number of matches in `cells`, at most `max_matches`.
    pub total_matches: usize,
    /// True when `max_matches` stopped the search early.
    pub truncated: bool,
}

/// Why a search could not run.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SearchError {
    /// The query is empty.
    #[error("query must not be empty")]
    EmptyQuery,
    /// The query is not a valid regular expression; the text says why.
    #[error("query is not a valid regular expression: {0}")]
    InvalidRegex(String),
}

enum Matcher {
    Literal {
        needle: String,
        case_sensitive: bool,
    },
    Pattern(Regex),
}

impl Matcher {
    fn find(&self, line: &str) -> Option<usize> {
        match self {
            Matcher::Literal {
                needle,
                case_sensitive: true,
            } => line.find(needle.as_str()),
            Matcher::Literal { needle, .. } => line.to_lowercase().find(needle.as_str()),
            Matcher::Pattern(regex) => regex.find(line).map(|found| found.start()),
        }
    }
}

fn excerpt(line: &str, at: usize) -> String {
    const WIDTH: usize = 200;
    if line.chars().count() <= WIDTH {
        return line.to_owned();
    }
    let mut start = at.saturating_sub(WIDTH / 4).min(line.len());
    while !line.is_char_boundary(start) {
        start -= 1;
    }
    let text: String = line[start..].chars().take(WIDTH).collect();
    if start > 0 {
        format!("…{text}…")
    } else {
        format!("{text}…")
    }
}

/// Searches the cells at `indices` (all cells when `None`).
pub fn search(
    notebook: &Notebook,
    query: &SearchQuery,
    indices: Option<&[usize]>,
) -> Result<SearchResult, SearchError> {
    if query.query.is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    let matcher = if query.regex {
        Matcher::Pattern(
            RegexBuilder::new(&query.query)
                .case_insensitive(!query.case_sensitive)
                .size_limit(1 << 20)
                .build()
                .map_err(|error| SearchError::InvalidRegex(error.to_string()))?,
        )
    } else if query.case_sensitive {
        Matcher::Literal {
            needle: query.query.clone(),
            case_sensitive: true,
        }
    } else {
        Matcher::Literal {
            needle: query.query.to_lowercase(),
            case_sensitive: false,
        }
    };
    let names = identity::effective_names(notebook);
    let all: Vec<usize> = (0..notebook.len()).collect();
    let indices = indices.unwrap_or(&all);
    let mut result = SearchResult {
        cells: Vec::new(),
        total_matches: 0,
        truncated: false,
    };
    'cells: for &index in indices {
        let Some(cell) = notebook.cell(index) else {
            continue;
        };
        let mut matches = Vec::new();
        let mut budget_left = query.max_matches.saturating_sub(result.total_matches);
        let mut push = |matches: &mut Vec<SearchMatch>, found: SearchMatch| -> bool {
            if budget_left == 0 {
                return false;
            }
            budget_left -= 1;
            matches.push(found);
            true
        };
        let mut stopped = false;
        if let Some(at) = matcher.find(&names[index]) {
            stopped |= !push(
                &mut matches,
                SearchMatch {
                    place: MatchPlace::Name,
                    line: 1,
                    text: excerpt(&names[index], at),
                },
            );
        }
        for (line_index, line) in cell.source().split('\n').enumerate() {
            if stopped {
                break;
            }
            if let Some(at) = matcher.find(line) {
                stopped |= !push(
                    &mut matches,
                    SearchMatch {
                        place: MatchPlace::Source,
                        line: line_index + 1,
                        text: excerpt(line, at),
                    },
                );
            }
        }
        if query.include_outputs {
            'outputs: for (output_index, output) in cell.outputs().iter().enumerate() {
                for (mime, text) in output_texts(output) {
                    for (line_index, line) in text.split('\n').enumerate() {
                        if stopped {
                            break 'outputs;
                        }
                        if let Some(at) = matcher.find(line) {
                            stopped |= !push(
                                &mut matches,
                                SearchMatch {
                                    place: MatchPlace::Output {
                                        output_index,
                                        mime: mime.clone(),
                                    },
                                    line: line_index + 1,
                                    text: excerpt(line, at),
                                },
                            );
                        }
                    }
                }
            }
        }
        if !matches.is_empty() {
            result.total_matches += matches.len();
            result.cells.push(CellMatches {
                index,
                id: cell.id().to_owned(),
                name: names[index].clone(),
                matches,
            });
        }
        if stopped {
            result.truncated = true;
            break 'cells;
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::{Cell, CellKind};

    fn notebook() -> Notebook {
        let mut notebook = Notebook::new();
        let mut code = Cell::new(CellKind::Code, "# Load\ndf = read_csv('Data.csv')", "c1");
        code.set_outputs(
            vec![serde_json::json!({"output_type": "stream", "name": "stdout", "text": "loaded data\n"})],
            Some(1),
        );
        notebook.push_cell(code);
        notebook.push_cell(Cell::new(CellKind::Markdown, "# Results", "m1"));
        notebook
    }

    fn query(text: &str) -> SearchQuery {
        SearchQuery {
            query: text.to_owned(),
            case_sensitive: false,
            regex: false,
            include_outputs: true,
            max_matches: 100,
        }
    }

    #[test]
    fn finds_in_source_outputs_and_names() {
        let notebook = notebook();
        let found = search(&notebook, &query("data"), None).unwrap();
        assert_eq!(found.cells.len(), 1);
        let places: Vec<&MatchPlace> = found.cells[0].matches.iter().map(|m| &m.place).collect();
        assert!(places.contains(&&MatchPlace::Source));
        assert!(
            places
                .iter()
                .any(|place| matches!(place, MatchPlace::Output { .. }))
        );
        let by_name = search(&notebook, &query("results"), None).unwrap();
        assert_eq!(by_name.cells[0].matches[0].place, MatchPlace::Name);
        let mut sensitive = query("data.csv");
        sensitive.case_sensitive = true;
        assert!(
            search(&notebook, &sensitive, None)
                .unwrap()
                .cells
                .is_empty()
        );
    }

    #[test]
    fn regex_and_limits() {
        let notebook = notebook();
        let mut pattern = query(r"read_\w+");
        pattern.regex = true;
        assert_eq!(search(&notebook, &pattern, None).unwrap().total_matches, 1);
        let mut limited = query("a");
        limited.max_matches = 1;
        let found = search(&notebook, &limited, None).unwrap();
        assert!(found.truncated);
        assert_eq!(found.total_matches, 1);
        pattern.query = "(".to_owned();
        assert!(matches!(
            search(&notebook, &pattern, None),
            Err(SearchError::InvalidRegex(_))
        ));
        assert_eq!(
            search(&notebook, &query(""), None),
            Err(SearchError::EmptyQuery)
        );
    }
}
