"""A throwaway PostgreSQL cluster for the test session: Debian's binaries (``postgresql``,
installed by ``make test``), ``initdb`` into a temp folder, listening on a unix socket only, fsync
off, started once and stopped by its postmaster's PID. Each test takes a fresh database copied from
a template that already holds the schema (``CREATE DATABASE ... TEMPLATE``).

Running as root (CI containers), the cluster belongs to the ``postgres`` user (``initdb`` refuses
root): the commands run through ``runuser``. Otherwise they run as the current user."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

#: The superuser every test database belongs to (initdb's ``-U``).
SUPERUSER = "postgres"


def binaries() -> Path | None:
    """The folder of the newest installed server's binaries (``pg_ctl``, ``initdb``)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class Cluster:
    """One running cluster; ``url(dbname)`` is a libpq URI over its socket."""

    def __init__(self) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError(
                "PostgreSQL is not installed: `make test` installs Debian's postgresql and "
                "postgresql-contrib (apt-get install -y postgresql postgresql-contrib)"
            )
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="chat-history-pg-"))
        self.data = self.root / "data"
        self.socket = self.root / "socket"
        self.socket.mkdir()
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, SUPERUSER)
            shutil.chown(self.socket, SUPERUSER)
            self._as = ["runuser", "-u", SUPERUSER, "--"]
        self.pid: int | None = None
        self._template_ready = False

    def run(self, *command: str) -> None:
        subprocess.run(
            [*self._as, *command], check=True, capture_output=True, text=True, cwd=self.root
        )

    def start(self) -> None:
        self.run(
            str(self.bin / "initdb"),
            "--no-sync",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "-U",
            SUPERUSER,
            "-D",
            str(self.data),
        )
        self._start_postmaster()

    def _start_postmaster(self) -> None:
        """pg_ctl start on the data folder: a unix socket only, no fsync (a throwaway cluster)."""
        options = f"-c listen_addresses='' -k {self.socket} -c fsync=off -c full_page_writes=off"
        self.run(
            str(self.bin / "pg_ctl"),
            "start",
            "-w",
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
        )
        self.pid = self._postmaster_pid()

    def _postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().splitlines()[0])

    def restart(self) -> None:
        """Stop the server (fast: sessions are cut) and start it again on the same folder."""
        self.run(str(self.bin / "pg_ctl"), "stop", "-m", "fast", "-w", "-D", str(self.data))
        self._start_postmaster()

    def stop(self) -> None:
        """Stop the postmaster by its PID (SIGINT: fast shutdown) and wait until it is gone;
        then remove the folder."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
            give_up = time.monotonic() + 30
            while time.monotonic() < give_up:
                try:
                    os.kill(self.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            self.pid = None
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@/{dbname}?host={self.socket}"

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as connection:
            connection.execute(sql)  # type: ignore[arg-type]

    def fresh_database(self, name: str) -> str:
        """A new database holding the current schema (copied from a template migrated once);
        returns its URL."""
        if not self._template_ready:
            from chat_history.store.postgres import PostgresStore

            self.execute("CREATE DATABASE chat_template")
            PostgresStore(self.url("chat_template")).close_after_migrating()
            self._template_ready = True
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE chat_template')
        # A copy has the template's secrets: draw its own, as a database set up anew would.
        import secrets

        import psycopg

        with psycopg.connect(self.url(name), autocommit=True) as connection:
            connection.execute("UPDATE server_keys SET secret = %s", (secrets.token_bytes(32),))
        return self.url(name)

    def database_folder(self, dbname: str) -> Path:
        """The folder of ``dbname``'s relation files (``base/<oid>``)."""
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as connection:
            row = connection.execute(
                "SELECT oid FROM pg_database WHERE datname = current_database()"
            ).fetchone()
        assert row is not None
        return self.data / "base" / str(row[0])


def serve() -> int:
    """``python -m tests.pgcluster serve``: a cluster for a test written in another language (the
    panel's install e2e). Prints one JSON line, ``{"url", "bin", "pid"}`` (a database
    ``chat_history`` owned by the superuser; ``bin``: the folder of ``psql``), keeps the cluster
    while its stdin is open, then stops it by its PID."""
    import json
    import sys

    cluster = Cluster()
    try:
        cluster.start()
        cluster.execute("CREATE DATABASE chat_history")
        answer = {"url": cluster.url("chat_history"), "bin": str(cluster.bin), "pid": cluster.pid}
        print(json.dumps(answer), flush=True)
        sys.stdin.read()  # until the test closes it (or exits)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["serve"]:
        sys.exit("usage: python -m tests.pgcluster serve")
    sys.exit(serve())


def run_workers(source: str, url: str, workers: int, rounds: int) -> None:
    """``workers`` Python processes running ``source`` at once, each with the arguments ``url``,
    its name (``w0``, ``w1``, ...) and ``rounds``; raises when one fails (with its stderr)."""
    import sys

    processes = [
        subprocess.Popen(
            [sys.executable, "-c", source, url, f"w{w}", str(rounds)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
