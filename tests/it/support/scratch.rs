//! Scratch folders under the target dir: one fresh empty folder per name, and every name
//! claimed by one test only (all tests share one process and one folder).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// A fresh empty folder `<target>/tmp/<name>`, emptied first if a previous run left it.
/// Panics when another test of this run already took `name`: two tests sharing a folder
/// would delete each other's files.
pub(crate) fn scratch(name: &str) -> PathBuf {
    static TAKEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let fresh = TAKEN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_owned());
    assert!(fresh, "scratch folder {name:?} is taken by another test");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
