"""Resources: load/close cycles keep memory flat; forwards on two threads run at the same time."""
import os
import threading
import time

import numpy as np

import linformer_cl
from conftest import DATA

LAYER = os.path.join(DATA, "pytorch", "plain.model.safetensors")


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_thousand_load_close_cycles_keep_memory_flat():
    x = np.ones((1, 8, 32), np.float32)

    def cycle(count):
        for _ in range(count):
            with linformer_cl.load(LAYER, device="pocl") as model:
                model(x)

    cycle(100)  # caches and allocator pools reach their size
    before = resident_bytes()
    cycle(1000)
    grown = resident_bytes() - before
    assert grown < 8 << 20, f"resident memory grew by {grown / 2**20:.1f} MiB over 1000 cycles"


def test_two_threads_on_two_models_run_their_forwards_at_once():
    x = np.random.default_rng(5).standard_normal((8, 48, 32)).astype(np.float32)
    models = [linformer_cl.load(LAYER, device="pocl") for _ in range(2)]
    want = models[0](x)
    spans, results = [[], []], [None, None]

    def work(i):
        for _ in range(20):
            start = time.perf_counter()
            results[i] = models[i](x)
            spans[i].append((start, time.perf_counter()))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for m in models:
        m.close()
    for r in results:
        np.testing.assert_array_equal(r, want)
    overlaps = sum(a0 < b1 and b0 < a1 for a0, a1 in spans[0] for b0, b1 in spans[1])
    assert overlaps > 0, "no forward of one thread ran while the other's did: the GIL was held"
