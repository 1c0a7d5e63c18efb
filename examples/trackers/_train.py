"""A small training loop shared by the tracker examples (a stand-in for
yours): an MLP on random data, with a DataLoader that sleeps a little per
batch so the summary has something to say.

TRACKERS_STEPS (default 200) steps; TRACKERS_DELAY_MS (default 3) ms of
sleep per batch, the known cause the tests check the logged Input Wait
against."""
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, default_collate

STEPS = int(os.environ.get("TRACKERS_STEPS", "200"))
DELAY_S = float(os.environ.get("TRACKERS_DELAY_MS", "3")) / 1000.0


def slow_collate(samples):
    time.sleep(DELAY_S)
    return default_collate(samples)


def setup():
    torch.manual_seed(0)
    x = torch.randn(STEPS * 16, 32)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=16, collate_fn=slow_collate)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return loader, model, opt, nn.CrossEntropyLoss()
