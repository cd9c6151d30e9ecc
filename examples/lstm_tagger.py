"""A bidirectional LSTM sequence tagger on a synthetic task, over packed variable-length sequences.

    python examples/lstm_tagger.py            # 20 epochs of AdamW
    python examples/lstm_tagger.py --epochs 3

The sentences are random words from a small vocabulary. Most words have one tag, but the
"ambiguous" words take their tag from the word before them, so a tagger must read context.
Sentences of different lengths are padded, packed with pack_padded_sequence (unsorted), run
through the LSTM and unpacked; the loss ignores the padding. Accuracy is reported on held-out
sentences, overall and on the ambiguous words.
"""
import argparse
import time

import numpy as np

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F
from jitgrad.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

VOCAB, TAGS, AMBIGUOUS, PAD = 40, 5, 8, -100  # words 0..7 are ambiguous


def make_data(n, rng, min_len=4, max_len=16):
    """(padded words (n, L), padded tags (n, L) with PAD, lengths)."""
    word_tag = rng.integers(0, TAGS, VOCAB)
    lengths = rng.integers(min_len, max_len + 1, n)
    words = np.zeros((n, max_len), np.int64)
    tags = np.full((n, max_len), PAD, np.int64)
    for i, length in enumerate(lengths):
        w = rng.integers(0, VOCAB, length)
        t = word_tag[w].copy()
        amb = w < AMBIGUOUS
        t[1:][amb[1:]] = (word_tag[w[:-1]][amb[1:]] + 1) % TAGS  # the tag after the previous word's
        words[i, :length], tags[i, :length] = w, t
    return words, tags, lengths


class Tagger(nn.Module):
    def __init__(self, embed, hidden):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, TAGS)

    def forward(self, words, lengths):
        packed = pack_padded_sequence(self.embed(words), lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=words.shape[1])
        return self.out(hidden)


def accuracy(model, words, tags, lengths):
    with torch.no_grad():
        pred = model(torch.from_numpy(words), lengths).argmax(-1).numpy()
    real = tags != PAD
    amb = real & (words < AMBIGUOUS)
    amb[:, 0] = False  # a sentence's first word has no context
    return float((pred == tags)[real].mean()), float((pred == tags)[amb].mean())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--train", type=int, default=1024)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    words, tags, lengths = make_data(a.train + 256, rng)
    split = a.train
    torch.manual_seed(a.seed)
    model = Tagger(16, a.hidden)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    start = time.perf_counter()
    for epoch in range(1, a.epochs + 1):
        order = rng.permutation(split)
        total = 0.0
        for k in range(0, split, a.batch_size):
            idx = order[k:k + a.batch_size]
            logits = model(torch.from_numpy(words[idx]), lengths[idx])
            loss = F.cross_entropy(logits.reshape(-1, TAGS), torch.from_numpy(tags[idx].reshape(-1)),
                                   ignore_index=PAD)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        acc, amb = accuracy(model, words[split:], tags[split:], lengths[split:])
        print("epoch %2d  loss %.3f  held-out accuracy %.1f%% (ambiguous words %.1f%%)  %.1f s"
              % (epoch, total / split, 100 * acc, 100 * amb, time.perf_counter() - start))
    return {"loss": total / split, "accuracy": acc, "ambiguous_accuracy": amb}


if __name__ == "__main__":
    main()
