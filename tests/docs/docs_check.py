#!/usr/bin/env python3
"""The documentation keeps up with the code.

  docs_check.py <source dir> <build dir>

1. Every flag an executable defines in slimtorch's own sources (its
   `--helpxml`, flags whose <file> is under tools/ or src/) appears as
   `--name` in docs/tools/<tool>.md.
2. Every SLIMTORCH_* environment variable the code or scripts read appears
   in docs/runtime_switches.md.
3. Every relative link in README.md and docs/**/*.md resolves to a file or
   folder of the tree.
Prints one line per problem and exits 1 if there is any.
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

TOOLS = ["download_and_convert_data", "train_image_classifier",
         "eval_image_classifier", "export_inference_graph", "label_image",
         "inspect_checkpoint", "average_checkpoints"]


def own_flags(binary, src):
    """Names of the flags `binary --helpxml` reports from slimtorch's own
    tools/<file> or src/<area>/<file> (glog's and gflags' own src/ are not)."""
    env = dict(os.environ, SLIMTORCH_NO_REEXEC="1")
    out = subprocess.run([binary, "--helpxml"], capture_output=True,
                         text=True, env=env, timeout=120).stdout
    root = ET.fromstring(out[out.index("<?xml"):] if "<?xml" in out else out)
    names = []
    for flag in root.iter("flag"):
        where = (flag.findtext("file") or "").replace("\\", "/")
        m = re.search(r"(tools/[^/]+|src/[^/]+/[^/]+)$", where)
        if m and os.path.isfile(os.path.join(src, m.group(1))):
            names.append(flag.findtext("name"))
    return names


def check_flags(src, build, problems):
    for tool in TOOLS:
        binary = os.path.join(build, tool)
        if not os.path.exists(binary):
            continue  # an optional tool not built here
        page = os.path.join(src, "docs", "tools", tool + ".md")
        if not os.path.exists(page):
            problems.append(f"docs/tools/{tool}.md: missing (the page of {tool})")
            continue
        text = open(page, encoding="utf-8").read()
        flags = own_flags(binary, src)
        if not flags:
            problems.append(f"{tool} --helpxml: no flags of its own found")
        for name in flags:
            if not re.search(r"--" + re.escape(name) + r"(?![A-Za-z0-9_])", text):
                problems.append(f"docs/tools/{tool}.md: flag --{name} of {tool} is not documented")


# A C/C++/Python string literal naming a variable, or a shell expansion of one.
LITERAL = re.compile(r'"(SLIMTORCH_[A-Z0-9_]+)"')
SHELL = re.compile(r"\$\{?(SLIMTORCH_[A-Z0-9_]+)")


def read_variables(src):
    found = {}
    for top in ["src", "tools", "include", "scripts", "bench", "tests", ".ci"]:
        for dirpath, _, files in os.walk(os.path.join(src, top)):
            for f in files:
                path = os.path.join(dirpath, f)
                shell = f.endswith((".sh", ".sbatch")) or f == "run"
                if not (shell or f.endswith((".cc", ".h", ".cu", ".py"))):
                    continue
                for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                    if line.lstrip().startswith("#") and not shell:
                        continue  # preprocessor lines (#error "SLIMTORCH_ISA ...")
                    names = LITERAL.findall(line) + (SHELL.findall(line) if shell else [])
                    for name in names:
                        found.setdefault(name, f"{os.path.relpath(path, src)}:{n}")
    return found


def check_variables(src, problems):
    page = os.path.join(src, "docs", "runtime_switches.md")
    text = open(page, encoding="utf-8").read() if os.path.exists(page) else ""
    if not text:
        problems.append("docs/runtime_switches.md: missing")
    for name, where in sorted(read_variables(src).items()):
        if not re.search(re.escape(name) + r"(?![A-Z0-9_])", text):
            problems.append(f"docs/runtime_switches.md: {name} (read at {where}) is not documented")


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def check_links(src, problems):
    pages = [os.path.join(src, "README.md")]
    for dirpath, _, files in os.walk(os.path.join(src, "docs")):
        pages += [os.path.join(dirpath, f) for f in files if f.endswith(".md")]
    for page in pages:
        in_code = False
        for n, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                    continue  # http:, mailto:, an anchor in the same page
                path = target.split("#", 1)[0]
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path))
                if not os.path.exists(resolved):
                    problems.append(f"{os.path.relpath(page, src)}:{n}: link '{target}' does not resolve")


def main():
    src, build = sys.argv[1], sys.argv[2]
    problems = []
    check_flags(src, build, problems)
    check_variables(src, problems)
    check_links(src, problems)
    for p in problems:
        print(p)
    print(f"docs check: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
