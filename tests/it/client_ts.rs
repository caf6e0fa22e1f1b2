//! The TypeScript package `@ledgerwire/client` (`clients/typescript/`):
//! its `node --test` suite run against the binary this build made, so
//! `cargo test` alone covers it. The suite spawns that binary on
//! 127.0.0.1 for every scenario, checks the generated types against
//! `ledgerwire schema`, the JSDoc types with `tsc`, the exports with
//! `publint` and the bundle sizes with esbuild.

use std::path::Path;
use std::process::Command;

/// Where the package lives.
fn package() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/typescript")
}

#[test]
fn the_typescript_client_passes_its_node_tests_against_this_binary() {
    let dir = package();
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|out| out.status.success()),
        "the TypeScript client's tests need Node.js 20 or later: apt-get install -y nodejs npm (scripts/test installs it)"
    );
    assert!(
        dir.join("node_modules/eventsource-parser").exists(),
        "clients/typescript has no node_modules: run `npm ci` there (scripts/test does)"
    );
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let output = Command::new("node")
        .args([
            "--test",
            "--experimental-websocket",
            "--test-concurrency=2",
            "test/",
        ])
        .current_dir(&dir)
        .env("LEDGERWIRE_BIN", env!("CARGO_BIN_EXE_ledgerwire"))
        .env("LEDGERWIRE_TMP", tmp)
        .env("NO_COLOR", "1")
        .output()
        .expect("run node --test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "node --test failed in clients/typescript:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("# fail 0") && !stdout.contains("# pass 0"),
        "node --test ran no test or reported a failure:\n{stdout}"
    );
}
