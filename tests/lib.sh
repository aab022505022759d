# tests/lib.sh: the preamble of the shell tests (tests/*.sh), sourced first thing:
#   . "$(dirname "$0")/lib.sh" NAME
# Sets -u, needs $DSGAP (the dsgap binary; ctest sets it and $DSGAP_SOURCE), makes the scratch
# folder $tmp (/tmp/dsgap-NAME-XXXXXX, removed on exit; a test that traps EXIT itself removes it
# there) and gives:
#   ok DESC, bad DESC            count one result and print it ("ok   DESC", "FAIL DESC")
#   check DESC COMMAND...        ok when COMMAND succeeds; COMMAND still sees the $? from before
#                                check:  dsgap ...; check "exit 0, out written" eval '[ $? -eq 0 ] && [ -s out ]'
#   refused DESC WANT COMMAND... ok when COMMAND fails with one line on stderr, "dsgap: error: "
#                                holding WANT (its stdout and stderr are left in $tmp/stdout, $tmp/stderr)
#   finish                       print "N passed, M failed"; its status is the test's (0: none failed)
set -u
: "${DSGAP:?set DSGAP to the dsgap binary}"
tmp=$(mktemp -d "/tmp/dsgap-${1:?lib.sh NAME: the name of the test}-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { # check DESCRIPTION COMMAND...
  local rc=$? d=$1; shift
  if (exit $rc); "$@"; then ok "$d"; else bad "$d"; fi
}
refused() { # refused DESCRIPTION WANT COMMAND...
  local d=$1 want=$2 rc=0; shift 2
  "$@" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && [ "$(head -c 14 "$tmp/stderr")" = "dsgap: error: " ] &&
     grep -qF -- "$want" "$tmp/stderr"; then
    ok "$d: $(cat "$tmp/stderr")"
  else
    bad "$d (exit $rc, stderr: $(head -c 600 "$tmp/stderr"))"
  fi
}
finish() { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; }
