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

/// Parses tool arguments into `T`, coercing stringified values first. `None` arguments count as
/// an empty object.
pub fn parse_arguments<T: DeserializeOwned>(
    arguments: Option<Map<String, Value>>,
    input_schema: &Map<String, Value>,
) -> Result<T, ToolError> {
    let mut value = Value::Object(arguments.unwrap_or_default());
    coerce(&mut value, input_schema);
    serde_json::from_value(value).map_err(|error| ToolError {
        code: "invalid_arguments".to_owned(),
        message: format!(
            "{error}. Check the tool's input schema (tools/list); unknown or obsolete keys are rejected"
        ),
        details: None,
    })
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
        assert_eq!(error.code, "invalid_arguments");
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
}
