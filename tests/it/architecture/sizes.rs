//! Sizes and circles as tests: few files over [`FILE_LINES`] lines, no function over
//! [`FUNCTION_LINES`] outside tests, and no circle among the sandbox's top-level modules.
//! The code read is every `.rs` file under `src/` and each workspace crate's `src/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::source::{Token, clean, tokens, uses};
use super::{Graph, circles};
use crate::repository;

/// A file longer than this many lines (as `wc -l` counts them) is one too long.
const FILE_LINES: usize = 500;
/// How many files may be longer than [`FILE_LINES`].
const FILES_OVER: usize = 4;
/// A function longer than this many lines, from its signature's first line to its closing
/// brace, is one too long.
const FUNCTION_LINES: usize = 80;

/// Every `.rs` file under `folder` (relative to the repository), as (its path from the
/// repository, its text), in path order.
pub(super) fn rust_files(folder: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("a source folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path
                    .strip_prefix(repository(""))
                    .expect("under the repository")
                    .to_string_lossy()
                    .replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("a source file");
                out.push((relative, text));
            }
        }
    }
    let mut files = Vec::new();
    walk(&repository(folder), &mut files);
    files.sort();
    files
}

/// The files of the library and of every crate of the workspace.
fn workspace_files() -> Vec<(String, String)> {
    let mut files = rust_files("src");
    let mut crates: Vec<_> = std::fs::read_dir(repository("crates"))
        .expect("crates/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.join("src").is_dir())
        .collect();
    crates.sort();
    for krate in crates {
        let name = krate
            .file_name()
            .expect("a crate's folder")
            .to_string_lossy();
        files.extend(rust_files(&format!("crates/{name}/src")));
    }
    assert!(files.len() > 100, "{} files read", files.len());
    files
}

/// The files longer than [`FILE_LINES`], with their lines, longest first.
fn files_over() -> Vec<(usize, String)> {
    let mut over: Vec<(usize, String)> = workspace_files()
        .into_iter()
        .map(|(file, text)| (text.matches('\n').count(), file))
        .filter(|(lines, _)| *lines > FILE_LINES)
        .collect();
    over.sort_by(|a, b| b.cmp(a));
    over
}

#[test]
fn few_files_are_over_the_line_limit() {
    let over = files_over();
    let listed: Vec<String> = over
        .iter()
        .map(|(lines, file)| format!("  {file}: {lines} lines"))
        .collect();
    assert!(
        over.len() <= FILES_OVER,
        "{} files are over {FILE_LINES} lines (at most {FILES_OVER} may be); split them by \
         theme:\n{}",
        over.len(),
        listed.join("\n")
    );
}

/// A function found: its name, the line of its signature and the line of its closing brace.
#[derive(Debug)]
struct Function {
    name: String,
    first: usize,
    last: usize,
}

impl Function {
    fn lines(&self) -> usize {
        self.last - self.first + 1
    }
}

/// The text of token `i`, or nothing past the end.
fn text_at(tokens: &[Token], i: usize) -> &str {
    tokens.get(i).map_or("", |t| t.text.as_str())
}

/// The index just past the `}` that closes the `{` at `open`.
fn past_block(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// Whether the tokens at `i` are `#[cfg(test)]`.
fn is_cfg_test(tokens: &[Token], i: usize) -> bool {
    ["#", "[", "cfg", "(", "test", ")", "]"]
        .iter()
        .enumerate()
        .all(|(k, word)| text_at(tokens, i + k) == *word)
}

/// The index of the `{` of an inline module declared at `i` (after its attributes and
/// visibility), if one is.
fn inline_module_at(tokens: &[Token], mut i: usize) -> Option<usize> {
    if text_at(tokens, i) == "pub" {
        i += 1;
        if text_at(tokens, i) == "(" {
            while text_at(tokens, i) != ")" && i < tokens.len() {
                i += 1;
            }
            i += 1;
        }
    }
    (text_at(tokens, i) == "mod" && text_at(tokens, i + 2) == "{").then_some(i + 2)
}

/// The body of the function whose `fn` is at `i`: the index of its `{`, or `None` for a
/// declaration without one (a trait's, an extern one).
fn body_of(tokens: &[Token], i: usize) -> Option<usize> {
    let mut nested = 0usize;
    for (j, token) in tokens.iter().enumerate().skip(i + 2) {
        match token.text.as_str() {
            "(" | "[" => nested += 1,
            ")" | "]" => nested = nested.saturating_sub(1),
            ";" if nested == 0 => return None,
            "{" if nested == 0 => return Some(j),
            _ => {}
        }
    }
    None
}

/// Every function with a body in `text`, nested ones too, outside `#[cfg(test)]` inline
/// modules. Comments, strings and characters are not read.
fn functions(text: &str) -> Vec<Function> {
    let tokens = tokens(&clean(text));
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_cfg_test(&tokens, i) {
            let mut after = i + 7;
            // Further attributes of the same item.
            while text_at(&tokens, after) == "#" && text_at(&tokens, after + 1) == "[" {
                after = (after..tokens.len())
                    .find(|&k| text_at(&tokens, k) == "]")
                    .map_or(tokens.len(), |k| k + 1);
            }
            if let Some(open) = inline_module_at(&tokens, after) {
                i = past_block(&tokens, open);
                continue;
            }
        }
        let name = text_at(&tokens, i + 1);
        let is_fn = text_at(&tokens, i) == "fn"
            && name.starts_with(|c: char| c.is_alphabetic() || c == '_');
        if is_fn && let Some(open) = body_of(&tokens, i) {
            let close = past_block(&tokens, open) - 1;
            found.push(Function {
                name: name.to_owned(),
                first: tokens[i].line,
                last: tokens.get(close).map_or(tokens[i].line, |t| t.line),
            });
        }
        i += 1;
    }
    found
}

#[test]
fn the_function_scan_measures_from_the_signature_to_the_closing_brace() {
    let text = "fn short() {\n    let s = \"}\";\n    let c = '{';\n}\n\
                trait T {\n    fn declared(&self) -> [u8; 2];\n}\n\
                // fn in_a_comment() {\n\
                pub(crate) async fn long(\n    a: [u8; 2],\n) -> u8\nwhere\n    u8: Copy,\n{\n    \
                fn inner() {}\n    a[0]\n}\n\
                #[cfg(test)]\nmod tests {\n    fn hidden() {\n    }\n}\n";
    let found: Vec<(String, usize)> = functions(text)
        .iter()
        .map(|f| (f.name.clone(), f.lines()))
        .collect();
    assert_eq!(
        found,
        [("short".into(), 4), ("long".into(), 9), ("inner".into(), 1)]
    );
}

#[test]
fn no_function_outside_tests_is_over_the_line_limit() {
    let mut over = Vec::new();
    for (file, text) in workspace_files() {
        if file.ends_with("/tests.rs") {
            continue;
        }
        for function in functions(&text) {
            if function.lines() > FUNCTION_LINES {
                over.push(format!(
                    "  {file}:{}: `{}` is {} lines",
                    function.first,
                    function.name,
                    function.lines()
                ));
            }
        }
    }
    assert!(
        over.is_empty(),
        "functions over {FUNCTION_LINES} lines (bring them under it with well-named helpers):\n{}",
        over.join("\n")
    );
}

/// The sandbox's top-level modules, as its `lib.rs` declares them.
fn sandbox_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repository("crates/sandbox/src/lib.rs"))
        .expect("the sandbox's lib.rs");
    let tokens = tokens(&clean(&lib));
    let modules: BTreeSet<String> = (0..tokens.len())
        .filter(|&i| tokens[i].text == "mod" && matches!(text_at(&tokens, i + 2), ";" | "{"))
        .map(|i| text_at(&tokens, i + 1).to_owned())
        .collect();
    assert!(modules.len() > 5, "{modules:?}");
    modules
}

/// The module path of a sandbox file: `crates/sandbox/src/world/seed.rs` is `world::seed`.
fn sandbox_module_of(file: &str) -> Vec<String> {
    let path = file
        .strip_prefix("crates/sandbox/src/")
        .and_then(|f| f.strip_suffix(".rs"))
        .expect("crates/sandbox/src/...rs");
    let mut parts: Vec<String> = path.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

#[test]
fn no_module_of_the_sandbox_imports_one_that_imports_it() {
    let modules = sandbox_modules();
    let mut graph: Graph = BTreeMap::new();
    for (file, text) in rust_files("crates/sandbox/src") {
        let at = sandbox_module_of(&file);
        let Some(from) = at.first().filter(|m| modules.contains(*m)) else {
            continue; // lib.rs: the crate's root declares and re-exports them all
        };
        for found in uses(&text, &at) {
            let to = &found.path[0];
            if to != from && modules.contains(to) {
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to.clone())
                    .or_insert_with(|| format!("{file}:{}", found.line));
            }
        }
    }
    assert!(
        !graph.is_empty(),
        "no use found among the sandbox's modules"
    );
    let failures = circles(&graph, "");
    assert!(
        failures.is_empty(),
        "the sandbox's modules import each other:\n{}",
        failures.join("\n")
    );
}
