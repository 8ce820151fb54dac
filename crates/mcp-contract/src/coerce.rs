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
    for alternative in branches(schema) {
        types.extend(schema_types(alternative));
    }
    types
}

/// The `anyOf` and `oneOf` alternatives of `schema` (not theirs).
fn branches(schema: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|key| schema.get(key)?.as_array())
        .flatten()
        .filter_map(Value::as_object)
}

/// The `anyOf` and `oneOf` alternatives of `schema` (not theirs), to change.
pub(crate) fn branches_mut(schema: &mut Map<String, Value>) -> impl Iterator<Item = &mut Value> {
    schema
        .iter_mut()
        .filter(|(key, _)| *key == "anyOf" || *key == "oneOf")
        .filter_map(|(_, alternatives)| alternatives.as_array_mut())
        .flatten()
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
    let alternatives: Vec<&Map<String, Value>> = branches(schema).collect();
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
    for alternative in branches(schema) {
        all.extend(alternatives(alternative));
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
        assert_eq!(parsed.wait_ms, Some(crate::params::WaitMs::new(2500.0)));
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

/// Property tests of [`parse_arguments`] against what clients send: valid arguments for a few
/// tools, stringified the way buggy clients do, or spoilt by an unknown key or a wrong type.
/// The kind of each argument is written out here rather than read from the schemas, so that
/// these tests do not share their idea of the schema with the code they test.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;
    use serde::de::DeserializeOwned;
    use serde_json::{Map, Value, json};
    use std::fmt::Debug;

    use super::parse_arguments;
    use crate::catalog;
    use crate::errors::ErrorCode;
    use crate::params::{EditCellsParams, GetExecutionParams, ReadNotebookParams, RunCellsParams};

    /// What an argument holds, as far as its JSON type goes.
    #[derive(Debug, Clone, Copy)]
    enum Kind {
        /// Any string.
        Text,
        /// One of these strings.
        Word(&'static [&'static str]),
        Flag,
        /// Any JSON number (an `f64` field).
        Number,
        /// A non-negative whole number (a `u64` field).
        Count,
        /// An array of cell references (numbers or strings).
        CellRefs,
        /// A cell reference: a number or a string.
        CellRef,
        /// A JSON object of anything.
        Object,
        /// The edits of `edit_cells`: an array of objects of [`EDIT`] fields.
        Edits,
        /// `edit_cells`' `run`: a boolean or the word `stale`.
        FlagOrStale,
    }

    impl Kind {
        /// Whether a client could send this argument's value as a string that must be read as
        /// the value itself. Strings stay strings, and a cell reference may be a string.
        /// `FlagOrStale` is left out: its schema admits a string (`"stale"`), so `"true"` is
        /// not coerced and is refused as an unknown word.
        fn stringifiable(self) -> bool {
            matches!(
                self,
                Kind::Flag
                    | Kind::Number
                    | Kind::Count
                    | Kind::CellRefs
                    | Kind::Object
                    | Kind::Edits
            )
        }
    }

    /// One argument of a tool.
    struct Field {
        key: &'static str,
        kind: Kind,
        required: bool,
    }

    const fn required(key: &'static str, kind: Kind) -> Field {
        Field {
            key,
            kind,
            required: true,
        }
    }

    const fn optional(key: &'static str, kind: Kind) -> Field {
        Field {
            key,
            kind,
            required: false,
        }
    }

    const VIEWS: &[&str] = &["outline", "source", "outputs", "all", "lint"];
    const OUTPUT_MODES: &[&str] = &["summary", "text", "full"];
    const EDIT_TYPES: &[&str] = &["insert", "edit", "delete", "replace"];

    const READ_NOTEBOOK: &[Field] = &[
        required("notebookRef", Kind::Text),
        optional("cellIds", Kind::CellRefs),
        optional("view", Kind::Word(VIEWS)),
        optional("startLine", Kind::Count),
        optional("endLine", Kind::Count),
        optional("maxSourceChars", Kind::Count),
        optional("outputMode", Kind::Word(OUTPUT_MODES)),
        optional("maxOutputChars", Kind::Number),
        optional("includeImages", Kind::Flag),
        optional("cellOffset", Kind::Count),
        optional("maxResponseChars", Kind::Count),
    ];

    const RUN_CELLS: &[Field] = &[
        required("notebookRef", Kind::Text),
        optional("cellIds", Kind::CellRefs),
        optional("freshDeps", Kind::Flag),
        optional("waitMs", Kind::Number),
        optional("includeOutputs", Kind::Flag),
        optional("outputMode", Kind::Word(OUTPUT_MODES)),
        optional("maxOutputChars", Kind::Number),
        optional("includeImages", Kind::Flag),
        optional("idempotencyKey", Kind::Text),
    ];

    const GET_EXECUTION: &[Field] = &[
        required("notebookRef", Kind::Text),
        optional("executionId", Kind::Text),
        optional("waitMs", Kind::Number),
        optional("includeOutputs", Kind::Flag),
        optional("outputMode", Kind::Word(OUTPUT_MODES)),
        optional("maxOutputChars", Kind::Number),
        optional("includeImages", Kind::Flag),
    ];

    const EDIT_CELLS: &[Field] = &[
        required("notebookRef", Kind::Text),
        required("edits", Kind::Edits),
        optional("run", Kind::FlagOrStale),
        optional("waitMs", Kind::Number),
    ];

    /// The fields of one edit of `edit_cells`.
    const EDIT: &[Field] = &[
        required("editType", Kind::Word(EDIT_TYPES)),
        optional("cellId", Kind::CellRef),
        optional("newCode", Kind::Text),
        optional("oldText", Kind::Text),
        optional("expectedRev", Kind::Text),
        optional("language", Kind::Text),
        optional("metadata", Kind::Object),
        optional("name", Kind::Text),
        optional("run", Kind::Flag),
    ];

    fn text() -> BoxedStrategy<Value> {
        "[a-zA-Z0-9_./ :-]{0,16}".prop_map(Value::from).boxed()
    }

    fn cell_ref() -> BoxedStrategy<Value> {
        prop_oneof![any::<u64>().prop_map(Value::from), text()].boxed()
    }

    fn scalar() -> BoxedStrategy<Value> {
        prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            text(),
            Just(Value::Null),
        ]
        .boxed()
    }

    fn object_of(fields: &'static [Field]) -> BoxedStrategy<Map<String, Value>> {
        let values: Vec<BoxedStrategy<Option<Value>>> = fields
            .iter()
            .map(|field| {
                let value = valid_value(field.kind);
                if field.required {
                    value.prop_map(Some).boxed()
                } else {
                    proptest::option::of(value).boxed()
                }
            })
            .collect();
        values
            .prop_map(move |values| {
                fields
                    .iter()
                    .zip(values)
                    .filter_map(|(field, value)| Some((field.key.to_owned(), value?)))
                    .collect()
            })
            .boxed()
    }

    fn valid_value(kind: Kind) -> BoxedStrategy<Value> {
        match kind {
            Kind::Text => text(),
            Kind::Word(words) => proptest::sample::select(words)
                .prop_map(Value::from)
                .boxed(),
            Kind::Flag => any::<bool>().prop_map(Value::from).boxed(),
            Kind::Number => prop_oneof![
                (0u64..10_000_000).prop_map(Value::from),
                any::<f64>()
                    .prop_filter("JSON numbers are finite", |number| number.is_finite())
                    .prop_map(Value::from),
            ]
            .boxed(),
            Kind::Count => any::<u64>().prop_map(Value::from).boxed(),
            Kind::CellRefs => proptest::collection::vec(cell_ref(), 0..4)
                .prop_map(Value::from)
                .boxed(),
            Kind::CellRef => cell_ref(),
            Kind::Object => proptest::collection::btree_map("[a-z]{1,6}", scalar(), 0..3)
                .prop_map(|map| Value::Object(map.into_iter().collect()))
                .boxed(),
            Kind::Edits => proptest::collection::vec(object_of(EDIT), 0..3)
                .prop_map(|edits| Value::from_iter(edits.into_iter().map(Value::Object)))
                .boxed(),
            Kind::FlagOrStale => prop_oneof![
                any::<bool>().prop_map(Value::from),
                Just(Value::from("stale")),
            ]
            .boxed(),
        }
    }

    /// Values of a JSON type `kind` does not accept. Strings start with `x`, so that none is
    /// the string form of a number, a boolean, an array, an object or `null`.
    fn wrong_values(kind: Kind, required: bool) -> Vec<Value> {
        let flag = json!(true);
        let number = json!(7);
        let fraction = json!(2.5);
        let word = json!("xyz");
        let array = json!([]);
        let object = json!({"x": 1});
        let mut wrong = match kind {
            Kind::Text | Kind::CellRef => vec![flag, number, array, object],
            Kind::Word(_) => vec![flag, number, array, object, word],
            Kind::Flag => vec![number, array, object, word],
            Kind::Number => vec![flag, array, object, word],
            Kind::Count => vec![flag, fraction, array, object, word],
            Kind::CellRefs | Kind::Edits => vec![flag, number, object, word],
            Kind::Object => vec![flag, number, array, word],
            Kind::FlagOrStale => vec![number, array, object, word],
        };
        if required {
            wrong.push(Value::Null);
        }
        wrong
    }

    /// `value` as a buggy client sends it: its JSON text, sometimes padded with spaces, and
    /// booleans sometimes capitalised as Python prints them.
    fn stringified(value: &Value, choice: u8) -> Value {
        let text = match value {
            Value::Bool(flag) if choice & 2 != 0 => if *flag { "True" } else { "False" }.to_owned(),
            other => other.to_string(),
        };
        if choice & 4 != 0 {
            Value::from(format!(" {text}\n"))
        } else {
            Value::from(text)
        }
    }

    /// Stringifies the values of `object` that `choices` pick, the fields of nested edits
    /// first (so that an edits array may be stringified with stringified fields inside).
    fn stringify_some(
        object: &mut Map<String, Value>,
        fields: &[Field],
        choices: &mut impl Iterator<Item = u8>,
    ) {
        for field in fields {
            let Some(value) = object.get_mut(field.key) else {
                continue;
            };
            if let (Kind::Edits, Value::Array(edits)) = (field.kind, &mut *value) {
                for edit in edits.iter_mut().filter_map(Value::as_object_mut) {
                    stringify_some(edit, EDIT, choices);
                }
            }
            let choice = choices.next().expect("choices cycle");
            if field.kind.stringifiable() && choice & 1 != 0 {
                *value = stringified(value, choice);
            }
        }
    }

    fn schema_of(tool: &str) -> Map<String, Value> {
        (catalog::tool(tool)
            .expect("a tool of the catalogue")
            .input_schema)()
    }

    /// Checks all three properties for one tool's arguments.
    fn check_tool<T: DeserializeOwned + PartialEq + Debug>(
        tool: &str,
        fields: &[Field],
        arguments: Map<String, Value>,
        choices: Vec<u8>,
        unknown_key: &str,
        spoilt: prop::sample::Index,
    ) -> Result<(), TestCaseError> {
        let schema = schema_of(tool);
        let expected: T = parse_arguments(Some(arguments.clone()), &schema)
            .map_err(|error| TestCaseError::fail(format!("valid arguments refused: {error:?}")))?;

        let mut stringy = arguments.clone();
        stringify_some(&mut stringy, fields, &mut choices.iter().copied().cycle());
        let parsed: T = parse_arguments(Some(stringy.clone()), &schema).map_err(|error| {
            TestCaseError::fail(format!("stringified {stringy:?} refused: {error:?}"))
        })?;
        prop_assert_eq!(&parsed, &expected, "stringified: {:?}", stringy);

        if !fields.iter().any(|field| field.key == unknown_key) {
            let mut unknown = arguments.clone();
            unknown.insert(unknown_key.to_owned(), json!(1));
            let error = parse_arguments::<T>(Some(unknown), &schema)
                .expect_err("an unknown key is refused");
            prop_assert_eq!(error.code, ErrorCode::InvalidArguments);
            prop_assert!(
                error.message.contains(&format!("`{unknown_key}`")),
                "{}",
                error.message
            );
        }

        let field = spoilt.get(fields);
        let wrong_choices = wrong_values(field.kind, field.required);
        let wrong = spoilt.get(&wrong_choices);
        let mut spoilt_arguments = arguments;
        spoilt_arguments.insert(field.key.to_owned(), wrong.clone());
        let error = parse_arguments::<T>(Some(spoilt_arguments), &schema)
            .expect_err("a wrongly typed value is refused");
        prop_assert_eq!(error.code, ErrorCode::InvalidArguments);
        prop_assert!(
            error.message.contains(&format!("`{}`", field.key)),
            "{} = {}: {}",
            field.key,
            wrong,
            error.message
        );
        Ok(())
    }

    /// Keys no tool here knows: identifiers, like the obsolete or misspelt keys clients send.
    fn unknown_key() -> impl Strategy<Value = String> {
        "[a-zA-Z][a-zA-Z0-9_]{0,15}"
    }

    fn choices() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 1..48)
    }

    #[test]
    fn the_kinds_here_cover_every_argument_of_the_schemas() {
        for (tool, fields) in [
            ("read_notebook", READ_NOTEBOOK),
            ("run_cells", RUN_CELLS),
            ("get_execution", GET_EXECUTION),
            ("edit_cells", EDIT_CELLS),
        ] {
            let schema = Value::Object(schema_of(tool));
            assert_eq!(keys_of(&schema["properties"]), field_keys(fields), "{tool}");
        }
        let edit_schema = &schema_of("edit_cells")["properties"]["edits"]["items"]["properties"];
        assert_eq!(keys_of(edit_schema), field_keys(EDIT));
    }

    /// The keys of a schema's `properties`, sorted.
    fn keys_of(properties: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = properties
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    /// The keys of `fields`, sorted.
    fn field_keys(fields: &[Field]) -> Vec<&'static str> {
        let mut keys: Vec<&str> = fields.iter().map(|field| field.key).collect();
        keys.sort_unstable();
        keys
    }

    /// One property test per tool, each checking [`check_tool`] on that tool's arguments.
    macro_rules! tool_argument_tests {
        ($($test:ident: $params:ty = ($tool:literal, $fields:ident);)*) => {
            proptest! {
                $(
                    #[test]
                    fn $test(
                        arguments in object_of($fields),
                        choices in choices(),
                        unknown in unknown_key(),
                        spoilt in any::<prop::sample::Index>(),
                    ) {
                        check_tool::<$params>($tool, $fields, arguments, choices, &unknown, spoilt)?;
                    }
                )*
            }
        };
    }

    tool_argument_tests! {
        read_notebook_arguments: ReadNotebookParams = ("read_notebook", READ_NOTEBOOK);
        run_cells_arguments: RunCellsParams = ("run_cells", RUN_CELLS);
        get_execution_arguments: GetExecutionParams = ("get_execution", GET_EXECUTION);
        edit_cells_arguments: EditCellsParams = ("edit_cells", EDIT_CELLS);
    }

    proptest! {
        /// An unknown key inside one edit is refused and named too.
        #[test]
        fn an_unknown_key_inside_an_edit_is_named(
            mut arguments in object_of(EDIT_CELLS),
            edit in object_of(EDIT),
            unknown in unknown_key(),
        ) {
            prop_assume!(!EDIT.iter().any(|field| field.key == unknown));
            let mut edit = edit;
            edit.insert(unknown.clone(), json!(true));
            arguments.insert("edits".to_owned(), json!([edit]));
            let error = parse_arguments::<EditCellsParams>(Some(arguments), &schema_of("edit_cells"))
                .expect_err("an unknown key in an edit is refused");
            prop_assert_eq!(error.code, ErrorCode::InvalidArguments);
            prop_assert!(error.message.contains(&format!("`{unknown}`")), "{}", error.message);
        }
    }
}
