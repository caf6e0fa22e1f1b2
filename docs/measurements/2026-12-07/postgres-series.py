#!/usr/bin/env python3
# Usage: postgres-series.py ROUNDS CONVERSATIONS name=BINARY,pg|local[,url-settings] …; a PostgreSQL cluster on 127.0.0.1:55432 (user postgres); LOADGEN (environment; default target/release/ledgerwire) is the ledgerwire binary whose `bench --url` drives the runs
"""Alternated runs; each config: name=SERVER_BINARY,pg|local[,urlparams]. Servers started here; bench --url with LOADGEN."""
import json, os, subprocess, sys, statistics, time, signal, tempfile, shutil
PSQL = ["psql", "-h", "127.0.0.1", "-p", "55432", "-U", "postgres", "-qAt"]
LOADGEN = os.environ.get("LOADGEN", "target/release/ledgerwire")
rounds = int(sys.argv[1]); n = sys.argv[2]; configs = []
for arg in sys.argv[3:]:
    name, spec = arg.split("=", 1); parts = spec.split(",")
    configs.append((name, parts[0], parts[1], parts[2] if len(parts) > 2 else ""))
def q(db, sql):
    return subprocess.run(PSQL + ["-d", db, "-c", sql], capture_output=True, text=True, check=True).stdout.strip()
results = {c[0]: [] for c in configs}; counter = 0
for r in range(rounds):
    order = configs if r % 2 == 0 else list(reversed(configs))
    for name, binary, kind, params in order:
        counter += 1; scratch = None
        if kind == "pg":
            db = f"x{counter}"
            subprocess.run(PSQL + ["-c", f"drop database if exists {db}", "-c", f"create database {db}"], check=True, capture_output=True)
            store = ["--store", f"postgres://postgres@127.0.0.1:55432/{db}" + (f"?{params}" if params else "")]
            before = int(q(db, "select xact_commit from pg_stat_database where datname = current_database()"))
        else:
            scratch = tempfile.mkdtemp(prefix="lwbench-"); store = ["--data", scratch + "/d"]
        srv = subprocess.Popen([binary, "serve", "--addr", "127.0.0.1:0", "--agent", "minimal", "--agent-step-ms", "0"] + store,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={"RUST_LOG": "warn", "PATH": "/usr/bin:/bin"})
        line = srv.stdout.readline().strip(); addr = line.removeprefix("listening on ")
        out = subprocess.run([LOADGEN, "bench", "--url", f"http://{addr}", "--server-pid", str(srv.pid), "--conversations", n, "--concurrency", "50", "--json"], capture_output=True, text=True)
        srv.send_signal(signal.SIGTERM); srv.wait(timeout=30)
        rep = json.loads(out.stdout); t = None
        if kind == "pg":
            for _ in range(500):
                if q(db, "select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()") == "0": break
                time.sleep(0.02)
            after = int(q(db, "select xact_commit from pg_stat_database where datname = current_database()"))
            t = (after - before) / (rep["conversations"] + rep["warmup"])
            subprocess.run(PSQL + ["-c", f"drop database if exists {db}"], capture_output=True)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
        rep["tx"] = t; results[name].append(rep)
        print(f"round {r} {name:10} {rep['conversations']}/{rep['requested']} {rep['conversations_per_sec']:8.1f}/s p50 {rep['p50_ms']:6.2f} ms cpu {rep['server_cpu_ms_per_conversation'] or 0:.3f} ms tx/conv {t if t is None else round(t,2)} failed {rep['failed']}", flush=True)
print()
for name, reps in results.items():
    rates = [x["conversations_per_sec"] for x in reps]; cpu = [x["server_cpu_ms_per_conversation"] or 0 for x in reps]
    tx = [x["tx"] for x in reps if x["tx"] is not None]
    print(f"{name:10} median conv/s {statistics.median(rates):8.1f} ({min(rates):.0f}-{max(rates):.0f})  cpu {statistics.median(cpu):.3f} ms  tx/conv {round(statistics.median(tx),2) if tx else 'n/a'}")
