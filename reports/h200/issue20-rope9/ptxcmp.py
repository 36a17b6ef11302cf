# rope9: PTX per entry (labels, callseq numbers, the inline-asm wait labels and local depots
# renamed; comments, blank lines, the file header and the shared .func bodies dropped).
import sys,re
def funcs(path):
    s=open(path).read()
    d={}
    for p in re.split(r'\n(?=\s*// \.globl)',s):
        m=re.search(r'\.entry (\S+)\(',p)
        if not m: continue
        b=p[p.index('.visible .entry'):] if '.visible .entry' in p else p
        b=re.sub(r'\.func[^{;]*?\)\s*;','',b,flags=re.S)
        b=re.sub(r'\.func[^{;]*?\)\s*\{.*?\n\}\n','',b,flags=re.S)
        b=re.sub(r'\$L__\w+','L',b); b=re.sub(r'callseq \d+','callseq',b)
        b=re.sub(r'RS_WAIT_\d+','RSW',b); b=re.sub(r'__local_depot\d+','depot',b)
        b=b.replace(m.group(1),'NAME')
        b='\n'.join(l for l in b.split('\n') if l.strip() and not l.strip().startswith('//'))
        d[m.group(1)]=b
    return d
ring=lambda D,F,M,S: '_ZN2kc22rope_store_ring_kernelILi%dELNS_6FormatE%dELi%dELi%dEEEvPKNS_6KvViewENS_10RopeParamsEiPKNS_7RopeRowEiPKfSA_SA_Pf'%(D,F,M,S)
m=funcs(sys.argv[1]); e=funcs(sys.argv[2]); f=funcs(sys.argv[3])
print('final (%s) against main 6725561 (%s), every kernel of main:' % (sys.argv[3], sys.argv[1]))
for k in m: print('  %s %s' % ('SAME' if f.get(k)==m[k] else 'DIFF', k[:90]))
print('final kernels not in main, against the measured build 41ab202 (%s):' % sys.argv[2])
for F,n in ((0,'bf16'),(1,'fp8'),(2,'q4')):
    Mb=0 if F==0 else 7
    print('  %s %s final <128, %s, %d, 2> / measured <128, %s, %d, 2> (KC_ROPE9 32, the E column)' % ('SAME' if f[ring(128,F,Mb|8,2)]==e[ring(128,F,Mb|32,2)] else 'DIFF', n, n, Mb|8, n, Mb|32))
print('  others:', [k for k in f if k not in m and k not in (ring(128,0,8,2),ring(128,1,15,2),ring(128,2,15,2))])
