"""Fixtures of the connector tests: a Redis and a PostgreSQL server for the session.

They are started by ``support.servers`` on loopback under a temporary directory. Without the
programs the tests that need them skip with the reason, unless ``FASTOPS_REQUIRE_SERVERS=1``
(as ``.ci/run`` sets it): then a missing server fails them.
"""
from __future__ import annotations

import os
import tempfile

import pytest

from support.servers import REQUIRE_ENV, PostgresServer, RedisServer, ServerUnavailable


def _start(kind, make):
    directory = tempfile.mkdtemp(prefix=f"fastops-{kind}-")
    os.chmod(directory, 0o755)
    try:
        return make(directory)
    except ServerUnavailable as exc:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{kind} server needed ({REQUIRE_ENV}=1): {exc}")
        pytest.skip(f"no {kind} server: {exc}")


@pytest.fixture(scope="session")
def redis_server():
    server = _start("redis", RedisServer)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server():
    server = _start("postgres", PostgresServer)
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The server's URL, its database emptied for each test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    client.close()
    return redis_server.url


@pytest.fixture
def pg_dsn(postgres_server):
    """The server's DSN; no table, no prepared transaction left from another test."""
    import psycopg

    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        for (gid,) in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall():
            conn.execute(f"ROLLBACK PREPARED '{gid}'")
        for (name,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall():
            conn.execute(f'DROP TABLE "{name}" CASCADE')
    return postgres_server.dsn
