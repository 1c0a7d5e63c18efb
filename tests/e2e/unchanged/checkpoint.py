"""A word-language-model loop as pytorch/examples writes it, with no
TraceML in it: a hand-written SGD update (no optimizer), torch.save(model)
of the best model, reloaded at the end with torch.load's default loader
(weights_only=True, the model's classes allowed as safe globals), then a
test evaluation. Also copy.deepcopy, torch.jit.script and torch.export of
the trained model. Writes what it saw to --out: the checkpoint's bytes
(hash), the reloaded model's test loss, and what each of the others gave.
"""
import argparse
import copy
import hashlib
import io
import json
import math
from typing import Tuple

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--model", default="LSTM", choices=["LSTM", "Transformer"])
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--batches", type=int, default=30)
p.add_argument("--save", required=True)
p.add_argument("--out", required=True)
a = p.parse_args()

NTOKENS, EMB, SEQ, BATCH = 50, 32, 12, 8


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(NTOKENS, EMB)
        self.rnn = nn.LSTM(EMB, EMB, 1)
        self.decoder = nn.Linear(EMB, NTOKENS)

    def forward(self, x: torch.Tensor, hidden: Tuple[torch.Tensor, torch.Tensor]):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(1, bsz, EMB), w.new_zeros(1, bsz, EMB))


class TransformerModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(NTOKENS, EMB)
        layer = nn.TransformerEncoderLayer(EMB, 2, 64, dropout=0.0)
        self.transformer = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.decoder = nn.Linear(EMB, NTOKENS)

    def forward(self, x):
        return self.decoder(self.transformer(self.encoder(x)))


torch.manual_seed(0)
data = torch.randint(0, NTOKENS, (a.batches * SEQ + 1, BATCH))
model = RNNModel() if a.model == "LSTM" else TransformerModel()
criterion = nn.CrossEntropyLoss()


def example(m):
    x = data[:SEQ]
    return (x, m.init_hidden(BATCH)) if a.model == "LSTM" else (x,)


def first(out):
    return out[0] if isinstance(out, tuple) else out


def evaluate(m):
    m.eval()
    total = 0.0
    with torch.no_grad():
        hidden = m.init_hidden(BATCH) if a.model == "LSTM" else None
        for i in range(0, a.batches * SEQ, SEQ):
            x, y = data[i:i + SEQ], data[i + 1:i + 1 + SEQ]
            out = m(x, hidden)[0] if a.model == "LSTM" else m(x)
            total += criterion(out.view(-1, NTOKENS), y.reshape(-1)).item()
    return total / a.batches


best, lr = None, 2.0
for epoch in range(a.epochs):
    model.train()
    hidden = model.init_hidden(BATCH) if a.model == "LSTM" else None
    for i in range(0, a.batches * SEQ, SEQ):
        x, y = data[i:i + SEQ], data[i + 1:i + 1 + SEQ]
        model.zero_grad()
        if a.model == "LSTM":
            hidden = tuple(h.detach() for h in hidden)
            out, hidden = model(x, hidden)
        else:
            out = model(x)
        loss = criterion(out.view(-1, NTOKENS), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for w in model.parameters():
            w.data.add_(w.grad, alpha=-lr)
    val = evaluate(model)
    print("| end of epoch %d | valid loss %.4f | valid ppl %.2f" % (epoch + 1, val, math.exp(val)))
    if best is None or val < best:
        with open(a.save, "wb") as f:
            torch.save(model, f)
        best = val

out = {}
trained = model
with open(a.save, "rb") as f:
    out["checkpoint_sha1"] = hashlib.sha1(f.read()).hexdigest()
safe = [RNNModel, TransformerModel, nn.Embedding, nn.LSTM, nn.Linear, nn.TransformerEncoder,
        nn.TransformerEncoderLayer, nn.MultiheadAttention,
        nn.modules.linear.NonDynamicallyQuantizableLinear, nn.LayerNorm, nn.Dropout,
        nn.ModuleList, torch.nn.functional.relu, set]
with torch.serialization.safe_globals(safe):
    with open(a.save, "rb") as f:
        model = torch.load(f)          # the default loader: weights_only=True
test = evaluate(model)
print("| End of training | test loss %.4f | test ppl %.2f" % (test, math.exp(test)))
out["test_loss"] = round(test, 6)
sd = io.BytesIO()
torch.save(trained.state_dict(), sd)
out["state_dict_sha1"] = hashlib.sha1(sd.getvalue()).hexdigest()
twin = copy.deepcopy(trained)
out["deepcopy_attributes"] = sorted(vars(twin))
out["deepcopy_loss"] = round(evaluate(twin), 6)
trained.eval()
with torch.no_grad():
    want = first(trained(*example(trained)))
try:
    scripted = torch.jit.script(trained)
    with torch.no_grad():
        out["jit_script"] = torch.allclose(first(scripted(*example(trained))), want, atol=1e-5)
except Exception as e:
    out["jit_script"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
try:
    ep = torch.export.export(trained, example(trained))
    with torch.no_grad():
        out["export"] = torch.allclose(first(ep.module()(*example(trained))), want, atol=1e-5)
except Exception as e:
    out["export"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
with open(a.out, "w") as f:
    json.dump(out, f, sort_keys=True)
