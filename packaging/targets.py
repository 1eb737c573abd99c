"""The platforms a .vsix is built for (VS Code's ``--target`` names), the wheel platform tags pip
may choose for each, the Pythons the server supports, and which targets carry the PostgreSQL
engine's driver: the one table `make wheels-check`, `make vsix` and `make dist-check` read."""

from __future__ import annotations

from dataclasses import dataclass

PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def _manylinux(arch: str) -> tuple[str, ...]:
    """glibc 2.28 (VS Code's own floor since 1.86) and every older manylinux tag."""
    return (
        *(f"manylinux_2_{minor}_{arch}" for minor in range(28, 16, -1)),
        f"manylinux2014_{arch}",
    )


@dataclass(frozen=True)
class Target:
    name: str  # vsce package --target
    platforms: tuple[str, ...]  # pip download --platform, best first
    #: what `file` says about a compiled module built for it (checked in every packaged .so/.pyd)
    machine: str
    binary_format: str  # ELF, Mach-O or PE32+
    #: Why the ``postgres`` extra (psycopg with its binary wheel, libpq inside) is left out of
    #: this target's .vsix; None: it is bundled. Only a known gap, checked by `make wheels-check`
    #: (a new wheel there is reported, so the gap gets closed here).
    postgres_gap: str | None = None

    @property
    def windows(self) -> bool:
        return self.name.startswith("win32")


TARGETS = {
    t.name: t
    for t in (
        Target("win32-x64", ("win_amd64",), "x86-64", "PE32+"),
        Target(
            "win32-arm64",
            ("win_arm64",),
            "Aarch64",
            "PE32+",
            postgres_gap="psycopg-binary publishes no win_arm64 wheel",
        ),
        Target(
            "darwin-x64",
            (
                "macosx_11_0_x86_64",
                "macosx_10_15_x86_64",
                "macosx_10_13_x86_64",
                "macosx_10_9_x86_64",
            ),
            "x86_64",
            "Mach-O",
        ),
        Target("darwin-arm64", ("macosx_11_0_arm64",), "arm64", "Mach-O"),
        Target("linux-x64", _manylinux("x86_64"), "x86-64", "ELF"),
        Target("linux-arm64", _manylinux("aarch64"), "aarch64", "ELF"),
        Target("alpine-x64", ("musllinux_1_2_x86_64", "musllinux_1_1_x86_64"), "x86-64", "ELF"),
        Target(
            "alpine-arm64", ("musllinux_1_2_aarch64", "musllinux_1_1_aarch64"), "aarch64", "ELF"
        ),
    )
}
