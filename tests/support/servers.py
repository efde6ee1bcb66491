"""Redis and PostgreSQL servers for the connector tests: started on loopback
under a temporary directory, no system service assumed, stopped afterwards.

``redis-server`` comes from PATH; PostgreSQL's ``initdb`` / ``pg_ctl`` from
PATH or Debian's ``/usr/lib/postgresql/<version>/bin``. PostgreSQL refuses to
run as root, so as root the cluster belongs to the ``postgres`` user (Debian's
package creates it; else ``nobody``) and its commands run through ``runuser``.

``python -m support.servers`` (from ``tests/``) starts both and prints their
URLs until interrupted: for the benchmark and for trying the demo by hand.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

REQUIRE_ENV = "FASTOPS_REQUIRE_SERVERS"  # "1": a missing server fails the tests instead of skipping them


class ServerUnavailable(RuntimeError):
    """A server's program is missing or it did not start."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen | None, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ServerUnavailable(f"{what} exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        time.sleep(0.05)
    raise ServerUnavailable(f"{what} did not listen on port {port} within {timeout} s")


class RedisServer:
    """``redis-server`` on 127.0.0.1, no persistence, in ``directory``."""

    def __init__(self, directory: str):
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServerUnavailable("redis-server is not installed (apt-get install redis-server)")
        self.port = free_port()
        self.directory = directory
        self.log = open(os.path.join(directory, "redis.log"), "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", directory, "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes"],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            _wait_port(self.port, self.proc, "redis-server")
        except ServerUnavailable:
            self.stop()
            raise
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if candidates:
        return candidates[-1]
    raise ServerUnavailable(f"PostgreSQL's {name} is not installed (apt-get install postgresql)")


class PostgresServer:
    """A fresh cluster (``initdb``) on 127.0.0.1 with prepared transactions
    enabled; database ``fastops``, user ``fastops``, trust authentication."""

    def __init__(self, directory: str, max_prepared_transactions: int = 64):
        initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        self.directory = directory
        self.data = os.path.join(directory, "data")
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            user = "postgres"
            try:
                pwd.getpwnam(user)
            except KeyError:
                user = "nobody"
            runuser = shutil.which("runuser")
            if runuser is None:
                raise ServerUnavailable("running as root and runuser is missing: cannot start PostgreSQL")
            self.prefix = [runuser, "-u", user, "--"]
            entry = pwd.getpwnam(user)
            os.chown(directory, entry.pw_uid, entry.pw_gid)
        self.pg_ctl = pg_ctl
        self.port = free_port()
        self._run([initdb, "-D", self.data, "-A", "trust", "-U", "fastops", "--no-sync", "-E", "UTF8",
                   "--locale", "C"])
        opts = (f"-h 127.0.0.1 -p {self.port} -k {directory} -c max_prepared_transactions={max_prepared_transactions} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run([pg_ctl, "-D", self.data, "-l", os.path.join(directory, "postgres.log"), "-w", "-t", "60",
                   "-o", opts, "start"])
        self.dsn = f"postgresql://fastops@127.0.0.1:{self.port}/fastops"
        self._run([_pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "fastops", "fastops"])

    def _run(self, cmd: list[str]) -> None:
        done = subprocess.run(self.prefix + cmd, capture_output=True, text=True, cwd=self.directory)
        if done.returncode != 0:
            raise ServerUnavailable(f"{' '.join(cmd[:2])} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def stop(self) -> None:
        subprocess.run(self.prefix + [self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop"],
                       capture_output=True, cwd=self.directory)


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """Both servers for the duration of a ``with``: ``(redis url, postgres dsn)``."""
    directory = tempfile.mkdtemp(prefix="fastops-servers-")
    os.chmod(directory, 0o755)
    redis_dir, pg_dir = os.path.join(directory, "redis"), os.path.join(directory, "pg")
    os.makedirs(redis_dir)
    os.makedirs(pg_dir)
    started: list = []
    try:
        started.append(RedisServer(redis_dir))
        started.append(PostgresServer(pg_dir))
        yield started[0].url, started[1].dsn
    finally:
        for s in reversed(started):
            s.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    with servers() as (redis_url, dsn):
        print(f"redis: {redis_url}\npostgres: {dsn}\n(Ctrl-C stops both)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
