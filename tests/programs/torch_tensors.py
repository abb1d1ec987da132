"""Tensors: creation, attributes, operations, the numpy bridge.

Follows https://pytorch.org/tutorials/beginner/basics/tensorqs_tutorial.html (its steps and APIs,
written for this corpus). Changed: a fixed seed; no CUDA branch.
"""

import numpy as np
import torch

torch.manual_seed(0)
data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)
x_np = torch.from_numpy(np.array(data))
x_ones = torch.ones_like(x_data)
x_rand = torch.rand_like(x_data, dtype=torch.float)
print(f"Ones Tensor:\n {x_ones}\n")
print(f"Random Tensor:\n {x_rand}\n")
print(x_np.dtype, x_data.equal(x_np))

shape = (2, 3)
for name, tensor in (
    ("rand", torch.rand(shape)),
    ("ones", torch.ones(shape)),
    ("zeros", torch.zeros(shape)),
):
    print(name, tensor)

tensor = torch.rand(3, 4)
print(f"Shape of tensor: {tensor.shape}")
print(f"Datatype of tensor: {tensor.dtype}")
print(f"Device tensor is stored on: {tensor.device}")

tensor = torch.ones(4, 4)
print(f"First row: {tensor[0]}")
print(f"First column: {tensor[:, 0]}")
print(f"Last column: {tensor[..., -1]}")
tensor[:, 1] = 0
print(tensor)
t1 = torch.cat([tensor, tensor, tensor], dim=1)
print(t1)

y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.rand_like(y1)
torch.matmul(tensor, tensor.T, out=y3)
z1 = tensor * tensor
z3 = torch.rand_like(tensor)
torch.mul(tensor, tensor, out=z3)
print(y1.equal(y2), y2.equal(y3), z1.equal(z3))

agg = tensor.sum()
agg_item = agg.item()
print(agg_item, type(agg_item))
print(f"{tensor} \n")
tensor.add_(5)
print(tensor)

t = torch.ones(5)
n = t.numpy()
t.add_(1)
print(f"t: {t}")
print(f"n: {n}")
n = np.ones(5)
t = torch.from_numpy(n)
np.add(n, 1, out=n)
print(f"t: {t}")
print(f"n: {n}")
