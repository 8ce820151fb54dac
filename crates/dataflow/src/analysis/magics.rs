//! IPython syntax inside a cell: escape commands (`!cmd`, `%magic`, `x?`) and the Python that
//! inline magics such as `%time` run.

use ruff_python_ast::IpyEscapeKind;
use ruff_text_size::TextSize;

use super::*;

impl Analyzer {
    pub(super) fn escape_command(&mut self, kind: IpyEscapeKind, value: &str, offset: TextSize) {
        match kind {
            IpyEscapeKind::Magic => {
                let (name, args) = ipython::split_magic(value);
                match name {
                    "time" => self.analyse_inline(args, offset, false),
                    "timeit" => {
                        self.analyse_inline(ipython::strip_timeit_options(args), offset, true);
                    }
                    "run" => self.wildcards.push(Wildcard {
                        kind: WildcardKind::RunMagic,
                        origin: ipython::run_magic_target(args).to_owned(),
                        line: self.line(offset),
                    }),
                    _ => self.expand(args, offset),
                }
            }
            IpyEscapeKind::Shell | IpyEscapeKind::ShCap => self.expand(value, offset),
            IpyEscapeKind::Help | IpyEscapeKind::Help2 => {
                if let Some(root) = ipython::help_target_root(value) {
                    self.optional_read(root, offset);
                }
            }
            // A `%%magic` that is not on the first line fails at run time; auto-call
            // (`,f a b`, `;f a b`, `/f a b`) is not analysed.
            IpyEscapeKind::Magic2
            | IpyEscapeKind::Quote
            | IpyEscapeKind::Quote2
            | IpyEscapeKind::Paren => {}
        }
    }

    pub(super) fn optional_read(&mut self, name: &str, offset: TextSize) {
        let previous = std::mem::replace(&mut self.optional_reads, true);
        self.read(name, offset, None);
        self.optional_reads = previous;
    }

    /// Analyses the Python argument of `%time` (run in the current scope) or `%timeit` (run in
    /// a function of its own, so its bindings stay local).
    pub(super) fn analyse_inline(&mut self, code: &str, offset: TextSize, isolated: bool) {
        if self.inline_depth >= MAX_INLINE_MAGIC_DEPTH {
            return;
        }
        let Some(parsed) = parse_module(code) else {
            return;
        };
        if !parsed.errors().is_empty() {
            // IPython raises a SyntaxError when the magic runs; nothing gets defined.
            drop_tree(parsed, stack_for_source(code.len()));
            return;
        }
        let saved = self.line_override;
        self.line_override = Some(self.line(offset));
        self.inline_depth += 1;
        if isolated {
            let deferred = self.scopes[self.top()].deferred;
            self.push(ScopeKind::Function, deferred);
        }
        self.visit_body(&parsed.syntax().body);
        if isolated {
            self.pop();
        }
        self.inline_depth -= 1;
        self.line_override = saved;
        drop_tree(parsed, stack_for_source(code.len()));
    }

    /// Records the optional reads of IPython's variable expansion in `text`.
    pub(super) fn expand(&mut self, text: &str, offset: TextSize) {
        for expansion in ipython::expansions(text) {
            match expansion {
                Expansion::Name(name) => self.optional_read(name, offset),
                Expansion::Expression(expression) => {
                    let Some(parsed) = parse_one_expression(expression.trim()) else {
                        continue;
                    };
                    let saved_line = self.line_override;
                    self.line_override = Some(self.line(offset));
                    let saved_optional = std::mem::replace(&mut self.optional_reads, true);
                    self.visit_expr(parsed.expr());
                    self.optional_reads = saved_optional;
                    self.line_override = saved_line;
                    drop_tree(parsed, stack_for_source(expression.len()));
                }
            }
        }
    }
}
