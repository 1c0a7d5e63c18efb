"""final_summary.json against docs/summary.schema.json.

The golden test binary (build/tests/test_golden, or $TML_BUILD/tests/...)
writes the JSON of every tests/golden case into a temporary folder; each
must validate against the documented schema, and its "text" must be the
golden box. Run from the repository root:

    .venv/bin/python -m pytest tests/e2e/test_schema.py
"""
import copy
import json
import os
import pathlib
import subprocess

import jsonschema
import pytest

QUICK = True      # no real torch: the quick tier (conftest.py)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "summary.schema.json").read_text())
BUILD = pathlib.Path(os.environ.get("TML_BUILD", ROOT / "build"))
BINARY = BUILD / "tests" / "test_golden"
CASES = sorted(p.stem for p in (ROOT / "tests" / "golden").glob("*.steps"))


@pytest.fixture(scope="module")
def summaries(tmp_path_factory):
    if not BINARY.exists():
        pytest.fail(f"{BINARY} is missing: run `make -j2 {BINARY.relative_to(ROOT)}` first")
    out = tmp_path_factory.mktemp("golden-json")
    env = dict(os.environ, TML_GOLDEN_JSON_DIR=str(out))
    env.pop("TML_GOLDEN_UPDATE", None)
    subprocess.run([str(BINARY)], cwd=ROOT, env=env, check=True, capture_output=True)
    return {c: json.loads((out / f"{c}.json").read_text()) for c in CASES}


def validator():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


@pytest.mark.parametrize("case", CASES)
def test_golden_json_matches_schema(summaries, case):
    errors = sorted(validator().iter_errors(summaries[case]), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


@pytest.mark.parametrize("case", CASES)
def test_text_is_the_golden_box(summaries, case):
    box = (ROOT / "tests" / "golden" / f"{case}.txt").read_text(encoding="utf-8")
    assert summaries[case]["text"] == box


def test_missing_is_null_not_zero(summaries):
    s = summaries["input_bound"]
    assert s["system"]["average"]["cpu_percent"] is None
    assert s["step_memory"]["average"]["peak_reserved_bytes"] is None
    assert s["step_time"]["average"]["h2d_ms"] == pytest.approx(0.4)
    inc = summaries["incomplete_forward"]
    assert inc["step_time"]["average"]["forward_ms"] is None
    assert inc["step_time"]["average"]["h2d_ms"] == 0
    assert inc["primary_diagnosis"]["evidence"]["missing_phases"] == ["forward"]


def test_schema_rejects_drift(summaries):
    v = validator()
    good = summaries["input_straggler_2rank"]
    bad = []
    d = copy.deepcopy(good); del d["meta"]["clock"]; bad.append(d)
    d = copy.deepcopy(good); d["meta"]["surprise"] = 1; bad.append(d)
    d = copy.deepcopy(good); d["step_time"]["average"]["input_wait_ms"] = "12 ms"; bad.append(d)
    d = copy.deepcopy(good); d["primary_diagnosis"]["severity"] = "BAD"; bad.append(d)
    d = copy.deepcopy(good); d["schema_version"] = 2; bad.append(d)
    d = copy.deepcopy(good); d["step_time"]["per_rank"][0]["missing_phases"] = ["fwd"]; bad.append(d)
    for d in bad:
        assert not v.is_valid(d)
