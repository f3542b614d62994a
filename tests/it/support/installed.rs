//! What tests/setup.sh installs beside the tests (npm and PyPI packages, pinned), one part
//! per folder of tests/: each part's setup.sh runs once per test run, before its first use.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// The folder `tests/<part>`, after its setup.sh succeeded (it is idempotent, and quick when
/// done): `interop` (the SDK clients that drive `mcpload serve`), `interop_servers` (the
/// third-party servers), `report_py` (HdrHistogram's Python port). What cannot be installed
/// fails the test.
pub(crate) fn installed(part: &'static str) -> PathBuf {
    static DONE: Mutex<BTreeSet<&str>> = Mutex::new(BTreeSet::new());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(part);
    // Held while setup.sh runs: a second test needing the part waits for it.
    let mut done = DONE.lock().unwrap_or_else(PoisonError::into_inner);
    if !done.contains(part) {
        let status = Command::new("bash")
            .arg(dir.join("setup.sh"))
            .status()
            .unwrap_or_else(|e| panic!("running tests/{part}/setup.sh: {e}"));
        assert!(status.success(), "tests/{part}/setup.sh failed");
        done.insert(part);
    }
    dir
}
