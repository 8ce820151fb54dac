//! Reading tool arguments: some clients send booleans, numbers, arrays and objects as strings (a
//! known client bug). Where the input schema says a value is not a string, a string that parses
//! as the right type is taken as that value. Unknown keys are still rejected afterwards.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::results::ToolError;

fn schema_types(schema: &Map<String, Value>) -> Vec<&str> {
    let mut types = Vec::new();
    match schema.get("type") {
        Some(Value::String(single)) => types.push(single.as_str()),
        Some(Value::Array(many)) => types.extend(many.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(alternatives)) = schema.get(key) {
            for alternative in alternatives.iter().filter_map(Value::as_object) {
                types.extend(schema_types(alternative));
            }
        }
    }
    types
}

fn coerce_string(text: &str, types: &[&str]) -> Option<Value> {
    if types.contains(&"string") {
        return None;
    }
    let trimmed = text.trim();
    if types.contains(&"boolean") {
        match trimmed {
            "true" | "True" => return Some(Value::Bool(true)),
            "false" | "False" => return Some(Value::Bool(false)),
            _ => {}
        }
    }
    if (types.contains(&"integer") || types.contains(&"number"))
        && let Ok(number @ Value::Number(_)) = serde_json::from_str::<Value>(trimmed)
    {
        return Some(number);
    }
    if types.contains(&"array")
        && let Ok(array @ Value::Array(_)) = serde_json::from_str::<Value>(trimmed)
    {
        return Some(array);
    }
    if types.contains(&"object")
        && let Ok(object @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed)
    {
        return Some(object);
    }
    if types.contains(&"null") && trimmed == "null" {
        return Some(Value::Null);
    }
    None
}

/// Rewrites stringified values in `value` according to `schema`, recursively.
pub fn coerce(value: &mut Value, schema: &Map<String, Value>) {
    if let Value::String(text) = value
        && let Some(coerced) = coerce_string(text, &schema_types(schema))
    {
        *value = coerced;
    }
    let alternatives: Vec<&Map<String, Value>> = ["anyOf", "oneOf"]
        .iter()
        .filter_map(|key| schema.get(*key)?.as_array())
        .flatten()
        .filter_map(Value::as_object)
        .collect();
    match value {
        Value::Object(object) => {
            let mut property_schemas: Vec<&Map<String, Value>> = vec![schema];
            property_schemas.extend(alternatives.iter().copied());
            for candidate in property_schemas {
                if let Some(Value::Object(properties)) = candidate.get("properties") {
                    for (key, child) in object.iter_mut() {
                        if let Some(Value::Object(child_schema)) = properties.get(key) {
                            coerce(child, child_schema);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let mut item_schemas: Vec<&Map<String, Value>> = vec![schema];
            item_schemas.extend(alternatives.iter().copied());
            for candidate in item_schemas {
                if let Some(Value::Object(item_schema)) = candidate.get("items") {
                    for item in items.iter_mut() {
                        coerce(item, item_schema);
                    }
                }
            }
        }
        _ => {}
    }
}

fn invalid_arguments(problem: &str) -> ToolError {
    ToolError {
        code: crate::errors::ErrorCode::InvalidArguments,
        message: format!(
            "{}. Check the tool's input schema (tools/list); unknown or obsolete keys are rejected",
            shorten(problem, 600)
        ),
        details: None,
    }
}

/// `text` cut to about `limit` bytes, its middle replaced by a marker (serde quotes the values it
/// rejects, and a value may be megabytes long).
fn shorten(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut head = limit / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - limit / 4;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}[… {} bytes cut …]{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// How a JSON value's type is named in messages.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(number) if number.is_f64() => "a fractional number",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn has_type(value: &Value, types: &[&str]) -> bool {
    types.iter().any(|kind| match (*kind, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("string", Value::String(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(number)) => !number.is_f64(),
        _ => false,
    })
}

/// The schemas that may describe a value: `schema` and its `anyOf`/`oneOf` alternatives.
fn alternatives(schema: &Map<String, Value>) -> Vec<&Map<String, Value>> {
    let mut all = vec![schema];
    for key in ["anyOf", "oneOf"] {
        for alternative in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
        {
            all.extend(alternatives(alternative));
        }
    }
    all
}

/// Refuses strings longer than the schema's `maxLength`, anywhere in `value`.
fn check_lengths(value: &Value, schema: &Map<String, Value>, path: &str) -> Result<(), ToolError> {
    let schemas = alternatives(schema);
    match value {
        Value::String(text) => {
            let limit = schemas
                .iter()
                .filter_map(|candidate| candidate.get("maxLength")?.as_u64())
                .max();
            if let Some(limit) = limit
                && text.len() as u64 > limit
                && text.chars().count() as u64 > limit
            {
                return Err(invalid_arguments(&format!(
                    "`{path}` is {} characters long; it accepts at most {limit}",
                    text.chars().count()
                )));
            }
        }
        Value::Array(items) => {
            for candidate in &schemas {
                if let Some(Value::Object(item_schema)) = candidate.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        check_lengths(item, item_schema, &format!("{path}[{index}]"))?;
                    }
                }
            }
        }
        Value::Object(object) => {
            for candidate in &schemas {
                if let Some(Value::Object(properties)) = candidate.get("properties") {
                    for (key, child) in object {
                        if let Some(Value::Object(child_schema)) = properties.get(key) {
                            let child_path = if path.is_empty() {
                                key.clone()
                            } else {
                                format!("{path}.{key}")
                            };
                            check_lengths(child, child_schema, &child_path)?;
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether a schema's own `type` (not its alternatives') allows strings.
pub(crate) fn declares_string(schema: &Map<String, Value>) -> bool {
    match schema.get("type") {
        Some(Value::String(single)) => single == "string",
        Some(Value::Array(many)) => many.iter().any(|kind| kind == "string"),
        _ => false,
    }
}

/// The strings a schema allows when it allows only listed ones (`enum`/`const`); `None` when
/// it allows any string.
fn allowed_strings(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    let mut allowed = Vec::new();
    for candidate in alternatives(schema) {
        if let Some(Value::Array(values)) = candidate.get("enum") {
            allowed.extend(values.iter().filter_map(Value::as_str));
        } else if let Some(Value::String(value)) = candidate.get("const") {
            allowed.push(value.as_str());
        } else if declares_string(candidate) {
            return None;
        }
    }
    (!allowed.is_empty()).then_some(allowed)
}

/// Checks the top-level arguments against the schema before serde reads them, so that a
/// wrongly typed argument is named in the message (serde names only the type it expected).
fn check_arguments(arguments: &Value, schema: &Map<String, Value>) -> Result<(), ToolError> {
    let (Value::Object(object), Some(Value::Object(properties))) =
        (arguments, schema.get("properties"))
    else {
        return Ok(());
    };
    for (key, value) in object {
        let Some(Value::Object(property)) = properties.get(key) else {
            continue;
        };
        if let Value::String(text) = value
            && let Some(allowed) = allowed_strings(property)
            && !allowed.contains(&text.as_str())
        {
            return Err(invalid_arguments(&format!(
                "`{key}` must be one of `{}`, not `{}`",
                allowed.join("`, `"),
                shorten(text, 60)
            )));
        }
        let types = schema_types(property);
        if !types.is_empty() && !has_type(value, &types) {
            let mut expected: Vec<&str> = types.clone();
            expected.sort_unstable();
            expected.dedup();
            return Err(invalid_arguments(&format!(
                "`{key}` must be {}, not {}",
                expected.join(" or "),
                type_name(value)
            )));
        }
    }
    check_lengths(arguments, schema, "")
}

/// Parses tool arguments into `T`, coercing stringified values first. `None` arguments count as
/// an empty object.
pub fn parse_arguments<T: DeserializeOwned>(
    arguments: Option<Map<String, Value>>,
    input_schema: &Map<String, Value>,
) -> Result<T, ToolError> {
    let mut value = Value::Object(arguments.unwrap_or_default());
    coerce(&mut value, input_schema);
    check_arguments(&value, input_schema)?;
    serde_json::from_value(value).map_err(|error| invalid_arguments(&error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::params::{ReadNotebookParams, RunCellsParams};
    use serde_json::json;

    fn arguments(value: Value) -> Option<Map<String, Value>> {
        value.as_object().cloned()
    }

    #[test]
    fn stringified_values_are_understood() {
        let schema = (catalog::tool("run_cells").unwrap().input_schema)();
        let parsed: RunCellsParams = parse_arguments(
            arguments(
                json!({"notebookRef": "a.ipynb", "waitMs": "2500", "includeOutputs": "false",
                              "cellIds": "[0, \"load\"]"}),
            ),
            &schema,
        )
        .unwrap();
        assert_eq!(parsed.wait_ms, Some(2500.0));
        assert_eq!(parsed.include_outputs, Some(false));
        assert_eq!(parsed.cell_ids.unwrap().len(), 2);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_rejected() {
        let schema = (catalog::tool("read_notebook").unwrap().input_schema)();
        let error = parse_arguments::<ReadNotebookParams>(
            arguments(json!({"notebookRef": "a", "filePath": "x"})),
            &schema,
        )
        .unwrap_err();
        assert_eq!(error.code, crate::errors::ErrorCode::InvalidArguments);
        assert!(error.message.contains("filePath"), "{}", error.message);
        let error = parse_arguments::<ReadNotebookParams>(
            arguments(json!({"notebookRef": "a", "view": "everything"})),
            &schema,
        )
        .unwrap_err();
        assert!(error.message.contains("everything"), "{}", error.message);
        let missing =
            parse_arguments::<ReadNotebookParams>(arguments(json!({})), &schema).unwrap_err();
        assert!(
            missing.message.contains("notebookRef"),
            "{}",
            missing.message
        );
        let negative = parse_arguments::<ReadNotebookParams>(
            arguments(json!({"notebookRef": "a", "cellIds": [-1]})),
            &schema,
        )
        .unwrap_err();
        assert!(
            negative.message.contains("negative"),
            "{}",
            negative.message
        );
    }

    #[test]
    fn a_wrongly_typed_argument_is_named() {
        let schema = (catalog::tool("run_cells").unwrap().input_schema)();
        let error = parse_arguments::<RunCellsParams>(
            arguments(json!({"notebookRef": "a.ipynb", "waitMs": {"x": 1}})),
            &schema,
        )
        .unwrap_err();
        assert_eq!(error.code, crate::errors::ErrorCode::InvalidArguments);
        assert!(
            error
                .message
                .contains("`waitMs` must be null or number, not an object"),
            "{}",
            error.message
        );
    }

    #[test]
    fn an_unknown_enumerated_value_is_named() {
        let schema = (catalog::tool("read_notebook").unwrap().input_schema)();
        let error = parse_arguments::<ReadNotebookParams>(
            arguments(json!({"notebookRef": "a", "outputMode": "x".repeat(5000)})),
            &schema,
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains("`outputMode` must be one of `summary`, `text`, `full`"),
            "{}",
            error.message
        );
        assert!(error.message.len() < 400, "{}", error.message);
    }

    #[test]
    fn huge_names_are_refused_and_never_quoted() {
        let schema = (catalog::tool("edit_cells").unwrap().input_schema)();
        let huge = "x".repeat(1 << 20);
        let error = parse_arguments::<crate::params::EditCellsParams>(
            arguments(json!({"notebookRef": huge, "edits": []})),
            &schema,
        )
        .unwrap_err();
        assert!(
            error
                .message
                .contains("`notebookRef` is 1048576 characters long")
        );
        assert!(error.message.len() < 1_000);
        let error = parse_arguments::<crate::params::EditCellsParams>(
            arguments(json!({"notebookRef": "a", "edits": [{"editType": "edit", "cellId": huge}]})),
            &schema,
        )
        .unwrap_err();
        assert!(
            error.message.contains("`edits[0].cellId` is 1048576"),
            "{}",
            error.message
        );
        // Cell content is bounded only by the request size.
        let parsed = parse_arguments::<crate::params::EditCellsParams>(
            arguments(json!({"notebookRef": "a", "edits": [
                {"editType": "insert", "cellId": "BOTTOM", "newCode": huge}
            ]})),
            &schema,
        )
        .unwrap();
        assert_eq!(parsed.edits[0].new_code.as_ref().unwrap().len(), 1 << 20);
        // A rejected value is quoted shortly.
        let error = parse_arguments::<crate::params::EditCellsParams>(
            arguments(json!({"notebookRef": "a", "edits": [{"editType": huge}]})),
            &schema,
        )
        .unwrap_err();
        assert!(error.message.len() < 1_000, "{}", error.message.len());
    }
}
