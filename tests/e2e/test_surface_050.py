"""Every public name, keyword, command and flag of TraceML 0.5.0 is
accepted here (issue 24; docs/compat.md).

The incumbent's surface is read from its own wheel, fetched from the
registry at test time (conftest.fetch_050), by parsing its source (ast;
nothing of it is imported or run): the package's __all__, the keywords of
its API functions, the fields of the config init() returns, each
integration module's __all__ and its functions' and classes' keywords,
and every subcommand and flag of its argparse launcher. Each must exist
here: the Python names and keywords in this package (inspected in the
test venv), the flags in the option lists the CLI tests run for real
(test_cli05's LAUNCH_05 and SERVE_05, and the view/compare tests named
below), so a flag 0.5.0 has and no test runs fails here. The test prints
the count, quoted in docs/compat.md.
"""
import ast
import json
import subprocess
import zipfile

import pytest

from conftest import PYTHON, base_env, fetch_050
from test_cli05 import LAUNCH_05, SERVE_05

# test_every_050_python_name_and_keyword imports every integration (its
# framework: the full tier); the rest is quick

# view and compare flags, and the tests that run them here
VIEW_05 = {"--html": "test_html.py", "--re-render": "test_cli05::test_view_re_render"}
COMPARE_05 = {"--output": "test_compare.py",
              "--max-step-time-regression-pct": "test_cli05::test_compare_05_summaries_and_the_gate"}
# test_every_05_launch_option runs LAUNCH_05, then --disable-traceml and
# --disable_traceml; --args carries the script's arguments there
RUN_COVERED = {flag for flag, _ in LAUNCH_05} | {"--disable-traceml", "--disable_traceml", "--args"}
COVERED = {"run": RUN_COVERED, "watch": RUN_COVERED,
           "serve": {flag for flag, _ in SERVE_05}, "view": set(VIEW_05),
           "compare": set(COMPARE_05), "inspect": set()}


def params(fn):
    """A def's keyword names (positional or keyword, keyword-only), no self."""
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return [n for n in names if n not in ("self", "cls")]


def all_names(tree):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    return []


def surface(tree, names):
    """name -> its keywords ([] for a plain name): a function's, a
    class's __init__, or a dataclass's fields."""
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    out = {}
    for name in names:
        node = defs.get(name)
        if isinstance(node, ast.FunctionDef):
            out[name] = params(node)
        elif isinstance(node, ast.ClassDef):
            init = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
            fields = [n.target.id for n in node.body
                      if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
            out[name] = params(init[0]) if init else fields
        else:
            out[name] = []
    return out


def cli_flags(tree):
    """subcommand -> its --flags, following 0.5.0's helper that adds the
    launch flags to `run` and `watch`."""
    helpers, parsers, flags = {}, {}, {}

    def add_args(body_nodes):
        got = {}
        for node in ast.walk(ast.Module(body=body_nodes, type_ignores=[])):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument" and isinstance(node.func.value, ast.Name)):
                opts = [a.value for a in node.args if isinstance(a, ast.Constant)
                        and isinstance(a.value, str) and a.value.startswith("--")]
                got.setdefault(node.func.value.id, set()).update(opts)
        return got

    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        if fn.args.args:
            helpers[fn.name] = add_args(fn.body).get(fn.args.args[0].arg, set())
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Attribute)
                    and node.value.func.attr == "add_parser"):
                parsers[node.targets[0].id] = node.value.args[0].value
        for var, opts in add_args(fn.body).items():
            if var in parsers:
                flags.setdefault(parsers[var], set()).update(opts)
        for node in ast.walk(fn):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in helpers and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in parsers):
                flags.setdefault(parsers[node.args[0].id], set()).update(helpers[node.func.id])
    for name in parsers.values():
        flags.setdefault(name, set())
    return flags


OURS = r'''
import importlib, inspect, json, sys
want = json.loads(sys.argv[1])
out = {}
for module, names in want.items():
    try:
        mod = importlib.import_module(module)
    except Exception as e:
        out[module] = {"error": "%s: %s" % (type(e).__name__, e)}
        continue
    got = {}
    for name in names:
        if not hasattr(mod, name):
            continue
        obj = getattr(mod, name)
        try:
            sig = inspect.signature(obj)
            ps = [p.name for p in sig.parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            var_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        except (TypeError, ValueError):
            ps, var_kw = [], False
        fields = [f for f in dir(obj) if not f.startswith("_")] if inspect.isclass(obj) else []
        got[name] = {"params": ps, "var_kw": var_kw, "fields": fields}
    out[module] = got
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    path = fetch_050(tmp_path_factory)
    with zipfile.ZipFile(path) as z:
        def tree(name):
            return ast.parse(z.read(name).decode("utf-8"))
        integrations = sorted(n for n in z.namelist()
                              if n.startswith("traceml_ai/integrations/") and n.endswith(".py")
                              and not n.rsplit("/", 1)[1].startswith("_"))
        api = tree("traceml_ai/api.py")
        top = all_names(tree("traceml_ai/__init__.py"))
        modules = {"traceml_ai": surface(api, top)}
        modules["traceml_ai"]["TraceMLInitConfig"] = surface(
            tree("traceml_ai/sdk/initial.py"), ["TraceMLInitConfig"])["TraceMLInitConfig"]
        for n in integrations:
            t = tree(n)
            modules[n[:-3].replace("/", ".")] = surface(t, all_names(t))
        return modules, cli_flags(tree("traceml_ai/launcher/cli.py"))


def test_every_050_python_name_and_keyword(wheel):
    modules, _ = wheel
    want = {m: sorted(names) for m, names in modules.items()}
    p = subprocess.run([PYTHON, "-c", OURS, json.dumps(want)], capture_output=True, text=True,
                       timeout=180, env=base_env())
    assert p.returncode == 0, p.stderr
    ours = json.loads(p.stdout.strip().splitlines()[-1])
    missing, counted = [], 0
    for module, names in modules.items():
        got = ours.get(module, {})
        assert "error" not in got, (module, got)
        for name, kws in names.items():
            counted += 1
            if name not in got:
                missing.append("%s.%s" % (module, name))
                continue
            have = got[name]
            for kw in kws:
                counted += 1
                if kw not in have["params"] and kw not in have["fields"] and not have["var_kw"]:
                    missing.append("%s.%s(%s=)" % (module, name, kw))
    print("0.5.0 Python names and keywords accepted here: %d of %d" % (counted - len(missing),
                                                                        counted))
    assert not missing, "0.5.0's names missing here: %s" % missing
    assert counted >= 60, counted        # the parse found 0.5.0's surface


@pytest.mark.quick
def test_every_050_command_and_flag_is_run(wheel):
    _, flags = wheel
    assert {"run", "watch", "serve", "compare", "view", "inspect"} <= set(flags), flags
    untested = ["%s %s" % (cmd, f) for cmd, opts in sorted(flags.items())
                for f in sorted(opts - COVERED.get(cmd, set()))]
    total = len(flags) + sum(len(v) for v in flags.values())
    print("0.5.0 commands and flags run here: %d of %d" % (total - len(untested), total))
    assert not untested, "0.5.0 flags that no test here runs: %s" % untested
    assert len(flags["run"]) >= 25, flags["run"]
