#!/usr/bin/env python3
"""Fails if the modules of src/ include each other in a cycle.

A module is a file name without its extension (buffer.hpp and buffer.cpp are the module buffer);
batch.cpp and buffer_internal.hpp belong to buffer, whose header they implement. A module depends
on the modules whose headers any of its files include. The dependencies must form no cycle: a
newcomer reads the tree from the bottom (shmem, protocol, counter_table) up to the SQL functions
and the workers, and a change low down is never undone by one above it.
Prints the cycles it finds, and exits 1 if there is one.
"""
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
PART_OF = {"batch": "buffer", "buffer_internal": "buffer"}


def module(name):
    stem = os.path.splitext(name)[0]
    return PART_OF.get(stem, stem)


def dependencies():
    deps = {}
    for name in sorted(os.listdir(SRC)):
        if not name.endswith((".cpp", ".hpp")):
            continue
        with open(os.path.join(SRC, name)) as f:
            included = re.findall(r'^#include "([A-Za-z0-9_]+)\.hpp"', f.read(), re.M)
        m = module(name)
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
