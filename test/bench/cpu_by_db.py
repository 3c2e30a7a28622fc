#!/usr/bin/env python3
"""Samples the CPU time of every PostgreSQL backend by database while a process runs.

Usage: cpu_by_db.py PID: until PID exits, reads /proc every 0.2 s; then prints one line per
database, "<database> <CPU seconds, user + system>", each backend counted by its last sample
(backends live as long as the benchmark's connections). One process, no forks: the benchmark
keeps the cores.
"""
import os
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def sample(last):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace").split()
            if len(title) < 3 or title[0] != "postgres:":
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            last[pid] = (title[2], (int(fields[11]) + int(fields[12])) / HZ)
        except (OSError, IndexError, ValueError):
            continue


def main():
    watched = int(sys.argv[1])
    last = {}
    while os.path.exists(f"/proc/{watched}"):
        sample(last)
        time.sleep(0.2)
    totals = {}
    for database, cpu in last.values():
        totals[database] = totals.get(database, 0.0) + cpu
    for database, cpu in sorted(totals.items()):
        print(database, f"{cpu:.3f}")


if __name__ == "__main__":
    main()
