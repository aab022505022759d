#!/usr/bin/env bash
# dev_mass_vs_error.sh: dev/mass_vs_error.py (issue 50, item 7: why per-token selection keeps more
# probability mass yet can give more error than block selection) against dsgap replay: on a synthetic
# trace (1024 tokens, 2 layers x 2 heads, 3 steps) its numpy oracle-tile and oracle-block selections
# give every unit's rel_l2 and mean retained mass as the replay's metrics.csv does (independent code:
# float64 numpy, the replay's C), the error identity O^ - O = (1 - m)(kept mean - dropped mean) holds
# per query, and per-token selection keeps at least the mass of block selection in every unit.
# Run: ctest -R dev_mass_vs_error (needs $DSGAP, $DSGAP_SOURCE and the venv's numpy and h5py).
. "$(dirname "$0")/../lib.sh" mass_vs_error
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
PY=${DSGAP_VENV:-/opt/dsgap-venv}/bin/python
"$DSGAP" synth --out "$tmp/t.h5" --grid 4x16x16 --heads 2 --layers 2 --steps 3 --seed 5 > /dev/null
"$DSGAP" replay "$tmp/t.h5" --policies oracle-tile,oracle-block --density 0.25 --schedule warmup=1 \
  --out "$tmp/r" --quiet > /dev/null 2>&1
check "the replay of oracle-tile and oracle-block" [ -s "$tmp/r/metrics.csv" ]
"$PY" "$DSGAP_SOURCE/dev/mass_vs_error.py" "$tmp/t.h5" --metrics "$tmp/r/metrics.csv" --density 0.25 \
  --warmup 1 > "$tmp/out" 2>&1
check "mass_vs_error.py: every unit's rel_l2 and mean mass as the replay's (exit 0)" [ $? -eq 0 ] || cat "$tmp/out"
check "mass_vs_error.py: 8 units x 2 selections compared" grep -q "metrics.csv: 16 rows (8 units x 2 selections), rel_l2 within" "$tmp/out"
check "the identity O^ - O = (1 - m)(kept mean - dropped mean) to rounding, both selections" \
  awk '/^oracle-(tile|block) / { n++; if ($NF + 0 > 1e-9) bad++ } END { exit !(n == 2 && !bad) }' "$tmp/out"
check "per-token selection keeps at least block selection's mean mass, unit by unit (metrics.csv)" \
  awk -F, 'NR > 1 && $4 >= 1 { m[$1, $4, $5, $6] = $11; k[$4, $5, $6] = 1 }
    END { for (u in k) { n++; if (m["oracle-tile", u] < m["oracle-block", u] - 1e-6) bad++ } exit !(n == 8 && !bad) }' "$tmp/r/metrics.csv"
finish
