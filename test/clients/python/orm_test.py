"""slotted_counter through psycopg2, SQLAlchemy (on psycopg2 and on asyncpg) and Django, called
as docs/guides/drivers.md shows each. Each stack gets counters of its own (named after it) in the
database libpq's PG* environment variables name, and runs the same calls: a counter keyed by
bigint and one keyed by text, increments, lists of keys, a function returning void, an error's
SQLSTATE, and a transactional increment rolled back. Prints "ok STACK: ..." or "not ok STACK: ...".
"""

import asyncio
import os
import sys
import traceback

from scenarios import Checks, eq

failures = 0


def check(stack, name, fn):
    global failures
    checks = Checks(stack)
    checks.run(name, fn)
    failures += checks.failures


def same_calls(stack, one, execute, sqlstate_of, transaction, void):
    """The calls every stack makes, with %s-style placeholders (psycopg2, Django) given through
    one(query, params) -> first column of the first row, execute(query, params), sqlstate_of(fn)
    -> the SQLSTATE fn raised, and transaction(fn, commit); `void` is what a function returning
    void returns in this stack."""
    c, t, tx = f"{stack}_views", f"{stack}_urls", f"{stack}_sold"

    def counts():
        eq(one("SELECT sc_create(%s, %s)", (c, "buffered")), c, "sc_create returns the name")
        for n in range(1, 4):
            eq(one("SELECT sc_incr(%s, %s)", (c, 42)), n, "an int key")
        eq(one("SELECT sc_incr(%s, %s, %s)", (c, 42, 10)), 13, "a delta")
        eq(one("SELECT sc_incr_batch(%s, %s, %s)", (c, [1, 42], [5, 1])), [5, 14],
           "sc_incr_batch with lists")
        eq(one("SELECT sc_sum_keys(%s, %s)", (c, [1, 42])), 19, "sc_sum_keys with a list")
        execute("SELECT sc_create(%s, %s, key_type => %s)", (t, "buffered", "text"))
        eq(one("SELECT sc_incr(%s, %s)", (t, "/pricing")), 1, "a str key")
        eq(one("SELECT sc_incr_batch_text(%s, %s, %s)", (t, ["/", "/pricing"], [1, 1])), [1, 2],
           "sc_incr_batch_text with lists")
        eq(one("SELECT sc_drop(%s)", (t,)), void, "a function returning void")
        eq(sqlstate_of(lambda: one("SELECT sc_incr(%s, %s)", ("no_such_counter", 1))), "42704",
           "an unknown counter")

    def rollback():
        execute("SELECT sc_create(%s)", (tx,))
        transaction(lambda: one("SELECT sc_incr(%s, %s)", (tx, 1)), True)
        transaction(lambda: one("SELECT sc_incr(%s, %s)", (tx, 1)), False)
        eq(one("SELECT sc_sum(%s, %s)", (tx, 1)), 1, "one committed, one rolled back")

    check(stack, "int and str keys, lists, void, SQLSTATE", counts)
    check(stack, "a transactional increment commits and rolls back with its transaction", rollback)


def psycopg2_stack():
    import psycopg2

    conn = psycopg2.connect("")
    conn.autocommit = True

    def one(query, params):
        with conn.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchone()[0]

    def sqlstate_of(fn):
        try:
            fn()
        except psycopg2.Error as e:
            return e.pgcode
        return None

    def transaction(fn, commit):
        conn.autocommit = False
        try:
            fn()
            conn.commit() if commit else conn.rollback()
        finally:
            conn.autocommit = True

    # psycopg2 reads void, which it does not know, as the empty string.
    same_calls("psycopg2", one, one, sqlstate_of, transaction, "")
    conn.close()


def sqlalchemy_stack():
    """SQLAlchemy Core on psycopg2: text() with :named parameters, no cast needed."""
    import sqlalchemy as sa
    from sqlalchemy.exc import DBAPIError

    engine = sa.create_engine("postgresql+psycopg2://", future=True)
    c = "sqlalchemy_views"

    def calls():
        with engine.begin() as conn:
            eq(conn.execute(sa.text("SELECT sc_create(:c, 'buffered')"), {"c": c}).scalar(), c,
               "sc_create")
            for n in range(1, 4):
                eq(conn.execute(sa.text("SELECT sc_incr(:c, :k)"), {"c": c, "k": 42}).scalar(), n,
                   "an int key")
            eq(conn.execute(sa.text("SELECT sc_incr_batch(:c, :keys, :deltas)"),
                            {"c": c, "keys": [1, 42], "deltas": [1, 1]}).scalar(), [1, 4],
               "lists")
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("SELECT sc_incr(:c, :k)"), {"c": "no_such", "k": 1})
        except DBAPIError as e:
            eq(e.orig.pgcode, "42704", "the SQLSTATE of an unknown counter")
        else:
            raise AssertionError("an unknown counter did not fail")

    check("sqlalchemy", "text() on psycopg2: int keys, lists, SQLSTATE", calls)
    engine.dispose()


def sqlalchemy_asyncpg_stack():
    """SQLAlchemy on asyncpg: as asyncpg, an int key is CAST(:k AS bigint) (":k::bigint" is not
    a parameter to text())."""
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine

    url = sa.engine.URL.create("postgresql+asyncpg", username=os.environ["PGUSER"],
                               host=os.environ["PGHOST"], port=int(os.environ["PGPORT"]),
                               database=os.environ["PGDATABASE"])
    c = "sqlalchemy_asyncpg_views"

    async def calls():
        engine = create_async_engine(url)
        async with engine.begin() as conn:
            eq((await conn.execute(sa.text("SELECT sc_create(:c, 'buffered')"), {"c": c})).scalar(),
               c, "sc_create")
            for n in range(1, 4):
                got = await conn.execute(sa.text("SELECT sc_incr(:c, CAST(:k AS bigint))"),
                                         {"c": c, "k": 42})
                eq(got.scalar(), n, "an int key, cast")
        await engine.dispose()

    async def text_key():
        engine = create_async_engine(url)
        async with engine.begin() as conn:
            await conn.execute(sa.text("SELECT sc_create(:c, 'buffered', key_type => 'text')"),
                               {"c": "sqlalchemy_asyncpg_urls"})
            got = await conn.execute(sa.text("SELECT sc_incr(:c, :k)"),
                                     {"c": "sqlalchemy_asyncpg_urls", "k": "/pricing"})
            eq(got.scalar(), 1, "a str key")
        await engine.dispose()

    check("sqlalchemy-asyncpg", "a str key as it is", lambda: asyncio.run(text_key()))
    check("sqlalchemy-asyncpg", "an int key with CAST(:k AS bigint)", lambda: asyncio.run(calls()))


def django_stack():
    """Django's database connection: cursor.execute with %s, as psycopg2 (Django 3.2)."""
    import django
    from django.conf import settings

    settings.configure(DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": os.environ["PGDATABASE"],
        "USER": os.environ["PGUSER"], "HOST": os.environ["PGHOST"], "PORT": os.environ["PGPORT"],
    }})
    django.setup()
    from django.db import DatabaseError, connection, transaction as dj_transaction

    def one(query, params):
        with connection.cursor() as cur:
            cur.execute(query, params)
            return cur.fetchone()[0]

    def sqlstate_of(fn):
        try:
            fn()
        except DatabaseError as e:
            return e.__cause__.pgcode
        return None

    class Rollback(Exception):
        pass

    def transaction(fn, commit):
        try:
            with dj_transaction.atomic():
                fn()
                if not commit:
                    raise Rollback()
        except Rollback:
            pass

    same_calls("django", one, one, sqlstate_of, transaction, "")
    connection.close()


STACKS = {"psycopg2": psycopg2_stack, "sqlalchemy": sqlalchemy_stack,
          "sqlalchemy-asyncpg": sqlalchemy_asyncpg_stack, "django": django_stack}

if __name__ == "__main__":
    for name in sys.argv[1:] or STACKS:
        try:
            STACKS[name]()
        except Exception as e:  # a stack that cannot start is a failure of that stack
            failures += 1
            print(f"not ok {name}: could not run: {' '.join(f'{type(e).__name__}: {e}'.split())}")
            traceback.print_exc(file=sys.stdout)
    sys.exit(1 if failures else 0)
