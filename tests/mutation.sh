#!/usr/bin/env bash
# Mutation testing of gemmlab's core modules: mutmut plants small bugs (mutants) in one module at a time
# and runs the fast CPU tests that cover each mutated function; a mutant no test notices "survived".
# docs/testing.md has the scores and why each survivor is harmless. Not part of CI: minutes per module.
#
#   python3 -m pip install -e ".[test,mutation]"
#   tests/mutation.sh                      # every module below
#   tests/mutation.sh grid results/metrics  # some of them (a module's path under gemmlab/, no .py)
#   JOBS=4 MUTATION_DIR=/tmp/m tests/mutation.sh templates/header
#   MUTATION_REF=HEAD tests/mutation.sh    # a commit instead of the working tree
#
# Each module runs in a copy of the working tree ($MUTATION_DIR/<module>, default under /tmp), so the
# checkout is never touched. Per module: mutmut's own results in <module>/results.txt, the score in
# $MUTATION_DIR/summary.txt. The score is killed / (every mutant some selected test runs: killed,
# survived, timeout, ...); "no tests" counts mutants of functions no selected test calls (GPU code, code
# that runs only in a spawned worker process), reported beside the score.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${MUTATION_DIR:-${TMPDIR:-/tmp}/gemmlab-mutation}
JOBS=${JOBS:-2}

# The tests that cover each module, and which of their tests to leave out (those that only repeat
# minutes of work: enumerating every configuration, installing the package).
declare -A TESTS=(
  [grid]="tests/test_sweep.py tests/test_flow.py"
  [worker]="tests/test_worker.py tests/test_isolated.py tests/test_gpu_jobs.py tests/test_jobs.py"
  [results/metrics]="tests/test_report.py tests/test_device_math.py"
  [results/records]="tests/test_records.py tests/test_report.py tests/test_device_math.py"
  [templates/file]="tests/test_templates.py tests/test_sandbox.py"
  [templates/sandbox]="tests/test_sandbox_refusals.py tests/test_sandbox.py tests/test_templates.py"
  [templates/variant]="tests/test_templates.py tests/test_sandbox.py tests/test_sweep.py tests/test_kernel.py"
  [templates/header]="tests/test_templates.py tests/test_sandbox.py tests/test_kernel.py tests/test_inherit.py"
  [templates/inherit]="tests/test_inherit.py tests/test_catalog.py tests/test_sandbox.py"
  [templates/catalog]="tests/test_catalog.py tests/test_templates.py tests/test_sandbox.py"
  [render]="tests/test_render.py tests/test_sandbox.py"
  [results/check]="tests/test_check.py tests/test_verdict.py tests/test_records.py tests/test_device_math.py"
  [results/history]="tests/test_history.py"
  [results/tuning]="tests/test_tuning.py tests/test_sweep.py tests/test_suites.py"
  [kernel]="tests/test_kernel.py"
  [files]="tests/test_files.py tests/test_history.py"
)
declare -A KEEP=(
  [templates/file]="not regular_install"
  [templates/sandbox]="not regular_install"
  [templates/variant]="not regular_install and not shipped_winners and not plots_from_recorded"
  [templates/header]="not regular_install"
  [templates/catalog]="not regular_install"
  [grid]="not plots_from_recorded and not shipped_winners"
  [render]="not every_config_renders_clean"
  [results/tuning]="not plots_from_recorded"
)
# mutmut stops a mutant's tests after (their usual time + 1 s) x this (its default: 15), and calls it a
# timeout. worker.py's mutants that break the time limit make a test wait until then: with the default,
# half an hour each (its selected tests take two minutes on two busy cores).
declare -A TIMEOUT=(
  [worker]=1.2
)
# Of results/records.py only the functions that derive a row's numbers and verdict are scored.
declare -A FUNCTIONS=(
  [results/records]="x_row x_row_from_history x_failure_text x_failures"
)

command -v mutmut >/dev/null || { echo "mutmut is not installed: python3 -m pip install -e \".[mutation]\"" >&2; exit 2; }
modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=(grid worker results/metrics results/records results/check results/history results/tuning kernel files templates/file templates/sandbox templates/variant templates/header templates/inherit templates/catalog render)
mkdir -p "$WORK"

for m in "${modules[@]}"; do
  [ -n "${TESTS[$m]:-}" ] || { echo "no tests are listed for gemmlab/$m.py in $0" >&2; exit 2; }
  dir="$WORK/${m//\//_}"
  rm -rf "$dir"
  mkdir -p "$dir"
  if [ -n "${MUTATION_REF:-}" ]; then  # a commit, as committed
    git -C "$ROOT" archive "$MUTATION_REF" | tar -x -C "$dir"
  else  # the working tree as it is (committed or not), without ignored files
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$dir" 2>/dev/null || true)
  fi
  keep=${KEEP[$m]:-}
  {
    echo "[mutmut]"
    echo "source_paths = gemmlab/"
    echo "only_mutate = gemmlab/$m.py"
    echo "pytest_add_cli_args_test_selection ="
    for t in ${TESTS[$m]}; do echo "    $t"; done
    echo "pytest_add_cli_args ="
    echo "    -n"
    echo "    0"
    echo "    -p"
    echo "    no:cacheprovider"
    echo "    -x"
    echo "    -q"
    if [ -n "$keep" ]; then echo "    -k"; echo "    $keep"; fi
    [ -z "${TIMEOUT[$m]:-}" ] || echo "timeout_multiplier = ${TIMEOUT[$m]}"
    echo "also_copy ="
    for p in kernels tests benchmarks examples docs README.md; do echo "    $p"; done
  } > "$dir/setup.cfg"
  echo "== gemmlab/$m.py against ${TESTS[$m]}${keep:+ (-k $keep)}"
  start=$(date +%s)
  (cd "$dir" && mutmut run --max-children "$JOBS" > run.log 2>&1) || { tail -30 "$dir/run.log" >&2; exit 1; }
  (cd "$dir" && mutmut results --all true 2>/dev/null | sed 's/^ *//' > results.txt)
  want=${FUNCTIONS[$m]:-}
  python3 - "$dir/results.txt" "$m" "$(( $(date +%s) - start ))" "$want" <<'EOF' | tee -a "$WORK/summary.txt"
import collections, sys
path, module, seconds, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
counts = collections.Counter()
survivors = []
for line in open(path):
    name, _, status = line.strip().rpartition(": ")
    if not name:
        continue
    function = name.split(".")[-1].split("__mutmut_")[0]
    if want and function not in want:
        continue
    counts[status] += 1
    if status not in ("killed", "no tests", "skipped", "not checked"):
        survivors.append(name)
tested = sum(n for status, n in counts.items() if status not in ("no tests", "skipped", "not checked"))
score = 100.0 * counts["killed"] / tested if tested else float("nan")
others = ", ".join(f"{status} {n}" for status, n in sorted(counts.items()) if status != "killed")
print(f"gemmlab/{module}.py: {counts['killed']} of {tested} killed ({score:.1f}%); {others}; {seconds} s"
      + (f" (functions: {' '.join(want)})" if want else ""))
for name in survivors:
    print(f"    survived: {name}")
EOF
done
echo "mutmut show NAME in $WORK/<module> prints a mutant's diff"
