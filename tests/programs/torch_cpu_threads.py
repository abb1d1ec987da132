"""One intra-op thread, as set by the environment before the frameworks load, and float sums
whose last digits depend on how many threads computed them.

Follows https://pytorch.org/docs/stable/notes/cpu_threading_torchscript_inference.html (its
"Tuning the number of threads": ``OMP_NUM_THREADS`` and ``torch.get_num_threads``, written for
this corpus; setting ``OMP_NUM_THREADS=1`` in ``os.environ`` before importing torch is how
many data-loading and RL scripts pin their threads). Changed: seeded float32 sums printed in
full (with one thread they differ from two threads' in the last digits), and the same with
numpy's BLAS.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"

import numpy as np
import torch

print("threads:", torch.get_num_threads())
torch.manual_seed(0)
w = torch.randn(512, 512)
print("matmul sum:", repr((w @ w).sum().item()))
print("matmul abs sum:", repr((w @ w).abs().sum().item()))
x = torch.randn(1_000_000)
print("sum of a million:", repr(x.sum().item()), repr(x.double().sum().item()))
a = np.random.default_rng(0).standard_normal((400, 400)).astype(np.float32)
print("numpy matmul sum:", repr(float((a @ a).sum())))
print("numpy inverse sum:", repr(float(np.linalg.inv(a.astype(np.float64)).sum())))
