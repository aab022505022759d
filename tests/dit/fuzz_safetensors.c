/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors header parser (src/dit/safetensors.c):
 * any byte string is a candidate file; dg_st_parse must return 0 or -1 without crashing, and an
 * accepted header must tile the file. Not part of CTest (tests/dit/test_safetensors.c runs a
 * deterministic mutation loop there). With clang and libclang-rt-14-dev:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE \
 *     -Isrc -Ibuild/src tests/dit/fuzz_safetensors.c src/dit/safetensors.c src/util/util.c src/util/files.c \
 *     -lcjson -lm -o fuzz_safetensors          (build/src: a configured build's util/git_commit.h)
 *   mkdir -p corpus && ./fuzz_safetensors -close_fd_mask=2 -max_total_time=300 corpus tests/fixtures/wan
 * (-close_fd_mask=2 silences the one-line error of every rejected input; crashes are still reported.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dit/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dg_st_tensor *t;
	int n;
	if (dg_st_parse("fuzz", data, size, &t, &n) == 0) {
		uint64_t total = 0, hi = 0;
		for (int i = 0; i < n; i++) {
			if (t[i].offset + t[i].nbytes > size || (i && strcmp(t[i - 1].name, t[i].name) >= 0))
				abort();
			total += t[i].nbytes;
			if (t[i].offset + t[i].nbytes > hi)
				hi = t[i].offset + t[i].nbytes;
		}
		if (n && (hi != size || total > size))
			abort();
		dg_st_tensors_free(t, n);
	}
	return 0;
}
