"""Saving and loading models: a state_dict, a whole checkpoint, and an in-memory buffer, through
file objects the program opened itself.

Follows https://pytorch.org/tutorials/beginner/saving_loading_models.html (its model, its
steps and APIs, written for this corpus). Changed: the checkpoint files are opened by the
program (``open(path, "wb")``, as the tutorial's "Saving & Loading Model Across Devices" and
many training scripts do) and one goes through ``io.BytesIO``; a temporary directory; a fixed
seed; two training steps instead of a training loop.
"""

import io
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn, optim


class TheModelClass(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


torch.manual_seed(0)
model = TheModelClass()
optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
inputs, labels = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
for epoch in range(2):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(inputs), labels)
    loss.backward()
    optimizer.step()
    print(epoch, round(loss.item(), 6))

print("Model's state_dict:")
for param_tensor in model.state_dict():
    print(param_tensor, "\t", tuple(model.state_dict()[param_tensor].size()))
print("Optimizer's state_dict keys:", sorted(optimizer.state_dict()["param_groups"][0]))

with tempfile.TemporaryDirectory() as directory:
    path = os.path.join(directory, "model.pt")
    with open(path, "wb") as f:
        torch.save(model.state_dict(), f)
    print("saved", os.path.getsize(path) > 0)
    restored = TheModelClass()
    with open(path, "rb") as f:
        print(restored.load_state_dict(torch.load(f, weights_only=True)))
    restored.eval()
    print(torch.equal(restored(inputs), model.eval()(inputs)))

    checkpoint = os.path.join(directory, "checkpoint.tar")
    f = open(checkpoint, "wb")  # noqa: SIM115 - an open file handed to torch.save, as scripts do
    torch.save({"epoch": 2, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "loss": loss}, f)  # fmt: skip
    f.close()
    with open(checkpoint, "rb") as f:
        loaded = torch.load(f, weights_only=True)
    model2 = TheModelClass()
    optimizer2 = optim.SGD(model2.parameters(), lr=0.001, momentum=0.9)
    model2.load_state_dict(loaded["model_state_dict"])
    optimizer2.load_state_dict(loaded["optimizer_state_dict"])
    print(loaded["epoch"], round(loaded["loss"].item(), 6), optimizer2.state_dict()["state"].keys())

buffer = io.BytesIO()
torch.save(model.state_dict(), buffer)
print("buffer holds bytes:", buffer.tell() > 0)
buffer.seek(0)
state = torch.load(buffer, weights_only=True)
print(sorted(state)[:3], state["fc3.bias"].shape, torch.equal(state["fc3.bias"], model.fc3.bias))
