"""A dynamic network: each forward pass draws, with the standard library's ``random``, how many
higher-order terms to use, reusing one weight for all of them.

Follows "PyTorch: Control Flow + Weight Sharing",
https://pytorch.org/tutorials/beginner/examples_nn/dynamic_net.html (its model and loop,
written for this corpus). Changed: ``random.seed(0)`` and ``torch.manual_seed(0)`` (the
tutorial is unseeded); 300 steps instead of 30000; the drawn term counts are printed.
"""

import math
import random

import torch


class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))
        self.e = torch.nn.Parameter(torch.randn(()))
        self.terms = []

    def forward(self, x):
        y = self.a + self.b * x + self.c * x**2 + self.d * x**3
        drawn = random.randint(4, 6)
        self.terms.append(drawn)
        for exp in range(4, drawn):
            y = y + self.e * x**exp
        return y

    def string(self):
        return (
            f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + "
            f"{self.d.item()} x^3 + {self.e.item()} x^4 ? + {self.e.item()} x^5 ?"
        )


random.seed(0)
torch.manual_seed(0)
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
model = DynamicNet()
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(300):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"Result: {model.string()}")
print("terms drawn:", model.terms[:12], sum(model.terms))
print("the program's generator goes on:", random.random())
