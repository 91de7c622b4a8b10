# Sourced by run61.sh-run67.sh: ncu's cycle counts at the base clock for the launches that
# benchmarks/store-steps/ncu_launches.py makes (XCONFIGS and NLAUNCH from the environment, then cuBLAS's).
#   ncu_cycles FILE SHAPE [KERNELS]   ncu's report to FILE, then `cycles FILE`; KERNELS is ncu's -k (default:
#                                     ours and cuBLAS's); NCU_TIMEOUT seconds (default 150), NCU_DTYPE (default bf16)
#   cycles FILE                       one line per launch: kernel, time (us), active and elapsed cycles
cycles() {
  grep -E "^  [a-z]|sm__cycles|gpu__time" "$1" | awk '/^  [a-z]/{k=substr($1,1,20)} /gpu__time/{t=$NF} /cycles_active/{a=$NF} /cycles_elapsed/{print k, "us", t, "active", a, "elapsed", $NF}'
}
ncu_cycles() {
  timeout "${NCU_TIMEOUT:-150}" ncu --clock-control base -k "${3:-regex:^gemm\$|nvjet}" \
    --metrics sm__cycles_elapsed.max,sm__cycles_active.avg,gpu__time_duration.sum \
    python3 benchmarks/store-steps/ncu_launches.py "$2" "${NCU_DTYPE:-bf16}" > "$1" 2>&1
  cycles "$1"
}
