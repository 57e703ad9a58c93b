//! The layer rule of ARCHITECTURE.md as a test: each layer imports only the layers below it,
//! no module imports one that imports it, and nothing outside `src/store/` names a backend.
//! The layers are read from the document's own table, so that the page stays the one source.
//!
//! A use is every `crate::MODULE` path (in `use` lines, groups and inline paths such as
//! `crate::signal::ledger_grew()`) and every `super::` or `self::` path, resolved from the file and
//! the inline modules it is written in. Comments and literals are not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::repository;

mod sizes;
mod source;
use source::{clean, tokens, uses};

/// Uses of a higher layer kept for now, each with its reason: (from, to, why).
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

/// Files outside `src/store/` that name a backend, each with its reason.
const NAMES_A_BACKEND: &[(&str, &str)] = &[
    (
        "src/model/typed.rs",
        "the typed values bind and decode on both backends (ARCHITECTURE.md, layer 1)",
    ),
    (
        "src/settings.rs",
        "`database.url` is checked by the PostgreSQL driver's own parser when it is validated",
    ),
    (
        "src/lease.rs",
        "its unit tests open a SQLite pool of their own",
    ),
    (
        "src/systems/postgres/mod.rs",
        "a warehouse of kind `postgres` is a system the daemon writes to, not the ledger's \
         backend: it speaks to that server through the same driver, with its own connections",
    ),
];

/// What names a backend: the driver's types and modules.
const BACKEND_NAMES: &[&str] = &[
    "PgPool",
    "PgListener",
    "PgConnection",
    "PgConnectOptions",
    "SqlitePool",
    "SqliteConnection",
    "SqliteConnectOptions",
];
const BACKEND_MODULES: &[&str] = &["postgres", "sqlite", "Postgres", "Sqlite"];

#[test]
fn no_module_imports_a_higher_layer_or_one_that_imports_it() {
    let modules = top_level_modules();
    let layers = layers_of(&modules);
    let files = sources();
    let mut failures = Vec::new();
    // from -> to -> where, within a layer; the same for submodules, by their top-level module.
    let mut top: Graph = BTreeMap::new();
    let mut inner: BTreeMap<String, Graph> = BTreeMap::new();
    for (file, text) in &files {
        let at = module_of(file);
        for found in uses(text, &at) {
            let place = format!("{file}:{}", found.line);
            let to = &found.path[0];
            if *to != at[0] && modules.contains(to) {
                let (from_layer, to_layer) = (layers[&at[0]], layers[to]);
                // A circle through layers has a use of a higher layer, reported as such.
                if to_layer == from_layer {
                    top.entry(at[0].clone())
                        .or_default()
                        .entry(to.clone())
                        .or_insert_with(|| place.clone());
                }
                let known = KNOWN_UPWARD.iter().any(|(f, t, _)| *f == at[0] && t == to);
                if to_layer > from_layer && !known {
                    failures.push(format!(
                        "{place}: `{}` (layer {from_layer}) uses `{to}` (layer {to_layer})",
                        at[0]
                    ));
                }
            } else if *to == at[0]
                && at.len() >= 2
                && found.path.len() >= 2
                && found.path[1] != at[1]
                && is_submodule(&at[0], &found.path[1])
            {
                inner
                    .entry(at[0].clone())
                    .or_default()
                    .entry(at[1].clone())
                    .or_default()
                    .entry(found.path[1].clone())
                    .or_insert(place);
            }
        }
    }
    failures.extend(circles(&top, ""));
    for (module, graph) in &inner {
        failures.extend(circles(graph, &format!("{module}::")));
    }
    assert!(
        failures.is_empty(),
        "the layer rule of ARCHITECTURE.md is broken:\n{}",
        failures.join("\n")
    );
}

#[test]
fn nothing_outside_the_storage_layer_names_a_backend() {
    let mut failures = Vec::new();
    for (file, text) in sources() {
        if file.starts_with("src/store/") || NAMES_A_BACKEND.iter().any(|(known, _)| *known == file)
        {
            continue;
        }
        let tokens = tokens(&clean(&text));
        for (i, token) in tokens.iter().enumerate() {
            let named = match &token.text {
                t if BACKEND_NAMES.contains(&t.as_str()) => true,
                t if BACKEND_MODULES.contains(&t.as_str()) => {
                    i >= 2 && tokens[i - 1].text == "::" && tokens[i - 2].text == "sqlx"
                }
                _ => false,
            };
            if named {
                failures.push(format!("{file}:{}: `{}`", token.line, token.text));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "a backend named outside src/store/ (ARCHITECTURE.md: the backend is chosen in \
         `store::open` and nowhere else):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_known_exceptions_are_still_needed() {
    let files = sources();
    for (file, why) in NAMES_A_BACKEND {
        let text = &files
            .iter()
            .find(|(f, _)| f == file)
            .unwrap_or_else(|| panic!("{file} is gone: drop it from NAMES_A_BACKEND"))
            .1;
        let names = tokens(&clean(text))
            .iter()
            .any(|t| BACKEND_NAMES.contains(&t.text.as_str()) || t.text == "postgres");
        assert!(names, "{file} no longer names a backend ({why}): drop it");
    }
}

/// The files that list every kind: the settings' kind lists and where each kind's settings
/// are compiled, the kind registry, and the ledger's vocabulary (`model::Source`), with the
/// settings' tests (a table of each kind read).
const KIND_LISTS: &[&str] = &[
    "src/settings/kinds.rs",
    "src/settings/destinations.rs",
    "src/settings/destinations/tests.rs",
    "src/settings/sources.rs",
    "src/settings/validate/tests.rs",
    "src/systems/mod.rs",
    "src/model/typed.rs",
];

/// The layer of each system's code: the modules the write path is made of, which import
/// nothing of `systems` (what a source reads is a model type; a post is read through a
/// reader handed down).
const WRITE_PATH: &[&str] = &["events", "apply"];

/// Every kind, read from the kind lists (`kinds!` lines `Variant(super::kinds::module::Type)`):
/// its module's name and its type names' prefix (the variant).
fn kinds() -> Vec<(String, String)> {
    let mut kinds: Vec<(String, String)> = Vec::new();
    for list in ["src/settings/destinations.rs", "src/settings/sources.rs"] {
        let text = std::fs::read_to_string(repository(list)).expect(list);
        for line in text.lines().map(str::trim) {
            let Some((variant, rest)) = line.split_once("(super::kinds::") else {
                continue;
            };
            let module = rest.split("::").next().expect("a module");
            let kind = (module.to_owned(), variant.to_owned());
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
    }
    assert!(kinds.len() >= 5, "the kinds of the kind lists: {kinds:?}");
    kinds
}

/// Whether `token` names the kind of module `module` and types `Type`: `module_...`,
/// `Type...` (`TypeSettings`, `TypeAction`), and `module` or `Type` alone; of a kind that
/// shares a backend's name (the `postgres` warehouse beside the PostgreSQL backend, whose
/// storage code says `postgres_options`), its types alone.
fn names_kind(token: &str, (module, type_prefix): (&str, &str)) -> bool {
    let alone = !BACKEND_MODULES.contains(&token);
    let backend = BACKEND_MODULES.contains(&module);
    (token == module && alone)
        || (!backend
            && token
                .strip_prefix(module)
                .is_some_and(|rest| rest.starts_with('_')))
        || token
            .strip_prefix(type_prefix)
            .is_some_and(|rest| match rest.chars().next() {
                None => alone,
                Some(c) => c.is_ascii_uppercase(),
            })
}

#[test]
fn a_kind_is_named_only_in_its_folder_and_the_kind_lists() {
    let files = sources();
    for list in KIND_LISTS {
        assert!(
            files.iter().any(|(file, _)| file == list),
            "{list} is gone: update KIND_LISTS"
        );
    }
    let mut failures = Vec::new();
    for (module, type_prefix) in kinds() {
        let folder = format!("src/systems/{module}/");
        assert!(
            repository(&folder).is_dir(),
            "kind `{module}` has no folder {folder}"
        );
        for (file, text) in &files {
            if file.starts_with(&folder) || KIND_LISTS.contains(&file.as_str()) {
                continue;
            }
            for token in tokens(&clean(text)) {
                if names_kind(&token.text, (&module, &type_prefix)) {
                    failures.push(format!("{file}:{}: `{}`", token.line, token.text));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "a kind named outside its folder and the kind lists (ARCHITECTURE.md, \"Where a new \
         thing goes\": the sender, the reader, the ingest listener and everything else take \
         every kind alike):\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_write_path_imports_nothing_of_the_systems() {
    let mut failures = Vec::new();
    for (file, text) in sources() {
        let at = module_of(&file);
        if !WRITE_PATH.contains(&at[0].as_str()) {
            continue;
        }
        for found in uses(&text, &at) {
            if found.path[0] == "systems" {
                failures.push(format!(
                    "{file}:{}: `{}`",
                    found.line,
                    found.path.join("::")
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the write path uses the systems layer (ARCHITECTURE.md: what a source reads is a \
         model type, a post is read through a reader handed down):\n{}",
        failures.join("\n")
    );
}

/// from -> to -> the first place it is written.
type Graph = BTreeMap<String, BTreeMap<String, String>>;

/// The modules `src/lib.rs` declares.
fn top_level_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repository("src/lib.rs")).expect("src/lib.rs");
    let modules: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    assert!(modules.len() > 10, "modules of src/lib.rs: {modules:?}");
    modules
}

/// Each module's layer, from the table of ARCHITECTURE.md: the modules named in a row's
/// second column, outside parentheses (which name files and the things a module serves).
fn layers_of(modules: &BTreeSet<String>) -> BTreeMap<String, usize> {
    let doc = std::fs::read_to_string(repository("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut layers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for row in doc.lines().filter_map(|l| l.strip_prefix("| ")) {
        let Some((number, _)) = row.split_once(". ") else {
            continue;
        };
        let Ok(layer) = number.parse::<usize>() else {
            continue;
        };
        let column = row.split('|').nth(1).expect("a modules column");
        for name in backticked(&outside_parentheses(column)) {
            if modules.contains(name) {
                layers.entry(name.to_owned()).or_default().push(layer);
            }
        }
    }
    let mut problems = Vec::new();
    for module in modules {
        match layers.get(module).map(Vec::as_slice) {
            None => problems.push(format!("`{module}` is in no layer")),
            Some([_]) => {}
            Some(more) => problems.push(format!("`{module}` is in layers {more:?}")),
        }
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's layer table and src/lib.rs disagree:\n{}",
        problems.join("\n")
    );
    layers.into_iter().map(|(m, l)| (m, l[0])).collect()
}

fn outside_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

/// The identifiers between backticks (a path or a file name is not one).
fn backticked(text: &str) -> impl Iterator<Item = &str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// Every `.rs` file under `src/` but `lib.rs`, as (`src/...`, its text).
fn sources() -> Vec<(String, String)> {
    let mut files = sizes::rust_files("src");
    files.retain(|(file, _)| file != "src/lib.rs");
    assert!(files.len() > 50, "{} files under src/", files.len());
    files
}

/// The module path of a file: `src/settings/load.rs` is `settings::load`; a file another
/// mounts with `#[path]` is the module it is mounted as (a kind's `settings.rs`, compiled as
/// `settings::kinds::<kind>`).
fn module_of(file: &str) -> Vec<String> {
    if let Some(mounted) = mounted().into_iter().find(|(f, _)| f == file) {
        return mounted.1;
    }
    folder_module_of(file)
}

/// The files mounted with `#[path = "..."]` followed by `mod NAME;`, and their modules.
fn mounted() -> Vec<(String, Vec<String>)> {
    static MOUNTED: std::sync::OnceLock<Vec<(String, Vec<String>)>> = std::sync::OnceLock::new();
    MOUNTED
        .get_or_init(|| {
            let mut found = Vec::new();
            for (file, text) in sources() {
                let lines: Vec<&str> = text.lines().map(str::trim).collect();
                for pair in lines.windows(2) {
                    let Some(target) = pair[0]
                        .strip_prefix("#[path = \"")
                        .and_then(|t| t.strip_suffix("\"]"))
                    else {
                        continue;
                    };
                    let name = pair[1]
                        .trim_start_matches("pub ")
                        .strip_prefix("mod ")
                        .and_then(|n| n.strip_suffix(';'))
                        .expect("#[path] before `mod NAME;`");
                    let dir = Path::new(&file).parent().expect("a folder");
                    let mut parts: Vec<&str> = Vec::new();
                    let joined = dir.join(target);
                    for part in joined.iter().map(|p| p.to_str().expect("UTF-8")) {
                        match part {
                            ".." => {
                                parts.pop();
                            }
                            "." => {}
                            part => parts.push(part),
                        }
                    }
                    let mut module = folder_module_of(&file);
                    module.push(name.to_owned());
                    found.push((parts.join("/"), module));
                }
            }
            found
        })
        .clone()
}

fn folder_module_of(file: &str) -> Vec<String> {
    let path = file
        .strip_prefix("src/")
        .and_then(|f| f.strip_suffix(".rs"))
        .expect("src/...rs");
    let mut parts: Vec<String> = path.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn is_submodule(module: &str, name: &str) -> bool {
    repository(&format!("src/{module}/{name}.rs")).is_file()
        || repository(&format!("src/{module}/{name}/mod.rs")).is_file()
}

/// Each circle of `graph`: its modules, and where each use among them is written.
fn circles(graph: &Graph, prefix: &str) -> Vec<String> {
    let reaches = |from: &str, to: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(at) = stack.pop() {
            for next in graph.get(&at).into_iter().flat_map(BTreeMap::keys) {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        false
    };
    let mut reported = BTreeSet::new();
    let mut failures = Vec::new();
    for module in graph.keys() {
        if reported.contains(module) || !reaches(module, module) {
            continue;
        }
        let circle: BTreeSet<&String> = graph
            .keys()
            .filter(|other| reaches(module, other) && reaches(other, module))
            .collect();
        let mut uses = Vec::new();
        for from in &circle {
            for (to, place) in &graph[*from] {
                if circle.contains(to) {
                    uses.push(format!("  {place}: `{prefix}{from}` uses `{prefix}{to}`"));
                }
            }
        }
        let names: Vec<String> = circle.iter().map(|m| format!("`{prefix}{m}`")).collect();
        failures.push(format!(
            "a circle: {} import each other\n{}",
            names.join(", "),
            uses.join("\n")
        ));
        reported.extend(circle.into_iter().cloned());
    }
    failures
}
