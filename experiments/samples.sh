#!/usr/bin/env bash
# samples.sh: the bundled model's sample set (issue 19): every class x seed is captured and replayed
# (stage "replay": only dsgap capture and dsgap replay, so it runs on a GPU machine without
# gnuplot or GSL tools), then decomposed over all samples with the two-level bootstrap (samples,
# then (layer, head) clusters) and plotted (stage "analyse", here).
#
#   experiments/samples.sh [--out DIR] [--stage replay|analyse|all] [--device cpu|gpu]
#       [--classes LIST] [--seeds LIST] [--latent FxHxW] [--layers L] [--steps S]
#       [--densities L] [--policies L] [--pack FILE] [--from FILE] [--update-results]
#
#   --out DIR        output folder (default: a fresh build/results/samples-DATE folder of the
#                    checkout, never inside results/); DIR/SAMPLE/{metrics.csv,run.json} per sample,
#                    DIR/samples.txt (LABEL=DIR lines), DIR/tables/ and DIR/figures/ after analyse
#   --stage          replay: capture + replay each sample not done yet (resumable: a sample with
#                    metrics.csv is skipped), then pack; analyse: (unpack --from and) decompose +
#                    plot; all (default): both
#   --classes LIST   comma list of the bundled model's classes (default: all 12)
#   --seeds LIST     noise seeds (default 1,2: 24 samples)
#   --latent, --layers, --steps: the capture (default 16x32x32 = 4096 tokens, 0,3,7, 10 steps; the
#                    demo's settings, CFG 3, shift 3)
#   --densities L    replay densities (default 0.1,0.15,0.25); --policies L (default all)
#   --rho X          the density of the per-sample figure (default 0.15)
#   --scratch DIR    where the traces go (default DIR/traces); --keep-traces keeps them
#   --budget S       start no sample that would end after S seconds (0: no limit); rerun to go on
#   --pack FILE      after the replay stage: a tarball of every sample's metrics.csv + run.json
#   --from FILE      analyse: unpack such a tarball into DIR first
#   --update-results analyse into results/samples/ (the committed results) instead of DIR
#   DSGAP=PATH       the dsgap binary (default build/dsgap)
#   --carry          use the binaries and libraries scripts/device_pack.sh packed into .carry/
#                    (on the GPU machine, as scripts/device_all.sh does)
#
# On the GPU machine (no gnuplot, no GSL tools there): only the replay stage, into a folder that stays
# between calls while the machine is warm, packed into one tarball under $OUT (about 0.1-0.2 MB a sample, 24 samples: a few MB);
# --budget keeps a call under the 10-minute limit, and a second call goes on where it stopped:
#   (here)   cmake --build --preset default && scripts/device_pack.sh
#   (device, carry [".carry"])
#            bash experiments/samples.sh --carry --stage replay --device gpu --budget 520 \
#              --out build/samples --scratch /tmp/dsgap-traces --pack "$OUT/samples.tar.gz"
# here (tables over the samples with two-level intervals, the per-sample figure):
#   experiments/samples.sh --stage analyse --from samples.tar.gz --out build/results/samples
#   experiments/samples.sh --stage analyse --from samples.tar.gz --out build/samples-x --update-results
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DSGAP=${DSGAP:-$ROOT/build/dsgap}
out="" stage=all device=cpu classes="" seeds=1,2 latent=16x32x32 layers=0,3,7 steps=10
densities=0.1,0.15,0.25 policies=all scratch="" keep=0 pack="" from="" update=0 rho=0.15 budget=0 carry=0
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;;
    --stage) stage=$2; shift ;;
    --device) device=$2; shift ;;
    --classes) classes=$2; shift ;;
    --seeds) seeds=$2; shift ;;
    --latent) latent=$2; shift ;;
    --layers) layers=$2; shift ;;
    --steps) steps=$2; shift ;;
    --densities) densities=$2; shift ;;
    --policies) policies=$2; shift ;;
    --rho) rho=$2; shift ;;
    --scratch) scratch=$2; shift ;;
    --keep-traces) keep=1 ;;
    --budget) budget=$2; shift ;;
    --carry) carry=1 ;;
    --pack) pack=$2; shift ;;
    --from) from=$2; shift ;;
    --update-results) update=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "samples.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
case $stage in replay|analyse|all) ;; *) echo "samples.sh: --stage replay|analyse|all" >&2; exit 2 ;; esac
[ -n "$out" ] || out=$ROOT/build/results/samples-$(date -u +%Y%m%dT%H%M%SZ)
case $(realpath -m "$out")/ in "$ROOT"/results/*) [ $update = 1 ] || {
  echo "samples.sh: --out inside results/: only --update-results writes the committed results" >&2; exit 2; } ;; esac
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "$scratch" ] || scratch=$out/traces
model=$ROOT/data/model
[ -n "$classes" ] || classes=vtest,cockatoo,tree,realshort,pan_left,pan_right,pan_up,pan_down,zoom_in,zoom_out,rotate_cw,rotate_ccw
if [ $carry = 1 ]; then # the binaries scripts/device_pack.sh packed into .carry/ (as scripts/device_all.sh)
  [ -f "$ROOT/.carry/lib.tar.xz" ] || { echo "samples.sh: --carry: no $ROOT/.carry (scripts/device_pack.sh)" >&2; exit 2; }
  mkdir -p /tmp/dglib
  tar -C /tmp/dglib -xJf "$ROOT/.carry/lib.tar.xz"
  [ -d "$ROOT/.carry/bin" ] || tar -C "$ROOT/.carry" -xJf "$ROOT/.carry/bin.tar.xz"
  cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH=/tmp/dglib/lib:/usr/local/cuda/lib64:${cublas:+$cublas:}${LD_LIBRARY_PATH:-}
  DSGAP=$ROOT/.carry/bin/dsgap
fi
[ -x "$DSGAP" ] || { echo "samples.sh: $DSGAP not found: build first or set DSGAP" >&2; exit 1; }

now() { date +%s; }

if [ $stage != analyse ]; then
  mkdir -p "$scratch"
  n=$(( $(echo "$classes" | tr ',' '\n' | wc -l) * $(echo "$seeds" | tr ',' '\n' | wc -l) ))
  i=0 done_s=0 t0=$(now) stopped=0
  for seed in ${seeds//,/ }; do
    for cls in ${classes//,/ }; do
      i=$((i + 1))
      label=$cls-s$seed
      if [ -s "$out/$label/metrics.csv" ] && [ -s "$out/$label/run.json" ]; then
        echo "samples.sh: [$i/$n] $label: done already" >&2; continue
      fi
      el=$(( $(now) - t0 ))
      if [ "$budget" -gt 0 ] && [ $done_s -gt 0 ] && [ $(( el + el / done_s )) -gt "$budget" ]; then
        echo "samples.sh: [$i/$n] $label: not started: the next sample would end after --budget ${budget}s (run again to go on)" >&2
        stopped=1; break 2
      fi
      if [ $done_s -gt 0 ]; then
        echo "samples.sh: [$i/$n] $label: capture + replay; ${el}s so far, about $(( el * (n - i + 1) / done_s ))s left" >&2
      else
        echo "samples.sh: [$i/$n] $label: capture + replay ($latent latent, layers $layers, $steps steps, $device; on 2 CPU cores a 4096-token capture takes about a minute and the replay of every policy several more)" >&2
      fi
      t=$scratch/$label.h5
      "$DSGAP" capture --model "$model" --text "$model/conds.safetensors:$cls" \
        --negative "$model/conds.safetensors:null" --latent "$latent" --seed "$seed" --steps "$steps" \
        --shift 3 --guidance 3 --layers "$layers" --device "$device" --sample "$cls/seed$seed" \
        --out "$t" --quiet >&2
      rm -rf "$out/$label.part"
      "$DSGAP" replay "$t" --policies "$policies" --density "$densities" --schedule warmup=3 \
        --device "$device" --out "$out/$label.part" --quiet >&2
      rm -rf "$out/$label"
      mv "$out/$label.part" "$out/$label"
      [ $keep = 1 ] || rm -f "$t"
      done_s=$((done_s + 1))
    done
  done
  # the samples done so far (this call's and earlier ones'), in the set's order
  : > "$out/samples.txt.tmp"
  for seed in ${seeds//,/ }; do
    for cls in ${classes//,/ }; do
      [ -s "$out/$cls-s$seed/metrics.csv" ] && echo "$cls-s$seed=$cls-s$seed" >> "$out/samples.txt.tmp"
    done
  done
  mv "$out/samples.txt.tmp" "$out/samples.txt"
  echo "samples.sh: $(wc -l < "$out/samples.txt") of $n samples done in $out ($done_s in this call, $(( $(now) - t0 ))s)$([ $stopped = 1 ] && echo '; run again for the rest')" >&2
  if [ -n "$pack" ]; then
    (cd "$out" && tar czf "$pack.tmp" samples.txt $(sed 's/.*=//; s|$|/metrics.csv|' samples.txt) \
      $(sed 's/.*=//; s|$|/run.json|' samples.txt))
    mv "$pack.tmp" "$pack"
    echo "samples.sh: packed into $pack ($(du -h "$pack" | cut -f1))" >&2
  fi
fi

if [ $stage != replay ]; then
  if [ -n "$from" ]; then
    tar xzf "$from" -C "$out"
    echo "samples.sh: unpacked $from into $out" >&2
  fi
  [ -s "$out/samples.txt" ] || { echo "samples.sh: $out/samples.txt missing: run the replay stage or give --from" >&2; exit 1; }
  dest=$out
  [ $update = 1 ] && dest=$ROOT/results/samples
  mkdir -p "$dest"
  args=()
  while IFS='=' read -r label dir; do args+=("$label=$out/$dir"); done < "$out/samples.txt"
  echo "samples.sh: decompose over ${#args[@]} samples (two-level bootstrap) -> $dest" >&2
  "$DSGAP" decompose "${args[@]}" --out "$dest"
  "$DSGAP" plot "$dest" ${rho:+--density "$rho"} # figures/samples-rhoX (dsgap plot of a sample set)
  echo "samples.sh: tables and figures in $dest" >&2
fi
