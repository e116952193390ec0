//! The layering of each library crate, as docs/architecture.md draws it:
//! a top-level module imports only from modules of the layers below its
//! own. Each ```` ```layers CRATE ```` block there lists one layer a line,
//! bottom first, as `name: module module ...`.
//!
//! A module's imports are its `crate::a::...` paths (and `use crate::{a,
//! b::c}`), with names re-exported at the crate root resolved to the
//! module they come from. Comments, test files and `#[cfg(test)]` modules
//! are not read: tests may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The ```` ```layers CRATE ```` blocks of docs/architecture.md: per crate,
/// per layer (bottom first), its modules.
fn documented_layers() -> BTreeMap<String, Vec<(String, Vec<String>)>> {
    let doc = fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let mut out = BTreeMap::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(krate) = line.trim().strip_prefix("```layers ") else { continue };
        let mut layers = Vec::new();
        for l in lines.by_ref().take_while(|l| l.trim() != "```") {
            let (name, mods) = l.split_once(':').unwrap_or_else(|| panic!("layer line without `name:`: {l}"));
            layers.push((name.trim().to_string(), mods.split_whitespace().map(String::from).collect()));
        }
        out.insert(krate.trim().to_string(), layers);
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comment lines and without what follows its
/// first `#[cfg(test)] mod`.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(l) = lines.next() {
        let t = l.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|n| n.trim_start().trim_start_matches("pub(crate) ").starts_with("mod ") && n.contains('{'))
        {
            break;
        }
        if !t.starts_with("//") {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The first path segments after every `crate::` in `code`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(body) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first segment of each item.
            let (mut depth, mut start) = (0usize, true);
            for (j, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && (c.is_alphanumeric() || c == '_') => {
                        out.insert(ident_at(&body[j..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident_at(rest).to_string());
        }
    }
    out
}

/// Names the crate root re-exports (`pub use module::...::{A, B}`), each
/// with the module it comes from.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in code_of(lib).split(';') {
        let Some(path) = stmt.trim().strip_prefix("pub use ") else { continue };
        let module = ident_at(path).to_string();
        for name in path.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|s| !s.is_empty()).skip(1) {
            out.insert(name.to_string(), module.clone());
        }
    }
    out
}

/// Whether `name` is a file of unit tests (`tests.rs`, `tests_*.rs`,
/// `*_tests.rs`, `testutil.rs`), whose imports are not layered; the
/// `testing` module is code of the crate and is.
fn is_unit_test_file(name: &str) -> bool {
    let stem = name.trim_end_matches(".rs");
    stem == "tests" || stem == "testutil" || stem.starts_with("tests_") || stem.ends_with("_tests")
}

/// Per top-level module of `krate`, the top-level modules it imports.
fn imports(krate: &str) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = root().join(krate).join("src");
    let lib = fs::read_to_string(src.join("lib.rs")).unwrap();
    let reexports = root_reexports(&lib);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut tops = BTreeSet::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if first != "lib" && first != "main" {
            tops.insert(first);
        }
    }
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        let first = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if first == "lib" || first == "main" || is_unit_test_file(&name) {
            continue;
        }
        out.entry(first.clone()).or_default();
        for r in crate_refs(&code_of(&fs::read_to_string(f).unwrap())) {
            let target = if tops.contains(&r) { r } else { reexports.get(&r).cloned().unwrap_or(r) };
            if tops.contains(&target) && target != first {
                out.get_mut(&first).unwrap().entry(target).or_default().insert(rel.display().to_string());
            }
        }
    }
    out
}

#[test]
fn every_import_points_down_the_documented_layers() {
    let documented = documented_layers();
    let mut errors = Vec::new();
    for krate in ["aot-ir", "aot-macros", "aot-runtime"] {
        let Some(layers) = documented.get(krate) else {
            errors.push(format!("docs/architecture.md has no ```layers {krate} block"));
            continue;
        };
        let mut rank = BTreeMap::new();
        for (i, (_, mods)) in layers.iter().enumerate() {
            for m in mods {
                if rank.insert(m.clone(), i).is_some() {
                    errors.push(format!("{krate}: module `{m}` is in two layers"));
                }
            }
        }
        let imports = imports(krate);
        for (module, targets) in &imports {
            let Some(&from) = rank.get(module) else {
                errors.push(format!("{krate}: module `{module}` is in no layer of docs/architecture.md"));
                continue;
            };
            for (target, files) in targets {
                let Some(&to) = rank.get(target) else { continue };
                if to >= from {
                    let files: Vec<&str> = files.iter().map(String::as_str).collect();
                    errors.push(format!(
                        "{krate}: `{module}` (layer {}) imports `{target}` (layer {}), which is not below it: {}",
                        layers[from].0,
                        layers[to].0,
                        files.join(", ")
                    ));
                }
            }
        }
        for m in rank.keys() {
            if !imports.contains_key(m) {
                errors.push(format!("{krate}: docs/architecture.md lists `{m}`, which is not a module of src/"));
            }
        }
    }
    assert!(errors.is_empty(), "the layering is broken:\n{}", errors.join("\n"));
}

#[test]
fn the_import_scan_sees_every_form() {
    let code = code_of("use crate::a::B;\n// crate::c\nuse crate::{d, e::{F, G}, h};\nfn f() { crate::i::j(); }\n#[cfg(test)]\nmod tests {\n use crate::k;\n}\n");
    let refs: Vec<String> = crate_refs(&code).into_iter().collect();
    assert_eq!(refs, ["a", "d", "e", "h", "i"]);
    let re = root_reexports("pub use tensor::Tensor;\npub use autograd::{no_grad, NoGradGuard};\n");
    assert_eq!(re.get("Tensor").map(String::as_str), Some("tensor"));
    assert_eq!(re.get("NoGradGuard").map(String::as_str), Some("autograd"));
}
