#!/usr/bin/env python3
"""Runs every SQL example of the documentation as written, and checks the output it shows.

Each Markdown file (README.md and docs/**/*.md, but docs/design.md, the maintainers' map) is run
in a fresh database of a server with the library preloaded: its ```sql blocks in order, in one
psql session (-X, ON_ERROR_STOP), so that a later block sees what an earlier one made, as a
reader who types them in order would. Conventions a block may use:

  ```sql                 runs; any error fails the file
  ```sql fails 22023     runs alone and must fail with that SQLSTATE (the session goes on)
  ```text                right after a ```sql block: the output psql prints for it (aligned,
                         as psql shows it by default); compared line by line, trailing blanks
                         ignored

A file none of whose blocks runs CREATE EXTENSION gets the extension created in its database
first (a reference page assumes it; the README's quick start installs it itself). Other blocks
(sh, python, ...) are not run here. psql variables that an example uses are set by
the example itself (\\set). Prints one line per file and exits non-zero if any failed.

Usage: test/docs/examples.py [--host H] [--port P] [--user U] [FILE.md ...]
Connects with psql to the server given (or PGHOST/PGPORT); creates and drops databases named
docs_example_PID_N.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

FENCE = re.compile(r"^```(\w*)\s*(.*)$")


def blocks(path):
    """The fenced blocks of a Markdown file: (language, info, text, line)."""
    out = []
    lang = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if lang is None and m and m.group(1):
                lang, info, start, body = m.group(1), m.group(2).strip(), n, []
            elif lang is not None and line.rstrip("\n") == "```":
                out.append((lang, info, "".join(body), start))
                lang = None
            elif lang is not None:
                body.append(line)
    return out


def psql(args, db, sql):
    cmd = ["psql", "-X", "-q", "-d", db, "-v", "ON_ERROR_STOP=1", "-v", "VERBOSITY=verbose"]
    cmd += args
    return subprocess.run(cmd, input=sql, capture_output=True, text=True)


def normalized(text):
    return [line.rstrip() for line in text.strip("\n").split("\n")]


def shown_in(shown, got):
    """Whether the lines shown come, in order, among the messages psql printed (VERBOSITY verbose:
    the SQLSTATE after the level and a LOCATION line, which the default verbosity leaves out)."""
    lines = []
    for line in got.splitlines():
        line = re.sub(r"^psql:[^:]*:\d+: ", "", line)
        line = re.sub(r"^(ERROR|WARNING|NOTICE):  [0-9A-Z]{5}: ", r"\1:  ", line)
        if not line.startswith("LOCATION:"):
            lines.append(line.rstrip())
    at = 0
    for want in normalized(shown):
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        while at < len(lines) and not pattern.fullmatch(lines[at]):
            at += 1
        if at == len(lines):
            return False
        at += 1
    return True


def run_file(path, conn, n):
    db = "docs_example_%d_%d" % (os.getpid(), n)
    admin = psql(conn, "postgres", 'DROP DATABASE IF EXISTS "%s"; CREATE DATABASE "%s";' % (db, db))
    if admin.returncode != 0:
        return ["could not create %s: %s" % (db, admin.stderr.strip())]
    problems = []
    items = blocks(path)
    # A reference page assumes the extension; a page that installs it (README) does so itself.
    if not any(lang == "sql" and "CREATE EXTENSION" in text for lang, _, text, _ in items):
        made = psql(conn, db, "CREATE EXTENSION slotted_counter;")
        if made.returncode != 0:
            return ["could not create the extension: %s" % made.stderr.strip()]
    # One session for the whole file: the blocks, each closed by a marker the output is split at.
    script = []
    plan = []  # (kind, line, expected output or SQLSTATE)
    for i, (lang, info, text, line) in enumerate(items):
        if lang != "sql":
            continue
        shown = None
        if i + 1 < len(items) and items[i + 1][0] == "text":
            shown = items[i + 1][2]
        m = re.match(r"fails\s+([0-9A-Z]{5})$", info)
        if m:
            # Alone, without stopping the session: its error is checked below.
            script.append("\\set ON_ERROR_STOP 0\n%s\n\\set ON_ERROR_STOP 1\n" % text)
            plan.append(("fails", line, (m.group(1), shown)))
        else:
            script.append(text)
            plan.append(("runs", line, shown))
        script.append("\n\\echo @@example-end@@\n\\warn @@example-end@@\n")
    result = psql(conn, db, "".join(script))
    outputs = result.stdout.split("@@example-end@@\n")
    errors = result.stderr
    block_errors = errors.split("@@example-end@@\n")
    if result.returncode != 0:
        # The error that stopped it, with what psql printed around it.
        lines = errors.strip().splitlines()
        first = max([i for i, l in enumerate(lines) if "ERROR:" in l] or [0])
        problems.append("stopped:\n    " + "\n    ".join(lines[first:first + 6]))
    for k, (kind, line, expected) in enumerate(plan):
        got = outputs[k] if k < len(outputs) else None
        if got is None:
            problems.append("line %d: never ran" % line)
        elif kind == "runs" and expected is not None and normalized(got) != normalized(expected):
            problems.append("line %d: output differs:\n--- shown\n%s\n--- got\n%s"
                            % (line, expected.rstrip(), got.rstrip()))
    # Each block's own errors: a block that must fail, with its SQLSTATE (not another block's).
    # A ```text block after it shows the error as psql prints it by default: its lines must come
    # in that order among the block's (... stands for any text).
    for k, (kind, line, expected) in enumerate(plan):
        if kind != "fails":
            continue
        state, shown = expected
        mine = block_errors[k] if k < len(block_errors) else ""
        if ("ERROR:  %s:" % state) not in mine:
            problems.append("line %d: did not fail with %s" % (line, state))
        elif shown is not None and not shown_in(shown, mine):
            problems.append("line %d: error differs:\n--- shown\n%s\n--- got\n%s"
                            % (line, shown.rstrip(), mine.rstrip()))
    psql(conn, "postgres", 'DROP DATABASE IF EXISTS "%s" WITH (FORCE);' % db)
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host")
    ap.add_argument("--port")
    ap.add_argument("--user")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    conn = []
    if a.host:
        conn += ["-h", a.host]
    if a.port:
        conn += ["-p", a.port]
    if a.user:
        conn += ["-U", a.user]
    top = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    files = a.files or [os.path.join(top, "README.md")] + sorted(
        f for f in glob.glob(os.path.join(top, "docs", "**", "*.md"), recursive=True)
        if not f.endswith("design.md"))
    failed = 0
    for n, path in enumerate(files, 1):
        problems = run_file(path, conn, n)
        name = os.path.relpath(path, top)
        if problems:
            failed += 1
            print("FAIL %s" % name)
            for p in problems:
                print("  " + p.replace("\n", "\n  "))
        else:
            print("ok   %s" % name)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
