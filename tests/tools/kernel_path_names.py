#!/usr/bin/env python3
"""Every path a cuda launcher notes (KernelPaths::note in kernels/**/*.cu) is in the registry
(kKernelPathNames, kernels/backend/kernel_paths.h), and every registered name is noted by some
launcher. The registry is what qwen-pages' cuda test measures a run's missing kernels against;
this check keeps it true on a machine without a GPU, where no launcher runs.

usage: kernel_path_names.py REPO_ROOT"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
header = (root / "kernels/backend/kernel_paths.h").read_text()
block = re.search(r"kKernelPathNames\[\]\s*=\s*\{(.*?)\};", header, re.S)
if not block:
    sys.exit("kernel_paths.h: no kKernelPathNames")
registry = re.findall(r'"([^"]*)"', block.group(1))
prefix = re.search(r'kKernelPathShortPrefix\s*=\s*"([^"]*)"', header).group(1)

noted = {}  # literal -> first file:line
calls = 0
for f in sorted((root / "kernels").rglob("*.cu")):
    text = f.read_text()
    for m in re.finditer(r"KernelPaths::note\(", text):
        calls += 1
        # the call's argument: up to the matching parenthesis
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        arg = text[m.end():i - 1]
        lits = re.findall(r'"([^"]*)"', arg)
        if not lits:
            sys.exit(f"{f.relative_to(root)}: a note without a literal: {arg!r}")
        for lit in lits:
            noted.setdefault(lit, f"{f.relative_to(root)}:{text.count(chr(10), 0, m.start()) + 1}")

bad = [f"{where}: noted '{lit}' is not in kKernelPathNames" for lit, where in noted.items()
       if lit not in registry and lit != prefix]
bad += [f"kKernelPathNames: '{n}' is noted by no launcher" for n in registry if n not in noted]
for line in bad:
    print(line)
print(f"{calls} note calls, {len(noted)} literals, {len(registry)} registered names: "
      f"{'ok' if not bad else str(len(bad)) + ' problems'}")
sys.exit(1 if bad else 0)
