#!/bin/bash
# Fuzz rdt-virt's parsers of outside text for longer than the unit suite.
#
#   tools/fuzz.sh [-r RUNS] [-t SECONDS] [-m] [TARGET ...]
#
# Runs each target (all of them by default; see tests/fuzz/targets.py)
# under atheris for RUNS inputs (default 200000) or at most SECONDS of wall
# time each, starting from the committed corpus (tests/fuzz/corpus/TARGET)
# and what earlier runs kept (.fuzz/TARGET). A finding (an exception the
# parser does not document, an input over 5 s) stops that target and is
# left as .fuzz/TARGET-crash-* or -timeout-*: fix it, then copy it to
# tests/fuzz/crashers/TARGET/ so that the unit suite replays it. At the
# end it prints libFuzzer's last status line per target (inputs run, edge
# coverage "cov:") and the statement coverage of each parser.
#
# With -m, the committed corpus of each target becomes a minimised merge of
# itself and .fuzz/TARGET (libFuzzer -merge=1).
#
# Needs a Python with rdt-virt, atheris and coverage: $PYTHON, else the
# tox environment's python ("tox -e fuzz" runs this script).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=200000
seconds=0
merge=false
while getopts 'r:t:m' opt; do
    case $opt in
        r) runs=$OPTARG ;;
        t) seconds=$OPTARG ;;
        m) merge=true ;;
        *) sed -n '2,22p' "$0"; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
py=${PYTHON:-python3}
mapfile -t targets < <("$py" -c '
from tests.fuzz import targets
print("\n".join(targets.TARGETS))')
if [ "$#" -gt 0 ]; then
    targets=("$@")
fi

mkdir -p .fuzz
status=0
summary=()
for t in "${targets[@]}"; do
    mkdir -p ".fuzz/$t"
    log=".fuzz/$t.log"
    echo "=== $t"
    rc=0
    "$py" -m tests.fuzz.run "$t" -runs="$runs" -max_total_time="$seconds" \
        -timeout=5 -artifact_prefix=".fuzz/$t-" -print_final_stats=1 \
        ".fuzz/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
    last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
    if [ "$rc" -ne 0 ]; then
        status=1
        grep -A20 'Uncaught Python exception\|ERROR: libFuzzer' "$log" | head -30
        summary+=("$t: FINDING (exit $rc), see $log; $last")
    else
        summary+=("$t: $last")
    fi
    if $merge && [ "$rc" -eq 0 ]; then
        # The merge re-runs argv[0]: a script that runs this target.
        self=".fuzz/run-$t"
        printf '#!/bin/sh\ncd %q && exec %q -m tests.fuzz.run %q "$@"\n' \
            "$PWD" "$py" "$t" >"$self"
        chmod +x "$self"
        rm -rf ".fuzz/$t.merged"
        mkdir ".fuzz/$t.merged"
        RDT_VIRT_FUZZ_ARGV0="$PWD/$self" "$py" -m tests.fuzz.run "$t" \
            -merge=1 ".fuzz/$t.merged" "tests/fuzz/corpus/$t" ".fuzz/$t" \
            >>"$log" 2>&1
        if [ -n "$(ls -A ".fuzz/$t.merged")" ]; then
            rm -rf "tests/fuzz/corpus/$t"
            mv ".fuzz/$t.merged" "tests/fuzz/corpus/$t"
        else
            echo "merge of $t produced nothing; corpus kept (see $log)"
            status=1
        fi
    fi
done

echo "=== libFuzzer's last status per target"
printf '%s\n' "${summary[@]}"
echo "=== statement coverage of the parsers (committed corpus + .fuzz/)"
"$py" -m tests.fuzz.measure --dir '.fuzz/{}' "${targets[@]}"
exit "$status"
