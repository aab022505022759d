"""test_controls.py: the checks of test_families.py catch what a wrong hook records (negative
controls), CFG branches, the generic mode, the errors, the disk check, the writer's format
against the C writer, dsgap-capture on a pipeline directory and `pip install ./python` (CPU).

  python test_controls.py WORKDIR
"""
import json
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import torch

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import dsgap  # noqa: E402
from pyhelp import Checker, attention_ref, randomize  # noqa: E402

torch.set_grad_enabled(False)
ck = Checker("controls")


def tiny_wan():
    import diffusers as D
    torch.manual_seed(0)
    m = D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                out_channels=4, text_dim=24, freq_dim=16, ffn_dim=32, num_layers=2)
    randomize(m)
    return m.eval()


def out_hook(m, store, layer=0):
    return m.blocks[layer].attn1.to_out[0].register_forward_pre_hook(lambda mod, a: store.append(a[0].clone()))


def err(q, k, v, y):
    """max rel error of softmax(QK^T/sqrt d)V (trace unit) against the model's output rows y"""
    o = attention_ref(q, k, v)
    return np.abs(o - y).max() / np.abs(y).max()


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    m = tiny_wan()
    x, cond, unc = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 5, 24), torch.randn(1, 5, 24)
    D = 16

    # --- negative control 1: a hook that skips RoPE (Q, K at the norms' outputs) -----------------
    pre = {}
    h1 = m.blocks[0].attn1.norm_q.register_forward_hook(lambda mod, a, o: pre.__setitem__("q", o.clone()))
    h2 = m.blocks[0].attn1.norm_k.register_forward_hook(lambda mod, a, o: pre.__setitem__("k", o.clone()))
    store = []
    h3 = out_hook(m, store)
    p = os.path.join(work, "good.h5")
    with dsgap.capture(m, p, layers=[0], heads=[0], dtype="float32", progress=False):
        m(hidden_states=x, timestep=torch.tensor([700.0]), encoder_hidden_states=cond)
    for h in (h1, h2, h3):
        h.remove()
    _, q, k, v = dsgap.read_trace(p)
    y = store[0][0].reshape(-1, 2, D)[:, 0].double().numpy()
    good = err(q[0, 0, 0], k[0, 0, 0], v[0, 0, 0], y)
    qn, kn = (pre[n][0].reshape(-1, 2, D)[:, 0].numpy() for n in ("q", "k"))
    bad = err(qn, kn, v[0, 0, 0], y)
    ck.check("the capture passes the attention-output check", good < 1e-5, f"{good:.1e}")
    ck.check("negative control: Q/K without RoPE fail the same check", bad > 1e-2, f"{bad:.1e}")

    # --- CFG branches: sequential (cond call first) and batched ([uncond, cond]); layer 1 (block 0's
    # self-attention comes before any text enters) -------------------------------------------------
    for branch in ("cond", "uncond"):
        store = []
        h = out_hook(m, store, 1)
        p = os.path.join(work, f"seq_{branch}.h5")
        with dsgap.capture(m, p, layers=[1], heads=[0], branch=branch, dtype="float32", progress=False):
            for t in (800.0, 400.0):
                m(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=cond)
                m(hidden_states=x, timestep=torch.tensor([t]), encoder_hidden_states=unc)
        h.remove()
        meta, q, k, v = dsgap.read_trace(p)
        ycond = [store[i][0].reshape(-1, 2, D)[:, 0].double().numpy() for i in (0, 2)]
        e = max(err(q[s, 0, 0], k[s, 0, 0], v[s, 0, 0], ycond[s]) for s in range(2))
        ck.check(f"sequential CFG, two steps: 2 steps recorded for branch={branch}", list(meta["step_index"]) == [0, 1])
        if branch == "cond":
            ck.check("sequential CFG: branch=cond equals the cond pass", e < 1e-5, f"{e:.1e}")
        else:
            ck.check("negative control: the uncond pass fails the check against cond", e > 1e-3, f"{e:.1e}")
    store = []
    h = out_hook(m, store, 1)
    p = os.path.join(work, "batched.h5")
    with dsgap.capture(m, p, layers=[1], heads=[0], dtype="float32", progress=False):
        m(hidden_states=torch.cat([x, x]), timestep=torch.tensor([600.0, 600.0]), encoder_hidden_states=torch.cat([unc, cond]))
    h.remove()
    _, q, k, v = dsgap.read_trace(p)
    e1 = err(q[0, 0, 0], k[0, 0, 0], v[0, 0, 0], store[0][1].reshape(-1, 2, D)[:, 0].double().numpy())
    e0 = err(q[0, 0, 0], k[0, 0, 0], v[0, 0, 0], store[0][0].reshape(-1, 2, D)[:, 0].double().numpy())
    ck.check("batched CFG: branch=cond is batch item 1 (diffusers' [uncond, cond])", e1 < 1e-5 and e0 > 1e-3,
             f"{e1:.1e} / {e0:.1e}")

    # --- generic mode: any module calling F.scaled_dot_product_attention ---------------------------
    class Joint(torch.nn.Module):
        def forward(self, video, text, timestep):
            qkv = torch.cat([text, video], 2)            # (B, H, S, D): [text, video]
            for _ in range(3):
                qkv = torch.nn.functional.scaled_dot_product_attention(qkv, qkv * 0.5, qkv) + qkv
            return qkv
    vid, txt = torch.randn(1, 2, 2 * 3 * 4, 8), torch.randn(1, 2, 5, 8)
    p = os.path.join(work, "generic.h5")
    j = Joint()
    with dsgap.capture(j, p, layers=[1], layout="text,video", grid=(2, 3, 4), progress=False):
        j(vid, txt, torch.tensor([500.0]))
    meta, q, k, v = dsgap.read_trace(p)
    ck.check("generic mode: layout text,video, grid and text tokens recorded",
             tuple(meta["grid"]) == (2, 3, 4) and meta["text_tokens"] == 5 and q.shape == (1, 1, 2, 29, 8))
    r = subprocess.run([os.environ["DSGAP"], "info", "--check", p], capture_output=True, text=True)
    ck.check("dsgap info --check accepts the generic trace", r.returncode == 0, r.stderr)

    # --- errors ------------------------------------------------------------------------------------
    def raises(what, fn, needle):
        try:
            fn()
        except (dsgap.CaptureError, dsgap.TraceError) as e:
            return ck.check(what, needle in str(e), str(e))
        return ck.check(what, False, "no error")

    raises("an unsupported model names the supported ones and the generic mode",
           lambda: dsgap.capture(torch.nn.Linear(2, 2), os.path.join(work, "x.h5")), "generic")

    class Proc:  # an attention processor that does not call SDPA (a custom kernel, say)
        def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, rotary_emb=None):
            return attn.to_out[0](attn.to_v(hidden_states))
    m2 = tiny_wan()
    m2.blocks[0].attn1.set_processor(Proc())

    def run_unsupported():
        with dsgap.capture(m2, os.path.join(work, "u.h5"), progress=False):
            m2(hidden_states=x, timestep=torch.tensor([1.0]), encoder_hidden_states=cond)
    raises("unsupported attention: a clear error naming the layer and processor", run_unsupported,
           "unsupported attention in layer 0")
    ck.check("no partial trace is left after an error", not os.path.exists(os.path.join(work, "u.h5")) and
             not any(f.startswith("u.h5.tmp") for f in os.listdir(work)))

    def run_big():
        import dsgap.trace as tr
        tr.disk_check(os.path.join(work, "big.h5"), 1 << 60)
    raises("the disk check states the size needed", run_big, "GiB uncompressed")

    def run_missing_step():
        with dsgap.capture(m, os.path.join(work, "s.h5"), steps=[0, 5], progress=False):
            m(hidden_states=x, timestep=torch.tensor([1.0]), encoder_hidden_states=cond)
    raises("a requested step the run never reaches is an error", run_missing_step, "step 5 was requested")

    # --- the Python writer's deflate file against the C writer's (dsgap synth) ---------------------
    syn = os.path.join(work, "synth.h5")
    subprocess.run([os.environ["DSGAP"], "synth", "--out", syn, "--grid", "2x4x4", "--heads", "2", "--head-dim", "32",
                    "--layers", "1", "--steps", "2"], check=True, capture_output=True)
    meta, q, k, v = dsgap.read_trace(syn)
    py = os.path.join(work, "rewritten.h5")
    dsgap.write_trace(py, q, k, v, grid=meta["grid"], text_tokens=meta["text_tokens"], step_index=meta["step_index"],
                      timestep=meta["timestep"], sigma=meta["sigma"], model=meta["model"], config=meta["config"],
                      compression="deflate")

    def layout(path):
        with h5py.File(path) as f:
            d = f["q"]
            t = d.id.get_type()
            pl = d.id.get_create_plist()
            filters = [pl.get_filter(i)[0] for i in range(pl.get_nfilters())]
            return dict(keys=sorted(f.keys()), attrs=sorted(f.attrs.keys()), chunks=d.chunks, filters=filters,
                        type=(t.get_size(), t.get_fields(), t.get_ebias(), t.get_order()),
                        attr_types={k: (f.attrs.get_id(k).get_type().get_class(), f.attrs.get_id(k).get_type().is_variable_str()
                                        if f.attrs.get_id(k).get_type().get_class() == h5py.h5t.STRING else None)
                                    for k in f.attrs.keys()},
                        dtypes={k: f[k].dtype.str for k in f.keys() if k not in ("q", "k", "v", "latents")})
    a, b = layout(syn), layout(py)
    ck.check("same datasets, attributes, chunking, filters, bf16 type and dtypes as the C writer", a == b, f"{a} vs {b}")
    with h5py.File(syn) as f1, h5py.File(py) as f2:
        same = all(f1[n].id.read_direct_chunk((s, 0, h, 0, 0))[1] == f2[n].id.read_direct_chunk((s, 0, h, 0, 0))[1]
                   for n in ("q", "k", "v") for s in range(2) for h in range(2))
    ck.check("byte-identical compressed chunks to the C writer's", same)
    r = subprocess.run([os.environ["DSGAP"], "info", "--check", "--json", py], capture_output=True, text=True)
    ck.check("dsgap info --check accepts the rewritten trace", r.returncode == 0 and json.loads(r.stdout)["checked"], r.stderr)

    # --- dsgap-capture on a pipeline directory: a tiny flow-matching video pipeline with sequential CFG
    # (diffusers' real pipelines need transformers' text encoders, not in the test environment), found
    # by diffusers.DiffusionPipeline.from_pretrained through the diffusers namespace --------------------
    import diffusers as Dif
    from dsgap import cli as dsgap_cli
    from safetensors.torch import save_file

    class TinyVideoPipeline(Dif.DiffusionPipeline):
        def __init__(self, transformer, scheduler):
            super().__init__()
            self.register_modules(transformer=transformer, scheduler=scheduler)

        def __call__(self, prompt_embeds=None, num_inference_steps=3, height=16, width=16, num_frames=5,
                     guidance_scale=2.0, generator=None, output_type="latent"):
            x = torch.randn(1, 4, (num_frames - 1) // 4 + 1, height // 8, width // 8, generator=generator)
            self.scheduler.set_timesteps(num_inference_steps)
            for t in self.scheduler.timesteps:
                tt = t.expand(1)
                c = self.transformer(hidden_states=x, timestep=tt, encoder_hidden_states=prompt_embeds)[0]
                u = self.transformer(hidden_states=x, timestep=tt, encoder_hidden_states=-prompt_embeds)[0]
                x = self.scheduler.step(u + guidance_scale * (c - u), t, x)[0]
            return x
    Dif.TinyVideoPipeline = TinyVideoPipeline
    pipe_dir = os.path.join(work, "pipe")
    TinyVideoPipeline(tiny_wan(), Dif.FlowMatchEulerDiscreteScheduler(shift=3.0)).save_pretrained(pipe_dir)
    save_file({"text": torch.randn(1, 5, 24)}, os.path.join(work, "emb.safetensors"))
    out = os.path.join(work, "cli.h5")
    import contextlib
    import io
    errbuf = io.StringIO()
    with contextlib.redirect_stderr(errbuf):
        rc = dsgap_cli.main([pipe_dir, "--prompt-embeds", os.path.join(work, "emb.safetensors"), "--out", out,
                             "--steps", "3", "--height", "16", "--width", "16", "--frames", "5", "--guidance", "2",
                             "--capture-steps", "0,2", "--layers", "0-1", "--heads", "1", "--device", "cpu",
                             "--compression", "deflate"])
    err_text = errbuf.getvalue()
    ok = rc == 0 and os.path.exists(out)
    ck.check("dsgap-capture runs a pipeline directory offline", ok, err_text[-2000:])
    if ok:
        meta, q, _, _ = dsgap.read_trace(out)
        ck.check("dsgap-capture: steps 0,2, layers 0-1, head 1, grid 2x1x1 as asked",
                 list(meta["step_index"]) == [0, 2] and list(meta["layer_index"]) == [0, 1] and
                 list(meta["head_index"]) == [1] and tuple(meta["grid"]) == (2, 1, 1), f"{meta['step_index']} {meta['grid']}")
        ck.check("dsgap-capture: /sigma from the scheduler, decreasing", meta["sigma"][0] > meta["sigma"][1] > 0, meta["sigma"])
        with h5py.File(out) as f:
            pl = f["q"].id.get_create_plist()
            filters = [pl.get_filter(i)[0] for i in range(pl.get_nfilters())]
        ck.check("dsgap-capture --compression deflate: shuffle + deflate chunks",
                 filters == [h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_DEFLATE], filters)
        ck.check("dsgap-capture shows a progress bar", "dsgap capture [" in err_text, err_text[-300:])
    # a pipeline with two experts (Wan2.2 A14B's transformer and transformer_2, switched at a boundary
    # timestep): dsgap-capture records both in one trace, each step from the expert that ran it
    class TinyExpertPipeline(Dif.DiffusionPipeline):
        def __init__(self, transformer, transformer_2, scheduler):
            super().__init__()
            self.register_modules(transformer=transformer, transformer_2=transformer_2, scheduler=scheduler)

        def __call__(self, prompt_embeds=None, num_inference_steps=4, height=16, width=16, num_frames=5,
                     generator=None, output_type="latent"):
            x = torch.randn(1, 4, (num_frames - 1) // 4 + 1, height // 8, width // 8, generator=generator)
            self.scheduler.set_timesteps(num_inference_steps)
            for i, t in enumerate(self.scheduler.timesteps):
                m = self.transformer if i < num_inference_steps // 2 else self.transformer_2
                x = self.scheduler.step(m(hidden_states=x, timestep=t.expand(1), encoder_hidden_states=prompt_embeds)[0],
                                        t, x)[0]
            return x
    Dif.TinyExpertPipeline = TinyExpertPipeline
    pipe2 = os.path.join(work, "pipe2")
    torch.manual_seed(1)
    second = tiny_wan()
    randomize(second, seed=1)
    TinyExpertPipeline(tiny_wan(), second, Dif.FlowMatchEulerDiscreteScheduler(shift=3.0)).save_pretrained(pipe2)
    out2 = os.path.join(work, "cli2.h5")
    with contextlib.redirect_stderr(io.StringIO()):
        rc = dsgap_cli.main([pipe2, "--prompt-embeds", os.path.join(work, "emb.safetensors"), "--out", out2,
                             "--steps", "4", "--height", "16", "--width", "16", "--frames", "5", "--device", "cpu",
                             "--quiet"])
    experts = None
    if rc == 0 and os.path.exists(out2):
        with h5py.File(out2) as f:
            experts = json.loads(f.attrs["config"])["capture"].get("experts", {}).get("expert_of_step")
    ck.check("dsgap-capture on a two-expert pipeline: one trace, steps 0-1 from transformer, 2-3 from transformer_2",
             experts == [0, 0, 1, 1], f"rc {rc}, experts {experts}")
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
    r = subprocess.run([sys.executable, "-m", "dsgap.cli", work, "--prompt", "x", "--out", out],
                       capture_output=True, text=True, env=env)
    ck.check("dsgap-capture: a directory without model_index.json is a one-line error",
             r.returncode == 2 and "model_index.json" in r.stderr, r.stderr)

    # --- pip install ./python ----------------------------------------------------------------------
    # from the source tree itself (issue 51): nothing written there (no build/, no *.egg-info: the
    # package's backend, python/build_backend.py, builds on a copy), libdsgap shipped in the package
    # ($DSGAP_LIB, as tests/python.cmake sets it) and found from it with DSGAP_LIB unset
    tgt = os.path.join(work, "site")
    shutil.rmtree(tgt, ignore_errors=True)
    pysrc = os.path.join(SRC, "python")

    def tree():
        return sorted(os.path.relpath(os.path.join(d, f), pysrc) for d, dirs, files in os.walk(pysrc) for f in files + dirs
                      if "__pycache__" not in d and f != "__pycache__")
    before = tree()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", tgt,
                        pysrc], capture_output=True, text=True, cwd=work)
    after = tree()
    ck.check("pip install ./python", r.returncode == 0 and os.path.exists(os.path.join(tgt, "dsgap", "capture.py")) and
             os.path.exists(os.path.join(tgt, "bin", "dsgap-capture")), r.stderr[-1000:])
    ck.check("pip install ./python leaves the source tree as it was (no build/, no *.egg-info)", before == after,
             f"new: {sorted(set(after) - set(before))}")
    env = {k: v for k, v in os.environ.items() if k != "DSGAP_LIB"}
    env["PYTHONPATH"] = tgt
    r = subprocess.run([sys.executable, "-c", "import dsgap.torch_abi as a; print(a.library_path()); print(a.version())"],
                       capture_output=True, text=True, env=env, cwd=work)
    ck.check("after pip install, dsgap.torch_abi finds the libdsgap shipped in the package (DSGAP_LIB unset)",
             r.returncode == 0 and r.stdout.startswith(os.path.join(tgt, "dsgap", "libdsgap.so")) and "0.1.0" in r.stdout,
             (r.stdout + r.stderr)[-500:])
    return ck.done()


if __name__ == "__main__":
    sys.exit(main())
