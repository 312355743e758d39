#!/usr/bin/env python3
"""Lists the functions of src/ and tools/ longer than a limit (default 60 lines).

A function is a '{' that opens at brace depth 0 (outside namespaces, classes and structs)
after a ')' (optionally followed by const, override, noexcept, an initializer list...), up to
its matching '}'. Lambdas and class bodies inside count toward their function. Comments and
string literals are skipped. Generated code (protobuf) is not scanned.

Usage: long_functions.py ROOT [--limit N] [--check]
--check exits 1 when a function not in ALLOWED runs over the limit (the CTest
short_functions).
"""
import argparse
import os
import re
import sys


def strip(text):
    """Blanks comments and string/char literals, keeping newlines so line numbers hold."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# Long on purpose, with the reason.
ALLOWED = {
    # The fused batch norm's CUDA reduction: its phases share per-thread
    # register arrays and one shared-memory buffer; splitting it passes those
    # between device functions, a change to measure on a GPU first.
    ("src/nets/kernels/cuda/cuda_kernels.cu", "ReduceKernel"),
}

SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b[^;{)]*$")
NAME = re.compile(r"([A-Za-z_][\w:~<>]*(?:operator\S*)?)\s*\($")
ATTRIBUTE = re.compile(r"__launch_bounds__\s*\([^)]*\)")


def functions(text):
    """(name, first line, lines) of each top-level function body in text."""
    s = strip(text)
    found = []
    scopes = []  # True for a namespace/class scope, False for a function body
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "{":
            head = s[max(0, s.rfind(";", 0, i), s.rfind("}", 0, i), s.rfind("{", 0, i)) + 1:i]
            in_function = any(not x for x in scopes)
            if in_function:
                scopes.append(False)
                i += 1
                continue
            if SCOPE.search(" ".join(head.split())) or ")" not in head or "=" in head.split(")")[-1]:
                scopes.append(True)
                i += 1
                continue
            # A function: find its matching brace.
            depth, j = 0, i
            while j < n:
                if s[j] == "{":
                    depth += 1
                elif s[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            head = ATTRIBUTE.sub("", head)
            paren = head.find("(")
            m = NAME.search(head[:paren + 1].rstrip()) if paren >= 0 else None
            name = m.group(1) if m else head.strip().split("\n")[-1][:40]
            first = s.count("\n", 0, i) + 1
            last = s.count("\n", 0, j) + 1
            found.append((name, first, last - first + 1))
            i = j + 1
            continue
        if c == "}":
            if scopes:
                scopes.pop()
        i += 1
    return found


def scan(root, limit):
    rows = []
    for top in ("src", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "/proto" in dirpath:
                continue
            for f in sorted(files):
                if not f.endswith((".cc", ".h", ".cu")):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    text = fh.read()
                for name, first, lines in functions(text):
                    if lines > limit:
                        rows.append((lines, os.path.relpath(path, root), first, name))
    return sorted(rows, reverse=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--limit", type=int, default=60)
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    rows = scan(a.root, a.limit)
    over = 0
    for lines, path, first, name in rows:
        allowed = (path, name) in ALLOWED
        over += not allowed
        print(f"{lines:5d}  {path}:{first}  {name}{'  (allowed)' if allowed else ''}")
    print(f"{len(rows)} function(s) over {a.limit} lines, {over} not allowed")
    if a.check and over:
        print("split them into short named steps (docs/code_guide.md)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
