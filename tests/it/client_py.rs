//! The Python package `ledgerwire-client` (`clients/python/`): its pytest
//! suite run against the binary this build made, so `cargo test` alone
//! covers it. The suite starts that binary on 127.0.0.1 for every test,
//! checks the generated wire types against `ledgerwire schema` and runs
//! `mypy --strict` on the package. `scripts/test` installs the package
//! with its test extras into a virtualenv under the target directory.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtualenv `scripts/test` installs `clients/python[test]` into.
fn virtualenv() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory");
    let python = target.join("python-client").join("bin").join("python");
    assert!(
        python.exists(),
        "the Python client's virtualenv is missing: run scripts/test (it installs clients/python[test] into {})",
        target.join("python-client").display()
    );
    python
}

#[test]
fn the_python_client_passes_its_pytest_suite_against_this_binary() {
    let python = virtualenv();
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python");
    let basetemp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("python-client-tests");
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp"])
        .arg(&basetemp)
        .current_dir(&package)
        .env("LEDGERWIRE_BIN", env!("CARGO_BIN_EXE_ledgerwire"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Exit code 5 is pytest's "no tests collected": a failure here too.
    assert!(
        output.status.success(),
        "pytest failed in clients/python (exit {:?}):\n{stdout}\n{stderr}",
        output.status.code()
    );
    assert!(
        stdout.contains(" passed") && !stdout.contains(" failed") && !stdout.contains(" skipped"),
        "pytest ran no test, or skipped some:\n{stdout}"
    );
}
