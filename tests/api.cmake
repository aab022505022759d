# tests/api.cmake: libdsgap's C ABI (include/dsgap.h, src/api/) on the CPU: every policy family
# through the ABI on strided bf16/fp16/fp32 tensors against policy_run on the CPU backend (bit for
# bit), poisoned outputs, error paths, 100 contexts (test_api.c); and the shared library itself:
# loads with ctypes, reports the ABI version, exports the dsgap_* symbols only (api_so).
dg_test(test_api SOURCES test_api.c LABELS cpu)
dg_test(api_so LABELS cpu COMMAND python3 -c "
import ctypes, subprocess, sys
so = sys.argv[1]
lib = ctypes.CDLL(so)
assert lib.dsgap_abi_version() == 1, 'ABI version'
syms = [l.split()[-1] for l in subprocess.run(['nm', '-D', '--defined-only', so], capture_output=True,
        text=True, check=True).stdout.splitlines() if ' T ' in l]
bad = [s for s in syms if not s.startswith('dsgap_')]
assert not bad and len(syms) >= 6, f'exported: {syms}'
print(f'libdsgap.so: ABI 1, exports {sorted(syms)}')
" $<TARGET_FILE:dsgap_shared>)
