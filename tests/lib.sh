# tests/lib.sh: the preamble of the shell tests (tests/*/*.sh), sourced first thing:
#   . "$(dirname "$0")/../lib.sh" NAME     (from a test in a folder of tests/)
# Sets -u, needs $DSGAP (the dsgap binary; ctest sets it and $DSGAP_SOURCE), makes the scratch
# folder $tmp (/tmp/dsgap-NAME-XXXXXX, removed on exit; a test that traps EXIT itself removes it
# there) and gives:
#   ok DESC, bad DESC            count one result and print it ("ok   DESC", "FAIL DESC")
#   check DESC COMMAND...        ok when COMMAND succeeds; COMMAND still sees the $? from before
#                                check (but a $(...) in DESC sets it: take $? first then), as in
#                                dsgap ...; check "exit 0, out written" eval '[ $? -eq 0 ] && [ -s out ]'
#   refused DESC WANT OUT COMMAND...
#                                ok when COMMAND (a program) fails, not killed and within 60 s,
#                                with one line on stderr, "dsgap: error: " holding WANT, and leaves
#                                no OUT ("-": none to look for) and no *.tmp.* in $tmp (its stdout
#                                and stderr stay in $tmp/stdout, $tmp/stderr)
#   bad_ini DESC WANT INI        refused: dsgap run of the experiment file $tmp/bad.ini, made of INI
#                                (printf %b), writes no $tmp/badout
#   finish                       print "N passed, M failed"; its status is the test's (0: none failed)
set -u
: "${DSGAP:?set DSGAP to the dsgap binary}"
tmp=$(mktemp -d "/tmp/dsgap-${1:?lib.sh NAME: the name of the test}-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { # check DESCRIPTION COMMAND...
  local last=$? d=$1; shift # (COMMAND may read the caller's variables: no local named rc)
  if (exit $last); "$@"; then ok "$d"; else bad "$d"; fi
}
refused() { # refused DESCRIPTION WANT OUT COMMAND...
  local d=$1 want=$2 out=$3 rc=0; shift 3
  timeout 60 "$@" >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -lt 128 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && [ "$(head -c 14 "$tmp/stderr")" = "dsgap: error: " ] &&
     grep -qF -- "$want" "$tmp/stderr" && { [ "$out" = - ] || [ ! -e "$out" ]; } && [ -z "$(find "$tmp" -name '*.tmp.*')" ]; then
    ok "$d: $(cat "$tmp/stderr")"
  else
    bad "$d (exit $rc, wrote $(ls -d "$out" 2>/dev/null; find "$tmp" -name '*.tmp.*'), stderr: $(head -c 600 "$tmp/stderr"))"
  fi
}
bad_ini() { # bad_ini DESCRIPTION WANT INI-TEXT
  printf '%b' "$3" > "$tmp/bad.ini"
  rm -rf "$tmp/badout"
  refused "$1" "$2" "$tmp/badout" "$DSGAP" run "$tmp/bad.ini" --out "$tmp/badout"
}
finish() { echo "$pass passed, $fail failed"; [ $fail -eq 0 ]; }
