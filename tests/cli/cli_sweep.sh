#!/usr/bin/env bash
# cli_sweep.sh: a fuzz-style sweep over the commands' options (issue 52 item 5): every option that
# takes a value (from the command's --help), on a small valid command line, given each of the values
# '', -1, 0, nan, 1e999, 99999999999, a repeated item (x,x) and a control character. Whatever the
# answer, it must come within a time bound (SWEEP_TIMEOUT s, default 20), never by a signal, leave no
# temporary (*.tmp.*) behind, and a refusal must be "dsgap: ..." lines with no raw control character.
# Run: ctest -R cli_sweep (needs $DSGAP); SWEEP_TIMEOUT=S to change the bound.
. "$(dirname "$0")/../lib.sh" sweep
limit=${SWEEP_TIMEOUT:-20}
in=$tmp/in
mkdir -p "$in"
t=$in/t.h5
"$DSGAP" synth --out "$t" --grid 1x8x16 --heads 1 --layers 2 --steps 3 --head-dim 32 >/dev/null || { echo "FAIL synth"; exit 1; }
"$DSGAP" replay "$t" --out "$in/r.a1" --policies ladder --density 0.5 --schedule warmup=1 --quiet >/dev/null 2>&1 || { echo "FAIL replay"; exit 1; }
cp -r "$in/r.a1" "$in/r.a2"
ctl=$(printf 'a\001b')
values=("" -1 0 nan 1e999 99999999999 "x,x" "$ctl")
n=0
# sweep CMD ARGS...: every option of CMD's --help that takes a value, each bad value, after ARGS
sweep() {
  local c=$1; shift
  local opts failed=$fail
  opts=$("$DSGAP" "$c" --help | grep -oE -- '--[a-z-]+[ =][A-Z]' | sed 's/[ =][A-Z]$//' | sort -u)
  for opt in $opts; do
    for v in "${values[@]}"; do
      n=$((n + 1))
      local out=$tmp/o$n rc=0 why=""
      (cd "$tmp" && timeout -s KILL "$limit" "$DSGAP" "$c" "$@" "$opt" "$v" >"$tmp/stdout" 2>"$tmp/stderr") || rc=$?
      if [ $rc -ge 128 ]; then
        why="exit $rc ($([ $rc -eq 137 ] && echo "past ${limit} s" || echo "signal $((rc - 128))"))"
      elif [ -n "$(find "$tmp" -name '*.tmp.*' -print -quit)" ]; then
        why="left $(find "$tmp" -name '*.tmp.*' | head -1)"
      elif [ $rc -ne 0 ] && ! head -1 "$tmp/stderr" | grep -q '^dsgap: '; then
        why="exit $rc without a 'dsgap: ' line first"
      elif LC_ALL=C grep -q "$ctl" "$tmp/stderr"; then
        why="a raw control character in the message"
      fi
      if [ -n "$why" ]; then
        bad "$c $* $opt '$v': $why; stderr: $(head -c 300 "$tmp/stderr")"
      fi
      find "$tmp" -maxdepth 1 -name 'o[0-9]*' -exec rm -rf {} +
    done
  done
  [ $fail -eq $failed ] && ok "$c: every option with each bad value (within ${limit} s, no signal, nothing left, messages escaped)"
}
sweep synth --out "$tmp/o_s.h5" --grid 1x8x16
sweep info "$t"
sweep replay "$t" --out "$tmp/o_r" --quiet
sweep decompose "$in/r.a1" --boot 10
sweep plot "$in/r.a1" --boot 10
sweep bench --device cpu --tokens 256 --heads 1 --reps 1 --layer-step none --csv ''
sweep merge "$in" --out "$tmp/o_m"
sweep attnstats --out "$tmp/o_a" --quiet "a=$t"
sweep refreshstats --schedules a1,a2 --boot 10 --out "$tmp/o_f" "$in/r"
sweep compare "$in/r.a1" --out "$tmp/o_c"
sweep drift "$in/r.a1" --out "$tmp/o_d"
sweep callspeed --device cpu --grids 1x8x16 --heads 1 --policies mc-sparse --reps 2 --csv "$tmp/o_cs.csv"
sweep generate --plan-only --arch wan2.1-1.3b --latent 4x16x16 --out "$tmp/o_g"
finish
