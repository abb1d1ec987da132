"""Word-level language modeling with an LSTM: a program of three files, ``main.py`` importing
its own ``data`` and ``model`` modules beside it, then rebinding ``model`` to the network
(``model = model.RNNModel(...)``) and using ``data`` as a local variable in its functions.

Follows https://github.com/pytorch/examples/blob/main/word_language_model/main.py (its
arguments, batchify, get_batch, repackage_hidden, train and evaluate loops, checkpointing
through an open file, written for this corpus). Changed: a small generated corpus written to
a temporary directory instead of Wikitext-2; a small LSTM, bptt and epochs; no timing or
ONNX export; the checkpoint in the temporary directory; CPU only.
"""

import argparse
import math
import os
import random
import tempfile

import data
import model
import torch
import torch.nn as nn

parser = argparse.ArgumentParser(description="PyTorch Wikitext-2 RNN/LSTM Language Model")
parser.add_argument("--data", type=str, default="./data/wikitext-2")
parser.add_argument("--model", type=str, default="LSTM")
parser.add_argument("--emsize", type=int, default=16)
parser.add_argument("--nhid", type=int, default=16)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=4)
parser.add_argument("--bptt", type=int, default=8)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--save", type=str, default="model.pt")
args = parser.parse_args([])

torch.manual_seed(args.seed)
device = torch.device("cpu")

words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "to", "big", "red", "house"]
generator = random.Random(args.seed)
directory = tempfile.mkdtemp()
for split, lines in (("train", 60), ("valid", 10), ("test", 10)):
    with open(os.path.join(directory, f"{split}.txt"), "w") as f:
        for _ in range(lines):
            f.write(" ".join(generator.choice(words) for _ in range(generator.randint(4, 9))))
            f.write("\n")
args.data = directory
args.save = os.path.join(directory, args.save)

###############################################################################
# Load data
###############################################################################

corpus = data.Corpus(args.data)


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts.
    nbatch = data.size(0) // bsz
    # Trim off any extra elements that wouldn't cleanly fit (remainders).
    data = data.narrow(0, 0, nbatch * bsz)
    # Evenly divide the data across the bsz batches.
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


eval_batch_size = 5
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)

###############################################################################
# Build the model
###############################################################################

ntokens = len(corpus.dictionary)
model = model.RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout
                       ).to(device)  # fmt: skip
criterion = nn.NLLLoss()

###############################################################################
# Training code
###############################################################################


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    # Turn on training mode which enables dropout.
    model.train()
    total_loss = 0.0
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        # Starting each batch, we detach the hidden state from how it was previously produced.
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            batches = len(train_data) // args.bptt
            print(f"| epoch {epoch:3d} | {batch:5d}/{batches:5d} batches | lr {lr:02.2f} "
                  f"| loss {cur_loss:5.2f} | ppl {math.exp(cur_loss):8.2f}")  # fmt: skip
            total_loss = 0


# Loop over epochs.
lr = args.lr
best_val_loss = None
print(f"{ntokens} tokens, train {tuple(train_data.shape)}, valid {tuple(val_data.shape)}")
for epoch in range(1, args.epochs + 1):
    train()
    val_loss = evaluate(val_data)
    print("-" * 89)
    print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | "
          f"valid ppl {math.exp(val_loss):8.2f}")  # fmt: skip
    print("-" * 89)
    # Save the model if the validation loss is the best we've seen so far.
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, "wb") as f:
            torch.save(model, f)
        best_val_loss = val_loss
    else:
        # Anneal the learning rate if no improvement has been seen in the validation dataset.
        lr /= 4.0

# Load the best saved model.
with open(args.save, "rb") as f:
    model = torch.load(f, weights_only=False)
    # after load the rnn params are not a continuous chunk of memory
    # this makes them a continuous chunk, and will speed up forward pass
    model.rnn.flatten_parameters()

# Run on test data.
test_loss = evaluate(test_data)
print("=" * 89)
print(f"| End of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
print("=" * 89)
print(type(model).__name__, type(model).__module__)
for name in os.listdir(directory):
    os.remove(os.path.join(directory, name))
os.rmdir(directory)
