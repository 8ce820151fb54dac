//! The static analysis of one code cell: what it defines, uses, mutates and deletes.
//!
//! The cell is parsed with Ruff's parser in its IPython mode and walked once with a scope stack
//! that follows Python's rules: functions, lambdas and comprehensions are scopes whose local
//! names are all the names they bind anywhere; class bodies run top to bottom and are invisible
//! to the functions inside them; a walrus inside a comprehension binds in the enclosing scope;
//! `global` and `nonlocal` redirect bindings. Reads that escape to the module scope become the
//! cell's *uses* unless the cell bound the name before (for reads that run when the cell runs) or
//! anywhere (for reads inside function bodies, lambdas and annotations, which run later).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ModExpression, ModModule, PySourceType};
use ruff_python_parser::{Parsed, parse_expression, parse_unchecked_source};
use ruff_text_size::{Ranged, TextSize};

use crate::ipython::{self, CellMagicMode, Expansion};

mod magics;
mod result;
mod walk;

pub use result::{
    AnalysisError, AnalysisErrorKind, CellAnalysis, CellMagic, Definition, DefinitionKind,
    Mutation, MutationKind, NameAt, Use, Wildcard, WildcardKind,
};

/// Cells larger than this are not analysed; a cell this large is almost always pasted data,
/// and the bound keeps the stack reserved for dropping deep syntax trees reasonable.
pub const MAX_CELL_SOURCE_BYTES: usize = 1 << 20;

/// How deeply functions, lambdas, classes and comprehensions may nest. Resolving a name walks
/// the enclosing scopes, so the bound keeps the analysis linear; real code stays far below it.
pub const MAX_SCOPE_DEPTH: usize = 100;

/// How deeply `%time %time ...` may nest before the inner text is left unanalysed.
const MAX_INLINE_MAGIC_DEPTH: usize = 4;

/// Methods that mutate their receiver in place: those of lists, dicts and sets, and `fit` and
/// `partial_fit`, which train an estimator in place (scikit-learn, Keras). Called on a module
/// (`np.add(x, 2)`) they are the module's functions: see [`MutationKind::MethodCall`].
pub const MUTATING_METHODS: &[&str] = &[
    "add",
    "append",
    "clear",
    "difference_update",
    "discard",
    "extend",
    "fit",
    "insert",
    "intersection_update",
    "partial_fit",
    "pop",
    "popitem",
    "remove",
    "reverse",
    "setdefault",
    "sort",
    "symmetric_difference_update",
    "update",
];

/// pandas-style methods that mutate their receiver only when called with `inplace=True`.
pub const INPLACE_METHODS: &[&str] = &[
    "drop",
    "fillna",
    "rename",
    "reset_index",
    "set_index",
    "sort_values",
];

/// Analyses one code cell's source. A cell that cannot be analysed comes back with
/// [`CellAnalysis::error`] set and nothing else. Never panics, provided panics unwind (the
/// parser's known panics are caught; see [`AnalysisErrorKind::ParserFailure`]).
pub fn analyse_cell(source: &str) -> CellAnalysis {
    if source.len() > MAX_CELL_SOURCE_BYTES {
        return CellAnalysis::failed(
            AnalysisErrorKind::TooLarge,
            format!(
                "the cell is {} bytes, more than the {} bytes dataflow analyses",
                source.len(),
                MAX_CELL_SOURCE_BYTES
            ),
            1,
            1,
        );
    }
    let magic = ipython::find_cell_magic(source);
    let Some(magic) = magic else {
        return analyse_python(source, None);
    };
    let cell_magic = CellMagic {
        name: magic.name.to_owned(),
        analysed: magic.mode != CellMagicMode::Opaque,
    };
    if magic.mode == CellMagicMode::Opaque {
        return CellAnalysis {
            cell_magic: Some(cell_magic),
            ..CellAnalysis::default()
        };
    }
    // Blank the magic line with spaces so every byte offset, and so every line and column,
    // stays what the user sees.
    let mut text = String::with_capacity(source.len());
    text.push_str(&source[..magic.start]);
    text.extend(std::iter::repeat_n(' ', magic.end - magic.start));
    text.push_str(&source[magic.end..]);
    let mut analysis = analyse_python(&text, Some(&magic));
    analysis.cell_magic = Some(cell_magic);
    analysis
}

/// Drops `value`, a syntax tree, on a stack of at least `stack_bytes` (see [`stack_for_depth`]
/// and [`stack_for_source`]).
///
/// The parser and the walk grow the stack themselves as they recurse, but dropping the tree
/// recurses too and cannot. The stack is only switched when the current one is too small, and a
/// new one is virtual memory until touched.
fn drop_tree<T>(value: T, stack_bytes: usize) {
    const BASE: usize = 64 * 1024;
    let needed = BASE.saturating_add(stack_bytes);
    stacker::maybe_grow(needed, needed, move || drop(value));
}

/// Stack to drop a tree the walk measured `depth` levels deep. Measured, a level takes under 200
/// bytes (f-strings nested in f-strings are the worst case); this leaves a wide margin.
fn stack_for_depth(depth: usize) -> usize {
    depth.saturating_mul(512)
}

/// Stack to drop a tree the walk did not measure, parsed from `length` bytes: at most one level
/// per byte (`------x`, `[[[[x]]]]`), measured under 100 bytes per byte of source.
fn stack_for_source(length: usize) -> usize {
    length.saturating_mul(256)
}

/// Parses `text` as a module with IPython syntax; `None` if the parser panicked.
///
/// The parser has known panics on some invalid IPython input (astral-sh/ruff#21705, still open
/// in the newest release). A cell must never take the host down, so the panic is caught here,
/// at the one foreign call that can raise it; this relies on the workspace unwinding on panic.
fn parse_module(text: &str) -> Option<Parsed<ModModule>> {
    std::panic::catch_unwind(|| parse_unchecked_source(text, PySourceType::Ipynb)).ok()
}

/// Parses `text` as one expression; `None` if it is not one or the parser panicked.
fn parse_one_expression(text: &str) -> Option<Parsed<ModExpression>> {
    std::panic::catch_unwind(|| parse_expression(text).ok())
        .ok()
        .flatten()
}

fn analyse_python(text: &str, magic: Option<&ipython::CellMagicLine<'_>>) -> CellAnalysis {
    let Some(mut parsed) = parse_module(text) else {
        return CellAnalysis::failed(
            AnalysisErrorKind::ParserFailure,
            "the Python parser failed on this cell; it is probably not valid Python".to_owned(),
            1,
            1,
        );
    };
    let lines = LineIndex::new(text);
    if !parsed.errors().is_empty()
        && let Some(without_searches) = ipython::blank_wildcard_help(text)
    {
        // The parser does not know IPython's wildcard search (`np.*load*?`); it has no dataflow,
        // so blank those lines and try again.
        if let Some(retried) = parse_module(&without_searches) {
            let unused = if retried.errors().is_empty() {
                std::mem::replace(&mut parsed, retried)
            } else {
                retried
            };
            drop_tree(unused, stack_for_source(text.len()));
        }
    }
    if let Some(error) = parsed
        .errors()
        .iter()
        .min_by_key(|error| error.location.start())
    {
        let (line, column) = lines.line_column(text, error.location.start());
        let analysis = CellAnalysis::failed(
            AnalysisErrorKind::Syntax,
            error.error.to_string(),
            line,
            column,
        );
        // The tree was not walked, so its depth is unknown; it is at most one level per byte
        // of source (`------x`, `[[[[x]]]]`).
        drop_tree(parsed, stack_for_source(text.len()));
        return analysis;
    }
    let mut analyzer = Analyzer::new(lines);
    let isolated = magic.is_some_and(|magic| magic.mode == CellMagicMode::Isolated);
    if isolated {
        analyzer.push(ScopeKind::Function, false);
    }
    analyzer.visit_body(&parsed.syntax().body);
    if isolated {
        analyzer.pop();
    }
    if let Some(magic) = magic.filter(|magic| magic.name == "capture")
        && let Some(output) = ipython::capture_output_name(magic.args)
    {
        let line = analyzer
            .lines
            .line_of(TextSize::try_from(magic.start).unwrap_or_default());
        analyzer.module_bind(output, line, DefinitionKind::Variable);
    }
    // A walk stopped by the scope limit saw only part of the tree.
    let stack = if analyzer.too_deep_at.is_some() {
        stack_for_source(text.len())
    } else {
        stack_for_depth(analyzer.max_depth)
    };
    let analysis = analyzer.finish(text);
    drop_tree(parsed, stack);
    analysis
}

/// Byte offsets of line starts, for turning parser offsets into 1-based lines and columns.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, byte)| byte == b'\n')
                .map(|(index, _)| index + 1),
        );
        LineIndex { starts }
    }

    fn line_index(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset) - 1
    }

    fn line_of(&self, offset: TextSize) -> u32 {
        to_u32(self.line_index(offset.to_usize()) + 1)
    }

    fn line_column(&self, text: &str, offset: TextSize) -> (u32, u32) {
        let offset = offset.to_usize().min(text.len());
        let index = self.line_index(offset);
        let line_start = self.starts[index];
        let column = text
            .get(line_start..offset)
            .map_or(offset - line_start, |prefix| prefix.chars().count());
        (to_u32(index + 1), to_u32(column + 1))
    }
}

fn to_u32(value: usize) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScopeKind {
    Module,
    /// Functions, lambdas, annotation scopes and `%timeit`: all bindings anywhere are local.
    Function,
    /// Class bodies run top to bottom and are skipped by the scopes nested inside them.
    Class,
    /// Comprehensions: like functions, except that a walrus binds in the enclosing scope.
    Comprehension,
}

struct Scope {
    kind: ScopeKind,
    /// Whether the code in this scope runs later than the cell (function bodies, lambdas,
    /// annotations) rather than when the cell runs.
    deferred: bool,
    /// Function and comprehension scopes: every local name. Class scopes: names bound so far.
    bound: HashSet<String>,
    globals: HashSet<String>,
    nonlocals: HashSet<String>,
    /// Function and comprehension scopes: reads to resolve once every local is known.
    pending: Vec<Read>,
}

impl Scope {
    fn new(kind: ScopeKind, deferred: bool) -> Self {
        Scope {
            kind,
            deferred,
            bound: HashSet::new(),
            globals: HashSet::new(),
            nonlocals: HashSet::new(),
            pending: Vec::new(),
        }
    }
}

struct Read {
    name: String,
    line: u32,
    deferred: bool,
    mutation: Option<MutationKind>,
    optional: bool,
    /// The module-level function or class whose body the read is in.
    owner: Option<Rc<str>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum LastAction {
    Bind,
    Delete,
}

/// An ordered set of names with the line and payload of their first occurrence.
struct FirstSeen<T> {
    entries: Vec<(String, u32, T)>,
    index: HashMap<String, usize>,
}

impl<T> FirstSeen<T> {
    fn new() -> Self {
        FirstSeen {
            entries: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Records `name` at `line`, keeping the earliest line; returns the payload of the entry
    /// (new, or the first one recorded) for updating.
    fn insert(&mut self, name: &str, line: u32, payload: T) -> &mut T {
        let position = *self.index.entry(name.to_owned()).or_insert_with(|| {
            self.entries.push((name.to_owned(), line, payload));
            self.entries.len() - 1
        });
        let entry = &mut self.entries[position];
        entry.1 = entry.1.min(line);
        &mut entry.2
    }

    /// The entries ordered by line; entries on one line keep the order they were recorded in.
    fn into_sorted(mut self) -> Vec<(String, u32, T)> {
        self.entries.sort_by_key(|(_, line, _)| *line);
        self.entries
    }
}

struct Analyzer {
    lines: LineIndex,
    /// While analysing text that is not the cell itself (magic arguments, expansions), every
    /// position maps to the line of the escape command.
    line_override: Option<u32>,
    inline_depth: usize,
    /// While analysing IPython variable expansions: reads are optional.
    optional_reads: bool,
    /// Current and deepest nesting of visited nodes, to size the stack for dropping the tree.
    depth: usize,
    max_depth: usize,
    /// Where scopes first nested deeper than [`MAX_SCOPE_DEPTH`]; the walk stops there.
    too_deep_at: Option<TextSize>,
    scopes: Vec<Scope>,
    bound_so_far: HashSet<String>,
    defines: FirstSeen<DefinitionKind>,
    deletes: FirstSeen<()>,
    last_action: HashMap<String, LastAction>,
    /// Per use: (optional, deferred), each true only while every read so far was.
    uses: FirstSeen<(bool, bool)>,
    mutates: FirstSeen<MutationKind>,
    wildcards: Vec<Wildcard>,
    deferred_reads: Vec<Read>,
    used_locally: HashSet<String>,
    /// The module-level `def` or `class` being visited, if any.
    owner: Option<Rc<str>>,
    /// Per module-level function or class: the global names its body reads.
    reads_when_called: HashMap<Rc<str>, FirstSeen<()>>,
}

impl Analyzer {
    fn new(lines: LineIndex) -> Self {
        Analyzer {
            lines,
            line_override: None,
            inline_depth: 0,
            optional_reads: false,
            depth: 0,
            max_depth: 0,
            too_deep_at: None,
            scopes: vec![Scope::new(ScopeKind::Module, false)],
            bound_so_far: HashSet::new(),
            defines: FirstSeen::new(),
            deletes: FirstSeen::new(),
            last_action: HashMap::new(),
            uses: FirstSeen::new(),
            mutates: FirstSeen::new(),
            wildcards: Vec::new(),
            deferred_reads: Vec::new(),
            used_locally: HashSet::new(),
            owner: None,
            reads_when_called: HashMap::new(),
        }
    }

    fn line(&self, offset: TextSize) -> u32 {
        self.line_override
            .unwrap_or_else(|| self.lines.line_of(offset))
    }

    fn top(&self) -> usize {
        self.scopes.len() - 1
    }

    fn push(&mut self, kind: ScopeKind, deferred: bool) {
        self.scopes.push(Scope::new(kind, deferred));
    }

    /// Runs `visit` one level deeper in the tree, on a grown stack if needed, unless the walk
    /// has stopped.
    fn nested(&mut self, offset: TextSize, visit: impl FnOnce(&mut Self)) {
        if self.too_deep_at.is_some() {
            return;
        }
        if self.scopes.len() > MAX_SCOPE_DEPTH {
            self.too_deep_at = Some(offset);
            return;
        }
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
        stacker::maybe_grow(RED_ZONE, SEGMENT, || visit(self));
        self.depth -= 1;
    }

    /// Pushes a scope for code that runs later and binds nothing of its own: annotations,
    /// type-parameter bounds, type alias values.
    fn push_lazy(&mut self) {
        self.push(ScopeKind::Function, true);
    }

    fn pop(&mut self) {
        let scope = self.scopes.pop().expect("the module scope is never popped");
        let below = self.scopes.len();
        for read in scope.pending {
            if scope.globals.contains(&read.name) {
                self.resolve_at_module(read);
            } else if scope.bound.contains(&read.name) && !scope.nonlocals.contains(&read.name) {
                // A local of the popped scope.
            } else {
                self.propagate(read, below);
            }
        }
    }

    fn read(&mut self, name: &str, offset: TextSize, mutation: Option<MutationKind>) {
        let top = self.top();
        let read = Read {
            name: name.to_owned(),
            line: self.line(offset),
            deferred: self.scopes[top].deferred,
            mutation,
            optional: self.optional_reads,
            owner: self.owner.clone(),
        };
        let scope = &self.scopes[top];
        match scope.kind {
            ScopeKind::Module => self.resolve_at_module(read),
            ScopeKind::Class if scope.globals.contains(name) => self.resolve_at_module(read),
            // A name the class body bound before this read.
            ScopeKind::Class if scope.bound.contains(name) => {}
            ScopeKind::Class => self.propagate(read, top),
            ScopeKind::Function | ScopeKind::Comprehension => {
                self.scopes[top].pending.push(read);
            }
        }
    }

    /// Hands a read that is not local to scope `below` to the nearest enclosing scope that can
    /// resolve it. Class scopes are not visible from the scopes nested inside them.
    fn propagate(&mut self, read: Read, below: usize) {
        for index in (0..below).rev() {
            match self.scopes[index].kind {
                ScopeKind::Class => continue,
                ScopeKind::Module => break,
                ScopeKind::Function | ScopeKind::Comprehension => {
                    self.scopes[index].pending.push(read);
                    return;
                }
            }
        }
        self.resolve_at_module(read);
    }

    fn resolve_at_module(&mut self, read: Read) {
        if read.deferred {
            if let Some(owner) = &read.owner {
                self.reads_when_called
                    .entry(Rc::clone(owner))
                    .or_insert_with(FirstSeen::new)
                    .insert(&read.name, read.line, ());
            }
            self.deferred_reads.push(read);
        } else if self.bound_so_far.contains(&read.name) {
            self.used_locally.insert(read.name);
        } else {
            self.add_use(&read);
            if let Some(kind) = read.mutation {
                let known = self.mutates.insert(&read.name, read.line, kind);
                if kind == MutationKind::Store {
                    *known = MutationKind::Store;
                }
            }
        }
    }

    fn add_use(&mut self, read: &Read) {
        let (optional, deferred) =
            self.uses
                .insert(&read.name, read.line, (read.optional, read.deferred));
        *optional &= read.optional;
        *deferred &= read.deferred;
    }

    fn bind(&mut self, name: &str, offset: TextSize, kind: DefinitionKind) {
        let line = self.line(offset);
        self.bind_in(self.top(), name, line, kind);
    }

    fn bind_in(&mut self, index: usize, name: &str, line: u32, kind: DefinitionKind) {
        let scope = &mut self.scopes[index];
        match scope.kind {
            ScopeKind::Module => self.module_bind(name, line, kind),
            _ if scope.globals.contains(name) => self.module_bind(name, line, kind),
            _ if scope.nonlocals.contains(name) => {}
            _ => {
                scope.bound.insert(name.to_owned());
            }
        }
    }

    /// A walrus binds in the nearest scope that is not a comprehension (PEP 572).
    fn bind_walrus(&mut self, name: &str, offset: TextSize) {
        let line = self.line(offset);
        let index = self
            .scopes
            .iter()
            .rposition(|scope| scope.kind != ScopeKind::Comprehension)
            .unwrap_or(0);
        self.bind_in(index, name, line, DefinitionKind::Variable);
    }

    fn module_bind(&mut self, name: &str, line: u32, kind: DefinitionKind) {
        self.bound_so_far.insert(name.to_owned());
        self.defines.insert(name, line, kind);
        self.last_action.insert(name.to_owned(), LastAction::Bind);
    }

    fn delete(&mut self, name: &str, offset: TextSize) {
        let line = self.line(offset);
        let top = self.top();
        let scope = &mut self.scopes[top];
        let global = match scope.kind {
            ScopeKind::Module => true,
            _ if scope.globals.contains(name) => true,
            // `del x` makes `x` local, like an assignment.
            ScopeKind::Function | ScopeKind::Comprehension => {
                scope.bound.insert(name.to_owned());
                false
            }
            ScopeKind::Class => false,
        };
        if global {
            self.deletes.insert(name, line, ());
            self.last_action.insert(name.to_owned(), LastAction::Delete);
        }
    }

    /// Reads the root of an attribute/subscript chain as mutated (`x` in `x.a[i].b`) and visits
    /// the rest of the chain (subscript indexes, a call at the root) normally, in evaluation
    /// order. Iterative, because chains can be as long as the cell. `method_receiver`: the
    /// chain is the receiver of a mutating method, which on a bare name is a
    /// [`MutationKind::MethodCall`].
    fn mutate_chain(&mut self, expr: &Expr, method_receiver: bool) {
        let mut indexes = Vec::new();
        let mut chain_length = 0usize;
        let mut current = expr;
        loop {
            match current {
                Expr::Attribute(attribute) => current = &attribute.value,
                Expr::Subscript(subscript) => {
                    indexes.push(&*subscript.slice);
                    current = &subscript.value;
                }
                _ => break,
            }
            chain_length += 1;
        }
        // The chain's levels are not visited one by one, but they count for dropping the tree.
        self.max_depth = self.max_depth.max(self.depth.saturating_add(chain_length));
        match current {
            Expr::Name(name) => {
                let kind = if method_receiver && chain_length == 0 {
                    MutationKind::MethodCall
                } else {
                    MutationKind::Store
                };
                self.read(name.id.as_str(), name.start(), Some(kind));
            }
            other => self.visit_expr(other),
        }
        for index in indexes.into_iter().rev() {
            self.visit_expr(index);
        }
    }

    fn visit_parameters_outside(&mut self, parameters: &ast::Parameters) {
        // Defaults run when the `def` runs, in the enclosing scope.
        for default in parameters
            .iter_non_variadic_params()
            .filter_map(|parameter| parameter.default.as_deref())
        {
            self.visit_expr(default);
        }
        let mut annotations = parameters
            .iter()
            .filter_map(|parameter| parameter.annotation())
            .peekable();
        if annotations.peek().is_some() {
            self.push_lazy();
            for annotation in annotations {
                self.visit_annotation(annotation);
            }
            self.pop();
        }
    }

    fn bind_parameters(&mut self, parameters: &ast::Parameters) {
        for parameter in parameters {
            let name = parameter.name();
            self.bind(name.as_str(), name.start(), DefinitionKind::Variable);
        }
    }

    /// Pushes the annotation scope of PEP 695 type parameters and binds them in it; their bounds
    /// and defaults are evaluated lazily.
    fn push_type_params(&mut self, type_params: &ast::TypeParams) {
        let deferred = self.scopes[self.top()].deferred;
        self.push(ScopeKind::Function, deferred);
        for type_param in &type_params.type_params {
            let name = type_param.name();
            self.bind(name.as_str(), name.start(), DefinitionKind::Variable);
        }
        self.push_lazy();
        visitor::walk_type_params(self, type_params);
        self.pop();
    }

    /// Runs `visit` with `name` as the owner of deferred reads if the statement is at module
    /// level (possibly inside `if`, `for`, `try`, ...).
    fn owning(&mut self, name: &str, visit: impl FnOnce(&mut Self)) {
        if self.owner.is_some() || self.scopes.len() > 1 {
            visit(self);
            return;
        }
        self.owner = Some(Rc::from(name));
        visit(self);
        self.owner = None;
    }

    fn visit_function_def(&mut self, function: &ast::StmtFunctionDef) {
        self.owning(function.name.as_str(), |analyzer| {
            analyzer.visit_function_def_owned(function);
        });
    }

    /// Visits a function's or class's decorators and opens the scope of its type parameters.
    fn open_definition(
        &mut self,
        decorators: &[ast::Decorator],
        type_params: Option<&ast::TypeParams>,
    ) {
        for decorator in decorators {
            self.visit_decorator(decorator);
        }
        if let Some(type_params) = type_params {
            self.push_type_params(type_params);
        }
    }

    /// Visits a function's or class's `body` in the scope just pushed for it, closes that scope
    /// and the one of its type parameters, and binds its name.
    fn close_definition(
        &mut self,
        body: &[ast::Stmt],
        has_type_params: bool,
        name: &ast::Identifier,
        kind: DefinitionKind,
    ) {
        self.visit_body(body);
        self.pop();
        if has_type_params {
            self.pop();
        }
        self.bind(name.as_str(), name.start(), kind);
    }

    fn visit_function_def_owned(&mut self, function: &ast::StmtFunctionDef) {
        self.open_definition(&function.decorator_list, function.type_params.as_deref());
        self.visit_parameters_outside(&function.parameters);
        if let Some(returns) = &function.returns {
            self.push_lazy();
            self.visit_annotation(returns);
            self.pop();
        }
        self.push(ScopeKind::Function, true);
        self.bind_parameters(&function.parameters);
        self.close_definition(
            &function.body,
            function.type_params.is_some(),
            &function.name,
            DefinitionKind::Function,
        );
    }

    fn visit_class_def(&mut self, class: &ast::StmtClassDef) {
        self.owning(class.name.as_str(), |analyzer| {
            analyzer.visit_class_def_owned(class)
        });
    }

    fn visit_class_def_owned(&mut self, class: &ast::StmtClassDef) {
        self.open_definition(&class.decorator_list, class.type_params.as_deref());
        if let Some(arguments) = &class.arguments {
            self.visit_arguments(arguments);
        }
        let deferred = self.scopes[self.top()].deferred;
        self.push(ScopeKind::Class, deferred);
        self.close_definition(
            &class.body,
            class.type_params.is_some(),
            &class.name,
            DefinitionKind::Class,
        );
    }

    fn visit_comprehension_scope(&mut self, generators: &[ast::Comprehension], elements: &[&Expr]) {
        let Some((first, rest)) = generators.split_first() else {
            return;
        };
        // The first iterable is evaluated in the enclosing scope.
        self.visit_expr(&first.iter);
        let deferred = self.scopes[self.top()].deferred;
        self.push(ScopeKind::Comprehension, deferred);
        self.visit_expr(&first.target);
        for condition in &first.ifs {
            self.visit_expr(condition);
        }
        for generator in rest {
            visitor::walk_comprehension(self, generator);
        }
        for element in elements {
            self.visit_expr(element);
        }
        self.pop();
    }

    fn visit_call(&mut self, call: &ast::ExprCall) {
        if let Expr::Attribute(method) = &*call.func {
            let name = method.attr.as_str();
            let mutates = MUTATING_METHODS.contains(&name)
                || (INPLACE_METHODS.contains(&name) && inplace_true(&call.arguments));
            if mutates && chain_root_is_name(&method.value) {
                self.mutate_chain(&method.value, true);
                self.visit_arguments(&call.arguments);
                return;
            }
        }
        if let Expr::Name(function) = &*call.func
            && matches!(function.id.as_str(), "setattr" | "delattr")
            && let Some((target, rest)) = call.arguments.args.split_first()
            && chain_root_is_name(target)
        {
            self.visit_expr(&call.func);
            self.mutate_chain(target, false);
            for argument in rest {
                self.visit_expr(argument);
            }
            for keyword in &call.arguments.keywords {
                self.visit_keyword(keyword);
            }
            return;
        }
        self.visit_expr(&call.func);
        self.visit_arguments(&call.arguments);
    }

    fn finish(mut self, text: &str) -> CellAnalysis {
        if let Some(offset) = self.too_deep_at {
            let (line, column) = self.lines.line_column(text, offset);
            return CellAnalysis::failed(
                AnalysisErrorKind::TooDeeplyNested,
                format!(
                    "functions, lambdas, classes or comprehensions nest more than \
                     {MAX_SCOPE_DEPTH} deep here"
                ),
                line,
                column,
            );
        }
        for read in std::mem::take(&mut self.deferred_reads) {
            if self.bound_so_far.contains(&read.name) {
                self.used_locally.insert(read.name);
            } else {
                self.add_use(&read);
            }
        }
        let mut reads_when_called = std::mem::take(&mut self.reads_when_called);
        let last_action = &self.last_action;
        let ends_with = |name: &str, action: LastAction| last_action.get(name) == Some(&action);
        let mut used_locally: Vec<String> = self.used_locally.into_iter().collect();
        used_locally.sort_unstable();
        CellAnalysis {
            defines: self
                .defines
                .into_sorted()
                .into_iter()
                .filter(|(name, _, _)| ends_with(name, LastAction::Bind))
                .map(|(name, line, kind)| {
                    let reads_when_called = match kind {
                        DefinitionKind::Function | DefinitionKind::Class => reads_when_called
                            .remove(name.as_str())
                            .map(|reads| {
                                reads
                                    .into_sorted()
                                    .into_iter()
                                    .map(|(read, _, ())| read)
                                    .collect()
                            })
                            .unwrap_or_default(),
                        DefinitionKind::Variable | DefinitionKind::Import => Vec::new(),
                    };
                    Definition {
                        name,
                        kind,
                        line,
                        reads_when_called,
                    }
                })
                .collect(),
            uses: self
                .uses
                .into_sorted()
                .into_iter()
                .map(|(name, line, (optional, deferred))| Use {
                    name,
                    line,
                    optional,
                    deferred,
                })
                .collect(),
            mutates: self
                .mutates
                .into_sorted()
                .into_iter()
                .map(|(name, line, kind)| Mutation { name, line, kind })
                .collect(),
            deletes: self
                .deletes
                .into_sorted()
                .into_iter()
                .filter(|(name, _, _)| ends_with(name, LastAction::Delete))
                .map(|(name, line, ())| NameAt { name, line })
                .collect(),
            wildcards: self.wildcards,
            cell_magic: None,
            error: None,
            used_locally,
        }
    }
}

fn chain_root_is_name(mut expr: &Expr) -> bool {
    loop {
        match expr {
            Expr::Name(_) => return true,
            Expr::Attribute(attribute) => expr = &attribute.value,
            Expr::Subscript(subscript) => expr = &subscript.value,
            _ => return false,
        }
    }
}

fn inplace_true(arguments: &ast::Arguments) -> bool {
    arguments.find_keyword("inplace").is_some_and(
        |keyword| matches!(&keyword.value, Expr::BooleanLiteral(literal) if literal.value),
    )
}

/// Stack the walk keeps free before recursing into a child node, and the size of each new
/// segment when it has to grow.
const RED_ZONE: usize = 64 * 1024;
const SEGMENT: usize = 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    fn names(analysis: &CellAnalysis) -> (Vec<&str>, Vec<&str>, Vec<&str>) {
        (
            analysis.defines.iter().map(|d| d.name.as_str()).collect(),
            analysis.uses.iter().map(|u| u.name.as_str()).collect(),
            analysis.mutates.iter().map(|m| m.name.as_str()).collect(),
        )
    }

    /// Each shape nests one tree level per few bytes of source; 100,000 levels overflow a test
    /// thread's 2 MiB stack unless the parse, the walk and the drop all guard their recursion.
    #[test]
    fn deeply_nested_cells_do_not_overflow_the_stack() {
        let depth = 100_000;
        let cases = [
            format!("x = {}y", "-".repeat(depth)),
            format!("x = {}y{}", "[".repeat(depth), "]".repeat(depth)),
            format!("x = y{}", " + y".repeat(depth)),
            format!("x = f{}", "()".repeat(depth)),
            format!("x{} = 1", ".a".repeat(depth)),
            format!("x{} = 1", "[0]".repeat(depth)),
            format!(
                "x = {}y{}",
                "f'{".repeat(depth / 10),
                "}'".repeat(depth / 10)
            ),
        ];
        for source in &cases {
            let analysis = analyse_cell(source);
            assert_eq!(analysis.error, None, "{}", &source[..20]);
            assert!(
                analysis
                    .uses
                    .iter()
                    .any(|used| used.name == "y" || used.name == "f")
                    || analysis.mutates.iter().any(|mutation| mutation.name == "x")
            );
        }
        // Syntax errors drop a tree the walk never saw.
        let unclosed = analyse_cell(&"[".repeat(depth));
        assert_eq!(
            unclosed.error.map(|error| error.kind),
            Some(AnalysisErrorKind::Syntax)
        );
    }

    #[test]
    fn scope_nesting_is_bounded() {
        let nested = format!("f = {}x", "lambda: ".repeat(MAX_SCOPE_DEPTH + 5));
        let analysis = analyse_cell(&nested);
        let error = analysis.error.expect("too deep");
        assert_eq!(error.kind, AnalysisErrorKind::TooDeeplyNested);
        assert_eq!(analysis.defines, Vec::new());

        // The walk stops at the limit, so it does not see how deep the rest of the tree goes.
        let deep_inside = format!(
            "f = {}{}x{}",
            "lambda: ".repeat(MAX_SCOPE_DEPTH + 5),
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let error = analyse_cell(&deep_inside).error.expect("too deep");
        assert_eq!(error.kind, AnalysisErrorKind::TooDeeplyNested);

        let shallow = format!("f = {}x", "lambda: ".repeat(MAX_SCOPE_DEPTH - 5));
        assert_eq!(
            names(&analyse_cell(&shallow)),
            (vec!["f"], vec!["x"], vec![])
        );
    }

    #[test]
    fn a_parser_panic_is_an_analysis_error() {
        // astral-sh/ruff#21705: the parser reaches an `unreachable!` on this input.
        let analysis = analyse_cell("[)\n,");
        let error = analysis.error.expect("the parser failed");
        assert_eq!(error.kind, AnalysisErrorKind::ParserFailure);
    }

    #[test]
    fn oversized_cells_are_not_analysed() {
        let analysis = analyse_cell(&"x = 1\n".repeat(MAX_CELL_SOURCE_BYTES / 6 + 1));
        assert_eq!(
            analysis.error.map(|error| error.kind),
            Some(AnalysisErrorKind::TooLarge)
        );
    }

    #[test]
    fn nested_time_magics_stop_at_a_fixed_depth() {
        let shallow = analyse_cell("%time %time x = y");
        assert_eq!(names(&shallow), (vec!["x"], vec!["y"], vec![]));
        let deep = analyse_cell(&format!("{}x = y", "%time ".repeat(1000)));
        assert_eq!(names(&deep), (vec![], vec![], vec![]));
    }

    #[test]
    fn mutation_chains_read_indexes_in_order() {
        let analysis = analyse_cell("table[row][column].value = 1\nsetattr(obj.inner, 'a', b)");
        assert_eq!(
            names(&analysis),
            (
                vec![],
                vec!["table", "row", "column", "setattr", "obj", "b"],
                vec!["table", "obj"]
            )
        );
        // A chain rooted at a call mutates nothing we can name.
        let through_call = analyse_cell("make().items.append(1)\nf(x)[0] = 2");
        assert_eq!(
            names(&through_call),
            (vec![], vec!["make", "f", "x"], vec![])
        );
    }

    #[test]
    fn reads_used_by_the_cell_itself_are_recorded_for_lint() {
        let analysis = analyse_cell("a = 1\nb = a\ndef f():\n    return c\nc = 2\nd = 3");
        assert_eq!(analysis.used_locally, vec!["a", "c"]);
    }

    #[test]
    fn walrus_in_a_class_level_comprehension_binds_in_the_class() {
        let analysis = analyse_cell("class C:\n    xs = [y := 1 for _ in range(3)]\nprint(y)");
        assert_eq!(
            names(&analysis),
            (vec!["C"], vec!["range", "print", "y"], vec![])
        );
    }
}
