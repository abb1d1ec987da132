"""The data plane end to end between real processes: interposer clients and a lease worker."""

from __future__ import annotations

import json
import sys

from tests.interposer.harness import WorkerHarness


def test_numpy_absent_from_the_client_runs_on_the_worker(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import sys
        import numpy as np
        a = np.random.rand(300, 300)
        print(np.allclose(np.linalg.inv(a) @ a, np.eye(300)))
        print(a.shape, type(a.shape).__name__, len(a), round(np.pi, 5))
        from radium_interposer.proxy import fetch
        rows = fetch(np.arange(6).reshape(2, 3))
        print(rows, type(rows).__name__)
        print(repr(np.arange(3)), str(np.float64(2.5)), f"{np.float64(1) / 3:.3f}")
        print(2 * np.arange(3) - 1, -np.ones(2), np.arange(4)[1:3], 3 in np.arange(4))
        print([float(r.sum()) for r in np.arange(6).reshape(3, 2)])
        print("numpy" in sys.modules and type(sys.modules["numpy"]).__name__)
        """
    )
    assert out.splitlines() == [
        "True",
        "(300, 300) tuple 300 3.14159",
        "[[0, 1, 2], [3, 4, 5]] list",
        "array([0, 1, 2]) 2.5 0.333",
        "[-1  1  3] [-1. -1.] [1 2] True",
        "[1.0, 5.0, 9.0]",
        "RemoteModule",
    ]


def test_local_arrays_go_to_a_remoted_submodule(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import numpy as np
        assert type(np).__name__ == "module"           # numpy itself is local
        assert type(np.linalg).__name__ == "RemoteModule"
        rng = np.random.default_rng(7)
        a = rng.random((64, 64)) + 64 * np.eye(64)
        remote = np.linalg.inv(a)
        local = np.asarray(remote)
        print(local.dtype, local.shape, np.allclose(local @ a, np.eye(64)))
        print(np.allclose(np.linalg.solve(a, np.ones(64)), local @ np.ones(64)))
        """,
        remote="numpy.linalg",
        python=sys.executable,
    )
    assert out.splitlines() == ["float64 (64, 64) True", "True"]


def test_remote_exceptions_keep_their_type_and_traceback(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import numpy as np
        try:
            np.arange(6).reshape(4, 4)
        except ValueError as e:
            # Where it happened remotely is a note beside the message, never in it.
            notes = "".join(getattr(e, "__notes__", [])) or str(e.__cause__)
            print("ValueError", str(e).startswith("cannot reshape"), "Remote traceback" in notes,
                  "Remote traceback" in str(e))
        try:
            np.linalg.inv(np.zeros((2, 2)))
        except Exception as e:
            from radium_interposer.client import RemoteError
            print(type(e).__name__, isinstance(e, RemoteError), "Singular matrix" in str(e))
        try:
            np.arange(3).no_such_attribute
        except AttributeError as e:
            print("AttributeError", "no_such_attribute" in str(e))
        """
    )
    assert out.splitlines() == [
        "ValueError True True False",
        "LinAlgError True True",
        "AttributeError True",
    ]


def test_chains_are_pipelined_and_handles_are_freed(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import gc, json
        import numpy as np
        from radium_interposer import proxy
        x = np.ones(1000)
        for _ in range(1000):
            x = x + 1.0
        total = float(x.sum())
        gc.collect()
        s = proxy.stats()
        print(json.dumps({"total": total, "handles": s["handles"], "calls": s["calls"]}))
        """
    )
    report = json.loads(out)
    assert report["total"] == 1001.0 * 1000
    # 1000 pipelined additions, yet only the live proxies' objects remain on the worker.
    assert report["calls"] >= 1000
    assert report["handles"] <= 3


def test_threads_each_use_the_worker(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import threading
        import numpy as np
        shared = np.arange(10)
        errors, totals = [], []
        def work(k):
            try:
                s = 0
                for i in range(200):
                    s += int(np.add(k, i)) + int(shared[k])
                totals.append(s)
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(errors, sorted(totals) == sorted(200 * 2 * k + 19900 for k in range(8)))
        """
    )
    assert out.strip() == "[] True"
    assert harness.connections >= 8


def test_fork_child_uses_parent_handles_and_subprocess_python_loads_again(
    harness: WorkerHarness,
) -> None:
    out = harness.check(
        """
        import os, subprocess, sys
        import numpy as np
        h = np.arange(10) * 3
        pid = os.fork()
        if pid == 0:
            code = 0 if int(h.sum()) == 135 and int((h + 1)[2]) == 7 else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status), "parent", int(h[9]))
        child = subprocess.run([sys.executable, "-c", "import numpy; print(numpy.eye(2).sum())"],
                               capture_output=True, text=True)
        print("subprocess", child.stdout.strip(), child.returncode)
        """
    )
    assert out.splitlines() == ["child 0 parent 27", "subprocess 2.0 0"]


def test_user_function_is_shipped_and_its_output_forwarded(harness: WorkerHarness) -> None:
    app = harness.root / "app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "model.py").write_text(
        "import os\n"
        "def train_step(weights, rate):\n"
        "    print('step on', os.environ.get('RADIUM_WORKER_MARK', 'worker'))\n"
        "    return [w - rate * w for w in weights], os.getpid()\n"
    )
    split = harness.root / "split.toml"
    split.write_text('# what runs remotely\nfunctions = ["app.model:train_step"]\n')
    out = harness.check(
        """
        import os
        from app.model import train_step
        weights, pid = train_step([1.0, 2.0], 0.5)
        print(weights, pid != os.getpid(), train_step.__name__)
        """,
        remote="",
        RADIUM_SPLIT=str(split),
    )
    assert out.splitlines() == ["step on worker", "[0.5, 1.0] True train_step"]
    assert not (harness.root / "worker" / "app").exists()
    assert "loaded shipped module app.model" in harness.log()


def test_a_crashed_worker_fails_calls_fast(harness: WorkerHarness) -> None:
    out = harness.check(
        """
        import time
        import ctypes  # remoted: the worker segfaults reading address 0
        from radium_interposer.client import WorkerGone
        started = time.monotonic()
        try:
            ctypes.string_at(0)
        except WorkerGone as e:
            print("gone", "crashed" in str(e), time.monotonic() - started < 30)
        try:
            ctypes.sizeof(ctypes.c_int)
        except WorkerGone:
            print("still gone")
        """,
        remote="ctypes",
    )
    assert out.splitlines() == ["gone True True", "still gone"]
    assert harness.worker.wait(timeout=10) < 0


def test_bad_remote_list_does_not_break_python(harness: WorkerHarness) -> None:
    done = harness.run("print('still runs')", remote="numpy,not a module!")
    assert done.returncode == 0
    assert done.stdout == "still runs\n"
    assert "radium: remoting is off: 'not a module!' is neither a module" in done.stderr
