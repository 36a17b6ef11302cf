# Round 9's survivors against their new tests, by hand in /work/mut9 (the new tests in the tree):
# each mutant applied, the test binary and tf-cuda-test rebuilt (flock + nice), the closing test
# run (it must fail), then the ctest tests nearest the mutated code (does one of them catch it?),
# the source restored.
import json, subprocess, time
root = '/work/mut9'
M = {m['id']: m for m in json.load(open(root + '/reports/mutation-sweep/mutants-host-9.json'))}
PLAN = [
 ('q4-ref-decode-inf-scale-isnan', 'kc_q4_tests', 'Q4Group.InfScaleDecodesToNanInTheReferenceAsInTheTwin', 'contract.q4-rows.cpu|contract.qwen-pages.cpu'),
 ('pool-run-top-unaligned', 'kc_engine_tests', 'Pool.RunsSitBelowTheArenasLast256ByteBoundary', 'cli.serve_memory|cli.serve_gate_ci_q4|cli.serve-gate-arena-context'),
 ('harness-decode-paged-window-quarter', 'kc_contract_tests', 'Fp8RowsContract.DecodePagedEqualsWindowComparesEveryFloat', 'contract.fp8-rows.cpu|contract.q4-rows.cpu|contract.mxfp4-rows.cpu'),
]
def sh(cmd, cwd=root):
    t = time.time()
    p = subprocess.run(cmd, shell=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors='replace')
    return p.returncode, p.stdout, round(time.time() - t, 1)
out = []
for mid, binary, test, cli in PLAN:
    m = M[mid]
    path = root + '/' + m['file']
    src = open(path).read()
    assert src.count(m['old']) == 1, mid
    open(path, 'w').write(src.replace(m['old'], m['new']))
    try:
        rc, txt, s = sh(f'flock /tmp/kc-build.lock nice ninja -C build-cpu tools/tf-cuda-test tests/{binary}')
        assert rc == 0, txt[-2000:]
        rc, txt, s = sh(f'nice build-cpu/tests/{binary} --gtest_brief=1 --gtest_filter={test}')
        fails = [l for l in txt.splitlines() if 'Failure' in l or l.startswith('Expected') or 'Value of' in l or 'Which is' in l or 'reference' in l][:4]
        new = {'check': f'gtest:{binary}:{test}', 'rc': rc, 'seconds': s, 'red': rc != 0, 'tail': fails}
        rc2, txt2, s2 = sh(f"nice ctest -R '^({cli})$' -j2 --output-on-failure", cwd=root + '/build-cpu')
        summ = [l.strip() for l in txt2.splitlines() if 'tests passed' in l or ' Passed ' in l or '***Failed' in l or 'Not Run' in l]
        cli_rec = {'check': f"ctest -R '^({cli})$'", 'rc': rc2, 'seconds': s2, 'red': rc2 != 0, 'tail': summ}
    finally:
        open(path, 'w').write(src)
    out.append({'id': mid, 'file': m['file'], 'why': m['why'], 'new_test': new, 'ctest': cli_rec,
                'status': 'caught' if new['red'] else 'survived'})
    print(mid, 'new test red' if new['red'] else 'NEW TEST GREEN', '| ctest', 'red' if cli_rec['red'] else 'green', flush=True)
rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tools/tf-cuda-test tests/kc_q4_tests tests/kc_engine_tests tests/kc_contract_tests')
json.dump({'schema': 'kc-mutation-rerun/1', 'mutants': out, 'restored_build_rc': rc,
           'summary': {'caught': sum(o['status'] == 'caught' for o in out), 'survived': sum(o['status'] == 'survived' for o in out)}},
          open(root + '/reports/mutation-sweep/host-9-local/rerun.json', 'w'), indent=1)
