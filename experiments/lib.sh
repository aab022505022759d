# lib.sh: shared steps of the experiment scripts (experiments/NAME.sh source this).
#   exp_init NAME "$@"     ROOT, DSGAP (default ROOT/build/dsgap), WORK (scratch output, default
#                          ROOT/build/experiments/NAME: traces and cells stay out of results/),
#                          RESULTS (the output folder, see below), T0 (start time), EXP_ARGS (the
#                          script's other arguments, for dsgap run)
#   Every script takes  --out DIR  (default: a fresh folder ROOT/build/results/NAME-DATE, never the
#   checkout's results/) and  --update-results  (write the committed results/NAME/ instead), and
#   --cells DIR: the dsgap run folder of this experiment made elsewhere (e.g. on the GPU machine:
#   scripts/device_all.sh's closed_loop step) as WORK, neither run nor captured again here; the
#   other arguments go to dsgap run (e.g. --workers 2, --gpus all). Progress goes to stderr.
#   --samples LIST: EXP_SAMPLES, a comma list of the experiment's samples to run in place of its
#   whole sample set (refresh.sh, attention.sh; the others refuse it)
#   exp_capture OUT.h5 MODEL STEPS [CLASS SEED]   a capture as the experiments make it (class
#                          cockatoo, seed 1 unless given, recorded as the trace's sample; latent
#                          16x32x32 = 4096 tokens, layers 0/3/7, shift 3, CFG 3 with the null class;
#                          the demo's and samples.sh's) on DSGAP_DEVICE (default cpu)
#   exp_sample_traces STEPS MODEL DIR LABEL...   capture each sample LABEL = CLASS-sSEED of the bundled
#                          model's sample set into DIR/LABEL.h5 unless it is there, with progress and an
#                          estimate of the time left on stderr
#   exp_bundled_trace S    the bundled model's S-step capture that experiments list as
#                          `bundled = ../build/experiments/bundled-sS.h5` (once)
#   exp_run [ARGS...]      dsgap run experiments/NAME.ini --out WORK ARGS (e.g. --workers 2, --gpus all)
#   exp_analyse RUN        dsgap decompose and dsgap plot on WORK/RUN
#   exp_collect RUN DEST   copy the small outputs of WORK/RUN to DEST (metrics.csv only under 2 MB)
#   exp_readme TEXT JSON   RESULTS/README.md: TEXT, then the command, run time, device (from the
#                          run.json JSON), commit and the files; copies WORK/summary.{csv,md}
#   EXP_AWK_SIG3           awk source of sig3(x): a table's number to 3 significant figures in
#                          fixed notation, never e-notation, as dg_sig3 (src/analysis/decompose.h)
#                          writes it: 0.0000985, 0.125, 12.3, 1235; nan, inf and -inf as words
#                          (awk "$EXP_AWK_SIG3"' { print sig3($1) }')
#   exp_sig3 X             X to 3 significant figures (EXP_AWK_SIG3's sig3)
# EXP_INI=FILE runs another experiment file of the same form (e.g. a tiny one: tests/experiments/exp_out.sh);
# DSGAP_WORK=DIR moves the scratch folder; KEEP_WORK=0 removes it at the end; DSGAP_DEVICE=gpu
# captures the bundled trace on the GPU.
# shellcheck shell=bash
set -euo pipefail

# (the exponent after rounding to 3 figures, from %e, so that 0.09996 gives 0.100 as dg_sig3 does)
EXP_AWK_SIG3='function sig3(x,   s, d) {
  if (x ~ /^[-+]?(nan|NaN)/) return "nan"
  if (x ~ /^\+?(inf|Inf)/) return "inf"
  if (x ~ /^-(inf|Inf)/) return "-inf"
  x += 0; if (x == 0) return "0"
  s = sprintf("%.2e", x < 0 ? -x : x); d = 2 - (substr(s, index(s, "e") + 1) + 0)
  if (d < 0) d = 0; if (d > 15) d = 15
  return sprintf("%." d "f", x) }'
exp_sig3() { awk -v x="$1" "$EXP_AWK_SIG3"' BEGIN { print sig3(x) }'; }

exp_init() {
  NAME=$1
  shift
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  DSGAP=${DSGAP:-$ROOT/build/dsgap}
  local out="" update=0
  EXP_ARGS=() EXP_CELLS= EXP_SAMPLES=
  while [ $# -gt 0 ]; do
    case $1 in
      --out) [ $# -ge 2 ] || { echo "$NAME.sh: --out needs a folder" >&2; exit 2; }; out=$2; shift ;;
      --out=*) out=${1#--out=} ;;
      --update-results) update=1 ;;
      --samples) [ $# -ge 2 ] || { echo "$NAME.sh: --samples needs a list" >&2; exit 2; }; EXP_SAMPLES=$2; shift ;;
      --samples=*) EXP_SAMPLES=${1#--samples=} ;;
      --cells) [ $# -ge 2 ] && [ -f "$2/experiment.json" ] || { echo "$NAME.sh: --cells needs a dsgap run folder (with experiment.json)" >&2; exit 2; }
        EXP_CELLS=$(cd "$2" && pwd); shift ;;
      -h|--help) echo "usage: experiments/$NAME.sh [--out DIR | --update-results] [--cells DIR] [--samples LIST] [dsgap run options]" >&2; exit 0 ;;
      *) EXP_ARGS+=("$1") ;;
    esac
    shift
  done
  case $NAME in refresh|attention) ;; *) [ -z "$EXP_SAMPLES" ] ||
    { echo "$NAME.sh: --samples: this experiment has no sample set to reduce" >&2; exit 2; } ;; esac
  [ -x "$DSGAP" ] || { echo "$DSGAP not found: build first (cmake --preset default && cmake --build --preset default) or set DSGAP" >&2; exit 1; }
  WORK=${EXP_CELLS:-${DSGAP_WORK:-$ROOT/build/experiments}/$NAME}
  if [ $update = 1 ]; then
    [ -z "$out" ] || { echo "$NAME.sh: --out and --update-results exclude each other" >&2; exit 2; }
    RESULTS=$ROOT/results/$NAME
  else
    RESULTS=${out:-$ROOT/build/results/$NAME-$(date -u +%Y%m%dT%H%M%SZ)}
    case $(realpath -m "$RESULTS")/ in "$ROOT"/results/*)
      echo "$NAME.sh: --out $RESULTS is inside results/: only --update-results writes the committed results" >&2; exit 2 ;;
    esac
  fi
  INI=${EXP_INI:-$ROOT/experiments/$NAME.ini}
  T0=$(date +%s)
  mkdir -p "$RESULTS"
  RESULTS=$(cd "$RESULTS" && pwd)
  echo "$NAME: output in $RESULTS (scratch: $WORK)" >&2
}

exp_say() { echo "$NAME: [$(( $(date +%s) - T0 ))s] $*" >&2; }

exp_capture() { # OUT.h5 MODEL STEPS [CLASS SEED]
  local cls=${4:-cockatoo} seed=${5:-1}
  "$DSGAP" capture --model "$2" --text "$2/conds.safetensors:$cls" --negative "$2/conds.safetensors:null" \
    --latent 16x32x32 --seed "$seed" --steps "$3" --shift 3 --guidance 3 --layers 0,3,7 \
    --device "${DSGAP_DEVICE:-cpu}" --sample "$cls/seed$seed" --out "$1" --quiet
}

exp_sample_traces() { # STEPS MODEL DIR LABEL... (LABEL: CLASS-sSEED)
  local steps=$1 model=$2 dir=$3 n i=0 done_n=0 t0 label
  shift 3
  n=$#
  mkdir -p "$dir"
  t0=$(date +%s)
  for label in "$@"; do
    i=$((i + 1))
    [ -f "$dir/$label.h5" ] && continue
    case $label in *-s[0-9]*) ;; *) echo "$NAME: sample '$label' is not CLASS-sSEED" >&2; exit 2 ;; esac
    if [ $done_n -gt 0 ]; then
      exp_say "capture $i/$n: $label ($model, $steps steps); about $(( ( $(date +%s) - t0 ) * (n - i + 1) / done_n ))s left for the captures"
    else
      exp_say "capture $i/$n: $label ($model, $steps steps, ${DSGAP_DEVICE:-cpu}; 4096 tokens: 1-7 min each on 2 CPU cores, by their load; seconds on an H200)"
    fi
    exp_capture "$dir/$label.h5.part.h5" "$model" "$steps" "${label%-s*}" "${label##*-s}"
    mv "$dir/$label.h5.part.h5" "$dir/$label.h5"
    done_n=$((done_n + 1))
  done
}

exp_bundled_trace() { # STEPS -> build/experiments/bundled-sSTEPS.h5
  local t=$ROOT/build/experiments/bundled-s$1.h5
  [ -z "$EXP_CELLS" ] || return 0 # the cells were made elsewhere
  mkdir -p "$(dirname "$t")"
  [ -f "$t" ] && return 0
  exp_say "capturing the bundled model's trace ($t: class cockatoo, seed 1, 4096 tokens, $1 steps, ${DSGAP_DEVICE:-cpu}); about 1-2 min on 2 idle CPU cores, seconds on an H200"
  exp_capture "$t" "$ROOT/data/model" "$1"
}

exp_run() {
  [ -z "$EXP_CELLS" ] || { exp_say "the cells of $WORK (made elsewhere; not run here)"; return 0; }
  exp_say "dsgap run $INI ($("$DSGAP" run "$INI" --out "$WORK" --list 2>/dev/null | wc -l) cells listed; finished cells are kept in $WORK and not rerun)"
  "$DSGAP" run "$INI" --out "$WORK" ${EXP_ARGS[@]+"${EXP_ARGS[@]}"} "$@"
}

exp_analyse() {
  exp_say "decompose + plot $1"
  "$DSGAP" decompose "$WORK/$1"
  "$DSGAP" plot "$WORK/$1"
}

exp_collect() { # exp_collect RUN DEST
  local src=$WORK/$1 dest=$2
  exp_say "collecting $1 into $dest"
  mkdir -p "$dest/figures"
  rm -f "$dest"/figures/*.{dat,gp,png,pdf} 2>/dev/null || true
  for f in run.json decomposition.csv decomposition.md decomposition.tex ablation.csv ablation.md ablation.tex; do
    [ -e "$src/$f" ] && cp "$src/$f" "$dest/"
  done
  if [ "$(stat -c %s "$src/metrics.csv")" -lt 2000000 ]; then
    cp "$src/metrics.csv" "$dest/"
  else
    rm -f "$dest/metrics.csv"
    echo "metrics.csv is $(du -h "$src/metrics.csv" | cut -f1): not kept; experiments/$NAME.sh regenerates it" > "$dest/metrics.csv.README"
  fi
  local f
  for f in "$src"/figures/*.png; do # a figure: its .png .pdf .gp .dat (a skipped figure has only a .dat)
    [ -e "$f" ] || continue
    f=${f%.png}
    cp "$f".png "$f".pdf "$f".gp "$dest/figures/"
    [ -e "$f".dat ] && cp "$f".dat "$dest/figures/"
  done
  cp "$src"/figures/style.gp "$dest/figures/" 2>/dev/null || true
}

exp_readme() { # exp_readme TEXT RUN.JSON (EXP_REGEN: the "Regenerate:" sentence, if not the default)
  # the cells' provenance (where, when and by which commit they ran) from RUN.JSON; the tables' from
  # the dsgap that made them here
  local secs=$(( $(date +%s) - T0 )) device date cells_commit commit cells_s=0 j
  field() { sed -n 's/^[[:space:]]*"'"$1"'":[[:space:]]*"\(.*\)",*$/\1/p' "$2" | head -1; }
  device=$(field device "$2") date=$(field date "$2") cells_commit=$(field git_commit "$2")
  for j in "$WORK"/*/run.json; do # time summed over the cells of every run (timing: replay's wall_s,
    # the closed loop's transformer_s)
    cells_s=$(awk -v s="$cells_s" '/"wall_s"|"transformer_s"/ { gsub(/[^0-9.e+-]/, "", $2); s += $2 } END { printf "%.0f", s }' "$j")
  done
  commit=$("$DSGAP" --version | sed 's/.*commit \([0-9a-f+wip]*\).*/\1/')
  cp "$WORK/summary.csv" "$WORK/summary.md" "$RESULTS/"
  {
    printf '%s\n\n' "$1"
    if [ -n "${EXP_REGEN:-}" ]; then printf 'Regenerate: %s\n\n' "$EXP_REGEN"; else
    printf 'Regenerate: `experiments/%s.sh --update-results` (`dsgap run experiments/%s.ini`, then `dsgap decompose`, `dsgap plot` and the script'"'"'s own tables and figures; traces and cells go to the scratch folder `build/experiments/%s/`).\n\n' "$NAME" "$NAME" "$NAME"; fi
    printf 'Last run: %s on %s, dsgap commit %s: %s s in the cells (replay or transformer time, summed). Tables and figures: %s, dsgap commit %s, %d s wall (cells not already done included).\n\n' \
      "${date:-?}" "$device" "${cells_commit:-?}" "$cells_s" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$commit" "$secs"
    printf 'Files:\n\n'
    (cd "$RESULTS" && find . -type f ! -name README.md | sort | sed 's|^\./|- |')
  } > "$RESULTS/README.md"
  echo "$NAME: results in $RESULTS ($secs s)" >&2
}

# gnuplot with the shared style, from inside a figures folder: exp_gnuplot DIR NAME.gp
exp_gnuplot() {
  [ -e "$1/style.gp" ] || cp "$ROOT/analysis/style.gp" "$1/"
  (cd "$1" && gnuplot "$2")
}
