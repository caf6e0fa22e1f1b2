#!/usr/bin/env python3
"""Alternated series (this, base, base, this, ...) of serve's open on the 10k-conversation store.
intact: each build opens its own copy of the store (settled by one open first), index intact.
rebuild (this build only; the base had no rebuild): a fresh copy with an INDEX-DAMAGED note,
so the index is set aside and rebuilt from the journal; the log line gives the time and bytes read."""
import subprocess, sys, time, os, signal, json, shutil, statistics
THIS, BASE, STORE, WORK = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
RUNS = int(sys.argv[5]) if len(sys.argv) > 5 else 5
def serve(binary, data):
    env = dict(os.environ, RUST_LOG="info")
    t0 = time.monotonic()
    p = subprocess.Popen([binary, "--log-format", "json", "serve", "--addr", "127.0.0.1:0", "--agent", "minimal", "--data", data],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    line = p.stdout.readline()
    opened = time.monotonic() - t0
    assert line.startswith("listening on"), line
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=300)
    assert p.returncode in (0, -15), err[-2000:]
    fields = None
    for l in err.splitlines():
        if "rebuilt from the journal" in l:
            fields = json.loads(l)["fields"]
    return opened, fields
def uptime(): return subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()
order = []
for i in range(RUNS):
    order += [("this", THIS), ("base", BASE)] if i % 2 == 0 else [("base", BASE), ("this", THIS)]
intact = {}
for build, binary in (("this", THIS), ("base", BASE)):
    intact[build] = os.path.join(WORK, "intact-" + build)
    shutil.rmtree(intact[build], ignore_errors=True); shutil.copytree(STORE, intact[build], symlinks=True)
    serve(binary, intact[build])  # settle: the copy's first open
print(f"uptime before: {uptime()}", flush=True)
res = {"this": [], "base": []}
for n, (build, binary) in enumerate(order):
    opened, _ = serve(binary, intact[build])
    res[build].append(opened)
    print(f"intact   run {n+1:2} {build:5} open_s {opened:.3f}", flush=True)
rebuild = []
for n in range(RUNS):
    data = os.path.join(WORK, "rebuild")
    shutil.rmtree(data, ignore_errors=True); shutil.copytree(STORE, data, symlinks=True)
    open(os.path.join(data, "INDEX-DAMAGED"), "w").write("a measurement asks for a rebuild")
    subprocess.run(["sync"])
    opened, f = serve(THIS, data)
    assert f, "no rebuild line"
    mb = f["journal_bytes"] / 1e6; secs = f["elapsed_ms"] / 1e3
    rebuild.append((opened, secs, mb / secs))
    print(f"rebuild  run {n+1:2} this  open_s {opened:.3f} rebuild_s {secs:.3f} journal_mb {mb:.3f} mb_per_s {mb/secs:.1f} records {f['records']} rounds {f['rounds']}", flush=True)
print(f"uptime after: {uptime()}")
med = {b: statistics.median(v) for b, v in res.items()}
print(f"intact open_s median this {med['this']:.3f} ({min(res['this']):.3f}-{max(res['this']):.3f})  base {med['base']:.3f} ({min(res['base']):.3f}-{max(res['base']):.3f})  this/base {med['this']/med['base']:.3f}")
for i, k in enumerate(("open_s", "rebuild_s", "mb_per_s")):
    v = [r[i] for r in rebuild]
    print(f"rebuild {k} median {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})")
