import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1])))
hdr = rows[1]; data = rows[2:]
iS = hdr.index("Warp Stall Sampling (All Samples)"); iE = hdr.index("Instructions Executed"); iSrc = hdr.index("Source")
stall_cols = [i for i,h in enumerate(hdr) if h.startswith("stall_") or "Stall" in h and i not in (iS,)]
tot = sum(int(r[iS] or 0) for r in data); totE = sum(int(r[iE] or 0) for r in data)
print("instructions", len(data), "samples", tot, "executed warp instr", totE)
# running share by position (to see phases)
cum=0; marks=[]
for k,r in enumerate(data):
    cum += int(r[iS] or 0)
top = sorted(range(len(data)), key=lambda k: -int(data[k][iS] or 0))[:25]
for k in sorted(top):
    r=data[k]; print("%5d %6.2f%% %8s  %s" % (k, 100*int(r[iS])/tot, r[iE], r[iSrc].strip()[:70]))
