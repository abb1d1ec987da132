"""Local callables the worker calls back: lambdas, closures, bound methods, callable objects
and partials as arguments, run here with their effects here, as locally (docs/remoting.md,
"Callables"; protocol in docs/data-plane.md, "Callbacks"). Each program runs remoted from a
Python without the framework and must print what it prints locally."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness

TRAINING = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    scale = 0.5

    def init(m):  # a closure: model.apply calls it back for every module
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, scale)
            nn.init.zeros_(m.bias)

    model.apply(init)
    shapes = []  # filled here by a forward hook that runs during remote forward passes
    hook = model[0].register_forward_hook(lambda mod, inp, out: shapes.append(tuple(out.shape)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda=lambda epoch: 0.5**epoch)
    data = TensorDataset(torch.arange(12.0).reshape(4, 3), torch.ones(4, 1))
    collate = lambda batch: (  # noqa: E731
        torch.stack([x for x, _ in batch]) / 10,
        torch.stack([y for _, y in batch]),
    )
    loader = DataLoader(data, batch_size=2, collate_fn=collate)
    for epoch in range(3):
        for x, y in loader:
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
        sched.step()
        print(epoch, round(loss.item(), 6), sched.get_last_lr(), len(shapes))
    hook.remove()
    model(torch.ones(1, 3))
    print(shapes[:2], len(shapes))

    @torch.no_grad()
    def evaluate(x):  # a nested function under a remote decorator
        return model(x).sum().item(), torch.is_grad_enabled()

    print(evaluate(torch.ones(2, 3)))


main()
"""


def test_a_training_program_s_lambdas_and_closures_run_as_locally(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(TRAINING)  # remote prints exactly what local prints
    shapes, evaluated = out.splitlines()[-2:]
    assert shapes == "[(2, 4), (2, 4)] 6"
    # The last bits of the sum depend on which of the CPU's vector units the BLAS takes.
    total, grad = evaluated.strip("()").split(", ")
    assert (round(float(total), 5), grad) == (1.34307, "False")


CALLABLES = """
import functools

import numpy as np

seen = []


class Accumulator:
    def __init__(self):
        self.total = 0

    def add(self, v):
        self.total += int(v)
        return v

    def __call__(self, v):
        return -v


class Mine(Exception):
    pass


def main():
    k = 3
    print(np.vectorize(lambda v: seen.append(int(v)) or v * k)(np.arange(4)).tolist(), seen)
    print(np.apply_along_axis(lambda row, f: f(row.sum()), 1, np.ones((2, 3)), lambda s: s + k))
    acc = Accumulator()
    print(np.vectorize(acc.add)(np.arange(5)).tolist(), acc.total)
    print(np.vectorize(acc)(np.arange(3)).tolist())
    print(np.vectorize(functools.partial(pow, 2))(np.arange(4)).tolist())
    # A callback that calls the worker, whose call calls back again.
    inner = lambda v: int(np.vectorize(lambda w: w + k)(np.arange(int(v))).sum())  # noqa: E731
    print(np.vectorize(inner)(np.arange(1, 4)).tolist())
    error = Mine("mine")

    def boom(v):
        raise error

    try:
        np.vectorize(boom)(np.arange(2))
    except Mine as e:
        print("the same exception object:", e is error)
    try:
        np.vectorize(lambda v: int("x"))(np.arange(2))
    except ValueError as e:
        print("ValueError", str(e).splitlines()[0])


main()
"""


def test_any_local_callable_is_called_back_with_its_effects_here(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(CALLABLES, remote="numpy")
    assert out.splitlines() == [
        "[0, 3, 6, 9] [0, 0, 1, 2, 3]",
        "[6. 6.]",
        "[0, 1, 2, 3, 4] 10",
        "[0, -1, -2]",
        "[1, 2, 4, 8]",
        "[3, 7, 12]",
        "the same exception object: True",
        "ValueError invalid literal for int() with base 10: 'x'",
    ]


GUARDED = """
def guarded(row, f):
    try:
        return f()
    except ValueError as e:
        return f"worker caught ValueError: {e}"
    except RuntimeError as e:
        return f"worker caught {type(e).__name__}"
"""


def test_the_worker_sees_a_callback_s_exception_as_its_type(harness: WorkerHarness) -> None:
    (harness.root / "guards.py").write_text(GUARDED)
    done = harness.script(
        """
        import numpy as np
        from guards import guarded


        class Local(Exception):
            pass


        def main():  # closures: called back, not shipped
            def bad_value():
                raise ValueError("no")

            def local():
                raise Local("ours")

            for f in (bad_value, local):
                print(np.apply_along_axis(guarded, 0, np.ones(1), f).item())


        main()
        """,
        remote="numpy,guards:guarded",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "worker caught ValueError: no",
        "worker caught ClientError",
    ]


def test_callbacks_are_released_and_calls_pipeline_again(harness: WorkerHarness) -> None:
    done = harness.script(
        """
        import gc

        import numpy as np
        from radium_interposer import callbacks

        for i in range(50):
            np.vectorize(lambda v: v + i)(np.arange(3))
        gc.collect()
        np.zeros(1)  # one more answer: it carries the worker's last releases
        print("held after 50 callbacks:", len(callbacks._table))
        """,
        remote="numpy",
    )
    assert done.returncode == 0, done.stderr
    held = int(done.stdout.split(":")[1])
    assert held <= 2, done.stdout  # the last vectorize object may still be referenced


THREADS = """
import threading

import torch

opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
calls = []
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: calls.append(e) or 1 / (e + 1))


def steps():  # another thread, another connection: the callback comes back on it
    for _ in range(3):
        sched.step()


worker = threading.Thread(target=steps)
worker.start()
worker.join()
print(calls, sched.get_last_lr())
"""


def test_a_callback_passed_on_one_thread_is_called_from_another(harness: WorkerHarness) -> None:
    out = harness.same_as_local(THREADS)
    assert out.strip() == "[0, 1, 2, 3] [0.25]"
