"""torch_abi.py: ctypes over libdsgap.so, the C ABI of include/dsgap.h (no torch needed here).

    ctx = Context("mc-sparse", densities=[0.15], schedule="warmup=10", layers=30, heads=12, head_dim=128,
                  branches=2, grid=(21, 30, 52), device="gpu")
    ctx.attend(step, layer, branch, q, k, v, o, dtype=BF16, tokens=n, stream=ptr)   # Tensor tuples
    ctx.stats(); ctx.close()
    psnr, ssim = frames_fidelity(ref, x)   # (C, F, H, W) arrays: per-frame PSNR/SSIM (dsgap_frames_fidelity)

A tensor is passed as (address, stride_token, stride_head, stride_dim) in elements: nothing is
copied. The library is found at $DSGAP_LIB, else build/libdsgap.so of the repository this package
sits in, else the linker's search path (libdsgap.so); library_path() says the order.
"""
import ctypes
import ctypes.util
import os

ABI_VERSION = 1
BF16, FP16, FP32 = 0, 1, 2
STATUS = {0: "DSGAP_OK", 1: "DSGAP_E_ARG", 2: "DSGAP_E_POLICY", 3: "DSGAP_E_DEVICE", 4: "DSGAP_E_INDEX",
          5: "DSGAP_E_DTYPE", 6: "DSGAP_E_RUN", 7: "DSGAP_E_MEMORY"}


# what to change, by libdsgap's code, when its own message does not say
_FIX = {1: "check the arguments named above", 2: "check policy=, density= and schedule= (docs/spec.md: "
        "policy specs and schedules)", 3: "pass tensors on a device this libdsgap was built for (dsgap.torch_abi."
        "version() says cpu or gpu)", 4: "the model's shapes changed between calls: use one dsgap.torch.attention "
        "per resolution and branch count", 5: "run the model in bfloat16, float16 or float32",
        6: "the policy's reason is on stderr"}


class DsgapError(RuntimeError):
    """An error of dsgap's Python layer or of a libdsgap call: one line that starts with "dsgap:"
    and says what to do; .code is libdsgap's status (dsgap_status: 1 argument, 2 policy, 3 device,
    4 index, 5 dtype, 6 run), .status its name."""

    def __init__(self, code, message, fix=None):
        message = message[len("dsgap: "):] if message.startswith("dsgap: ") else message
        fix = _FIX.get(code, "") if fix is None else fix   # None: libdsgap's message, the fix by its code
        super().__init__(f"dsgap: {message}" + (f"; {fix}" if fix else ""))
        self.code, self.status = code, STATUS.get(code, str(code))


class _Config(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_int), ("policy", ctypes.c_char_p),
                ("densities", ctypes.POINTER(ctypes.c_double)), ("ndensities", ctypes.c_int),
                ("schedule", ctypes.c_char_p), ("layers", ctypes.c_int), ("heads", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("branches", ctypes.c_int), ("frames", ctypes.c_int),
                ("height", ctypes.c_int), ("width", ctypes.c_int), ("text_tokens", ctypes.c_int),
                ("device", ctypes.c_char_p)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride_token", ctypes.c_int64), ("stride_head", ctypes.c_int64),
                ("stride_dim", ctypes.c_int64)]


class _Stats(ctypes.Structure):
    _fields_ = [("calls", ctypes.c_longlong), ("sparse_calls", ctypes.c_longlong), ("pairs", ctypes.c_double),
                ("full_pairs", ctypes.c_double), ("seconds", ctypes.c_double), ("policy_seconds", ctypes.c_double),
                ("meta_seconds", ctypes.c_double), ("attend_seconds", ctypes.c_double)]


_lib = None


def library_path():
    """$DSGAP_LIB, else the libdsgap.so installed inside this package (pip install ./python ships the
    one built, python/build_backend.py), else build/libdsgap.so of the repository this package sits
    in, else the linker's search path"""
    p = os.environ.get("DSGAP_LIB")
    if p:
        return p
    here = os.path.dirname(os.path.abspath(__file__))
    for built in (os.path.join(here, "libdsgap.so"), os.path.join(here, "..", "..", "build", "libdsgap.so")):
        if os.path.exists(built):
            return os.path.normpath(built)
    return ctypes.util.find_library("dsgap") or "libdsgap.so"


def lib():
    """libdsgap, loaded once, its ABI version checked."""
    global _lib
    if _lib is None:
        path = library_path()
        try:
            L = ctypes.CDLL(path)
        except OSError as e:
            raise DsgapError(1, f"cannot load libdsgap at {path} ({e}): build it (cmake --build build) or set "
                                f"DSGAP_LIB to its path", fix="") from None
        L.dsgap_abi_version.restype = ctypes.c_int
        if L.dsgap_abi_version() != ABI_VERSION:
            raise DsgapError(1, f"{path} has ABI version {L.dsgap_abi_version()}, this binding {ABI_VERSION}: "
                                f"rebuild libdsgap from this checkout or set DSGAP_LIB to a matching one", fix="")
        L.dsgap_version.restype = ctypes.c_char_p
        L.dsgap_last_error.restype = ctypes.c_char_p
        L.dsgap_last_error.argtypes = [ctypes.c_void_p]
        L.dsgap_context_create.argtypes = [ctypes.POINTER(_Config), ctypes.POINTER(ctypes.c_void_p)]
        L.dsgap_attend.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int] + \
            [ctypes.POINTER(Tensor)] * 4 + [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
        L.dsgap_site_is_dense.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_int)]
        L.dsgap_context_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Stats)]
        L.dsgap_frames_fidelity.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 4 + \
            [ctypes.c_void_p, ctypes.c_void_p]
        L.dsgap_context_destroy.argtypes = [ctypes.c_void_p]
        L.dsgap_context_destroy.restype = None
        _lib = L
    return _lib


def version():
    return lib().dsgap_version().decode()


def frames_fidelity(ref, x):
    """per frame f of (C, F, H, W) arrays (any float type, read as float32): PSNR and SSIM of x against
    ref, as dsgap generate measures them (dsgap_frames_fidelity, src/dit/fidelity.c); two float64
    numpy arrays of F"""
    import numpy as np
    ref = np.ascontiguousarray(ref, dtype=np.float32)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if ref.ndim != 4 or x.shape != ref.shape:
        raise DsgapError(1, f"frames fidelity: shapes {ref.shape} and {x.shape}: pass two arrays of one "
                            f"(C, F, H, W) shape", fix="")
    C, F, H, W = ref.shape
    psnr, ssim = np.zeros(F), np.zeros(F)
    rc = lib().dsgap_frames_fidelity(ref.ctypes.data, x.ctypes.data, C, F, H, W, psnr.ctypes.data,
                                     ssim.ctypes.data)
    if rc:
        raise DsgapError(rc, lib().dsgap_last_error(None).decode())
    return psnr, ssim


class Context:
    """One model's attention under one policy (dsgap_context_create); close() or `with` frees it."""

    def __init__(self, policy, densities, schedule, layers, heads, head_dim, branches=1, grid=(1, 1, 1),
                 text_tokens=0, device="cpu"):
        L = lib()
        dens = [float(d) for d in (densities if isinstance(densities, (list, tuple)) else [densities])]
        arr = (ctypes.c_double * len(dens))(*dens)
        self._keep = arr
        cfg = _Config(ABI_VERSION, policy.encode(), arr, len(dens), (schedule or "").encode(), layers, heads,
                      head_dim, branches, int(grid[0]), int(grid[1]), int(grid[2]), text_tokens, device.encode())
        h = ctypes.c_void_p()
        rc = L.dsgap_context_create(ctypes.byref(cfg), ctypes.byref(h))
        if rc:
            raise DsgapError(rc, L.dsgap_last_error(None).decode())
        self._h = h
        self.tokens = text_tokens + int(grid[0]) * int(grid[1]) * int(grid[2])
        self.device = device

    def attend(self, step, layer, branch, q, k, v, o, dtype, tokens=None, stream=None):
        """q, k, v, o: Tensor structs (address and strides in elements) of one branch."""
        rc = lib().dsgap_attend(self._h, step, layer, branch, ctypes.byref(q), ctypes.byref(k), ctypes.byref(v),
                                ctypes.byref(o), dtype, self.tokens if tokens is None else tokens,
                                ctypes.c_void_p(stream or 0))
        if rc:
            raise DsgapError(rc, lib().dsgap_last_error(self._h).decode())

    def site_is_dense(self, step, layer, branch):
        """whether dsgap_attend at (step, layer, branch) would be plain dense attention that changes
        nothing the context keeps (dsgap_site_is_dense): the caller may compute it itself"""
        d = ctypes.c_int(0)
        rc = lib().dsgap_site_is_dense(self._h, step, layer, branch, ctypes.byref(d))
        if rc:
            raise DsgapError(rc, lib().dsgap_last_error(self._h).decode())
        return bool(d.value)

    def stats(self):
        s = _Stats()
        lib().dsgap_context_stats(self._h, ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in _Stats._fields_}

    def close(self):
        if getattr(self, "_h", None):
            lib().dsgap_context_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def numpy_tensor(a):
    """Tensor of a numpy array (tokens, heads, head_dim), any strides (in bytes there, elements here)."""
    s = a.strides
    return Tensor(a.ctypes.data, s[0] // a.itemsize, s[1] // a.itemsize, s[2] // a.itemsize)
