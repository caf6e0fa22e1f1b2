//! `ledgerwire bench`: the load generator, run briefly as the real binary
//! against a server it starts itself and against one the test started;
//! its report has every figure, and every conversation completes. No
//! timing is asserted: the figures depend on the machine.

use serde_json::Value;

use crate::support::{ServerProcess, binary, scratch};

/// Conversations of a short run, and how many are in flight at once.
const CONVERSATIONS: u64 = 20;
const CONCURRENCY: u64 = 4;

/// Runs `ledgerwire bench ARGS… --json`; its exit status and report.
fn bench(args: &[&str]) -> (std::process::ExitStatus, Value, String) {
    let output = binary()
        .arg("bench")
        .args(["--conversations", &CONVERSATIONS.to_string()])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--max-seconds", "300", "--json"])
        .args(args)
        .output()
        .expect("run ledgerwire bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (output.status, report, format!("{stdout}{stderr}"))
}

/// Runs `ledgerwire bench ARGS…` (with `PATH` set to `path`, if given),
/// which must refuse before anything runs (exit 2); its stderr.
fn refused(args: &[&str], path: Option<&str>) -> String {
    let mut command = binary();
    command.arg("bench").args(args);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    let output = command.output().expect("run ledgerwire bench");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

/// Every figure is there, and every conversation completed.
fn assert_complete(report: &Value, door: &str, text: &str) {
    assert_eq!(report["door"], door, "{text}");
    assert_eq!(report["requested"], CONVERSATIONS, "{text}");
    assert_eq!(report["conversations"], CONVERSATIONS, "{text}");
    assert_eq!(report["failed"], 0, "{text}");
    assert_eq!(report["not_started"], 0, "{text}");
    assert_eq!(report["warmup_failed"], 0, "{text}");
    assert_eq!(report["concurrency"], CONCURRENCY, "{text}");
    assert_eq!(report["errors"], Value::Array(Vec::new()), "{text}");
    for figure in [
        "elapsed_secs",
        "conversations_per_sec",
        "p50_ms",
        "p99_ms",
        "p999_ms",
        "max_ms",
        "server_cpu_ms_per_conversation",
        "server_cpu_secs",
        "server_peak_rss_mib",
        "client_cpu_ms_per_conversation",
    ] {
        let value = report[figure].as_f64();
        assert!(value.is_some_and(|v| v >= 0.0), "{figure} in {text}");
    }
    let (p50, p99, p999, max) = (
        report["p50_ms"].as_f64(),
        report["p99_ms"].as_f64(),
        report["p999_ms"].as_f64(),
        report["max_ms"].as_f64(),
    );
    assert!(p50 <= p99 && p99 <= p999 && p999 <= max, "{text}");
    assert!(
        report["conversations_per_sec"].as_f64() > Some(0.0),
        "{text}"
    );
    assert!(report["server_peak_rss_mib"].as_f64() > Some(0.0), "{text}");
    // Every conversation appends durably, so the journal was synced; the
    // slow ones are a part of them.
    let syncs = &report["server_syncs"];
    let (total, slow) = (syncs["syncs"].as_u64(), syncs["slow"].as_u64());
    assert!(total > Some(0), "server_syncs in {text}");
    assert!(slow.is_some() && slow <= total, "server_syncs in {text}");
    // The conversations at or over the p99 (1% of them, at least one),
    // and how many ended within one window: at least one, at most all.
    let tail = &report["tail"];
    let (in_tail, busiest) = (
        tail["conversations"].as_u64(),
        tail["in_busiest_window"].as_u64(),
    );
    assert!(
        in_tail >= Some(1) && in_tail <= Some(CONVERSATIONS),
        "tail in {text}"
    );
    assert!(busiest >= Some(1) && busiest <= in_tail, "tail in {text}");
    let window_start = tail["window_start_ms"].as_f64();
    let elapsed_ms = report["elapsed_secs"].as_f64().map(|secs| secs * 1e3);
    assert!(
        window_start.is_some() && window_start <= elapsed_ms,
        "tail in {text}"
    );
}

#[test]
fn bench_spawns_a_server_and_every_conversation_completes() {
    let dir = scratch();
    let data = dir.path().join("store");
    let data = data.to_str().expect("a UTF-8 path");
    let (status, report, text) = bench(&["--spawn", "--data", data]);
    assert!(status.success(), "{text}");
    assert_complete(&report, "studio", &text);
    // Instructions are counted only when asked for, and none invented.
    assert!(
        report["server_instructions_per_conversation"].is_null(),
        "{text}"
    );
    // It was stopped as an operator stops it: drained and closed, so the
    // journal ends cleanly and sled holds every round of it (the next
    // open replays nothing).
    let store = dir.path().join("store");
    let scans = ledgerwire::ledger::local::testing::scan(&store).expect("the journal reads");
    assert!(!scans.is_empty(), "the records live in the journal");
    for scan in &scans {
        assert!(
            scan.torn_at.is_none() && scan.damage.is_empty(),
            "{}",
            scan.path.display()
        );
    }
    let journal_end = scans
        .iter()
        .filter_map(|scan| scan.entries.last().map(|entry| entry.next))
        .max()
        .expect("entries");
    {
        let db = sled::open(&store).expect("sled opens");
        let log = db.open_tree("log").expect("the log tree");
        let stored = log
            .get(ledgerwire::ledger::local::testing::NEXT_GLOBAL_KEY)
            .expect("a read")
            .expect("the stored next global position");
        assert_eq!(stored.as_ref(), journal_end.to_be_bytes(), "left to replay");
    }
    // The server it started ran on the directory it was given, and wrote
    // every conversation there (the log verifies).
    let verify = binary()
        .args(["log", "verify", "--data", data])
        .output()
        .expect("log verify");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn bench_drives_statewire_commands() {
    let (status, report, text) = bench(&["--spawn", "--statewire"]);
    assert!(status.success(), "{text}");
    assert_complete(&report, "statewire", &text);
}

#[test]
fn bench_measures_a_running_server_by_its_pid() {
    let dir = scratch();
    let server = ServerProcess::start(dir.path(), &["--agent", "minimal", "--agent-step-ms", "0"]);
    let url = format!("http://{}", server.addr);
    let pid = server.pid().to_string();
    let (status, report, text) = bench(&["--url", &url, "--server-pid", &pid]);
    assert!(status.success(), "{text}");
    assert_complete(&report, "studio", &text);
    // The human report says the same.
    let output = binary()
        .args(["bench", "--conversations", "2", "--concurrency", "1"])
        .args(["--url", &url, "--server-pid", &pid])
        .output()
        .expect("run ledgerwire bench");
    let human = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{human}");
    for line in [
        "2 of 2 conversations completed, 0 failed, 0 not started",
        "conversations/s",
        "latency per conversation      p50 ",
        "server CPU per conversation",
        "server peak memory",
        "client CPU per conversation",
        "journal syncs ",
        " over 50 ms",
        "p99 tail                      1 of the 1 conversations at or over the p99 ended within one 100 ms window",
    ] {
        assert!(human.contains(line), "{line:?} in {human}");
    }
    server.kill();
}

#[test]
fn bench_counts_a_spawned_servers_instructions_under_callgrind() {
    let (status, report, text) = bench(&["--spawn", "--instructions"]);
    assert!(status.success(), "{text}");
    assert_complete(&report, "studio", &text);
    // Two requests, five appends and eleven frames: far more than ten
    // thousand instructions, far fewer than a billion.
    let per = report["server_instructions_per_conversation"].as_f64();
    assert!(per.is_some_and(|n| (1e4..1e9).contains(&n)), "{text}");
    // Only a server it starts can run under callgrind; without valgrind
    // it says what to install, before anything runs.
    let stderr = refused(&["--instructions", "--url", "http://127.0.0.1:9"], None);
    assert!(stderr.contains("add --spawn"), "{stderr}");
    let args = ["--spawn", "--instructions", "--conversations", "1"];
    let stderr = refused(&args, Some("/nonexistent"));
    assert!(stderr.contains("apt-get install valgrind"), "{stderr}");
}

#[test]
fn bench_counts_what_it_could_not_do_and_refuses_what_it_cannot() {
    // Nobody listens: every conversation fails, each is counted, exit 1.
    let (status, report, text) = bench(&["--url", "http://127.0.0.1:9"]);
    assert_eq!(status.code(), Some(1), "{text}");
    assert_eq!(report["conversations"], 0, "{text}");
    assert_eq!(report["failed"], CONVERSATIONS, "{text}");
    assert!(
        !report["errors"].as_array().is_none_or(Vec::is_empty),
        "{text}"
    );
    assert!(text.contains("did not complete"), "{text}");
    // Bounds are checked before anything runs: exit 2.
    for args in [
        ["--concurrency", "0"],
        ["--max-seconds", "0"],
        ["--conversations", "0"],
    ] {
        let stderr = refused(&[args[0], args[1], "--url", "http://127.0.0.1:9"], None);
        assert!(stderr.contains("bad settings"), "{args:?}: {stderr}");
    }
    // Only a server on this machine is driven.
    let stderr = refused(&["--url", "http://192.0.2.1:8080"], None);
    assert!(stderr.contains("on this machine only"), "{stderr}");
    let output = binary()
        .args(["serve", "--agent", "builtin", "--agent-step-ms", "0"])
        .args(["--addr", "127.0.0.1:0"])
        .output()
        .expect("run serve");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--agent minimal only"));
}

#[test]
fn bench_alternates_a_baseline_and_summarises_both_builds() {
    // The same binary as its own baseline: what is checked is the order,
    // the reports and the summary, not which build is faster.
    let baseline = env!("CARGO_BIN_EXE_ledgerwire");
    let (status, series, text) = bench(&["--spawn", "--runs", "1", "--baseline", baseline]);
    assert!(status.success(), "{text}");
    let runs = series["runs"].as_array().expect("runs");
    let builds: Vec<&str> = runs
        .iter()
        .filter_map(|run| run["build"].as_str())
        .collect();
    assert_eq!(builds, ["this", "baseline"], "{text}");
    for run in runs {
        assert_complete(&run["report"], "studio", &text);
    }
    let summary = &series["summary"];
    for build in ["this", "baseline"] {
        assert_eq!(summary[build]["runs"], 1, "{text}");
        assert_eq!(summary[build]["incomplete"], 0, "{text}");
        let p99 = &summary[build]["p99_ms"];
        assert_eq!(p99["median"], p99["min"], "{text}");
    }
    for figure in [
        "conversations_per_sec",
        "p99_ms",
        "server_cpu_ms_per_conversation",
    ] {
        assert!(
            summary["ratio"][figure].as_f64().is_some_and(|r| r > 0.0),
            "{figure} in {text}"
        );
    }
    // A series bounded, and a baseline that must exist, refused before
    // anything runs.
    for (args, says) in [
        (
            vec!["--runs", "0", "--url", "http://127.0.0.1:9"],
            "--runs must be 1 to",
        ),
        (
            vec!["--runs", "51", "--url", "http://127.0.0.1:9"],
            "--runs must be 1 to",
        ),
        (
            vec!["--spawn", "--baseline", "/nonexistent/ledgerwire"],
            "no such file",
        ),
        (
            vec!["--baseline", "/nonexistent/ledgerwire"],
            "--baseline is about a server this command starts: add --spawn",
        ),
        (
            vec!["--data", "/nonexistent/store"],
            "--data is about a server this command starts: add --spawn",
        ),
    ] {
        let stderr = refused(&args, None);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
