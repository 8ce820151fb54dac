//! The prompts the server offers: short, tested recipes for using the tools well. Each takes
//! the notebook to work on and renders one user message that names the tools in the order a
//! careful data scientist would use them.
//!
//! ```
//! let prompt = mcp_contract::prompts::prompt("orient").unwrap();
//! let text = (prompt.render)("analysis.ipynb");
//! assert!(text.contains("read_notebook"));
//! ```

/// One prompt of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct PromptSpec {
    /// The name clients pass to `prompts/get`.
    pub name: &'static str,
    /// A human title.
    pub title: &'static str,
    /// What the prompt is for, in one sentence.
    pub description: &'static str,
    /// Renders the message for the notebook the client named (a notebookRef, path or URI).
    pub render: fn(&str) -> String,
}

/// The one argument every prompt takes.
pub const NOTEBOOK_ARGUMENT: &str = "notebook";

/// What [`NOTEBOOK_ARGUMENT`] is.
pub const NOTEBOOK_ARGUMENT_DESCRIPTION: &str =
    "The notebook: a notebookRef from list_notebooks, a path under the server's root, or a URI";

fn orient(notebook: &str) -> String {
    format!(
        "Get oriented in the notebook {notebook} before changing anything.\n\
         1. Call read_notebook with notebookRef \"{notebook}\" (the default outline view): note \
         each cell's name, rev and state (fresh, stale, never-run, error), what each reads \
         (inputs) and what reads it (dependents), and the lint findings.\n\
         2. For the cells that matter to the question, read their source (view \"source\", \
         cellIds) and, where they ran, their outputs (view \"outputs\").\n\
         3. Call get_kernel_info to see whether a kernel runs and which one.\n\
         Then summarise in a few lines: what the notebook does, which cells are stale or \
         failing and why, and what you would run or change next. Do not edit or run anything yet."
    )
}

fn rerun_stale(notebook: &str) -> String {
    format!(
        "Re-run what is stale in the notebook {notebook} and report.\n\
         1. Call read_notebook (outline) and list the cells whose state is stale, never-run or \
         error.\n\
         2. Call run_cells with notebookRef \"{notebook}\" and no cellIds: it runs exactly the \
         stale set in document order and stops at the first failure. If the receipt is not \
         terminal yet, follow it with get_execution (waitMs) until it is.\n\
         3. Report which cells ran, how long each took, and their outputs in a sentence each; \
         for a failure, quote the error and the cell, and propose a fix without applying it."
    )
}

fn make_reproducible(notebook: &str) -> String {
    format!(
        "Make the notebook {notebook} reproducible: it must run from top to bottom on a fresh \
         kernel.\n\
         1. Call restart_kernels for \"{notebook}\": every cell becomes stale.\n\
         2. Call run_cells with no cellIds and follow it with get_execution until it is \
         terminal.\n\
         3. If a cell fails, read it (read_notebook, view \"all\", cellIds), fix the cause with \
         edit_cells quoting the cell's rev as expectedRev (define what it uses, reorder with \
         move_cells, or remove a stale dependency), then run_cells again: only what the fix made \
         stale runs.\n\
         4. Repeat until the run completes, then save_notebooks. Report every change you made \
         and why; use undo_last if a change made things worse."
    )
}

/// Every prompt, in the order `prompts/list` gives them.
pub const PROMPTS: &[PromptSpec] = &[
    PromptSpec {
        name: "orient",
        title: "Get oriented in a notebook",
        description: "Read a notebook's outline, states and dependencies before touching it, and summarise what it does and what is stale.",
        render: orient,
    },
    PromptSpec {
        name: "rerun-stale",
        title: "Re-run what is stale",
        description: "Run exactly the stale cells of a notebook, follow the run to its end and report the results.",
        render: rerun_stale,
    },
    PromptSpec {
        name: "make-reproducible",
        title: "Make a notebook reproducible",
        description: "Restart the kernel, run everything, fix the first failure and repeat until the notebook runs top to bottom.",
        render: make_reproducible,
    },
];

/// The prompt with this name.
pub fn prompt(name: &str) -> Option<&'static PromptSpec> {
    PROMPTS.iter().find(|prompt| prompt.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prompt_renders_the_notebook_and_names_real_tools() {
        let tools: Vec<&str> = crate::catalog::all_tools()
            .iter()
            .map(|spec| spec.name)
            .collect();
        for prompt in PROMPTS {
            let text = (prompt.render)("nb_0123456789abcdef01234567");
            assert!(
                text.contains("nb_0123456789abcdef01234567"),
                "{}",
                prompt.name
            );
            assert!(!prompt.description.is_empty() && !prompt.title.is_empty());
            // Every snake_case word that looks like a tool name is one.
            for word in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
                if word.contains('_') && word.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    assert!(
                        tools.contains(&word),
                        "{}: `{word}` is not a tool",
                        prompt.name
                    );
                }
            }
        }
        assert!(prompt("no-such").is_none());
    }
}
