#!/usr/bin/env bash
# cli_options.sh: every subcommand of `dsgap help` answers a command line getopt_long rejects the
# same way (dg_opt_bad): an unknown long option, an unknown short option, a value given to --help,
# and a value missing after its first option that takes one (from its --help) give exit 2, nothing on
# stdout and one line on stderr, "dsgap: error: CMD: ...", naming the option.
# Run: ctest -R cli_options (needs $DSGAP, the dsgap binary).
. "$(dirname "$0")/../lib.sh" options
cmds=$("$DSGAP" help | sed -n '/^commands:/,$p' | awk 'NR > 1 { print $1 }')
check "dsgap help lists the commands" test "$(echo "$cmds" | wc -l)" -ge 15
rejected() { # rejected CMD WANT ARGS...: exit 2, stdout empty, stderr the one line WANT
  local c=$1 want=$2 rc=0; shift 2
  (cd "$tmp" && "$DSGAP" "$c" "$@") >"$tmp/stdout" 2>"$tmp/stderr" || rc=$?
  if [ $rc -eq 2 ] && [ ! -s "$tmp/stdout" ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] &&
     [ "$(cat "$tmp/stderr")" = "dsgap: error: $c: $want (dsgap $c --help)" ]; then
    ok "$c $*: $(cat "$tmp/stderr")"
  else
    bad "$c $* (exit $rc, stdout $(wc -c <"$tmp/stdout") bytes, stderr: $(head -c 400 "$tmp/stderr"))"
  fi
}
for c in $cmds; do
  rejected "$c" "unknown option '--no-such-option'" --no-such-option
  rejected "$c" "unknown option '-Y'" -Y
  rejected "$c" "unknown option '-Y'" x -Y --no-such-option
  rejected "$c" "option '--help' takes no value" --help=1
  opt=$("$DSGAP" "$c" --help | grep -oE -- '--[a-z-]+ [A-Z]' | head -1 | cut -d' ' -f1)
  [ -z "$opt" ] || rejected "$c" "option '$opt' needs a value" "$opt"
done
# sizes whose product would wrap int arithmetic (a plan printed "-1071263681 tokens" once)
(cd "$tmp" && "$DSGAP" generate --out o --plan-only --arch wan2.1-14b --latent 99999x99999x99999) >"$tmp/stdout" 2>"$tmp/stderr"
check "generate --latent 99999x99999x99999: refused (exit 2), one line" \
  eval '[ $? -eq 2 ] && [ ! -s "$tmp/stdout" ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "at most" "$tmp/stderr"'
(cd "$tmp" && "$DSGAP" callspeed --device cpu --grids 65536x65536x1 --csv c.csv) >"$tmp/stdout" 2>"$tmp/stderr"
check "callspeed --grids 65536x65536x1: refused (exit 2), one line, no CSV" \
  eval '[ $? -eq 2 ] && [ ! -e "$tmp/c.csv" ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "at most 16777216 tokens" "$tmp/stderr"'
(cd "$tmp" && "$DSGAP" generate --out o --plan-only --arch wan2.1-1.3b --latent 4x16x16 --schedule anchors=-1) \
  >"$tmp/stdout" 2>"$tmp/stderr"
check "generate --schedule anchors=-1: refused (exit 2), one line (replay refused it, generate ran)" \
  eval '[ $? -eq 2 ] && [ "$(wc -l <"$tmp/stderr")" -eq 1 ] && grep -q "bad anchors" "$tmp/stderr"'
echo '{"not": "a csv"}' > "$tmp/j.json"
(cd "$tmp" && "$DSGAP" callspeed --device cpu --grids 1x4x8 --heads 2 --head-dim 32 --policies mc-sparse --reps 1 \
  --csv j.json) >"$tmp/stdout" 2>"$tmp/stderr"
check "callspeed --csv onto a file that is not its CSV: refused (exit 1), the file unchanged" \
  eval '[ $? -eq 1 ] && [ "$(cat "$tmp/j.json")" = "{\"not\": \"a csv\"}" ] && grep -q "not a callspeed CSV" "$tmp/stderr"'
rm -f "$tmp/j.json"
check "nothing written in the working folder" test -z "$(ls -A "$tmp" | grep -v '^std\(out\|err\)$')"
finish
