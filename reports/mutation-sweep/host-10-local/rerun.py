# Round 10's survivors against their new tests, by hand in /work/mut10 (the new tests in the tree):
# each mutant applied, what the test needs rebuilt (flock + nice), the closing test run (it must
# fail), then the ctest tests nearest the mutated code where there are others (does one of them
# catch it?), the source restored. checkpoint-head-by-empty-lm-head is behaviour-preserving and
# has no new test (README.md).
import json, subprocess, sys, time
root = '/work/mut10'
M = {m['id']: m for m in json.load(open(root + '/reports/mutation-sweep/mutants-host-10.json'))}
SAN = ('tools/tf-cuda-test', 'sh tests/tools/sanitize_script_test.sh build-cpu/tools/tf-cuda-test /work/mut10', None)
BENCH = 'cli\\.bench_.*|bench\\..*|cli\\.premerge_bench'
# id: (targets to build, the new test's command, the nearest ctest regex or None)
PLAN = {
 'san-seed-2to64-accepted': SAN,
 'san-kept-green-control-passes': SAN,
 'san-racecheck-counts-errors-only': SAN,
 'san-one-finding-is-clean': SAN,
 'san-resume-device-unchecked': SAN,
 'bench-attn-at-least-strict': ('tools/tf-cuda-test tests/kc_review_tools_tests',
                                'build-cpu/tests/kc_review_tools_tests --gtest_brief=1 --gtest_filter=BenchTargets.LimitItselfMeetsAndZeroIsNotMeasured', BENCH),
 'bench-moves-64mib-row-not-a-target': ('tools/tf-cuda-test tests/kc_review_tools_tests',
                                        'build-cpu/tests/kc_review_tools_tests --gtest_brief=1 --gtest_filter=BenchTargets.MovesTargetFrom64MibAtLeast085Verified', BENCH),
 'bench-engine-median-upper': ('tools/tf-cuda-test tests/kc_review_tools_tests',
                               'build-cpu/tests/kc_review_tools_tests --gtest_brief=1 --gtest_filter=BenchTargets.EngineMedianOfEvenCountIsTheMeanOfTheMiddleTwo', BENCH),
 'kv-bar-default-mean-loose': ('tools/tf-cuda-test tests/kc_engine_tests',
                               'build-cpu/tests/kc_engine_tests --gtest_brief=1 --gtest_filter=KvFixture.NoBarTakesTheSchemasDefaultBar', 'cli\\.kv_gate_ci'),
 'pool-poison-zero': ('tools/tf-cuda-test tests/kc_engine_tests',
                      'build-cpu/tests/kc_engine_tests --gtest_brief=1 --gtest_filter=Pool.PoisonReadsAsNanInFp8AndHugeInBf16', 'cli\\.serve_gate_ci_q4'),
 'serve-fixture-default-prefill-chunk': ('tools/tf-cuda-test tests/kc_engine_tests',
                                         'build-cpu/tests/kc_engine_tests --gtest_brief=1 --gtest_filter=ServeFixture.NoPrefillChunkTakesTheSchemasDefault', 'cli\\.serve_gate_ci_q4|cli\\.serve_gate_bad_fixture'),
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
        rc, txt, s = sh(f'flock /tmp/kc-build.lock nice ninja -C build-cpu {targets}')
        assert rc == 0, txt[-2000:]
        rc, txt, s = sh('nice ' + cmd)
        fails = [l for l in txt.splitlines() if 'FAIL' in l or 'Failure' in l or l.strip().startswith('Expected') or 'Value of' in l or 'Which is' in l][:4]
        new = {'check': cmd, 'rc': rc, 'seconds': s, 'red': rc != 0, 'tail': fails}
        cli_rec = None
        if cli:
            rc2, txt2, s2 = sh(f"nice ctest -R '^({cli})$' -j2 --output-on-failure", cwd=root + '/build-cpu')
            summ = [l.strip() for l in txt2.splitlines() if 'tests passed' in l or ' Passed ' in l or '***Failed' in l or 'Not Run' in l]
            cli_rec = {'check': f"ctest -R '^({cli})$'", 'rc': rc2, 'seconds': s2, 'red': rc2 != 0, 'tail': summ}
    finally:
        open(path, 'w').write(src)
    rec = {'id': mid, 'file': m['file'], 'why': m['why'], 'new_test': new, 'status': 'caught' if new['red'] else 'survived'}
    if cli_rec:
        rec['ctest'] = cli_rec
    out.append(rec)
    print(mid, 'new test red' if new['red'] else 'NEW TEST GREEN', '| ctest', ('red' if cli_rec['red'] else 'green') if cli_rec else '-', flush=True)
rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tools/tf-cuda-test tests/kc_review_tools_tests tests/kc_engine_tests')
json.dump({'schema': 'kc-mutation-rerun/1', 'mutants': out, 'restored_build_rc': rc,
           'summary': {'caught': sum(o['status'] == 'caught' for o in out), 'survived': sum(o['status'] == 'survived' for o in out)}},
          open(root + '/reports/mutation-sweep/host-10-local/rerun.json', 'w'), indent=1)
