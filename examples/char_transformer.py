"""A character-level transformer language model on a short text that ships with the examples.

    python examples/char_transformer.py                 # 4 blocks, d_model 64, 300 steps of AdamW
    python examples/char_transformer.py --steps 50 --layers 2

Each step trains on a batch of random windows of the text (next character prediction with a causal
mask); the loss is printed every few steps, then the model continues a prompt, sampling one
character at a time.
"""
import argparse
import os
import time

import numpy as np

import jitgrad as torch
import jitgrad.nn as nn
import jitgrad.nn.functional as F

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lighthouse.txt")


class CharTransformer(nn.Module):
    """Token and position embeddings, pre-norm causal transformer blocks, a final norm and a linear head."""

    def __init__(self, vocab, context, d_model, heads, layers):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(context, d_model)
        block = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))


def batches(data, context, batch, rng):
    """Random windows of the encoded text: inputs and the next characters."""
    while True:
        starts = rng.integers(0, len(data) - context - 1, batch)
        x = np.stack([data[s:s + context] for s in starts])
        y = np.stack([data[s + 1:s + context + 1] for s in starts])
        yield torch.from_numpy(x), torch.from_numpy(y)


def sample(model, prompt, stoi, itos, length, rng):
    idx = [stoi[c] for c in prompt]
    with torch.no_grad():
        for _ in range(length):
            window = torch.tensor([idx[-model.context:]])
            probs = F.softmax(model(window)[0, -1], dim=-1).numpy().astype(np.float64)
            idx.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    return "".join(itos[i] for i in idx)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", type=int, default=200, help="characters to generate after training")
    a = p.parse_args(argv)
    text = open(TEXT, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    model = CharTransformer(len(chars), a.context, a.d_model, a.heads, a.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    print("%d characters, vocabulary %d, %d parameters" % (len(text), len(chars),
                                                          sum(p.numel() for p in model.parameters())))
    losses, start = [], time.perf_counter()
    for step, (x, y) in zip(range(1, a.steps + 1), batches(data, a.context, a.batch_size, rng)):
        loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % max(1, a.steps // 10) == 0 or step == a.steps:
            print("step %4d  loss %.3f  (%.1f s)" % (step, np.mean(losses[-10:]), time.perf_counter() - start))
    model.eval()
    text_out = sample(model, "The keeper ", stoi, itos=chars, length=a.sample, rng=rng) if a.sample else ""
    if text_out:
        print("---\n" + text_out)
    return {"losses": losses, "uniform_loss": float(np.log(len(chars))), "sample": text_out}


if __name__ == "__main__":
    main()
