//! Exports: Markdown, Python in the percent format (`# %%`), and a standalone HTML page.

use serde_json::Value;

use crate::notebook::{CellKind, Notebook};
use crate::outputs::{joined_text, output_texts};

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Markdown: markdown cells as they are, code and raw cells as fenced blocks.
    Markdown,
    /// A Python script in percent format: each cell starts with a `# %%` line (outputs are never
    /// included).
    Python,
    /// A standalone HTML page.
    Html,
}

/// Export options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// Include saved outputs (text, and images in HTML). Python exports never include them.
    pub include_outputs: bool,
}

/// Renders the notebook in `format`.
pub fn export(notebook: &Notebook, format: ExportFormat, options: ExportOptions) -> String {
    match format {
        ExportFormat::Markdown => to_markdown(notebook, options),
        ExportFormat::Python => to_python(notebook),
        ExportFormat::Html => to_html(notebook, options),
    }
}

fn longest_backtick_run(text: &str) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for character in text.chars() {
        if character == '`' {
            current += 1;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    longest
}

fn fence_for(text: &str) -> String {
    "`".repeat(longest_backtick_run(text).max(2) + 1)
}

fn to_markdown(notebook: &Notebook, options: ExportOptions) -> String {
    let mut blocks = Vec::with_capacity(notebook.len());
    for cell in notebook.cells() {
        match cell.kind() {
            CellKind::Markdown => blocks.push(cell.source().to_owned()),
            CellKind::Code => {
                let fence = fence_for(cell.source());
                let language = notebook.cell_language(cell);
                let mut block = format!("{fence}{language}\n{}\n{fence}", cell.source());
                if options.include_outputs {
                    for output in cell.outputs() {
                        for (_, text) in output_texts(output).into_iter().take(1) {
                            let fence = fence_for(&text);
                            block.push_str(&format!(
                                "\n\n{fence}text\n{}\n{fence}",
                                text.trim_end()
                            ));
                        }
                    }
                }
                blocks.push(block);
            }
            CellKind::Raw => {
                let fence = fence_for(cell.source());
                blocks.push(format!("{fence}\n{}\n{fence}", cell.source()));
            }
        }
    }
    let mut text = blocks.join("\n\n");
    text.push('\n');
    text
}

fn commented(source: &str) -> String {
    source
        .split('\n')
        .map(|line| {
            if line.is_empty() {
                "#".to_owned()
            } else {
                format!("# {line}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn to_python(notebook: &Notebook) -> String {
    let mut blocks = Vec::with_capacity(notebook.len());
    for cell in notebook.cells() {
        let block = match cell.kind() {
            CellKind::Code => format!("# %%\n{}", cell.source()),
            CellKind::Markdown => format!("# %% [markdown]\n{}", commented(cell.source())),
            CellKind::Raw => format!("# %% [raw]\n{}", commented(cell.source())),
        };
        blocks.push(block);
    }
    let mut text = blocks.join("\n\n");
    text.push('\n');
    text
}

/// Escapes text for HTML element content and attribute values.
pub fn escape_html(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            other => escaped.push(other),
        }
    }
    escaped
}

fn notebook_title(notebook: &Notebook) -> String {
    notebook
        .cells()
        .iter()
        .filter(|cell| cell.kind() == CellKind::Markdown)
        .find_map(|cell| {
            cell.source()
                .lines()
                .find_map(|line| line.strip_prefix("# ").map(str::trim).map(str::to_owned))
        })
        .unwrap_or_else(|| "Notebook".to_owned())
}

fn to_html(notebook: &Notebook, options: ExportOptions) -> String {
    let mut html = String::new();
    html.push_str("<!DOCTYPE html>\n<html>\n<head>\n<meta charset=\"utf-8\">\n<title>");
    html.push_str(&escape_html(&notebook_title(notebook)));
    html.push_str("</title>\n</head>\n<body>\n");
    for (index, cell) in notebook.cells().iter().enumerate() {
        let attributes = format!(
            "data-cell-index=\"{index}\" data-cell-id=\"{}\"",
            escape_html(cell.id())
        );
        match cell.kind() {
            CellKind::Markdown => html.push_str(&format!(
                "<section class=\"markdown\" {attributes}><pre>{}</pre></section>\n",
                escape_html(cell.source())
            )),
            CellKind::Raw => html.push_str(&format!(
                "<section class=\"raw\" {attributes}><pre>{}</pre></section>\n",
                escape_html(cell.source())
            )),
            CellKind::Code => {
                html.push_str(&format!(
                    "<section class=\"code\" {attributes}><pre><code class=\"language-{}\">{}</code></pre>",
                    escape_html(notebook.cell_language(cell)),
                    escape_html(cell.source())
                ));
                if options.include_outputs {
                    for output in cell.outputs() {
                        html.push_str(&output_html(output));
                    }
                }
                html.push_str("</section>\n");
            }
        }
    }
    html.push_str("</body>\n</html>\n");
    html
}

fn output_html(output: &Value) -> String {
    if let Some(Value::Object(bundle)) = output.get("data") {
        for mime in ["image/png", "image/jpeg"] {
            if let Some(data) = bundle.get(mime) {
                let data: String = joined_text(Some(data)).split_whitespace().collect();
                return format!(
                    "<img class=\"output\" src=\"data:{mime};base64,{}\">",
                    escape_html(&data)
                );
            }
        }
    }
    output_texts(output)
        .into_iter()
        .find(|(mime, _)| mime != "text/html")
        .map(|(_, text)| format!("<pre class=\"output\">{}</pre>", escape_html(&text)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::Cell;

    fn notebook() -> Notebook {
        let mut notebook = Notebook::new();
        notebook.push_cell(Cell::new(CellKind::Markdown, "# Title\n\ntext", "m"));
        let mut code = Cell::new(CellKind::Code, "print('<hi>')", "c");
        code.set_outputs(
            vec![serde_json::json!({"output_type": "stream", "name": "stdout", "text": "<hi>\n"})],
            Some(1),
        );
        notebook.push_cell(code);
        notebook
    }

    fn export_with_outputs(format: ExportFormat) -> String {
        let options = ExportOptions {
            include_outputs: true,
        };
        export(&notebook(), format, options)
    }

    #[test]
    fn python_percent_format() {
        let text = export(&notebook(), ExportFormat::Python, ExportOptions::default());
        assert_eq!(
            text,
            "# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nprint('<hi>')\n"
        );
    }

    #[test]
    fn markdown_fences_code_and_optionally_outputs() {
        let text = export_with_outputs(ExportFormat::Markdown);
        assert_eq!(
            text,
            "# Title\n\ntext\n\n```python\nprint('<hi>')\n```\n\n```text\n<hi>\n```\n"
        );
    }

    #[test]
    fn html_escapes_everything() {
        let text = export_with_outputs(ExportFormat::Html);
        assert!(text.starts_with("<!DOCTYPE html>"));
        assert!(text.contains("<title>Title</title>"));
        assert!(
            text.contains("print(&#x27;&lt;hi&gt;&#x27;)") || text.contains("print('&lt;hi&gt;')")
        );
        assert!(text.contains("<pre class=\"output\">&lt;hi&gt;\n</pre>"));
        assert!(!text.contains("<hi>"));
    }
}
