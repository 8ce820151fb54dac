//! Lint findings: what the dataflow notices about a notebook that is probably a mistake.

use std::collections::HashSet;

use crate::analysis::{AnalysisErrorKind, CellAnalysis, DefinitionKind, WildcardKind};

/// The kind of a finding. The snake_case names from [`LintCode::as_str`] are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LintCode {
    /// The cell does not parse as Python with IPython syntax. It defines nothing.
    SyntaxError,
    /// The cell was not analysed for another reason (it is too large, too deeply nested, or the
    /// parser failed on it). It defines nothing.
    AnalysisFailed,
    /// A name is used that no cell above defines, no star import above may define, and that is
    /// not a builtin; no cell below defines it either.
    UndefinedName,
    /// A name is used that no cell above defines but a cell below does: the notebook only works
    /// when run out of order.
    DefinedBelow,
    /// The nearest cell above that touches a used name deletes it.
    DeletedAbove,
    /// A definition that neither its own cell nor any cell below reads. Names starting with `_`
    /// are exempt, and so are names any function body or lambda in the notebook reads (calling
    /// it reads the definition current at the time, wherever the function was defined).
    UnusedDefinition,
    /// An import that neither its own cell nor any cell below reads. Reported apart from other
    /// definitions because some imports are made for their side effects.
    UnusedImport,
    /// `from module import *`: the names it defines are invisible to the analysis. Uses of names
    /// that nothing above defines are attributed to the star import instead of being reported.
    StarImport,
    /// `%run script`: like a star import, it defines names the analysis cannot see.
    RunMagic,
}

impl LintCode {
    /// The stable snake_case name of the code, as tools report it (`syntax_error`,
    /// `undefined_name`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            LintCode::SyntaxError => "syntax_error",
            LintCode::AnalysisFailed => "analysis_failed",
            LintCode::UndefinedName => "undefined_name",
            LintCode::DefinedBelow => "defined_below",
            LintCode::DeletedAbove => "deleted_above",
            LintCode::UnusedDefinition => "unused_definition",
            LintCode::UnusedImport => "unused_import",
            LintCode::StarImport => "star_import",
            LintCode::RunMagic => "run_magic",
        }
    }
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finding {
    /// What kind of problem this is.
    pub code: LintCode,
    /// Index of the cell, in document order.
    pub cell: usize,
    /// The id the host gave for the cell.
    pub cell_id: String,
    /// 1-based line within the cell, when the finding has one.
    pub line: Option<u32>,
    /// 1-based column (Unicode scalar values), for syntax errors.
    pub column: Option<u32>,
    /// The name concerned, if any.
    pub name: Option<String>,
    /// The other cell involved: the later definer for `defined_below`, the deleting cell for
    /// `deleted_above`.
    pub related_cell: Option<usize>,
    /// A sentence for the user or agent.
    pub message: String,
}

impl Finding {
    /// A finding at `line` of the cell at `cell`, about no name in particular.
    pub(crate) fn new(
        code: LintCode,
        cell: usize,
        cell_id: &str,
        line: u32,
        message: String,
    ) -> Self {
        Finding {
            code,
            cell,
            cell_id: cell_id.to_owned(),
            line: Some(line),
            column: None,
            name: None,
            related_cell: None,
            message,
        }
    }

    /// The same finding about `name`.
    pub(crate) fn about(self, name: &str) -> Self {
        Finding {
            name: Some(name.to_owned()),
            ..self
        }
    }

    /// The same finding with `cell` as the other cell involved.
    pub(crate) fn related_to(self, cell: usize) -> Self {
        Finding {
            related_cell: Some(cell),
            ..self
        }
    }
}

/// The findings about one cell on its own: analysis errors, wildcards and unused definitions.
/// `consumed` holds `(cell, name)` for every definition some later cell reads; `read_when_called`
/// the names some function body anywhere in the notebook reads.
pub(crate) fn cell_findings(
    index: usize,
    cell_id: &str,
    analysis: &CellAnalysis,
    consumed: &HashSet<(usize, &str)>,
    read_when_called: &HashSet<&str>,
    findings: &mut Vec<Finding>,
) {
    if let Some(error) = &analysis.error {
        let (code, message) = match error.kind {
            AnalysisErrorKind::Syntax => (
                LintCode::SyntaxError,
                format!(
                    "syntax error at line {}, column {}: {}",
                    error.line, error.column, error.message
                ),
            ),
            AnalysisErrorKind::TooLarge
            | AnalysisErrorKind::TooDeeplyNested
            | AnalysisErrorKind::ParserFailure => (LintCode::AnalysisFailed, error.message.clone()),
        };
        findings.push(Finding {
            column: Some(error.column),
            ..Finding::new(code, index, cell_id, error.line, message)
        });
        return;
    }
    for wildcard in &analysis.wildcards {
        let (code, message) = match wildcard.kind {
            WildcardKind::StarImport => (
                LintCode::StarImport,
                format!(
                    "`from {} import *` defines names the dataflow cannot see; cells below that \
                     use names nothing else defines are linked to this cell",
                    wildcard.origin
                ),
            ),
            WildcardKind::RunMagic => (
                LintCode::RunMagic,
                format!(
                    "`%run {}` defines names the dataflow cannot see; cells below that use names \
                     nothing else defines are linked to this cell",
                    wildcard.origin
                ),
            ),
        };
        findings.push(Finding::new(code, index, cell_id, wildcard.line, message));
    }
    for definition in &analysis.defines {
        let name = definition.name.as_str();
        if name.starts_with('_')
            || consumed.contains(&(index, name))
            || read_when_called.contains(name)
            || analysis
                .used_locally
                .binary_search_by(|used| used.as_str().cmp(name))
                .is_ok()
        {
            continue;
        }
        let (code, message) = if definition.kind == DefinitionKind::Import {
            (
                LintCode::UnusedImport,
                format!(
                    "`{name}` is imported but neither this cell nor any cell below uses it \
                     (fine if it is imported for its side effects)"
                ),
            )
        } else {
            (
                LintCode::UnusedDefinition,
                format!("`{name}` is defined but neither this cell nor any cell below uses it"),
            )
        };
        findings.push(Finding::new(code, index, cell_id, definition.line, message).about(name));
    }
}
