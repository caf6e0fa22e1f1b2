#!/usr/bin/env bash
# Issue 59's figures, final build (fin) against the build before the issue (pre, 82df276), same run, alternated.
set -u
D=/work/notes/measure/s59; OUT=$D/out; mkdir -p $OUT
FIN=/tmp/m59/fin/ledgerwire; PRE=/tmp/m59/pre/ledgerwire
step=${1:-all}
if [ $step = all ] || [ $step = paired ]; then
  echo "uptime before: $(uptime)" > $OUT/ledger-paired.txt
  for i in 1 2 3 4 5; do
    if [ $((i % 2)) -eq 1 ]; then order="fin pre"; else order="pre fin"; fi
    for b in $order; do
      line=$(cd /tmp && timeout 600 /tmp/m59/$b/bench-ledger --bench paired 2>&1 | grep "^paired,")
      echo "run $i $b: $line" >> $OUT/ledger-paired.txt
    done
  done
  echo "uptime after: $(uptime)" >> $OUT/ledger-paired.txt
fi
if [ $step = all ] || [ $step = load ]; then
  $FIN bench --spawn --conversations 8000 --concurrency 200 --runs 5 --baseline $PRE > $OUT/load-200.txt 2>&1
fi
if [ $step = all ] || [ $step = instructions ]; then
  $FIN bench --spawn --instructions --conversations 400 --concurrency 50 --runs 5 --baseline $PRE > $OUT/instructions.txt 2>&1
fi
if [ $step = all ] || [ $step = open ]; then
  python3 $D/openseries.py $FIN $PRE /tmp/w59/m/store10k /tmp/m59/work 5 > $OUT/open-series.txt 2>&1
fi
if [ $step = all ] || [ $step = cold ]; then
  (cd /tmp && /tmp/m59/fin/bench-cold --bench > $OUT/cold.txt 2>&1)
fi
echo finished $step
