#!/usr/bin/env python3
"""Summary of call2.sh's ncu CSVs (--csv --page details): one block per profiled kernel, the
metrics that compare a memory-bound decode kernel with another. Usage: ncu_table.py DIR"""
import csv, glob, io, os, sys

WANT = ["Duration", "gpu__time_duration.sum", "DRAM Throughput", "Memory Throughput", "dram__bytes_read.sum",
        "L1/TEX Hit Rate", "L2 Hit Rate", "lts__t_sector_hit_rate.pct", "Mem Busy", "Max Bandwidth",
        "Grid Size", "Block Size", "Registers Per Thread", "Dynamic Shared Memory Per Block",
        "Theoretical Occupancy", "Achieved Occupancy", "Executed Ipc Active", "Issue Slots Busy",
        "No Eligible", "Active Warps Per Scheduler", "Eligible Warps Per Scheduler",
        "Warp Cycles Per Issued Instruction", "smsp__inst_executed.sum"]


def rows_of(path):
    text = open(path, errors="replace").read().splitlines()
    start = next((i for i, l in enumerate(text) if l.startswith('"ID","Process ID"')), None)
    if start is None:
        return []
    body = [l for l in text[start:] if l.startswith('"')]
    return list(csv.DictReader(io.StringIO("\n".join(body))))


def main():
    d = sys.argv[1]
    for path in sorted(glob.glob(os.path.join(d, "*.csv"))):
        rows = rows_of(path)
        print(f"== {os.path.basename(path)}: {len(rows)} metric rows")
        kernels = {}
        for r in rows:
            kernels.setdefault((r.get("ID"), r.get("Kernel Name", "")[:90]), []).append(r)
        for (kid, name), rs in kernels.items():
            print(f"  kernel {kid}: {name}")
            seen = set()
            for w in WANT:
                for r in rs:
                    if r.get("Metric Name") == w and w not in seen:
                        seen.add(w)
                        print(f"    {w:36s} {r.get('Metric Value', ''):>16s} {r.get('Metric Unit', '')}")


if __name__ == "__main__":
    main()
