#!/usr/bin/env python3
"""Fails if the folders of src/ are not layers, or if its modules include each other in a cycle.

The folders of src/ are layers, from the bottom up (docs/design.md, "The tree", gives the same
order and says what each holds):

    core  <  src/ (its own headers)  <  shared  <  definitions  <  buffer  <  transactions
          <  functions  <  workers

A file includes headers of its own folder and of the folders below it, never of a folder above.
core/ is pure C++ and includes only core/. src/module.cpp, the library's entry (_PG_init), sits
above every folder. The router's library (proxy/src/) includes, from the data node's tree, only
core/, compat.hpp and sketch_bytes.hpp (the reading of a sketch, which the router unions).

Within the layers, a module is a file's path without its extension (shared/shmem.hpp and
shared/shmem.cpp are the module shared/shmem), except that every file of src/buffer/ is the module
buffer, whose header (buffer.hpp) the others implement. A module depends on the modules whose
headers any of its files include, and the dependencies must form no cycle.

Files include each other by their path under src/ ("core/protocol.hpp"). Prints every upward
include and every cycle it finds, and exits 1 if there is one.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SRC = os.path.join(ROOT, "src")
PROXY = os.path.join(ROOT, "proxy", "src")
# The layers, bottom first: "." is the headers (and their .cpp) at the top of src/.
LAYERS = ["core", ".", "shared", "definitions", "buffer", "transactions", "functions", "workers"]
# Above every layer: the library's entry, which installs every hook.
ENTRY = "module.cpp"
GROUPED = {"buffer"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def includes(path):
    with open(path) as f:
        return INCLUDE.findall(f.read())


def sources(top):
    for folder, _, names in os.walk(top):
        for name in sorted(names):
            if name.endswith((".cpp", ".hpp")):
                yield os.path.relpath(os.path.join(folder, name), top)


def folder_of(path):
    """The layer of a path under src/: its folder, or "." for a file at the top."""
    folder = os.path.dirname(path)
    return folder if folder else "."


def module(path):
    """The module of a file, given by its path under src/."""
    folder = folder_of(path)
    if folder in GROUPED:
        return folder
    return os.path.join(folder, os.path.splitext(os.path.basename(path))[0])


def upward_includes():
    """Every include of a header of a higher folder, of an unknown folder, or of a missing file."""
    found = []
    for path in sources(SRC):
        folder = folder_of(path)
        if folder not in LAYERS:
            found.append("%s: folder %s is not a layer (test/lint/modules.py: LAYERS)" %
                         (path, folder))
            continue
        for inc in includes(os.path.join(SRC, path)):
            if not os.path.isfile(os.path.join(SRC, inc)):
                # A header of PostgreSQL or of the C++ library, named in quotes.
                if "/" in inc and inc.split("/")[0] in LAYERS:
                    found.append("%s includes %s, which does not exist" % (path, inc))
                continue
            target = folder_of(inc)
            if path == ENTRY:
                continue
            if target not in LAYERS or LAYERS.index(target) > LAYERS.index(folder):
                found.append("upward include: %s (%s) includes %s (%s)" %
                             (path, folder, inc, target))
            elif folder == "core" and target != "core":
                found.append("core is pure: %s includes %s" % (path, inc))
    return found


def router_includes():
    """Every include of the router's library that is neither its own nor core/, compat.hpp or
    sketch_bytes.hpp."""
    found = []
    if not os.path.isdir(PROXY):
        return found
    for path in sources(PROXY):
        here = os.path.dirname(os.path.join(PROXY, path))
        for inc in includes(os.path.join(PROXY, path)):
            if os.path.isfile(os.path.join(here, inc)):
                own = os.path.realpath(os.path.join(here, inc))
                if own.startswith(os.path.realpath(PROXY) + os.sep):
                    continue
                found.append("router: proxy/src/%s includes %s outside proxy/src by a relative "
                             "path (include it by its path under src/)" % (path, inc))
                continue
            if not os.path.isfile(os.path.join(SRC, inc)):
                continue  # PostgreSQL's or libpq's
            if inc not in ("compat.hpp", "sketch_bytes.hpp") and not inc.startswith("core/"):
                found.append("router: proxy/src/%s includes %s: the router may include only "
                             "core/, compat.hpp and sketch_bytes.hpp of src/" % (path, inc))
    return found


def dependencies():
    deps = {}
    for path in sources(SRC):
        m = module(path)
        dep = deps.setdefault(m, set())
        for inc in includes(os.path.join(SRC, path)):
            if os.path.isfile(os.path.join(SRC, inc)) and module(inc) != m:
                dep.add(module(inc))
    return deps


def cycles(deps):
    """Every edge a -> b from which a can be reached again, with one path that closes it."""
    found = []
    for a in sorted(deps):
        for b in sorted(deps[a]):
            path = {b: None}
            stack = [b]
            while stack and a not in path:
                x = stack.pop()
                for y in sorted(deps.get(x, ())):
                    if y not in path:
                        path[y] = x
                        stack.append(y)
            if a in path:
                back = [a]
                while back[-1] != b:
                    back.append(path[back[-1]])
                found.append([a] + back[::-1])
    return found


def main():
    problems = upward_includes() + router_includes()
    problems += ["module cycle: " + " -> ".join(c) for c in cycles(dependencies())]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
