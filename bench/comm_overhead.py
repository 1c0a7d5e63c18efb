"""What timing DDP's communication costs: TraceML's comm hook per gradient
bucket, and per step of a small 2-rank DDP run.

    OMP_NUM_THREADS=1 .venv/bin/python bench/comm_overhead.py [--repeats 2] [--steps 15]

TraceML times DDP's gradient buckets with a communication hook
(python/traceml_ai/_comm.py, _timed_hook): it reads the clock, counts the
bucket's bytes, calls the all-reduce hook it stands for (DDP's
default_hooks.allreduce_hook) and chains a C callback (_c._comm_done) to
the future. Without TraceML (TRACEML_DISABLED=1) DDP runs its builtin C++
all-reduce, no Python at all. Measured here, on 2 ranks of gloo on CPU
(`traceml run --nproc-per-node 2`, OMP_NUM_THREADS=1, one torch thread):

  buckets   a DDP model of 50 parameters of 1024 floats (4 KB) with
            bucket_cap_mb so small that every parameter is its own bucket
            (50 all-reduces per step, read back from the reducer),
            forward + backward in trace_step (no optimizer), --steps
            steps per block. Three such models in every launch: `hook`,
            the one DDP built (TraceML's hook attached when TraceML is on);
            `builtin`, kept on DDP's builtin C++ all-reduce; `pyhook`, DDP's
            own Python allreduce_hook registered without TraceML's wrapper
            (what any Python comm hook costs). Pairings:
              process     fresh launches alternating TraceML and
                          TRACEML_DISABLED=1 (--repeats pairs; per launch
                          the median of its `hook` blocks), differences of
                          the paired launches;
              in-process  the same processes (the TraceML launches),
                          rounds of one block of each model in rotating
                          order, differences within a round: hook -
                          builtin (TraceML's whole cost per bucket), pyhook
                          - builtin (DDP's Python-hook path), hook - pyhook
                          (TraceML's wrapper beyond it). In the
                          TRACEML_DISABLED=1 launches `hook` is builtin
                          too: hook - builtin there is the A/A noise floor,
                          and pyhook - builtin there is DDP's Python hook
                          with no TraceML at all (in the TraceML launches
                          pyhook's dist.all_reduce goes through TraceML's
                          collective wrapper, timed as an async collective).
            Added us per step / buckets per step = us per bucket.
  glue      the hook's own cost with no network: _timed_hook on a fake
            bucket whose inner hook, like DDP's allreduce_hook, calls an
            all-reduce (a stand-in returning an already completed
            torch.futures.Future, so the C callback runs inline) through
            TraceML's collective wrapper (which counts the bucket's bytes),
            against the inner hook calling the bare stand-in directly;
            tight loops of 20,000 calls, alternating, median of 15 pairs,
            thread CPU time.
  mlp       a realistic step: an MLP (256-512-512-10, batch 64, SGD),
            default buckets, forward + backward + optimizer step in
            trace_step; process pairing, TraceML against TRACEML_DISABLED=1
            (with TraceML everything auto mode patches is on: this is
            TraceML's whole per-step cost in a DDP loop, not the hook's).

Time per step on rank 0: wall time (the ranks wait for each other in
every all-reduce) and the process's CPU time (the hook runs on the
training thread, its callback on gloo's; on a loaded machine CPU time
keeps the other tenants' share out, wall time does not). Target (issue "communication as a phase"): <= 5 us per bucket.
About 2-3 minutes with the defaults on 2 idle vCPUs (each launch imports
torch in both ranks; most of the time); twice that on a loaded machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# the e2e tests' helper: a port P with P and P + 1 free
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from conftest import free_port_pair  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("TRACEML_VENV", os.path.join(REPO, ".venv"))
TRACEML = os.environ.get("TRACEML_BIN", os.path.join(VENV, "bin", "traceml"))

N_PARAMS, PARAM_FLOATS = 50, 1024
BUCKET_CAP_MB = 0.001            # ~1 KB: every 4 KB parameter is a bucket of its own
MLP = (64, 256, 512, 10)         # batch, in, hidden, out
ROUNDS = 4                       # per launch, blocks of each bucket model
MLP_BLOCKS = 4
WARMUP = 5


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


# --------------------------------------------------------------------------
# One rank (run under traceml run --nproc-per-node 2; configured by env)

def worker():
    import torch
    import torch.distributed as dist
    from torch import nn
    import traceml_ai as traceml

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    traceml.init(mode="auto")
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank = dist.get_rank()
    steps = int(os.environ["COMM_BENCH_STEPS"])
    traced = not traceml._env_disabled()

    class Params(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.ps = nn.ParameterList(
                [nn.Parameter(torch.randn(PARAM_FLOATS)) for _ in range(N_PARAMS)])

        def forward(self, x):
            out = None
            for p in self.ps:
                y = (p * x).sum()
                out = y if out is None else out + y
            return out

    # the model DDP builds (TraceML's hook attached when TraceML is on),
    # one that stays on DDP's builtin C++ all-reduce, and one with DDP's own
    # Python allreduce_hook registered without TraceML's wrapper (what any
    # Python comm hook costs). The attribute TraceML checks (_comm.attach)
    # says "already done", so neither DDP's constructor nor trace_step's
    # first sight of the model attaches TraceML's hook to those two.
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    init = getattr(DDP.__init__, "__wrapped__", DDP.__init__)
    register = DDP.register_comm_hook
    if traced:
        from traceml_ai import _comm
        register = _comm._ORIG.get("register_comm_hook", register)

    def untimed():
        m = DDP.__new__(DDP)
        object.__setattr__(m, "_traceml_comm_hook", False)
        init(m, Params(), bucket_cap_mb=BUCKET_CAP_MB)
        return m

    models = {"hooked": DDP(Params(), bucket_cap_mb=BUCKET_CAP_MB), "builtin": untimed(),
              "pyhook": untimed()}
    register(models["pyhook"], None, default_hooks.allreduce_hook)
    has_hook = getattr(models["hooked"], "_traceml_comm_hook", None) not in (None, False)
    assert has_hook == traced, (has_hook, traced)
    x = torch.randn(PARAM_FLOATS)

    def run_buckets(model, n):
        for _ in range(n):
            with traceml.trace_step(model):
                model(x).backward()

    def block(fn, model, n):
        """(wall us, this process's CPU us) per step"""
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        fn(model, n)
        t1, c1 = time.perf_counter(), time.process_time()
        dist.barrier()
        return ((t1 - t0) / n * 1e6, (c1 - c0) / n * 1e6)

    for m in models.values():
        run_buckets(m, WARMUP)           # DDP rebuilds its buckets after the first step
    res = {"traced": traced, "rounds": []}
    res["buckets_per_step"] = {}
    for name, m in models.items():
        try:
            res["buckets_per_step"][name] = len(m.reducer._get_zeros_like_grad_buckets())
        except Exception:
            res["buckets_per_step"][name] = N_PARAMS
    names = list(models)
    for k in range(ROUNDS):              # rounds of the three, the order rotating
        order = names[k % 3:] + names[:k % 3]
        res["rounds"].append({n: block(run_buckets, models[n], steps) for n in order})

    torch.manual_seed(1)
    b, din, h, dout = MLP
    net = DDP(nn.Sequential(nn.Linear(din, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                            nn.Linear(h, dout)))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    xs, ys = torch.randn(b, din), torch.randint(0, dout, (b,))
    loss_fn = nn.CrossEntropyLoss()

    def run_mlp(model, n):
        for _ in range(n):
            with traceml.trace_step(model):
                opt.zero_grad(set_to_none=True)
                loss_fn(model(xs), ys).backward()
                opt.step()

    run_mlp(net, WARMUP)
    res["mlp"] = [block(run_mlp, net, steps) for _ in range(MLP_BLOCKS)]
    try:
        res["mlp_buckets_per_step"] = len(net.reducer._get_zeros_like_grad_buckets())
    except Exception:
        res["mlp_buckets_per_step"] = None
    if rank == 0:
        with open(os.environ["COMM_BENCH_OUT"], "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


# --------------------------------------------------------------------------
# The hook's glue alone (one process, no process group)

def glue(iters, repeats):
    import torch
    import traceml_ai as traceml
    from traceml_ai import _comm

    torch.set_num_threads(1)
    traceml.init(mode="auto")
    assert _comm._c is not None, "traceml.init did not install _comm"

    class Bucket(object):
        def __init__(self, t):
            self._t = t

        def buffer(self):
            return self._t

    bucket = Bucket(torch.zeros(PARAM_FLOATS))
    Future = torch.futures.Future

    class Work(object):              # an all-reduce that has already completed
        def __init__(self, t):
            self.f = Future()
            self.f.set_result(t)

        def get_future(self):
            return self.f

    def all_reduce(tensor, op=None, group=None, async_op=False):
        return Work(tensor)

    wrapped = _comm._wrap_collective(all_reduce, ("tensor",), _comm._sent_allreduce)

    def inner(state, b):             # DDP's allreduce_hook, through TraceML's wrapper
        return wrapped(b.buffer(), group=state, async_op=True).get_future()

    def bare(state, b):
        return all_reduce(b.buffer(), group=state, async_op=True).get_future()

    holder = _comm._Holder(None, inner, 2)
    hook = _comm._timed_hook
    assert hook(holder, bucket).value() is bucket.buffer()
    assert _comm._hook_sent == PARAM_FLOATS * 4, _comm._hook_sent

    def with_hook(n):
        for _ in range(n):
            hook(holder, bucket)

    def direct(n):
        for _ in range(n):
            bare(None, bucket)

    def timed(fn):
        t0 = time.thread_time_ns()
        fn(iters)
        return (time.thread_time_ns() - t0) / iters / 1000.0

    with_hook(iters // 10)
    direct(iters // 10)
    on, off, diffs = [], [], []
    for k in range(repeats):
        if k % 2:
            b = timed(direct)
            a = timed(with_hook)
        else:
            a = timed(with_hook)
            b = timed(direct)
        on.append(a)
        off.append(b)
        diffs.append(a - b)
    traceml._stop()
    return {"on": on, "off": off, "diffs": diffs}


# --------------------------------------------------------------------------
# The driver

def base_env(**extra):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("TRACEML_") and k != "TRACEML_PYTHON":
            del env[k]
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def launch(traced, steps, tmp, idx):
    out = os.path.join(tmp, "rank0-%d.json" % idx)
    env = base_env(COMM_BENCH_WORKER="1", COMM_BENCH_OUT=out, COMM_BENCH_STEPS=steps)
    if not traced:
        env["TRACEML_DISABLED"] = "1"
    cmd = [TRACEML, "run", "--logs-dir", os.path.join(tmp, "logs"),
           "--run-name", "comm%d" % idx, "--nproc-per-node", "2",
           "--master-port", str(free_port_pair()), os.path.abspath(__file__)]
    p = subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    if p.returncode != 0 or not os.path.exists(out):
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit("launch %d (%s) failed: rc=%s" % (
            idx, "traceml" if traced else "disabled", p.returncode))
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=2,
                    help="pairs of launches (TraceML, TRACEML_DISABLED=1) [2]")
    ap.add_argument("--steps", type=int, default=15, help="steps per block [15]")
    ap.add_argument("--glue-iters", type=int, default=20000)
    ap.add_argument("--glue-repeats", type=int, default=15)
    ap.add_argument("--json", help="write the raw figures here")
    args = ap.parse_args()
    t_start = time.time()
    tmp = tempfile.mkdtemp(prefix="tml-comm-bench-")

    # the glue, in its own process (its TraceML run prints nothing we keep)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--glue-only",
                        str(args.glue_iters), str(args.glue_repeats)],
                       cwd=REPO, env=base_env(TRACEML_LOGS_DIR=os.path.join(tmp, "glue")),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    line = [l for l in p.stdout.splitlines() if l.startswith("GLUE ")]
    if p.returncode != 0 or not line:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit("glue benchmark failed")
    g = json.loads(line[-1][5:])

    runs = []                            # (traced, result), alternating order per pair
    for k in range(args.repeats):
        for traced in ((True, False) if k % 2 == 0 else (False, True)):
            runs.append((traced, launch(traced, args.steps, tmp, len(runs))))
    pairs = [(runs[2 * k], runs[2 * k + 1]) for k in range(args.repeats)]
    pairs = [(a[1], b[1]) if a[0] else (b[1], a[1]) for a, b in pairs]   # (on, off)
    on_runs = [on for on, off in pairs]
    off_runs = [off for on, off in pairs]

    def launch_median(r, model, i):      # i: 0 wall, 1 CPU
        if model == "mlp":
            return statistics.median(v[i] for v in r["mlp"])
        return statistics.median(rd[model][i] for rd in r["rounds"])

    def process(model):
        d = [[launch_median(on, model, i) - launch_median(off, model, i) for on, off in pairs]
             for i in (0, 1)]
        base = statistics.median(launch_median(off, model, 0) for off in off_runs)
        return base, d

    def in_process(rs, a, b):
        d = [[rd[a][i] - rd[b][i] for r in rs for rd in r["rounds"]] for i in (0, 1)]
        base = statistics.median(rd[b][0] for r in rs for rd in r["rounds"])
        return base, d

    nb = on_runs[0]["buckets_per_step"]["hooked"]
    mlp_nb = on_runs[0].get("mlp_buckets_per_step")
    rows = [   # (workload, pairing, (base wall us/step, [wall diffs, CPU diffs]), buckets)
        ("buckets", "process: traceml - disabled", process("hooked"), nb),
        ("buckets", "in-process: hook - builtin", in_process(on_runs, "hooked", "builtin"), nb),
        ("buckets", "in-process: pyhook - builtin", in_process(on_runs, "pyhook", "builtin"), nb),
        ("buckets", "in-process: hook - pyhook", in_process(on_runs, "hooked", "pyhook"), nb),
        ("buckets", "in-process A/A (disabled)", in_process(off_runs, "hooked", "builtin"), nb),
        ("buckets", "disabled: pyhook - builtin", in_process(off_runs, "pyhook", "builtin"), nb),
        ("mlp", "process: traceml - disabled", process("mlp"), mlp_nb),
    ]
    print("\n%-8s %-29s %11s %3s %11s %10s %10s %4s %11s %11s" % (
        "workload", "pairing", "base us/st", "n", "added wall", "wall p90", "added CPU",
        "bkts", "wall us/bkt", "CPU us/bkt"))
    for w, pairing, (base, (dw, dc)), buckets in rows:
        mw, mc = statistics.median(dw), statistics.median(dc)
        print("%-8s %-29s %11.1f %3d %+11.1f %+10.1f %+10.1f %4s %11s %11s" % (
            w, pairing, base, len(dw), mw, pct(dw, 0.9), mc, buckets or "-",
            "%+.2f" % (mw / buckets) if buckets else "-",
            "%+.2f" % (mc / buckets) if buckets else "-"))
    gm = statistics.median(g["diffs"])
    print("%-8s %-29s %11.2f %3d %11s %10s %+10.2f %4d %11s %11s" % (
        "glue", "_timed_hook - inner hook", statistics.median(g["off"]), len(g["diffs"]),
        "", "", gm, 1, "", "%+.2f" % gm))
    import torch
    print("\nbuckets: %d params x %d floats, bucket_cap_mb=%g, %d rounds of %d-step blocks "
          "per model per launch; mlp %s (batch, in, hidden, out): %d blocks of %d steps; "
          "%d launch pairs; wall and process CPU time per step on rank 0 (medians); "
          "glue: %d pairs of %d calls, thread CPU us per call (base: the inner hook alone); "
          "torch %s; %.0f s" % (
              N_PARAMS, PARAM_FLOATS, BUCKET_CAP_MB, ROUNDS, args.steps, MLP, MLP_BLOCKS,
              args.steps, args.repeats, args.glue_repeats, args.glue_iters,
              torch.__version__, time.time() - t_start))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "glue": g}, f)


if __name__ == "__main__":
    if os.environ.get("COMM_BENCH_WORKER") == "1":
        worker()
    elif len(sys.argv) == 4 and sys.argv[1] == "--glue-only":
        print("GLUE " + json.dumps(glue(int(sys.argv[2]), int(sys.argv[3]))))
    else:
        main()
