#!/usr/bin/env bash
# staleness_calls.sh: issue 50 item 4 per call: what the staleness of each of mc-sparse's cached
# components costs one attention call (the open loop) -> RESULTS/: each sample trace of the bundled
# model (build/samples/traces/CLASS-sSEED.h5: 10 UniPC steps, 4096 tokens, layers 0/3/7 x 2 heads;
# experiments/samples.sh --keep-traces, or exp_sample_traces below) replayed with mc-sparse and
# mc-sparse/fresh=keys|groups|residual at density 0.15, warm-up 3 (one anchor, step 2: steps 3-9 are
# 1-7 steps after it); then per sample and policy the mean rel-L2 and retained mass over those
# units (samples.csv), and per step since the anchor the mean over the samples (staleness.csv).
#   experiments/staleness_calls.sh [--out DIR | --update-results] [--samples LIST]
# (default samples: cockatoo-s1,pan_left-s1,zoom_in-s1,vtest-s2,tree-s2,rotate_cw-s2; captured on
# the CPU where missing: about a minute each on 2 cores, and 30 s of replay)
source "$(dirname "$0")/lib.sh"
exp_init staleness_calls "$@"
samples=${EXP_SAMPLES:-cockatoo-s1,pan_left-s1,zoom_in-s1,vtest-s2,tree-s2,rotate_cw-s2}
traces=$ROOT/build/samples/traces
exp_sample_traces 10 "$ROOT/data/model" "$traces" ${samples//,/ }
policies=mc-sparse,mc-sparse/fresh=keys,mc-sparse/fresh=groups,mc-sparse/fresh=residual
for s in ${samples//,/ }; do
  [ -s "$WORK/$s/metrics.csv" ] && continue
  exp_say "replay $s"
  "$DSGAP" replay "$traces/$s.h5" --out "$WORK/$s" --policies "$policies" --density 0.15 --schedule warmup=3 --quiet
done
mkdir -p "$RESULTS"
{ echo "sample,policy,units,rel_l2,mass_mean"
  for s in ${samples//,/ }; do
    awk -F, -v s="$s" 'NR > 1 && $4 >= 3 { e[$1] += $8; m[$1] += $11; n[$1]++; if (!($1 in o)) { o[$1] = ++k; p[k] = $1 } }
      END { for (i = 1; i <= k; i++) printf "%s,%s,%d,%.6g,%.6g\n", s, p[i], n[p[i]], e[p[i]] / n[p[i]], m[p[i]] / n[p[i]] }' "$WORK/$s/metrics.csv"
  done; } > "$RESULTS/samples.csv"
{ echo "steps_since_anchor,policy,samples,rel_l2,rel_l2_min,rel_l2_max"
  for s in ${samples//,/ }; do awk -F, -v s="$s" 'NR > 1 && $4 >= 3 { print s "," $4 - 2 "," $1 "," $8 }' "$WORK/$s/metrics.csv"; done |
    awk -F, '{ k = $2 "," $3; t[k, $1] += $4; c[k, $1]++; if (!((k, $1) in seen)) { seen[k, $1] = 1; ns[k]++; sl[k] = sl[k] " " $1 } K[k] = 1 }
      END { for (k in K) { n = split(sl[k], S, " "); sum = 0; lo = 1e9; hi = -1e9
          for (i = 1; i <= n; i++) { v = t[k, S[i]] / c[k, S[i]]; sum += v; lo = v < lo ? v : lo; hi = v > hi ? v : hi }
          printf "%s,%d,%.6g,%.6g,%.6g\n", k, n, sum / n, lo, hi } }' | sort -t, -k1,1n -k2,2; } > "$RESULTS/staleness.csv"
exp_say "tables in $RESULTS"
