"""The checks that psycopg_test.py runs against the server directly and pgbouncer_test.py through
pgbouncer: the README's "Using it" examples with %s placeholders, NULL keys and empty arrays,
its "Keys as text" examples with str keys and lists of str, exact totals from 20 concurrent connections, and a counter dropped and re-created under
connections that have their statements prepared.

Connections keep psycopg's defaults: a transaction starts with the first statement and ends with
commit() or rollback(), as the psycopg documentation writes it.
"""

import sys
import threading
import traceback
from datetime import datetime, timedelta, timezone

import psycopg

WORKERS = 20
# psycopg prepares a statement on the server after 5 executions: more rounds than that run the
# prepared form too.
ROUNDS = 12


class Checks:
    """Runs named checks, each independent of the others' outcome, printing ok / not ok."""

    def __init__(self, stack):
        self.stack = stack
        self.failures = 0

    def run(self, name, fn, *args):
        try:
            fn(*args)
        except Exception as e:  # any exception is this check's failure, not the suite's end
            self.failures += 1
            reason = " ".join(f"{type(e).__name__}: {e}".split())
            print(f"not ok {self.stack}: {name}: {reason}")
            traceback.print_exc(file=sys.stdout)
        else:
            print(f"ok {self.stack}: {name}")


def eq(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: got {actual!r}, expected {expected!r}")


def each_once(values, total, what):
    """Asserts that values are 1..total, each once, as a buffered counter hands them out."""
    if sorted(values) != list(range(1, total + 1)):
        seen = set(values)
        missing = [v for v in range(1, total + 1) if v not in seen][:10]
        repeated = sorted({v for v in values if values.count(v) > 1})[:10]
        raise AssertionError(f"{what}: {len(values)} values, expected 1..{total} each once;"
                             f" missing {missing}, repeated {repeated}")


def one(conn, query, params=()):
    return conn.execute(query, params).fetchone()[0]


def expect_sqlstate(conn, sqlstate, query, params):
    try:
        conn.execute(query, params)
    except psycopg.Error as e:
        conn.rollback()
        eq(e.sqlstate, sqlstate, f"SQLSTATE of {query} {params!r}")
    else:
        conn.rollback()
        raise AssertionError(f"{query} {params!r} succeeded, expected SQLSTATE {sqlstate}")


def page_views(connect):
    with connect() as conn:
        eq(one(conn, "SELECT sc_create(%s, %s)", ("page_views", "buffered")), "page_views",
           "sc_create")
        for n in range(1, 8):
            eq(one(conn, "SELECT sc_incr(%s, %s)", ("page_views", 42)), n, f"view {n} of post 42")
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("page_views", 42, 10)), 17, "adding 10")
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("page_views", 42, -2)), 15, "adding -2")
        for _ in range(7):
            eq(one(conn, "SELECT sc_sum(%s, %s)", ("page_views", 42)), 15, "sc_sum of post 42")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("page_views", 43)), 0, "sc_sum of an unseen post")


def copies_sold(connect):
    with connect() as conn, connect() as other:
        conn.execute("CREATE TABLE sales (book bigint NOT NULL)")
        eq(one(conn, "SELECT sc_create(%s)", ("copies_sold",)), "copies_sold", "sc_create")
        conn.commit()

        conn.execute("INSERT INTO sales VALUES (%s)", (7,))
        eq(one(conn, "SELECT sc_incr(%s, %s)", ("copies_sold", 7)), 1, "incr in the open sale")
        eq(one(other, "SELECT sc_sum(%s, %s)", ("copies_sold", 7)), 0,
           "another session's sum before the sale commits")
        other.commit()
        conn.commit()
        eq(one(other, "SELECT sc_sum(%s, %s)", ("copies_sold", 7)), 1,
           "another session's sum after the commit")
        other.commit()

        conn.execute("INSERT INTO sales VALUES (%s)", (7,))
        eq(one(conn, "SELECT sc_incr(%s, %s)", ("copies_sold", 7)), 2,
           "incr in a sale that will roll back")
        conn.rollback()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("copies_sold", 7)), 1, "sum after the rollback")
        eq(one(conn, "SELECT count(*) FROM sales WHERE book = %s", (7,)), 1, "sales rows")
        eq(one(other, "SELECT sc_sum(%s, %s)", ("copies_sold", 7)), 1,
           "another session's sum after the rollback")


def team_points(connect):
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", ("points", "buffered"))
        conn.execute("CREATE TABLE friends (user_id bigint, friend_id bigint)")
        conn.cursor().executemany("INSERT INTO friends VALUES (%s, %s)", [(1, 2), (1, 3), (4, 1)])
        answers = {1: 3, 2: 5, 3: 1, 4: 2, 5: 4}
        for user, count in answers.items():
            for n in range(1, count + 1):
                eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("points", user, 10)), 10 * n,
                   f"points of user {user}")
        conn.commit()

        eq(one(conn, "SELECT sc_sum_keys(%s, %s)", ("points", [2, 3, 1])), 90, "team of user 1")
        eq(one(conn, "SELECT sc_sum_keys(%s, %s)", ("points", [1, 1, 2])), 80,
           "a key listed twice counts once")
        # The README's own query, the group read from a table.
        team = ("SELECT sc_sum_keys(%s, ARRAY(SELECT friend_id FROM friends WHERE user_id = %s)"
                " || %s::bigint)")
        eq(one(conn, team, ("points", 1, 1)), 90, "team of user 1 from friends")
        eq(one(conn, team, ("points", 4, 4)), 50, "team of user 4 from friends")

        rows = conn.execute("SELECT * FROM sc_top(%s, %s)", ("points", 3)).fetchall()
        eq(rows, [(2, 50), (5, 40), (1, 30)], "top 3")
        rows = conn.execute("SELECT * FROM sc_top(%s, %s)", ("points", 10)).fetchall()
        eq(rows, [(2, 50), (5, 40), (1, 30), (4, 20), (3, 10)], "top 10 of 5 users")
        # sc_rank: the others as of the last flush
        conn.execute("SELECT sc_rollup()")
        eq(one(conn, "SELECT sc_rank(%s, %s)", ("points", 5)), 2, "rank of user 5")
        eq(one(conn, "SELECT sc_rank(%s, %s)", ("points", 99)), 6, "rank of a user without points")
        eq(one(conn, "SELECT sc_total(%s)", ("points",)), 150, "points of every user")


def hits_per_hour(connect):
    def at(hour, minute):
        return datetime(2021, 11, 21, hour, minute, tzinfo=timezone.utc)

    with connect() as conn:
        eq(one(conn, "SELECT sc_create(%s, %s, %s)", ("hits", "buffered", timedelta(hours=1))),
           "hits", "sc_create with a bucket width")
        incr = "SELECT sc_incr(%s, %s, %s, %s)"
        for n in range(1, 4):
            eq(one(conn, incr, ("hits", 42, 1, at(10, 15))), n, "hit at 10:15")
        for n in range(4, 6):
            eq(one(conn, incr, ("hits", 42, 1, at(10, 45))), n, "hit at 10:45, same hour")
        for n in range(1, 5):
            eq(one(conn, incr, ("hits", 42, 1, at(11, 5))), n, "hit at 11:05, next hour")
        eq(one(conn, incr, ("hits", 42, 1, at(9, 59))), 1, "hit at 9:59")
        eq(one(conn, incr, ("hits", 7, 2, at(10, 20))), 2, "2 hits of page 7 at 10:20")
        eq(one(conn, "SELECT sc_incr(%s, %s)", ("hits", 42)), 1, "a hit in the current hour")

        ranged = "SELECT sc_sum(%s, %s, %s, %s)"
        eq(one(conn, ranged, ("hits", 42, at(10, 0), at(11, 0))), 5, "hits from 10:00 to 11:00")
        eq(one(conn, ranged, ("hits", 42, at(10, 0), None)), 10, "hits since 10:00")
        eq(one(conn, ranged, ("hits", 42, at(10, 30), at(11, 30))), 4,
           "hits in the buckets that start from 10:30 to 11:30")
        eq(one(conn, ranged, ("hits", 42, at(23, 0), None)), 1, "hits since the day after")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("hits", 42)), 11, "hits over all hours")

        rows = conn.execute("SELECT * FROM sc_series(%s, %s, %s, %s)",
                            ("hits", 42, at(9, 0), at(12, 0))).fetchall()
        eq(rows, [(at(9, 0), 1), (at(10, 0), 5), (at(11, 0), 4)], "sc_series from 9:00 to 12:00")
        rows = conn.execute("SELECT * FROM sc_top(%s, %s, %s, %s)",
                            ("hits", 10, at(10, 0), at(11, 0))).fetchall()
        eq(rows, [(42, 5), (7, 2)], "top pages from 10:00 to 11:00")
        rows = conn.execute("SELECT * FROM sc_total_series(%s, %s, %s)",
                            ("hits", at(9, 0), at(12, 0))).fetchall()
        eq(rows, [(at(9, 0), 1), (at(10, 0), 7), (at(11, 0), 4)], "hits of every page per hour")
        eq(one(conn, "SELECT sc_total(%s, %s, %s)", ("hits", at(10, 0), at(11, 0))), 7,
           "hits of every page from 10:00 to 11:00")

        eq(one(conn, "SELECT sc_set(%s, %s, %s, %s)", ("hits", 42, 100, at(10, 30))), 5,
           "sc_set of the 10:00 bucket returns its old value")
        eq(one(conn, ranged, ("hits", 42, at(10, 0), at(11, 0))), 100, "the 10:00 bucket after sc_set")
        eq(one(conn, ranged, ("hits", 42, at(11, 0), at(12, 0))), 4, "the 11:00 bucket after sc_set")


def bounded_increments(connect):
    """A rate limit on a per-minute counter and a stock that never goes below zero."""
    def at(hour, minute):
        return datetime(2021, 11, 21, hour, minute, tzinfo=timezone.utc)

    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s, %s)", ("api_limit", "buffered", timedelta(minutes=1)))
        bounded = "SELECT sc_incr_bounded(%s, %s, %s, %s, %s, %s)"
        for n in range(1, 4):
            eq(one(conn, bounded, ("api_limit", 7, 1, None, 3, at(10, 15))), n, f"call {n} admitted")
        eq(one(conn, bounded, ("api_limit", 7, 1, None, 3, at(10, 15))), None,
           "the fourth call in the minute is refused")
        eq(one(conn, bounded, ("api_limit", 7, 1, None, 3, at(10, 16))), 1,
           "the next minute admits again")
        conn.commit()

        conn.execute("SELECT sc_create(%s)", ("stock_left",))
        conn.commit()
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("stock_left", 1, 2)), 2, "2 in stock")
        conn.commit()
        sell = "SELECT sc_incr_bounded(%s, %s, %s, %s, %s)"
        eq(one(conn, sell, ("stock_left", 1, -3, 0, None)), None, "selling 3 of 2 is refused")
        eq(one(conn, sell, ("stock_left", 1, -2, 0, None)), 0, "selling 2 of 2")
        conn.commit()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("stock_left", 1)), 0, "sold out, never below zero")
        conn.commit()
        expect_sqlstate(conn, "22023", sell, ("stock_left", 1, 1, 5, 4))


def retention_and_once(connect):
    """Retention set with placeholders, and a payment webhook delivered three times."""
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s, %s, %s)", ("hits_kept", "buffered", timedelta(hours=1),
                                                           timedelta(days=90)))
        conn.execute("SELECT sc_create(name => %s, durability => %s, retain => %s)",
                     ("sessions_kept", "buffered", "30 minutes"))
        conn.execute("SELECT sc_alter_retention(%s, %s)", ("hits_kept", timedelta(days=7)))
        conn.execute("SELECT sc_alter_retention(%s, %s)", ("sessions_kept", None))
        conn.commit()
        eq(one(conn, "SELECT retain FROM slotted_counter.counters WHERE name = %s", ("hits_kept",)),
           timedelta(days=7), "retain changed through a placeholder")
        eq(one(conn, "SELECT retain FROM slotted_counter.counters WHERE name = %s", ("sessions_kept",)),
           None, "retain removed with a NULL placeholder")
        conn.commit()
        expect_sqlstate(conn, "22023", "SELECT sc_alter_retention(%s, %s)", ("hits_kept", timedelta(seconds=-1)))

        for durability in ("buffered", "transactional"):
            name = f"revenue_{durability}"
            conn.execute("SELECT sc_create(%s, %s)", (name, durability))
            conn.commit()
            once = "SELECT sc_incr_once(%s, %s, %s, %s)"
            for delivery in range(3):
                eq(one(conn, once, (name, 42, 1999, "evt_3Nq")), 1999, f"{durability}: delivery {delivery + 1}")
                conn.commit()
            eq(one(conn, once, (name, 42, 500, "evt_4Xz")), 2499, f"{durability}: another event counts")
            conn.commit()
            eq(one(conn, "SELECT sc_sum(%s, %s)", (name, 42)), 2499, f"{durability}: counted once each")
            conn.commit()
            expect_sqlstate(conn, "22004", once, (name, 42, 1, None))


def buyers_reset(connect):
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", ("buyers_total", "buffered"))
        for n in range(1, 8):
            eq(one(conn, "SELECT sc_incr(%s)", ("buyers_total",)), n, f"buyer {n}")
        eq(one(conn, "SELECT sc_set(%s, %s, %s)", ("buyers_total", 0, 0)), 7,
           "sc_set returns the old value")
        eq(one(conn, "SELECT sc_sum(%s)", ("buyers_total",)), 0, "sum after the reset")
        eq(one(conn, "SELECT sc_incr(%s)", ("buyers_total",)), 1, "first buyer after the reset")
        conn.commit()

        # On a transactional counter the reset belongs to its transaction.
        conn.execute("SELECT sc_create(%s)", ("orders_total",))
        conn.commit()
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("orders_total", 3, 5)), 5, "5 orders")
        conn.commit()
        eq(one(conn, "SELECT sc_set(%s, %s, %s)", ("orders_total", 3, 0)), 5,
           "transactional sc_set returns the old value")
        conn.rollback()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("orders_total", 3)), 5, "a rolled back reset")
        eq(one(conn, "SELECT sc_set(%s, %s, %s)", ("orders_total", 3, 1)), 5, "reset to 1")
        conn.commit()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("orders_total", 3)), 1, "a committed reset")


def nulls_and_arrays(connect):
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", ("batch", "buffered"))
        conn.commit()
        for _ in range(7):
            expect_sqlstate(conn, "22004", "SELECT sc_incr(%s, %s)", ("batch", None))
            expect_sqlstate(conn, "22004", "SELECT sc_sum(%s, %s)", ("batch", None))
            expect_sqlstate(conn, "22004", "SELECT sc_incr(%s, %s, %s)", ("batch", None, 1))
            expect_sqlstate(conn, "42704", "SELECT sc_sum(%s, %s)", ("no_such_counter", 1))
        for _ in range(7):
            eq(one(conn, "SELECT sc_sum_keys(%s, %s)", ("batch", [])), 0, "an empty group")
            eq(one(conn, "SELECT sc_incr_batch(%s, %s, %s)", ("batch", [], [])), [],
               "an empty batch")
        eq(one(conn, "SELECT sc_incr_batch(%s, %s, %s)", ("batch", [1, 2, 1], [5, 1, 2])),
           [5, 1, 7], "a batch with a key twice")
        eq(one(conn, "SELECT sc_sum_keys(%s, %s)", ("batch", [1, 2])), 8, "sum of the batch")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("batch", 1)), 7, "key 1 after the batch")
        conn.rollback()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("batch", 1)), 7,
           "a buffered batch survives rollback")


# ---- counters keyed by text (README "Keys as text"): psycopg sends a str as an untyped parameter
# (and ClientCursor writes it as an untyped literal), so a str key takes the text form of a
# function; an int is sent as an integer and takes the bigint form.

URL = "/blog/hot-counters?utm_source=news&page=2"


def views_by_url(connect):
    """Seed 002: page views by URL on a buffered counter keyed by text."""
    with connect() as conn:
        eq(one(conn, "SELECT sc_create(%s, %s, key_type => %s)", ("views_by_url", "buffered", "text")),
           "views_by_url", "sc_create with key_type => 'text'")
        eq(one(conn, "SELECT key_type FROM slotted_counter.counters WHERE name = %s", ("views_by_url",)),
           "text", "counters.key_type")
        conn.commit()
        for n in range(1, 8):
            eq(one(conn, "SELECT sc_incr(%s, %s)", ("views_by_url", URL)), n, f"view {n} of the URL")
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("views_by_url", URL, 10)), 17, "adding 10")
        for n in range(1, 4):
            eq(one(conn, "SELECT sc_incr(%s, %s)", ("views_by_url", "/about")), n, f"view {n} of /about")
        for _ in range(7):
            eq(one(conn, "SELECT sc_sum(%s, %s)", ("views_by_url", URL)), 17, "sc_sum of the URL")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("views_by_url", "/never-seen")), 0,
           "sc_sum of a URL never counted")
        rows = conn.execute("SELECT * FROM sc_top_text(%s, %s)", ("views_by_url", 10)).fetchall()
        eq(rows, [(URL, 17), ("/about", 3)], "sc_top_text: (key str, value int), largest first")
        # sc_rank: the others as of the last flush
        conn.execute("SELECT sc_rollup()")
        eq(one(conn, "SELECT sc_rank(%s, %s)", ("views_by_url", URL)), 1, "rank of the URL")
        eq(one(conn, "SELECT sc_rank(%s, %s)", ("views_by_url", "/about")), 2, "rank of /about")
        eq(one(conn, "SELECT sc_rank(%s, %s)", ("views_by_url", "/never-seen")), 3,
           "rank of a URL never counted")
        conn.commit()


def sales_by_title(connect):
    """Seed 004: copies sold by title on a transactional counter keyed by text."""
    with connect() as conn, connect() as other:
        eq(one(conn, "SELECT sc_create(%s, key_type => %s)", ("sales_by_title", "text")),
           "sales_by_title", "sc_create, transactional by default")
        conn.commit()
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("sales_by_title", "Moby Dick", 2)), 2,
           "two copies in the open sale")
        eq(one(other, "SELECT sc_sum(%s, %s)", ("sales_by_title", "Moby Dick")), 0,
           "another session's sum before the sale commits")
        other.commit()
        conn.commit()
        eq(one(other, "SELECT sc_sum(%s, %s)", ("sales_by_title", "Moby Dick")), 2,
           "another session's sum after the commit")
        other.commit()
        for n in range(3, 10):
            eq(one(conn, "SELECT sc_incr(%s, %s)", ("sales_by_title", "Moby Dick")), n, f"sale {n}")
            conn.commit()
        eq(one(conn, "SELECT sc_incr(%s, %s)", ("sales_by_title", "Moby Dick")), 10,
           "a sale that will roll back")
        eq(one(conn, "SELECT sc_incr(%s, %s, %s)", ("sales_by_title", "Ulysses", 5)), 5,
           "the first sale of a new title, rolled back")
        conn.rollback()
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("sales_by_title", "Moby Dick")), 9, "after the rollback")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("sales_by_title", "Ulysses")), 0,
           "the rolled back title")
        rows = conn.execute("SELECT key AS title, value AS copies FROM sc_top_text(%s, %s)",
                            ("sales_by_title", 5)).fetchall()
        eq(rows, [("Moby Dick", 9)], "sc_top_text: the rolled back title is not ranked")
        conn.commit()


def text_keys_exact(connect):
    """Keys compare by their bytes; the array forms take a list of str; a key has at most 2048
    bytes."""
    keys = ["/search?q=naïve ☕", "/search?q=naive", "/home", "/home "]
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s, key_type => %s)", ("url_hits", "buffered", "text"))
        conn.commit()
        eq(one(conn, "SELECT sc_incr_batch_text(%s, %s, %s)", ("url_hits", keys, [1, 2, 3, 4])),
           [1, 2, 3, 4], "sc_incr_batch_text: four keys, each its own value")
        eq(one(conn, "SELECT sc_incr_batch_text(%s, %s, %s)", ("url_hits", keys[:2] + keys[:1], [10, 10, 10])),
           [11, 12, 21], "a batch with a key twice")
        for key, value in zip(keys, [21, 12, 3, 4]):
            eq(one(conn, "SELECT sc_sum(%s, %s)", ("url_hits", key)), value, f"sc_sum of {key!r}")
        eq(one(conn, "SELECT sc_sum_keys_text(%s, %s)", ("url_hits", keys)), 40, "sc_sum_keys_text")
        eq(one(conn, "SELECT sc_sum_keys_text(%s, %s)", ("url_hits", ["/home", "/home", "/home "])), 7,
           "a key listed twice counts once")
        eq(one(conn, "SELECT sc_sum_keys_text(%s, %s)", ("url_hits", [])), 0, "an empty group")
        eq(one(conn, "SELECT sc_incr_batch_text(%s, %s, %s)", ("url_hits", [], [])), [], "an empty batch")
        rows = conn.execute("SELECT * FROM sc_top_text(%s, %s)", ("url_hits", 10)).fetchall()
        eq(rows, [(keys[0], 21), (keys[1], 12), (keys[3], 4), (keys[2], 3)],
           "sc_top_text returns the keys as they were given")

        eq(one(conn, "SELECT sc_incr(%s, %s)", ("url_hits", "é" * 1024)), 1, "a key of 2048 bytes")
        conn.commit()
        for too_long in ("x" * 2049, "é" * 1024 + "x"):
            expect_sqlstate(conn, "22001", "SELECT sc_incr(%s, %s)", ("url_hits", too_long))
            expect_sqlstate(conn, "22001", "SELECT sc_incr_batch_text(%s, %s, %s)",
                            ("url_hits", ["/home", too_long], [1, 1]))
        eq(one(conn, "SELECT sc_total(%s)", ("url_hits",)), 41, "the keys too long counted nothing")
        for _ in range(7):
            expect_sqlstate(conn, "22004", "SELECT sc_incr(%s, %s)", ("url_hits", None))


def key_kinds(connect):
    """A str key on a counter keyed by bigint is read as a number; an int key on a counter keyed
    by text is sent as an integer and refused."""
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", ("views_by_id", "buffered"))
        conn.execute("SELECT sc_create(%s, %s, key_type => %s)", ("views_by_path", "buffered", "text"))
        conn.commit()
        for n in range(1, 4):
            eq(one(conn, "SELECT sc_incr(%s, %s)", ("views_by_id", "42")), n, f"'42', view {n}")
        eq(one(conn, "SELECT sc_incr(%s, %s)", ("views_by_id", 42)), 4, "42 is the same key as '42'")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("views_by_id", "42")), 4, "sc_sum with '42'")
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("views_by_id", 42)), 4, "sc_sum with 42")
        eq(conn.execute("SELECT * FROM sc_top_text(%s, %s)", ("views_by_id", 10)).fetchall(),
           [("42", 4)], "sc_top_text of a counter keyed by bigint")
        conn.commit()
        expect_sqlstate(conn, "22P02", "SELECT sc_incr(%s, %s)", ("views_by_id", "/home"))

        eq(one(conn, "SELECT sc_incr(%s, %s)", ("views_by_path", "42")), 1, "'42' on a text counter")
        conn.commit()
        for _ in range(7):
            expect_sqlstate(conn, "42804", "SELECT sc_incr(%s, %s)", ("views_by_path", 42))
            expect_sqlstate(conn, "42804", "SELECT sc_sum(%s, %s)", ("views_by_path", 42))
            expect_sqlstate(conn, "42804", "SELECT sc_incr(%s, %s, %s)", ("views_by_path", 2**40, 1))
            expect_sqlstate(conn, "42804", "SELECT * FROM sc_top(%s, %s)", ("views_by_path", 10))
            expect_sqlstate(conn, "42804", "SELECT sc_sum_keys(%s, %s)", ("views_by_path", [42]))
        eq(one(conn, "SELECT sc_sum(%s, %s)", ("views_by_path", "42")), 1, "the refused calls counted nothing")


def in_threads(conns, fn):
    """Runs fn(conn) in one thread per connection, started together; returns their results in
    order, or raises the first exception one of them raised."""
    start = threading.Barrier(len(conns))
    results = [None] * len(conns)
    errors = []

    def body(i):
        try:
            start.wait(timeout=60)
            results[i] = fn(conns[i])
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if any(t.is_alive() for t in threads):
        raise AssertionError("a worker did not finish within 120 s")
    if errors:
        raise errors[0]
    return results


def count_hot_key(conn, counter, rounds=ROUNDS):
    """Counts rounds times into key 1 of counter, one transaction each; returns the values."""
    values = []
    for _ in range(rounds):
        values.append(one(conn, "SELECT sc_incr(%s, %s)", (counter, 1)))
        conn.commit()
    return values


def concurrent_exact(connect, durability):
    counter = f"hot_{durability}"
    total = WORKERS * ROUNDS
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", (counter, durability))
        conn.commit()
    conns = [connect() for _ in range(WORKERS)]
    try:
        values = [v for vs in in_threads(conns, lambda c: count_hot_key(c, counter)) for v in vs]
    finally:
        for c in conns:
            c.close()
    if durability == "buffered":
        each_once(values, total, "values returned to concurrent callers")
    else:
        eq([v for v in values if not 1 <= v <= total], [], "values outside 1..total")
    with connect() as conn:
        eq(one(conn, "SELECT sc_sum(%s, %s)", (counter, 1)), total, "the total")


def recreate_under_prepared(connect, server_prepares):
    """Drops and re-creates counters that 20 connections have counted into with their cached
    (prepared, if the stack prepares) statements; the same connections then count again."""
    names = {"buffered": "recreated_buffered", "transactional": "recreated_transactional"}
    total = WORKERS * ROUNDS

    def work(conn):
        return {d: count_hot_key(conn, name) for d, name in names.items()}

    def check_phase(results, phase):
        each_once([v for r in results for v in r["buffered"]], total,
                  f"buffered values returned {phase}")
        values = [v for r in results for v in r["transactional"]]
        eq([v for v in values if not 1 <= v <= total], [],
           f"transactional values outside 1..total {phase}")
        with connect() as conn:
            for d, name in names.items():
                eq(one(conn, "SELECT sc_sum(%s, %s)", (name, 1)), total, f"{d} total {phase}")

    with connect() as admin:
        for d, name in names.items():
            admin.execute("SELECT sc_create(%s, %s)", (name, d))
        admin.commit()
        conns = [connect() for _ in range(WORKERS)]
        try:
            check_phase(in_threads(conns, work), "before the re-create")
            if server_prepares:
                for c in conns:
                    n = one(c, "SELECT count(*) FROM pg_prepared_statements"
                               " WHERE statement LIKE %s", ("%sc_incr%",))
                    c.commit()
                    if n == 0:
                        raise AssertionError("a connection has no prepared sc_incr statement")
            for d, name in names.items():
                admin.execute("SELECT sc_drop(%s)", (name,))
                admin.execute("SELECT sc_create(%s, %s)", (name, d))
            admin.commit()
            check_phase(in_threads(conns, work), "after the re-create")
        finally:
            for c in conns:
                c.close()


def literal_names(connect):
    """A counter's name written into a statement (prepared after 5 runs by psycopg) and into a
    view reaches the counter created again under that name after a drop."""
    with connect() as conn:
        conn.execute("SELECT sc_create(%s, %s)", ("literal_views", "buffered"))
        conn.execute("CREATE VIEW literal_view AS SELECT sc_sum('literal_views', 1) AS v")
        conn.commit()
        eq([one(conn, "SELECT sc_incr('literal_views', 1)") for _ in range(10)],
           list(range(1, 11)), "values before the re-create")
        eq(one(conn, "SELECT v FROM literal_view"), 10, "the view before the re-create")
        conn.execute("SELECT sc_drop(%s)", ("literal_views",))
        conn.execute("SELECT sc_create(%s, %s)", ("literal_views", "buffered"))
        conn.commit()
        eq([one(conn, "SELECT sc_incr('literal_views', 1)") for _ in range(3)], [1, 2, 3],
           "values after the re-create")
        eq(one(conn, "SELECT v FROM literal_view"), 3, "the view after the re-create")
        conn.execute("DROP VIEW literal_view")
        conn.execute("SELECT sc_drop(%s, if_exists => %s)", ("literal_views", True))
        conn.execute("SELECT sc_drop(%s, if_exists => %s)", ("literal_views", True))
        conn.commit()


def run_all(stack, connect, server_prepares):
    checks = Checks(stack)
    checks.run("page views: sc_incr, sc_incr with a delta, sc_sum", page_views, connect)
    checks.run("copies sold: a committed sc_incr counts, a rolled back one does not",
               copies_sold, connect)
    checks.run("team points: sc_sum_keys of a team, sc_top leaderboard, sc_rank, sc_total", team_points, connect)
    checks.run("hits per hour: sc_incr at a time, sc_sum over a range, sc_series, sc_top, sc_total_series, sc_set",
               hits_per_hour, connect)
    checks.run("sc_set returns the old value, buffered and transactional", buyers_reset, connect)
    checks.run("sc_incr_bounded: a rate limit per minute, a stock never below zero",
               bounded_increments, connect)
    checks.run("retention through placeholders; sc_incr_once: a webhook delivered three times",
               retention_and_once, connect)
    checks.run("NULL key is 22004, unknown counter 42704, empty arrays, sc_incr_batch",
               nulls_and_arrays, connect)
    checks.run("keys as text: page views by URL, sc_incr, sc_sum, sc_top_text, sc_rank",
               views_by_url, connect)
    checks.run("keys as text: copies sold by title, a committed sc_incr counts, a rolled back one does not",
               sales_by_title, connect)
    checks.run("keys as text: multibyte and trailing space are keys of their own, lists of str, 22001 past 2048 bytes",
               text_keys_exact, connect)
    checks.run("keys as text: a str key on a bigint counter is its number, an int key on a text counter is 42804",
               key_kinds, connect)
    for durability in ("buffered", "transactional"):
        checks.run(f"{WORKERS} connections count one key of a {durability} counter exactly",
                   concurrent_exact, connect, durability)
    checks.run(f"drop and re-create under {WORKERS} connections with cached statements",
               recreate_under_prepared, connect, server_prepares)
    checks.run("a name written in a prepared statement and a view outlives a drop and re-create",
               literal_names, connect)
    return checks.failures
