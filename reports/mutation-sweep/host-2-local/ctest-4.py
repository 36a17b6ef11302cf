import json, subprocess, sys
ms={m['id']:m for m in json.load(open('/work/main/reports/mutation-sweep/mutants-host-2.json'))}
plan={'kv-mean-kl-against-worst-bar':(['tools/tf-cuda-test'],r'^cli\.kv_gate_ci$'),
      'fw-shard-deal-shifted':(['tools/tf-cuda-test'],r'^cli\.shards$'),
      'main-seed-ignored':(['tools/tf-cuda-test'],r'^cli\.(seed-(max|high-bit)|replay-mutant)$'),
      'ao-far-arena-below-4g':(['tools/tf-cuda-test','tf-cuda-test-mutant-kv-offset-32bit'],r'^mutant\.kv-offset-32bit$')}
res={}
for mid,(targets,rx) in plan.items():
    m=ms[mid]; src=open(m['file']).read(); assert src.count(m['old'])==1
    open(m['file'],'w').write(src.replace(m['old'],m['new']))
    try:
        b=subprocess.run(['ninja','-C','build']+targets,capture_output=True,text=True)
        if b.returncode: res[mid]=('build-error',b.stdout[-500:]); continue
        t=subprocess.run(['ctest','-R',rx,'--output-on-failure'],cwd='build',capture_output=True,text=True)
        res[mid]=('caught' if t.returncode else 'survived', t.stdout[-900:])
    finally:
        open(m['file'],'w').write(src)
    print(mid,res[mid][0],flush=True); print(res[mid][1][-600:],flush=True)
subprocess.run(['ninja','-C','build','tools/tf-cuda-test','tf-cuda-test-mutant-kv-offset-32bit'],capture_output=True)
json.dump(res,open('/work/notes/manual-4.json','w'),indent=1)
