//! The layering of `docs/architecture.md`, checked: every top-level module
//! of `src/` names (`crate::module`, in code or in a doc link) only modules
//! below it in [`LAYERS`]. A new import against the order fails here with
//! the file that made it; moving a module means moving it in the list and
//! in the document together.
//!
//! Test code is exempt (files named `tests.rs`, and everything from a
//! `#[cfg(test)]` line to the end of its file), as in
//! `../shared/tools/module_cycles.py`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules, bottom first: a module may name only modules
/// that come before it.
const LAYERS: &[&str] = &[
    "types",      // dtypes, scalars, columns, inputs, backend kinds, run stats
    "expr",       // element expressions and their reference semantics
    "semantics",  // aggregates, scans and ranges: identities and merges
    "graph",      // the traced operation graph
    "optimize",   // rewrite passes over the graph
    "plan",       // fused stages, workload, the compiled-plan cache entry
    "cost",       // device profiles, calibration store, the cost model
    "metrics",    // what one run measured
    "select",     // choosing a backend: model × history
    "codegen",    // kernel IR, WGSL and PTX writers
    "relational", // host sorts (radix, top-k) the CPU backends share
    "backend",    // the backends, behind one trait
    "error",      // the public error
    "recommend",  // advice read off a plan and its run
    "explain",    // the printable plan and run
    "runtime",    // engine, executor, devices, settings
    "query",      // the user's lazy builder
    "arrow",      // Arrow arrays in and out (feature `arrow`)
    "datafusion", // pipelines as DataFusion functions (feature `datafusion`)
    "ballista",   // pipelines distributed by Ballista (feature `ballista`)
    "prelude",
    "plumbing", // the machinery, re-exported for custom backends and selectors
    "telemetry",
];

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("readable src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The part of a file that is not test code.
fn library_text(text: &str) -> &str {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("#[cfg(test)]") {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The modules `text` names: `crate::name`, and the first segment of each
/// path inside `use crate::{..}`.
fn named_modules(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(is_ident) {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::X, b, c::{..}}`: the first segment of each
            // top-level entry.
            let mut depth = 0;
            let mut entry_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => entry_start = true,
                    c if entry_start && is_ident(c) => {
                        let name: String =
                            group[j..].chars().take_while(|&c| is_ident(c)).collect();
                        out.insert(name);
                        entry_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|&c| is_ident(c)).collect();
            out.insert(name);
        }
    }
    out
}

#[test]
fn every_module_names_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut modules = BTreeSet::new();
    let mut wrong = Vec::new();
    for path in &files {
        let rel = path.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || path.file_name().is_some_and(|f| f == "tests.rs") {
            continue;
        }
        let Some(own) = rank(&module) else {
            wrong.push(format!(
                "{}: module `{module}` is not in LAYERS (tests/layering.rs, docs/architecture.md)",
                rel.display()
            ));
            continue;
        };
        modules.insert(module.clone());
        let text = fs::read_to_string(path).unwrap();
        for named in named_modules(library_text(&text)) {
            if let Some(r) = rank(&named) {
                if r > own {
                    wrong.push(format!(
                        "{}: `{module}` names `crate::{named}`, a layer above it",
                        rel.display()
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layering:\n{}",
        wrong.join("\n")
    );
    // The list names no module that is gone.
    for l in LAYERS {
        assert!(
            modules.contains(*l) || *l == "telemetry",
            "LAYERS names `{l}`, which src/ does not have"
        );
    }
}

#[test]
fn the_scanner_sees_paths_groups_and_doc_links() {
    let text = "use crate::plan::Stage;\nuse crate::{expr::Expr, types, backend::{A, B}};\n\
                /// [`Engine`](crate::runtime::Engine)\nlet x = my_crate::query;";
    let got: Vec<String> = named_modules(text).into_iter().collect();
    assert_eq!(got, ["backend", "expr", "plan", "runtime", "types"]);
    assert_eq!(
        library_text("fn a() {}\n#[cfg(test)]\nmod tests { use crate::query; }\n"),
        "fn a() {}\n"
    );
}
