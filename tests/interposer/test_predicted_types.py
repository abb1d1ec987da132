"""A pipelined call's result gets the type its call site returned before, so the prediction must
not outlive what decides the type: the arguments' types (``a.view(Sub)``, a subclass operand)."""

from __future__ import annotations

from tests.interposer.harness import WorkerHarness


def test_a_result_s_type_follows_its_arguments_types_when_pipelined(
    harness: WorkerHarness,
) -> None:
    out = harness.same_as_local(
        """
        import numpy as np

        class A(np.ndarray):
            pass

        class B(np.ndarray):
            pass

        for _ in range(3):  # the second round is pipelined
            a = np.arange(3).view(A)
            b = np.arange(3).view(B)
            print(type(a).__name__, type(b).__name__, type(a + b).__name__, type(b + a).__name__)
            print(type(np.arange(3) + b).__name__, type(a.view(np.ndarray)).__name__)
        """,
        "numpy",
    )
    assert out.splitlines()[-2:] == ["A B A B", "B ndarray"]
