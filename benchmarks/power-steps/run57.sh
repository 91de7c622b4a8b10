#!/bin/bash
# Run 57: run 56 with the table "rows" (slots.py): the clusters of each GPC in one class of slots mod 8, so that in
# GROUP_M 8 they share their rows of A, whose plain TMA loads are the ones the coalescer merges (run 56), in every wave.
# Usage: git apply benchmarks/power-steps/slots.patch; bash benchmarks/power-steps/run57.sh OUTDIR [ROUNDS]
TABLES=rows INTER=rows SIZES=4096,8192 bash "$(dirname "$0")/run56.sh" "$@"
