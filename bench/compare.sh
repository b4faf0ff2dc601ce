#!/usr/bin/env bash
# Compare two revisions with the benchmark harness on this machine.
#
#   bench/compare.sh BASE [HEAD] [granary-bench flags...]
#
# BASE and HEAD (default: HEAD) are any git revisions. Both are built in
# temporary git worktrees (granary-bench, and the gubernator peer where the
# revision has it), then run in ABBA order, base, head, head, base, with
# the flags given after the revisions (for example --peers, --quick,
# --algorithm=token), so that both sides see the same drift of a shared
# machine. Every report is kept, as NN-base.json or NN-head.json with its
# table beside it, in RATE_LIMIT_PERFORMANCE_COMPARE_DIR (default: a new
# temporary directory, printed at the end), and bench/cmd/benchsummary
# prints the medians of every case from all samples: no sample is dropped
# and no threshold applies.
set -euo pipefail

if [ $# -lt 1 ] || [[ "$1" == -* ]]; then
  echo "usage: $0 BASE [HEAD] [granary-bench flags...]" >&2
  exit 2
fi
base_ref=$1
shift
head_ref=HEAD
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then
  head_ref=$1
  shift
fi

repo=$(git rev-parse --show-toplevel)
base=$(git -C "$repo" rev-parse --verify "$base_ref^{commit}")
head=$(git -C "$repo" rev-parse --verify "$head_ref^{commit}")
out=${RATE_LIMIT_PERFORMANCE_COMPARE_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/granary-compare-XXXXXX")}
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/granary-compare-build-XXXXXX")

cleanup() {
  for side in base head; do
    if [ -d "$work/$side" ]; then
      git -C "$repo" worktree remove --force "$work/$side" >/dev/null 2>&1 || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

# build SIDE REVISION: granary-bench, and the gubernator peer when the
# revision has its module, into $work/bin/SIDE.
build() {
  local side=$1 rev=$2 tree="$work/$1" bin="$work/bin/$1"
  mkdir -p "$bin"
  git -C "$repo" worktree add --detach "$tree" "$rev" >/dev/null
  echo "compare: building $side ($rev)" >&2
  # The harness is a module of its own (bench/) since it took its peers'
  # dependencies out of the framework's go.mod; older revisions have it in
  # the root module.
  if [ -f "$tree/bench/go.mod" ]; then
    (cd "$tree/bench" && go build -o "$bin/granary-bench" ./cmd/granary-bench)
  else
    (cd "$tree" && go build -o "$bin/granary-bench" ./cmd/granary-bench)
  fi
  if [ -f "$tree/bench/gubernator/go.mod" ]; then
    (cd "$tree/bench/gubernator" && go build -o "$bin/gubernator-bench" .)
  fi
}

build base "$base"
build head "$head"
(cd "$repo/bench" && go build -o "$work/bin/benchsummary" ./cmd/benchsummary)

n=0
for side in base head head base; do
  n=$((n + 1))
  rev=$base
  [ "$side" = head ] && rev=$head
  bin="$work/bin/$side"
  flags=(--output="$out/$n-$side.json" --revision="$rev")
  if [ -x "$bin/gubernator-bench" ]; then
    flags+=(--gubernator="$bin/gubernator-bench")
  fi
  echo "compare: run $n of 4: $side ($rev)" >&2
  (cd "$work/$side" && "$bin/granary-bench" "${flags[@]}" "$@") >"$out/$n-$side.txt"
done

"$work/bin/benchsummary" "$out" | tee "$out/summary.txt"
echo "compare: every report is in $out" >&2
