# Every engine call kind's us per step per mode from bench engine --profile receipts named
# profile-MODE-ROUND.json in a folder (best of the rounds), and the step:
#   python3 summary.py DIR MODE [MODE ...]
# (receipts-s43/summary.py gives the products alone.)
import glob
import gzip
import json
import sys

w, modes = sys.argv[1], sys.argv[2:]
t = {}
for f in sorted(glob.glob(w + "/profile-*-*.json*")):
    name = f.rsplit("/", 1)[1].split(".json")[0]
    m = name.split("-")[1]
    d = json.load(gzip.open(f) if f.endswith(".gz") else open(f))
    for row in d["rows"]:
        if row.get("kernels") != "current":  # the profile also times the legacy kernels
            continue
        c = row["config"]
        t.setdefault((c, "step"), {}).setdefault(m, []).append(row["step_us"])
        for k in row["kinds"]:
            t.setdefault((c, k["kind"]), {}).setdefault(m, []).append(k["us_per_step"])
print(f"{'config / kind (us per step, best of the rounds)':72s} " + " ".join(f"{m:>8s}" for m in modes))
for (c, k), v in sorted(t.items()):
    b = {m: min(x) for m, x in v.items()}
    print(f"{(c + ' ' + k)[:72]:72s} " + " ".join(f"{b.get(m, float('nan')):8.1f}" for m in modes))
