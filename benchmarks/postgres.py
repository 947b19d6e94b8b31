"""A throwaway PostgreSQL cluster on 127.0.0.1, in a temporary directory, for the scale run.

`throwaway_cluster()` installs PostgreSQL from the Debian packages when `initdb` is missing
(as root), runs `initdb` as the `postgres` system user when run as root (PostgreSQL refuses
to run as root), starts the server on a free port of 127.0.0.1 with its socket in the same
directory, and on leaving, also after an error or SIGTERM, stops the server by its PID and
removes the directory.

    with throwaway_cluster() as conninfo:
        ...  # psycopg.connect(conninfo)
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

__all__ = ["find_postgres_binaries", "throwaway_cluster"]

# Debian installs the server binaries here, outside PATH: /usr/lib/postgresql/<ver>/bin.
DEBIAN_POSTGRES_ROOT = Path("/usr/lib/postgresql")
SERVER_USER = "postgres"
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30
# A throwaway cluster needs no durability; these make checkpoint writes cheap.
SERVER_OPTIONS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
)


def find_postgres_binaries() -> Path | None:
    """The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's newest version."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    versions = [
        candidate.parent
        for candidate in DEBIAN_POSTGRES_ROOT.glob("*/bin/initdb")
        if candidate.parent.parent.name.isdigit()
    ]
    if not versions:
        return None
    return max(versions, key=lambda binaries: int(binaries.parent.name))


def install_postgres() -> Path:
    """Install the `postgresql` Debian package (root only) and return its binaries."""
    if os.geteuid() != 0:
        raise RuntimeError(
            "PostgreSQL is not installed (no initdb on PATH or under "
            f"{DEBIAN_POSTGRES_ROOT}); install the 'postgresql' package or run as root"
        )
    _log("installing PostgreSQL from the Debian packages")
    # Only the binaries are needed: no cluster of the package's own on port 5432.
    settings = Path("/etc/postgresql-common/createcluster.conf")
    if not settings.exists():
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text("create_main_cluster = false\n", encoding="utf-8")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=environment)
    subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"],
        check=True,
        env=environment,
    )
    binaries = find_postgres_binaries()
    if binaries is None:
        raise RuntimeError(
            f"the postgresql package installed no initdb under {DEBIAN_POSTGRES_ROOT}"
        )
    return binaries


def _log(message: str) -> None:
    print(f"... {message}", file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _as_server_user() -> tuple[list[str], pwd.struct_passwd | None]:
    """The command prefix that runs a program as the server's user, and that user."""
    if os.geteuid() != 0:
        return [], None
    try:
        user = pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home", SERVER_USER], check=True
        )
        user = pwd.getpwnam(SERVER_USER)
    return ["runuser", "-u", SERVER_USER, "--"], user


def _run(command: list[str]) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited with {completed.returncode}:\n"
            f"{completed.stdout}{completed.stderr}"
        )


def _server_pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text(encoding="utf-8").split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(pg_ctl: Path, data: Path, as_user: list[str], pid: int | None) -> None:
    """`pg_ctl stop`, then SIGKILL by PID if the server is still there."""
    subprocess.run(
        [
            *as_user,
            str(pg_ctl),
            "-D",
            str(data),
            "-m",
            "fast",
            "-w",
            "-t",
            str(STOP_TIMEOUT_SECONDS),
            "stop",
        ],
        capture_output=True,
        check=False,
    )
    if pid is None:
        return
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[str]:
    """Start a fresh cluster; yield its connection string; stop it and remove its files."""
    binaries = find_postgres_binaries() or install_postgres()
    as_user, user = _as_server_user()
    root = Path(tempfile.mkdtemp(prefix="lcg-scale-postgres-"))
    data = root / "data"
    pid: int | None = None
    previous_handler = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
        _run(
            [
                *as_user,
                str(binaries / "initdb"),
                "-D",
                str(data),
                "-U",
                SERVER_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-sync",
            ]
        )
        port = _free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {root} {SERVER_OPTIONS}"
        try:
            _run(
                [
                    *as_user,
                    str(binaries / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(root / "server.log"),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    str(START_TIMEOUT_SECONDS),
                    "start",
                ]
            )
        finally:
            pid = _server_pid(data)
        _log(f"PostgreSQL {binaries.parent.name} running on 127.0.0.1:{port}, PID {pid}")
        yield f"postgresql://{SERVER_USER}@127.0.0.1:{port}/postgres?sslmode=disable"
    finally:
        try:
            if data.exists():
                _stop(binaries / "pg_ctl", data, as_user, pid)
        finally:
            shutil.rmtree(root, ignore_errors=True)
            signal.signal(signal.SIGTERM, previous_handler)
            _log("PostgreSQL stopped and its directory removed")
