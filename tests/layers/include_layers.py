#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer above its own (docs/architecture.md).

Every folder that holds sources has a layer below: the folders it may include from are its own
and, transitively, those its layer sees. An include of another project folder is an error that
names the file, the line and the rule it breaks; a folder with sources and no layer is an error
too, so a new folder has to be placed. tests/, bench/ and fuzz/ may include anything and are not
checked. Includes of headers beside the file ("plan.h") and of third-party headers (<...>) are
not project-folder includes and pass.

Usage: include_layers.py REPO_ROOT      check the repository
       include_layers.py --self-test    check that an upward include, an unknown folder and a
                                        test header in a library are caught
"""
import os
import re
import sys
import tempfile

# folder -> the folders it sees directly. The order of the layer diagram in
# docs/architecture.md, from the bottom.
SEES = {
    "core": [],
    "profiles": ["core"],
    "traces": ["core"],
    "models/catalog": ["core"],
    "models/cost": ["models/catalog", "profiles"],
    "models/calibration": ["models/cost"],
    "sim": ["models/calibration"],
    "dllm": ["models/calibration"],
    "policies": ["sim", "dllm"],
    "scenarios": ["policies", "traces"],
    "reports": ["core"],
    "app": ["scenarios", "reports"],
}
# Single headers a folder may include from a layer it does not otherwise see: the engine's
# record and view value types (header-only, over core), which the results store writes.
HEADER_EXCEPTIONS = {
    "reports": {"sim/records.h", "sim/view.h"},
}
UNCHECKED = ("tests", "bench", "fuzz", "build", "docs", ".git")
SOURCE_SUFFIXES = (".cc", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed_folders(folder):
    seen, stack = set(), [folder]
    while stack:
        f = stack.pop()
        if f not in seen:
            seen.add(f)
            stack.extend(SEES[f])
    return seen


def layer_of(path):
    """The layer folder a repository-relative path lies in, or None."""
    best = None
    for folder in SEES:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def project_folders(root):
    return {name for name in os.listdir(root) if os.path.isdir(os.path.join(root, name))}


def check(root):
    errors = []
    top_folders = project_folders(root)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in UNCHECKED and not d.startswith("build")]
            continue
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            rel = os.path.join(rel_dir, name)
            folder = layer_of(rel)
            if folder is None:
                errors.append(f"{rel}: folder {rel_dir} has no layer (add it to SEES in {__file__})")
                continue
            allowed = allowed_folders(folder)
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                for line_no, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m or "/" not in m.group(1):
                        continue
                    header = m.group(1)
                    if header.split("/")[0] not in top_folders:
                        continue  # not a project folder
                    target = layer_of(header)
                    if target in allowed or header in HEADER_EXCEPTIONS.get(folder, ()):
                        continue
                    seen = ", ".join(sorted(allowed))
                    errors.append(f'{rel}:{line_no}: includes "{header}" ({target or "outside every layer"}); '
                                  f"{folder} sees only {seen}")
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        write("core/time.h", '#include "core/error.h"\n#include <vector>\n#include "local.h"\n')
        write("sim/engine.cc", '#include "models/cost/cost_model.h"\n#include "core/time.h"\n')
        write("reports/sink.cc", '#include "sim/records.h"\n')
        write("tests/any_test.cc", '#include "app/main.h"\n')
        if check(root):
            print("self-test: a tree that keeps its layers was reported:", *check(root), sep="\n  ")
            return 1
        write("core/rng.cc", '#include "core/time.h"\n\n#include "sim/engine.h"\n')
        write("reports/query.cc", '#include "sim/engine.h"\n')
        write("policies/coloc.cc", '#include "tests/unit/fixture.h"\n')
        write("newlayer/x.cc", "")
        errors = check(root)
        expected = ['core/rng.cc:3: includes "sim/engine.h"', 'reports/query.cc:1: includes "sim/engine.h"',
                    'policies/coloc.cc:1: includes "tests/unit/fixture.h"', "newlayer/x.cc: folder newlayer"]
        missing = [e for e in expected if not any(err.startswith(e) for err in errors)]
        if missing or len(errors) != len(expected):
            print("self-test: expected errors", expected, "got", errors, sep="\n  ")
            return 1
    print("self-test: upward includes, a test header in a library and an unplaced folder are caught")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} include(s) cross a layer upward (docs/architecture.md, Layers)")
        return 1
    print("every include stays within its layer or below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
