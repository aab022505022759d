#!/usr/bin/env bash
# who_wins.sh: the "Who wins where" section of results/README.md, its numbers filled from the
# committed results (issue 23): the text between the lines <!-- who-wins:begin --> and
# <!-- who-wins:end --> of that file is replaced; every other line is kept.
#   experiments/who_wins.sh [--comparison DIR] [--length DIR] [--readme FILE]
#   --comparison DIR  experiments/comparison.sh's output (default results/comparison): comparison.csv,
#                     run.json. Per target density: the method with the best PSNR, the fastest, the
#                     Pareto frontier (speedup against PSNR), where mc-sparse loses (a method at the same
#                     density with a higher PSNR whose interval lies above mc-sparse's, or one both at
#                     least as fast and at least as good), the methods it is not separated from (the
#                     intervals overlap) and ahead of, and the peers that cannot reach it; a row whose
#                     computed density misses its target by more than run.json's tolerance says "at
#                     computed D". Without speed (run.json's speed_status not_measured, or no speedup
#                     at that density) no method is called fastest: the methods by PSNR instead
#   --length DIR      experiments/kernel_speed.sh --length's output (default results/kernel_speed;
#                     repeatable, newest sweep first): crossover.csv: per head count, mc-sparse's
#                     crossover N against cuDNN dense (the DiT entry point, fast P.V; the per-head
#                     backend in both modes), the policies that beat dense at every N, those that never
#                     do, the speedup at 32760 tokens. Each (path, P.V, heads) comes from the first DIR
#                     that has it; each line names its sweep (folder, device, dates and commits of its
#                     callspeed.csv)
#   --readme FILE     default results/README.md (experiments/findings.sh calls it on its own output)
# An input that is not there yet leaves a "pending" line naming the command that makes it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmp=$ROOT/results/comparison readme=$ROOT/results/README.md lens=()
while [ $# -gt 0 ]; do
  case $1 in
    --comparison) cmp=${2:?}; shift ;;
    --length) lens+=("${2:?}"); shift ;;
    --readme) readme=${2:?}; shift ;;
    *) echo "who_wins.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ ${#lens[@]} -gt 0 ] || lens=("$ROOT/results/kernel_speed")
grep -qx '<!-- who-wins:begin -->' "$readme" && grep -qx '<!-- who-wins:end -->' "$readme" ||
  { echo "who_wins.sh: $readme: no <!-- who-wins:begin --> ... <!-- who-wins:end --> lines" >&2; exit 1; }
sec=$(mktemp) cross=$(mktemp)
new=$readme.tmp.$$
trap 'rm -f "$sec" "$cross" "$new"' EXIT
# the sweeps' crossover rows, each (path, pv, heads) from the first sweep that has it, with a last
# column naming the sweep: folder; device, first and last date, commits (its callspeed.csv)
srcs=
for d in "${lens[@]}"; do
  [ -s "$d/crossover.csv" ] || continue
  rel=$(realpath --relative-to="$ROOT" "$d")
  srcs="$srcs${srcs:+, }$rel/crossover.csv"
  label="\`$rel/\`"
  [ -s "$d/callspeed.csv" ] && label=$(awk -F'"' -v rel="$rel" 'NR > 1 { split($3, t, ","); dev = $2; sub(/^gpu: /, "", dev); sub(/ \(.*/, "", dev)
      devs[dev] = 1; if (first == "" || t[2] < first) first = t[2]; if (t[2] > last) last = t[2]
      commits[substr(t[3], 1, 7) (index(t[3], "+wip") ? "+wip" : "")] = 1 }
    END { s = ""; for (k in devs) s = s (s == "" ? "" : "/") k; cs = ""; for (k in commits) cs = cs (cs == "" ? "" : ", ") k
      f = substr(first, 1, 16) "Z"; l = substr(last, 12, 5) "Z"; printf "%s, %s%s, %s; `%s/`", s, f, (l == substr(f, 12) ? "" : "–" l), cs, rel }' "$d/callspeed.csv")
  awk -F, -v OFS=, -v label="$label" -v seenf="$cross" 'BEGIN { while ((getline l < seenf) > 0) { split(l, a, ","); taken[a[1] FS a[2] FS a[5]] = 1 } }
    NR > 1 && !(($1 FS $2 FS $5) in taken) { print $0, label }' "$d/crossover.csv" >> "$cross"
done
{
  echo "<!-- who-wins:begin -->"
  echo "<!-- made by experiments/who_wins.sh from $(realpath --relative-to="$ROOT" "$cmp")/comparison.csv and ${srcs:-no crossover.csv}; edit the script, not these lines -->"
  echo
  c=$cmp/comparison.csv
  if [ -s "$c" ]; then
    title=$(sed -n 's/^[[:space:]]*"title":[[:space:]]*"\(.*\)",*$/\1/p' "$cmp/run.json" | head -1)
    sdev=$(sed -n 's/^[[:space:]]*"speed_device":[[:space:]]*"\(.*\)",*$/\1/p' "$cmp/run.json" | head -1)
    status=$(sed -n 's/^[[:space:]]*"speed_status":[[:space:]]*"\(.*\)",*$/\1/p' "$cmp/run.json" | head -1)
    tol=$(sed -n 's/^[[:space:]]*"tolerance":[[:space:]]*\([0-9.eE+-]*\),*$/\1/p' "$cmp/run.json" | head -1)
    echo "**Fidelity against speed** (\`results/comparison/\`: closed loop over the $title, PSNR of the final"
    case ${status:-measured} in # comparison.sh's run.json: measured, own or not_measured
    measured) echo "latents against dense with 95% intervals over the samples; speedup of the denoising loop on $sdev):" ;;
    own) echo "latents against dense with 95% intervals over the samples; speedup: the fidelity runs' own times on $sdev, not a speed result):" ;;
    *) echo "latents against dense with 95% intervals over the samples; speed $sdev: PSNR only, no method ranked by speed):" ;;
    esac
    echo
    awk -F, -v tol="${tol:-0.02}" 'function f2(x) { return sprintf("%.1f", x) }
      function at(k) { return (den[k] - rk[k] > tol + 1e-9 || rk[k] - den[k] > tol + 1e-9) ? " at computed " sprintf("%.3g", den[k]) : "" }
      function sx(k) { return sp[k] == "nan" ? "" : sprintf(", %.2f×", sp[k]) }
      NR > 1 && $1 != "dense" { r = $3; if (!(r in seen)) { seen[r] = 1; rho[++nr] = r }
        n[r]++; k = r SUBSEP n[r]; pol[k] = $1; ok[k] = $7; ps[k] = $8; lo[k] = $9; hi[k] = $10; sp[k] = $17; den[k] = $6; rk[k] = $3 }
      END {
        for (i = 1; i <= nr; i++) {
          r = rho[i]; best = fast = ""; bp = -1e9; bs = -1; mc = ""; un = ""; ns = 0; nosp = ""
          for (j = 1; j <= n[r]; j++) { k = r SUBSEP j
            if (!ok[k]) { un = un (un == "" ? "" : ", ") "`" pol[k] "` (computed " sprintf("%.3g", den[k]) ")"; continue }
            if (ps[k] > bp) { bp = ps[k]; best = k }
            if (sp[k] != "nan") { ns++; if (sp[k] > bs) { bs = sp[k]; fast = k } }
            else nosp = nosp (nosp == "" ? "" : ", ") "`" pol[k] "`"
            if (pol[k] == "mc-sparse") mc = k }
          nf = 0; front = "" # the non-dominated points, fastest first
          for (j = 1; j <= n[r]; j++) { k = r SUBSEP j; if (!ok[k] || sp[k] == "nan") continue; dom = 0
            for (m = 1; m <= n[r]; m++) { q = r SUBSEP m; if (m == j || !ok[q] || sp[q] == "nan") continue
              if (sp[q] >= sp[k] && ps[q] >= ps[k] && (sp[q] > sp[k] || ps[q] > ps[k])) dom = 1 }
            if (!dom) { for (m = ++nf; m > 1 && sp[fr[m - 1]] < sp[k]; m--) fr[m] = fr[m - 1]; fr[m] = k } }
          for (m = 1; m <= nf; m++)
            front = front (front == "" ? "" : ", ") "`" pol[fr[m]] "` " sprintf("%.2f", sp[fr[m]]) "× / " f2(ps[fr[m]]) " dB"
          if (best == "") { printf "- **ρ %s**: no method reaches it.\n", r }
          else if (ns > 0)
            printf "- **ρ %s**: best PSNR `%s` %s dB [%s, %s]%s%s; fastest `%s` %.2f× (%s dB)%s. Frontier: %s.\n",
              r, pol[best], f2(ps[best]), f2(lo[best]), f2(hi[best]), at(best), sx(best), pol[fast], sp[fast], f2(ps[fast]),
              (nosp == "" ? "" : " of those with a speed run (none for " nosp ")"), front
          else { rank = ""; delete used
            for (t = 1; t <= n[r]; t++) { b = ""; bv = -1e9
              for (j = 1; j <= n[r]; j++) { k = r SUBSEP j; if (ok[k] && !(k in used) && ps[k] > bv) { bv = ps[k]; b = k } }
              if (b == "") break
              used[b] = 1; rank = rank (rank == "" ? "" : ", ") "`" pol[b] "` " f2(ps[b]) at(b) }
            printf "- **ρ %s**: best PSNR `%s` %s dB [%s, %s]%s. By PSNR (dB): %s.\n", r, pol[best], f2(ps[best]), f2(lo[best]), f2(hi[best]), at(best), rank }
          if (mc != "") { loses = ""; ahead = ""; tie = ""
            for (j = 1; j <= n[r]; j++) { k = r SUBSEP j; if (k == mc || !ok[k]) continue
              if (lo[k] > hi[mc]) loses = loses (loses == "" ? "" : "; ") "`" pol[k] "` has a higher PSNR (" f2(ps[k]) " dB" at(k) ", interval above)"
              else if (sp[k] != "nan" && sp[mc] != "nan" && sp[k] >= sp[mc] && ps[k] >= ps[mc]) loses = loses (loses == "" ? "" : "; ") "`" pol[k] "` is as fast and as good (" sprintf("%.2f", sp[k]) "×, " f2(ps[k]) " dB)"
              else if (hi[k] < lo[mc]) ahead = ahead (ahead == "" ? "" : ", ") "`" pol[k] "` (" f2(ps[k]) ")"
              else tie = tie (tie == "" ? "" : ", ") "`" pol[k] "` (" f2(ps[k]) ")" }
            printf "  mc-sparse: %s dB [%s, %s]%s%s; %s.", f2(ps[mc]), f2(lo[mc]), f2(hi[mc]), at(mc), sx(mc), (loses == "" ? "no method beats it here" : "it loses where " loses)
            if (tie != "") printf " Not separated from: %s.", tie
            if (ahead != "") printf " Ahead of: %s.", ahead
            printf "\n" }
          if (un != "") printf "  Cannot reach ρ %s: %s.\n", r, un
        } }' "$c"
  else
    echo "- Fidelity against speed: *pending*: \`STEPS=comparison scripts/device_all.sh\` on the H200, then"
    echo "  \`experiments/comparison.sh --stage analyse --from comparison.tar.gz --update-results\` and this script."
  fi
  echo
  if [ -s "$cross" ]; then
    echo "**Where sparse stops paying** (\`experiments/kernel_speed.sh --length\`'s \`crossover.md\`: one attention call,"
    echo "d 128, metadata amortised over its refresh schedule, against cuDNN dense on the same card; crossover N ="
    echo "below it the policy is slower; each line names its sweep):"
    echo
    awk -F, '{ src = $0; for (i = 1; i <= 11; i++) sub(/^[^,]*,/, "", src); k = $1 " " $2 " " src; if (!(k in seen)) { seen[k] = 1; mode[++nm] = k; p[k] = $1; v[k] = $2; from[k] = src }
        if ($3 == "mc-sparse") mc[k] = mc[k] (mc[k] == "" ? "" : ", ") $5 " heads: " $6 " (" ($8 == "nan" ? "—" : sprintf("%.2f×", $8)) " at 32760)"
        if ($3 != "mc-sparse" && $6 ~ /^[0-9]+$/) { had = (k SUBSEP $3) in xo; if (!had) ord[k] = ord[k] SUBSEP $3
          xo[k SUBSEP $3] = xo[k SUBSEP $3] (had ? "/" : "") $6 }
        if (!(k SUBSEP $5 in hs)) { hs[k SUBSEP $5] = 1; heads[k] = heads[k] (heads[k] == "" ? "" : "/") $5; nh[k]++ }
        if ($6 ~ /^below/ && !(k SUBSEP $3 in aw)) { aw[k SUBSEP $3] = 1; always[k] = always[k] (always[k] == "" ? "" : ", ") "`" $3 "`" }
        if ($6 == "never" && !(k SUBSEP $3 in nv)) { nv[k SUBSEP $3] = 1; never[k] = never[k] (never[k] == "" ? "" : ", ") "`" $3 "`" }
        if ($6 == "off-budget" && !(k SUBSEP $3 in ob)) { ob[k SUBSEP $3] = 1; off[k] = off[k] (off[k] == "" ? "" : ", ") "`" $3 "`" } }
      END { for (i = 1; i <= nm; i++) { k = mode[i]; others = ""; n = split(substr(ord[k], 2), po, SUBSEP)
          for (j = 1; j <= n; j++) others = others (j > 1 ? ", " : "") "`" po[j] "` " xo[k SUBSEP po[j]]
          if (others != "" && nh[k] > 1) others = others " (" heads[k] " heads)"
        printf "- path `%s`, P·V %s (%s): mc-sparse crossover N %s. Crossover N of the others: %s. Faster than dense at every N measured at ρ: %s. Never faster: %s.%s\n", p[k], v[k], from[k],
          (mc[k] == "" ? "not measured" : mc[k]), (others == "" ? "none" : others), (always[k] == "" ? "none" : always[k]), (never[k] == "" ? "none" : never[k]),
          (off[k] == "" ? "" : " Cannot reach ρ (computed density more than 0.02 from it at every N; not compared): " off[k] ".") } }' "$cross"
  else
    echo "- Where sparse stops paying: *pending*: \`STEPS=length scripts/device_all.sh\` on the H200, then"
    echo "  \`experiments/kernel_speed.sh --length callspeed.csv cudnn_length.csv --update-results\` and this script."
  fi
  echo
  echo "<!-- who-wins:end -->"
} > "$sec"
awk -v f="$sec" '$0 == "<!-- who-wins:begin -->" { while ((getline l < f) > 0) print l; skip = 1; next }
  $0 == "<!-- who-wins:end -->" { skip = 0; next } !skip' "$readme" > "$new"
mv "$new" "$readme"
echo "who_wins.sh: $readme's section filled" >&2
