"""slotted_counter through pgbouncer in transaction pooling mode, where consecutive transactions
of one client may run in different server sessions: psycopg with the simple query protocol
(values bound on the client) and with the extended protocol without server-side prepared
statements, which pgbouncer cannot follow across server sessions in this mode. Each protocol has
a database of its own, so that both run the same counter names. Then text keys counted by a client
whose transactions run in different server sessions, each with its own cache of key ids."""

import sys

import psycopg

import scenarios
from scenarios import eq, one


def simple():
    return psycopg.connect(dbname="pgbouncer_simple", cursor_factory=psycopg.ClientCursor,
                           prepare_threshold=None)


def extended():
    return psycopg.connect(dbname="pgbouncer_extended", prepare_threshold=None)


def text_keys_across_sessions(connect):
    """While one client holds a transaction (and with it a server session), another client's
    transactions run in another session: a new text key given its id in one session is counted
    in the other, and back, with exact values and sums."""
    url = "/pricing?plan=pro&seats=5"
    with connect() as holder, connect() as client:
        holder.execute("SELECT sc_create(%s, %s, key_type => %s)", ("bouncer_urls", "buffered", "text"))
        holder.execute("SELECT sc_create(%s, key_type => %s)", ("bouncer_titles", "text"))
        holder.commit()
        incr = "SELECT sc_incr(%s, %s, %s), pg_backend_pid()"
        values, client_sessions = [], set()
        for _ in range(3):
            # holder's open transaction keeps its session from client; holder releases its
            # session first, so that pgbouncer (LIFO) hands the sessions over crosswise next time.
            value, _ = holder.execute(incr, ("bouncer_urls", url, 1)).fetchone()
            values.append(value)
            value, pid = client.execute(incr, ("bouncer_urls", url, 1)).fetchone()
            values.append(value)
            client_sessions.add(pid)
            holder.commit()
            client.commit()
        eq(len(client_sessions) >= 2, True,
           f"the premise: client's transactions ran in several server sessions ({sorted(client_sessions)})")
        eq(values, [1, 2, 3, 4, 5, 6], "buffered values, alternating between the clients")
        eq(one(client, "SELECT sc_sum(%s, %s)", ("bouncer_urls", url)), 6, "sc_sum")
        client.commit()

        eq(holder.execute(incr, ("bouncer_titles", "Moby Dick", 2)).fetchone()[0], 2,
           "two copies in holder's open sale")
        eq(one(client, "SELECT sc_sum(%s, %s)", ("bouncer_titles", "Moby Dick")), 0,
           "the other client's sum before the sale commits")
        client.commit()
        holder.commit()
        eq(one(client, "SELECT sc_sum(%s, %s)", ("bouncer_titles", "Moby Dick")), 2,
           "the other client's sum after the commit")
        eq(client.execute("SELECT * FROM sc_top_text(%s, %s)", ("bouncer_titles", 5)).fetchall(),
           [("Moby Dick", 2)], "sc_top_text")
        client.commit()


if __name__ == "__main__":
    failures = scenarios.run_all("pgbouncer simple protocol", simple, server_prepares=False)
    failures += scenarios.run_all("pgbouncer extended protocol", extended, server_prepares=False)
    for stack, connect in (("pgbouncer simple protocol", simple), ("pgbouncer extended protocol", extended)):
        checks = scenarios.Checks(stack)
        checks.run("keys as text: a client's transactions in different server sessions count one new key",
                   text_keys_across_sessions, connect)
        failures += checks.failures
    sys.exit(1 if failures else 0)
