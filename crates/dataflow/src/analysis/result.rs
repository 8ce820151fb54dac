//! What the analysis of a cell says: definitions, uses, mutations, deletions, wildcards, the cell
//! magic and why a cell could not be analysed.

/// How a cell binds a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefinitionKind {
    /// Assignment of any kind, a `for`/`with`/`except`/`match` target, a walrus, `%%capture out`,
    /// or an assignment through `global` inside a function.
    Variable,
    /// `import x`, `import a.b` (binds `a`), `from m import x as y`.
    Import,
    /// `def` or `async def`.
    Function,
    /// `class`, or a PEP 695 `type` alias.
    Class,
}

impl DefinitionKind {
    /// A stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            DefinitionKind::Variable => "variable",
            DefinitionKind::Import => "import",
            DefinitionKind::Function => "function",
            DefinitionKind::Class => "class",
        }
    }
}

/// A name the cell leaves bound in the kernel's global namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Definition {
    /// The global name bound.
    pub name: String,
    /// What binds it: an assignment, an import, a `def` or a `class`.
    pub kind: DefinitionKind,
    /// 1-based line of the first binding.
    pub line: u32,
    /// For a function or class defined at module level: the global names its body (methods,
    /// for a class) reads when called, in order of first read. A cell that uses the function
    /// reads these too, as they are defined above *that* cell.
    pub reads_when_called: Vec<String>,
}

/// A global name the cell reads that it did not bind itself first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Use {
    /// The global name read.
    pub name: String,
    /// 1-based line of the first read.
    pub line: u32,
    /// The read is one IPython attempts and silently skips when the name is missing: variable
    /// expansion in `!cmd {x}` / `%magic $x`, or help `x?`. An optional use links the cell to a
    /// definer above but is never reported as undefined.
    pub optional: bool,
    /// Every read of the name is inside a function body, a lambda or an annotation: it happens
    /// when the function is called, which may be in a later cell.
    pub deferred: bool,
}

/// A name at a line: what [`CellAnalysis::deletes`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NameAt {
    /// The global name.
    pub name: String,
    /// 1-based line of the first occurrence.
    pub line: u32,
}

/// How a cell changes a name in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MutationKind {
    /// Only calls of a [`MUTATING_METHODS`](super::MUTATING_METHODS) method (or an [`INPLACE_METHODS`](super::INPLACE_METHODS) one with
    /// `inplace=True`) on the name itself: `items.append(x)`, but also `np.add(x, 2)`. The cell
    /// cannot tell a container from a module; the notebook can, and does not take such a call
    /// for a write when the name's definition above is an import.
    MethodCall,
    /// A store or `del` through an attribute or subscript of the name, `setattr`/`delattr`, or a
    /// mutating method called on an attribute or item of it (`sys.path.append(p)`,
    /// `plt.rcParams.update(...)`): a change of the object, whatever it is.
    Store,
}

impl MutationKind {
    /// A stable lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            MutationKind::MethodCall => "method-call",
            MutationKind::Store => "store",
        }
    }
}

/// A name the cell changes in place: what [`CellAnalysis::mutates`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mutation {
    /// The global name.
    pub name: String,
    /// 1-based line of the first mutation.
    pub line: u32,
    /// [`MutationKind::Store`] if any mutation of the name in the cell is one.
    pub kind: MutationKind,
}

/// Where a cell defines names that static analysis cannot list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WildcardKind {
    /// `from module import *`.
    StarImport,
    /// `%run script.py`, which copies the script's globals into the user namespace.
    RunMagic,
}

/// A definition of unknown names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Wildcard {
    /// Whether a star import or `%run` defines the names.
    pub kind: WildcardKind,
    /// The module (`from os.path import *` → `os.path`, relative imports keep their dots) or the
    /// script (`%run setup.py` → `setup.py`).
    pub origin: String,
    /// 1-based line of the star import or `%run`.
    pub line: u32,
}

/// A cell magic on the cell's first line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellMagic {
    /// The magic's name without `%%` (`time`, `bash`, ...).
    pub name: String,
    /// Whether the body was analysed as Python (`%%time`, `%%timeit`, `%%capture`, `%%prun`). Any
    /// other cell magic is opaque: the cell defines and uses nothing as far as dataflow knows.
    pub analysed: bool,
}

/// Why a cell could not be analysed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnalysisErrorKind {
    /// The cell is not valid Python (with IPython syntax).
    Syntax,
    /// The cell is larger than [`MAX_CELL_SOURCE_BYTES`].
    TooLarge,
    /// Functions, lambdas, classes or comprehensions nest more than [`MAX_SCOPE_DEPTH`] deep.
    TooDeeplyNested,
    /// The parser panicked. Known triggers are invalid cells in which a line starting with an
    /// IPython escape (`,`, `;`, `/`, `?`) follows an unbalanced bracket or an unfinished
    /// statement (astral-sh/ruff#21705, open in every release so far).
    ParserFailure,
}

/// A cell that could not be analysed. It defines and uses nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnalysisError {
    /// What kept the cell from being analysed.
    pub kind: AnalysisErrorKind,
    /// A sentence saying what went wrong, for a lint finding.
    pub message: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in Unicode scalar values.
    pub column: u32,
}

/// Everything the dataflow knows about one code cell. Lists are ordered by the line of each
/// name's first occurrence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CellAnalysis {
    /// Names the cell leaves bound in the global namespace. A name the cell binds and then
    /// deletes at module level (`tmp = 1; del tmp`) is listed under `deletes` instead.
    pub defines: Vec<Definition>,
    /// Global names read before (or, inside function bodies, without) the cell binding them,
    /// including names the cell mutates or deletes.
    pub uses: Vec<Use>,
    /// Names defined elsewhere that the cell changes in place when it runs: `x.attr = v`,
    /// `x[i] = v`, `x.attr += v`, `del x[i]`, `setattr(x, ...)`, `delattr(x, ...)` and calls of
    /// [`MUTATING_METHODS`](super::MUTATING_METHODS) (or [`INPLACE_METHODS`](super::INPLACE_METHODS) with `inplace=True`) on `x` or on an
    /// attribute/subscript chain rooted at `x`. Mutations of names the cell bound first are not
    /// listed, and mutations inside function bodies are not seen (they happen when called).
    pub mutates: Vec<Mutation>,
    /// Names whose last module-level action in the cell is `del name`.
    pub deletes: Vec<NameAt>,
    /// Star imports and `%run`: definitions of names nobody can list.
    pub wildcards: Vec<Wildcard>,
    /// The cell magic on the first line, if any; `None` for plain Python.
    pub cell_magic: Option<CellMagic>,
    /// Why the cell could not be analysed; `None` when it was (the lists are then complete).
    pub error: Option<AnalysisError>,
    /// Names the cell binds at module level and also reads itself after binding them (sorted).
    /// A definition read only by its own cell is not an unused definition.
    pub used_locally: Vec<String>,
}

impl CellAnalysis {
    /// Whether the cell writes `name` for the cells below it: defines, mutates or deletes it.
    pub fn writes(&self, name: &str) -> bool {
        self.defines
            .iter()
            .any(|definition| definition.name == name)
            || self.mutates.iter().any(|mutation| mutation.name == name)
            || self.deletes.iter().any(|deletion| deletion.name == name)
    }

    /// The definition of `name`, if the cell defines it.
    pub fn definition(&self, name: &str) -> Option<&Definition> {
        self.defines
            .iter()
            .find(|definition| definition.name == name)
    }

    pub(super) fn failed(kind: AnalysisErrorKind, message: String, line: u32, column: u32) -> Self {
        CellAnalysis {
            error: Some(AnalysisError {
                kind,
                message,
                line,
                column,
            }),
            ..CellAnalysis::default()
        }
    }
}
