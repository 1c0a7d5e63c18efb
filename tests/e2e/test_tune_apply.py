"""The settings `traceml tune` and `traceml run --apply` pass in
TRACEML_TUNE_SETTINGS, applied to an unmodified script by the zero-edit
sitecustomize (python/traceml_ai/_tune_apply.py; docs/zero-edit.md,
"Settings applied by traceml tune / --apply").

The scripts run as the training's Python runs them, the package's
sitecustomize first on PYTHONPATH, on the fake torch (TraceML itself
disabled, so that what they print is theirs alone), and one through
`traceml run` with TraceML on; test_tune_apply_torch.py runs TRAIN on the
real torch.
"""
import os
import subprocess
import textwrap

import pytest

from conftest import FAKE_TORCH, FAKES, PYTHON, REPO, base_env, traceml_warnings

QUICK = True

SITE = os.path.join(REPO, "python", "traceml_ai", "_sitecustomize.py")
WARNING = "TRACEML_TUNE_SETTINGS: "     # a TraceMLWarning's message starts so


def run(tmp_path, source, settings=None, argv=(), name="train.py", **env):
    """Runs SOURCE as the script TraceML starts in (TRACEML_SCRIPT), with
    TRACEML_TUNE_SETTINGS=settings unless None."""
    site = tmp_path / "zero-edit"
    site.mkdir(exist_ok=True)
    with open(SITE, "rb") as f:
        (site / "sitecustomize.py").write_bytes(f.read())
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    extra = {"TRACEML_SCRIPT": str(script), "TRACEML_DISABLED": "1"}
    if settings is not None:
        extra["TRACEML_TUNE_SETTINGS"] = settings
    extra.update(env)
    e = base_env(PYTHONPATH=os.pathsep.join([str(site), FAKES]), **extra)
    return subprocess.run([PYTHON, str(script)] + list(argv), cwd=str(tmp_path), env=e,
                          capture_output=True, text=True, timeout=60)


def lines(r, prefix):
    """The values the script printed after PREFIX, one list per line."""
    return [ln.split()[1:] for ln in r.stdout.splitlines() if ln.split()[:1] == [prefix]]


LOADERS = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class MyLoader(DataLoader):
        def __init__(self, ds, workers):
            super().__init__(ds, batch_size=2, num_workers=workers)

    ds = TensorDataset(torch.randn(8, 3))
    made = [DataLoader(ds, 2, False, None, None, 0),          # num_workers by position
            DataLoader(ds, batch_size=2, num_workers=2, pin_memory=False,
                       persistent_workers=False, prefetch_factor=8),
            DataLoader(ds, batch_size=2, num_workers=4, persistent_workers=True,
                       prefetch_factor=8, multiprocessing_context="spawn"),
            MyLoader(ds, 1)]
    for ld in made:
        print("loader", ld.num_workers, ld.pin_memory, ld.persistent_workers,
              ld.prefetch_factor, ld.multiprocessing_context)
    print("batches", sum(1 for _ in made[0]))
"""


def test_loader_settings_override_the_script(tmp_path):
    r = run(tmp_path, LOADERS, "num_workers=3,pin_memory=1,persistent_workers=1,prefetch_factor=4")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    want = ["3", "True", "True", "4"]
    assert [ln[:4] for ln in lines(r, "loader")] == [want] * 4, r.stdout
    assert lines(r, "batches") == [["4"]]


def test_no_workers_forced_leaves_out_what_needs_workers(tmp_path):
    # the script's prefetch_factor, persistent_workers and
    # multiprocessing_context would make DataLoader raise with 0 workers:
    # they go, the tuned ones that need workers are not applied
    r = run(tmp_path, LOADERS, "num_workers=0,persistent_workers=1,prefetch_factor=4")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert lines(r, "loader") == [["0", "False", "False", "None", "None"]] * 4, r.stdout


def test_worker_settings_only_where_the_script_has_workers(tmp_path):
    r = run(tmp_path, LOADERS, "prefetch_factor=3,persistent_workers=1,pin_memory=1")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert lines(r, "loader") == [
        ["0", "True", "False", "None", "None"],      # no workers: left out
        ["2", "True", "True", "3", "None"],
        ["4", "True", "True", "3", "spawn"],
        ["1", "True", "True", "3", "None"]], r.stdout


def test_threads_and_cudnn(tmp_path):
    src = """
        import torch
        print("threads", torch.get_num_threads(), torch.backends.cudnn.benchmark)
        torch.set_num_threads(7)                    # the script's own: the tuned count wins
        print("threads", torch.get_num_threads())
        exec("import torch\\ntorch.set_num_threads(1)",  # torch's own (a DataLoader worker's)
             {"__name__": "torch.utils.data._utils.worker"})
        print("threads", torch.get_num_threads())
    """
    r = run(tmp_path, src, "threads=2,cudnn_benchmark=1")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert lines(r, "threads") == [["2", "True"], ["2"], ["1"]], r.stdout
    r = run(tmp_path, src)
    assert lines(r, "threads") == [["4", "False"], ["7"], ["1"]], r.stdout + r.stderr


DDP = """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    def show(tag, m):
        print(tag, m.bucket_cap_mb, m.gradient_as_bucket_view, m.reducer.run("b")[0],
              m.logger.comm_hook_name)

    def my_hook(state, bucket):
        return ("my_hook", state, bucket)

    net = torch.nn.Linear(2, 2)
    show("plain", DDP(net))
    show("positional", DDP(net, None, None, 0, None, True, None, 25))
    m = DDP(net)
    m.register_comm_hook("mine", my_hook)           # the script's hook wins
    show("own", m)
    try:
        m.register_comm_hook(None, my_hook)         # a second: refused as torch does
    except RuntimeError as e:
        print("second", str(e).replace(" ", "_"))
    for kind in (dist.BuiltinCommHookType.FP16_COMPRESS, dist.BuiltinCommHookType.ALLREDUCE):
        m = DDP(net)
        m._register_builtin_comm_hook(kind)
        show("builtin", m)
    show("mixed", DDP(net, mixed_precision=object()))
"""


def test_ddp_keywords_and_the_compression_hook(tmp_path):
    r = run(tmp_path, DDP, "bucket_cap_mb=12.5,gradient_as_bucket_view=1,comm_hook=fp16")
    assert r.returncode == 0, r.stdout + r.stderr
    for tag, want in (("plain", ["12.5", "True", "fp16_compress_hook", "fp16_compress_hook"]),
                      ("positional", ["12.5", "True", "fp16_compress_hook",
                                      "fp16_compress_hook"]),
                      ("own", ["12.5", "True", "my_hook", "my_hook"])):
        assert lines(r, tag) == [want], r.stdout
    assert lines(r, "second") == [["register_comm_hook_or_register_builtin_comm_hook_can_only_"
                                   "be_called_once."]], r.stdout
    assert [ln[2:] for ln in lines(r, "builtin")] == [
        ["fp16_compress_hook", "BuiltinCommHookType.FP16_COMPRESS"],
        ["allreduce_hook", "BuiltinCommHookType.ALLREDUCE"]], r.stdout
    # DDP's own hook (mixed_precision) stays, and the warning says why
    assert lines(r, "mixed") == [["12.5", "True", "upcast", "_reducer_allreduce_and_upcast_hook"]]
    assert traceml_warnings(r.stderr) == [WARNING + "comm_hook=fp16 not applied: the model has "
                                          "a communication hook already"], r.stderr


def test_ddp_without_settings_and_bf16_unsupported(tmp_path):
    r = run(tmp_path, DDP)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert lines(r, "plain") == [["None", "False", "allreduce", "None"]], r.stdout
    assert lines(r, "own") == [["None", "False", "my_hook", "my_hook"]], r.stdout
    # bf16 without CUDA/NCCL: DDP's own check refuses it; the model keeps
    # DDP's all-reduce and the script's hooks still register
    r = run(tmp_path, DDP, "comm_hook=bf16")
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines(r, "plain") == [["None", "False", "allreduce", "None"]], r.stdout
    assert lines(r, "own") == [["None", "False", "my_hook", "my_hook"]], r.stdout
    err = traceml_warnings(r.stderr)     # once, not for every model
    assert len(err) == 2 and err[0].startswith(
        WARNING + "comm_hook=bf16 not applied (TypeError: BF16 all reduce communication hook "
        "required CUDA"), r.stderr
    assert err[1] == WARNING + "comm_hook=bf16 not applied: the model has a communication " \
        "hook already", r.stderr
    r = run(tmp_path, DDP, "comm_hook=none")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert lines(r, "plain") == [["None", "False", "allreduce", "None"]], r.stdout


# What the script sees of TraceML's patches: none without the variable.
PROBE = """
    import sys
    print("early", "torch" in sys.modules, "traceml_ai._tune_apply" in sys.modules)
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    import torch.nn.parallel as par
    print("patched", hasattr(DataLoader.__init__, "__wrapped__"),
          hasattr(par.DistributedDataParallel.__init__, "__wrapped__"),
          hasattr(torch.set_num_threads, "__wrapped__"))
    ld = DataLoader(TensorDataset(torch.randn(4, 2)), num_workers=2, prefetch_factor=5)
    print("loader", ld.num_workers, ld.prefetch_factor, torch.get_num_threads())
"""

BAD = ["", " ", "num_workers", "num_workers=", "=2", "workers=2", "num_workers=-1",
       "num_workers=two", "num_workers=٣", "pin_memory=2", "pin_memory=true", "prefetch_factor=0",
       "threads=0", "bucket_cap_mb=0", "bucket_cap_mb=-5", "bucket_cap_mb=inf",
       "comm_hook=int8", "num_workers=2,num_workers=3", "num_workers=2,,threads=1",
       "num_workers=2,threads=0", "num_workers=2,"]


@pytest.mark.parametrize("settings", BAD)
def test_a_bad_value_warns_once_and_applies_nothing(tmp_path, settings):
    r = run(tmp_path, PROBE, settings)
    assert r.returncode == 0, r.stdout + r.stderr
    err = traceml_warnings(r.stderr)
    assert len(err) == 1 and err[0].startswith(WARNING), r.stderr
    assert err[0].endswith("; nothing applied, the training runs unchanged"), r.stderr
    assert "patched False False False" in r.stdout and "loader 2 5 4" in r.stdout, r.stdout


def test_unset_installs_nothing(tmp_path):
    r = run(tmp_path, PROBE)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert "early False False" in r.stdout, r.stdout
    assert "patched False False False" in r.stdout and "loader 2 5 4" in r.stdout, r.stdout
    # set: nothing before torch is imported (the module waits for it)
    r = run(tmp_path, PROBE, "num_workers=1,threads=3,bucket_cap_mb=1")
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    assert "early False True" in r.stdout, r.stdout
    assert "patched True True True" in r.stdout and "loader 1 5 3" in r.stdout, r.stdout


def test_applied_in_spawned_and_self_instrumented_processes(tmp_path):
    # a process multiprocessing spawned (argv[0] is not the script)
    r = run(tmp_path, PROBE, "threads=3", argv=["--multiprocessing-fork"],
            TRACEML_SCRIPT=str(tmp_path / "other.py"))
    assert r.returncode == 0 and "loader 2 5 3" in r.stdout, r.stdout + r.stderr
    # a script that imports TraceML itself
    r = run(tmp_path, "import traceml_ai\n" + textwrap.dedent(PROBE), "threads=3")
    assert r.returncode == 0 and "loader 2 5 3" in r.stdout, r.stdout + r.stderr
    # not a process TraceML starts in (another script): untouched
    r = run(tmp_path, PROBE, "threads=3", TRACEML_SCRIPT=str(tmp_path / "other.py"))
    assert r.returncode == 0 and "loader 2 5 4" in r.stdout, r.stdout + r.stderr


TRAIN = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    torch.set_num_threads(2)
    loader = DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4,
                        num_workers=0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    print("seen", loader.num_workers, torch.get_num_threads())
"""


def test_through_traceml_run_with_tracing_on(traceml_run, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TRAIN))
    env = dict(FAKE_TORCH, TRACEML_TUNE_SETTINGS="num_workers=1,threads=1")
    r = traceml_run(str(script), env=env)
    assert r.rc == 0, r.explain()
    assert "seen 1 1" in r.stdout, r.explain()
    assert r.summary()["meta"]["step_detection"] == "automatic", r.explain()



def test_iterable_dataset_keeps_its_worker_count(tmp_path):
    # each worker of an IterableDataset that does not split its items
    # yields all of them: another count would change what the training sees
    r = run(tmp_path, """
        import torch
        from torch.utils.data import DataLoader, IterableDataset, TensorDataset

        class Stream(IterableDataset):
            def __iter__(self):
                return iter(range(4))

        a = DataLoader(Stream(), batch_size=None, num_workers=0)
        b = DataLoader(Stream(), batch_size=None, num_workers=0)
        c = DataLoader(TensorDataset(torch.randn(8, 3)), batch_size=2)
        print("loader", a.num_workers, b.num_workers, c.num_workers)
    """, "num_workers=2")
    assert lines(r, "loader") == [["0", "0", "2"]], r.stdout + r.stderr
    warned = [ln for ln in traceml_warnings(r.stderr) if ln.startswith(WARNING)]
    assert len(warned) == 1 and "IterableDataset" in warned[0], r.stderr
