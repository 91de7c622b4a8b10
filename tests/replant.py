"""Plant again the bugs that the CPU suite once missed, one at a time, and show the test that now fails.

    python3 tests/replant.py            # every bug below
    python3 tests/replant.py sweep      # those whose name has "sweep"

Each bug is an edit of one file in a copy of the working tree (the checkout is never touched); the
listed tests run there with pytest and must fail. Exit status 1 if a bug goes unnoticed or its edit no
longer applies (the code moved on: update the edit). Not collected by pytest; docs/testing.md has the table.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (name, file, the text as it is, the text with the bug, the tests that catch it)
BUGS = [
    ("templates: a header's choices are not validated", "gemmlab/templates/header.py",
     "            if not isinstance(choices, list) or not choices or any(type(c) is not type(default) for c in choices):",
     "            if False:",
     ["tests/test_templates.py::test_each_header_mistake_is_named_with_its_file"]),
    ("templates: a default outside its choices is accepted", "gemmlab/templates/header.py",
     "            if default not in choices:", "            if False:",
     ["tests/test_templates.py::test_each_header_mistake_is_named_with_its_file"]),
    ("templates: a value outside the choices is accepted", "gemmlab/templates/variant.py",
     "        if self.choices is not None and value not in self.choices:", "        if False:",
     ["tests/test_templates.py::test_parameters_are_parsed_and_checked"]),
    ("templates: unknown [launch] keys are accepted", "gemmlab/templates/header.py",
     "    if unknown:\n        raise _fail(path, f\"unknown launch key(s)",
     "    if False:\n        raise _fail(path, f\"unknown launch key(s)",
     ["tests/test_templates.py::test_each_header_mistake_is_named_with_its_file"]),
    ("render: a line takes the tag of a later piece (a macro's)", "gemmlab/render.py",
     "                break  # visible text came first", "                pass  # visible text came first",
     ["tests/test_render.py::test_a_macro_call_in_the_middle_of_a_line_maps_to_the_calling_line",
      "tests/test_render.py::test_every_line_of_a_shipped_kernel_maps_to_the_template_line_it_came_from"]),
    ("render: rendered lines map one line off", "gemmlab/render.py",
     "            return self.origins[rendered_line - 1]", "            return self.origins[rendered_line - 1 + (rendered_line > 30)]",
     ["tests/test_render.py::test_every_line_of_a_shipped_kernel_maps_to_the_template_line_it_came_from"]),
    ("results: a failed row resets the rung-over-rung speed-up", "gemmlab/results/metrics.py",
     '        prev = r["ms"] or prev', '        prev = r["ms"]',
     ["tests/test_report.py", "tests/test_flow.py::test_compare_gives_speedups_over_rungs_that_have_a_time"]),
    ("results: speedup_first inverted", "gemmlab/results/metrics.py",
     '        r["speedup_first"] = first / r["ms"] if first and r["ms"] else None',
     '        r["speedup_first"] = r["ms"] / first if first and r["ms"] else None',
     ["tests/test_report.py", "tests/test_flow.py::test_compare_gives_speedups_over_rungs_that_have_a_time"]),
    ("worker: never marks itself poisoned after a crash", "gemmlab/worker.py",
     "        self.poisoned = result.fault is not None", "        pass",
     ["tests/test_worker.py::test_gpu_jobs_marks_itself_poisoned_after_a_fault_and_only_then",
      "tests/test_gpu_jobs.py::test_a_fault_poisons_the_worker_and_only_a_fault"]),
    ("sweep: the fixed --dtype is ignored", "gemmlab/grid.py",
     "            params = variant.resolve({**(fixed or {}), **typed})", "            params = variant.resolve(typed)",
     ["tests/test_sweep.py::test_grid_keeps_the_fixed_values", "tests/test_flow.py::test_sweep_runs_the_input_type_asked_for"]),
    ("sweep: a reversed range 8..2 is accepted", "gemmlab/grid.py",
     "        if step < 1 or hi < lo:", "        if step < 1:",
     ["tests/test_sweep.py::test_bad_param_specs"]),
    ("cli: sweep does not sort", "gemmlab/cli/measure.py",
     '    rows.sort(key=lambda r: (r["ms"] is None, r["ms"] or 0))', "    pass",
     ["tests/test_flow.py::test_sweep_sorts_reuses_the_history_and_saves_the_best"]),
    ("tests: the user's templates are hidden only while tests run", "tests/conftest.py",
     'os.environ["XDG_DATA_HOME"] = str(_SCRATCH / "xdg-data")\n', "",
     ["tests/test_isolation.py::test_the_users_templates_history_and_caches_never_reach_the_tests"]),
]


def copy_tree(dest: Path) -> None:
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def main(words: list[str]) -> int:
    bugs = [b for b in BUGS if all(w in b[0] for w in words)]
    missed = 0
    with tempfile.TemporaryDirectory(prefix="gemmlab-replant-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        for name, file, good, bad, tests in bugs:
            path = tree / file
            text = path.read_text()
            if text.count(good) != 1:
                print(f"EDIT DOES NOT APPLY  {name}: {file} no longer holds the line")
                missed += 1
                continue
            path.write_text(text.replace(good, bad))
            try:
                p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
                                   cwd=tree, capture_output=True, text=True)
            finally:
                path.write_text(text)
            caught = p.returncode == 1 and " failed" in p.stdout and " error" not in p.stdout.splitlines()[-1]
            failed = list(dict.fromkeys(line.split()[1].split("[")[0] for line in p.stdout.splitlines()
                                        if line.startswith("FAILED ")))  # each test once, not each parameter
            print(f"{'caught' if caught else 'MISSED'}  {name}: {', '.join(failed) or p.stdout.splitlines()[-1:]}")
            missed += not caught
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
