"""Fails when two or more files of host/ call each other in a circle.

The include paths keep the modules one-way (see host/README.md); this keeps
the files one-way too. Arguments: nm, then the library's object files. A file
calls another when its object uses a symbol that the other's object defines.
"""
import os
import subprocess
import sys


def symbols(nm, path):
    """(defined, used) global symbols of an object file."""
    out = subprocess.run([nm, path], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDRBC":
            defined.add(parts[2])
    return defined, used


def file_name(path):
    """host/runtime/error.c from .../host/runtime/error.c.o (or error.o)."""
    parts = path.split(os.sep)
    base = parts[-1].split(".")[0] + ".c"
    return "/".join(parts[-3:-1] + [base])


def calls(nm, objects):
    owner, uses = {}, {}
    for path in objects:
        name = file_name(path)
        defined, used = symbols(nm, path)
        for s in defined:
            owner[s] = name
        uses[name] = used
    return {f: {owner[s] for s in used if s in owner and owner[s] != f} for f, used in uses.items()}


def circle(graph):
    """One circle of the graph as a list of files, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, path + [nxt])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def main():
    nm, objects = sys.argv[1], [p for p in sys.argv[2:] if "host" + os.sep in p]
    if not objects:
        sys.exit("host_calls: no object files of host/ given")
    found = circle(calls(nm, objects))
    if found:
        sys.exit("host_calls: these files call each other in a circle: " + " -> ".join(found))
    print(f"host_calls: {len(objects)} files of host/, no circle")


if __name__ == "__main__":
    main()
