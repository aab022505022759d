#!/usr/bin/env bash
# readme_commands.sh: README.md's two commands are the whole set-up (issue 51): its first ```sh block
# holds exactly two commands, scripts/demo.sh and the test command; .ci/run runs exactly that test
# command; both scripts are there and executable, and the test command makes the Python test
# environment (tests/py/make_venv.sh) before the ci workflow, so the python tests run, never skip.
# The comparison itself is checked on a copy of .ci/run that runs something else.
#   bash tests/repo/readme_commands.sh [ROOT]     (default: $DSGAP_SOURCE, else the tree above tests/)
set -u
root=${1:-${DSGAP_SOURCE:-$(cd "$(dirname "$0")/../.." && pwd)}}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
# the commands of README's first ```sh block, comments and blank lines left out
readme_cmds() { awk '/^```sh$/ && !done { on = 1; next } on && /^```/ { on = 0; done = 1 } on' "$1" |
  sed 's/[[:space:]]*#.*$//; s/^[[:space:]]*//' | grep -v '^$'; }
# the one command a CI script runs: its lines less comments, set, cd and blank lines
ci_cmd() { sed 's/[[:space:]]*#.*$//; s/^[[:space:]]*//' "$1" | grep -vE '^$|^set |^cd ' ; }
mapfile -t cmds < <(readme_cmds "$root/README.md")
check "README's first sh block: two commands (${cmds[*]:-none})" [ ${#cmds[@]} -eq 2 ]
check "the first is scripts/demo.sh (${cmds[0]:-})" [ "${cmds[0]:-}" = scripts/demo.sh ]
ci=$(ci_cmd "$root/.ci/run")
check ".ci/run runs exactly README's test command ('$ci' = '${cmds[1]:-}')" [ "$ci" = "${cmds[1]:-}" ]
for s in "${cmds[@]}"; do
  check "$s is an executable file" [ -f "$root/${s%% *}" -a -x "$root/${s%% *}" ]
done
t=$root/${cmds[1]%% *}
check "the test command makes the Python test environment, then runs the ci workflow" \
  awk '/tests\/py\/make_venv.sh/ { v = NR } /^cmake --workflow --preset ci$/ { w = NR } END { exit !(v && w && v < w) }' "$t"
# the check finds a .ci/run that disagrees
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
sed 's#^scripts/test.sh$#cmake --workflow --preset ci#' "$root/.ci/run" > "$tmp/run"
check "a .ci/run running something else is found" [ "$(ci_cmd "$tmp/run")" != "${cmds[1]:-}" ]
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
