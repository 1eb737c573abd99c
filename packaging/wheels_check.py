"""`make wheels-check`: every runtime dependency of the server resolves to wheels (no sdist, no
compiler) for every target VS Code runs on and every supported Python — exactly what
``pip download --only-binary=:all: --platform P --python-version V`` answers from PyPI. Needs
network access to PyPI; ignores this machine's pip configuration (find-links, extra indexes).

Then the same for the ``postgres`` extra (psycopg with its binary wheel), which the .vsix carries
where it resolves: every target must resolve except the known gaps of ``targets.py``
(``postgres_gap``: win32-arm64), which are reported, not failed; a gap that resolves now is
reported too, so the table gets updated.

``python packaging/wheels_check.py REQ...`` checks REQ instead (e.g. "sqlean.py>=3.50.4").
Prints one line per target with the native wheels chosen, and exits 1 naming each failure."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from targets import PYTHONS, TARGETS, Target

ROOT = Path(__file__).resolve().parent.parent
INDEX = os.environ.get("WHEELS_CHECK_INDEX", "https://pypi.org/simple")


def _project() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        project: dict[str, Any] = tomllib.load(file)["project"]
    return project


def dependencies() -> list[str]:
    return list(_project()["dependencies"])


def extra(name: str) -> list[str]:
    """The requirements of the optional dependency group ``name`` (``postgres``)."""
    return list(_project()["optional-dependencies"][name])


#: What the .vsix adds for the PostgreSQL engine where psycopg-binary has a wheel.
POSTGRES_EXTRA = "postgres"


def marker_gaps(target: Target) -> list[str]:
    """Requirements of the ``postgres`` extra that pip leaves out when building for ``target``
    on another platform: it judges environment markers by the building host, not
    ``--platform``, so psycopg's ``tzdata; sys_platform == "win32"`` is named here."""
    return ["tzdata"] if target.windows else []


def postgres_requirements(target: Target) -> list[str]:
    """The ``postgres`` extra as the .vsix installs it for ``target`` (empty: a known gap)."""
    if target.postgres_gap is not None:
        return []
    return [*extra(POSTGRES_EXTRA), *marker_gaps(target)]


def pip_env() -> dict[str, str]:
    """The user's and the machine's pip configuration out of the way: only PyPI answers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_INDEX_URL": INDEX,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if Path("/etc/ssl/certs/ca-certificates.crt").is_file():
        env["PIP_CERT"] = "/etc/ssl/certs/ca-certificates.crt"
    return env


def resolve(target: Target, python: str, requirements: list[str]) -> tuple[list[str], str]:
    """The wheel files pip chooses (empty and pip's error when it cannot)."""
    with tempfile.TemporaryDirectory() as folder:
        platforms = [arg for p in target.platforms for arg in ("--platform", p)]
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--only-binary=:all:",
            *platforms,
            "--python-version",
            python,
            "--implementation",
            "cp",
            "--dest",
            folder,
            *requirements,
        ]
        done = subprocess.run(command, capture_output=True, text=True, env=pip_env(), check=False)
        files = sorted(os.listdir(folder))
        if done.returncode != 0:
            return [], (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        not_wheels = [f for f in files if not f.endswith(".whl")]
        if not_wheels:
            return [], f"not wheels: {not_wheels}"
        return files, ""


def native(wheel: str) -> bool:
    return not wheel.endswith("-none-any.whl")


def check(requirements: list[str]) -> list[str]:
    """One line per target and Python; the failures."""
    jobs = [(t, v) for t in TARGETS.values() for v in PYTHONS]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: resolve(*job, requirements), jobs))
    failures = []
    for (target, python), (files, error) in zip(jobs, results, strict=True):
        if error:
            failures.append(f"{target.name} Python {python}: {error}")
            print(f"FAIL {target.name:13} {python}: {error}")
        else:
            compiled = ", ".join(f for f in files if native(f)) or "(all pure)"
            print(f"ok   {target.name:13} {python}: {len(files)} wheels; native: {compiled}")
    print(f"{len(jobs) - len(failures)}/{len(jobs)} target x Python combinations resolve to wheels")
    return failures


def check_postgres() -> list[str]:
    """The ``postgres`` extra per target and Python, as the .vsix bundles it: the failures
    (a target expected to carry it that does not resolve). Known gaps are tried too and
    reported either way, never failed."""
    jobs = [(t, v) for t in TARGETS.values() for v in PYTHONS]
    wanted = {t.name: postgres_requirements(t) or extra(POSTGRES_EXTRA) for t in TARGETS.values()}
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: resolve(*job, wanted[job[0].name]), jobs))
    failures = []
    resolved = 0
    gaps: dict[str, list[str]] = {}
    for (target, python), (files, error) in zip(jobs, results, strict=True):
        resolved += not error
        if target.postgres_gap is not None:
            gaps.setdefault(target.name, [])
            state = "gap " if error else "NEW "
            if not error:
                gaps[target.name].append(python)
            print(
                f"{state} {target.name:13} {python}: {error or 'resolves now'} "
                f"(known gap: {target.postgres_gap}; its .vsix ships without psycopg)"
            )
        elif error:
            failures.append(f"{target.name} Python {python} ({POSTGRES_EXTRA} extra): {error}")
            print(f"FAIL {target.name:13} {python}: {error}")
        else:
            compiled = ", ".join(f for f in files if native(f)) or "(all pure)"
            print(f"ok   {target.name:13} {python}: {len(files)} wheels; native: {compiled}")
    covered = [t.name for t in TARGETS.values() if t.postgres_gap is None]
    print(
        f"{POSTGRES_EXTRA} extra ({', '.join(extra(POSTGRES_EXTRA))}): {resolved}/{len(jobs)} "
        f"target x Python combinations resolve to wheels; bundled in {len(covered)}/"
        f"{len(TARGETS)} targets; known gaps: "
        + (", ".join(f"{name} ({TARGETS[name].postgres_gap})" for name in gaps) or "none")
    )
    for name, pythons in gaps.items():
        if pythons:
            print(
                f"note: {name} now resolves the {POSTGRES_EXTRA} extra for Python "
                f"{', '.join(pythons)}: drop its postgres_gap in packaging/targets.py"
            )
    return failures


def main() -> int:
    if sys.argv[1:]:  # other requirements: to compare bindings
        failures = check(sys.argv[1:])
    else:
        print("Runtime dependencies:")
        failures = check(dependencies())
        print(f"\nThe {POSTGRES_EXTRA} extra, as each target's .vsix bundles it:")
        failures += check_postgres()
    if failures:
        print("\n".join(["Unresolved:", *failures]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
