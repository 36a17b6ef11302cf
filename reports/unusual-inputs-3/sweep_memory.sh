#!/bin/sh
# Round 3, serve-memory at extreme presets and options (cpu; planning only). usage: sweep_memory.sh TF_CUDA_TEST WORKDIR
# Prints one line per command: the exit code, then the options; the receipt's verdict and reasons follow a failure.
TF=$1; WD=$2; mkdir -p "$WD"; n=0
t() { n=$((n+1)); rm -f "$WD/r.json"; timeout 120 "$TF" serve-memory "$@" --out "$WD/r.json" >"$WD/o.txt" 2>"$WD/e.txt"; rc=$?
  echo "rc=$rc  $*"; if [ $rc -ne 0 ]; then tail -2 "$WD/e.txt" | sed 's/^/    /'; grep "because" "$WD/o.txt" | sed 's/^/    /'; fi
  [ $rc -eq 2 ] && [ -e "$WD/r.json" ] && echo "    PROBLEM: receipt written on exit 2"; }
t --preset tiny
t --preset qwen35-27b-attn
t --preset qwen35-27b-attn --layers 64 --parallel 64 --context 1048576 --prompts 2 --max-tokens 1
t --preset qwen35-27b-attn --layers 64 --parallel 64 --context 1048576 --page 1 --prompts 1048000 --max-tokens 1
t --preset qwen35-27b-attn --layers 64 --parallel 64 --context 1048576 --page 65536 --kv-cache q4 --prompts 2 --max-tokens 1
t --preset tiny --parallel 1 --prompts 2 --context 8 --max-tokens 1 --draft-tokens 4
t --preset tiny --parallel 1 --prompts 2 --context 8 --max-tokens 1 --draft-tokens 5
t --preset tiny --page 65536 --context 2 --prompts 2 --max-tokens 1 --draft-tokens 1
t --preset tiny --page 65536 --context 65536 --prompts 2 --max-tokens 1 --draft-tokens 1
t --preset tiny --page 1 --pool-pages 1 --prompts 2 --context 8 --max-tokens 1 --draft-tokens 1
t --preset tiny --page 1 --pool-pages 3 --prompts 2 --context 8 --max-tokens 1 --draft-tokens 1
t --preset tiny --max-tokens 2147483647 --prompts 2 --context 1048576
t --preset tiny --prompts 2147483647 --context 1048576
t --preset tiny --draft-tokens 64 --prompts 10 --context 100 --max-tokens 1
t --preset tiny --draft-tokens 65
t --preset tiny --pool-pages 67108864
t --preset tiny --pool-pages 67108865
t --preset tiny --kv-cache mxfp4 --parallel 64 --context 16 --max-tokens 1 --page 3 --prompts $(for i in $(seq 64); do printf '2 '; done)
t --preset tiny --parallel 64 --context 16 --max-tokens 1 --page 3 --prompts $(for i in $(seq 65); do printf '2 '; done)
t --preset tiny --layers 2 --draft-layers 1
t --preset tiny --layers 64 --draft-layers 63
t --preset tiny --layers 1
t --preset qwen35-27b-attn --layers 2 --kv-cache q4
t --preset qwen35-27b-attn --kv-cache fp8 --prompts 1 --context 4
t --preset qwen35-27b-attn --kv-cache fp8 --prompts 2 --context 8 --max-tokens 1 --draft-tokens 1
t --preset tiny --parallel 65
t --preset tiny --context 1
t --preset tiny --context 1048577 --prompts 2
echo "$n command lines"
