"""Build the neural network: an nn.Module subclass, its layers, its parameters.

Follows https://pytorch.org/tutorials/beginner/basics/buildmodel_tutorial.html (its steps and
APIs, written for this corpus). Changed: a fixed seed; CPU only.
"""

import torch
from torch import nn


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


torch.manual_seed(0)
model = NeuralNetwork()
print(model)

X = torch.rand(1, 28, 28)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
print(f"Predicted class: {y_pred}")

input_image = torch.rand(3, 28, 28)
print(input_image.size())
flat_image = nn.Flatten()(input_image)
print(flat_image.size())
hidden1 = nn.Linear(in_features=28 * 28, out_features=20)(flat_image)
print(hidden1.size())
print(f"After ReLU: {nn.ReLU()(hidden1)[0, :4]}")

for name, param in model.named_parameters():
    print(f"Layer: {name} | Size: {param.size()} | Values : {param[:2]} \n")
print(isinstance(model, nn.Module), type(model).__name__)
