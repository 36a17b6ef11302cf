import re,sys
def entries(path):
    t=open(path).read(); out={}
    for m in re.finditer(r'\.visible \.entry (\S+)\(', t):
        start=m.start(); end=t.index('\n}\n', start); out[m.group(1)]=t[start:end]
    return out
def norm(b,name):
    b=b.replace(name,'K'); b=re.sub(r'\$L__BB\d+_',r'$L__BB_',b); b=re.sub(r'__internal_\d+','__i',b)
    b=re.sub(r'callseq \d+','callseq',b); b=re.sub(r'_ZZ?N2kc\w+','FN',b)
    return b
A=entries(sys.argv[1]); Bx=entries(sys.argv[2]); suffix=sys.argv[3] if len(sys.argv)>3 else 'ELi0ELi1E'
ok=0;bad=[]
for fn,fb in A.items():
    m=re.match(r'_ZN2kc11keep_kernelILi128ELi8ELi(\d+)ELi(\d+)EEEvPKNS_6KvViewEPKNS_8KeepMoveEPKi',fn)
    if not m: continue
    per,ws=m.groups()
    en=f'_ZN2kc11keep_kernelILi128ELi8ELi{per}ELi{ws}{suffix}EEvPKNS_6KvViewEPKNS_8KeepMoveEPKi'
    if en in Bx and norm(Bx[en],en)==norm(fb,fn): ok+=1
    else: bad.append((per,ws, en in Bx))
print('identical after renaming',ok,'of',len(A),'differ',bad)
