use super::*;
use mcp_contract::ErrorCode;
use mcp_contract::refs::notebook_ref;
use proptest::prelude::*;

fn host(window_id: &str, label: &str, uris: &[&str]) -> HostListing {
    HostListing {
        window_id: window_id.to_owned(),
        label: label.to_owned(),
        available: true,
        notebooks: uris
            .iter()
            .map(|uri| ListedNotebook {
                notebook_ref: notebook_ref(window_id, uri),
                uri: (*uri).to_owned(),
                path: uri.rsplit('/').next().map(str::to_owned),
            })
            .collect(),
    }
}

fn arguments(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

#[test]
fn route_kinds_follow_the_arguments() {
    assert_eq!(
        route_kind("list_notebooks", &Map::new()),
        RouteKind::ListAll
    );
    assert_eq!(
        route_kind(
            "read_notebook",
            &arguments(json!({"notebookRef": "a.ipynb"}))
        ),
        RouteKind::Notebook("a.ipynb".to_owned())
    );
    assert_eq!(
        route_kind(
            "save_notebooks",
            &arguments(json!({"notebookRefs": ["a", "b"]}))
        ),
        RouteKind::Batch(vec!["a".to_owned(), "b".to_owned()])
    );
    // Malformed shapes go to the broker's own window, which reports them.
    assert_eq!(
        route_kind("save_notebooks", &arguments(json!({"notebookRefs": []}))),
        RouteKind::Window(None)
    );
    assert_eq!(
        route_kind("save_notebooks", &arguments(json!({"notebookRefs": [1]}))),
        RouteKind::Window(None)
    );
    assert_eq!(
        route_kind("read_notebook", &arguments(json!({"notebookRef": 3}))),
        RouteKind::Window(None)
    );
    assert_eq!(
        route_kind(
            "create_notebook",
            &arguments(json!({"title": "t", "windowId": "w2"}))
        ),
        RouteKind::Window(Some("w2".to_owned()))
    );
    assert_eq!(
        route_kind("open_notebooks", &arguments(json!({"uris": ["x"]}))),
        RouteKind::Window(None)
    );
}

#[test]
fn timeouts_follow_the_wait_budget() {
    let wait = |tool: &str, value: Value| invoke_timeout(tool, &arguments(value));
    assert_eq!(
        wait("run_cells", json!({"waitMs": 0})),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        wait("get_execution", json!({"waitMs": 3_600_000})),
        Some(Duration::from_millis(3_601_500))
    );
    assert_eq!(
        wait("edit_cells", json!({"waitMs": 250.7})),
        Some(Duration::from_millis(1750))
    );
    assert_eq!(wait("run_cells", json!({})), None);
    assert_eq!(wait("run_cells", json!({"waitMs": -1})), None);
    assert_eq!(wait("read_notebook", json!({"waitMs": 10})), None);
    assert_eq!(
        wait("run_cells", json!({"waitMs": 1e300})),
        Some(Duration::from_millis(u64::MAX))
    );
}

#[test]
fn references_resolve_with_the_reference_errors() {
    let hosts = [
        host(
            "w1",
            "alpha",
            &["file:///a/x.ipynb", "file:///shared.ipynb"],
        ),
        host("w2", "beta", &["file:///b/y.ipynb", "file:///shared.ipynb"]),
    ];
    let x_ref = notebook_ref("w1", "file:///a/x.ipynb");
    assert_eq!(
        resolve(&x_ref, &hosts, "w1"),
        Ok(Target {
            window_id: "w1".to_owned(),
            reference: "file:///a/x.ipynb".to_owned()
        })
    );
    let unknown = notebook_ref("w3", "file:///a/x.ipynb");
    for (reference, code, explained) in [
        (
            "nb_12",
            ErrorCode::NotebookRefMalformed,
            "Malformed notebook reference",
        ),
        (
            &unknown,
            ErrorCode::NotebookRefUnknown,
            "unknown, stale, or collides",
        ),
    ] {
        let error = resolve(reference, &hosts, "w1").unwrap_err();
        assert_eq!(error.code(), code);
        let message = error.to_tool_error().message;
        assert!(message.contains(explained), "{message}");
    }
    // URIs compare case-insensitively.
    assert_eq!(
        resolve("FILE:///B/Y.IPYNB", &hosts, "w1")
            .unwrap()
            .window_id,
        "w2"
    );
    // Root-relative paths match too.
    assert_eq!(resolve("x.ipynb", &hosts, "w2").unwrap().window_id, "w1");
    let error = resolve("file:///shared.ipynb", &hosts, "w1").unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotebookAmbiguous);
    let message = error.to_tool_error().message;
    assert!(message.contains("open in 2 windows"), "{message}");
    assert!(
        message.contains(&format!(
            "alpha: {}",
            notebook_ref("w1", "file:///shared.ipynb")
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "beta: {}",
            notebook_ref("w2", "file:///shared.ipynb")
        )),
        "{message}"
    );
    let error = resolve("file:///nowhere.ipynb", &hosts, "w1").unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotebookNotFound);
    // An empty reference goes to the broker's own window, which says what is missing.
    assert_eq!(resolve("", &hosts, "w2").unwrap().window_id, "w2");
}

#[test]
fn unanswered_windows_are_named_in_misses() {
    let mut silent = host("w2", "beta", &[]);
    silent.available = false;
    let hosts = [host("w1", "alpha", &["file:///a.ipynb"]), silent];
    let error = resolve("file:///b.ipynb", &hosts, "w1").unwrap_err();
    assert!(
        error
            .to_tool_error()
            .message
            .contains("did not answer and may have it: beta")
    );
}

#[test]
fn a_lone_window_gets_every_reference() {
    let hosts = [host("w1", "alpha", &["file:///a.ipynb"])];
    for reference in [
        "new.ipynb",
        "file:///elsewhere.ipynb",
        &notebook_ref("w9", "file:///a.ipynb"),
    ] {
        assert_eq!(
            resolve(reference, &hosts, "w1"),
            Ok(Target {
                window_id: "w1".to_owned(),
                reference: reference.to_owned()
            })
        );
    }
    // Malformed refs are refused before any window is asked.
    assert_eq!(
        resolve("nb_zz", &hosts, "w1").unwrap_err().code(),
        ErrorCode::NotebookRefMalformed
    );
}

#[test]
fn case_variants_within_one_window_are_left_to_that_window() {
    let hosts = [
        host("w1", "alpha", &["file:///A.ipynb", "file:///a.ipynb"]),
        host("w2", "beta", &[]),
    ];
    assert_eq!(
        resolve("file:///a.ipynb", &hosts, "w2"),
        Ok(Target {
            window_id: "w1".to_owned(),
            reference: "file:///a.ipynb".to_owned()
        })
    );
}

#[test]
fn routes_are_learned_from_answers() {
    let ref_a = notebook_ref("w", "file:///a.ipynb");
    let ref_b = notebook_ref("w", "file:///b.ipynb");
    let answer = json!({
        "notebookRef": ref_a, "uri": "file:///a.ipynb",
        "notebooks": [{"notebookRef": ref_b, "uri": "file:///b.ipynb"}, {"notebookRef": "nb_bad", "uri": "x"}]
    });
    assert_eq!(
        learned_routes(&answer),
        vec![
            (ref_a, "file:///a.ipynb".to_owned()),
            (ref_b, "file:///b.ipynb".to_owned())
        ]
    );
    assert!(learned_routes(&json!([1, 2])).is_empty());
}

fn success(value: Value) -> ToolOutput {
    ToolOutput::success(value, Vec::new())
}

#[test]
fn batch_answers_merge_in_owner_order() {
    let merged = merge_batch(vec![
        success(json!({"saved": ["a", "c"]})),
        success(json!({"saved": ["b"], "skipped": [{"notebook": "d", "reason": "r"}]})),
    ]);
    assert!(!merged.is_error);
    assert_eq!(
        merged.structured,
        Some(json!({"saved": ["a", "c", "b"], "skipped": [{"notebook": "d", "reason": "r"}]}))
    );
    assert_eq!(
        serde_json::from_str::<Value>(&merged.text).unwrap(),
        merged.structured.unwrap()
    );

    let failure = ToolOutput::failure(ToolError {
        code: ErrorCode::WindowUnavailable,
        message: "gone".to_owned(),
        details: None,
    });
    let merged = merge_batch(vec![success(json!({"results": [1]})), failure]);
    assert!(merged.is_error);
    let body: Value = serde_json::from_str(&merged.text).unwrap();
    assert_eq!(body["error"]["code"], "window_unavailable");
    assert_eq!(
        body["error"]["details"]["doneByOtherWindows"],
        json!({"results": [1]})
    );
}

#[test]
fn election_roles() {
    let broker = Role::Broker {
        owner_id: "o1".to_owned(),
    };
    assert_eq!(tick_step(&broker), TickStep::Prune);
    assert_eq!(tick_step(&Role::Blocked), TickStep::Register);
    assert_eq!(tick_step(&Role::Stopped), TickStep::Nothing);
    assert_eq!(
        next_role(&Role::Blocked, ElectionEvent::RegistrationFailed),
        (Role::Blocked, Some(FollowUp::TryBind))
    );
    assert_eq!(
        next_role(&broker, ElectionEvent::RegistrationFailed),
        (broker.clone(), None)
    );
    assert_eq!(
        next_role(&broker, ElectionEvent::ServerClosed),
        (Role::Blocked, None)
    );
    assert_eq!(
        next_role(
            &Role::Stopped,
            ElectionEvent::Bound {
                owner_id: "x".into()
            }
        ),
        (Role::Stopped, None)
    );
}

fn serving(window_id: &str, label: &str, tools: &[&str]) -> WindowTools {
    WindowTools {
        window_id: window_id.to_owned(),
        label: label.to_owned(),
        tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
    }
}

/// The window `serving_window` sends `tool` to, failing the test when it refuses.
fn served_by(tool: &str, destination: Destination<'_>, windows: &[WindowTools]) -> String {
    serving_window(tool, destination, windows).unwrap_or_else(|error| panic!("{error:?}"))
}

#[test]
fn a_tool_the_owner_lacks_is_refused_with_the_windows_that_serve_it() {
    let windows = [
        serving("w1", "docs", &["read_notebook"]),
        serving("w3", "zeta", &["read_notebook", "run_cells"]),
        serving("w2", "kernels", &["read_notebook", "run_cells"]),
    ];
    // The owner serves it: the call goes there.
    for (tool, owner) in [("read_notebook", "w1"), ("run_cells", "w2")] {
        let destination = Destination::NotebookOwner(owner);
        assert_eq!(served_by(tool, destination, &windows), owner);
    }
    // It does not: refused, naming the owner and every server by label.
    let error =
        serving_window("run_cells", Destination::NotebookOwner("w1"), &windows).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported);
    assert_eq!(
        error,
        RouteError::ToolNotServed {
            tool: "run_cells".to_owned(),
            window: WindowName {
                label: "docs".to_owned(),
                window_id: "w1".to_owned()
            },
            served_by: vec![
                WindowName {
                    label: "kernels".to_owned(),
                    window_id: "w2".to_owned()
                },
                WindowName {
                    label: "zeta".to_owned(),
                    window_id: "w3".to_owned()
                },
            ],
            by_notebook: true,
        }
    );
    let failure = error.to_tool_error();
    assert!(
        failure.message.contains(
            "the window `docs` (windowId `w1`) that owns this notebook does not serve run_cells"
        ),
        "{}",
        failure.message
    );
    assert!(
        failure
            .message
            .contains("these windows do: `kernels` (windowId `w2`), `zeta` (windowId `w3`)"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("open_notebooks"),
        "{}",
        failure.message
    );
    assert_eq!(
        failure.details.unwrap()["servedBy"],
        json!([
            {"windowId": "w2", "windowLabel": "kernels"},
            {"windowId": "w3", "windowLabel": "zeta"}
        ])
    );
    // A named window that lacks it: the same refusal, telling the caller to pick another id.
    let error = serving_window("run_cells", Destination::Named("w1"), &windows).unwrap_err();
    let message = error.to_tool_error().message;
    assert!(!message.contains("owns this notebook"), "{message}");
    assert!(message.contains("pass one of their windowIds"), "{message}");
}

#[test]
fn calls_nobody_could_serve_better_go_where_they_were_routed() {
    let windows = [
        serving("w1", "docs", &["read_notebook"]),
        serving("w2", "kernels", &["run_cells"]),
    ];
    // No window serves it: it is not listed, and the owner answers unknown_tool.
    assert_eq!(
        served_by("no_such_tool", Destination::NotebookOwner("w1"), &windows),
        "w1"
    );
    // A window that is not connected: the call reports it.
    assert_eq!(
        served_by("run_cells", Destination::Named("w9"), &windows),
        "w9"
    );
}

#[test]
fn the_own_window_hands_a_tool_it_lacks_to_the_window_that_serves_it() {
    let own = |takes_window_id| Destination::Own {
        own_window_id: "w1",
        takes_window_id,
    };
    let one_server = [
        serving("w1", "docs", &["read_notebook"]),
        serving("w2", "kernels", &["create_notebook"]),
    ];
    assert_eq!(served_by("create_notebook", own(true), &one_server), "w2");
    assert_eq!(served_by("read_notebook", own(true), &one_server), "w1");
    let two_servers = [
        serving("w1", "docs", &[]),
        serving("w3", "zeta", &["list_kernels", "create_notebook"]),
        serving("w2", "kernels", &["list_kernels", "create_notebook"]),
    ];
    // Several serve it and the caller can choose: asked to choose.
    let error = serving_window("create_notebook", own(true), &two_servers).unwrap_err();
    assert_eq!(error.code(), ErrorCode::NotSupported);
    let message = error.to_tool_error().message;
    assert!(message.contains("`docs` (windowId `w1`)"), "{message}");
    assert!(message.contains("pass one of their windowIds"), "{message}");
    // The caller cannot choose: the first by label.
    assert_eq!(served_by("list_kernels", own(false), &two_servers), "w2");
}

// ---- properties ----

/// Hosts whose URIs come from a small pool, so that the same URI is often listed by several
/// windows and in different cases.
fn hosts_strategy() -> impl Strategy<Value = Vec<HostListing>> {
    let uri = prop::sample::select(vec![
        "file:///a.ipynb",
        "file:///A.ipynb",
        "file:///b.ipynb",
        "file:///dir/c.ipynb",
        "untitled:Untitled-1",
    ]);
    prop::collection::vec(
        (prop::collection::btree_set(uri, 0..4), any::<bool>()),
        1..5,
    )
    .prop_map(|windows| {
        windows
            .into_iter()
            .enumerate()
            .map(|(index, (uris, available))| {
                let uris: Vec<&str> = uris.into_iter().collect();
                let mut listing = host(&format!("w{index}"), &format!("label{index}"), &uris);
                listing.available = available || index == 0;
                if !listing.available {
                    listing.notebooks.clear();
                }
                listing
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A listed ref routes to the one window that listed it, with its URI; an unlisted one is
    /// unknown (unless a lone window is connected).
    #[test]
    fn refs_route_to_their_lister(hosts in hosts_strategy(), pick in any::<prop::sample::Index>(), window in 0usize..6) {
        let listed: Vec<(&HostListing, &ListedNotebook)> = hosts
            .iter()
            .flat_map(|host| host.notebooks.iter().map(move |notebook| (host, notebook)))
            .collect();
        if !listed.is_empty() {
            let (owner, notebook) = listed[pick.index(listed.len())];
            let target = resolve(&notebook.notebook_ref, &hosts, "w0").unwrap();
            prop_assert_eq!(target.window_id, owner.window_id.clone());
            prop_assert_eq!(target.reference, notebook.uri.clone());
        }
        let stranger = notebook_ref(&format!("other{window}"), "file:///a.ipynb");
        let outcome = resolve(&stranger, &hosts, "w0");
        if hosts.len() == 1 {
            prop_assert_eq!(outcome.unwrap().window_id, "w0");
        } else {
            prop_assert_eq!(outcome.unwrap_err().code(), ErrorCode::NotebookRefUnknown);
        }
    }

    /// URIs resolve as a naive model says: the set of windows listing the URI in any case.
    #[test]
    fn uris_resolve_like_the_model(hosts in hosts_strategy(), wanted in prop::sample::select(vec![
        "file:///a.ipynb", "FILE:///B.IPYNB", "file:///dir/c.ipynb", "untitled:untitled-1", "file:///zzz.ipynb", "c.ipynb",
    ])) {
        let lowered = wanted.to_lowercase();
        let mut owners: Vec<&str> = Vec::new();
        let mut entries = 0;
        for host in &hosts {
            for notebook in &host.notebooks {
                let path_matches = notebook.path.as_deref().is_some_and(|path| path.to_lowercase() == lowered);
                if notebook.uri.to_lowercase() == lowered || path_matches {
                    entries += 1;
                    if !owners.contains(&host.window_id.as_str()) {
                        owners.push(&host.window_id);
                    }
                }
            }
        }
        let outcome = resolve(wanted, &hosts, "w0");
        match owners.len() {
            0 if hosts.len() == 1 => prop_assert_eq!(outcome.unwrap().window_id, "w0"),
            0 => prop_assert_eq!(outcome.unwrap_err().code(), ErrorCode::NotebookNotFound),
            1 => prop_assert_eq!(outcome.unwrap().window_id, owners[0]),
            _ => match outcome.unwrap_err() {
                RouteError::Ambiguous { matches, .. } => {
                    prop_assert_eq!(matches.len(), entries);
                    for (label, notebook_ref) in &matches {
                        let host = hosts.iter().find(|host| &host.label == label).unwrap();
                        prop_assert!(host.notebooks.iter().any(|notebook| &notebook.notebook_ref == notebook_ref));
                    }
                }
                other => prop_assert!(false, "expected ambiguity, got {other:?}"),
            },
        }
    }

    /// A tool some window serves never reaches a window that lacks it: the call goes to a
    /// window that serves it, or is refused naming exactly the windows that do.
    #[test]
    fn a_listed_tool_reaches_a_server_or_names_them_all(
        served in prop::collection::vec(any::<bool>(), 1..6),
        routed in 0usize..7,
        kind in 0u8..3,
        takes_window_id in any::<bool>(),
    ) {
        let windows: Vec<WindowTools> = served
            .iter()
            .enumerate()
            .map(|(index, serves)| {
                let tools: &[&str] = if *serves { &["tool"] } else { &["other"] };
                // Labels run against ids, so that ordering by label is seen.
                serving(&format!("w{index}"), &format!("label{}", 9 - index), tools)
            })
            .collect();
        let routed_id = format!("w{routed}");
        let destination = match kind {
            0 => Destination::NotebookOwner(&routed_id),
            1 => Destination::Named(&routed_id),
            _ => Destination::Own { own_window_id: &routed_id, takes_window_id },
        };
        let servers: Vec<&WindowTools> =
            windows.iter().filter(|window| window.tools[0] == "tool").collect();
        let connected = routed < windows.len();
        match serving_window("tool", destination, &windows) {
            Ok(window_id) => {
                let chosen = windows.iter().find(|window| window.window_id == window_id);
                match chosen {
                    Some(chosen) => prop_assert!(chosen.tools[0] == "tool" || servers.is_empty()),
                    None => prop_assert!(!connected && window_id == routed_id),
                }
                if connected && windows[routed].tools[0] == "tool" {
                    prop_assert_eq!(window_id, routed_id);
                }
            }
            Err(RouteError::ToolNotServed { window, served_by, by_notebook, .. }) => {
                prop_assert!(connected);
                prop_assert_eq!(window.window_id, routed_id);
                prop_assert_eq!(by_notebook, kind == 0);
                let mut expected: Vec<(String, String)> = servers
                    .iter()
                    .map(|window| (window.label.clone(), window.window_id.clone()))
                    .collect();
                expected.sort();
                prop_assert!(!expected.is_empty());
                prop_assert_eq!(
                    served_by
                        .into_iter()
                        .map(|name| (name.label, name.window_id))
                        .collect::<Vec<_>>(),
                    expected
                );
                // The broker's own window refuses only when the caller can pick among several.
                if kind == 2 {
                    prop_assert!(takes_window_id && servers.len() > 1);
                }
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    /// Batches split into one group per owner, owners in first-seen order, members in order.
    #[test]
    fn batches_split_by_owner(owners in prop::collection::vec(0u8..4, 0..20)) {
        let targets: Vec<Target> = owners
            .iter()
            .enumerate()
            .map(|(index, owner)| Target { window_id: format!("w{owner}"), reference: format!("r{index}") })
            .collect();
        let groups = group_by_owner(targets.clone());
        let mut first_seen: Vec<String> = Vec::new();
        for target in &targets {
            if !first_seen.contains(&target.window_id) {
                first_seen.push(target.window_id.clone());
            }
        }
        prop_assert_eq!(groups.iter().map(|(window, _)| window.clone()).collect::<Vec<_>>(), first_seen);
        for (window, references) in &groups {
            let expected: Vec<String> = targets
                .iter()
                .filter(|target| &target.window_id == window)
                .map(|target| target.reference.clone())
                .collect();
            prop_assert_eq!(references, &expected);
        }
        prop_assert_eq!(groups.iter().map(|(_, references)| references.len()).sum::<usize>(), targets.len());
    }

    /// Pruning removes exactly the peers silent for longer than the limit.
    #[test]
    fn pruning_removes_exactly_the_stale(seen in prop::collection::vec(0u64..20_000, 0..12), now in 0u64..25_000, limit in 0u64..10_000) {
        let mut table = PeerTable::default();
        for (index, last_seen) in seen.iter().enumerate() {
            table.register(&format!("p{index}"), index, *last_seen);
        }
        let removed = table.prune(now, limit);
        for (id, index) in &removed {
            prop_assert!(now.saturating_sub(seen[*index]) > limit, "{id} pruned too early");
        }
        for (_, index) in table.iter() {
            prop_assert!(now.saturating_sub(seen[*index]) <= limit);
        }
        prop_assert_eq!(removed.len() + table.len(), seen.len());
    }

    /// The election against a model of the port: binding succeeds only when nobody holds it,
    /// registering only while a live broker holds it. Whatever processes are killed, at most one
    /// broker exists, it holds the port, and after two quiet rounds of ticks exactly one live
    /// process is broker and every other live one is its peer.
    #[test]
    fn election_converges_on_one_broker(count in 1usize..6, script in prop::collection::vec((0usize..6, any::<bool>()), 0..40)) {
        let mut cluster = Cluster::new(count);
        for (node, kill) in script {
            let node = node % count;
            if kill && cluster.alive() > 1 {
                cluster.kill(node);
            } else {
                cluster.tick(node);
            }
            cluster.check_safety()?;
        }
        for _ in 0..2 {
            for node in 0..count {
                cluster.tick(node);
                cluster.check_safety()?;
            }
        }
        let brokers: Vec<usize> = (0..count).filter(|&node| cluster.alive[node] && matches!(cluster.roles[node], Role::Broker { .. })).collect();
        prop_assert_eq!(brokers.len(), 1);
        let Role::Broker { owner_id } = cluster.roles[brokers[0]].clone() else { unreachable!() };
        for node in (0..count).filter(|&node| cluster.alive[node] && node != brokers[0]) {
            prop_assert_eq!(&cluster.roles[node], &Role::Peer { owner_id: owner_id.clone() });
        }
    }
}

/// A model of processes sharing one port, driven by the election functions.
struct Cluster {
    roles: Vec<Role>,
    alive: Vec<bool>,
    port_holder: Option<usize>,
    owners_made: usize,
}

impl Cluster {
    fn new(count: usize) -> Cluster {
        Cluster {
            roles: vec![Role::Blocked; count],
            alive: vec![true; count],
            port_holder: None,
            owners_made: 0,
        }
    }

    fn alive(&self) -> usize {
        self.alive.iter().filter(|alive| **alive).count()
    }

    fn kill(&mut self, node: usize) {
        self.alive[node] = false;
        self.roles[node] = Role::Stopped;
        if self.port_holder == Some(node) {
            self.port_holder = None;
        }
    }

    fn broker_owner(&self) -> Option<String> {
        let holder = self.port_holder?;
        match &self.roles[holder] {
            Role::Broker { owner_id } => Some(owner_id.clone()),
            _ => None,
        }
    }

    fn tick(&mut self, node: usize) {
        if !self.alive[node] {
            return;
        }
        let role = self.roles[node].clone();
        match tick_step(&role) {
            TickStep::Nothing | TickStep::Prune => {}
            TickStep::Register => {
                let event = match self.broker_owner() {
                    Some(owner_id) => ElectionEvent::Registered { owner_id },
                    None => ElectionEvent::RegistrationFailed,
                };
                let (role, follow_up) = next_role(&role, event);
                self.roles[node] = role;
                if follow_up == Some(FollowUp::TryBind) {
                    let event = if self.port_holder.is_none() {
                        self.port_holder = Some(node);
                        self.owners_made += 1;
                        ElectionEvent::Bound {
                            owner_id: format!("owner{}", self.owners_made),
                        }
                    } else {
                        ElectionEvent::BindFailed
                    };
                    let (role, _) = next_role(&self.roles[node], event);
                    self.roles[node] = role;
                }
            }
        }
    }

    fn check_safety(&self) -> Result<(), TestCaseError> {
        let brokers: Vec<usize> = (0..self.roles.len())
            .filter(|&node| self.alive[node] && matches!(self.roles[node], Role::Broker { .. }))
            .collect();
        prop_assert!(brokers.len() <= 1, "several brokers: {:?}", self.roles);
        if let Some(&broker) = brokers.first() {
            prop_assert_eq!(self.port_holder, Some(broker));
        }
        Ok(())
    }
}
