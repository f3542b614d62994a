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

/// The server modules a file of src/server names (`super::x`, `crate::server::x`, or `x`
/// inside `use super::{…}`), leaving out its `#[cfg(test)]` tail.
fn server_imports(text: &str, modules: &[String]) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut found = BTreeSet::new();
    for prefix in ["super::", "crate::server::"] {
        for (i, _) in code.match_indices(prefix) {
            let rest = &code[i + prefix.len()..];
            let names: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group[..group.find('}').unwrap_or(group.len())]
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                    .filter_map(|path| path.split("::").next())
                    .collect(),
                None => rest.split("::").next().into_iter().collect(),
            };
            found.extend(
                names
                    .into_iter()
                    .filter(|n| modules.iter().any(|m| m == n))
                    .map(str::to_owned),
            );
        }
    }
    found
}

/// Every module of src/server (its files, mod.rs aside) and the server modules it imports.
fn server_graph(root: &Path) -> Vec<(String, BTreeSet<String>)> {
    let dir = root.join("src/server");
    let mut files = vec![];
    sources(&dir, &mut files);
    let modules: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_stem()?.to_str().map(str::to_owned))
        .filter(|m| m != "mod")
        .collect();
    modules
        .iter()
        .map(|m| {
            let text = fs::read_to_string(dir.join(format!("{m}.rs"))).unwrap();
            let mut used = server_imports(&text, &modules);
            used.remove(m);
            (m.clone(), used)
        })
        .collect()
}

/// The bottom of the server, in order: each may import only the ones before it, so that a new
/// fault knob, configuration field or counter lands in one place.
const SERVER_LEAVES: [&str; 3] = ["faults", "config", "stats"];

#[test]
fn the_servers_config_faults_and_stats_import_no_other_server_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = server_graph(root);
    let mut wrong = vec![];
    for (rank, leaf) in SERVER_LEAVES.iter().enumerate() {
        let (_, used) = graph
            .iter()
            .find(|(m, _)| m == leaf)
            .unwrap_or_else(|| panic!("src/server/{leaf}.rs is gone"));
        for u in used {
            if !SERVER_LEAVES[..rank].contains(&u.as_str()) {
                wrong.push(format!("src/server/{leaf}.rs uses {u}"));
            }
        }
    }
    assert!(wrong.is_empty(), "leaves that lean:\n{}", wrong.join("\n"));
}

#[test]
fn the_server_check_sees_every_import_form() {
    let modules: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    let text = "use super::a::X;\nuse super::{b, c::Y};\nfn f() { crate::server::d::g() }";
    let found: Vec<String> = server_imports(text, &modules).into_iter().collect();
    assert_eq!(found, ["a", "b", "c", "d"]);
    assert!(server_imports("#[cfg(test)]\nuse super::a;", &modules).is_empty());
}
