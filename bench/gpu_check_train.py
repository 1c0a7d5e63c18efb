"""The training bench/gpu_check.sh runs on a real GPU under `traceml run`.

It times every phase itself with torch.cuda.Event on the current stream
(the same boundaries TraceML uses: the fetch before the step, the copy to
the GPU, forward, backward, optimizer step) and writes the medians over
the steps after warm-up to --out, so the script can compare them with
TraceML's GPU-clock figures. Two ways to make it slow:
  --loader-sleep-ms N   each batch sleeps N ms in the DataLoader (input-bound)
  --batch-mb N          each batch is N MiB of pageable host memory copied
                        with .to(device) (H2D-bound)
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import traceml_ai as traceml


class Synthetic(Dataset):
    def __init__(self, n, numel, sleep_s):
        self.n, self.numel, self.sleep_s = n, numel, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.randn(self.numel)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--loader-sleep-ms", type=float, default=0.0)
    p.add_argument("--batch-mb", type=float, default=4.0)
    p.add_argument("--out", required=True)
    p.add_argument("--ddp", action="store_true",
                   help="wrap the model in DDP over NCCL (run under --nproc-per-node 1): "
                        "communication timing through the comm hook on CUDA futures")
    a = p.parse_args()
    traceml.init(mode="auto")
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group("nccl")
    dev = torch.device("cuda", 0)
    numel = int(a.batch_mb * 1024 * 1024 / 4)
    width = 4096
    loader = DataLoader(Synthetic(a.steps, numel, a.loader_sleep_ms / 1000.0),
                        batch_size=None, num_workers=0)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)).to(dev)
    if a.ddp:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    names = ("input", "h2d", "forward", "backward", "optimizer", "step")
    times = {k: [] for k in names}

    def ev():
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    it = iter(loader)
    marks = []
    for _ in range(a.steps):
        e_in0 = ev()
        try:
            x = next(it)
        except StopIteration:
            break
        e_in1 = ev()
        with traceml.trace_step(model):
            e0 = ev()
            x = x.to(dev)
            e1 = ev()
            y = model(x[: (x.numel() // width) * width].view(-1, width)[:64])
            e2 = ev()
            loss = y.float().pow(2).mean()
            loss.backward()
            e3 = ev()
            opt.step()
            opt.zero_grad(set_to_none=True)
            e4 = ev()
        marks.append((e_in0, e_in1, e0, e1, e2, e3, e4))
    torch.cuda.synchronize()   # the script's own check, after the run
    for (i0, i1, e0, e1, e2, e3, e4) in marks[len(marks) // 10:]:
        times["input"].append(i0.elapsed_time(i1))
        times["h2d"].append(e0.elapsed_time(e1))
        times["forward"].append(e1.elapsed_time(e2))
        times["backward"].append(e2.elapsed_time(e3))
        times["optimizer"].append(e3.elapsed_time(e4))
        times["step"].append(i0.elapsed_time(i1) + e0.elapsed_time(e4))
    out = {k + "_ms": statistics.mean(v) for k, v in times.items() if v}
    if a.ddp:
        torch.distributed.destroy_process_group()
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
