//! `inspect_variable`: a live variable's type, shape, schema and richest repr, fetched by a
//! silent, history-free request that runs in its own namespace, so the notebook, the user's
//! namespace and the input history are left exactly as they were.

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use mcp_contract::params::InspectVariableParams;
use mcp_contract::{ErrorCode, ToolError};
use serde_json::{Value, json};

use crate::host::NotebookHost;
use crate::tools::{ImageContent, Tools, error};

const PROGRAM: &str = r#"
import json as _json
def _inspect(request):
    ip = get_ipython()
    namespace = ip.user_ns
    marker = "__JUPYTER_MCP_INSPECT__" + request["nonce"] + ":"
    limit = request["max_chars"]
    rows = request["rows"]
    result = {}
    try:
        steps = request["path"]
        if steps[0] not in namespace:
            result = {"error": "not_found"}
            raise LookupError
        value = namespace[steps[0]]
        for kind, key in steps[1:]:
            value = getattr(value, key) if kind == "attr" else value[key]
        kind = type(value)
        module = getattr(kind, "__module__", "") or ""
        name = getattr(kind, "__qualname__", kind.__name__)
        result["type"] = name if module == "builtins" else module + "." + name
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and all(isinstance(part, int) for part in shape):
            result["shape"] = list(shape)
        try:
            result["length"] = len(value)
        except Exception:
            pass
        dtype = getattr(value, "dtype", None)
        if dtype is not None and not callable(dtype):
            result["dtype"] = str(dtype)
        top = module.split(".")[0]
        if top == "pandas" and name == "DataFrame":
            result["columns"] = [[str(column), str(dtype)] for column, dtype in value.dtypes.items()]
            result["repr"] = value.head(rows).to_csv()
            result["format"] = "csv"
        elif top == "pandas" and name == "Series":
            result["repr"] = value.head(rows).to_csv()
            result["format"] = "csv"
        elif top == "polars" and name == "DataFrame":
            result["columns"] = [[str(column), str(dtype)] for column, dtype in value.schema.items()]
            result["repr"] = value.head(rows).write_csv()
            result["format"] = "csv"
        else:
            figure = None
            if top == "matplotlib":
                figure = value if hasattr(value, "savefig") else getattr(value, "figure", None)
                if figure is not None and not hasattr(figure, "savefig"):
                    figure = None
            if figure is not None:
                import base64, io
                buffer = io.BytesIO()
                figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
                result["image"] = base64.b64encode(buffer.getvalue()).decode("ascii")
                result["format"] = "image"
            elif top == "PIL" and hasattr(value, "save"):
                import base64, io
                buffer = io.BytesIO()
                value.save(buffer, format="PNG")
                result["image"] = base64.b64encode(buffer.getvalue()).decode("ascii")
                result["format"] = "image"
            if "format" not in result:
                if top == "numpy":
                    import numpy
                    text = numpy.array2string(value, threshold=200, edgeitems=5)
                else:
                    import reprlib
                    shortener = reprlib.Repr()
                    shortener.maxstring = limit
                    shortener.maxother = limit
                    shortener.maxlist = shortener.maxtuple = shortener.maxset = 50
                    shortener.maxdict = 50
                    shortener.maxlevel = 4
                    text = shortener.repr(value) if module == "builtins" else repr(value)
                result["repr"] = text
                result["format"] = "text"
        if isinstance(result.get("repr"), str) and len(result["repr"]) > limit:
            result["truncated"] = len(result["repr"]) - limit
            result["repr"] = result["repr"][:limit]
    except LookupError:
        if not result:
            result = {"error": "lookup", "exception": "LookupError"}
    except Exception as failure:
        result = {"error": "exception", "exception": type(failure).__name__}
    print(marker + _json.dumps(result))
_inspect(_json.loads(REQUEST))
"#;

/// One step of a variable path: an attribute or a subscript with a literal key.
fn parse_path(expression: &str) -> Option<Vec<Value>> {
    let mut steps = Vec::new();
    let bytes = expression.trim().as_bytes();
    let text = expression.trim();
    let identifier = |start: usize| -> Option<usize> {
        let first = *bytes.get(start)?;
        if !(first.is_ascii_alphabetic() || first == b'_') {
            return None;
        }
        let mut end = start + 1;
        while bytes
            .get(end)
            .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
        {
            end += 1;
        }
        Some(end)
    };
    let end = identifier(0)?;
    steps.push(Value::String(text[..end].to_owned()));
    let mut position = end;
    while position < bytes.len() {
        match bytes[position] {
            b'.' => {
                let end = identifier(position + 1)?;
                steps.push(json!(["attr", &text[position + 1..end]]));
                position = end;
            }
            b'[' => {
                let close = position + text[position..].find(']')?;
                let inner = text[position + 1..close].trim();
                let key = if let Ok(number) = inner.parse::<i64>() {
                    json!(number)
                } else if inner.len() >= 2
                    && ((inner.starts_with('\'') && inner.ends_with('\''))
                        || (inner.starts_with('"') && inner.ends_with('"')))
                {
                    json!(&inner[1..inner.len() - 1])
                } else {
                    return None;
                };
                steps.push(json!(["item", key]));
                position = close + 1;
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn python_string(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialise")
}

impl<H: NotebookHost> Tools<H> {
    pub(crate) async fn inspect_variable(
        &self,
        params: InspectVariableParams,
    ) -> Result<(Value, Vec<ImageContent>), ToolError> {
        let location = self.resolve(&params.notebook_ref).await?;
        let steps = parse_path(&params.name).ok_or_else(|| {
            error(
                ErrorCode::InvalidArgument,
                format!(
                    "`{}` is not a variable path: use a name, attributes and literal subscripts, \
                     e.g. `df`, `model.coef_`, `results[\"train\"]` or `items[0]`",
                    params.name
                ),
            )
        })?;
        let kernel = self.running_session(&location).await.ok_or_else(|| {
            error(
                ErrorCode::KernelUnavailable,
                "no kernel runs for this notebook, so it has no variables yet; run the cells that \
                 define it first",
            )
        })?;
        // A run that just replied (a person's, or the agent's own) leaves the kernel busy for a
        // few more milliseconds; only a kernel still busy after a short settle is refused.
        if crate::kernel::settled_status(kernel.status())
            .await
            .is_none()
        {
            return Err(error(
                ErrorCode::KernelBusy,
                "the kernel is busy running a cell; inspect when it is idle (get_execution with \
                 waitMs), or interrupt it",
            ));
        }
        static NONCE: AtomicU64 = AtomicU64::new(1);
        let nonce = format!(
            "{:x}{:x}",
            crate::execution::state::now_ms(),
            NONCE.fetch_add(1, Ordering::Relaxed)
        );
        let max_chars = params.max_chars.unwrap_or(4_000).clamp(200, 100_000);
        let request = json!({"path": steps, "nonce": nonce, "max_chars": max_chars, "rows": 20});
        let code = format!(
            "(lambda b: b.exec(b.compile({}, \"<jupyter-mcp-inspect>\", \"exec\"), \
             {{\"__builtins__\": b, \"REQUEST\": {}}}))(__import__(\"builtins\"))",
            python_string(PROGRAM),
            python_string(&request.to_string())
        );
        let events = kernel
            .execute(code, crate::kernel::ExecuteOptions::quiet())
            .await?;
        let summary = crate::kernel::collect(events).await?;
        let marker = format!("__JUPYTER_MCP_INSPECT__{nonce}:");
        let reply = summary
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix(&marker))
            .and_then(|json_text| serde_json::from_str::<Value>(json_text).ok())
            .ok_or_else(|| {
                error(
                    ErrorCode::KernelUnavailable,
                    "the kernel did not answer the inspection request; is it a Python kernel with IPython?",
                )
            })?;
        match reply.get("error").and_then(Value::as_str) {
            Some("not_found") => {
                return Err(error(
                    ErrorCode::VariableNotFound,
                    format!(
                        "`{}` is not defined in the kernel; run the cell that defines it first",
                        params.name
                    ),
                ));
            }
            Some(_) => {
                let class = reply["exception"].as_str().unwrap_or("Exception");
                return Err(error(
                    ErrorCode::VariableNotFound,
                    format!(
                        "evaluating `{}` raised {class}; check the attribute or key",
                        params.name
                    ),
                ));
            }
            None => {}
        }
        let mut images = Vec::new();
        let mut result = json!({
            "notebook": location.uri,
            "name": params.name,
            "type": reply["type"],
            "format": reply["format"],
        });
        for field in ["shape", "length", "dtype", "repr", "truncated"] {
            if let Some(value) = reply.get(field) {
                result[field] = value.clone();
            }
        }
        if let Some(Value::Array(columns)) = reply.get("columns") {
            result["columns"] = Value::Array(
                columns
                    .iter()
                    .map(|pair| json!({"name": pair[0], "dtype": pair[1]}))
                    .collect(),
            );
        }
        if let Some(data) = reply.get("image").and_then(Value::as_str) {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|_| {
                    error(
                        ErrorCode::InternalError,
                        "the kernel returned an unreadable image",
                    )
                })?;
            let image = condense::downscale_image(&bytes, 1_200).map_err(|_| {
                error(
                    ErrorCode::InternalError,
                    "the kernel returned an unreadable image",
                )
            })?;
            result["image"] = json!({"mimeType": image.format.mime(), "width": image.width, "height": image.height});
            images.push(ImageContent {
                data: base64::engine::general_purpose::STANDARD.encode(&image.bytes),
                mime_type: image.format.mime().to_owned(),
            });
        }
        Ok((result, images))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_paths() {
        assert_eq!(parse_path("df"), Some(vec![json!("df")]));
        assert_eq!(
            parse_path("model.coef_[0]['a']"),
            Some(vec![
                json!("model"),
                json!(["attr", "coef_"]),
                json!(["item", 0]),
                json!(["item", "a"])
            ])
        );
        for bad in [
            "",
            "1x",
            "df()",
            "a[b]",
            "a.",
            "a[0",
            "__import__('os').system('x')",
        ] {
            assert_eq!(parse_path(bad), None, "{bad}");
        }
    }
}
