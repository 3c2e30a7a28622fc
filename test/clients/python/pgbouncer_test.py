"""slotted_counter through pgbouncer in transaction pooling mode, where consecutive transactions
of one client may run in different server sessions: psycopg with the simple query protocol
(values bound on the client) and with the extended protocol without server-side prepared
statements, which pgbouncer cannot follow across server sessions in this mode. Each protocol has
a database of its own, so that both run the same counter names."""

import sys

import psycopg

import scenarios


def simple():
    return psycopg.connect(dbname="pgbouncer_simple", cursor_factory=psycopg.ClientCursor,
                           prepare_threshold=None)


def extended():
    return psycopg.connect(dbname="pgbouncer_extended", prepare_threshold=None)


if __name__ == "__main__":
    failures = scenarios.run_all("pgbouncer simple protocol", simple, server_prepares=False)
    failures += scenarios.run_all("pgbouncer extended protocol", extended, server_prepares=False)
    sys.exit(1 if failures else 0)
