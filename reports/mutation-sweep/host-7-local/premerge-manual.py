# Round 7's premerge mutants by hand (the sweep's ctest: check builds `all`): each applied in
# /work/mut7, tf-cuda-test rebuilt, the premerge tests as committed (refusals, bench, gates)
# and the new bench case run, the source restored.
import json, subprocess, time, sys
root = '/work/mut7'
M = [m for m in json.load(open(root + '/reports/mutation-sweep/mutants-host-7.json')) if m['id'].startswith('pm-')]
out = []
def sh(cmd):
    t = time.time()
    p = subprocess.run(cmd, shell=True, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout, round(time.time() - t, 1)
for m in M:
    path = root + '/' + m['file']
    src = open(path).read()
    assert src.count(m['old']) == 1
    open(path, 'w').write(src.replace(m['old'], m['new']))
    try:
        rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tf-cuda-test')
        assert rc == 0, txt[-2000:]
        checks = []
        for c in ['refusals', 'bench', 'gates']:
            rc, txt, s = sh(f'sh /tmp/m7/premerge_test.orig.sh {c} build-cpu/tools/tf-cuda-test {root}')
            checks.append({'check': f'premerge_test.sh {c} (as committed at 489f429)', 'rc': rc, 'seconds': s, 'tail': [l for l in txt.strip().splitlines() if l.startswith('FAIL')][:1] or txt.strip().splitlines()[-1:]})
        rc, txt, s = sh(f'sh tests/tools/premerge_test.sh bench build-cpu/tools/tf-cuda-test {root}')
        checks.append({'check': 'premerge_test.sh bench (with round 7 lines)', 'rc': rc, 'seconds': s, 'tail': [l for l in txt.strip().splitlines() if l.startswith('FAIL')][:1] or txt.strip().splitlines()[-1:]})
    finally:
        open(path, 'w').write(src)
    survived_old = all(c['rc'] == 0 for c in checks[:3])
    out.append({'id': m['id'], 'file': m['file'], 'why': m['why'], 'checks': checks,
                'status_committed_tests': 'survived' if survived_old else 'caught',
                'status_new_test': 'caught' if checks[3]['rc'] != 0 else 'survived'})
    print(m['id'], out[-1]['status_committed_tests'], out[-1]['status_new_test'], flush=True)
rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tf-cuda-test')
json.dump({'what': 'premerge mutants run by hand (tools/mutation_sweep.py\'s ctest: check builds all)', 'mutants': out,
           'restored_build': rc == 0}, open(root + '/premerge-manual.json', 'w'), indent=1)
