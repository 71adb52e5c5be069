//! The layering ARCHITECTURE.md describes, held by reading the sources: which top-level module
//! may name which. A module that names another through `crate::…` depends on it; doc comments
//! and the binary's own modules do not count.
//!
//! - No two modules depend on each other, however indirectly: the modules form layers.
//! - `telemetry` depends on nothing of the crate: every stage records through it (an import the
//!   other way once tied thirteen files into one circle).
//! - `model` (the domain) depends on nothing but `timestamp`: every stage depends on it.
//! - The stages depend on the layers below, never the other way: `store` on none of `ingest`,
//!   `serve`, `extract`, `embed`; `extract` and `embed` not on `store` or `ingest`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module of the library and the modules of the crate it names.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        // The binary's own modules sit on top of everything.
        if ["main", "lib", "cli"].contains(&name.as_str()) {
            continue;
        }
        let files = if path.is_dir() {
            rust_files(&path)
        } else if path.extension().is_some_and(|e| e == "rs") {
            vec![path.clone()]
        } else {
            continue;
        };
        modules.entry(name).or_default().extend(files);
    }
    let names: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .into_iter()
        .map(|(module, files)| {
            let mut named = BTreeSet::new();
            for file in files {
                for dependency in crate_paths(&std::fs::read_to_string(&file).unwrap()) {
                    if dependency != module && names.contains(&dependency) {
                        named.insert(dependency);
                    }
                }
            }
            (module, named)
        })
        .collect()
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The first segment of every `crate::…` path in code (not in comments).
fn crate_paths(source: &str) -> Vec<String> {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .flat_map(|code| {
            code.match_indices("crate::")
                .map(|(at, _)| {
                    code[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A cycle through `start`, if there is one.
fn cycle_through(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                path.push(next.clone());
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_string()];
    walk(graph, start, start, &mut path, &mut BTreeSet::new()).then_some(path)
}

#[test]
fn the_modules_form_layers_with_no_cycle() {
    let graph = module_graph();
    assert!(graph.len() > 15, "the sources were found: {graph:?}");
    let cycles: Vec<Vec<String>> = graph
        .keys()
        .filter_map(|module| cycle_through(&graph, module))
        .collect();
    assert!(
        cycles.is_empty(),
        "modules that depend on each other: {cycles:?}"
    );
}

#[test]
fn telemetry_and_the_domain_depend_on_nothing_above_them() {
    let graph = module_graph();
    assert_eq!(
        graph["telemetry"],
        BTreeSet::new(),
        "telemetry names nothing of the crate"
    );
    let allowed_for_model: BTreeSet<String> = ["timestamp".to_string()].into();
    assert!(
        graph["model"].is_subset(&allowed_for_model),
        "the domain names only timestamp: {:?}",
        graph["model"]
    );
}

#[test]
fn stages_depend_only_on_layers_below() {
    let graph = module_graph();
    let forbidden = [
        (
            "store",
            &["ingest", "serve", "extract", "embed", "app", "client"][..],
        ),
        ("extract", &["store", "ingest", "serve", "app"][..]),
        ("embed", &["store", "ingest", "serve", "extract", "app"][..]),
        ("ingest", &["serve", "app", "client"][..]),
    ];
    for (stage, below_it) in forbidden {
        for other in below_it {
            assert!(
                !graph[stage].contains(*other),
                "{stage} names {other}, which sits above it"
            );
        }
    }
}

/// The test reads what it claims to: a module naming another through `crate::` counts.
#[test]
fn crate_paths_are_read_from_code_not_comments() {
    let source = "use crate::store::Stance; // crate::serve in a comment\n/// [`crate::ingest`]\nlet x = crate::model::timeline::voice;";
    assert_eq!(crate_paths(source), vec!["store", "model"]);
}
