"""MNIST training as pytorch/examples writes it: an argument parser, ``train`` and ``test``
functions that take the device, the model, a loader and the optimizer, a Dataset with a random
augmentation, and an evaluation function decorated at module level with ``@torch.no_grad()``
that reads the parsed arguments, a global assigned later under ``__main__``.

Follows https://github.com/pytorch/examples/blob/main/mnist/main.py (its Net, train, test and
main, written for this corpus). Changed: synthetic MNIST-shaped data instead of the download
(a Dataset whose random horizontal flip uses the standard library's ``random``, seeded); a
smaller network; ``parse_args([])`` with smaller defaults; ``main()``'s body under
``__main__``; the final evaluation is a ``@torch.no_grad()`` function reading the global
``args``; CPU only; no scheduler.
"""

import argparse
import random

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, Dataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(2304, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


class SyntheticDigits(Dataset):
    """Digit-shaped images; ``flip`` mirrors an image at random, as an augmentation does."""

    def __init__(self, n, seed, flip):
        generator = torch.Generator().manual_seed(seed)
        self.images = torch.rand(n, 1, 28, 28, generator=generator)
        self.labels = torch.randint(0, 10, (n,), generator=generator)
        self.flip = flip

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        image = self.images[index]
        if self.flip and random.random() < 0.5:
            image = torch.flip(image, dims=[2])
        return image, self.labels[index]


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]"
                  f"\tLoss: {loss.item():.6f}")  # fmt: skip


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    n = len(test_loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{n}")


@torch.no_grad()
def evaluate(model, device, images):
    """Class scores of a batch, with the batch size the arguments ask for."""
    model.eval()
    scores = model(images[: args.test_batch_size].to(device)).exp()
    return scores.argmax(dim=1).tolist(), round(scores.max().item(), 4)


parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--test-batch-size", type=int, default=12)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=1.0)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--log-interval", type=int, default=3)

if __name__ == "__main__":
    args = parser.parse_args([])
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    device = torch.device("cpu")
    train_loader = DataLoader(SyntheticDigits(256, 1, flip=True), batch_size=args.batch_size)
    test_loader = DataLoader(SyntheticDigits(128, 2, flip=False), batch_size=64)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
    print(evaluate(model, device, test_loader.dataset.images))
    print("random after training:", random.random(), torch.get_rng_state().sum().item())
