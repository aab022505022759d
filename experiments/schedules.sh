#!/usr/bin/env bash
# schedules.sh: issue 50's closed loop across refresh schedules, compared at matched cost ->
# results/schedules/: comparison.{md,tex,csv} (every method x schedule x density: PSNR, SSIM, rel-L2
# of the final latents against dense with 95% intervals over the 24 samples; computed density over
# every call and past the warm-up; speedup measured or projected), matched.{md,tex,csv} (each
# method's best schedule at speedup >= 1.5/1.8/2x and at computed density <= 0.3 ... 0.5, the paired
# difference of the best method over the next), figures/pareto.{png,pdf}, README.md.
#
#   experiments/schedules.sh --stage gpu [--budget S] [--pack FILE]   (on the GPU machine)
#       the fidelity experiments schedules_cached.ini, schedules_peers.ini, schedules_cached_b.ini,
#       schedules_axes.ini, schedules_skipsoftmax.ini (50 UniPC steps, the bundled model's 24
#       samples; FID_WORKERS processes, default 8) until S x 0.6 s (default S 545), then the speed experiments
#       schedules_speed_{cached,step,dl0,peers}.ini (one process) on the Wan2.1-1.3B random-weight model
#       (scripts/gpu_dit.py make, first), through experiments/device_runs.sh: it packs the merged
#       runs (their cells' latents too for a run cut short) into FILE (default $OUT/schedules.tgz,
#       split into 15 MB parts FILE.NN for the device tool)
#   experiments/schedules.sh --stage analyse --from FILE|DIR [--out DIR | --update-results]
#       here: unpack (FILE or its parts FILE.NN; or a folder of the experiments' merged run folders,
#       as results/schedules/runs/ keeps them), merge a run cut short from its finished cells
#       (dsgap merge --partial: the cells it lacks are named in its run.json),
#       dsgap compare of every fidelity run with the speed runs -> DIR (default build/results/schedules)
# DSGAP (default build/dsgap, or .carry/bin/dsgap on the GPU machine) is the binary.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
stage="" from="" out="" budget=545 pack=""
while [ $# -gt 0 ]; do
  case $1 in
    --stage) stage=${2:?--stage needs gpu or analyse}; shift ;;
    --from) from=${2:?--from needs a file}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --update-results) out=$ROOT/results/schedules ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --pack) pack=${2:?--pack needs a file}; shift ;;
    *) echo "schedules.sh: unknown argument '$1' (see the header)" >&2; exit 2 ;;
  esac
  shift
done
FID="schedules_cached schedules_peers schedules_cached_b schedules_axes schedules_skipsoftmax"
SPEED="schedules_speed_cached schedules_speed_step schedules_speed_dl0 schedules_speed_peers"
case $stage in
gpu)
  [ -s "$ROOT/build/w13b/model/config.json" ] || OMP_NUM_THREADS=16 timeout 120 python3 "$ROOT/scripts/gpu_dit.py" make \
    1.3b "$ROOT/build/w13b" --seed 2 || echo "schedules: the Wan2.1-1.3B model was not made (status $?)"
  specs=()
  for e in $FID; do specs+=("$e:${FID_WORKERS:-8}:$((budget * 6 / 10))"); done
  for e in $SPEED; do specs+=("$e:1"); done
  DSGAP_WORK=${DSGAP_WORK:-/tmp/schedules} OMP_NUM_THREADS=16 \
    bash "$ROOT/experiments/device_runs.sh" --budget "$budget" --pack "${pack:-${OUT:?set OUT or --pack}/schedules.tgz}" "${specs[@]}" ;;
analyse)
  DSGAP=${DSGAP:-$ROOT/build/dsgap}
  [ -n "$from" ] || { echo "schedules.sh: --stage analyse needs --from FILE" >&2; exit 2; }
  out=${out:-$ROOT/build/results/schedules}
  u=$ROOT/build/experiments/schedules/unpacked
  rm -rf "$u" && mkdir -p "$u"
  if [ -d "$from" ]; then cp -r "$from"/. "$u"; elif [ -s "$from" ]; then tar xzf "$from" -C "$u"
  else cat "$from".[0-9]* | tar xz -C "$u"; fi
  for e in $FID $SPEED; do # a run cut short: merge the cells it finished into E.merged
    if [ -d "$u/$e/cells" ] && [ ! -s "$u/$e/summary.csv" ]; then
      "$DSGAP" merge "$u/$e" --out "$u/$e.merged" --partial --quiet || echo "schedules.sh: $e: no merge of its finished cells" >&2
    fi
  done
  fid=() spd=()
  for e in $FID; do for r in "$u/$e"/*/closed_loop.csv "$u/$e.merged"/*/closed_loop.csv; do [ -e "$r" ] && fid+=("${r%/closed_loop.csv}"); done; done
  for e in $SPEED; do for r in "$u/$e"/*/closed_loop.csv "$u/$e.merged"/*/closed_loop.csv; do [ -e "$r" ] && spd+=(--speed "${r%/closed_loop.csv}"); done; done
  [ ${#fid[@]} -gt 0 ] || { echo "schedules.sh: no merged fidelity run in $from" >&2; exit 1; }
  mkdir -p "$out"
  "$DSGAP" compare "${fid[@]}" ${spd[@]+"${spd[@]}"} --out "$out" --title "bundled model, 24 samples, 50 steps"
  for e in $FID $SPEED; do [ -s "$u/$e.log" ] && mkdir -p "$out/logs" && grep -v "cells done" "$u/$e.log" | tail -5 > "$out/logs/$e.log"; done
  echo "schedules: tables in $out" ;;
*) echo "schedules.sh: --stage gpu or --stage analyse (see the header)" >&2; exit 2 ;;
esac
