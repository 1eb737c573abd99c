"""`make wheels-check`: every runtime dependency of the server resolves to wheels (no sdist, no
compiler) for every target VS Code runs on and every supported Python — exactly what
``pip download --only-binary=:all: --platform P --python-version V`` answers from PyPI. Needs
network access to PyPI; ignores this machine's pip configuration (find-links, extra indexes).

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

from targets import PYTHONS, TARGETS, Target

ROOT = Path(__file__).resolve().parent.parent
INDEX = os.environ.get("WHEELS_CHECK_INDEX", "https://pypi.org/simple")


def dependencies() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["project"]["dependencies"])


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


def main() -> int:
    requirements = sys.argv[1:] or dependencies()  # other requirements: to compare bindings
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
    if failures:
        print("\n".join(["Unresolved:", *failures]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
