#!/usr/bin/env python3
"""layers.py: src/ is one folder per layer, and a file includes only from its own folder or a layer
below it. The order is defined here (docs/architecture.md explains it); siblings of one rank may not
include each other. Also fails on a folder of src/ that has no rank, an include of a src/ header
without its folder, and an include of a header that does not exist.
  python3 tests/repo/layers.py SRC_DIR"""
import os
import re
import sys

RANK = {"util": 0, "trace": 1, "policy": 2, "backend": 3,
        "replay": 4, "dit": 4, "analysis": 4, "api": 5, "bench": 5, "loop": 5, "batch": 6, "cli": 7}
GENERATED = {"analysis/style_gp.h", "util/git_commit.h"}  # made by CMake in the build tree
EXTERNAL = {"dsgap_kernels.h", "api_convert.h",  # kernels/: below every layer of src/
            "dsgap.h",  # include/: libdsgap's public header, what src/api/ implements
            "dsgap_budget.h"}  # include/: the budget rule shared with the kernels

def main(src):
    errors = []
    headers = set()
    for layer in sorted(os.listdir(src)):
        path = os.path.join(src, layer)
        if not os.path.isdir(path):
            continue
        if layer not in RANK:
            errors.append(f"src/{layer}/: a folder with no layer rank (tests/repo/layers.py)")
            continue
        headers.update(f"{layer}/{f}" for f in os.listdir(path) if f.endswith(".h"))
    nfiles = 0
    for layer in sorted(RANK):
        path = os.path.join(src, layer)
        if not os.path.isdir(path):
            errors.append(f"src/{layer}/: missing")
            continue
        for f in sorted(os.listdir(path)):
            if not f.endswith((".c", ".h")):
                continue
            nfiles += 1
            with open(os.path.join(path, f)) as fh:
                for lineno, line in enumerate(fh, 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m:
                        continue
                    inc, where = m.group(1), f"src/{layer}/{f}:{lineno}"
                    if inc in EXTERNAL:
                        continue
                    if "/" not in inc:
                        errors.append(f'{where}: "{inc}" without its folder')
                        continue
                    folder = inc.split("/")[0]
                    if folder not in RANK:
                        errors.append(f'{where}: "{inc}": no such layer')
                    elif inc not in headers and inc not in GENERATED:
                        errors.append(f'{where}: "{inc}": no such header')
                    elif folder != layer and RANK[folder] >= RANK[layer]:
                        errors.append(f'{where}: "{inc}" runs up a layer ({layer} {RANK[layer]} '
                                      f'includes {folder} {RANK[folder]})')
    for e in errors:
        print(e)
    print(f"layers: {nfiles} files, {len(errors)} violations")
    return 1 if errors or nfiles == 0 else 0

def self_test():
    """the check fails on each kind of violation, in a copy of the folder skeleton"""
    import tempfile
    cases = [("policy/x.c", '#include "cli/commands.h"'),      # up a layer
             ("dit/x.c", '#include "replay/replay.h"'),        # a sibling
             ("trace/x.c", '#include "util.h"'),               # no folder
             ("trace/x.c", '#include "util/nothere.h"')]       # no such header
    for rel, text in cases:
        with tempfile.TemporaryDirectory() as d:
            for layer in RANK:
                os.makedirs(os.path.join(d, layer))
            for h in ("cli/commands.h", "replay/replay.h", "util/util.h"):
                open(os.path.join(d, h), "w").close()
            with open(os.path.join(d, rel), "w") as fh:
                fh.write(text + "\n")
            if main(d) == 0:
                print(f"self-test: {rel} with {text} passed the check")
                return 1
    print("self-test: every violation caught")
    return 0

if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1] == "--self-test" else main(sys.argv[1]))
