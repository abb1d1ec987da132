"""Logistic regression on MNIST-shaped data, from raw tensors up to nn.Module, optim and
DataLoader, refactoring step by step.

Follows "What is torch.nn really?", https://pytorch.org/tutorials/beginner/nn_tutorial.html (its
steps and APIs, written for this corpus). Changed: synthetic MNIST-shaped data instead of the
download; fewer samples and epochs; a fixed seed.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
n_train, n_valid = 512, 128
x_all = torch.rand(n_train + n_valid, 784)
y_all = (x_all[:, :10].argmax(1)).long()
x_train, y_train = x_all[:n_train], y_all[:n_train]
x_valid, y_valid = x_all[n_train:], y_all[n_train:]
n, c = x_train.shape
print(x_train.shape, y_train.min(), y_train.max())

weights = torch.randn(784, 10) / math.sqrt(784)
weights.requires_grad_()
bias = torch.zeros(10, requires_grad=True)


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def model(xb):
    return log_softmax(xb @ weights + bias)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()


bs = 64
xb, yb = x_train[0:bs], y_train[0:bs]
preds = model(xb)
print(preds[0].shape, round(nll(preds, yb).item(), 5), accuracy(preds, yb))

lr = 0.5
for _ in range(2):
    for i in range((n - 1) // bs + 1):
        xb = x_train[i * bs : i * bs + bs]
        yb = y_train[i * bs : i * bs + bs]
        loss = nll(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
print(round(nll(model(xb), yb).item(), 5), accuracy(model(xb), yb))


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(784, 10)

    def forward(self, xb):
        return self.lin(xb)


def get_model():
    model = Mnist_Logistic()
    return model, optim.SGD(model.parameters(), lr=lr)


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss_batch(model, loss_func, xb, yb, opt)
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
        val_loss = sum(loss * num for loss, num in zip(losses, nums)) / sum(nums)
        print(epoch, round(val_loss, 5))


train_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=bs, shuffle=True)
valid_dl = DataLoader(TensorDataset(x_valid, y_valid), batch_size=bs * 2)
model, opt = get_model()
fit(3, model, F.cross_entropy, opt, train_dl, valid_dl)
