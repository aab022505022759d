"""test_memory.py: libdsgap never ends its caller on memory (issue 51 item 7): out of memory at
dsgap_context_create and in a call is DSGAP_E_MEMORY (7) with a message naming the bytes and the
token count that would fit, and the calling process goes on. Driven through ctypes (dsgap's
torch_abi.py, loaded without torch) in a child process under an address-space limit (RLIMIT_AS).

  python test_memory.py            (DSGAP_LIB: libdsgap.so, set by tests/python.cmake)

  1. create under a limit of the process's size + 256 MB: a Wan2.1-1.3B-sized context at 480p
     (32760 tokens, 12 heads x 128, 30 layers; 0.8 GB of operand buffers alone) returns 7, the message
     names the bytes, the need, the limit and "at most N tokens ... would fit"; a context of N tokens
     is then made under the same limit, and a small one attends (the library still works);
  2. a call: a context of 65536 tokens that was made, then the limit lowered to 150 MB above what the
     process holds (below the call's working memory): dsgap_attend returns 7 naming the step, layer
     and branch, before any work; with the limit raised again a context attends and equals dense
     attention at density 1 (float64 reference);
  3. the child exits 0 and prints its own last line (the process survived); without the trap it
     would end with "fatal: out of memory" and exit 1.
"""
import os
import re
import resource
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_abi():
    import importlib.util
    spec = importlib.util.spec_from_file_location("torch_abi", os.path.join(HERE, "..", "..", "python", "dsgap",
                                                                            "torch_abi.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def vm_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def limit(extra):
    lim = vm_bytes() + extra
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (lim, hard))
    return lim


def unlimit():
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def child():
    import numpy as np
    abi = load_abi()
    abi.lib()
    rng = np.random.default_rng(0)

    def qkv(n, H, d):
        return [rng.standard_normal((n, H, d)).astype(np.float32) for _ in range(3)] + [np.zeros((n, H, d), np.float32)]

    def attend(ctx, step, layer, x, n):
        q, k, v, o = x
        ctx.attend(step, layer, 0, abi.numpy_tensor(q), abi.numpy_tensor(k), abi.numpy_tensor(v),
                   abi.numpy_tensor(o), abi.FP32, n)

    # the thread pool made before any limit (libgomp cannot make threads under a tight one)
    with abi.Context("dense", [1.0], "", 1, 1, 64, 1, (1, 4, 4), 0, "cpu") as c:
        attend(c, 0, 0, qkv(16, 1, 64), 16)

    # 1. create
    limit(256 << 20)
    try:
        abi.Context("mc-sparse", [0.15], "", 30, 12, 128, 2, (21, 30, 52), 0, "cpu")
        print("RESULT create-ok")
    except abi.DsgapError as e:
        print(f"RESULT create-error {e.code} {e}")
        m = re.search(r"at most (\d+) tokens", str(e))
        if m:
            n = int(m.group(1))
            try:
                abi.Context("mc-sparse", [0.15], "", 30, 12, 128, 2, (1, 1, n), 0, "cpu").close()
                print(f"RESULT fits-ok {n}")
            except abi.DsgapError as e2:
                print(f"RESULT fits-error {n} {e2}")
    unlimit()
    with abi.Context("dense", [1.0], "", 1, 2, 64, 1, (1, 4, 4), 0, "cpu") as c:
        attend(c, 0, 0, qkv(16, 2, 64), 16)
        print("RESULT small-ok")

    # 2. a call: 65536 tokens, whose working memory (the exact scores of 512 groups alone: 134 MB) is
    # over the limit's 150 MB of room (room enough for OpenBLAS's own buffer, which it would retry forever)
    big = abi.Context("mc-sparse", [0.25], "", 2, 1, 64, 1, (1, 256, 256), 0, "cpu")
    n = 65536
    x = qkv(n, 1, 64)
    limit(150 << 20)
    try:
        attend(big, 0, 1, x, n)
        print("RESULT call-ok")
    except abi.DsgapError as e:
        print(f"RESULT call-error {e.code} {e}")
    unlimit()
    big.close()
    del x
    n, H, d = 1024, 2, 64
    with abi.Context("mc-sparse", [1.0], "", 2, H, d, 1, (1, 32, 32), 0, "cpu") as ctx:
        x = qkv(n, H, d)
        attend(ctx, 0, 1, x, n)
    q, k, v, o = x
    s = np.einsum("ihd,jhd->hij", q.astype(np.float64), k) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("hij,jhd->ihd", p / p.sum(-1, keepdims=True), v)
    err = float(np.abs(o - ref).max() / np.abs(ref).max())
    print(f"RESULT after-ok {err:.2e}")
    print("RESULT survived")


def main():
    sys.path.insert(0, HERE)
    from pyhelp import Checker
    ck = Checker("memory")
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-B", __file__, "--child"], env=env, capture_output=True, text=True,
                       timeout=300)
    out = p.stdout + p.stderr
    print(out)
    res = {}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            key, _, rest = line[7:].partition(" ")
            res[key] = rest
    ce = res.get("create-error", "")
    ck.check("create out of memory: code 7 (DSGAP_E_MEMORY), 'dsgap:', the bytes, the need, the limit, what fits",
             ce.startswith("7 dsgap: out of memory (") and "making the context" in ce and "needs about" in ce and
             "RLIMIT_AS" in ce and "would fit" in ce and "fatal" not in out, ce[:400])
    ck.check("the token count the message names can be made under the same limit", "fits-ok" in res,
             res.get("fits-ok", res.get("fits-error")))
    ck.check("after it, a context is made and attends (the library still works)", "small-ok" in res)
    cl = res.get("call-error", "")
    ck.check("a call out of memory: code 7, naming the step, layer, branch and what would fit, before any work",
             cl.startswith("7 dsgap: out of memory (") and "at step 0, layer 1, branch 0" in cl and "tokens" in cl, cl[:400])
    ae = res.get("after-ok")
    ck.check("with memory back, a context attends = dense attention at density 1",
             ae is not None and float(ae) < 1e-5, ae)
    ck.check("the process survived: exit 0, its last line printed", p.returncode == 0 and "survived" in res,
             f"exit {p.returncode}")
    return ck.done()


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        sys.exit(main())
