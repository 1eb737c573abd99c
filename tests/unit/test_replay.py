"""The provider state replay (bench/replay.py) on a handful of sessions of every shape: no body
carries state its target refuses, every piece of state the target takes is kept (the bench's
target is 95 %; a small run keeps all of it), every injected refusal (in a ``prepare`` body or
a ``format`` one) is recovered by one report and one new body, and the SDK types and structural
rules accept every body. ``make bench`` runs it on 200 sessions and writes the figures into
BENCHMARKS.md."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_small_replay_meets_the_targets() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import replay

    figures = replay.replay(10, seed=7, log=lambda _: None)
    assert set(figures["shapes"]) == set(replay.SHAPES) and min(figures["shapes"].values()) >= 2
    assert figures["bodies"] > 200 and figures["valid"] > 100
    assert figures["refused"] == []
    assert figures["sdk"] == []
    assert figures["kept"] == figures["valid"]
    assert figures["injected"] >= 10
    assert figures["recovered"] == figures["injected"]
