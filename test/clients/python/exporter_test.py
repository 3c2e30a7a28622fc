"""contrib/prometheus/queries.yaml in Debian's prometheus-postgres-exporter, and the Grafana
dashboard contrib/grafana/slotted_counter.json against what it exports.

As the server's superuser (libpq's PG* environment variables): a role in pg_monitor for the
exporter, a counter it may read and one it may not, a flush, and a flush that fails (a session
holds a lock on slotted_counter.key_values). Then the real exporter, started on a free loopback
port and connected as that role, is scraped until slotted_counter's series appear, and the series
are checked: the database's flushes and state, the last error, the readable counter's total and
no series of the other. Every metric the dashboard's queries name must be among them.

Usage: exporter_test.py EXPORTER_BINARY (run from anywhere: the paths are the tree's)
"""

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import psycopg

from scenarios import Checks, eq

top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
QUERIES = os.path.join(top, "contrib", "prometheus", "queries.yaml")
DASHBOARD = os.path.join(top, "contrib", "grafana", "slotted_counter.json")
DB = os.environ["PGDATABASE"]
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """The exporter's series: a list of (name, {label: value}, value)."""
    out = []
    for line in text.splitlines():
        m = SERIES.match(line)
        if m:
            labels = dict(LABEL.findall(m.group(2) or ""))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def setup():
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CREATE ROLE exporter_role LOGIN IN ROLE pg_monitor")
        conn.execute("SELECT sc_create('exported_views', 'buffered'), "
                     "sc_create('private_views', 'buffered')")
        conn.execute("SELECT sc_grant('exported_views', 'SELECT', 'exporter_role')")
        conn.execute("SELECT sc_incr('exported_views', k, 14) FROM generate_series(1, 3) k")
        conn.execute("SELECT sc_incr('private_views', 1, 5)")
        conn.execute("SELECT sc_rollup()")
        # A flush that fails: the lock outlasts the flush's lock timeout (1 s).
        with psycopg.connect() as holder:
            holder.execute("LOCK TABLE slotted_counter.key_values IN SHARE MODE")
            conn.execute("SELECT sc_incr('exported_views', 4, 1)")
            try:
                conn.execute("SELECT sc_rollup()")
            except psycopg.Error as e:
                eq(e.sqlstate, "55P03", "the premise: the flush failed on the lock")
            else:
                raise AssertionError("the premise: the flush did not fail")
            holder.rollback()
        conn.execute("SELECT sc_rollup()")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(exporter):
    """Starts the exporter, scrapes it until slotted_counter's series are there, stops it."""
    port = free_port()
    dsn = (f"host={os.environ['PGHOST']} port={os.environ['PGPORT']} user=exporter_role "
           f"dbname={DB} sslmode=disable")
    proc = subprocess.Popen([exporter, f"--web.listen-address=127.0.0.1:{port}",
                             f"--extend.query-path={QUERIES}"],
                            env=dict(os.environ, DATA_SOURCE_NAME=dsn),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The exporter listens and connects in its own time: up to 300 tries, 0.2 s apart.
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
                    text = r.read().decode()
                if "slotted_counter_stats_flushes_total" in text:
                    return parse(text)
            except OSError:
                pass
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError("no slotted_counter series from the exporter")
    finally:
        proc.terminate()
        try:
            log = proc.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            log = proc.communicate()[0]
        if os.environ.get("EXPORTER_LOG"):
            print(log)


def one_of(series, name, **labels):
    values = [v for n, ls, v in series
              if n == name and all(ls.get(k) == want for k, want in labels.items())]
    eq(len(values), 1, f"series {name} {labels}")
    return values[0]


def check_series(series):
    eq(one_of(series, "slotted_counter_stats_flushes_total", datname=DB) >= 2, True,
       "the database's committed flushes")
    eq(one_of(series, "slotted_counter_stats_capacity", datname=DB) > 0, True, "the capacity")
    eq(one_of(series, "slotted_counter_stats_last_flush_timestamp_seconds", datname=DB) > 0, True,
       "the last flush's time")
    eq(one_of(series, "slotted_counter_state_info", datname=DB), 1.0, "the flusher's state")
    eq(one_of(series, "slotted_counter_last_error_info", datname=DB,
              last_error="canceling statement due to lock timeout"), 1.0, "the last error")
    eq(one_of(series, "slotted_counter_counter_total", counter="exported_views",
              durability="buffered", key_type="bigint"), 43.0, "the readable counter's total")
    eq([ls for n, ls, _ in series if ls.get("counter") == "private_views"], [],
       "no series of a counter the exporter's role may not read")


def check_dashboard(series):
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exported = {n for n, _, _ in series}
    named = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            named |= set(re.findall(r"slotted_counter_[a-z_]+", target["expr"]))
    for variable in dashboard["templating"]["list"]:
        named |= set(re.findall(r"slotted_counter_[a-z_]+", variable["query"]))
    eq(len(named) >= 10, True, f"the premise: the dashboard's metrics ({sorted(named)})")
    eq(sorted(named - exported), [], "metrics the dashboard names that the exporter does not export")


if __name__ == "__main__":
    checks = Checks("postgres_exporter")
    checks.run("counters, a flush and a failed flush to export", setup)
    scraped = []
    checks.run("the exporter's /metrics has slotted_counter's series",
               lambda: scraped.extend(scrape(sys.argv[1])))
    if scraped:
        checks.run("the buffer, the flushes, the last error, and the totals the role may read",
                   check_series, scraped)
        checks.run("every metric of the Grafana dashboard is exported", check_dashboard, scraped)
    sys.exit(1 if checks.failures else 0)
