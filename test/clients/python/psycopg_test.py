"""slotted_counter through psycopg 3 with its default settings (statements prepared on the server
after 5 executions), connected as libpq's PG* environment variables say; then psycopg's binary
mode, as README's "From your application" shows it."""

import sys
from datetime import timedelta

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


def rate_limits(connect):
    """A smooth rate limit through placeholders, as docs/guides/rate-limit-smooth.md calls it: the
    limit given as a timedelta, the answer's row as a tuple of bool, int and timedeltas (None for a
    cost that never fits); the calls past the fifth prepared on the server."""
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s, rate => %s, per => %s, burst => %s)",
                     ("drv_api", "buffered", 5, timedelta(hours=1), 5))
        conn.execute("SELECT sc_create(%s, %s, key_type => %s, rate => %s, per => %s)",
                     ("drv_tokens", "transactional", "text", 3, timedelta(days=1)))
        conn.commit()
        call = "SELECT allowed, remaining, retry_after, reset_after FROM sc_throttle(%s, %s, %s)"
        answers = [conn.execute(call, ("drv_api", 42, 1)).fetchone() for _ in range(6)]
        scenarios.eq([a[0] for a in answers], [True] * 5 + [False], "five of six admitted")
        scenarios.eq([a[1] for a in answers], [4, 3, 2, 1, 0, 0], "remaining")
        retry = answers[5][2]
        scenarios.eq(isinstance(retry, timedelta) and timedelta(minutes=11) < retry
                     <= timedelta(minutes=12), True,
                     f"retry_after {retry!r}: just under the 12 minutes a unit takes to come back")
        scenarios.eq(conn.execute(call, ("drv_api", 7, 6)).fetchone()[:3], (False, 5, None),
                     "a cost above the burst never fits: retry_after None, nothing taken")
        conn.commit()
        scenarios.eq(conn.execute(call, ("drv_tokens", "tok-a", 2)).fetchone()[:2], (True, 1),
                     "a text key, in a transaction")
        conn.rollback()
        scenarios.eq(conn.execute(call, ("drv_tokens", "tok-a", 0)).fetchone()[:2], (True, 3),
                     "the rollback gave the cost back")
        conn.execute(call, ("drv_tokens", "tok-a", 2))
        conn.commit()
        scenarios.eq(conn.execute(call, ("drv_tokens", "tok-a", 0)).fetchone()[:2], (True, 1),
                     "a committed call keeps its cost")
        conn.commit()
        scenarios.expect_sqlstate(conn, "42809", "SELECT sc_incr(%s, %s)", ("drv_api", 1))
        scenarios.expect_sqlstate(conn, "22023", call, ("drv_api", 1, -1))
        conn.execute("SELECT sc_drop(%s), sc_drop(%s)", ("drv_api", "drv_tokens"))
        conn.commit()


def distinct_counts(connect):
    """Distinct counters through placeholders: psycopg types an int (a bigint element) and sends
    a str untyped (a text element); lists of keys for the groups, the sketch as bytes."""
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s, kind => %s)", ("drv_visitors", "buffered",
                                                              "distinct"))
        conn.commit()
        add = "SELECT sc_add(%s, %s, %s)"
        scenarios.eq([conn.execute(add, ("drv_visitors", 7, u)).fetchone()[0] for u in (1, 2, 1)],
                     [True, True, False], "int elements: true while the sketch changes")
        scenarios.eq(conn.execute(add, ("drv_visitors", 7, "1")).fetchone()[0], True,
                     "the str '1' is another element than the int 1")
        scenarios.eq(conn.execute("SELECT sc_count(%s, %s), sc_count_keys(%s, %s)",
                                  ("drv_visitors", 7, "drv_visitors", [7, 8])).fetchone(),
                     (3, 3), "sc_count, and sc_count_keys of a list")
        sketch = conn.execute("SELECT sc_sketch(%s, %s)", ("drv_visitors", 7)).fetchone()[0]
        scenarios.eq((type(sketch), sketch[0]), (bytes, 0x12),
                     "sc_sketch is bytes, an explicit sketch")
        conn.commit()
        scenarios.expect_sqlstate(conn, "42809", "SELECT sc_incr(%s, %s)", ("drv_visitors", 7))
        conn.execute("SELECT sc_drop(%s)", ("drv_visitors",))
        conn.commit()


if __name__ == "__main__":
    failures = scenarios.run_all("psycopg", connect, server_prepares=True)
    checks = scenarios.Checks("psycopg")
    checks.run("binary mode: a counter's name is bytes without a loader, a str with README's",
               binary_results, connect)
    checks.run("rate limits: sc_create's limit and sc_throttle's row through placeholders",
               rate_limits, connect)
    checks.run("distinct counters: elements through placeholders, groups, sketches",
               distinct_counts, connect)
    sys.exit(1 if failures or checks.failures else 0)
