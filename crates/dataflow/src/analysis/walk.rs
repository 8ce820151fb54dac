//! The walk over the syntax tree: each statement, expression and pattern in Python's evaluation
//! order, with the scope rules of [`Analyzer`](super::Analyzer).

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ExprContext, Pattern, Stmt};
use ruff_text_size::Ranged;

use super::*;

impl<'a> Visitor<'a> for Analyzer {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        self.nested(stmt.start(), |analyzer| analyzer.visit_stmt_inner(stmt));
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        self.nested(expr.start(), |analyzer| analyzer.visit_expr_inner(expr));
    }

    fn visit_pattern(&mut self, pattern: &'a Pattern) {
        self.nested(pattern.start(), |analyzer| {
            analyzer.visit_pattern_inner(pattern);
        });
    }

    fn visit_annotation(&mut self, expr: &'a Expr) {
        // String annotations are not parsed: they are neither evaluated by Python nor needed
        // for the dataflow of a notebook.
        self.visit_expr(expr);
    }

    fn visit_except_handler(&mut self, handler: &'a ast::ExceptHandler) {
        let ast::ExceptHandler::ExceptHandler(handler) = handler;
        if let Some(type_) = &handler.type_ {
            self.visit_expr(type_);
        }
        if let Some(name) = &handler.name {
            self.bind(name.as_str(), name.start(), DefinitionKind::Variable);
        }
        self.visit_body(&handler.body);
    }
}

impl Analyzer {
    fn visit_stmt_inner(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::FunctionDef(function) => self.visit_function_def(function),
            Stmt::ClassDef(class) => self.visit_class_def(class),
            Stmt::TypeAlias(alias) => {
                if let Expr::Name(name) = &*alias.name {
                    self.bind(name.id.as_str(), name.start(), DefinitionKind::Class);
                }
                if let Some(type_params) = &alias.type_params {
                    self.push_type_params(type_params);
                }
                self.push_lazy();
                self.visit_expr(&alias.value);
                self.pop();
                if alias.type_params.is_some() {
                    self.pop();
                }
            }
            Stmt::AugAssign(assign) => {
                self.visit_expr(&assign.value);
                if let Expr::Name(name) = &*assign.target {
                    self.read(name.id.as_str(), name.start(), None);
                    self.bind(name.id.as_str(), name.start(), DefinitionKind::Variable);
                } else {
                    self.visit_expr(&assign.target);
                }
            }
            Stmt::AnnAssign(assign) => {
                if let Some(value) = &assign.value {
                    self.visit_expr(value);
                }
                self.push_lazy();
                self.visit_annotation(&assign.annotation);
                self.pop();
                match &*assign.target {
                    // `x: int` without a value binds nothing in a module or class, but makes
                    // `x` local in a function.
                    Expr::Name(name)
                        if assign.value.is_none()
                            && self.scopes[self.top()].kind != ScopeKind::Function => {}
                    target => self.visit_expr(target),
                }
            }
            Stmt::Import(import) => {
                for alias in &import.names {
                    let bound = alias.asname.as_ref().map_or_else(
                        || alias.name.as_str().split('.').next().unwrap_or_default(),
                        |asname| asname.as_str(),
                    );
                    self.bind(bound, alias.start(), DefinitionKind::Import);
                }
            }
            Stmt::ImportFrom(import) => {
                let module = import.module.as_ref().map_or("", |module| module.as_str());
                if import.level == 0 && module == "__future__" {
                    return;
                }
                for alias in &import.names {
                    if alias.name.as_str() == "*" {
                        let dots = ".".repeat(usize::try_from(import.level).unwrap_or(0));
                        self.wildcards.push(Wildcard {
                            kind: WildcardKind::StarImport,
                            origin: format!("{dots}{module}"),
                            line: self.line(alias.start()),
                        });
                    } else {
                        let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                        self.bind(bound.as_str(), alias.start(), DefinitionKind::Import);
                    }
                }
            }
            Stmt::Global(global) => {
                let top = self.top();
                if self.scopes[top].kind != ScopeKind::Module {
                    for name in &global.names {
                        self.scopes[top].globals.insert(name.as_str().to_owned());
                    }
                }
            }
            Stmt::Nonlocal(nonlocal) => {
                let top = self.top();
                for name in &nonlocal.names {
                    self.scopes[top].nonlocals.insert(name.as_str().to_owned());
                }
            }
            Stmt::IpyEscapeCommand(command) => {
                self.escape_command(command.kind, &command.value, command.start());
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr_inner(&mut self, expr: &Expr) {
        match expr {
            Expr::Name(name) => match name.ctx {
                ExprContext::Load => self.read(name.id.as_str(), name.start(), None),
                ExprContext::Store => {
                    self.bind(name.id.as_str(), name.start(), DefinitionKind::Variable);
                }
                ExprContext::Del => {
                    self.read(name.id.as_str(), name.start(), None);
                    self.delete(name.id.as_str(), name.start());
                }
                ExprContext::Invalid => {}
            },
            Expr::Named(named) => {
                self.visit_expr(&named.value);
                if let Expr::Name(name) = &*named.target {
                    self.bind_walrus(name.id.as_str(), name.start());
                }
            }
            Expr::Lambda(lambda) => {
                if let Some(parameters) = &lambda.parameters {
                    self.visit_parameters_outside(parameters);
                }
                self.push(ScopeKind::Function, true);
                if let Some(parameters) = &lambda.parameters {
                    self.bind_parameters(parameters);
                }
                self.visit_expr(&lambda.body);
                self.pop();
            }
            Expr::ListComp(comprehension) => {
                self.visit_comprehension_scope(&comprehension.generators, &[&comprehension.elt]);
            }
            Expr::SetComp(comprehension) => {
                self.visit_comprehension_scope(&comprehension.generators, &[&comprehension.elt]);
            }
            Expr::Generator(generator) => {
                self.visit_comprehension_scope(&generator.generators, &[&generator.elt]);
            }
            Expr::DictComp(comprehension) => match &comprehension.key {
                Some(key) => self.visit_comprehension_scope(
                    &comprehension.generators,
                    &[key, &comprehension.value],
                ),
                None => self
                    .visit_comprehension_scope(&comprehension.generators, &[&comprehension.value]),
            },
            Expr::Call(call) => self.visit_call(call),
            Expr::Attribute(ast::ExprAttribute {
                ctx: ExprContext::Store | ExprContext::Del,
                ..
            })
            | Expr::Subscript(ast::ExprSubscript {
                ctx: ExprContext::Store | ExprContext::Del,
                ..
            }) => self.mutate_chain(expr, false),
            Expr::IpyEscapeCommand(command) => {
                self.escape_command(command.kind, &command.value, command.start());
            }
            _ => visitor::walk_expr(self, expr),
        }
    }

    fn visit_pattern_inner(&mut self, pattern: &Pattern) {
        visitor::walk_pattern(self, pattern);
        let captured = match pattern {
            Pattern::MatchAs(capture) => capture.name.as_ref(),
            Pattern::MatchStar(star) => star.name.as_ref(),
            Pattern::MatchMapping(mapping) => mapping.rest.as_ref(),
            _ => None,
        };
        if let Some(name) = captured {
            self.bind(name.as_str(), name.start(), DefinitionKind::Variable);
        }
    }
}
