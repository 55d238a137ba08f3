#!/usr/bin/env python3
"""Fails on an #include in src/ or include/ that points up the layers (docs/design.md).

Each file of src/<layer>/ and include/kiln/<layer>/ belongs to <layer>; an include of
"kiln/<layer>/..." or "<layer>/..." (a public or an internal header) points at <layer>.
A layer may include itself and the layers below it, as LAYERS lists them, and nothing
else; include/kiln/kiln.hpp, the umbrella header, may include every public header.

    check_layers.py ROOT          check the tree at ROOT (the repository)
    check_layers.py --self-test   check that an upward include in a made-up tree fails
"""
import os
import re
import sys
import tempfile

# What each layer may include besides itself: the arrows of docs/design.md's picture.
LAYERS = {
    "core": set(),
    "mpi": set(),  # the MPI plugin: its C ABI, below the runtime that loads it
    "runtime": {"core", "mpi"},
    "ir": {"core"},
    "stage": {"core", "ir"},
    "io": {"core", "ir", "stage"},  # tensors in files (.npy, safetensors)
    "compiler": {"core", "ir", "stage", "io", "runtime"},
    "onnx": {"core", "ir", "stage", "io"},  # ONNX import, through the staging API
}
UMBRELLA = os.path.join("include", "kiln", "kiln.hpp")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc")


def layer_of_file(relative):
    parts = relative.split(os.sep)
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "kiln":
        return parts[2]
    return None


def layer_of_include(name):
    parts = name.split("/")
    if parts[0] == "kiln" and len(parts) > 2:
        return parts[1]
    if len(parts) > 1 and parts[0] in LAYERS:
        return parts[0]
    return None  # a system or third-party header, or one beside the including file


def violations(root):
    """Every upward or unknown arrow under root: (file, line number, include, why)."""
    found = []
    for top in ("src", "include"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCES):
                    continue
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, root)
                if relative == UMBRELLA:
                    continue
                layer = layer_of_file(relative)
                if layer is None:
                    continue
                if layer not in LAYERS:
                    found.append((relative, 0, "", f"folder '{layer}' is no layer in LAYERS"))
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        target = layer_of_include(m.group(1)) if m else None
                        if target is None or target == layer:
                            continue
                        if target not in LAYERS:
                            why = f"'{target}' is no layer in LAYERS"
                        elif target not in LAYERS[layer]:
                            why = (f"{layer} may include only "
                                   f"{', '.join(sorted(LAYERS[layer])) or 'itself'}: "
                                   f"{target} is not below it")
                        else:
                            continue
                        found.append((relative, number, m.group(1), why))
    return found


def report(found):
    for relative, number, name, why in found:
        where = f"{relative}:{number}" if number else relative
        print(f'{where}: #include "{name}": {why}' if name else f"{where}: {why}")


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(relative, text):
            path = os.path.join(root, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)

        write("src/ir/graph.cpp", '#include "kiln/ir/graph.hpp"\n#include "core/str.hpp"\n')
        write("include/kiln/ir/graph.hpp", '#include "kiln/core/shape.hpp"\n')
        if violations(root):
            print("self-test: downward includes were reported")
            return 1
        write("src/ir/printer.cpp", '#include <map>\n#include "compiler/kernels.hpp"\n')
        write("include/kiln/core/dtype.hpp", '#include "kiln/stage/tensor.hpp"\n')
        found = violations(root)
        want = {("src/ir/printer.cpp", 2), ("include/kiln/core/dtype.hpp", 1)}
        if {(f.replace(os.sep, "/"), n) for f, n, _, _ in found} != want:
            report(found)
            print(f"self-test: expected exactly the upward includes {sorted(want)}")
            return 1
    print("self-test: the upward includes of a made-up tree are found, the others not")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    found = violations(sys.argv[1])
    report(found)
    if found:
        print(f"{len(found)} include(s) point up the layers: move the code to the layer it "
              "needs, or change LAYERS and docs/design.md's picture together")
        return 1
    print(f"layering: every include of src/ and include/ points down ({', '.join(LAYERS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
