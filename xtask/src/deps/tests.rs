use serde_json::{Value, json};

use super::source::{ModuleGraph, production_lines, tool_name_literals};
use super::*;

/// A normal dependency: its name, the features asked for, whether with the default ones.
type FakeDependency<'a> = (&'a str, &'a [&'a str], bool);

/// A member: its name, its folder, its normal dependencies.
type FakeMember<'a> = (&'a str, &'a str, &'a [FakeDependency<'a>]);

/// A `cargo metadata --no-deps` answer for these members.
fn metadata(members: &[FakeMember<'_>]) -> Value {
    let packages: Vec<Value> = members
        .iter()
        .map(|(name, folder, dependencies)| {
            let dependencies: Vec<Value> = dependencies
                .iter()
                .map(|(dependency, features, default)| {
                    json!({
                        "name": dependency,
                        "kind": null,
                        "features": features,
                        "uses_default_features": default,
                    })
                })
                .chain(std::iter::once(json!({
                    // Dev dependencies are not the layers.
                    "name": "tokio", "kind": "dev", "features": [], "uses_default_features": true,
                })))
                .collect();
            json!({
                "id": format!("path+file:///w/{folder}#{name}@0.1.0"),
                "name": name,
                "manifest_path": format!("/w/{folder}/Cargo.toml"),
                "dependencies": dependencies,
            })
        })
        .collect();
    let ids: Vec<Value> = packages
        .iter()
        .map(|package| package["id"].clone())
        .collect();
    json!({ "workspace_root": "/w", "workspace_members": ids, "packages": packages })
}

/// The rules of a small workspace, `core` allowed `core_edges`.
const fn small_rules(core_edges: &'static [Edge]) -> [CrateRule; 4] {
    [
        CrateRule {
            name: "model",
            workspace: NOTHING,
            external: NO_IO,
        },
        CrateRule {
            name: "core",
            workspace: Some(core_edges),
            external: Some(&["tokio"]),
        },
        CrateRule {
            name: "kernels",
            workspace: NOTHING,
            external: Some(&["tokio", "hyper"]),
        },
        CrateRule {
            name: "tests",
            workspace: None,
            external: None,
        },
    ]
}

const SMALL_RULES: &[CrateRule] = &small_rules(&[to("model"), with("kernels", &["remote"])]);

const SMALL_MAP: &str = "\
# Architecture

## Code map

| Crate | Layer | Job | May depend on | Must never know |
|---|---|---|---|---|
| `crates/model` | 1 | The model | serde | tokio |
| `crates/core` | 2 | The tools | model, kernels (`remote`), tokio (rt) | hyper |
| `crates/kernels` | 3 | Kernels | hyper; tokio | MCP |
| `tests` | — | End to end | everything | — |

## Invariants

| `crates/elsewhere` | not | a | code map | row |
";

fn workspace(extra: &[FakeDependency<'_>]) -> Workspace {
    let mut core: Vec<FakeDependency<'_>> = vec![
        ("model", &[], true),
        ("kernels", &["remote"], false),
        ("tokio", &["rt"], true),
        ("serde_json", &[], true),
    ];
    core.extend_from_slice(extra);
    let members: Vec<FakeMember<'_>> = vec![
        ("model", "crates/model", &[("serde", &[], true)]),
        ("core", "crates/core", &core),
        (
            "kernels",
            "crates/kernels",
            &[("tokio", &[], true), ("hyper", &[], true)],
        ),
        (
            "tests",
            "tests",
            &[
                ("core", &[], true),
                ("rmcp", &[], true),
                ("reqwest", &[], true),
            ],
        ),
    ];
    Workspace::from_metadata(&metadata(&members)).expect("metadata")
}

/// Checks that [`check_edges`] finds one problem in `workspace` under [`SMALL_RULES`], starting
/// with `start`; the problem.
fn one_edge_problem(workspace: &Workspace, start: &str) -> String {
    let problems = check_edges(workspace, SMALL_RULES);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with(start), "{problems:?}");
    problems[0].clone()
}

#[test]
fn the_edges_on_the_list_pass() {
    let workspace = workspace(&[]);
    assert_eq!(check_edges(&workspace, SMALL_RULES), Vec::<String>::new());
    assert_eq!(
        check_code_map(SMALL_MAP, &workspace, SMALL_RULES),
        Vec::<String>::new()
    );
}

#[test]
fn a_new_workspace_edge_fails_until_the_list_and_the_code_map_name_it() {
    let workspace = workspace(&[("tests", &[], true)]);
    let problem = one_edge_problem(&workspace, "core depends on tests");
    assert!(problem.contains("ARCHITECTURE.md's code map"), "{problem}");

    const RULES_WITH_THE_EDGE: [CrateRule; 4] =
        small_rules(&[to("model"), with("kernels", &["remote"]), to("tests")]);
    let rules = RULES_WITH_THE_EDGE;
    assert_eq!(check_edges(&workspace, &rules), Vec::<String>::new());
    // The allow-list now says more than the code map: that fails too, until the row says it.
    let problems = check_code_map(SMALL_MAP, &workspace, &rules);
    assert_eq!(
        problems,
        ["core: RULES allow tests but its code map row does not name it in \"May depend on\""]
    );
    let map = SMALL_MAP.replace(
        "model, kernels (`remote`)",
        "model, kernels (`remote`), tests",
    );
    assert_eq!(
        check_code_map(&map, &workspace, &rules),
        Vec::<String>::new()
    );
}

#[test]
fn a_code_map_row_naming_more_than_the_list_fails() {
    let workspace = workspace(&[]);
    let map = SMALL_MAP.replace("| serde |", "| serde, kernels, hyper |");
    let problems = check_code_map(&map, &workspace, SMALL_RULES);
    assert_eq!(
        problems,
        [
            "model: its code map row names kernels in \"May depend on\" but RULES do not allow it",
            "model: its code map row names hyper in \"May depend on\" but RULES do not allow it",
        ]
    );
}

#[test]
fn features_and_io_crates_beyond_the_list_fail() {
    let workspace = workspace(&[("hyper", &[], true)]);
    one_edge_problem(&workspace, "core depends on hyper directly");

    let members: Vec<FakeMember<'_>> = vec![
        ("model", "crates/model", &[]),
        (
            "core",
            "crates/core",
            &[
                ("model", &[], true),
                ("kernels", &["local", "remote"], false),
            ],
        ),
        ("kernels", "crates/kernels", &[]),
    ];
    let workspace = Workspace::from_metadata(&metadata(&members)).expect("metadata");
    // Only the kernels feature is new.
    one_edge_problem(&workspace, "core asks kernels for the features local,");
}

#[test]
fn a_crate_without_a_rule_or_a_row_fails() {
    let members: Vec<FakeMember<'_>> = vec![
        ("model", "crates/model", &[]),
        ("stray", "crates/stray", &[]),
    ];
    let workspace = Workspace::from_metadata(&metadata(&members)).expect("metadata");
    one_edge_problem(&workspace, "stray is a workspace crate without a rule");

    let rules = [CrateRule {
        name: "stray",
        workspace: NOTHING,
        external: NO_IO,
    }];
    assert_eq!(
        check_code_map(SMALL_MAP, &workspace, &rules),
        ["stray (crates/stray) has no row in ARCHITECTURE.md's code map"]
    );
}

/// The folder of a real rule's crate.
fn folder_of(name: &str) -> String {
    match name {
        "xtask" => "xtask".to_owned(),
        "jupyter-mcp-tests" => "tests".to_owned(),
        "jupyter-mcp-bench" => "bench".to_owned(),
        "embedded-host" => "examples/embedded-host".to_owned(),
        name => format!("crates/{name}"),
    }
}

#[test]
fn the_real_allow_list_matches_the_real_code_map() {
    let architecture =
        std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let rows = code_map_rows(&architecture);
    // Every rule as a member of one workspace, so that each is compared with its row (the
    // bench crate's row comes with the crate).
    let members: Vec<Member> = RULES
        .iter()
        .map(|rule| Member {
            name: rule.name.to_owned(),
            folder: folder_of(rule.name),
            dependencies: Vec::new(),
        })
        .filter(|member| member.name != "jupyter-mcp-bench" || rows.contains_key("bench"))
        .collect();
    let workspace = Workspace { members };
    assert_eq!(
        check_code_map(&architecture, &workspace, RULES),
        Vec::<String>::new()
    );
}

#[test]
fn production_lines_leave_out_test_items() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() {}\n}\nfn c() {}\n#[cfg(test)]\nmod more;\n";
    let lines: Vec<&str> = production_lines(text)
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    assert_eq!(lines, ["fn a() {}", "fn c() {}"]);
}

fn graph(files: &[(&str, &str)]) -> Vec<Vec<String>> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
        .collect();
    ModuleGraph::new(&files).cycles()
}

#[test]
fn module_cycles_follow_crate_super_and_re_exports() {
    let cycles = graph(&[
        (
            "lib.rs",
            "mod a;\nmod b;\nmod c;\nmod d;\npub use a::Alpha;\npub use d::{Delta, inner::Deep};\npub use mcp_contract::refs;\n",
        ),
        // `crate::Alpha` is a's, through lib.rs's re-export: lib.rs is in no cycle.
        ("a.rs", "use crate::b::Beta;\npub struct Alpha;\n"),
        ("b.rs", "use crate::{c::Gamma, refs};\npub struct Beta;\n"),
        (
            "c.rs",
            "pub struct Gamma(crate::Alpha);\n// crate::d::Delta in a comment\n",
        ),
        ("d.rs", "pub mod inner;\npub struct Delta;\n"),
        (
            "d/inner.rs",
            "use super::Delta;\npub struct Deep;\nfn f() { let _ = \"crate::a::Alpha\"; }\n",
        ),
    ]);
    assert_eq!(cycles, [["a.rs", "b.rs", "c.rs"]]);
}

#[test]
fn a_cycle_through_a_test_module_does_not_count() {
    let cycles = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n",
        ),
    ]);
    assert_eq!(cycles, Vec::<Vec<String>>::new());
    let cycles = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "pub struct B(super::a::A);\n"),
    ]);
    assert_eq!(cycles, [["a.rs", "b.rs"]]);
}

#[test]
fn tool_names_as_strings_are_found_in_code_only() {
    let text = "\
fn dispatch(name: &str) {
    if name == \"run_cells\" {}
    // \"read_notebook\" in a comment
    let message = \"run_cells_later is another word\";
}
#[cfg(test)]
mod tests {
    const CALL: &str = \"run_cells\";
}
#![doc = r#\"
tools.call(\"run_cells\", arguments)
\"#]
const LATER: &str = \"read_notebook\";
";
    assert_eq!(
        tool_name_literals(text, &["run_cells", "read_notebook"]),
        [(1, "run_cells"), (12, "read_notebook")]
    );
}
