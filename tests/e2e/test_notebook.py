"""TraceML in a Jupyter kernel (docs/notebooks.md): real notebooks run by a
real ipykernel through nbclient, as Jupyter, VS Code and Colab run them.
The assertions read the cells' outputs (text and HTML), the run folders
the cells made, and the kernel's own threads and file descriptors.
"""
import json
import os
import re
import shutil

import pytest

from conftest import BUILD, EXAMPLES, TRACEML, base_env, covers

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

QUICKSTART = os.path.join(EXAMPLES, "notebooks", "quickstart.ipynb")

SETUP = """import os, signal, time, threading
import torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(16, 64), torch.randn(16, 8)) for _ in range(4)]

def snap():
    # this process's threads (by name) and open files
    tasks = sorted(open('/proc/self/task/%s/comm' % t).read().strip()
                   for t in os.listdir('/proc/self/task'))
    fds = sorted(os.readlink('/proc/self/fd/' + f) for f in os.listdir('/proc/self/fd')
                 if os.path.exists('/proc/self/fd/' + f))
    return tasks, fds"""


def loop(steps, extra=""):
    return ("for i in range(%d):\n    x, y = data[i %% 4]\n    opt.zero_grad()\n"
            "    torch.nn.functional.mse_loss(model(x), y).backward()\n    opt.step()\n%s"
            % (steps, extra))


def execute(tmp_path, cells, env=None, timeout=300):
    """Runs the cells (a list of sources, or a notebook) in a fresh kernel
    whose working folder is tmp_path; the executed notebook."""
    if isinstance(cells, list):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
    else:
        nb = cells
    client = nbclient.NotebookClient(nb, timeout=timeout, allow_errors=True,
                                     kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    venv_bin = os.path.dirname(TRACEML)
    kenv = base_env(**(env or {}))
    kenv["PATH"] = venv_bin + os.pathsep + kenv.get("PATH", "")
    client.execute(env=kenv)
    return nb


def outputs(cell, kind):
    return [o for o in cell.outputs if o.output_type == kind]


def stream(cell, name="stdout"):
    return "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == name)


def shown(cell):
    """The cell's one display (the live card, replaced by the summary)."""
    d = outputs(cell, "display_data")
    assert len(d) == 1, cell.outputs
    return d[0].data


def summary(tmp_path, name):
    with open(tmp_path / "logs" / name / "final_summary.json", encoding="utf-8") as f:
        return json.load(f)


def check_display(data, s):
    """The cell shows the box as text and the card and report as HTML, all
    of the run's final summary."""
    label = s["primary_diagnosis"]["label"]
    assert "TraceML Run Summary" in data["text/plain"] and label in data["text/plain"]
    html = data["text/html"]
    assert re.search(r'class="traceml-verdict"[^>]*>%s<' % re.escape(label), html), html[:2000]
    assert 'class="traceml-phases"' in html
    # the report, self-contained in a sandboxed iframe: its summary JSON, no network
    m = re.search(r'<iframe class="traceml-report"[^>]*sandbox="allow-scripts"[^>]*srcdoc="([^"]*)"',
                  html)
    assert m, html[:2000]
    page = m.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">") \
                     .replace("&#39;", "'").replace("&amp;", "&")
    assert 'id="traceml-summary"' in page and s["meta"]["run_name"] in page
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_quickstart_notebook(tmp_path):
    # the example notebook as it ships: slow DataLoader -> INPUT-BOUND, the
    # fix -> COMPUTE-BOUND, %traceml_compare -> IMPROVEMENT
    nb = execute(tmp_path, nbformat.read(QUICKSTART, as_version=4), timeout=180)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any(outputs(c, "error") for c in code), [c.outputs for c in code]
    before, after = summary(tmp_path, "before"), summary(tmp_path, "after")
    assert before["status"] == after["status"] == "completed"
    assert before["primary_diagnosis"]["label"] == "INPUT-BOUND"
    assert after["primary_diagnosis"]["label"] == "COMPUTE-BOUND"
    # the collate sleeps 30 ms a batch (three times the model's step, so the
    # fix stays past compare's load rule beside other tests' load), and the
    # input wait is that wait
    wait = before["step_time"]["median"]["input_wait_ms"]
    assert covers(wait, 30.0, rel=0.2), wait
    cells = {c.source.splitlines()[0]: c for c in code}
    check_display(shown(cells["%%traceml --run-name before"]), before)
    check_display(shown(cells["%%traceml --run-name after"]), after)
    assert "final loss" in stream(cells["%%traceml --run-name after"])
    cmp = shown(cells["%traceml_compare before after"])
    assert "INPUT-BOUND -> COMPUTE-BOUND" in cmp["text/plain"]
    # on failure, the lines that say why first (a CI log keeps a line's start)
    why = [ln for ln in cmp["text/plain"].splitlines()
           if re.search(r"Verdict|Why|^\|      |Other processes|Run-queue|CPU Step Time  ", ln)]
    assert "Verdict: IMPROVEMENT" in cmp["text/plain"], "\n".join(why)
    assert "<pre" in cmp["text/html"]
    assert (tmp_path / "logs" / "compare_before_vs_after.json").exists()


def test_error_and_interrupt_end_the_run_and_the_kernel_goes_on(tmp_path):
    fail = loop(40, "    if i == 10:\n        raise ValueError('bad batch %d' % i)\n")
    nb = execute(tmp_path, [
        "%load_ext traceml_ai", SETUP,
        fail,                                              # 2: without TraceML
        "%%traceml --run-name failing\n" + fail,           # 3
        "%%traceml --run-name stopped\n" + loop(400, "    if i == 30:\n"
                                                     "        os.kill(os.getpid(), signal.SIGINT)\n"),
        "print('next cell', 1 + 1)",                       # 5
    ])
    c = nb.cells
    plain, traced = outputs(c[2], "error")[0], outputs(c[3], "error")[0]
    assert (traced.ename, traced.evalue) == ("ValueError", "bad batch 10")

    def frames(e):   # the traceback, less the cell's number
        return [re.sub(r"In\[\d+\]", "In[N]", ln) for ln in e.traceback]
    assert frames(traced) == frames(plain)
    s = summary(tmp_path, "failing")
    assert s["status"] == "failed" and s["meta"]["common_steps"] >= 10
    check_display(shown(c[3]), s)

    assert outputs(c[4], "error")[0].ename == "KeyboardInterrupt"
    s = summary(tmp_path, "stopped")
    assert s["status"] == "interrupted" and 30 <= s["meta"]["common_steps"] <= 31
    assert "Ended: INTERRUPTED" in shown(c[4])["text/plain"]
    assert "interrupted &middot; PARTIAL" in shown(c[4])["text/html"]
    assert stream(c[5]) == "next cell 2\n"


def test_runs_are_independent_and_leave_nothing_behind(tmp_path):
    nb = execute(tmp_path, [
        "%load_ext traceml_ai", SETUP,
        "%%traceml --run-name warm\n" + loop(20),   # the kernel's own threads start here
        # ipykernel closes a finished thread's event pipe (its socket to the
        # IOPub thread, which the live card's thread used) within 10 s
        "time.sleep(11); before = snap()",
        "%%traceml --run-name one --live-interval 0.05\n" + loop(
            60, "    time.sleep(0.005)\n    if i == 50:\n        during = snap()\n"),
        "%%traceml --run-name two --window-steps 20\n" + loop(80),
        "t0 = time.time()\nwhile snap() != before and time.time() < t0 + 15:\n"
        "    time.sleep(0.2)\nafter = snap()\n"
        "print(len(during[0]) > len(before[0]), after == before)\n"
        "print(sorted(set(after[0]) ^ set(before[0])), sorted(set(after[1]) ^ set(before[1])))",
        "import traceml_ai; print(traceml_ai._active, traceml_ai._patched, traceml_ai._opt_hooks)",
    ])
    c = nb.cells
    assert stream(c[6]).splitlines()[0] == "True True", stream(c[6])
    assert stream(c[7]) == "False [] []\n"
    one, two = summary(tmp_path, "one"), summary(tmp_path, "two")
    assert one["meta"]["common_steps"] == 60 and two["meta"]["common_steps"] == 80
    assert two["step_time"]["window"]["window_steps"] == 20
    assert one["meta"]["run_id"] != two["meta"]["run_id"]
    # forward, backward and optimizer are timed in the second run too
    for s in (one, two):
        med = s["step_time"]["median"]
        assert med["forward_ms"] > 0 and med["backward_ms"] > 0 and med["optimizer_ms"] > 0


def test_python_api_in_a_kernel(tmp_path):
    # init() ... trace_step ... summary() mid-run ... finish() displays
    # the summary in the cell; a second init() starts a second run
    body = ("for i in range(30):\n    x, y = data[i % 4]\n    with traceml.trace_step(model):\n"
            "        opt.zero_grad()\n        torch.nn.functional.mse_loss(model(x), y).backward()\n"
            "        opt.step()\n")
    nb = execute(tmp_path, [
        SETUP, "import traceml_ai as traceml\ntraceml.init(run_name='api1')\n" + body +
        "mid = traceml.summary()\nprint(mid['traceml/status'], mid['traceml/meta/common_steps'])",
        "res = traceml.finish()\nprint(res['status'], res['meta']['common_steps'])",
        "traceml.init(run_name='api2')\n" + body + "res = traceml.finish(display=False)",
        "print(traceml.finish())",
    ])
    c = nb.cells
    assert stream(c[1]) == "running 30\n"
    assert stream(c[2]).endswith("completed 30\n")
    check_display(shown(c[2]), summary(tmp_path, "api1"))
    assert "TraceML Run Summary" in stream(c[3]) and not outputs(c[3], "display_data")
    assert summary(tmp_path, "api2")["meta"]["common_steps"] == 30
    assert stream(c[4]) == "None\n"


def test_bad_options_one_line_and_the_cell_does_not_run(tmp_path):
    nb = execute(tmp_path, [
        "%load_ext traceml_ai", "ran = []",
        "%%traceml --window-steps many\nran.append(1)",
        "%traceml_compare nosuch other",
        "print(ran)",
    ])
    c = nb.cells
    err = stream(c[2], "stderr").strip().splitlines()
    assert len(err) == 1 and "--window-steps" in err[0] and "many" in err[0], err
    err = stream(c[3], "stderr").strip().splitlines()
    assert len(err) == 1 and "nosuch" in err[0], err
    assert stream(c[4]) == "[]\n"
    assert not (tmp_path / "logs").exists()


def test_shell_command_traceml_run_in_a_cell(tmp_path):
    # `!traceml run train.py` as Colab and Jupyter run it: ipykernel gives
    # the command a pseudo terminal whose output lands in the cell, so the
    # live view prints plain lines, never cursor moves
    script = tmp_path / "train.py"
    shutil.copy(os.path.join(EXAMPLES, "quickstart.py"), script)
    nb = execute(tmp_path, ["!traceml run --mode cli --run-name bang train.py"],
                 env={"QUICKSTART_STEPS": "60", "QUICKSTART_DELAY_MS": "2"})
    out = stream(nb.cells[0])
    assert "TraceML Run Summary" in out and "Verdict: INPUT-BOUND" in out, out[-3000:]
    assert "\x1b[" not in out and "\x1b" not in out
    assert "in a notebook cell: the live view prints plain lines" in out
    assert summary(tmp_path, "bang")["status"] == "completed"


def test_gpu_runtime_through_the_fakes(tmp_path):
    # a GPU runtime's NVML (the fake libnvidia-ml here): the kernel's run
    # samples the GPU as a script's would
    fakes = os.path.join(BUILD, "fakes")
    nb = execute(tmp_path, ["%load_ext traceml_ai", SETUP,
                            "%%traceml --run-name gpu --interval 0.05\n" +
                            loop(60, "    time.sleep(0.004)\n")],
                 env={"TRACEML_LIBCUDA": os.path.join(fakes, "libcuda.so.1"),
                      "TRACEML_LIBNVML": os.path.join(fakes, "libnvidia-ml.so.1")})
    s = summary(tmp_path, "gpu")
    assert s["meta"]["gpus_observed"] == 1, s["meta"]
    assert s["system"]["average"]["gpu_util_percent"] is not None
    check_display(shown(nb.cells[2]), s)


def test_dashboard_mode_serves_the_live_dashboard(tmp_path):
    # --mode dashboard: the kernel's run serves the dashboard (here on a
    # free port: --dashboard-port 0) while the cell runs, the cell links to
    # it, and nothing listens once the run ended
    fetch = ("    if i == 40:\n        import json, urllib.request, traceml_ai\n"
             "        port = traceml_ai._c.live_port()\n"
             "        url = 'http://127.0.0.1:%d' % port\n"
             "        live = json.load(urllib.request.urlopen(url + '/api/live', timeout=10))\n"
             "        page = urllib.request.urlopen(url + '/', timeout=10).read().decode()\n"
             "        print(live['status'], live['window']['common_steps'] > 0, 'TraceML' in page)\n")
    nb = execute(tmp_path, ["%load_ext traceml_ai", SETUP,
                            "%%traceml --run-name dash --mode dashboard --dashboard-port 0 "
                            "--interval 0.1\n" + loop(80, "    time.sleep(0.01)\n" + fetch),
                            "import socket, traceml_ai\nprint(traceml_ai._c.live_port())\n"
                            "try:\n    socket.create_connection(('127.0.0.1', port), 1)\n"
                            "    print('open')\nexcept OSError:\n    print('closed')"])
    c = nb.cells[2]
    links = [d.data for d in outputs(c, "display_data")
             if d.data["text/plain"].startswith("TraceML live dashboard: http://127.0.0.1:")]
    assert len(links) == 1 and '<a href="http://127.0.0.1:' in links[0]["text/html"], c.outputs
    assert stream(c) == "running True True\n", c.outputs
    assert stream(nb.cells[3]) == "-1\nclosed\n"
    assert summary(tmp_path, "dash")["status"] == "completed"


def test_a_cell_run_again_keeps_the_last_run(tmp_path):
    # running a cell again is a notebook's habit: the first run's folder
    # stays, the new one is NAME_2, and the name means the latest run
    nb = execute(tmp_path, ["%load_ext traceml_ai", SETUP,
                            "%%traceml --run-name same --mode summary\n" + loop(20),
                            "%%traceml --run-name same --mode summary\n" + loop(30),
                            "%traceml_compare same same_2"])
    assert stream(nb.cells[2]) == ""
    assert stream(nb.cells[3]) == "TraceML: logs/same exists already: this run is same_2\n"
    assert summary(tmp_path, "same")["meta"]["common_steps"] == 20
    assert summary(tmp_path, "same_2")["meta"]["common_steps"] == 30
    assert "A: same_2" in shown(nb.cells[4])["text/plain"]    # "same" is the latest: same_2


def test_notebook_launcher_says_its_processes_were_forked(tmp_path):
    # Accelerate's notebook_launcher forks the ranks from the kernel: a
    # forked process is not traced, and the summary says so and what to do
    pytest.importorskip("accelerate")
    nb = execute(tmp_path, ["%load_ext traceml_ai", """
def train():
    import torch
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model, opt = acc.prepare(model, opt)
    for i in range(20):
        opt.zero_grad()
        acc.backward(model(torch.randn(8, 32)).sum())
        opt.step()
    print('rank %d done' % acc.process_index, flush=True)""",
        "%%traceml --run-name launched --mode summary\n"
        "from accelerate import notebook_launcher\nnotebook_launcher(train, num_processes=2)"])
    c = nb.cells[2]
    assert not outputs(c, "error"), c.outputs
    out = stream(c)
    assert "rank 0 done" in out and "rank 1 done" in out
    s = summary(tmp_path, "launched")
    why = s["primary_diagnosis"]["why"]
    assert "forked from this one" in why and "notebook_launcher" in why, why
    assert "!traceml run --nproc-per-node N train.py" in s["primary_diagnosis"]["next"]
    assert "CONFLICT" not in shown(c)["text/plain"]


def test_a_cell_that_ends_its_run_itself(tmp_path):
    # traceml.finish() inside a %%traceml cell: its summary replaces the
    # live card, which is drawn no more; the cell's end adds nothing
    nb = execute(tmp_path, ["%load_ext traceml_ai", SETUP,
                            "%%traceml --run-name inner --live-interval 0.05\n" + loop(40) +
                            "import traceml_ai as traceml\nres = traceml.finish()\n"
                            "time.sleep(0.5)\nprint(res['meta']['common_steps'])"])
    c = nb.cells[2]
    assert not outputs(c, "error") and stream(c) == "40\n", c.outputs
    check_display(shown(c), summary(tmp_path, "inner"))
