"""Drop-in use, as a user coming from the product brief or the original
TraceML writes it: options after the script, --args, TRACEML_DISABLED on
the launcher, the original's flags, traceml.start() and
wrap_h2d(x).to(device), and project defaults from traceml.yaml or
pyproject.toml (docs/cli.md). On the fake torch (tests/fakes/torch): what
is tested is the launcher's and the glue's handling, not a measurement."""
import json
import os
import signal
import subprocess

from conftest import FAKE_TORCH, PYTHON, TRACEML, base_env, covers, step_metric_ms

QUICK = True      # the fake torch (tests/fakes): the quick tier (conftest.py)

SCRIPT = r'''
import os, sys, json, time
import torch
from torch import nn
import traceml_ai as traceml
print("ARGS " + json.dumps(sys.argv[1:]))
print("ENV " + json.dumps({k: os.environ.get(k) for k in ("TRACEML_DISABLED", "TRACEML_ADDR")}))

class SlowCopy(object):
    """A batch whose copy to the device takes 5 ms."""
    def __init__(self, t):
        self.t = t
    def to(self, device):
        time.sleep(0.005)
        return self.t.to(device)

traceml.start(mode="manual")
torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
fwd = traceml.wrap_forward(model)
opt = traceml.wrap_optimizer(opt)
for i in range(int(os.environ.get("STEPS", "30"))):
    with traceml.trace_step(model):
        x = traceml.wrap_h2d(SlowCopy(torch.randn(4, 8))).to("cpu")
        loss = fwd(x).sum()
        opt.zero_grad()
        traceml.wrap_backward(loss)
        loss.backward()
        opt.step()
'''


def launch(tmp_path, args, env=None, cwd=None, slept=None):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    return subprocess.run([TRACEML, "run"] + [a.replace("SCRIPT", str(script)) for a in args],
                          cwd=str(cwd or tmp_path),
                          env=base_env(TRACEML_PYTHON=PYTHON, **dict(
                              slept.env(**FAKE_TORCH) if slept else FAKE_TORCH, **(env or {}))),
                          capture_output=True, text=True, timeout=240)


def line(out, tag):
    for l in out.splitlines():
        if l.startswith(tag + " "):
            return json.loads(l[len(tag) + 1:])
    raise AssertionError("no %s line in:\n%s" % (tag, out))


def summary(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def test_options_after_the_script_and_args(tmp_path, slept):
    p = launch(tmp_path, ["--logs-dir", "logs", "--run-name", "a", "SCRIPT", "--html-report",
                          "--lr", "0.1", "--args", "--name 'a b'", "--mode", "train",
                          "--", "--html-report"], slept=slept)
    assert p.returncode == 0, p.stderr
    # TraceML took --html-report; --mode train is no TraceML mode: the script's
    assert line(p.stdout, "ARGS") == ["--lr", "0.1", "--name", "a b", "--mode", "train",
                                      "--html-report"]
    assert "'--html-report' after the script is TraceML's" in p.stderr
    assert "'--mode train' goes to the script" in p.stderr
    assert (tmp_path / "logs" / "a" / "final_summary.html").exists()
    # the original's manual style: start() and wrap_h2d(x).to(device)
    s = summary(tmp_path / "logs" / "a" / "final_summary.json")
    h2d, ref = step_metric_ms(s, "h2d"), slept.mean(5)
    assert covers(h2d, ref), "H2D %s ms, slept %.3f ms" % (h2d, ref)


def test_traceml_disabled_runs_the_script_untouched(tmp_path):
    p = launch(tmp_path, ["--logs-dir", "logs", "SCRIPT", "--x"], env={"TRACEML_DISABLED": "1"})
    assert p.returncode == 0, p.stderr
    assert line(p.stdout, "ARGS") == ["--x"]
    assert line(p.stdout, "ENV") == {"TRACEML_DISABLED": "1", "TRACEML_ADDR": None}
    assert "TraceML Run Summary" not in p.stdout
    assert not (tmp_path / "logs").exists()


def test_original_flags(tmp_path):
    p = launch(tmp_path, ["--logs-dir", "logs", "--run-name", "b", "--enable-logging",
                          "--no-dashboard-auto-open", "--finalize-timeout-sec", "30",
                          "SCRIPT", "--summary-window-rows", "20"], env={"STEPS": "40"})
    assert p.returncode == 0, p.stderr
    w = summary(tmp_path / "logs" / "b" / "final_summary.json")["step_time"]["window"]
    assert (w["max_steps"], w["window_steps"]) == (20, 20), w
    # 0.5.0's options without a meaning here: a note line each, and the run
    legacy = [("--trace-max-steps", "5"), ("--aggregator-host", "10.0.0.1"),
              ("--history-retention", "2h"), ("--no-history", None),
              ("--on-missing-aggregator", "warn"), ("--save-training-output", None),
              ("--no-save-training-output", None)]
    args = ["--logs-dir", "logs", "--session-id", "c"]
    for flag, value in legacy:
        args += [flag] if value is None else [flag, value]
    p = launch(tmp_path, args + ["SCRIPT"], env={"STEPS": "10"})
    assert p.returncode == 0, p.stderr
    notes = [l for l in p.stderr.splitlines() if l.startswith("traceml: note: --")]
    assert [l.split()[2] for l in notes] == [f for f, _ in legacy], notes
    assert all("has no meaning here" in l for l in notes), notes
    assert (tmp_path / "logs" / "c" / "final_summary.json").exists()   # --session-id


def test_argparse_prefixes_and_suggestions(tmp_path):
    """0.5.0's CLI was argparse: a unique prefix of a long option is that
    option, before SCRIPT only (the script's own options are untouched);
    an ambiguous one, an unknown option or command is one error line,
    exit 2, naming the candidates or the nearest name (issue 47, item 5)."""
    p = launch(tmp_path, ["--logs", "logs", "--run-n=p", "--html", "--finalize-t", "30",
                          "SCRIPT", "--lr", "0.1"], env={"STEPS": "10"})
    assert p.returncode == 0, p.stderr
    assert line(p.stdout, "ARGS") == ["--lr", "0.1"]
    assert (tmp_path / "logs" / "p" / "final_summary.html").exists()
    m = summary(tmp_path / "logs" / "p" / "manifest.json")
    assert m["launch"]["finalize_timeout_sec"] == 30, m["launch"]
    cases = [(["run", "--n", "2", "x.py"],
              "ambiguous option '--n' for 'traceml run': --nproc-per-node, --nnodes, "
              "--node-rank"),
             (["run", "--nproc_per_node", "2", "x.py"],
              "unknown option '--nproc_per_node' for 'traceml run'; did you mean "
              "'--nproc-per-node'?"),
             (["rnu", "x.py"], "unknown command 'rnu'; did you mean 'run'?"),
             (["help", "comapre"], "unknown command 'comapre'; did you mean 'compare'?"),
             (["serve", "--dashbord"], "unknown option '--dashbord' for 'traceml serve'; "
                                       "did you mean '--dashboard'?")]
    for args, message in cases:
        r = subprocess.run([TRACEML] + args, cwd=str(tmp_path), env=base_env(),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.startswith("traceml: error: " + message), \
            (args, r.stderr)
        assert len(r.stderr.splitlines()) == 1, r.stderr


def test_project_defaults(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "traceml.yaml").write_text(
        "# defaults\nlogs-dir: ylogs\nhtml-report: true\nwindow_steps: 25\n"
        "thresholds:\n  input_warn: 0.15\n")
    p = launch(tmp_path, ["--run-name", "c", "SCRIPT"], cwd=proj)
    assert p.returncode == 0, p.stderr
    run = proj / "ylogs" / "c"
    s = summary(run / "final_summary.json")
    assert s["step_time"]["window"]["max_steps"] == 25
    assert s["meta"]["thresholds"]["input_warn"] == 0.15, s["meta"]["thresholds"]
    assert (run / "final_summary.html").exists()
    # the command line wins over the file
    p = launch(tmp_path, ["--run-name", "d", "--window-steps", "10", "SCRIPT"], cwd=proj)
    assert summary(proj / "ylogs" / "d" / "final_summary.json")["step_time"]["window"][
        "max_steps"] == 10
    # pyproject.toml's [tool.traceml] when there is no traceml.yaml
    os.remove(proj / "traceml.yaml")
    (proj / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = [\n  "torch",\n]\n\n[tool.traceml]\n'
        'logs-dir = "tlogs"\n\n[tool.traceml.thresholds]\ninput_crit = 0.3\n')
    p = launch(tmp_path, ["--run-name", "e", "SCRIPT"], cwd=proj)
    assert p.returncode == 0, p.stderr
    assert summary(proj / "tlogs" / "e" / "final_summary.json")["meta"]["thresholds"][
        "input_crit"] == 0.3
    # a bad file: one line naming it, nothing created
    (proj / "traceml.yaml").write_text("mode: summary\nlog-dir: x\n")
    p = launch(tmp_path, ["--run-name", "f", "SCRIPT"], cwd=proj)
    assert p.returncode == 2 and "traceml.yaml:2: unknown key 'log-dir'" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_project_file_errors_name_file_and_line(tmp_path):
    """Every line counts (blank and comment lines too), a UTF-8 BOM is no
    part of the first key, a key set twice names both lines, every bad
    value names its line, and a traceml.yaml that cannot be read is an
    error, not a reason to read pyproject.toml instead."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pyproject.toml").write_text('[tool.traceml]\nlogs-dir = "tlogs"\n')
    (proj / "afile").write_text("")
    cases = [
        (b"\xef\xbb\xbf# a BOM\n\nmode: bogus\n",
         "traceml.yaml:3: --mode must be summary, cli or dashboard, got 'bogus'"),
        (b"\xef\xbb\xbfmode: summary\n", None),   # the first key read as it is written
        (b"mode: cli\n\n# again\nmode: summary\n",
         "traceml.yaml:4: 'mode' is set twice (also on traceml.yaml:1)"),
        (b"session-id: a\nrun-name: b\n",
         "traceml.yaml:2: 'run-name' sets what 'session-id' on traceml.yaml:1 sets; say it once"),
        (b"\n\nwindow_steps: 1\n",
         "traceml.yaml:3: --window-steps expects an integer from 2 to 10000, got '1'"),
        (b"\nhtml-report: yes\n", "traceml.yaml:2: 'html-report' is a flag: true or false"),
        (b"\n\nlogs-dir: afile/x\n", "traceml.yaml:3: logs directory 'afile/x' is not usable"),
        (b"\nrun-name: a b\n", "traceml.yaml:2: invalid run name 'a b'"),
        (b"\n\npython: /no/such/python\n",
         "Python interpreter '/no/such/python' (from 'python' in traceml.yaml:3) not found"),
        (b"thresholds:\n\n  input_warn: 2\n", "traceml.yaml:3: threshold input_warn: '2'"),
        (b"#" * ((1 << 20) + 1), "traceml.yaml is over 1 MiB: not an options file"),
        (None, "traceml.yaml is not a regular file (a folder)"),
        (b"yml", "both traceml.yaml and traceml.yml are here: keep one"),
    ]
    for text, err in cases:
        f = proj / "traceml.yaml"
        if f.is_dir():
            f.rmdir()
        if text is None:
            f.unlink()
            f.mkdir()
        elif text == b"yml":
            f.write_text("mode: cli\n")
            (proj / "traceml.yml").write_text("mode: cli\n")
        else:
            f.write_bytes(text)
        p = launch(tmp_path, ["SCRIPT"] if err else ["--nproc-per-node", "0", "SCRIPT"],
                   cwd=proj)
        assert p.returncode == 2, (text, p.stderr)
        if err is None:   # the file was read: the error is the command line's
            assert p.stderr.startswith("traceml: error: --nproc-per-node expects"), p.stderr
            continue
        assert p.stderr == "traceml: error: " + err + p.stderr[16 + len(err):], (err, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (proj / "tlogs").exists()


def test_dashboard_off_loopback_is_named(tmp_path):
    """A dashboard bound beyond loopback is one warning naming where that
    came from: the project's file and line, or the option."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "traceml.yaml").write_text("mode: cli\n\ndashboard-bind: 0.0.0.0\n")
    p = launch(tmp_path, ["--run-name", "a", "SCRIPT"], cwd=proj, env={"STEPS": "3"})
    assert p.returncode == 0, p.stderr
    warn = [l for l in p.stderr.splitlines() if l.startswith("traceml: warning: the dashboard")]
    assert len(warn) == 1 and "0.0.0.0 (every interface), set by dashboard-bind in " \
        "traceml.yaml:3" in warn[0], p.stderr
    p = launch(tmp_path, ["--run-name", "b", "--mode", "cli", "--dashboard-bind", "0.0.0.0",
                          "SCRIPT"], env={"STEPS": "3"})
    assert p.returncode == 0, p.stderr
    assert "set by --dashboard-bind:" in p.stderr, p.stderr
    # loopback, or no live view at all: nothing to say
    for args in (["--mode", "cli", "--dashboard-bind", "127.0.0.2"],
                 ["--dashboard-bind", "0.0.0.0"]):
        p = launch(tmp_path, args + ["SCRIPT"], env={"STEPS": "3"})
        assert p.returncode == 0 and "warning: the dashboard" not in p.stderr, p.stderr


def test_box_says_how_the_run_ended(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import traceml_no_such_module\n")
    p = subprocess.run([TRACEML, "run", "--logs-dir", "logs", "--run-name", "g", str(bad)],
                       cwd=str(tmp_path), env=base_env(TRACEML_PYTHON=PYTHON, **FAKE_TORCH),
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 1, p.stderr
    assert "Ended: FAILED with exit code 1" in p.stdout, p.stdout
    assert "before any step was traced" in p.stdout
    assert "Wrap the training step" not in p.stdout
    # after some steps: the figures stand, the end is named
    p = launch(tmp_path, ["--logs-dir", "logs", "--run-name", "h", "SCRIPT"],
               env={"STEPS": "30"})
    assert p.returncode == 0 and "Ended:" not in p.stdout, p.stdout
    crash = tmp_path / "crash.py"
    crash.write_text(SCRIPT + "\nraise SystemExit(7)\n")
    p = subprocess.run([TRACEML, "run", "--logs-dir", "logs", "--run-name", "i", str(crash)],
                       cwd=str(tmp_path), env=base_env(TRACEML_PYTHON=PYTHON, **FAKE_TORCH),
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 7
    assert "Ended: FAILED with exit code 7" in p.stdout and "H2D" in p.stdout, p.stdout
    # a KeyboardInterrupt raised in the script is Ctrl-C's end: interrupted,
    # and the launcher dies of SIGINT as Python did (a shell's 130)
    crash.write_text(SCRIPT + "\nraise KeyboardInterrupt\n")
    p = subprocess.run([TRACEML, "run", "--logs-dir", "logs", "--run-name", "k", str(crash)],
                       cwd=str(tmp_path), env=base_env(TRACEML_PYTHON=PYTHON, **FAKE_TORCH),
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == -signal.SIGINT, p.stderr
    assert "Ended: INTERRUPTED" in p.stdout and "H2D" in p.stdout, p.stdout
    with open(tmp_path / "logs" / "k" / "manifest.json", encoding="utf-8") as f:
        m = json.load(f)
    assert (m["status"], m["exit_code"]) == ("interrupted", 130), m
