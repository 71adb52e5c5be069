"""Runs llama.cpp's OpenAI-compatible HTTP server (the xllamacpp wheel, CPU build) on loopback.

Started in the background by `scripts/services llm-start`, with PYTHONPATH pointing at the
pinned xllamacpp under .services/llm-python. xllamacpp.Server serves HTTP from its own threads,
so this process only builds the parameters, starts it and then sleeps until it is told to stop
(SIGTERM / SIGINT from `scripts/services llm-stop`).
"""

import argparse
import os
import signal
import sys
import threading


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="path of the GGUF file")
    parser.add_argument("--alias", required=True, help="the model id /v1/models reports")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slots", type=int, default=1, help="parallel requests (n_parallel)")
    parser.add_argument("--ctx-per-slot", type=int, default=4096, help="tokens, prompt + reply")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = args.port
    params.n_parallel = args.slots
    # Without a unified KV cache llama.cpp splits n_ctx evenly between the slots.
    params.kv_unified = False
    params.n_ctx = args.ctx_per_slot * args.slots
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_gpu_layers = 0
    params.ui = False  # no web UI: only the API
    params.endpoint_slots = True
    params.endpoint_metrics = True
    # The prompt cache is kept in RAM; the default allows 8 GiB, which the tests' machine
    # (24 GiB, shared with Redis, NATS and cargo) should not give to a test model.
    params.cache_ram_mib = 1024

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    server = xlc.Server(params)
    print(f"llm: serving {args.alias} from {args.model} at {server.listening_address}", flush=True)
    while not stop.wait(1.0):
        pass
    print("llm: stopping", flush=True)
    sys.stdout.flush()
    # The server's native threads hold no state worth flushing; leave without running
    # destructors, which could wait on an in-flight generation.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
