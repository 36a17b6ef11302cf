# Round 8's survivors against their new tests, by hand in /work/mut8 (the new tests in the tree):
# each mutant applied, the test binary and tf-cuda-test rebuilt (flock + nice), the closing test
# run (it must fail), then the cli tests nearest the mutated code (does one of them catch it?),
# the source restored.
import json, subprocess, time
root = '/work/mut8'
M = {m['id']: m for m in json.load(open(root + '/reports/mutation-sweep/mutants-host-8.json'))}
PLAN = [
 ('st-header-length-past-end', 'kc_engine_tests', 'Safetensors.RefusesEveryBadFileClassNamingFileTensorAndReason', 'cli.kc-serve-fixture-checkpoint|cli.make-model-tiny'),
 ('cfg-layer-types-first-unchecked', 'kc_engine_tests', 'Qwen3Config.RefusesEveryMissingIllTypedOrInconsistentFieldByName', 'cli.kc-serve-fixture-checkpoint'),
 ('cfg-architectures-last-only', 'kc_engine_tests', 'Qwen3Config.ArchitecturesNameQwen3AnywhereInTheList', 'cli.kc-serve-fixture-checkpoint'),
 ('ckpt-max-positions-int32-max-refused', 'kc_engine_tests', 'Checkpoint.EngineConfigTakesPositionsUpTo2To31Minus1', 'cli.generate_bad_input'),
 ('ckpt-shard-placement-unchecked', 'kc_engine_tests', 'Checkpoint.RefusesBadShardIndexes', 'cli.kc-serve-fixture-checkpoint'),
 ('sm-default-pool-round-down', 'kc_engine_tests', 'ServeMemory.DefaultPoolRoundsAPartialPageUp', 'cli.serve_memory'),
 ('gen-token-vocab-edge', 'kc_engine_tests', 'EngineGenerate.RefusesATokenOneOutsideTheVocabulary', 'cli.generate_bad_input|cli.generate_def_main'),
 ('gen-decode-keeps-bos', 'kc_engine_tests', 'EngineGenerate.DecodeBytesKeepsOnlyByteTokens', 'cli.generate_def_main|cli.generate-prompt-file'),
 ('merge-control-partial-shards-ok', 'kc_review_tools_tests', 'Merge.AControlMissingFromOneShardIsGreen', 'cli.shards|cli.merge-numbers|cli.diff-merged-base'),
 ('merge-refusal-probes-last-shard', 'kc_review_tools_tests', 'Merge.RefusalProbesAreSummedOverTheShards', 'cli.shards|cli.merge-numbers|cli.diff-merged-base'),
 ('junit-lines-off-by-one', 'kc_review_tools_tests', 'Junit.TextListsTwentyLinesThenHowManyMore', 'cli.report_junit|cli.junit_validates|cli.junit-xml-nonchars'),
 ('receipt-target-at-least-strict', 'kc_receipt_view_tests', 'ReceiptViews.ATargetAtItsLimitIsMet', 'cli.receipts_schema|cli.report-schema-rules|cli.report-more-contradictions'),
 ('receipt-kv-depth-dup-adjacent', 'kc_receipt_view_tests', 'ReceiptViews.KvDepthGivenTwiceIsRefusedEvenNextToItself', 'cli.receipts_schema|cli.report-schema-rules|cli.report-more-contradictions'),
 ('receipt-shard-leading-zero', 'kc_receipt_view_tests', 'ReceiptViews.ShardFieldHasNoZeroOrLeadingZero', 'cli.receipts_schema|cli.report-schema-rules|cli.shards'),
 ('refusals-pack-window-probe-off-edge', 'kc_pack_tests', 'ScalePlanesContract.RefusalsProbePackOnePastAWindow', 'cli.kernel_contract'),
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
        fails = [l for l in txt.splitlines() if 'Failure' in l or l.startswith('Expected') or 'Value of' in l or 'Which is' in l or "lacks" in l][:4]
        new = {'check': f'gtest:{binary}:{test}', 'rc': rc, 'seconds': s, 'red': rc != 0, 'tail': fails}
        rc2, txt2, s2 = sh(f"nice ctest -R '^({cli})$' -j1 --output-on-failure", cwd=root + '/build-cpu')
        summ = [l.strip() for l in txt2.splitlines() if 'tests passed' in l or ' Passed ' in l or '***Failed' in l or 'Not Run' in l]
        cli_rec = {'check': f"ctest -R '^({cli})$'", 'rc': rc2, 'seconds': s2, 'red': rc2 != 0, 'tail': summ}
    finally:
        open(path, 'w').write(src)
    out.append({'id': mid, 'file': m['file'], 'why': m['why'], 'new_test': new, 'cli_tests': cli_rec,
                'status': 'caught' if new['red'] else 'survived'})
    print(mid, 'new test red' if new['red'] else 'NEW TEST GREEN', '| cli', 'red' if cli_rec['red'] else 'green', flush=True)
rc, txt, s = sh('flock /tmp/kc-build.lock nice ninja -C build-cpu tools/tf-cuda-test tests/kc_engine_tests tests/kc_review_tools_tests tests/kc_receipt_view_tests tests/kc_pack_tests')
json.dump({'schema': 'kc-mutation-rerun/1', 'mutants': out, 'restored_build_rc': rc,
           'summary': {'caught': sum(o['status'] == 'caught' for o in out), 'survived': sum(o['status'] == 'survived' for o in out)}},
          open(root + '/reports/mutation-sweep/host-8-local/rerun.json', 'w'), indent=1)
