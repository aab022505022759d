#!/usr/bin/env bash
# comparison.sh: the paper's main comparison (issue 23) -> results/comparison/: comparison.{md,tex,csv}
# (every method x density: PSNR, SSIM and rel-L2 of the final latents against dense, means over the
# samples with 95% bootstrap intervals over them; the computed density, all calls and past the
# warm-up; the measured speedup of the denoising loop; "cannot reach ρ" for a peer whose computed
# density misses its target by more than 0.02, run.json's unreached_densities), figures/pareto.{png,pdf}
# (speedup against PSNR, one marker per method, the frontier drawn, computed densities labelled),
# fidelity/RUN/{closed_loop.csv,run.json} and speed/RUN/{...} (every sample), summary.{csv,md};
# figures/fidelity_density.{png,pdf} (PSNR against the computed density past the warm-up, every row
# at the density it computed, one more than the tolerance off its target hollow with ‡ and named with
# its target under the axis, the frontier drawn: no speed in it). A method that is not a peer but
# misses its target by more than 0.02 too (top-k over whole key blocks rounds ρ up) is marked ‡ in
# comparison.{md,tex}; every row off its target is listed at its computed density below the table. The speed (run.json's speed_status):
#   measured      a finished speed run: speedup of its denoising loop, figures/pareto.{png,pdf}
#   own           COMPARISON_SPEED_INI=none: the fidelity runs' own times (dsgap compare's fallback)
#   not_measured  a speed run was asked for but none finished (--stage analyse of a pack whose speed
#                 run was cut short): the speedup columns say "not measured" (comparison.csv: nan),
#                 no Pareto figure; the fidelity runs' own times are not used as speed (a small model
#                 on a GPU is launch-bound: they say nothing about the speed run's size)
#
#   experiments/comparison.sh [--out DIR | --update-results] [--stage all|gpu|speed|analyse] [--from FILE ...]
#                             [--logs FILE.tgz ...] [--pack FILE] [--budget S] [dsgap run options]
#
#   all (default)  fidelity (experiments/comparison.ini, or EXP_INI=FILE) and, unless
#                  COMPARISON_SPEED_INI=none, speed (experiments/comparison_speed.ini) with dsgap run
#                  here, then the tables. COMPARISON_SPEED_INI=none: the fidelity run's own times are the
#                  speed (say so in the figure). The CPU path: EXP_INI=a small experiment of the
#                  same form (tests/cli/cli_comparison.sh runs one end to end); the full experiment is 744
#                  cells of several minutes each on 2 CPU cores (one measured: 444 s): a GPU job.
#   gpu            on the GPU machine (scripts/device_all.sh's `comparison` step, which sets DSGAP and
#                  the libraries): the fidelity run (--device gpu), the Wan2.1-1.3B random-weight model
#                  (scripts/gpu_dit.py make 1.3b build/w13b, once), the speed run, each under what is
#                  left of --budget S seconds (default 540; a run cut short keeps its finished cells in
#                  the scratch folder and goes on when called again on the same warm machine); the
#                  finished runs' small outputs packed into --pack FILE (default DIR/comparison.tar.gz)
#   speed          the gpu stage without its fidelity run (a device call of its own, when the fidelity
#                  run is packed already): a pack of the speed run alone
#   analyse        here: unpack --from FILE (the gpu stage's pack; again for more: a fidelity pack and
#                  a speed pack) and make the tables and figure;
#                  --logs FILE.tgz (again for more): the device calls' logs (scripts/device_all.sh's
#                  summary.txt and comparison.log) into logs/STAMP/ (progress bars cut to their last
#                  state); README then names the binaries' commit from summary.txt (the dsgap stamp
#                  in run.json is the configure-time commit) and, for an unfinished speed run, the
#                  cells its log shows finished (cell wall times, not used) and where it stopped
# Scratch: build/experiments/comparison/{fidelity,speed} (DSGAP_WORK moves it; analyse unpacks into
# .../unpacked). COMPARISON_DEVICE=cpu runs the gpu stage's steps on the CPU (its test).
source "$(dirname "$0")/lib.sh"
stage=all pack="" budget=540
args=() logs=() from=()
while [ $# -gt 0 ]; do
  case $1 in
    --stage) stage=${2:?--stage needs all, gpu, speed or analyse}; shift ;;
    --from) [ -s "${2:?--from needs a file}" ] || { echo "comparison.sh: --from $2: no such file" >&2; exit 2; }
      from+=("$(realpath "$2")"); shift ;;
    --pack) pack=${2:?--pack needs a file}; shift ;;
    --logs) [ -s "${2:?--logs needs a file}" ] || { echo "comparison.sh: --logs $2: no such file" >&2; exit 2; }
      logs+=("$(realpath "$2")"); shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --cells|--cells=*) echo "comparison.sh: two runs (fidelity, speed): bring the GPU's with --stage analyse --from FILE, not --cells" >&2; exit 2 ;;
    *) args+=("$1") ;;
  esac
  shift
done
case $stage in all|gpu|speed|analyse) ;; *) echo "comparison.sh: --stage all|gpu|speed|analyse, not '$stage'" >&2; exit 2 ;; esac
[ "$stage" != analyse ] || [ ${#from[@]} -gt 0 ] || { echo "comparison.sh: --stage analyse needs --from FILE (the gpu stage's pack)" >&2; exit 2; }
exp_init comparison ${args[@]+"${args[@]}"}
fid_ini=$INI # EXP_INI=FILE (lib.sh) for another fidelity experiment
speed_ini=${COMPARISON_SPEED_INI:-$ROOT/experiments/comparison_speed.ini}

# one experiment into WORK/KIND, at most S seconds when S > 0 (a run cut short keeps its cells); the
# script's dsgap run options (e.g. --gpus all) go to the fidelity run only: the speed run's cells run
# one at a time, alone on the machine
run_exp() { # KIND INI S [dsgap run options]
  local kind=$1 ini=$2 secs=$3 extra=()
  shift 3
  [ "$kind" = fidelity ] && extra=(${EXP_ARGS[@]+"${EXP_ARGS[@]}"})
  local omp=${OMP_NUM_THREADS:-}
  case " ${extra[*]-} " in *" --gpus "*) # the host's cores shared among the workers, one per GPU
    local ngpu
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    omp=$(( $(nproc) / (ngpu > 0 ? ngpu : 1) )) ;; esac
  exp_say "$kind: dsgap run $ini ($("$DSGAP" run "$ini" --out "$WORK/$kind" --list 2>/dev/null | wc -l) cells; finished cells are kept in $WORK/$kind)"
  local t=()
  [ "$secs" -gt 0 ] && t=(timeout "$secs")
  OMP_NUM_THREADS=${omp:-$(nproc)} ${t[@]+"${t[@]}"} "$DSGAP" run "$ini" --out "$WORK/$kind" ${extra[@]+"${extra[@]}"} "$@" ||
    { exp_say "$kind: dsgap run stopped (status $?): run again to go on"; return 1; }
}

case $stage in
all)
  run_exp fidelity "$fid_ini" 0
  [ "$speed_ini" = none ] || run_exp speed "$speed_ini" 0
  ;;
gpu|speed)
  t0=$(date +%s)
  left() { echo $(( budget - ($(date +%s) - t0) )); }
  ok=1
  dev=${COMPARISON_DEVICE:-gpu} # cpu: the stage's own test (tests/cli/cli_comparison.sh)
  [ "$stage" = speed ] || run_exp fidelity "$fid_ini" "$(left)" --device "$dev" || ok=0
  if [ "$speed_ini" != none ] && [ "$(left)" -gt 60 ]; then
    if [ "$speed_ini" = "$ROOT/experiments/comparison_speed.ini" ] && [ ! -s "$ROOT/build/w13b/model/config.json" ]; then
      exp_say "speed: the Wan2.1-1.3B random-weight model (scripts/gpu_dit.py make 1.3b build/w13b)"
      timeout 200 python3 "$ROOT/scripts/gpu_dit.py" make 1.3b "$ROOT/build/w13b" --seed 2 >&2 || ok=0
    fi
    run_exp speed "$speed_ini" "$(left)" --device "$dev" || ok=0
  else
    [ "$speed_ini" = none ] || { exp_say "speed: not started, $(left) s left of --budget $budget"; ok=0; }
  fi
  pack=${pack:-$RESULTS/comparison.tar.gz}
  files=$(cd "$WORK" && { ls -d {fidelity,speed}/{summary.csv,summary.md,experiment.json,*/closed_loop.csv,*/run.json} 2>/dev/null || true; })
  [ -n "$files" ] || { exp_say "nothing finished to pack"; exit 1; }
  # shellcheck disable=SC2086  # the list splits on blanks
  (cd "$WORK" && tar czf "$pack.tmp" $files) && mv "$pack.tmp" "$pack"
  exp_say "packed into $pack: $(echo "$files" | wc -w) files$([ $ok = 1 ] || echo '; a run is unfinished: call again')"
  [ $ok = 1 ]
  exit
  ;;
analyse)
  WORK=$WORK/unpacked # the pack's runs, beside (not over) this machine's own cells
  rm -rf "$WORK"
  mkdir -p "$WORK"
  for f in "${from[@]}"; do
    tar xzf "$f" -C "$WORK"
    exp_say "unpacked $f into $WORK"
  done
  ;;
esac

# the tables and figure
fid_runs=("$WORK"/fidelity/*/closed_loop.csv)
[ -e "${fid_runs[0]}" ] || { echo "comparison.sh: no finished fidelity run in $WORK/fidelity" >&2; exit 1; }
fid_runs=("${fid_runs[@]%/closed_loop.csv}")
speed=()
for s in "$WORK"/speed/*/closed_loop.csv; do [ -e "$s" ] && speed+=(--speed "${s%/closed_loop.csv}"); done
samples=$(awk -F, 'NR > 1 && !seen[$1 "/" $2]++' "${fid_runs[@]/%//closed_loop.csv}" | wc -l)
model=$(sed -n 's/^[[:space:]]*"label":[[:space:]]*"\(.*\)",*$/\1/p' "${fid_runs[0]}/run.json" | head -1)
jstr() { sed -n 's/^[[:space:]]*"'"$1"'":[[:space:]]*"\(.*\)",*$/\1/p' "$2" | head -1; } # KEY FILE.json
tokens_of() { # FILE.json: the tokens of its model.latent F x H x W (patch 1x2x2, as the Wan models)
  sed -n 's/^[[:space:]]*"latent":[[:space:]]*\[\([0-9]*\),[[:space:]]*\([0-9]*\),[[:space:]]*\([0-9]*\)\],*$/\1 \2 \3/p' "$1" |
    head -1 | awk '{ print $1 * $2 * $3 / 4 }'
}
if [ ${#speed[@]} -gt 0 ]; then speed_state=measured
elif [ "$speed_ini" = none ]; then speed_state=own
else speed_state=not_measured; fi
rm -rf "$RESULTS/fidelity" "$RESULTS/speed" "$RESULTS/figures" "$RESULTS/logs"
rm -f "$RESULTS"/comparison.{csv,md,tex} "$RESULTS/run.json"
exp_say "dsgap compare (speed: $speed_state)"
"$DSGAP" compare "${fid_runs[@]}" ${speed[@]+"${speed[@]}"} --out "$RESULTS" --title "$model model, $samples samples"
csv=$RESULTS/comparison.csv md=$RESULTS/comparison.md tex=$RESULTS/comparison.tex
tol=$(sed -n 's/^[[:space:]]*"tolerance":[[:space:]]*\([0-9.eE+-]*\),*$/\1/p' "$RESULTS/run.json")
fid_dev=$(jstr device "${fid_runs[0]}/run.json")
tokens=$(tokens_of "${fid_runs[0]}/run.json")
dense_s=$(awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
  $c["policy"] == "dense" { s += $c["transformer_s"]; n++ } END { if (n) printf "%.3f", s / n }' "${fid_runs[@]/%//closed_loop.csv}")
sj=$WORK/speed/experiment.json # the speed experiment as the gpu stage started it (also when unfinished)
smodel="" stokens="" scells="" srun=""
if [ -s "$sj" ]; then
  smodel=$(jstr label "$sj") stokens=$(tokens_of "$sj")
  scells=$(sed -n 's/^[[:space:]]*"ncells":[[:space:]]*\([0-9]*\),*$/\1/p' "$sj" | head -1)
  srun=$(sed -n 's/^[[:space:]]*"name":[[:space:]]*"\([^"]*\.[^"]*\)",*$/\1/p' "$sj" | head -1) # labels have no '.'
fi
case $fid_dev in gpu*) on_gpu=1 ;; *) on_gpu=0 ;; esac
dev_short=$(echo "$fid_dev" | sed 's/^[a-z]*: //; s/ (.*//') # gpu: NVIDIA H200 (sm_90, ...) -> NVIDIA H200

# --- the device logs (--logs): logs/STAMP/, the binaries' commit, an unfinished speed run's cells ---------
bins="" speed_log=""
for lg in ${logs[@]+"${logs[@]}"}; do
  t=$(mktemp -d)
  tar xzf "$lg" -C "$t"
  [ -s "$t/summary.txt" ] || { rm -rf "$t"; echo "comparison.sh: --logs $lg: no summary.txt (scripts/device_all.sh's)" >&2; exit 1; }
  read -r _ when _ commit _ < "$t/summary.txt" # device_all.sh DATE commit C; steps: ...
  commit=${commit%;}
  stamp=$(echo "$when" | sed 's/^\([0-9-]*T[0-9][0-9]\):\([0-9][0-9]\).*/\1\2Z/')
  d=$RESULTS/logs/$stamp
  mkdir -p "$d"
  cp "$t/summary.txt" "$d/"
  [ ! -s "$t/all.log" ] || cmp -s "$t/all.log" "$t/summary.txt" || cp "$t/all.log" "$d/"
  if [ -s "$t/comparison.log" ]; then # a progress bar's updates (\r) cut to its last state
    tr '\r' '\n' < "$t/comparison.log" | awk '/^generate .*: step [0-9]+\/[0-9]+ \[/ { held = $0; next }
      { if (held != "") print held; held = ""; print } END { if (held != "") print held }' | sed 's/[[:space:]]*$//' > "$d/comparison.log"
    if [ -n "$srun" ] && [ $speed_state = not_measured ]; then
      s=$(awk -v run="$srun/" -v stamp="$stamp" '
        / speed: dsgap run / { insp = 1 } !insp { next }
        $1 == "run:" && index($3, run) == 1 { c = substr($3, length(run) + 1); sub(/^[^.]*\.s[0-9]+\./, "", c)
          fin = fin (fin == "" ? "" : ", ") "`" c "` " $4; last = "" }
        /^generate / { last = $0 }
        /^dsgap: error: / { err = $0 }
        /speed: dsgap run stopped/ { stop = $0; at = last }
        END { if (fin == "" && stop == "") exit
          printf "%s: ", stamp
          printf "%s", (fin == "" ? "no cell finished" : "finished " fin " (cell wall times, setup included)")
          if (stop != "") { st = stop; sub(/.*\(status /, "", st); sub(/\).*/, "", st)
            n = split(at, f, " "); pol = f[2]; sub(/:$/, "", pol); el = ""
            for (i = 2; i <= n; i++) if (f[i] == "elapsed") el = f[i - 1]
            printf "; stopped (status %s%s)", st, (st == "124" ? ": the budget ran out" : (err != "" ? ": " err : ""))
            if (at != "") printf " in `%s` at %s %s after %s", pol, f[3], f[4], el }
          printf "." }' "$d/comparison.log")
      [ -z "$s" ] || speed_log="$speed_log${speed_log:+ }$s"
    fi
  fi
  case " $bins " in *" ${commit:0:7} "*) ;; *) bins="$bins${bins:+, }${commit:0:7}" ;; esac
  rm -rf "$t"
done

# --- comparison.csv and run.json: the speed's state --------------------------------------------------------
if [ $speed_state = not_measured ]; then
  awk -F, -v OFS=, 'NR > 1 { $17 = "nan"; $18 = "nan"; $19 = 0; $24 = 0 } 1' "$csv" > "$csv.tmp.$$" && mv "$csv.tmp.$$" "$csv"
fi
sdev_nm=""
[ $speed_state != not_measured ] || sdev_nm="not measured (the speed run${smodel:+ of $smodel} did not finish)"
awk -v st="$speed_state" -v nm="$sdev_nm" '/^[[:space:]]*"speed_device":/ {
    if (nm != "") print "\t\"speed_device\":\t\"" nm "\","; else print
    print "\t\"speed_status\":\t\"" st "\","; next } 1' "$RESULTS/run.json" > "$RESULTS/run.json.tmp.$$" &&
  mv "$RESULTS/run.json.tmp.$$" "$RESULTS/run.json"

# --- comparison.md and .tex: ‡ (not a peer, off its target), the speed's state, the rows off target ---------
# off: "policy rho" of every row but dense more than tol from its target; offnp: those not flagged
off_awk='function off(r) { d = $6 - $3; return $1 != "dense" && (d > tol + 1e-9 || -d > tol + 1e-9) }'
n_offnp=$(awk -F, -v tol="$tol" "$off_awk"' NR > 1 && off() && $7 == 1' "$csv" | wc -l)
n_off=$(awk -F, -v tol="$tol" "$off_awk"' NR > 1 && off()' "$csv" | wc -l)
slabel=${smodel:-speed run}
case $speed_state in
not_measured)
  speed_md="**Speed: not measured.** The speed run (\`$(basename "$speed_ini")\`${smodel:+: the $smodel model at $stokens tokens}${scells:+, $scells cells}) did not finish: there is no finished run of it, so the speedup column says *not measured* (\`comparison.csv\`: nan) and no Pareto figure (speedup against PSNR) is drawn. The fidelity runs' own times are not used as speed: $([ $on_gpu = 1 ] && echo "the $model model at $tokens tokens is too small for GPU speed to mean anything (its dense transformer takes $dense_s s a sample on the $dev_short: launch-bound)" || echo "they are of the $model model at $tokens tokens")$( [ -n "$stokens" ] && echo ", and they say nothing about $stokens tokens" || true). They are in \`fidelity/RUN/closed_loop.csv\` (\`transformer_s\`) and \`summary.md\`; one attention call against cuDNN dense by sequence length, metadata amortised, is in \`results/kernel_speed/crossover.md\`."
  speed_tex="Speedup ($slabel): not measured, the speed run did not finish. The fidelity runs' own times are not used: $([ $on_gpu = 1 ] && echo "the $model model at $tokens tokens is too small for GPU speed to mean anything" || echo "they are of another size")." ;;
own)
  speed_md="**Speed: the fidelity runs' own times** (\`COMPARISON_SPEED_INI=none\`): the $model model at $tokens tokens, its dense transformer $dense_s s a sample on the $dev_short.$([ $on_gpu = 1 ] && echo " At this size a GPU is launch-bound: the $model model at $tokens tokens is too small for GPU speed to mean anything, so read these speedups as this model's times, not as speed at video sizes." || true)"
  speed_tex="Speedup: the fidelity runs' own times ($model model, $tokens tokens)$([ $on_gpu = 1 ] && echo ", too small for GPU speed to mean anything" || true)." ;;
*) speed_md="" speed_tex="" ;;
esac
offnp_md="‡ Not a peer, so not marked \"cannot reach ρ\" (that rule is for the peers' budget knobs), but its computed density past the warm-up is off its target by more than $tol too: its top-k key count is rounded up to a multiple of 128 keys (\`dg_topk_count\`, src/policy/select.c), which at $tokens tokens is a step of $(awk -v n="$tokens" "$EXP_AWK_SIG3"' BEGIN { print sig3(128 / n) }'). Compare it with the rows at the density it computed (below)."
offnp_tex="\$^\\ddagger\$ Not a peer, but off its target by more than $tol too: its top-\$k\$ key count is rounded up to a multiple of 128 keys."
SP=$speed_md OFFNP=$offnp_md awk -F, -v tol="$tol" -v state="$speed_state" -v slabel="$slabel" -v n_offnp="$n_offnp" \
    -v n_off="$n_off" "$off_awk$EXP_AWK_SIG3"'
  BEGIN { sp = ENVIRON["SP"]; offnp = ENVIRON["OFFNP"] }
  function fmt(x) { return x == "nan" ? "—" : sig3(x) }
  NR == FNR { if (FNR > 1) { k = $1 SUBSEP $20 SUBSEP ($3 + 0); if (off() && $7 == 1) np[k] = 1
      if (off()) offrow[++no] = $0 } next }
  /^Fidelity:/ { if (state == "not_measured") { sub(/Speedup: the fidelity runs. own transformer times \(dense \/ method\)\. /, "")
        sub(/ Speedup — : no speed run at that density\./, "") }
    if (n_offnp > 0) sub(/ no fidelity is given for it\./, " no fidelity is given for it (‡: not a peer, off its target too; every row off its target is listed below the table at the density it computed).")
    print; if (sp != "") { print ""; print sp }; next }
  /^\| method \|/ { if (state == "not_measured") sub(/\| speedup \|$/, "| speedup (" slabel ") |"); print; next }
  /^\| `/ { n = split($0, f, " \\| "); p = f[1]; sub(/^\| `/, "", p); sub(/`$/, "", p)
    if ((p SUBSEP f[2] SUBSEP (f[4] + 0)) in np) f[7] = f[7] " ‡"
    if (state == "not_measured") f[n] = "not measured |"
    s = f[1]; for (i = 2; i <= n; i++) s = s " | " f[i]; print s; tbl = 1; next }
  { print }
  END {
    if (n_offnp > 0) { print ""; print offnp }
    if (n_off > 0) {
      print ""; print "**Rows off their target ρ, at the density they computed** (for reference: the ±" tol " rule keeps a peer among them out of the comparison at ρ; PSNR inf: a sample equal to dense):"
      print ""; print "| method | target ρ | density past the warm-up | PSNR | 95% CI | SSIM | 95% CI |"
      print "|:--|--:|--:|--:|:-:|--:|:-:|"
      for (i = 1; i <= no; i++) { split(offrow[i], g, ",")
        printf "| `%s` | %g | %s | %s | %s | %s | [%s, %s] |\n", g[1], g[3], fmt(g[6]), fmt(g[8]),
          (g[8] == "inf" ? "—" : "[" fmt(g[9]) ", " fmt(g[10]) "]"), fmt(g[11]), fmt(g[12]), fmt(g[13]) } } }
  ' "$csv" "$md" > "$md.tmp.$$" && mv "$md.tmp.$$" "$md"
SP=$speed_tex OFFNP=$offnp_tex awk -F, -v tol="$tol" -v state="$speed_state" -v slabel="$slabel" -v n_offnp="$n_offnp" \
    "$off_awk"'
  BEGIN { sp = ENVIRON["SP"]; offnp = ENVIRON["OFFNP"] }
  function esc(s) { gsub(/[_%&#]/, "\\\\&", s); return s }
  NR == FNR { if (FNR > 1 && off() && $7 == 1) np[$1 SUBSEP $20 SUBSEP ($3 + 0)] = 1; next }
  /^\\caption\{/ { if (state == "not_measured") sub(/, and the measured speedup of the denoising loop\.\}/, "; the speedup was not measured (see the note).}")
    print; next }
  /^Method & / { n = split($0, f, " & ")
    if (state == "not_measured") f[n] = "Speedup (" esc(slabel) ") \\\\"
    s = f[1]; for (i = 2; i <= n; i++) s = s " & " f[i]; print s; next }
  /^\\texttt\{/ { n = split($0, f, " & "); p = f[1]; sub(/^\\texttt\{/, "", p); sub(/\}$/, "", p)
    sched = f[2]; sub(/^\{\\scriptsize /, "", sched); sub(/\}$/, "", sched); if (sched == "---") sched = "—"
    gsub(/\\_/, "_", p)
    if ((p SUBSEP sched SUBSEP (f[3] + 0)) in np) f[5] = substr(f[5], 1, length(f[5]) - 1) "^{\\ddagger}$"
    if (state == "not_measured") f[n] = "--- \\\\"
    s = f[1]; for (i = 2; i <= n; i++) s = s " & " f[i]; print s; next }
  /^\\end\{tabular\}/ { print; note = esc(sp)
    if (n_offnp > 0) note = note (note == "" ? "" : " ") offnp
    if (note != "") print "\\par\\smallskip\\parbox{\\linewidth}{\\footnotesize " note "}"; next }
  { print }' "$csv" "$tex" > "$tex.tmp.$$" && mv "$tex.tmp.$$" "$tex"

# --- figures/fidelity_density.{dat,gp,png,pdf}: PSNR against the computed density (no speed in it) ---------
[ $speed_state != not_measured ] || rm -f "$RESULTS"/figures/pareto.{dat,gp,png,pdf}
fd=$RESULTS/figures/fidelity_density
awk -F, -v tol="$tol" "$off_awk"'
  NR > 1 && $1 != "dense" { if (!($1 in seen)) { seen[$1] = 1; m[++nm] = $1 }
    if ($8 == "inf" || $8 == "nan") { v = sprintf("%.3f", $6); if (index(", " bad[$1] ",", ", " v ",") == 0) bad[$1] = bad[$1] (bad[$1] == "" ? "" : ", ") v; next }
    n[$1]++; k = $1 SUBSEP n[$1]; x[k] = $6; y[k] = $8; lo[k] = $9; hi[k] = $10; r[k] = $3; o[k] = off() }
  END { print "# fidelity_density.dat: made by experiments/comparison.sh from comparison.csv"
    print "# columns: sparse_density psnr psnr_lo psnr_hi label (off target: ρ and the targets, / between those at one point; - on target) off_target;"
    print "# (column 7: the density dodged by method, x exp(0.012 (i - (methods - 1) / 2)), for legibility);"
    print "# one block per method (targets at the same point merged), then the frontier (dodged density, psnr)"
    for (i = 1; i <= nm; i++) npl += n[m[i]] > 0
    for (i = 1; i <= nm; i++) { p = m[i]; if (!n[p]) { print "# not drawn " p " " bad[p]; continue }
      print "# method " p; f = exp(0.012 * (pi++ - (npl - 1) / 2))
      for (j = 1; j <= n[p]; j++) { k = p SUBSEP j; if (k in gone) continue; lab = r[k]
        for (q = j + 1; q <= n[p]; q++) { kq = p SUBSEP q
          if (sprintf("%.6g %.6g", x[kq], y[kq]) == sprintf("%.6g %.6g", x[k], y[k])) { lab = lab "/" r[kq]; gone[kq] = 1 } }
        dx[k] = x[k] * f; printf "%.6g %.6g %.6g %.6g %s %d %.6g\n", x[k], y[k], lo[k], hi[k], (o[k] ? "ρ=" lab : "-"), o[k], dx[k]; all[++na] = k
        xmin = (na == 1 || x[k] < xmin) ? x[k] : xmin; xmax = (na == 1 || x[k] > xmax) ? x[k] : xmax }
      print ""; print "" }
    print "# frontier (non-dominated by density, lower better, and PSNR), by density"
    nf = 0
    for (a = 1; a <= na; a++) { k = all[a]; dom = 0
      for (b = 1; b <= na; b++) { q = all[b]; if (b != a && x[q] <= x[k] && y[q] >= y[k] && (x[q] < x[k] || y[q] > y[k])) dom = 1 }
      if (!dom) fr[++nf] = k }
    for (a = 2; a <= nf; a++) for (b = a; b > 1 && x[fr[b]] < x[fr[b - 1]]; b--) { t = fr[b]; fr[b] = fr[b - 1]; fr[b - 1] = t }
    for (a = 1; a <= nf; a++) printf "%.6g %.6g\n", dx[fr[a]], y[fr[a]]
    printf "\n\n# xrange %.6g %.6g\n", xmin, xmax }' "$csv" > "$fd.dat" # (merged points: one each)
title="$model model, $samples samples: fidelity against computed density" # no quote in it (gnuplot's single quotes)
notdrawn=$(awk '/^# not drawn / { s = s (s == "" ? "" : "; ") $4 " (PSNR not finite; density " substr($0, index($0, $5)) ")" } END { print s }' "$fd.dat")
TITLE=$title ND=$notdrawn awk -v tol="$tol" '
  BEGIN { title = ENVIRON["TITLE"]; nd = ENVIRON["ND"] }
  /^# method / { m[nm++] = substr($0, 10) } /^# xrange / { x0 = $3 * 0.85; x1 = $4 * 1.6 }
  !/^#/ && NF >= 7 && $6 > 0 { k = $5 SUBSEP sprintf("%.3f", $1) # an off-target point: its targets, its density
    if (!(k in who)) { ko[++nko] = k; who[k] = m[nm - 1] } else who[k] = who[k] ", " m[nm - 1] }
  END { # the off-target points by target and computed density, under the axis (as labels beside the
    # points they crowded the error bars)
    for (i = 1; i <= nko; i++) { split(ko[i], f, SUBSEP); r = f[1]; sub(/^ρ=/, "", r)
      item = "ρ " r ": " who[ko[i]] " (computed " f[2] ")"
      if (off == "") { off = item; ll = length(item) } else if (ll + length(item) > 90) { off = off ";\\n" item; ll = length(item) } else { off = off "; " item; ll += length(item) + 2 } }
    np = split("1 3 4 5 6 10 11 12 13 14 9", pal, " ") # mc-sparse vermillion (ls 2) and bolder, as closed_loop.png
    print "# fidelity_density.gp: made by experiments/comparison.sh"
    print "# re-render inside this directory: gnuplot fidelity_density.gp   (writes fidelity_density.pdf and .png)"
    print "load '\''style.gp'\''"; print "set encoding utf8"
    print "do for [fmt in \"pdf png\"] {"
    print "if (fmt eq \"pdf\") { set terminal pdfcairo size 6.5in,4.8in font '\''Liberation Sans,8'\'' } else { set terminal pngcairo size 1950,1440 font '\''Liberation Sans,8'\'' fontscale 3 linewidth 2 }"
    print "set output '\''fidelity_density.'\''.fmt"
    print "set title '\''" title "'\'' noenhanced"
    print "set xlabel \"computed density of the sparse calls past the warm-up (pairs / N², log scale; dodged ±5% by method)\\nnot speed: metadata costs are not in it" (off == "" ? "" : "; hollow with ‡: more than " tol " from its target ρ:\\n" off) (nd == "" ? "" : "\\nnot drawn: " nd) "\" noenhanced"
    print "set ylabel '\''PSNR of the final latents against dense (dB), 95% CI over samples'\'' noenhanced"
    print "set key outside right top vertical Left reverse noenhanced font '\'',7'\'' samplen 2"
    print "set offsets 0, 0, graph 0.06, graph 0.04"
    print "set logscale x"
    printf "set xrange [%.4g:%.4g]\n", x0, x1
    print "set xtics (0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8, 1)"
    printf "plot "
    split("5 7 9 11 13 15", mk, " ") # filled markers; an off-target point the same shape open (pt - 1), ‡ above it
    for (i = k = 0; i < nm; i++) { ls = m[i] == "mc-sparse" ? 2 : pal[k++ % np + 1]; pt = mk[i % 6 + 1]
      lw = m[i] == "mc-sparse" ? 1.6 : 1; ps = m[i] == "mc-sparse" ? 1.6 : 1.3
      printf "%s'\''fidelity_density.dat'\'' index %d using 7:($6 > 0 ? NaN : $2):3:4 with yerrorbars ls %d lw %s pt %d ps %s title '\''%s'\'', \\\n  '\'''\'' index %d using 7:($6 > 0 ? $2 : NaN):3:4 with yerrorbars ls %d lw %s pt %d ps %s notitle, \\\n  '\'''\'' index %d using 7:($6 > 0 ? $4 : NaN):(\"‡\") with labels offset 0, 0.55 center font '\'',7'\'' tc ls %d notitle",
        (i ? ", \\\n  " : ""), i, ls, lw, pt, ps, m[i], i, ls, lw, pt - 1, ps, i, ls }
    printf "%s'\''fidelity_density.dat'\'' index %d using 1:2 with lines ls 8 dt 2 lw 1 title '\''frontier'\''\n", (nm ? ", \\\n  " : ""), nm
    print "unset output"; print "}" }' "$fd.dat" > "$fd.gp"
if command -v gnuplot > /dev/null; then exp_gnuplot "$RESULTS/figures" fidelity_density.gp
else exp_say "no gnuplot: figures/fidelity_density.{pdf,png} not rendered (gnuplot fidelity_density.gp there)"; fi

for kind in fidelity speed; do
  for d in "$WORK/$kind"/*/closed_loop.csv; do
    [ -e "$d" ] || continue
    run=$(basename "$(dirname "$d")")
    mkdir -p "$RESULTS/$kind/$run"
    cp "$d" "$(dirname "$d")/run.json" "$RESULTS/$kind/$run/"
  done
done
speed_dev=$(jstr speed_device "$RESULTS/run.json")
fid_date=$(jstr date "${fid_runs[0]}/run.json") fid_stamp=$(jstr git_commit "${fid_runs[0]}/run.json")
# the methods of the fidelity runs that no speed run has (a speed run of a subset of them)
pols() { awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } { print $c["policy"] }' "$@" | sort -u; }
unsped=$(comm -23 <(pols "${fid_runs[@]/%//closed_loop.csv}") <(pols "$WORK"/speed/*/closed_loop.csv 2>/dev/null) | paste -sd, | sed 's/,/, /g')
case $speed_state in
measured) speed_txt="\`speed/RUN/\`: the denoising loop of \`$(basename "$speed_ini")\`${smodel:+ (the $smodel model at $stokens tokens${scells:+, $scells cells})} on $speed_dev; speedup = dense transformer time / the method's.${unsped:+ Not in the speed run, so no speedup in the tables: $unsped.}" ;;
own) speed_txt="the fidelity runs' own transformer times (\`COMPARISON_SPEED_INI=none\`; the $model model at $tokens tokens$([ $on_gpu = 1 ] && echo ": too small for GPU speed to mean anything" || true)), said so in the tables and the figure." ;;
*) speed_txt="**not measured**: the speed run (\`$(basename "$speed_ini")\`${smodel:+, the $smodel model at $stokens tokens}${scells:+, $scells cells}) did not finish, so the tables say *not measured*, \`comparison.csv\` has nan there and no Pareto figure is drawn; the fidelity runs' own times are not used (the $model model at $tokens tokens$([ $on_gpu = 1 ] && echo " is too small for GPU speed to mean anything" || true)).${speed_log:+ From the speed run log (\`logs/\`; not used in the tables): $speed_log}" ;;
esac
WORK=$WORK/fidelity exp_readme "# The main comparison: every method's fidelity against its measured speedup

Fidelity: **$model** model, closed loop over $samples samples (\`fidelity/RUN/closed_loop.csv\`: every
sample; settings \`$(basename "$fid_ini")\`; run $fid_date on $fid_dev$([ -n "$bins" ] && echo ", binaries of $bins (the device calls' \`logs/\`; the dsgap stamp $fid_stamp in run.json is the commit at configure time)")): every method generated from the same noise as the sample's
dense run; PSNR, SSIM and rel-L2 of the final latents against it, means over the samples with 95%
percentile bootstrap intervals over them (\`dsgap compare\`, src/analysis/compare.c, paired across
methods). Methods: dense (reference), mc-sparse, est-block (the FlexAttention-style block-sparse
reference: 128x128 tiles, top-k blocks by pooled scores) and the nine peers at matched budgets
(\`PEER/budget=matched\`; chipmunk and pisa are top-k methods); a peer whose computed density past the
warm-up misses its target by more than $tol is \"cannot reach ρ\" in the tables, left out of the
Pareto figure (\`run.json\`: \`unreached_densities\`); a method that is not a peer but misses
it too (top-k key counts round up to 128 keys) is marked ‡; every row off its target is listed at the
density it computed below the table. Densities: \`density\` over all calls (the $(sed -n 's/^[[:space:]]*"warmup":[[:space:]]*\([0-9]*\),*$/\1/p' "$RESULTS/run.json" | head -1) warm-up steps dense
included), \`sparse density\` past the warm-up (the one compared with ρ, and the tables' and figures').
Speed: $speed_txt
\`comparison.md\` (also \`.tex\`, \`.csv\`); $([ $speed_state = not_measured ] || echo "\`figures/pareto.png\`: speedup against PSNR, one marker per
method, labels the computed density past the warm-up, the dashed line the frontier of non-dominated
points; ")\`figures/fidelity_density.png\`: PSNR against the computed density past the warm-up (every row
at the density it computed; a row more than $tol off its target ρ hollow with ‡, its target named under
the axis; the dashed line the frontier: no row has both less density and more PSNR), not speed:
metadata costs are not in it.
GPU runs: \`experiments/comparison.sh --stage gpu\` on the H200 (scripts/device_all.sh step
\`comparison\`), then \`experiments/comparison.sh --stage analyse --from comparison.tar.gz [--logs LOGS.tgz ...] --update-results\` here." \
  "${fid_runs[0]}/run.json"
# exp_readme's generic lines made true of this script: how to regenerate; for --stage analyse, that
# the tables were made here from the pack while the cells ran where run.json says
here=$("$DSGAP" --version | sed 's/.*commit \([0-9a-f+wip]*\).*/\1/')
REGEN="Regenerate: the cells with \`experiments/comparison.sh --stage gpu\` on the GPU machine (or \`--stage all\` here: \`dsgap run\` of both experiments), the tables and figures with \`experiments/comparison.sh --stage analyse --from comparison.tar.gz [--logs LOGS.tgz ...] --update-results\` (\`dsgap compare\`, then this script's marks, notes and figure; the pack unpacks into \`build/experiments/comparison/unpacked/\`)." \
MADE="Tables made $(date -u +%Y-%m-%dT%H:%M:%SZ) here from $(for f in "${from[@]}"; do basename "$f"; done | paste -sd, | sed 's/,/, /g') by dsgap commit $here (\`dsgap compare\`); the cells ran $fid_date on $fid_dev$([ -n "$bins" ] && echo ", binaries of $bins" || true)." \
STAGE=$stage awk '/^Regenerate: / { print ENVIRON["REGEN"]; next }
  /^Last run: / && ENVIRON["STAGE"] == "analyse" { print ENVIRON["MADE"]; next } 1' "$RESULTS/README.md" > "$RESULTS/README.md.tmp.$$" &&
  mv "$RESULTS/README.md.tmp.$$" "$RESULTS/README.md"
