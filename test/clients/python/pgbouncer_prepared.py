"""What protocol-level prepared statements do through a pgbouncer that does not track them (before
1.21, or with max_prepared_statements = 0) in transaction pooling mode: a demonstration, not a
check of the suite (the outcome depends on how pgbouncer hands out its sessions).

12 psycopg clients count views of key 1 of a buffered counter, each repeating three statements
(an increment and two reads) in an order of its own, so that psycopg's statement names (_pg3_0,
_pg3_1, ...) stand for different statements in different clients. With psycopg's default
(prepare_threshold=5) a statement prepared by one client in a server session is run by another
client that lands in that session with its own arguments: calls fail with 42P05 or 26000, and
calls that return without an error run another client's statement, so that the counter counts
more or fewer views than the increments that returned. With prepare_threshold=None (no prepared
statement on the server) every call returns and every increment counts once.

Usage: pgbouncer_prepared.py HOST PORT DBNAME [THRESHOLD|none]
(a database with the extension, reached through pgbouncer in transaction pooling mode, with a
pool smaller than 12 server connections)
"""

import sys
import threading

import psycopg

CLIENTS = 12
ROUNDS = 70
STATEMENTS = ["SELECT sc_incr(%s, %s)", "SELECT sc_sum(%s, %s) + 0", "SELECT sc_sum(%s, %s) + 1"]


def main():
    host, port, dbname = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    threshold = None if sys.argv[4:] == ["none"] else int((sys.argv[4:] or ["5"])[0])

    def connect(prepare_threshold):
        return psycopg.connect(host=host, port=port, dbname=dbname, autocommit=True,
                               prepare_threshold=prepare_threshold)

    with connect(None) as admin:
        admin.execute("SELECT sc_drop('prepared_demo', if_exists => true)")
        admin.execute("SELECT sc_create('prepared_demo', 'buffered')")
    lock = threading.Lock()
    returned = {"calls": 0, "increments": 0}
    errors = {}

    def client(i):
        order = STATEMENTS[i % 3:] + STATEMENTS[:i % 3]
        with connect(threshold) as conn:
            for _ in range(ROUNDS):
                for query in order:
                    try:
                        conn.execute(query, ("prepared_demo", 1)).fetchone()
                    except psycopg.Error as e:
                        with lock:
                            errors[e.sqlstate] = errors.get(e.sqlstate, 0) + 1
                    else:
                        with lock:
                            returned["calls"] += 1
                            returned["increments"] += query.startswith("SELECT sc_incr")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with connect(None) as admin:
        counted = admin.execute("SELECT sc_sum('prepared_demo', 1)").fetchone()[0]
        admin.execute("SELECT sc_drop('prepared_demo')")
    print(f"prepare_threshold={threshold}: {CLIENTS * ROUNDS * 3} calls, {returned['calls']} "
          f"returned, errors by SQLSTATE {errors}; increments that returned "
          f"{returned['increments']}, counted {counted}")


if __name__ == "__main__":
    main()
