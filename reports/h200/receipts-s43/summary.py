# The products' us per step per mode from bench engine --profile receipts named
# profile-MODE-ROUND.json in a folder: python3 summary.py DIR MODE [MODE ...] (best of the rounds).
import glob
import json
import sys

w, modes = sys.argv[1], sys.argv[2:]
t = {}
for f in sorted(glob.glob(w + "/profile-*-*.json")):
    m, r = f.rsplit("/", 1)[1][:-5].split("-")[1:3]
    for row in json.load(open(f))["rows"]:
        if row.get("kernels") != "current":  # the profile also times the legacy kernels
            continue
        c = row["config"]
        t.setdefault((c, "step"), {}).setdefault(m, []).append(row["step_us"])
        t.setdefault((c, "matmul, all"), {}).setdefault(m, []).append(row["matmul_us"])
        for k in row["kinds"]:
            if k["kind"].startswith("matmul"):
                t.setdefault((c, k["kind"]), {}).setdefault(m, []).append(k["us_per_step"])
print(f"{'config / kind (us per step, best of the rounds)':64s} " + " ".join(f"{m:>9s}" for m in modes))
for (c, k), v in sorted(t.items()):
    b = {m: min(x) for m, x in v.items()}
    print(f"{(c + ' ' + k)[:64]:64s} " + " ".join(f"{b.get(m, float('nan')):9.1f}" for m in modes))
