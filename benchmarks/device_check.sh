#!/usr/bin/env bash
# The GPU check of sklearn_calib: the tests that need CUDA, NetClassifier's training speed
# (ResNet-20 on Fashion-MNIST: the whole step as one CUDA graph against an eager hand-written
# loop and plain skorch) and the overhead of meta-regularisation, in at most 8 minutes on one
# H100. Every figure goes to one file, $OUT/device_check.txt (the steps' output, their exit
# status and seconds); the script exits non-zero when a step failed.
#
# 1. Here, on a machine with the network and the Fashion-MNIST files, once:
#        bash benchmarks/device_check.sh prepare [FASHION_MNIST_FOLDER]
#    puts the wheels the GPU machine lacks into .whl/ (skorch, and skops with its
#    dependencies for the persistence tests; pure-Python wheels) and the four Fashion-MNIST
#    files (default folder /usr/share/datasets/fashion-mnist) into .data/fashion-mnist/,
#    and lists both folders in git's info/exclude: they travel only when carried (31 MB).
# 2. On the GPU machine (the device tool: carry [".whl", ".data/fashion-mnist"], a
#    timeout of 600 s):
#        bash benchmarks/device_check.sh
#    Then record the figures in benchmarks/RESULTS.md with the command and the machine.
# 3. A dry run on a CPU (tests/test_device_check.py): tiny sizes, the MLP, the local
#    Python; the CUDA tests are collected and skip:
#        DEVICE_CHECK_DRY=1 OUT=/tmp/check bash benchmarks/device_check.sh
#
# Budget on an H100 (RESULTS.md, 2026-11-22): the CUDA tests about 2 minutes; bench_training
# 4 epochs of 55,000 images, about 1 minute (NetClassifier 0.8 s an epoch, skorch and the
# hand loop 5.3 s); bench_meta 4 epochs of 20,000 images, under a minute; start-up and the
# wheels' install under a minute. Each step has its own time limit (TEST_LIMIT and
# BENCH_LIMIT seconds), so that one stuck step cannot take the others' time.

set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
WHEELS=.whl
DATA=.data/fashion-mnist
#: The wheels the GPU machine's image lacks (read off its package list, KINDS.md there).
REQUIREMENTS=("skorch==1.4.0" "skops==0.16.0" "prettytable==3.18.0" "wcwidth==0.9.4")

prepare() {
    local source=${1:-/usr/share/datasets/fashion-mnist}
    local exclude
    exclude=$(git rev-parse --git-path info/exclude) || return 1
    mkdir -p "$(dirname "$exclude")" "$WHEELS" "$DATA"
    for path in "/$WHEELS/" "/.data/"; do
        grep -qxF "$path" "$exclude" 2>/dev/null || echo "$path" >>"$exclude"
    done
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" "${REQUIREMENTS[@]}" || return 1
    cp "$source"/*-idx?-ubyte* "$DATA"/ || return 1
    ls -l "$WHEELS" "$DATA"
}

if [[ ${1:-} == prepare ]]; then
    shift
    prepare "$@"
    exit $?
fi

: "${OUT:?set OUT to the folder the figures go to}"
mkdir -p "$OUT"
REPORT="$OUT/device_check.txt"
: >"$REPORT"
DRY=${DEVICE_CHECK_DRY:-0}
PYTHON=${PYTHON:-python3}
TEST_LIMIT=${TEST_LIMIT:-240}
BENCH_LIMIT=${BENCH_LIMIT:-150}
failed=0

log() {
    echo "$*" | tee -a "$REPORT"
}

# step NAME LIMIT COMMAND...: run COMMAND within LIMIT seconds, its output into the report.
step() {
    local name=$1 limit=$2 start rc
    shift 2
    log ""
    log "## $name"
    log "\$ $*"
    start=$(date +%s)
    timeout "$limit" "$@" 2>&1 | tee -a "$REPORT"
    rc=${PIPESTATUS[0]}
    log "-> exit status $rc after $(($(date +%s) - start)) s (limit $limit s)"
    [[ $rc == 0 ]] || failed=1
}

if [[ -d $WHEELS ]] && compgen -G "$WHEELS/*.whl" >/dev/null; then
    step "install the carried wheels" 120 "$PYTHON" -m pip install -q --no-index --no-deps \
        --no-compile --no-cache-dir --upgrade --target /tmp/device_check_site "$WHEELS"/*.whl
    export PYTHONPATH="/tmp/device_check_site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1

log "# sklearn_calib GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git'))"
step "machine" 60 "$PYTHON" -c "
import platform, sys, torch, skorch
print('python', sys.version.split()[0], '| torch', torch.__version__, '| skorch', skorch.__version__)
print('cuda', torch.cuda.is_available(), '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.machine())
"

# The tests marked to skip without CUDA, wherever they are (a plugin selects them by their
# skip reason); on the CPU of a dry run they are collected and skip. The GPU machine lacks
# some reference packages that other test modules import (relplot, mapie, ...): those
# modules are listed as not collected, and only an error of another kind, or a failing
# CUDA test, fails the step.
step "the tests that need CUDA" "$TEST_LIMIT" "$PYTHON" - <<'EOF'
import sys

import pytest

MISSING = "ModuleNotFoundError: No module named '"


class NeedsCuda:
    """Keep the tests whose skipif marks name CUDA; tolerate missing reference packages."""

    def __init__(self):
        self.missing = {}
        self.broken = []

    def pytest_collectreport(self, report):
        if not report.failed:
            return
        text = str(report.longrepr)
        package = text.split(MISSING, 1)[1].split("'", 1)[0].split(".")[0] if MISSING in text else None
        if package not in (None, "sklearn_calib"):
            self.missing[report.nodeid] = package
        else:
            self.broken.append(report.nodeid)

    def pytest_collection_modifyitems(self, config, items):
        kept = [
            item
            for item in items
            if any("cuda" in str(mark.kwargs.get("reason", "")).lower()
                   for mark in item.iter_markers("skipif"))
        ]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
        print(f"{len(kept)} tests need CUDA")

    def pytest_sessionfinish(self, session, exitstatus):
        for module, package in sorted(self.missing.items()):
            print(f"not collected (reference package {package!r} missing here): {module}")
        tests_failed = session.testsfailed - len(self.missing) - len(self.broken)
        if self.missing and not self.broken and tests_failed == 0:
            session.exitstatus = pytest.ExitCode.OK


sys.exit(pytest.main(
    ["-q", "-rs", "-p", "no:cacheprovider", "--continue-on-collection-errors", "tests"],
    plugins=[NeedsCuda()],
))
EOF

if [[ $DRY == 1 ]]; then
    step "bench_training (dry: MLP, CPU)" "$BENCH_LIMIT" "$PYTHON" benchmarks/speed/bench_training.py \
        --device cpu --network mlp --hidden-units 32 --n-train 256 --n-test 200 --epochs 2 \
        --data-home "${FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"
    step "bench_meta (dry: MLP, digits, CPU)" "$BENCH_LIMIT" "$PYTHON" benchmarks/speed/bench_meta.py \
        --device cpu --module mlp --dataset digits --epochs 2
else
    step "bench_training: ResNet-20, NetClassifier (CUDA graph) vs hand loop (eager) vs skorch" \
        "$BENCH_LIMIT" "$PYTHON" benchmarks/speed/bench_training.py --device cuda --epochs 4 \
        --data-home "$DATA"
    step "bench_meta: ResNet-20, focal vs FLgamma-SECE" "$BENCH_LIMIT" "$PYTHON" \
        benchmarks/speed/bench_meta.py --device cuda --module resnet20 --epochs 4 \
        --n-train 20000 --data-home "$DATA"
fi

log ""
log "# done: $([[ $failed == 0 ]] && echo 'every step passed' || echo 'a step FAILED')"
exit "$failed"
