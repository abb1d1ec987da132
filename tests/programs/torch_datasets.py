"""Datasets and DataLoaders: a custom Dataset with transforms, iterated in batches.

Follows https://pytorch.org/tutorials/beginner/basics/data_tutorial.html (its steps and APIs,
written for this corpus). Changed: an in-memory dataset instead of image files on disk (no
download); top-level transform functions instead of torchvision's Lambda; a fixed seed.
"""

import torch
from torch.utils.data import DataLoader, Dataset


def normalize(image):
    return (image - image.mean()) / (image.std() + 1e-6)


def one_hot(label):
    return torch.zeros(10, dtype=torch.float).scatter_(0, torch.tensor(label), value=1)


class CustomImageDataset(Dataset):
    def __init__(self, images, labels, transform=None, target_transform=None):
        self.images = images
        self.img_labels = labels
        self.transform = transform
        self.target_transform = target_transform

    def __len__(self):
        return len(self.img_labels)

    def __getitem__(self, idx):
        image = self.images[idx]
        label = int(self.img_labels[idx])
        if self.transform:
            image = self.transform(image)
        if self.target_transform:
            label = self.target_transform(label)
        return image, label


torch.manual_seed(0)
images = torch.rand(100, 1, 28, 28)
labels = torch.randint(0, 10, (100,))
training_data = CustomImageDataset(images, labels, transform=normalize, target_transform=one_hot)
print(len(training_data))
image, label = training_data[3]
print(image.shape, round(image.mean().item(), 6), label)
train_dataloader = DataLoader(training_data, batch_size=16, shuffle=True)
train_features, train_labels = next(iter(train_dataloader))
print(f"Feature batch shape: {train_features.size()}")
print(f"Labels batch shape: {train_labels.size()}")
print(train_labels.argmax(1))
batches = [len(xb) for xb, yb in train_dataloader]
print(batches)
