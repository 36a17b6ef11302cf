# Round 11's survivors against their new tests, by hand in /work/mut11 with the new tests in
# the tree (round 10's host-10-local/rerun.py, by the same steps, with the plan as data): each
# mutant applied, what its test needs rebuilt (flock + nice), the closing test run (it must
# fail), then the ctest tests nearest the mutated code where there are others (does one of
# them catch it?), the source restored. sweep-backend-loop-no-break is behaviour-preserving
# and has no new test (README.md).
import json, subprocess, sys, time
root = '/work/mut11'
M = {m['id']: m for m in json.load(open(root + '/reports/mutation-sweep/mutants-host-11.json'))}
MMA = 'tests/kc_unit_tests'
SWEEP = (None, 'sh tests/tools/mutation_sweep_sanitize_test.sh /work/mut11', 'tools\\.mutation-sweep-select')
KV = 'tools/tf-cuda-test tests/kc_engine_tests'
# id: (targets to build or None, the new test's command, the nearest ctest regex or None)
PLAN = {
 'mma-smem-d256-formats-swapped': (MMA, 'build-cpu/tests/kc_unit_tests --gtest_brief=1 --gtest_filter=MmaSmem.LaunchSizeIsTheKernelsOwnLayout', None),
 'mma-q4-total-drops-q-shifts': (MMA, 'build-cpu/tests/kc_unit_tests --gtest_brief=1 --gtest_filter=MmaSmem.Q4LayoutHoldsForEveryChunkWidth', None),
 'mma-q4-wm-one-warp': (MMA, 'build-cpu/tests/kc_unit_tests --gtest_brief=1 --gtest_filter=MmaSmem.Q4LayoutHoldsForEveryChunkWidth', None),
 'mma-vrows-floor-tiles': (MMA, 'build-cpu/tests/kc_unit_tests --gtest_brief=1 --gtest_filter=MmaSmem.LayoutHoldsForEveryChunkWidth', None),
 'sweep-contract-red-on-any-exit1': SWEEP,
 'sweep-applies-repeated-old': SWEEP,
 'sweep-build-error-ignored': SWEEP,
 'sweep-exit-0-with-survivors': SWEEP,
 'sweep-ctest-not-built': SWEEP,
 'kvplant-scales-descending': (KV, 'build-cpu/tests/kc_engine_tests --gtest_brief=1 --gtest_filter=KvPlant.NeighbourScalesAreTheNextRowsAndTheLastKeepsItsOwn', 'cli\\.kv_gate_ci'),
 'kvplant-probe-counts-every-call': (KV, 'build-cpu/tests/kc_engine_tests --gtest_brief=1 --gtest_filter=KvPlant.ProbePlantActsOnLaneOneRowsOnly', 'cli\\.kv_gate_ci'),
}
only = sys.argv[1:] or list(PLAN)
def sh(cmd, cwd=root):
    t = time.time()
    p = subprocess.run(cmd, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors='replace')
    return p.returncode, p.stdout, round(time.time() - t, 1)
out = []
for mid in only:
    targets, cmd, cli = PLAN[mid]
    m = M[mid]
    path = root + '/' + m['file']
    src = open(path).read()
    assert src.count(m['old']) == 1, mid
    open(path, 'w').write(src.replace(m['old'], m['new']))
    try:
        if targets:
            rc, txt, s = sh(f'flock /tmp/kc-build.lock nice ninja -C build-cpu {targets}')
            assert rc == 0, txt[-2000:]
        rc, txt, s = sh('nice ' + cmd)
        fails = [l for l in txt.splitlines() if 'FAIL' in l or 'Failure' in l or l.strip().startswith('Expected') or 'Value of' in l or 'Which is' in l][:4]
        new = {'check': cmd, 'rc': rc, 'seconds': s, 'red': rc != 0, 'tail': fails}
        cli_rec = None
        if cli:
            rc2, txt2, s2 = sh(f"nice ctest -R '^({cli})$' -j1 --output-on-failure", cwd=root + '/build-cpu')
            summ = [l.strip() for l in txt2.splitlines() if 'tests passed' in l or ' Passed ' in l or '***Failed' in l or 'Not Run' in l]
            cli_rec = {'check': f"ctest -R '^({cli})$'", 'rc': rc2, 'seconds': s2, 'red': rc2 != 0, 'tail': summ}
    finally:
        open(path, 'w').write(src)
    rec = {'id': mid, 'file': m['file'], 'why': m['why'], 'new_test': new, 'status': 'caught' if new['red'] else 'survived'}
    if cli_rec:
        rec['ctest'] = cli_rec
    out.append(rec)
    print(mid, 'new test red' if new['red'] else 'NEW TEST GREEN', '| ctest', ('red' if cli_rec['red'] else 'green') if cli_rec else '-', flush=True)
rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tools/tf-cuda-test tests/kc_unit_tests tests/kc_engine_tests')
json.dump({'schema': 'kc-mutation-rerun/1', 'mutants': out, 'restored_build_rc': rc,
           'summary': {'caught': sum(o['status'] == 'caught' for o in out), 'survived': sum(o['status'] == 'survived' for o in out)}},
          open(root + '/reports/mutation-sweep/host-11-local/rerun.json', 'w'), indent=1)
