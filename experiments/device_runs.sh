#!/usr/bin/env bash
# device_runs.sh: run experiment files on the GPU machine under one time budget and pack what they
# made for the device tool (at most 8 files of 16 MiB come back), resuming a run an earlier call cut.
#   experiments/device_runs.sh [--budget S] [--pack FILE] [--resume DIR] NAME[:WORKERS[:UNTIL]]...
# Each NAME is experiments/NAME.ini, run in turn as `dsgap run --out WORK/NAME --workers WORKERS`
# (default 8) until UNTIL seconds after the start (default the budget S, default 545, less 25 s to
# pack). A run stopped at its deadline keeps its finished cells: the pack holds them with their
# latents, and --resume DIR (a folder holding NAME/ from an earlier pack) copies them back so that
# dsgap run goes on from them. Finished runs are packed without latents. The pack is FILE.NN, 15 MB
# parts of one tar.gz (default $OUT/runs.tgz); WORK is DSGAP_WORK (default /tmp/dsgap-device-runs).
# DSGAP (default .carry/bin/dsgap) is the binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
budget=545 pack="" resume="" specs=()
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --pack) pack=${2:?--pack needs a file}; shift ;;
    --resume) resume=${2:?--resume needs a folder}; shift ;;
    -*) echo "device_runs.sh: unknown option '$1' (see the header)" >&2; exit 2 ;;
    *) specs+=("$1") ;;
  esac
  shift
done
[ ${#specs[@]} -gt 0 ] || { echo "device_runs.sh: no experiment named (see the header)" >&2; exit 2; }
for s in "${specs[@]}"; do
  [ -f "$ROOT/experiments/${s%%:*}.ini" ] || { echo "device_runs.sh: no experiments/${s%%:*}.ini" >&2; exit 2; }
done
DSGAP=${DSGAP:-$ROOT/.carry/bin/dsgap}
pack=${pack:-${OUT:?set OUT or --pack}/runs.tgz}
work=${DSGAP_WORK:-/tmp/dsgap-device-runs}
mkdir -p "$work"
[ -z "$resume" ] || cp -r "$resume"/. "$work"/
t0=$SECONDS names=()
for s in "${specs[@]}"; do
  IFS=: read -r name workers until <<<"$s"
  names+=("$name")
  left=$(( ${until:-$((budget - 25))} - (SECONDS - t0) ))
  if [ $left -le 20 ]; then echo "device_runs: $name skipped: no time left"; continue; fi
  echo "device_runs: [$((SECONDS - t0))s] $name ($left s left)"
  timeout -s INT $left "$DSGAP" run "$ROOT/experiments/$name.ini" --out "$work/$name" --workers "${workers:-8}" \
    >> "$work/$name.log" 2>&1 || echo "device_runs: $name stopped (status $?): $(grep 'cells done' "$work/$name.log" | tail -1)"
done
rm -f "$work.tar"
(cd "$work" && for e in "${names[@]}"; do [ -e "$e.log" ] || continue
   if [ -s "$e/summary.csv" ]; then tar rf "$work.tar" --exclude='*.lock' --exclude=latents.h5 --exclude=steps.h5 "$e" "$e.log"
   elif [ -d "$e" ]; then tar rf "$work.tar" --exclude='*.lock' --exclude=steps.h5 "$e" "$e.log"
   else tar rf "$work.tar" "$e.log"; fi; done)
gzip -1f "$work.tar" && split -b 15m -d "$work.tar.gz" "$pack."
echo "device_runs: [$((SECONDS - t0))s] packed into $pack.NN ($(du -h "$work.tar.gz" | cut -f1))"
