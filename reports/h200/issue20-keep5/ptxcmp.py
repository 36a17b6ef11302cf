import re,sys
def entries(path):
    t=open(path).read()
    out={}
    for m in re.finditer(r'\.visible \.entry (\S+)\(', t):
        start=m.start(); end=t.index('\n}\n', start); out[m.group(1)]=t[start:end]
    return out
def norm(b,name):
    b=b.replace(name,'K'); b=re.sub(r'\$L__BB\d+_',r'$L__BB_',b); b=re.sub(r'__internal_\d+','__i',b)
    b=re.sub(r'_ZZ?N2kc\d+keep5?_\w*?EPKi','FN',b); b=re.sub(r'callseq \d+','callseq',b); b=re.sub(r'_ZN2kc\w+','FN',b)
    return b
E=entries(sys.argv[1]); F=entries(sys.argv[2])
ok=0;bad=[]
for fn,fb in F.items():
    m=re.match(r'_ZN2kc11keep_kernelILi128ELi8ELi(\d+)ELi(\d+)EEEvPKNS_6KvViewEPKNS_8KeepMoveEPKi',fn)
    per,ws=m.groups()
    en=f'_ZN2kc12keep5_kernelILi128ELi8ELi{per}ELi{ws}ELi0EEEvPKNS_6KvViewEPKNS_8KeepMoveEPKi'
    if norm(E[en],en)==norm(fb,fn): ok+=1
    else: bad.append((per,ws))
print('identical after renaming',ok,'of',len(F),'differ',bad)
# non-entry funcs
def funcs(path):
    t=open(path).read(); return {m.group(1):t[m.start():t.index('\n}\n',m.start())] for m in re.finditer(r'\.func[^\n]*?(_ZN\S+)\(',t)}
FE=funcs(sys.argv[1]); FF=funcs(sys.argv[2])
print('funcs exp',len(FE),'final',len(FF), 'same names&bodies', sum(1 for k in FF if k in FE and FE[k]==FF[k]))
