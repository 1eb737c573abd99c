"""`make vsix TARGET=<vsce target> [PAYLOAD=frozen,libs]`: the sample panel packaged with the
server inside, for one platform (``vsce package --target``).

Payloads (the shim's findServer looks for them in this order, after an explicit interpreter):
- ``frozen``: ``server/chat-history-server`` built with PyInstaller (onedir, stripped) from the
  server's wheel; needs no Python. PyInstaller does not cross-compile, so only the host's own
  target can have it (linux-x64 here).
- ``libs``: ``bundled/boot.py`` and ``bundled/libs``: the server's wheel and every runtime
  dependency installed from the target's wheels (``pip install --only-binary=:all: --platform``)
  for each of Python 3.11-3.14, merged: the pure files are the same for every version, the
  compiled ones carry the version in their names. Run as ``python -I -S bundled/boot.py``.

Both carry the ``postgres`` extra (psycopg 3 and psycopg-binary, libpq inside) so that a
database URL works from the .vsix alone, except on the targets where it has no wheel
(``postgres_gap`` in targets.py: win32-arm64), whose server answers a database URL with -32602
naming the field. The server imports psycopg only when a database is named.

Default payload: ``frozen,libs`` on the host's own target, ``libs`` elsewhere. Every compiled file
packed is checked against the target (format and machine: ELF/Mach-O/PE, x86-64/arm64), the
PostgreSQL driver's presence (or known absence) too, and the size is printed. Output:
dist/chat-panel-<target>.vsix."""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import filecmp
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from targets import PYTHONS, TARGETS, Target
from wheels_check import POSTGRES_EXTRA, marker_gaps, pip_env

ROOT = Path(__file__).resolve().parent.parent
PANEL = ROOT / "examples" / "chat-panel"
BUILD = ROOT / "build"
DIST = ROOT / "dist"
#: The panel's files the .vsix carries (its .vscodeignore allow-list).
PANEL_FILES = [
    "package.json",
    "README.md",
    "LICENSE",
    "dist/extension.js",
    "dist/webview.js",
    "media/chat.svg",
    "media/panel.css",
]
PURE_ONLY = ("bin", "__pycache__")
#: Parts of APSW the server never loads: SQLite's loadable extensions and tool library, APSW's
#: tests, shell, benchmark, type stubs and Python-side Unicode tokenizer (~5 MB per Python).
PRUNED = (
    "apsw/sqlite_extra_binaries/",
    "apsw/tests/",
    "apsw/__init__.pyi",
    "apsw/shell.py",
    "apsw/speedtest.py",
    "apsw/fts_test_strings",
    "apsw/_unicode.",
)


def pruned(relative: Path) -> bool:
    return relative.as_posix().startswith(PRUNED)


def host_target() -> str | None:
    machine = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform)
    if machine is None or system is None:
        return None
    if system == "linux" and os.path.exists("/etc/alpine-release"):
        system = "alpine"
    return f"{system}-{machine}"


def run(command: list[str], **kwargs: object) -> None:
    print("+", " ".join(str(c) for c in command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def server_wheel(work: Path) -> Path:
    out = work / "wheel"
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)])
    (wheel,) = out.glob("chat_history_server-*.whl")
    return wheel


# -- libs ----------------------------------------------------------------------------------------


def requirements(target: Target, wheel: Path) -> list[str]:
    """What is installed for ``target``: the server's wheel, with the ``postgres`` extra where
    it has wheels (and what pip, judging markers by this host, would leave out of it)."""
    if target.postgres_gap is not None:
        return [str(wheel)]
    return [f"{wheel}[{POSTGRES_EXTRA}]", *marker_gaps(target)]


def bundle_libs(target: Target, wheel: Path, work: Path, stage: Path) -> None:
    libs = stage / "bundled" / "libs"
    libs.mkdir(parents=True)
    platforms = [arg for p in target.platforms for arg in ("--platform", p)]

    def install(python: str) -> Path:
        into = work / f"libs-{python}"
        run(
            [
                sys.executable, "-m", "pip", "install", "--quiet", "--no-compile",
                "--only-binary=:all:", *platforms, "--python-version", python,
                "--implementation", "cp", "--target", str(into), *requirements(target, wheel),
            ],
            env=pip_env(),
        )  # fmt: skip
        return into

    # One pip per Python version at once (each mostly waits on the index), merged in order.
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(PYTHONS)) as pool:
        for into in pool.map(install, PYTHONS):
            merge(into, libs)
    for junk in [*libs.glob("bin"), *libs.rglob("__pycache__")]:
        shutil.rmtree(junk, ignore_errors=True)
    shutil.copy2(Path(__file__).parent / "boot.py", stage / "bundled" / "boot.py")


def merge(source: Path, into: Path) -> None:
    """Adds one Python version's install to the merged folder: a file both have must be equal
    (pure code is the same for every version; compiled modules differ in name)."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        skip = relative.parts[0] in PURE_ONLY or "__pycache__" in relative.parts
        if path.is_dir() or skip or pruned(relative):
            continue
        destination = into / relative
        if destination.exists():
            if relative.parts[0].endswith(".dist-info") and relative.name != "METADATA":
                continue  # per-wheel bookkeeping: tags, hashes, auditwheel's SBOM, delvewheel's
            if not filecmp.cmp(path, destination, shallow=False):
                raise SystemExit(f"{relative} differs between Python versions: cannot merge")
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)


# -- frozen --------------------------------------------------------------------------------------


def freeze(target: Target, wheel: Path, work: Path, stage: Path) -> None:
    """PyInstaller onedir build of boot.py from a clean venv holding only the server's wheel
    (with the ``postgres`` extra where the target has it). psycopg is imported only inside the
    engine choice and some of its modules are loaded from psycopg_binary's compiled code, so
    psycopg is collected whole and psycopg_binary's two compiled modules named (it refuses to be
    imported on its own, so it cannot be collected); libpq and the libraries it links
    (psycopg_binary.libs) come with them through PyInstaller's analysis of the compiled
    modules. ``smoke_postgres`` proves it loads."""
    venv = work / "freeze-venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    wanted = requirements(target, wheel)
    run([str(python), "-m", "pip", "install", "--quiet", *wanted, "pyinstaller>=6.10"])
    postgres = []
    if target.postgres_gap is None:
        postgres = ["--collect-submodules", "psycopg"]
        postgres += [
            "--hidden-import",
            "psycopg_binary.pq",
            "--hidden-import",
            "psycopg_binary._psycopg",
        ]
    run(
        [
            str(python), "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
            "--onedir", "--strip", "--name", "chat-history-server",
            "--collect-submodules", "chat_history", "--collect-data", "chat_history",
            "--collect-submodules", "pygls", *postgres, "--exclude-module", "apsw.tests",
            # chat-history mcp: the MCP SDK and its types, loaded only when that command runs
            "--collect-submodules", "mcp_types",
            # chat-history acp: the ACP SDK, loaded only when that command runs
            "--collect-submodules", "acp",
            "--exclude-module", "apsw.shell", "--exclude-module", "apsw.speedtest",
            "--distpath", str(work / "frozen"), "--workpath", str(work / "pyinstaller"),
            "--specpath", str(work), str(Path(__file__).parent / "boot.py"),
        ],
        # its own cache, which --clean empties: builds running at once keep theirs
        env={**os.environ, "PYINSTALLER_CONFIG_DIR": str(work / "pyinstaller-config")},
    )  # fmt: skip
    server = stage / "server"
    shutil.copytree(work / "frozen" / "chat-history-server", server, symlinks=True)
    drop_library_aliases(server)


def drop_library_aliases(server: Path) -> None:
    """PyInstaller keeps a wheel's vendored libraries where the wheel had them (auditwheel's
    ``psycopg_binary.libs/``, found there through the modules' own RPATH) and adds a symbolic
    link to each at the top of ``_internal``. A .vsix cannot hold a link (vsce would pack the
    library twice: 9 MB for libpq, OpenSSL and Kerberos), and nothing loads them by that path:
    the links go. ``smoke_postgres`` then proves libpq still loads."""
    for link in sorted(server.rglob("*")):
        if not link.is_symlink():
            continue
        target = link.resolve()
        if target.is_relative_to(server.resolve()) and target.parent.name.endswith(".libs"):
            link.unlink()


# -- checks --------------------------------------------------------------------------------------

ELF_MACHINES = {62: "x86-64", 183: "aarch64"}
MACHO_CPUS = {0x01000007: "x86_64", 0x0100000C: "arm64"}
PE_MACHINES = {0x8664: "x86-64", 0xAA64: "Aarch64"}


def binary_kind(path: Path) -> tuple[str, str] | None:
    """(format, machine) of a compiled file, None for anything else."""
    with open(path, "rb") as file:
        head = file.read(64)
        if head[:4] == b"\x7fELF":
            little = head[5] == 1
            (machine,) = struct.unpack("<H" if little else ">H", head[18:20])
            return "ELF", ELF_MACHINES.get(machine, f"machine {machine}")
        if head[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe"):
            (cpu,) = struct.unpack("<I", head[4:8])
            return "Mach-O", MACHO_CPUS.get(cpu, f"cpu {cpu:#x}")
        if head[:4] in (b"\xca\xfe\xba\xbe",):  # a fat (universal2) file: its architectures
            (count,) = struct.unpack(">I", head[4:8])
            file.seek(8)
            cpus = [struct.unpack(">I", file.read(20)[:4])[0] for _ in range(min(count, 8))]
            names = "+".join(MACHO_CPUS.get(cpu, f"{cpu:#x}") for cpu in cpus)
            return "Mach-O", f"universal({names})"
        if head[:2] == b"MZ":
            (offset,) = struct.unpack("<I", head[60:64])
            file.seek(offset)
            if file.read(4) != b"PE\0\0":
                return None
            (machine,) = struct.unpack("<H", file.read(2))
            return "PE32+", PE_MACHINES.get(machine, f"machine {machine:#x}")
    return None


def elf_libc(path: Path) -> str | None:
    """The C library an ELF file needs (``glibc``/``musl``; None: neither, or no objdump)."""
    if shutil.which("objdump") is None:
        return None
    headers = subprocess.run(["objdump", "-p", str(path)], capture_output=True, text=True).stdout
    lines = headers.splitlines()
    needed = [line.split()[-1] for line in lines if line.strip().startswith("NEEDED")]
    if any(name.startswith("libc.musl") for name in needed):
        return "musl"
    if "libc.so.6" in needed:
        return "glibc"
    return None


def check_compiled(target: Target, stage: Path) -> int:
    """Every compiled file is the target's format and machine; their number."""
    wrong = []
    count = 0
    for path in sorted(stage.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        kind = binary_kind(path)
        if kind is None:
            continue
        count += 1
        fat = kind[1].removeprefix("universal(").removesuffix(")").split("+")
        if kind[0] == target.binary_format == "Mach-O" and target.machine in fat:
            continue  # a universal2 file (cryptography's) holds the target's machine
        if kind != (target.binary_format, target.machine):
            wrong.append(f"{path.relative_to(stage)}: {kind[0]} {kind[1]}")
        elif kind[0] == "ELF" and (libc := elf_libc(path)) is not None:
            musl = target.name.startswith("alpine")
            if libc != ("musl" if musl else "glibc"):
                wrong.append(f"{path.relative_to(stage)}: linked against {libc}")
    if wrong:
        raise SystemExit(f"compiled files not for {target.name}:\n" + "\n".join(wrong))
    return count


def glibc_floor(stage: Path) -> str | None:
    """The newest GLIBC symbol version the frozen server needs (None: not an ELF build)."""
    server = stage / "server"
    if not server.is_dir() or shutil.which("objdump") is None:
        return None
    newest = (0, 0)
    for path in server.rglob("*"):
        if path.is_file() and not path.is_symlink() and binary_kind(path) is not None:
            symbols = subprocess.run(["objdump", "-T", str(path)], capture_output=True, text=True)
            for word in symbols.stdout.replace("(", " ").replace(")", " ").split():
                if word.startswith("GLIBC_2."):
                    version = tuple(int(p) for p in word[6:].split(".")[:2] if p.isdigit())
                    newest = max(newest, (version[0], version[1] if len(version) > 1 else 0))
    return None if newest == (0, 0) else f"{newest[0]}.{newest[1]}"


def check_python_versions(stage: Path) -> list[str]:
    """The CPython versions every compiled module of the bundle exists for."""
    compiled = [p for p in (stage / "bundled" / "libs").rglob("*") if p.suffix in (".so", ".pyd")]
    versions = []
    for python in PYTHONS:
        tag = python.replace(".", "")
        if not any(f"{tag}" in p.name for p in compiled):
            raise SystemExit(f"no compiled module for Python {python} in bundled/libs")
        versions.append(python)
    return versions


def check_postgres(target: Target, stage: Path) -> str:
    """The PostgreSQL driver in every payload of ``stage``: psycopg, psycopg_binary's two
    compiled modules for every Python of ``bundled/libs`` (for the frozen server's own Python in
    ``server/``) and the libpq they load. On a target with a known gap (``postgres_gap``): none of
    it, so the server says a database cannot be used there rather than failing to load it.
    What was found, in words; SystemExit naming what is wrong."""
    payloads = [
        (part, PYTHONS if part.name == "libs" else None)
        for part in (stage / "bundled" / "libs", stage / "server")
        if part.is_dir()
    ]
    wrong = []
    versions = set()
    for part, pythons in payloads:
        where = part.relative_to(stage).as_posix()
        drivers = [p for p in part.rglob("*") if p.parent.name in ("psycopg", "psycopg_binary")]
        if target.postgres_gap is not None:
            wrong += [f"{where}: {p.relative_to(part)} (expected none)" for p in drivers[:3]]
            continue
        in_files = pythons is not None  # the frozen server keeps pure modules in its archive
        if in_files and not any(
            p.parent.name == "psycopg" and p.name == "__init__.py" for p in drivers
        ):
            wrong.append(f"{where}: no psycopg package")
        compiled = [p.name for p in drivers if p.parent.name == "psycopg_binary"]
        compiled = [n for n in compiled if n.endswith((".so", ".pyd"))]
        for module in ("_psycopg", "pq"):
            mine = [n for n in compiled if n.startswith(module + ".")]
            if pythons is None and not mine:
                wrong.append(f"{where}: no compiled psycopg_binary.{module}")
            for python in pythons or ():
                tag = python.replace(".", "")
                if not any(f"-{tag}" in n or f"cp{tag}" in n for n in mine):
                    wrong.append(f"{where}: no psycopg_binary.{module} for Python {python}")
        if not any(p.name.startswith("libpq") for p in part.rglob("*libpq*")):
            wrong.append(f"{where}: no libpq")
        versions |= {
            p.name.removesuffix(".dist-info").split("-")[1]
            for p in part.glob("psycopg-*.dist-info")
            if p.is_dir()
        }
    if wrong:
        raise SystemExit(f"the PostgreSQL driver in the {target.name} bundle:\n" + "\n".join(wrong))
    if target.postgres_gap is not None:
        return f"left out ({target.postgres_gap})"
    version = f"psycopg {', '.join(sorted(versions))} " if versions else "psycopg "
    return (
        version
        + "with psycopg_binary and libpq in "
        + ", ".join(part.relative_to(stage).as_posix() for part, _ in payloads)
    )


def payload_clis(target: Target, stage: Path) -> dict[str, list[str]]:
    """The CLI command of each payload this host can run (``frozen``, ``libs``)."""
    commands = {}
    name = "chat-history-server.exe" if target.windows else "chat-history-server"
    frozen = stage / "server" / name
    if frozen.is_file():
        commands["frozen"] = [str(frozen), "cli"]
    boot = stage / "bundled" / "boot.py"
    if boot.is_file() and f"{sys.version_info[0]}.{sys.version_info[1]}" in PYTHONS:
        commands["libs"] = [sys.executable, "-I", "-S", str(boot), "cli"]
    return commands


def smoke_postgres(target: Target, stage: Path) -> list[str]:
    """On the host's own target: each payload loads psycopg and libpq for real. The CLI of each
    is pointed at a database socket that does not exist: the answer must be libpq's own
    connection error (psycopg and libpq loaded), or, on a target with a known gap, the server's
    "no PostgreSQL driver" refusal. The payloads smoked."""
    with tempfile.TemporaryDirectory() as nowhere:
        url = f"postgresql://nobody@/nothing?host={nowhere}"
        commands = payload_clis(target, stage)
        for name, command in commands.items():
            done = subprocess.run(
                [*command, "--database", url, "workspaces"],
                capture_output=True, text=True, timeout=120, env={"PATH": os.defpath},
            )  # fmt: skip
            if target.postgres_gap is None:
                expected, code = "connection to server on socket", 3
            else:
                expected, code = "no PostgreSQL driver", 2
            if done.returncode != code or expected not in done.stderr:
                raise SystemExit(
                    f"the {name} payload's PostgreSQL driver: exit {done.returncode}, "
                    f"expected {code} and {expected!r}:\n{done.stderr.strip()}"
                )
    return sorted(commands)


def smoke_mcp(target: Target, stage: Path) -> list[str]:
    """On the host's own target: each payload's ``cli mcp`` answers an MCP client's initialize
    and ``tools/list`` with the three tools (docs/mcp.md names these commands to users), on a
    fresh storage folder (``$CHAT_HISTORY_STORAGE``: a default store is made; a ``--db`` that
    names no database is refused, issue 43 item 10). The payloads smoked."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "vsix-smoke", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]  # fmt: skip
    commands = payload_clis(target, stage)
    for name, command in commands.items():
        with tempfile.TemporaryDirectory() as folder:
            process = subprocess.Popen(
                [*command, "mcp", "--workspace", "file:///vsix/smoke"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env={"PATH": os.defpath, "CHAT_HISTORY_STORAGE": folder}, text=True,
            )  # fmt: skip
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
            process.stdin.flush()
            tools: list[str] = []
            for raw in process.stdout:
                answer = json.loads(raw)
                if answer.get("id") == 2:
                    tools = [tool["name"] for tool in answer.get("result", {}).get("tools", [])]
                    break
            process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            if tools != ["search_history", "list_conversations", "read_conversation"]:
                error = process.stderr.read() if process.stderr else ""
                raise SystemExit(f"the {name} payload's chat-history mcp: tools {tools}\n{error}")
    return sorted(commands)


# -- package -------------------------------------------------------------------------------------


def stage_panel(stage: Path, built: bool) -> None:
    if not built:
        run(["npm", "run", "--silent", "build"], cwd=PANEL)
    for name in PANEL_FILES:
        destination = stage / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PANEL / name, destination)
    (stage / ".vscodeignore").write_text("**/__pycache__/**\n**/*.pyc\n.vscodeignore\n")


#: vsce's own secret scan (secretlint, with its rules and its .env check), run by node on a list
#: of files given as JSON on stdin; it prints the findings and exits 1 when there are any.
SECRET_SCAN = """
const files = JSON.parse(require("fs").readFileSync(0, "utf8"));
const lint = require(process.argv[1]);
lint.lintFiles(files, true, true).then((result) => {
  for (const finding of result.results) console.error(lint.prettyPrintLintResult(finding));
  process.exit(result.ok ? 0 : 1);
});
"""


def own_files(stage: Path) -> list[Path]:
    """The staged files this project wrote: the panel's and the server's own package and boot
    script, not the third-party libraries or the frozen binary built from PyPI's wheels."""
    found = []
    for path in sorted(stage.rglob("*")):
        part = path.relative_to(stage).parts
        if not path.is_file() or path.suffix in (".png", ".jpg", ".jpeg", ".gif", ".svg"):
            continue
        if part[0] == "server":
            continue
        if part[0] == "bundled" and part[1:2] != ("boot.py",) and "chat_history" not in part[:3]:
            continue
        found.append(path)
    return found


def scan_secrets(stage: Path) -> int:
    """vsce's secret scan over the files we author. vsce itself would scan every staged file,
    the third-party libraries and the frozen server's binaries included: 40-200 s per .vsix on
    this machine, for files that come unchanged from PyPI's wheels."""
    files = own_files(stage)
    lint = PANEL / "node_modules" / "@vscode" / "vsce" / "out" / "secretLint.js"
    scan = subprocess.run(
        ["node", "-e", SECRET_SCAN, str(lint)],
        input=json.dumps([str(f) for f in files]),
        text=True,
        capture_output=True,
    )
    if scan.returncode != 0:
        raise SystemExit(f"secrets found in the .vsix's files:\n{scan.stderr}")
    return len(files)


def package(target: Target, stage: Path, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    scan_secrets(stage)
    vsce = PANEL / "node_modules" / ".bin" / "vsce"
    command = [str(vsce), "package", "--no-dependencies", "--target", target.name]
    scanned = ["--allow-package-all-secrets", "--allow-package-env-file"]  # just before
    run(
        [*command, "--out", str(out), *scanned],
        cwd=stage,
        stdout=subprocess.DEVNULL,
    )
    return out


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, choices=sorted(TARGETS))
    parser.add_argument("--payload", default="", help="frozen,libs / frozen / libs")
    parser.add_argument("--out", help="the .vsix to write (default dist/chat-panel-<target>.vsix)")
    parser.add_argument(
        "--without-postgres",
        action="store_true",
        help="leave the PostgreSQL driver out, as on a target with a known gap (what a user "
        "there sees, tested on this host by make e2e-install)",
    )
    parser.add_argument(
        "--panel-built",
        action="store_true",
        help="the panel's dist/ is built already (make e2e-install builds it once, then several "
        ".vsix files at once, which must not rebuild it under each other)",
    )
    options = parser.parse_args()
    target = TARGETS[options.target]
    if options.without_postgres and target.postgres_gap is None:
        target = dataclasses.replace(target, postgres_gap="left out by --without-postgres")
    here = host_target() == target.name
    payload = set((options.payload or ("frozen,libs" if here else "libs")).split(","))
    if "frozen" in payload and not here:
        raise SystemExit(f"a frozen server for {target.name} must be built on {target.name}")
    started = time.monotonic()
    BUILD.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD, prefix=f"vsix-{target.name}-") as folder:
        work = Path(folder)
        stage = work / "extension"
        stage.mkdir()
        stage_panel(stage, options.panel_built)
        wheel = server_wheel(work)
        if "libs" in payload:
            bundle_libs(target, wheel, work, stage)
        if "frozen" in payload:
            freeze(target, wheel, work, stage)
        compiled = check_compiled(target, stage)
        versions = check_python_versions(stage) if "libs" in payload else []
        postgres = check_postgres(target, stage)
        smoked = smoke_postgres(target, stage) if here else []
        mcp_smoked = smoke_mcp(target, stage) if here else []
        glibc = glibc_floor(stage)
        sizes = {part: folder_size(stage / part) for part in ("server", "bundled")}
        default = DIST / f"chat-panel-{target.name}.vsix"
        vsix = package(target, stage, Path(options.out).resolve() if options.out else default)
    with zipfile.ZipFile(vsix) as archive:
        files = archive.infolist()
        unpacked = sum(f.file_size for f in files)
        manifest = archive.read("extension.vsixmanifest").decode()
    assert f'TargetPlatform="{target.name}"' in manifest, "vsce did not record the target"
    report = {
        "target": target.name,
        "payload": sorted(payload),
        "vsix": str(vsix.relative_to(ROOT) if vsix.is_relative_to(ROOT) else vsix),
        "bytes": vsix.stat().st_size,
        "files": len(files),
        "unpackedBytes": unpacked,
        "compiledFilesChecked": compiled,
        "bundledPythons": versions,
        "postgres": postgres,
        "postgresLoadedBy": smoked,
        "mcpServedBy": mcp_smoked,
        "frozenGlibcFloor": glibc,
        "unpackedBytesByPart": sizes,
        "seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(report))
    print(
        f"{target.name}: {vsix.name} {vsix.stat().st_size / 1e6:.1f} MB ({len(files)} files, "
        f"{unpacked / 1e6:.1f} MB unpacked), {compiled} compiled files checked "
        f"({target.binary_format} {target.machine}); PostgreSQL driver: {postgres}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
