"""The package under processes and signals: fork, multiprocessing's three start methods, SIGINT, SIGTERM and SIGALRM
during a forward, a thread's forward while the interpreter exits, models left open at exit, close() from another
thread, weak references, atexit handlers, exec, forks while another thread loads models.

Each case runs a script of its own in a fresh interpreter with a time limit, so that a hang fails the test (and
this process, which has started OpenCL, forks nothing). A script prints what it saw; the test reads it.
"""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import DATA

LAYER = os.path.join(DATA, "pytorch", "plain.model.safetensors")  # d_model 32, max_seq_len 48
SECONDS = 120

PRELUDE = f"""
import os, sys
import numpy as np
import linformer_cl
LAYER = {LAYER!r}
DEVICE = sys.argv[1]
x = np.random.default_rng(7).standard_normal((2, 40, 32)).astype(np.float32)


def attempt(what, call):
    try:
        call()
        print(what, "ran", flush=True)
    except linformer_cl.StateError as e:
        print(what, "refused:", e, flush=True)
"""


def run(tmp_path, device, body, timeout=SECONDS):
    """Runs PRELUDE + body as a script file (multiprocessing's spawn re-imports it) on `device`; its stdout lines."""
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    done = subprocess.run([sys.executable, str(script), device], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout.split("\n")


def test_a_forked_child_refuses_the_parents_model_and_a_new_one_at_once_and_the_parent_goes_on(tmp_path, device):
    out = run(tmp_path, device, """
        m = linformer_cl.load(LAYER, device=DEVICE)
        before = m(x)
        pid = os.fork()
        if pid == 0:
            attempt("inherited", lambda: m(x))
            attempt("new", lambda: linformer_cl.load(LAYER, device=DEVICE))
            attempt("profile", lambda: m.last_profile)
            m.close()
            print("closed")
            sys.stdout.flush()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child status", status)
        print("parent same", np.array_equal(m(x), before))
    """)
    refusals = [line for line in out if " refused: " in line]
    assert [line.split()[0] for line in refusals] == ["inherited", "new", "profile"], out
    for line in refusals:
        assert "fork()" in line and "'spawn'" in line and "'forkserver'" in line, line
    assert "closed" in out and "child status 0" in out and "parent same True" in out, out


def test_a_forked_child_is_refused_and_exits_even_while_a_forward_held_the_model_at_the_fork(tmp_path, device):
    # A forward on another thread holds the model's lock while it runs; forked then, the child's copy of the lock
    # stays held for good. A thread of the script holds it, as such a forward does, across the fork; the child
    # then ends as a script does, through the interpreter's exit.
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        m(x)
        held, done = threading.Event(), threading.Event()

        def hold():
            with m._lock:
                held.set()
                done.wait()

        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        pid = os.fork()
        if pid == 0:
            attempt("inherited", lambda: m(x))
            m.close()
            sys.stdout.flush()
            sys.exit(0)
        done.set()
        t.join()
        _, status = os.waitpid(pid, 0)
        print("child status", status)
        print("parent after", m(x).shape)
    """)
    assert any(line.startswith("inherited refused:") and "fork()" in line for line in out), out
    assert "child status 0" in out and "parent after (2, 40, 32)" in out, out


MP_BODY = """
    import multiprocessing as mp

    def inherited(q):
        try:
            q.put(("ran", float(MODEL(x).sum())))
        except linformer_cl.StateError as e:
            q.put(("refused", str(e)))

    def fresh(q):
        try:
            with linformer_cl.load(LAYER, device=DEVICE) as m:
                q.put(("ran", float(m(x).sum())))
        except linformer_cl.Error as e:
            q.put(("refused", str(e)))

    if __name__ == "__main__":
        method = sys.argv[2]
        MODEL = linformer_cl.load(LAYER, device=DEVICE)
        want = float(MODEL(x).sum())
        ctx = mp.get_context(method)
        for target in ([inherited, fresh] if method == "fork" else [fresh]):
            q = ctx.Queue()
            p = ctx.Process(target=target, args=(q,))
            p.start()
            kind, value = q.get(timeout=100)
            p.join(100)
            print(target.__name__, kind, value if kind == "refused" else value == want, "exit", p.exitcode)
"""


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_fork_is_refused_at_once_and_spawn_and_forkserver_run(tmp_path, device, method):
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(MP_BODY))
    done = subprocess.run([sys.executable, str(script), device, method], capture_output=True, text=True,
                          timeout=SECONDS)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    out = done.stdout.split("\n")
    if method == "fork":
        for name in ("inherited", "fresh"):
            line = next((line for line in out if line.startswith(name + " ")), "")
            assert line.startswith(name + " refused ") and "fork()" in line and "exit 0" in line, out
    else:
        assert "fresh ran True exit 0" in out, out


def test_sigint_during_a_forward_raises_after_it_and_the_model_still_answers(tmp_path, device):
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent("""
        m = linformer_cl.load(LAYER, device=DEVICE)
        big = np.random.default_rng(8).standard_normal((64, 48, 32)).astype(np.float32)
        want = m(big)
        print("ready", flush=True)
        try:
            while True:
                m(big)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        print("same", np.array_equal(m(big), want), flush=True)
    """))
    p = subprocess.Popen([sys.executable, str(script), device], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # in the loop of forwards
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=SECONDS)
    finally:
        p.kill()
    assert p.returncode == 0, f"exit {p.returncode}\n{out}\n{err}"
    assert out.split("\n")[:2] == ["interrupted", "same True"], out


@pytest.mark.parametrize("attempt", range(8))  # Intel's runtime aborted at about one exit in four
def test_a_thread_in_a_forward_while_the_interpreter_exits_ends_cleanly(tmp_path, device, attempt):
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        big = np.random.default_rng(8).standard_normal((64, 48, 32)).astype(np.float32)
        started = threading.Event()

        def loop():
            started.set()
            while True:
                m(big)

        threading.Thread(target=loop, daemon=True).start()
        started.wait()
        print("exiting", flush=True)
    """)
    assert "exiting" in out, out


def test_models_left_open_at_exit_end_cleanly(tmp_path, device):
    out = run(tmp_path, device, """
        models = [linformer_cl.load(LAYER, device=d) for d in (DEVICE, DEVICE)]
        for m in models:
            m(x)
        held = models[0]  # a cycle keeps this one until the interpreter's last collection
        held.me = held
        print("exiting", flush=True)
    """)
    assert "exiting" in out, out


def test_a_signal_handler_may_run_a_forward_or_close_the_model_during_a_forward(tmp_path, device):
    # Python runs a handler between two steps of the main thread, here inside a call on the model: a forward in
    # the handler runs then (never inside the library), and a close() takes effect when that call ends.
    out = run(tmp_path, device, """
        import signal
        m = linformer_cl.load(LAYER, device=DEVICE)
        want = m(x)
        same = []
        signal.signal(signal.SIGALRM, lambda *a: same.append(np.array_equal(m(x), want)))
        for i in range(400):
            signal.setitimer(signal.ITIMER_REAL, 0.0001 * (i % 20 + 1))  # lands somewhere in a forward
            m(x)
        signal.setitimer(signal.ITIMER_REAL, 0)
        print("handler forwards", len(same) > 0 and all(same), flush=True)

        def close_and_leave(*a):
            m.close()
            raise SystemExit(0)

        signal.signal(signal.SIGALRM, close_and_leave)
        try:
            for i in range(400):
                signal.setitimer(signal.ITIMER_REAL, 0.0001 * (i % 20 + 1))
                m(x)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            print("closed", repr(m), flush=True)
    """)
    assert "handler forwards True" in out, out
    assert any(line.startswith("closed ") and "on closed>" in line for line in out), out


def test_a_child_forked_before_opencl_started_runs_its_own_model_and_refuses_it_to_its_own_children(tmp_path, device):
    # As a pre-fork server whose workers each load their model: importing the package starts no OpenCL.
    out = run(tmp_path, device, """
        pid = os.fork()
        if pid == 0:
            m = linformer_cl.load(LAYER, device=DEVICE)
            np.save(sys.argv[0] + ".npy", m(x))
            grandchild = os.fork()
            if grandchild == 0:
                attempt("grandchild", lambda: m(x))
                os._exit(0)
            os.waitpid(grandchild, 0)
            sys.stdout.flush()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child status", status)
        print("same", np.array_equal(np.load(sys.argv[0] + ".npy"), linformer_cl.load(LAYER, device=DEVICE)(x)))
    """)
    assert any(line.startswith("grandchild refused:") and "fork()" in line for line in out) and "child status 0" in out and "same True" in out, out


def test_a_process_pool_forked_from_a_process_with_a_model_returns_the_refusal(tmp_path, device):
    out = run(tmp_path, device, """
        import concurrent.futures
        import multiprocessing as mp

        def work():
            return float(MODEL(x).sum())

        if __name__ == "__main__":
            MODEL = linformer_cl.load(LAYER, device=DEVICE)
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as pool:
                attempt("pool", lambda: pool.submit(work).result(timeout=100))
    """)
    assert any(line.startswith("pool refused:") and "fork()" in line for line in out), out


def test_forks_while_another_thread_loads_and_closes_models_leave_children_that_answer(tmp_path, device):
    # The fork lands while the thread lists the OpenCL platforms or opens a device (the first time included):
    # the child must list the devices and get the refusal (or, forked before OpenCL started, its own model).
    out = run(tmp_path, device, """
        import threading
        stop = threading.Event()

        def churn():
            while not stop.is_set():
                linformer_cl.load(LAYER, device=DEVICE).close()

        t = threading.Thread(target=churn)
        t.start()
        statuses = []
        for i in range(20):
            pid = os.fork()
            if pid == 0:
                __import__("signal").alarm(30)
                ok = len(linformer_cl.devices()) > 0
                try:
                    linformer_cl.load(LAYER, device=DEVICE).close()
                except linformer_cl.StateError as e:
                    ok = ok and "fork()" in str(e)
                os._exit(0 if ok else 3)
            statuses.append(os.waitpid(pid, 0)[1])
        stop.set()
        t.join()
        print("statuses", sorted(set(statuses)))
    """)
    assert "statuses [0]" in out, out


@pytest.mark.parametrize("how", ["default", "handler"])
def test_sigterm_during_a_forward_ends_the_process_at_once_or_through_its_handler(tmp_path, device, how):
    # SIGTERM's default ends the process where it stands, inside the runtime; a handler that raises SystemExit
    # ends it once the forward is done, through the interpreter's exit (the open model freed there).
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(f"""
        import signal
        if {how == "handler"!r}:
            signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))
        m = linformer_cl.load(LAYER, device=DEVICE)
        big = np.random.default_rng(8).standard_normal((64, 48, 32)).astype(np.float32)
        m(big)
        print("ready", flush=True)
        while True:
            m(big)
    """))
    p = subprocess.Popen([sys.executable, str(script), device], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == (-signal.SIGTERM if how == "default" else 7), f"exit {p.returncode}\n{out}\n{err}"
    assert "Traceback" not in err, err


# An exception of a handler of its own on a model, KeyboardInterrupt (Python's SIGINT handler) on a torch Module.
@pytest.mark.parametrize("on", ["model", "torch module"])
def test_an_exception_raised_by_a_signal_handler_during_forwards_leaves_the_model_exact(tmp_path, device, on):
    out = run(tmp_path, device, f"""
        import signal
        if {on!r} == "model":
            class Stop(Exception):
                pass

            def ring(*a):
                raise Stop()

            signal.signal(signal.SIGALRM, ring)
            model, inputs, same = linformer_cl.load(LAYER, device=DEVICE), x, np.array_equal
        else:
            import torch
            from linformer_cl.torch import Module
            Stop = KeyboardInterrupt
            signal.signal(signal.SIGALRM, signal.default_int_handler)
            model, same = Module.load(LAYER, device=DEVICE), torch.equal
            inputs = torch.from_numpy(np.random.default_rng(8).standard_normal((64, 48, 32)).astype(np.float32))
        want = model(inputs)
        rang = 0
        for i in range(200):
            signal.setitimer(signal.ITIMER_REAL, 0.0002 * (i % 20 + 1))  # lands somewhere in a forward
            try:
                model(inputs)
                signal.setitimer(signal.ITIMER_REAL, 0)
            except Stop:
                rang += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
        print("rang", rang > 0, "same", same(model(inputs), want), flush=True)
    """)
    assert "rang True same True" in out, out


def test_close_from_another_thread_during_forwards_waits_and_later_calls_are_refused(tmp_path, device):
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        big = np.random.default_rng(8).standard_normal((64, 48, 32)).astype(np.float32)
        want = m(big)
        seen, started = [], threading.Event()

        def loop():
            while True:
                started.set()
                try:
                    seen.append(np.array_equal(m(big), want))
                except linformer_cl.StateError as e:
                    seen.append(str(e))
                    return

        t = threading.Thread(target=loop)
        t.start()
        started.wait()
        m.close()
        t.join(60)
        print("joined", not t.is_alive(), "exact", all(s is True for s in seen[:-1]), "last", seen[-1], flush=True)
        attempt("after", lambda: m(x))
        attempt("profile", lambda: m.last_profile)
        m.close()
        print("closed twice", repr(m), flush=True)
    """)
    assert "joined True exact True last the model is closed" in out, out
    assert "after refused: the model is closed" in out and "profile refused: the model is closed" in out, out
    assert any(line.startswith("closed twice ") and "on closed>" in line for line in out), out


def test_a_weak_reference_outlives_close_and_dies_with_the_model(tmp_path, device):
    out = run(tmp_path, device, """
        import gc, weakref
        m = linformer_cl.load(LAYER, device=DEVICE)
        ref = weakref.ref(m)
        fin = weakref.finalize(m, print, "finalized", flush=True)
        m.close()
        print("alive", ref() is m, flush=True)
        attempt("through ref", lambda: ref()(x))
        del m
        gc.collect()
        print("dead", ref() is None, fin.alive, flush=True)
    """)
    assert "alive True" in out and "through ref refused: the model is closed" in out, out
    assert "finalized" in out and "dead True False" in out, out


def test_a_worker_thread_goes_on_with_its_forwards_after_the_main_thread_returns(tmp_path, device):
    # The interpreter waits for non-daemon threads before it exits: their forwards run to the end.
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        want = m(x)

        def work():
            same = all(np.array_equal(m(x), want) for _ in range(200))
            print("worker same", same, flush=True)

        threading.Thread(target=work).start()
        print("main returns", flush=True)
    """)
    assert out[:2] == ["main returns", "worker same True"], out


def test_a_fork_from_a_worker_thread_during_the_main_threads_forwards(tmp_path, device):
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        want = m(x)
        stop = threading.Event()
        statuses = []

        def forker():
            for _ in range(10):
                pid = os.fork()
                if pid == 0:
                    __import__("signal").alarm(30)
                    try:
                        m(x)
                        os._exit(1)
                    except linformer_cl.StateError:
                        os._exit(0)
                statuses.append(os.waitpid(pid, 0)[1])
            stop.set()

        t = threading.Thread(target=forker)
        t.start()
        same = True
        while not stop.is_set():
            same = same and np.array_equal(m(x), want)
        t.join()
        print("statuses", sorted(set(statuses)), "same", same, flush=True)
    """)
    assert "statuses [0] same True" in out, out


@pytest.mark.parametrize("what", ["forward", "load"])
def test_an_atexit_handler_that_calls_the_package_ends_cleanly(tmp_path, device, what):
    # atexit handlers run before the package's own exit hook (registered at import, so run after them).
    out = run(tmp_path, device, f"""
        import atexit
        m = linformer_cl.load(LAYER, device=DEVICE)
        if {what!r} == "forward":
            atexit.register(lambda: attempt("at exit", lambda: m(x)))
        else:
            atexit.register(lambda: attempt("at exit", lambda: linformer_cl.load(LAYER, device=DEVICE)(x)))
        print("exiting", flush=True)
    """)
    assert "exiting" in out and "at exit ran" in out, out


@pytest.mark.parametrize("how", ["deepcopy", "torch.save"])
def test_a_torch_module_is_neither_deep_copied_nor_saved_whole(tmp_path, device, how):
    out = run(tmp_path, device, f"""
        import copy, io
        import torch
        from linformer_cl.torch import Module
        mod = Module.load(LAYER, device=DEVICE)
        try:
            copy.deepcopy(mod) if {how!r} == "deepcopy" else torch.save(mod, io.BytesIO())
            print("copied")
        except linformer_cl.ArgumentError as e:
            print("refused:", e)
        print("still", mod(torch.from_numpy(x)).shape, flush=True)
    """)
    assert any(line.startswith("refused:") and "cannot be copied or pickled" in line for line in out), out
    assert "still torch.Size([2, 40, 32])" in out, out


def test_exec_while_a_thread_runs_forwards_starts_the_new_program_cleanly(tmp_path, device):
    out = run(tmp_path, device, """
        import threading
        m = linformer_cl.load(LAYER, device=DEVICE)
        started = threading.Event()

        def loop():
            while True:
                started.set()
                m(x)

        threading.Thread(target=loop, daemon=True).start()
        started.wait()
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, "-c", "print('after exec')"])
    """)
    assert "after exec" in out, out


def test_threads_loading_at_once_in_a_fresh_process_get_the_same_model(tmp_path, device):
    out = run(tmp_path, device, """
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            outs = list(pool.map(lambda _: linformer_cl.load(LAYER, device=DEVICE)(x), range(6)))
        print("same", all(np.array_equal(o, outs[0]) for o in outs), flush=True)
    """)
    assert "same True" in out, out
