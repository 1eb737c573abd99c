"""Every script ``make bench`` runs still loads against the current package: each answers
``--help`` (its imports run, no measurement does). A module moved in the package broke
``bench/engines.py`` unseen until a bench run; this finds it in ``make test``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def bench_scripts() -> list[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = makefile.split("\nbench:", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"\$\(PY\) (bench/\S+\.py)", recipe)


def test_the_bench_target_is_read():
    assert "bench/engines.py" in bench_scripts() and len(bench_scripts()) >= 5


@pytest.mark.parametrize("script", bench_scripts())
def test_each_bench_script_loads(script: str):
    done = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_docs_quote_the_economy_figures_of_the_bench_output():
    """docs/semantics.md's prompt-cache figures are the ones bench/economy.py wrote into
    BENCHMARKS.md's table (it writes both), not numbers restated by hand."""
    sys.path.insert(0, str(ROOT / "bench"))
    import economy

    rows = {}
    for line in (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 10 and cells[0] == "coding" and cells[1] == "32k":
            rows[cells[2].split(" (")[0]] = (float(cells[7]), float(cells[9]))
    ours, defaults = rows["ours, recommended"], rows["ours, defaults"]
    sentence = economy.figures_sentence(*ours, *defaults)
    doc = (ROOT / "docs" / "semantics.md").read_text(encoding="utf-8")
    quoted = doc.split(economy.FIGURES_START, 1)[1].split(economy.FIGURES_END, 1)[0]
    assert quoted == sentence


def test_the_trees_bench_runs_small():
    """bench/trees.py's smoke run (tiny sizes, a few calls; its figures are not judged here, the
    bench reports them): the storage compared row for row, each size's tree of 100 inactive
    branches built and read whole, every switch landing on the leaf it named and the branchy
    conversation's ``prepare`` body equal to the line's (the bench asserts both as it runs),
    in process and over stdio."""
    done = subprocess.run(
        [sys.executable, "bench/trees.py", "--smoke", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    stored = figures["storage"]
    assert stored["rows"] == 270 and stored["regenerations"] == 20
    assert stored["bytes"]["tree"] > stored["bytes"]["empty"] < stored["bytes"]["line"]
    for size, shape in figures["shapes"].items():
        assert abs(shape["rows"] - int(size)) <= int(size) // 20
        assert shape["active"] < shape["rows"]
    for how in ("in-process", "stdio"):
        assert set(figures[how]) >= {"switchBranch ‹ 1/2 › (1 row each way)", "prepare at 800"}
    assert "## Conversation trees" in done.stdout
