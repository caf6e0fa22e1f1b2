//! The house rules the compiler does not check, read from the sources:
//! layers point down, no two modules of a crate import each other (in a
//! circle of any length), every module opens with what it owns and what
//! it must never do, a long file has a reason, the storage engine stays
//! in its module, and every relative link of the Markdown docs points at
//! a file that exists.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer: a module may import
/// only modules of a lower layer (ARCHITECTURE.md, "Layers").
const LAYERS: &[(&str, u32)] = &[
    ("api_docs", 0),
    ("telemetry", 0),
    ("lifecycle", 1),
    ("ledger", 2),
    ("wire", 3),
    ("agent", 4),
    ("statewire", 5),
    ("studio", 5),
    ("harness_sdk", 6),
    ("record_kinds", 7),
    ("store", 7),
    ("statewire_client", 7),
    ("log_commands", 8),
    ("web", 8),
    ("server", 9),
    ("audit_client", 10),
    ("chat", 10),
    ("crashtest", 10),
    ("loadgen", 10),
    ("cli", 11),
];

/// Source files allowed past [`MAX_FILE_LINES`], each with its reason.
const LONG_FILES: &[(&str, &str)] = &[
    (
        "crates/agent/src/builtin/mod.rs",
        "the built-in agent's flow from question to frames, one pipeline read top to bottom",
    ),
    (
        "crates/ledger/src/local/journal/mod.rs",
        "the journal's entry layout, writer and replay, and their tests",
    ),
];

/// Lines a source file may have without an entry in [`LONG_FILES`].
const MAX_FILE_LINES: usize = 800;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir` whose name ends with `suffix`, relative to the
/// repository.
fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable directory") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if !matches!(name, "target" | "node_modules" | ".git" | "vendor") {
                    pending.push(path);
                }
            } else if name.ends_with(suffix) {
                found.push(path.strip_prefix(root()).expect("inside").to_path_buf());
            }
        }
    }
    found.sort();
    found
}

/// Every Rust source of the workspace: the root package's and each
/// layer crate's.
fn sources() -> Vec<PathBuf> {
    let mut found = files(&root().join("src"), ".rs");
    found.extend(files(&root().join("crates"), ".rs"));
    found
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(root().join(path)).expect("a readable file")
}

/// The top-level module a source file belongs to (`None` for `lib.rs`
/// and `main.rs`).
fn module_of(path: &Path) -> Option<String> {
    let relative = path.strip_prefix("src").ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let module = first.trim_end_matches(".rs");
    (!matches!(module, "lib" | "main")).then(|| module.to_owned())
}

/// The top-level modules a source names through `crate::`.
fn imported_modules(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

#[test]
fn every_module_imports_only_layers_below_its_own() {
    let layers: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for path in files(&root().join("src"), ".rs") {
        let Some(module) = module_of(&path) else {
            continue;
        };
        let Some(&own) = layers.get(module.as_str()) else {
            problems.push(format!(
                "{}: module {module} has no layer in LAYERS",
                path.display()
            ));
            continue;
        };
        for imported in imported_modules(&read(&path)) {
            if imported == module {
                continue;
            }
            match layers.get(imported.as_str()) {
                Some(&layer) if layer < own => {}
                Some(_) => problems.push(format!(
                    "{}: {module} (layer {own}) imports {imported}, which is not below it",
                    path.display()
                )),
                None => problems.push(format!(
                    "{}: imports crate::{imported}, which has no layer",
                    path.display()
                )),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_ledger_knows_no_engine_but_through_its_stores_and_sled_stays_in_the_local_store() {
    let mut problems = Vec::new();
    for path in sources() {
        let source = read(&path);
        let in_local = path.starts_with("crates/ledger/src/local");
        if source.contains("sled::") && !in_local {
            problems.push(format!(
                "{}: names sled outside the local store",
                path.display()
            ));
        }
        // The ledger's neutral modules (the contract, folds, records,
        // kinds, verification) name no store.
        let neutral = path.parent() == Some(Path::new("crates/ledger/src"))
            && path
                .file_name()
                .is_some_and(|n| n != "lib.rs" && n != "memory.rs");
        if neutral
            && ["ledger::local", "ledger::memory", "ledger::postgres"]
                .iter()
                .any(|store| source.contains(store))
        {
            problems.push(format!(
                "{}: a neutral ledger module names a store",
                path.display()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    // The root package's sources and every layer crate's.
    let mut roots = vec![root().join("src")];
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        roots.push(entry.expect("a crate folder").path().join("src"));
    }
    roots.sort();
    assert!(roots.len() > 5, "the workspace's crates were not found");
    let output = std::process::Command::new("python3")
        .arg(root().join("scripts/import-cycles"))
        .arg("--check")
        .args(&roots)
        .output()
        .expect("python3 runs scripts/import-cycles (scripts/test installs it)");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "import circles between the modules of a crate (move what both sides use into a module of its own):\n{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Every listed crate was read: a renamed folder fails, never shrinks
    // the check.
    for root in &roots {
        assert!(
            report.contains(&format!("{}: 0 circle(s)", root.display())),
            "scripts/import-cycles did not read {}:\n{report}",
            root.display()
        );
    }
}

#[test]
fn every_module_opens_with_what_it_owns_and_must_never_do() {
    let mut missing = Vec::new();
    for path in sources() {
        let opening: String = read(&path)
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase();
        let owns = opening.split_whitespace().any(|w| w.starts_with("owns"));
        let never = opening.contains("never");
        if !(owns && never) {
            missing.push(path.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "these modules lack an opening `//!` comment saying what they own and what they must never do:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_source_file_past_the_line_bound_has_a_reason() {
    let allowed: BTreeMap<&str, &str> = LONG_FILES.iter().copied().collect();
    let mut problems = Vec::new();
    for path in sources() {
        let lines = read(&path).lines().count();
        let name = path.display().to_string();
        match (lines > MAX_FILE_LINES, allowed.contains_key(name.as_str())) {
            (true, false) => problems.push(format!(
                "{name} has {lines} lines (over {MAX_FILE_LINES}): split it by concept or give the reason in LONG_FILES"
            )),
            (false, true) => problems.push(format!(
                "{name} has {lines} lines: drop its LONG_FILES entry"
            )),
            _ => {}
        }
    }
    for name in allowed.keys() {
        if !root().join(name).exists() {
            problems.push(format!("LONG_FILES names {name}, which does not exist"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The targets of a Markdown text's inline links (`[text](target)`),
/// outside code spans and fenced blocks.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Code spans are not links.
        let text: String = line
            .split('`')
            .enumerate()
            .filter(|(n, _)| n % 2 == 0)
            .map(|(_, part)| part)
            .collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else {
                break;
            };
            targets.push(rest[..end].trim().to_owned());
            rest = &rest[end..];
        }
    }
    targets
}

#[test]
fn every_relative_link_in_the_docs_points_at_a_file() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in files(&root(), ".md") {
        let text = read(&doc);
        for target in link_targets(&text) {
            let path = target.split('#').next().unwrap_or("").trim();
            let external = ["http://", "https://", "mailto:"]
                .iter()
                .any(|scheme| target.starts_with(scheme));
            if external || path.is_empty() {
                continue;
            }
            checked += 1;
            let base = doc.parent().unwrap_or(Path::new(""));
            if !root().join(base).join(path).exists() {
                broken.push(format!("{}: ({target})", doc.display()));
            }
        }
    }
    assert!(
        checked > 10,
        "the docs link to {checked} files: the scan found no links"
    );
    assert!(
        broken.is_empty(),
        "links that point nowhere:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_link_scan_finds_links_and_skips_code() {
    let text =
        "see [a](docs/a.md) and `[b](nope.md)`\n```\n[c](nope.md)\n```\n[d](https://x.y) [e](#top)";
    assert_eq!(link_targets(text), vec!["docs/a.md", "https://x.y", "#top"]);
}
