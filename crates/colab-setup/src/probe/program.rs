//! The kernel's side of the proof: the Python program that writes or removes the probe, and the
//! parsing of its one result line and bounded diagnostics.

use serde_json::Value;

use crate::names::Nonce;

/// The kernel's bounded diagnostics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Diagnostics {
    pub(super) pid: Option<u64>,
    pub(super) python_version: Option<String>,
    pub(super) system: Option<String>,
    pub(super) content_directory: Option<bool>,
    pub(super) colab_module: Option<bool>,
    pub(super) release_tag: Option<String>,
}

/// The marker that starts the kernel program's one result line.
pub const CHECK_MARKER: &str = "__JUPYTER_MCP_COLAB_CHECK__";

/// Stdout longer than this is not a probe reply.
pub(super) const MAX_STDOUT_BYTES: usize = 64 * 1024;

/// The kernel program. It runs in a fresh globals dict through `exec`, so it leaves no name in
/// the user's namespace, and it reports exceptions by class name only.
pub(super) const PROGRAM: &str = r#"import json, os, platform
result = {"op": OP}
try:
    if OP == "write":
        import importlib.util
        result["pid"] = os.getpid()
        result["python"] = platform.python_version()[:32]
        result["system"] = platform.system()[:32]
        result["content"] = os.path.isdir(os.path.dirname(PROBE))
        try:
            result["colab"] = importlib.util.find_spec("google.colab") is not None
        except Exception:
            result["colab"] = False
        tag = os.environ.get("COLAB_RELEASE_TAG")
        result["releaseTag"] = tag[:64] if isinstance(tag, str) else None
        try:
            descriptor = os.open(PROBE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except Exception as error:
            result["created"] = False
            result["error"] = type(error).__name__
        else:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(NONCE)
            result["created"] = True
    else:
        try:
            with open(PROBE) as handle:
                ours = handle.read(len(NONCE) + 1) == NONCE
        except FileNotFoundError:
            ours = None
        if ours:
            os.remove(PROBE)
        result["removed"] = bool(ours)
        result["foreign"] = ours is False
        result["absent"] = not os.path.lexists(PROBE)
except Exception as error:
    result["error"] = type(error).__name__
print(MARKER + json.dumps(result))
"#;

/// Which kernel program to render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KernelOp {
    Write,
    Remove,
}

impl KernelOp {
    fn as_str(self) -> &'static str {
        match self {
            KernelOp::Write => "write",
            KernelOp::Remove => "remove",
        }
    }
}

/// A Python string literal for `text`. JSON string syntax is valid Python for these ASCII
/// values, and `serde_json` escapes quotes, backslashes and control characters.
pub(super) fn python_literal(text: &str) -> String {
    Value::from(text).to_string()
}

pub(super) fn kernel_code(op: KernelOp, nonce: &Nonce) -> String {
    format!(
        "exec({program}, {{\"__name__\": \"__jupyter_mcp_colab_check__\", \"OP\": {op}, \
         \"PROBE\": {probe}, \"NONCE\": {nonce}, \"MARKER\": {marker}}})\n",
        program = python_literal(PROGRAM),
        op = python_literal(op.as_str()),
        probe = python_literal(&nonce.kernel_path()),
        nonce = python_literal(nonce.as_str()),
        marker = python_literal(&format!("{CHECK_MARKER}{}:", nonce.as_str())),
    )
}

/// Finds the one result line for this nonce and operation and parses its JSON object.
pub(super) fn parse_kernel_reply(stdout: &str, nonce: &Nonce, op: KernelOp) -> Option<Value> {
    if stdout.len() > MAX_STDOUT_BYTES {
        return None;
    }
    let marker = format!("{CHECK_MARKER}{}:", nonce.as_str());
    let mut lines = stdout
        .lines()
        .filter_map(|line| line.strip_prefix(marker.as_str()));
    let line = lines.next()?;
    if lines.next().is_some() {
        return None;
    }
    let value: Value = serde_json::from_str(line).ok()?;
    (value.get("op")?.as_str()? == op.as_str() && value.is_object()).then_some(value)
}

/// A bounded printable-ASCII string field.
pub(super) fn bounded_text(value: &Value, key: &str, max: usize) -> Option<String> {
    let text = value.get(key)?.as_str()?;
    (text.len() <= max && text.bytes().all(|byte| (0x20..0x7f).contains(&byte)))
        .then(|| text.to_owned())
}

pub(super) fn parse_diagnostics(value: &Value) -> Diagnostics {
    Diagnostics {
        pid: value
            .get("pid")
            .and_then(Value::as_u64)
            .filter(|&pid| pid > 0),
        python_version: bounded_text(value, "python", 32),
        system: bounded_text(value, "system", 32),
        content_directory: value.get("content").and_then(Value::as_bool),
        colab_module: value.get("colab").and_then(Value::as_bool),
        release_tag: bounded_text(value, "releaseTag", 64),
    }
}

/// Why diagnostics fail, or `None` when they pass.
pub(super) fn diagnostics_problem(diagnostics: &Diagnostics) -> Option<&'static str> {
    if diagnostics.pid.is_none() {
        return Some("no_process_id");
    }
    if diagnostics.system.as_deref() != Some("Linux") {
        return Some("not_linux");
    }
    let python3 = diagnostics
        .python_version
        .as_deref()
        .is_some_and(|version| {
            let mut parts = version.split('.');
            parts.next() == Some("3")
                && parts.next().is_some_and(|minor| {
                    !minor.is_empty() && minor.bytes().all(|b| b.is_ascii_digit())
                })
        });
    if !python3 {
        return Some("not_python3");
    }
    if diagnostics.content_directory != Some(true) {
        return Some("no_content_directory");
    }
    if diagnostics.colab_module != Some(true) {
        return Some("no_colab_module");
    }
    None
}
