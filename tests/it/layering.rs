//! The arrows point one way: every module imports only modules listed before it in the crate
//! map of src/lib.rs (docs/architecture.md). Reads the sources; test code is exempt.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The modules in the order of src/lib.rs's crate map (`//! - [`name`]: …`).
fn crate_map(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| l.strip_prefix("//! - [`"))
        .filter_map(|l| l.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The crate modules a source file names (`crate::x`, or `x` inside `use crate::{…}`),
/// leaving out its `#[cfg(test)]` tail.
fn imports(text: &str, modules: &[String]) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find("};").unwrap_or(group.len())];
            group
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .filter_map(|path| path.split("::").next())
                .collect()
        } else {
            rest.split("::").next().into_iter().collect()
        };
        for name in names {
            if modules.iter().any(|m| m == name) {
                found.insert(name.to_owned());
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let order = crate_map(&fs::read_to_string(root.join("src/lib.rs")).unwrap());
    assert!(
        order.len() >= 14,
        "the crate map lists the modules: {order:?}"
    );
    let mut upward = vec![];
    for (rank, module) in order.iter().enumerate() {
        let mut files = vec![];
        let dir = root.join("src").join(module);
        if dir.is_dir() {
            sources(&dir, &mut files);
        }
        let single = root.join("src").join(format!("{module}.rs"));
        if single.is_file() {
            files.push(single);
        }
        assert!(!files.is_empty(), "no sources for {module}");
        for file in files {
            for used in imports(&fs::read_to_string(&file).unwrap(), &order) {
                let used_rank = order.iter().position(|m| *m == used).unwrap();
                if used_rank > rank {
                    upward.push(format!("{} uses {used}", file.display()));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "arrows pointing up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_check_sees_both_import_forms() {
    let modules: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    let text = "use crate::a::X;\nuse crate::{b::{Y, Z}, c};\n#[cfg(test)]\nuse crate::d;";
    let found: Vec<String> = imports(text, &modules).into_iter().collect();
    assert_eq!(found, ["a", "b", "c"]);
}
