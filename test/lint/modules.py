#!/usr/bin/env python3
"""Fails if the modules of src/ include each other in a cycle.

A module is a file name without its extension (shmem.hpp and shmem.cpp are the module shmem),
except that every file of src/buffer/ is the module buffer, whose header (buffer.hpp) the others
implement. Files include each other by their path under src/ ("core/protocol.hpp"). A module
depends on the modules whose headers any of its files include. The dependencies must form no
cycle: a newcomer reads the tree from the bottom (core/, shared/) up to the SQL functions and the
workers, and a change low down is never undone by one above it.
Prints the cycles it finds, and exits 1 if there is one.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
GROUPED = {"buffer"}


def module(path):
    """The module of a file, given by its path under src/."""
    folder, name = os.path.split(path)
    if folder in GROUPED:
        return folder
    return os.path.splitext(name)[0]


def dependencies():
    deps = {}
    for folder, _, names in os.walk(SRC):
        for name in sorted(names):
            if not name.endswith((".cpp", ".hpp")):
                continue
            path = os.path.relpath(os.path.join(folder, name), SRC)
            with open(os.path.join(SRC, path)) as f:
                included = re.findall(r'^#include "([A-Za-z0-9_/]+\.hpp)"', f.read(), re.M)
            m = module(path)
            deps.setdefault(m, set()).update(module(i) for i in included if module(i) != m)
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
    found = cycles(dependencies())
    for c in found:
        print("module cycle: " + " -> ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
