"""slotted_counter through psycopg 3 with its default settings (statements prepared on the server
after 5 executions), connected as libpq's PG* environment variables say; then psycopg's binary
mode, as README's "From your application" shows it."""

import sys

import psycopg
from psycopg.types import TypeInfo
from psycopg.types.string import TextBinaryLoader, TextLoader

import scenarios


def connect():
    return psycopg.connect()


def binary_results(connect):
    """A slotted_counter result (sc_create's, a column of the type) is the counter's name; in
    binary mode psycopg hands over a type it does not know as bytes, and README's loader makes it
    a str. Numbers are bigint, which psycopg knows in both modes."""
    with connect() as conn:
        with conn.cursor(binary=True) as cur:
            created = cur.execute("SELECT sc_create(%s, %s)", ("binary_views", "buffered")).fetchone()[0]
            scenarios.eq(created, b"binary_views", "binary mode, no loader: the name as bytes")
            scenarios.eq(cur.execute("SELECT sc_incr(%s, %s)", ("binary_views", 1)).fetchone()[0], 1,
                         "binary mode: sc_incr's bigint is an int")
        # README's loader, once per connection (or on the pool's configure callback).
        info = TypeInfo.fetch(conn, "slotted_counter")
        for loader in (TextLoader, TextBinaryLoader):
            conn.adapters.register_loader(info.oid, loader)
        for binary in (True, False):
            with conn.cursor(binary=binary) as cur:
                got = cur.execute("SELECT counter FROM slotted_counter.lagged WHERE counter = %s "
                                  "UNION ALL SELECT %s::slotted_counter LIMIT 1",
                                  ("binary_views", "binary_views")).fetchone()[0]
                scenarios.eq(got, "binary_views", f"with the loader, binary={binary}: a str")
        conn.execute("SELECT sc_drop(%s)", ("binary_views",))


if __name__ == "__main__":
    failures = scenarios.run_all("psycopg", connect, server_prepares=True)
    checks = scenarios.Checks("psycopg")
    checks.run("binary mode: a counter's name is bytes without a loader, a str with README's",
               binary_results, connect)
    sys.exit(1 if failures or checks.failures else 0)
