#!/usr/bin/env python3
"""gen_steps.py (dev): per-run step times and per-forward op times of generate.json files, and the
50-step total projected from a short run's steps (warm-up W: 9 dense steps, the anchor, 40 reuse
steps, as the 720p bench's schedule warmup=10,anchors=9); a file without a dense run takes the dense
step of the last file before it that has one. Usage: gen_steps.py GEN.json..."""
import json, sys
dense = None
for f in sys.argv[1:]:
    d = json.load(open(f))
    print(f'== {f}: {d.get("device", "")[:40]} {d.get("git_commit", "")} {d.get("date", "")}')
    for r in d['runs']:
        st = r.get('step_s') or []
        fw = r['forwards']
        line = (f'  {r["policy"]:42s} steps {" ".join("%.3f" % x for x in st)}  gemm/fwd {r["gemm_s"] / fw:.4f} '
                f'elem/fwd {r["elementwise_s"] / fw:.4f} table_attn {r["table_attention_s"]:.2f} '
                f'policy {r["policy_calls_s"]:.2f} attend {r["attend_s"]:.2f} meta {r["metadata_s"]:.2f}')
        if r['policy'] == 'dense':
            dense = sum(st[1:]) / len(st[1:]) if len(st) > 1 else st[0]
        elif dense and len(st) == 4:
            D, A, R = dense, st[1], sum(st[2:]) / len(st[2:])
            p = 9 * D + A + 40 * R
            line += f'\n      dense step {D:.3f} anchor {A:.3f} reuse {R:.3f}: 50-step projection {p:.2f} s against {50 * D:.2f} s: {50 * D / p:.3f}x'
        print(line)
