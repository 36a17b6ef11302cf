#!/bin/bash
# seed sweep: contracts on cpu with random seeds, gates only; logs failures
B=/work/seeds/tfc
end=$(( $(date +%s) + ${1:-2400} ))
i=0
while [ $(date +%s) -lt $end ]; do
  i=$((i+1))
  seed=$(python3 -c "import random; print(random.getrandbits(64))")
  for c in fp8-rows q4-rows mxfp4-rows scale-planes rows-invariant qwen-pages; do
    n=""; [ $c = qwen-pages ] && n="--cases 24"
    [ $c = rows-invariant ] && n="--cases 256"
    nice -n 15 timeout 600 $B $c --backend cpu --seed $seed $n --gates-only --quiet --out /work/seeds/r-$c.json > /work/seeds/last-$c.log 2>&1
    rc=$?
    bad=$(grep -cE "FAIL|error|ERROR" /work/seeds/last-$c.log); if [ $rc -gt 1 ] || [ "$bad" -gt 0 ] || ! grep -q "because controls skipped" /work/seeds/last-$c.log; then echo "$c seed=$seed rc=$rc" >> /work/seeds/fails.txt; cp /work/seeds/last-$c.log /work/seeds/fail-$c-$seed.log; fi
    echo "$i $c $seed rc=$rc" >> /work/seeds/progress.txt
  done
done
