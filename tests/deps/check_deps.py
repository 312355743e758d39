#!/usr/bin/env python3
"""Checks that slimtorch's code depends one way.

The order (docs/code_guide.md):
    core < io < preprocessing, datasets < data < nets < train < deploy, eval < export < tools

A file of one area may include headers of its own area and of the areas below it; an area
never includes one above it, nor one of the same rank (preprocessing and datasets, deploy and
eval do not know each other). Besides the areas, no two files may include each other, directly
or through a chain (a cycle between files: a header and its own .cc are one unit). And one file
reads the process environment: only src/core/environment.cc calls getenv, setenv, unsetenv,
putenv or reads environ (core/environment.h is how every other file asks).

Usage: check_deps.py ROOT            prints every violation, exits 1 if any
       check_deps.py --self-test     proves the checker catches an upward include and a cycle
"""
import os
import re
import sys
import tempfile

RANK = {
    "core": 0, "io": 1, "preprocessing": 2, "datasets": 2, "data": 3, "nets": 4,
    "train": 5, "deploy": 6, "eval": 6, "export": 7, "tools": 8,
}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCE_EXT = (".h", ".cc", ".cu", ".cuh", ".inc")


def area_of(rel):
    """The area of a path relative to the root: include/slimtorch/<a>/, src/<a>/ or tools/."""
    parts = rel.split("/")
    if parts[0] == "tools":
        return "tools"
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "slimtorch":
        return parts[2]
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    return None


def unit_of(rel):
    """A header and its implementation are one unit: include/slimtorch/io/x.h ~ src/io/x.cc."""
    stem = os.path.splitext(rel)[0]
    if stem.startswith("include/slimtorch/"):
        stem = "src/" + stem[len("include/slimtorch/"):]
    return stem


def resolve(root, including, name):
    """The file an include names, relative to root, or None for a system/third-party header."""
    if name.startswith("slimtorch/"):
        rel = "include/" + name
        return rel if os.path.exists(os.path.join(root, rel)) else None
    here = os.path.dirname(including)
    for base in (here, "src", "tools"):
        rel = os.path.normpath(os.path.join(base, name))
        if os.path.exists(os.path.join(root, rel)):
            return rel
    return None


def sources(root):
    """(path relative to root, text) of every source file under include/, src/, tools/."""
    for top in ("include", "src", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        yield os.path.relpath(path, root), fh.read()


def scan(root):
    """{file: [(line, included file)]} for every source file under include/, src/, tools/."""
    edges = {}
    for rel, text in sources(root):
        found = []
        for m in INCLUDE.finditer(text):
            target = resolve(root, rel, m.group(1))
            if target is not None:
                found.append((text.count("\n", 0, m.start()) + 1, target))
        edges[rel] = found
    return edges


def area_violations(edges):
    out = []
    for src, targets in sorted(edges.items()):
        a = area_of(src)
        if a is None or a not in RANK:
            continue
        for line, dst in targets:
            b = area_of(dst)
            if b is None or b == a or b not in RANK:
                continue
            if RANK[b] >= RANK[a]:
                kind = "upward" if RANK[b] > RANK[a] else "sideways"
                out.append(f"{src}:{line}: {a} includes {dst} ({b}): {kind} against "
                           "core < io < preprocessing, datasets < data < nets < train < "
                           "deploy, eval < export < tools")
    return out


def unit_cycles(edges):
    """Cycles in the graph of units (a header with its .cc), each reported once."""
    graph = {}
    where = {}
    for src, targets in edges.items():
        u = unit_of(src)
        graph.setdefault(u, set())
        for line, dst in targets:
            v = unit_of(dst)
            if v != u:
                graph[u].add(v)
                where.setdefault((u, v), f"{src}:{line}")
                graph.setdefault(v, set())
    # Tarjan's strongly connected components.
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    out = []
    for comp in comps:
        members = set(comp)
        links = [f"{u} -> {v} ({where[(u, v)]})" for u in comp for v in sorted(graph[u])
                 if v in members]
        out.append("cycle between " + ", ".join(comp) + ":\n    " + "\n    ".join(links))
    return out


ENVIRONMENT_FILE = "src/core/environment.cc"
ENV_CALL = re.compile(r"\b(?:secure_getenv|getenv|setenv|unsetenv|putenv|clearenv)\s*\(|\benviron\b")
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def environment_violations(root):
    """Reads or writes of the process environment outside ENVIRONMENT_FILE."""
    out = []
    for rel, text in sources(root):
        if rel == ENVIRONMENT_FILE:
            continue
        code = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        for m in ENV_CALL.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            out.append(f"{rel}:{line}: {m.group(0).rstrip('( ')} outside "
                       f"{ENVIRONMENT_FILE}: use core/environment.h")
    return out


def check(root):
    edges = scan(root)
    return area_violations(edges) + unit_cycles(edges) + environment_violations(root)


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text)


def self_test():
    """Two faults the checker exists for: nets including export, and io's two checkpoint files calling
    each other. The checker must report both and nothing on the clean tree."""
    with tempfile.TemporaryDirectory() as root:
        write(root, "include/slimtorch/io/checkpoint.h", "#pragma once\n")
        write(root, "include/slimtorch/io/tf_checkpoint.h", "#pragma once\n")
        write(root, "include/slimtorch/export/inference_graph.h", "#pragma once\n")
        write(root, "include/slimtorch/nets/layers.h", '#include "slimtorch/io/checkpoint.h"\n')
        write(root, "src/nets/layers.cc", '#include "slimtorch/nets/layers.h"\n')
        write(root, "src/io/checkpoint.cc", '#include "slimtorch/io/checkpoint.h"\n')
        write(root, "src/io/tf_checkpoint.cc", '#include "slimtorch/io/checkpoint.h"\n')
        if check(root):
            print("self-test: the clean tree was reported:", check(root))
            return 1
        write(root, "src/nets/layers.cc", '#include "slimtorch/nets/layers.h"\n'
              '#include "slimtorch/export/inference_graph.h"\n')
        write(root, "src/io/checkpoint.cc", '#include "slimtorch/io/checkpoint.h"\n'
              '#include "slimtorch/io/tf_checkpoint.h"\n')
        write(root, "src/io/tf_checkpoint.cc", '#include "slimtorch/io/tf_checkpoint.h"\n'
              '#include "slimtorch/io/checkpoint.h"\n')
        write(root, "src/core/environment.cc", 'const char* v = std::getenv("X");\n')
        write(root, "src/io/reader.cc", '// getenv( in a comment is no call\n'
              'const char* v = std::getenv("HOME");\n')
        found = check(root)
        upward = [v for v in found if "src/nets/layers.cc:2" in v and "upward" in v]
        cycle = [v for v in found if v.startswith("cycle between src/io/checkpoint, "
                                                  "src/io/tf_checkpoint")]
        env = [v for v in found if v.startswith("src/io/reader.cc:2: getenv outside")]
        if len(upward) != 1 or len(cycle) != 1 or len(env) != 1 or len(found) != 3:
            print("self-test: expected one upward include, one cycle and one getenv, got:",
                  found)
            return 1
    print("self-test: an upward include, a cycle and a getenv outside environment.cc are caught")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    found = check(argv[1])
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} dependency violation(s)")
        return 1
    print("dependencies run one way")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
