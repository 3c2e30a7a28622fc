"""slotted_counter through psycopg 3 with its default settings (statements prepared on the server
after 5 executions), connected as libpq's PG* environment variables say."""

import sys

import psycopg

import scenarios


def connect():
    return psycopg.connect()


if __name__ == "__main__":
    sys.exit(1 if scenarios.run_all("psycopg", connect, server_prepares=True) else 0)
