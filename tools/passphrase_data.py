#!/usr/bin/env python3
"""Synthetic passphrase-retrieval sequences for the long-context fixture model (issue 18).

One sequence of `length` tokens is filler (a slice of the byte corpus) with a plant at
`plant_at` tokens into it and the ask and the answer at the end:

    filler[:plant_at] + PLANT(p) + filler[plant_at:] + ASK + p

where p is a passphrase of random characters (no word the model could guess from its
prior), so the answer bytes can only come from the plant. This is the layout of the
kv-gate's recall probes (engine/kv_gate.cpp, probe_tokens): there the filler is the frozen
token stream and the plant sits at half the depth; in training the plant position is
uniform over the filler.

Pure Python (no torch), so that the layout can be checked on any machine:

  python3 tools/passphrase_data.py --seed 18 --count 8      # passphrases for a fixture
  python3 tools/passphrase_data.py --self-test

Exit 0 printed (or the self-test passed); 2 bad arguments (--count below 1), one line naming it.
"""
import argparse
import json
import random
import sys

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # 32 symbols: no I, O, 0, 1
GROUPS = (4, 4)                                # "QX7M-4KDP": 9 bytes, 40 bits
PLANT = "\nThe passphrase is {passphrase}.\n"
ASK = "\nWhat is the passphrase? The passphrase is "


def make_passphrase(rng):
    """One passphrase drawn from `rng` (a random.Random)."""
    return "-".join("".join(rng.choice(ALPHABET) for _ in range(n)) for n in GROUPS)


def passphrase_len():
    return sum(GROUPS) + len(GROUPS) - 1


def parts(p):
    """(plant, ask, answer) as bytes for passphrase p."""
    return PLANT.format(passphrase=p).encode(), ASK.encode(), p.encode()


def filler_len(length, p):
    plant, ask, ans = parts(p)
    n = length - len(plant) - len(ask) - len(ans)
    if n < 0:
        raise ValueError(f"length {length} cannot hold the plant, the ask and the answer ({length - n} bytes)")
    return n


def layout(length, p, plant_at):
    """The sequence as a list of segments: ("filler", start, stop) over the filler, or
    ("text", bytes). Total length `length`; the answer is the last len(p) tokens."""
    plant, ask, ans = parts(p)
    n = filler_len(length, p)
    if not 0 <= plant_at <= n:
        raise ValueError(f"plant_at {plant_at} outside the filler (0..{n})")
    return [("filler", 0, plant_at), ("text", plant), ("filler", plant_at, n), ("text", ask), ("text", ans)]


def build(length, p, plant_at, filler):
    """The sequence as a list of ints from a filler sequence (any indexable of ints, at
    least filler_len long)."""
    out = []
    for seg in layout(length, p, plant_at):
        if seg[0] == "filler":
            out.extend(int(x) for x in filler[seg[1]:seg[2]])
        else:
            out.extend(seg[1])
    return out


def probe_plant_at(depth, p):
    """Where the kv-gate plants: after depth/2 filler tokens."""
    return depth // 2


def self_test():
    rng = random.Random(1)
    ps = [make_passphrase(rng) for _ in range(1000)]
    assert len(set(ps)) == len(ps)
    assert all(len(p) == passphrase_len() == 9 and p[4] == "-" for p in ps)
    assert all(c in ALPHABET for p in ps for c in p.replace("-", ""))
    assert [make_passphrase(random.Random(7)) for _ in range(2)] == [make_passphrase(random.Random(7))] * 2
    filler = list(range(1000, 2000))
    p = ps[0]
    for length, at in ((128, 0), (128, 40), (128, 46), (200, 100), (len(parts(p)[0]) + len(ASK) + 9, 0)):
        s = build(length, p, at, filler)
        plant, ask, ans = parts(p)
        assert len(s) == length, (length, len(s))
        assert s[-len(ans):] == list(ans)
        assert s[-len(ans) - len(ask):-len(ans)] == list(ask)
        assert s[at:at + len(plant)] == list(plant)
        assert s[:at] == filler[:at]
        n = filler_len(length, p)
        assert s[at + len(plant):at + len(plant) + n - at] == filler[at:n]
    # The kv-gate's probe layout (engine/kv_gate.cpp probe_tokens): half = depth / 2 stream
    # tokens, the plant, tail = depth - half - plant - ask - answer stream tokens from half.
    depth = 300
    s = build(depth, p, probe_plant_at(depth, p), filler)
    half = depth // 2
    plant, ask, ans = parts(p)
    tail = depth - half - len(plant) - len(ask) - len(ans)
    assert s == filler[:half] + list(plant) + filler[half:half + tail] + list(ask) + list(ans)
    for bad in ((10, 0), (128, 10 ** 6)):
        try:
            build(bad[0], p, bad[1], filler)
        except ValueError:
            continue
        raise AssertionError(f"no refusal for {bad}")
    print("passphrase_data: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=18)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.count < 1:
        print(f"passphrase_data: --count: {a.count} is below 1", file=sys.stderr)
        return 2
    if a.self_test:
        self_test()
        return 0
    rng = random.Random(a.seed)
    json.dump({"seed": a.seed, "plant": PLANT, "ask": ASK,
               "passphrases": [make_passphrase(rng) for _ in range(a.count)]}, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
