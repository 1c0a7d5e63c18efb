"""The zero-edit sitecustomize (docs/zero-edit.md) as Python: the package's
python/traceml_ai/_sitecustomize.py, which the `traceml` binary embeds at
build time and writes into each run folder, run here as the training's
Python runs it (first on PYTHONPATH, TRACEML_SCRIPT set) without a
launcher, and compared with what the launcher writes."""
import os
import subprocess

from conftest import FAKE_TORCH, PYTHON, REPO, base_env

QUICK = True

SITE = os.path.join(REPO, "python", "traceml_ai", "_sitecustomize.py")

# what the script sees: TraceML's finders waiting for torch (zero-edit
# armed), and which sitecustomize module Python kept
PROBE = """import sys
armed = sorted(type(f).__name__ for f in sys.meta_path
               if type(f).__module__.startswith("traceml_ai"))
print("armed", armed, "torch" in sys.modules)
print("site", getattr(sys.modules.get("sitecustomize"), "MARK", None))
"""


def python(tmp_path, script, hidden=None, **env):
    """Runs SCRIPT with the sitecustomize first on PYTHONPATH (then the
    folder hidden, whose sitecustomize it hides)."""
    site = tmp_path / "zero-edit"
    site.mkdir(exist_ok=True)
    with open(SITE, "rb") as f:
        (site / "sitecustomize.py").write_bytes(f.read())
    path = [str(site)] + ([str(hidden)] if hidden else [])
    e = base_env(PYTHONPATH=os.pathsep.join(path), **env)
    return subprocess.run([PYTHON, str(script)], cwd=str(tmp_path), env=e,
                          capture_output=True, text=True, timeout=60)


def test_the_launcher_writes_the_package_file(traceml_run, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('trained')\n")
    r = traceml_run(str(script), env=FAKE_TORCH)
    assert r.rc == 0, r.explain()
    with open(r.artifact("zero-edit/sitecustomize.py"), "rb") as f:
        written = f.read()
    with open(SITE, "rb") as f:
        assert written == f.read()


def test_starts_tracing_in_the_script_only(tmp_path):
    script, other = tmp_path / "train.py", tmp_path / "other.py"
    script.write_text(PROBE)
    other.write_text(PROBE)
    r = python(tmp_path, script, TRACEML_SCRIPT=str(script))
    assert r.returncode == 0, r.stderr
    # armed for torch (and the frameworks' trainers: RF-DETR, transformers,
    # lightning, pytorch_lightning), torch not imported by it
    assert "armed %r False" % (["_AfterTorch"] * 5) in r.stdout, r.stdout + r.stderr
    assert r.stderr == ""
    for script_env in (str(script), None):   # another script; no TRACEML_SCRIPT
        env = {"TRACEML_SCRIPT": script_env} if script_env else {}
        r = python(tmp_path, other, **env)
        assert r.returncode == 0 and "armed [] False" in r.stdout, r.stdout + r.stderr


def test_hands_over_to_the_sitecustomize_it_hides(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text(
        "import sys\nMARK = 'user'\nsys.stderr.write('user site ran\\n')\n")
    script = tmp_path / "train.py"
    script.write_text(PROBE)
    r = python(tmp_path, script, hidden, TRACEML_SCRIPT=str(script))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "user site ran\n"
    assert "site user" in r.stdout and "armed ['_AfterTorch'" in r.stdout, r.stdout


def test_a_hidden_sitecustomize_that_raises_is_reported_as_python_does(tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("raise ValueError('broken site')\n")
    script = tmp_path / "train.py"
    script.write_text(PROBE)
    plain = subprocess.run([PYTHON, str(script)], cwd=str(tmp_path),
                           env=base_env(PYTHONPATH=str(hidden)),
                           capture_output=True, text=True, timeout=60)
    r = python(tmp_path, script, hidden, TRACEML_SCRIPT=str(script))
    assert r.returncode == 0, r.stderr
    assert r.stderr == plain.stderr
    assert "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n" \
        "ValueError: broken site\n" in r.stderr
    assert "armed ['_AfterTorch'" in r.stdout, r.stdout


def test_imported_by_its_package_name_it_does_nothing(tmp_path):
    # a tool that imports every module of the package (pydoc, a test
    # collector) must not re-run the user's sitecustomize nor arm tracing
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.stderr.write('user site ran\\n')\n")
    script = tmp_path / "train.py"
    script.write_text("import traceml_ai._sitecustomize\n" + PROBE)
    r = subprocess.run([PYTHON, str(script)], cwd=str(tmp_path),
                       env=base_env(PYTHONPATH=str(hidden), TRACEML_SCRIPT=str(script)),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "user site ran\n"
    assert "armed [] False" in r.stdout, r.stdout

