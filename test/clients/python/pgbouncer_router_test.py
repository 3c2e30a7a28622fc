"""The router (slotted_counter_proxy) and a data node, both reached through pgbouncer in
transaction pooling mode by many clients at once (psycopg with prepare_threshold=None, the safe
setting of docs/guides/drivers.md). Half the clients count through the router, half call the
key's node directly (docs/router.md, "Skipping the router"); every count is then checked through
the router and on the nodes. The databases are made by run.sh: bouncer_router, whose nodes are
bouncer_node1 and bouncer_node2 reached directly (not through pgbouncer), and the router and
bouncer_node1 are what the clients reach through pgbouncer."""

import sys
import threading

import psycopg

from scenarios import Checks, eq

CLIENTS = 16
ROUNDS = 60
KEYS = 12


def connect(dbname):
    return psycopg.connect(dbname=dbname, prepare_threshold=None, autocommit=True)


def node_keys(router):
    """The keys 1..KEYS whose home is node 0 (bouncer_node1)."""
    return [k for k in range(1, KEYS + 1)
            if router.execute("SELECT node FROM sc_proxy_node_of(%s, %s)",
                              ("bounced", k)).fetchone()[0] == 0]


def counts_through_the_router_and_a_node():
    with connect("bouncer_router") as router:
        router.execute("SELECT sc_create(%s, %s)", ("bounced", "buffered"))
        router.execute("SELECT sc_create(%s)", ("bounced_tx",))
        direct = node_keys(router)
    eq(len(direct) > 0, True, "the premise: some of the keys live on bouncer_node1")
    made = {}  # (counter, key) -> increments that returned
    sessions = {}  # client -> the server sessions its calls ran in
    lock = threading.Lock()
    errors = []

    def client(i):
        via_router = i % 2 == 0
        try:
            with connect("bouncer_router" if via_router else "bouncer_node1") as conn:
                keys = range(1, KEYS + 1) if via_router else direct
                for r in range(ROUNDS):
                    key = list(keys)[(i + r) % len(keys)]
                    pid = conn.execute("SELECT pg_backend_pid() FROM sc_incr(%s, %s)",
                                       ("bounced", key)).fetchone()[0]
                    with lock:
                        sessions.setdefault(i, set()).add(pid)
                    # Transactional increments: through the router each is its own transaction
                    # (the router refuses them in a transaction block); at the node two in one
                    # transaction, every fifth rolled back.
                    rolled_back = not via_router and r % 5 == 4
                    if via_router:
                        conn.execute("SELECT sc_incr(%s, %s)", ("bounced_tx", key))
                        conn.execute("SELECT sc_incr(%s, %s, %s)", ("bounced_tx", key, 2))
                    else:
                        with conn.transaction(force_rollback=rolled_back):
                            conn.execute("SELECT sc_incr(%s, %s)", ("bounced_tx", key))
                            conn.execute("SELECT sc_incr(%s, %s, %s)", ("bounced_tx", key, 2))
                    with lock:
                        made[("bounced", key)] = made.get(("bounced", key), 0) + 1
                        if not rolled_back:
                            made[("bounced_tx", key)] = made.get(("bounced_tx", key), 0) + 3
        except Exception as e:  # reported below, with the counts
            with lock:
                errors.append(f"client {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    eq(errors, [], "errors of the clients")
    # The premise: server sessions were shared between clients (transaction pooling), so that
    # what one client's transaction left in a session met another's. Whether each client also
    # moved between sessions depends on the scheduling (an idle session is handed back to the
    # client that asks first), and is not asked.
    served = {}  # server session -> the clients whose calls it ran
    for i, pids in sessions.items():
        for pid in pids:
            served.setdefault(pid, set()).add(i)
    eq(any(len(clients) >= 2 for clients in served.values()), True,
       f"the premise: a server session ran the calls of several clients ({served})")
    with connect("bouncer_router") as router, connect("bouncer_node1") as node:
        for counter in ("bounced", "bounced_tx"):
            for key in range(1, KEYS + 1):
                want = made.get((counter, key), 0)
                eq(router.execute("SELECT sc_sum(%s, %s)", (counter, key)).fetchone()[0], want,
                   f"{counter} key {key} through the router")
                if key in direct:
                    eq(node.execute("SELECT sc_sum(%s, %s)", (counter, key)).fetchone()[0], want,
                       f"{counter} key {key} on its node")


if __name__ == "__main__":
    checks = Checks("pgbouncer router")
    checks.run(f"{CLIENTS} clients through pgbouncer, half through the router and half at a node: "
               "every count exact", counts_through_the_router_and_a_node)
    sys.exit(1 if checks.failures else 0)
