"""slotted_counter through asyncpg, called as docs/guides/drivers.md shows it.

asyncpg prepares every statement on the server and encodes each argument as the type the server
inferred for its placeholder. A key placeholder of sc_incr and the other functions with a text
form is inferred as text (PostgreSQL prefers text for an untyped value), so an int key is written
$2::bigint; a str key, a list of keys, the counter's name and intervals go as they are. Connected
as libpq's PG* environment variables say. Prints "ok asyncpg: ..." or "not ok asyncpg: ...".
With --pgbouncer, only the pool's check, with the setting that is safe behind pgbouncer's
transaction pooling.
"""

import asyncio
import os
import sys
import traceback
from datetime import timedelta

import asyncpg

STACK = "asyncpg"
failures = 0


def eq(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: got {actual!r}, expected {expected!r}")


async def check(name, coro_fn, *args):
    global failures
    try:
        await coro_fn(*args)
    except Exception as e:  # any exception is this check's failure, not the suite's end
        failures += 1
        print(f"not ok {STACK}: {name}: {' '.join(f'{type(e).__name__}: {e}'.split())}")
        traceback.print_exc(file=sys.stdout)
    else:
        print(f"ok {STACK}: {name}")


async def connect():
    return await asyncpg.connect(host=os.environ["PGHOST"], port=os.environ["PGPORT"],
                                 user=os.environ["PGUSER"], database=os.environ["PGDATABASE"])


async def expect_sqlstate(conn, sqlstate, query, *args):
    try:
        await conn.fetchval(query, *args)
    except asyncpg.PostgresError as e:
        eq(e.sqlstate, sqlstate, f"SQLSTATE of {query} {args!r}")
    else:
        raise AssertionError(f"{query} {args!r} succeeded, expected SQLSTATE {sqlstate}")


async def bigint_keys(conn):
    eq(await conn.fetchval("SELECT sc_create($1, $2)", "page_views", "buffered"), "page_views",
       "sc_create returns the name as a str")
    for n in range(1, 8):
        eq(await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "page_views", 42), n,
           f"view {n} of post 42")
    eq(await conn.fetchval("SELECT sc_incr($1, $2::bigint, $3)", "page_views", 42, 10), 17,
       "adding 10")
    eq(await conn.fetchval("SELECT sc_sum($1, $2::bigint)", "page_views", 42), 17, "sc_sum")
    eq(await conn.fetchval("SELECT sc_sum($1, $2::bigint)", "page_views", 7), 0,
       "a key never counted")
    eq(await conn.fetchval("SELECT sc_incr_batch($1, $2, $3)", "page_views", [1, 2, 42],
                           [5, 6, 1]), [5, 6, 18], "sc_incr_batch takes lists of int")
    eq(await conn.fetchval("SELECT sc_sum_keys($1, $2)", "page_views", [1, 2]), 11,
       "sc_sum_keys takes a list of int")
    rows = await conn.fetch("SELECT key, value FROM sc_top($1, $2)", "page_views", 2)
    eq([tuple(r) for r in rows], [(42, 18), (2, 6)], "sc_top")
    eq(await conn.fetchval("SELECT sc_set($1, $2::bigint, $3)", "page_views", 1, 0), 5,
       "sc_set returns the value replaced")


async def untyped_int_key_is_refused(conn):
    """The failure the guide explains: without the cast the placeholder is text."""
    try:
        await conn.fetchval("SELECT sc_incr($1, $2)", "page_views", 42)
    except asyncpg.DataError as e:
        eq("expected str, got int" in str(e), True, f"asyncpg's message: {e}")
    else:
        raise AssertionError("an int key without ::bigint was accepted; update the guide")


async def text_keys(conn):
    await conn.execute("SELECT sc_create($1, $2, key_type => $3)", "views_by_url", "buffered",
                       "text")
    eq(await conn.fetchval("SELECT sc_incr($1, $2)", "views_by_url", "/pricing"), 1,
       "a str key")
    eq(await conn.fetchval("SELECT sc_incr($1, $2, $3)", "views_by_url", "/pricing", 4), 5,
       "a str key and a delta")
    eq(await conn.fetchval("SELECT sc_incr_batch_text($1, $2, $3)", "views_by_url",
                           ["/", "/pricing"], [1, 1]), [1, 6], "sc_incr_batch_text")
    rows = await conn.fetch("SELECT key, value FROM sc_top_text($1, $2)", "views_by_url", 10)
    eq([tuple(r) for r in rows], [("/pricing", 6), ("/", 1)], "sc_top_text")
    await conn.execute("SELECT sc_rollup()")
    eq(await conn.fetchval("SELECT sc_rank($1, $2)", "views_by_url", "/"), 2, "sc_rank")


async def intervals_and_void(conn):
    eq(await conn.fetchval("SELECT sc_create($1, $2, $3, $4)", "hits", "buffered", "1 hour",
                           "90 days"), "hits", "intervals as str")
    eq(await conn.fetchval("SELECT sc_create($1, $2, $3::interval, $4::interval)", "hits_2",
                           "buffered", timedelta(hours=1), timedelta(days=90)), "hits_2",
       "intervals as timedelta, cast")
    eq(await conn.fetchval("SELECT sc_alter_retention($1, $2)", "hits", "30 days"), None,
       "a function returning void returns None")
    eq(await conn.fetchval("SELECT sc_drop($1)", "hits_2"), None, "sc_drop")


async def errors(conn):
    await expect_sqlstate(conn, "22004", "SELECT sc_incr($1, $2::bigint)", "page_views", None)
    await expect_sqlstate(conn, "42704", "SELECT sc_incr($1, $2::bigint)", "no_such", 1)
    await expect_sqlstate(conn, "22007", "SELECT sc_create($1, $2, $3)", "bad", "buffered",
                          "one day")


async def transactional(conn):
    await conn.execute("SELECT sc_create($1)", "copies_sold")
    async with conn.transaction():
        eq(await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "copies_sold", 1), 1,
           "in a transaction")
    try:
        async with conn.transaction():
            await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "copies_sold", 1)
            raise RuntimeError("rolled back")
    except RuntimeError:
        pass
    eq(await conn.fetchval("SELECT sc_sum($1, $2::bigint)", "copies_sold", 1), 1,
       "the rolled-back increment did not count")


async def distinct_counts(conn):
    """Distinct counters as docs/guides/drivers.md calls them: integers cast, strs untyped."""
    await conn.execute("SELECT sc_create($1, $2, kind => $3)", "drv_visitors", "buffered",
                       "distinct")
    await conn.execute("SELECT sc_create($1, $2, kind => $3, key_type => $4, log2m => $5)",
                       "drv_pages", "transactional", "distinct", "text", 12)
    add = "SELECT sc_add($1, $2::bigint, $3::bigint)"
    eq([await conn.fetchval(add, "drv_visitors", 7, u) for u in (1, 2, 1)], [True, True, False],
       "sc_add of int elements, cast: true while the sketch changes")
    eq(await conn.fetchval("SELECT sc_add($1, $2::bigint, $3)", "drv_visitors", 7, "1"), True,
       "'1' is another element than 1")
    async with conn.transaction():
        for session in ("s-a", "s-b", "s-a"):
            await conn.fetchval("SELECT sc_add($1, $2, $3)", "drv_pages", "/pricing", session)
    eq(await conn.fetchval("SELECT sc_count($1, $2)", "drv_pages", "/pricing"), 2,
       "a transactional counter keyed by text: two distinct sessions")
    eq(await conn.fetchval("SELECT sc_count_keys($1, $2)", "drv_visitors", [7, 8]), 3,
       "sc_count_keys of a list of ints")
    eq(await conn.fetchval("SELECT sc_count_keys_text($1, $2)", "drv_pages", ["/pricing", "/"]),
       2, "sc_count_keys_text of a list of strs")
    sketch = await conn.fetchval("SELECT sc_sketch($1, $2::bigint)", "drv_visitors", 7)
    eq((type(sketch), sketch[0]), (bytes, 0x12), "sc_sketch is bytes, an explicit sketch")
    await expect_sqlstate(conn, "42809", "SELECT sc_incr($1, $2::bigint)", "drv_visitors", 7)
    await conn.execute("SELECT sc_drop($1), sc_drop($2)", "drv_visitors", "drv_pages")


async def pool_exact(**settings):
    """20 pooled connections, each call a prepared statement: buffered sc_incr hands out every
    value once, and the transactional total is exact."""
    pool = await asyncpg.create_pool(host=os.environ["PGHOST"], port=os.environ["PGPORT"],
                                     user=os.environ["PGUSER"],
                                     database=os.environ["PGDATABASE"], min_size=20, max_size=20,
                                     **settings)
    async with pool.acquire() as conn:
        await conn.execute("SELECT sc_create($1, $2)", "likes", "buffered")
        await conn.execute("SELECT sc_create($1)", "likes_tx")

    async def worker():
        got = []
        for _ in range(50):
            async with pool.acquire() as conn:
                got.append(await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "likes", 1))
                await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "likes_tx", 1)
        return got

    results = await asyncio.gather(*(worker() for _ in range(20)))
    values = sorted(v for r in results for v in r)
    eq(values, list(range(1, 1001)), "1,000 buffered values, each once")
    async with pool.acquire() as conn:
        eq(await conn.fetchval("SELECT sc_sum($1, $2::bigint)", "likes_tx", 1), 1000,
           "the transactional total")
    await pool.close()


async def recreated_under_prepared(conn):
    """asyncpg's statement cache keeps the prepared statements: a counter dropped and created
    again under them is reached by them."""
    await conn.execute("SELECT sc_create($1, $2)", "again", "buffered")
    for _ in range(3):
        await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "again", 1)
    await conn.execute("SELECT sc_drop($1)", "again")
    await conn.execute("SELECT sc_create($1, $2)", "again", "buffered")
    eq(await conn.fetchval("SELECT sc_incr($1, $2::bigint)", "again", 1), 1,
       "the same prepared statement counts into the new counter from 0")


async def main():
    if sys.argv[1:] == ["--pgbouncer"]:
        # Through pgbouncer's transaction pooling: the drivers guide's safe setting.
        await check("20 pooled connections through pgbouncer with statement_cache_size=0 count "
                    "exactly", lambda: pool_exact(statement_cache_size=0))
        return
    conn = await connect()
    await check("bigint keys with $2::bigint, lists of keys, sc_top, sc_set", bigint_keys, conn)
    await check("an int key without the cast fails as the guide says", untyped_int_key_is_refused,
                conn)
    await check("text keys as str", text_keys, conn)
    await check("intervals as str or cast timedelta, void results", intervals_and_void, conn)
    await check("errors carry their SQLSTATE", errors, conn)
    await check("a transactional counter in asyncpg's transactions", transactional, conn)
    await check("a counter created again under prepared statements", recreated_under_prepared,
                conn)
    await check("distinct counters: elements, groups and sketches", distinct_counts, conn)
    await conn.close()
    await check("20 pooled connections count exactly", pool_exact)


asyncio.run(main())
sys.exit(1 if failures else 0)
