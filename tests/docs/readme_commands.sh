#!/usr/bin/env bash
# The README's example commands run as written and stop by themselves: every
# ```sh block of README.md whose commands start with build/ runs, in order,
# with build/ as the build folder and /tmp/ as a fresh temporary folder,
# each command under a time limit (a training without a step limit would
# hit it). Commands run from the source folder, as the README says.
#   bash readme_commands.sh <source dir> <build dir>
set -euo pipefail
SRC="$1" BIN="$(cd "$2" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
python3 - "$SRC/README.md" "$BIN" "$TMP" >"$TMP/commands.sh" <<'PY'
import re, sys
readme, build, tmp = sys.argv[1:]
blocks = re.findall(r"```sh\n(.*?)```", open(readme, encoding="utf-8").read(), re.S)
count = 0
for block in blocks:
    commands = re.sub(r"\\\n\s*", " ", block).splitlines()
    for command in commands:
        command = command.split("  #", 1)[0].strip()
        if not command.startswith("build/"):
            continue
        # /tmp/ first: the build folder may itself be under /tmp.
        command = command.replace("/tmp/", tmp + "/")
        command = re.sub(r"(^|\s)build/", lambda m: m.group(1) + build + "/", command)
        print(f"echo '+ {command.split()[0].rsplit('/', 1)[-1]}' >&2")
        print(f"timeout 600 {command}")
        count += 1
if count < 5:
    sys.exit(f"README.md: only {count} example commands found (expected the chain of the executables)")
PY
cd "$SRC"
bash -euo pipefail "$TMP/commands.sh" >"$TMP/out.log" 2>&1 || {
  rc=$?; tail -30 "$TMP/out.log"
  [[ $rc == 124 ]] && echo "FAIL a README command ran for 10 minutes without stopping"
  echo "FAIL the README's commands (exit $rc)"; exit 1; }
grep -c '^+ ' "$TMP/out.log" | sed 's/^/README commands run: /'
echo ok
