"""scripts/check-arch's checks on the objects: "calls" (a module uses only
symbols of its own or a lower layer, and the report's printers, every file
of report/ but the model and the reloaders, none of the others' symbols) and "banned" (no unbounded string function), on a small tree
built here: scripts/check-arch reads the tree it sits in.

    .venv/bin/python -m pytest tests/e2e/test_check_arch.py
"""
import pathlib
import shutil
import subprocess

QUICK = True      # no torch at all: the quick tier (conftest.py)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tree(tmp_path, files, build=True):
    """tmp_path as a repository: check-arch, the C files {path: text}, and
    (build) their objects under build/obj/ as make puts them."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check-arch", tmp_path / "scripts" / "check-arch")
    for d in ("src/core", "cli/run"):
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        src = tmp_path / rel
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(text)
        if build:
            obj = tmp_path / "build" / "obj" / rel.replace(".c", ".o")
            obj.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cc", "-std=c11", "-O2", "-c", str(src), "-o", str(obj)], check=True)
    return subprocess.run([str(tmp_path / "scripts" / "check-arch")], capture_output=True,
                          text=True)


REPORT = "int tml__report_thing(int x);\nint tml__report_thing(int x) { return x + 1; }\n"


def test_clean_tree_passes(tmp_path):
    r = tree(tmp_path, {
        "src/base/b.c": "int tml__b(int x);\nint tml__b(int x) { return x * 2; }\n",
        "src/report/r.c": "int tml__b(int x);\nint tml__r(int x);\n"
                          "int tml__r(int x) { return tml__b(x); }\n",
    })
    assert r.returncode == 0, r.stdout
    assert r.stdout.splitlines()[-1] == "check-arch: 6 passed, 0 failed"


def test_a_call_up_the_layers_fails(tmp_path):
    # model/ (layer 1) calling report/ (layer 3) by a declaration of its
    # own: no include names report/, only the object shows the call
    r = tree(tmp_path, {
        "src/report/r.c": REPORT,
        "src/model/m.c": "int tml__report_thing(int x);\nint tml__m(int x);\n"
                         "int tml__m(int x) { return tml__report_thing(x); }\n",
    })
    assert r.returncode == 1
    assert ("FAIL calls: build/obj/src/model/m.o: calls tml__report_thing of report/ (layer 3) "
            "from model/ (layer 1)") in r.stdout
    assert r.stdout.splitlines()[-1] == "check-arch: 5 passed, 1 failed"


def test_a_printer_calling_the_model_fails(tmp_path):
    r = tree(tmp_path, {
        "src/report/report.c": REPORT,
        "src/report/json.c": "int tml__report_thing(int x);\nint tml__j(int x);\n"
                             "int tml__j(int x) { return tml__report_thing(x); }\n",
    })
    assert r.returncode == 1
    assert ("FAIL calls: build/obj/src/report/json.o: a printer calls tml__report_thing of "
            "src/report/report.c") in r.stdout


def test_every_file_of_report_but_the_model_and_reloaders_is_a_printer(tmp_path):
    # a file no list names (notebook.c) is a printer: calling the model
    # (derive.c) fails; a reloader (reload_x.c) may call the model, the
    # model its printers, and a printer another printer
    r = tree(tmp_path, {
        "src/report/derive.c": REPORT,
        "src/report/notebook.c": "int tml__report_thing(int x);\nint tml__nb(int x);\n"
                                 "int tml__nb(int x) { return tml__report_thing(x); }\n",
        "src/report/reload_x.c": "int tml__report_thing(int x);\nint tml__rx(int x);\n"
                                 "int tml__rx(int x) { return tml__report_thing(x); }\n",
        "src/report/report.c": "int tml__nb(int x);\nint tml__rm(int x);\n"
                               "int tml__rm(int x) { return tml__nb(x); }\n",
        "src/report/html.c": "int tml__nb(int x);\nint tml__h(int x);\n"
                             "int tml__h(int x) { return tml__nb(x); }\n",
    })
    assert r.returncode == 1
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
    assert fails == ["FAIL calls: build/obj/src/report/notebook.o: a printer calls "
                     "tml__report_thing of src/report/derive.c (the model calls its printers, "
                     "not back)"], r.stdout


def test_banned_functions_fail_and_comments_do_not(tmp_path):
    r = tree(tmp_path, {
        "src/base/s.c": "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                        "void tml__s(char *d, const char *s);\n"
                        "/* strcat( in a comment, \"sprintf(\" in a string: neither counts */\n"
                        "void tml__s(char *d, const char *s) {\n"
                        "    strcpy(d, s);\n"
                        "    d[0] = (char)atoi(s);\n"
                        "    puts(\"strtok(\");\n"
                        "}\n",
    })
    assert r.returncode == 1
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL banned")]
    assert "FAIL banned: build/obj/src/base/s.o: calls strcpy" in fails
    # glibc inlines atoi into strtol at -O2: nm cannot see it, the source can
    assert "FAIL banned: src/base/s.c:8: calls atoi" in fails
    assert not [f for f in fails if "strcat" in f or "sprintf" in f or "strtok" in f]


def test_without_objects_it_says_run_make(tmp_path):
    r = tree(tmp_path, {"src/base/b.c": "int tml__b(void);\nint tml__b(void) { return 1; }\n"},
             build=False)
    assert r.returncode == 1
    assert "FAIL calls: build/obj/src/ is missing: run make" in r.stdout
    assert "FAIL banned: build/obj/src/ is missing: run make" in r.stdout


def test_a_long_function_of_the_extension_fails(tmp_path):
    # python/_traceml.c is held to the 100-line rule of src/ and cli/
    body = "".join("    x += %d;\n" % i for i in range(100))
    r = tree(tmp_path, {"src/base/b.c": "int tml__b(int x);\nint tml__b(int x) { return x; }\n",
                        "python/ext.c": "static int\nlong_one(int x)\n{\n%s    return x;\n}\n"
                                        % body}, build=False)
    assert "FAIL functions: python/ext.c:2: long_one is 104 lines (at most 100)" in r.stdout, \
        r.stdout


def test_a_comment_naming_a_missing_file_fails(tmp_path):
    # a comment that points at a file the repository does not have is
    # untrue; patterns (docs/*.md, web/report.{js,css}) are no paths
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("x\n")
    r = tree(tmp_path, {"src/base/b.c": "/* see docs/here.md and docs/gone.md;\n"
                                        " * docs/*.md, web/report.{js,css} */\n"
                                        "int tml__b(int x);\nint tml__b(int x) { return x; }\n"})
    assert r.returncode == 1
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")]
    assert fails == ["FAIL paths: src/base/b.c:1: names docs/gone.md, which the repository "
                     "does not have"], r.stdout
