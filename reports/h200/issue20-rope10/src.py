import csv, sys
def load(f):
    rows=list(csv.reader(open(f)))
    h=rows[1]; out=[]
    for r in rows[2:]:
        if len(r)<len(h): continue
        d=dict(zip(h,r)); out.append(d)
    return h,out
def n(x):
    try: return float(x.replace(',',''))
    except: return 0.0
col=sys.argv[2] if len(sys.argv)>2 else 'stall_long_sb'
h,a=load(sys.argv[1])
tot=sum(n(d['Warp Stall Sampling (All Samples)']) for d in a)
print('total samples',tot, col, sum(n(d[col]) for d in a))
idx=sorted(range(len(a)), key=lambda i:-n(a[i][col]))[:int(sys.argv[3]) if len(sys.argv)>3 else 15]
for i in sorted(idx):
    d=a[i]; print('%5d %-60s all=%6d %s=%6d exec=%s' % (i, d['Source'].strip()[:60], n(d['Warp Stall Sampling (All Samples)']), col, n(d[col]), d['Instructions Executed']))
