#!/usr/bin/env bash
# Fuzzes every parser of untrusted input (fuzz/fuzz_targets, cargo-fuzz on nightly; see
# docs/fuzzing.md).
#
#   scripts/fuzz.sh smoke            build once, then every target for 10 s (make unit runs it)
#   scripts/fuzz.sh long [SECONDS]   build once, then every target for SECONDS (default 600)
#   scripts/fuzz.sh run TARGET [SECONDS]   one target
#   scripts/fuzz.sh seed             rewrite the committed seed corpora (fuzz/corpus)
#   scripts/fuzz.sh list             the targets
#
# A target that crashes (a panic, a failed property, a timeout, an allocation past the bound)
# fails the run: the input is saved under fuzz/artifacts/<target>/ and its path printed; the
# other targets still run. Inputs found by long runs go to fuzz/target/corpus/<target>
# (ignored by git; smoke runs start from the seeds alone and keep nothing); the committed seeds
# in fuzz/corpus/<target> are only read.
#
# Environment: FUZZ_SANITIZER (default none: the code is Rust, and a sanitizer build is slower
# to build and to run; `address` for the C codecs), FUZZ_JOBS (targets run at once, default 1),
# FUZZ_SMOKE_SECONDS (default 10), FUZZ_ARGS (more libFuzzer flags).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fuzz="$here/fuzz"
export PATH="$HOME/.cargo/bin:$PATH"
# agent/build.rs builds the eBPF object unless told not to; the parsers do not need it (the
# embedded object is then empty).
export AYA_BUILD_SKIP=1
sanitizer=${FUZZ_SANITIZER:-none}
jobs=${FUZZ_JOBS:-1}
build_flags=(--sanitizer "$sanitizer" --codegen-units 16)

say() { printf 'fuzz: %s\n' "$*"; }

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  say "cargo-fuzz is missing: cargo install --locked cargo-fuzz (scripts/setup.sh --tests does it)"
  exit 2
fi

triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin_dir="$fuzz/target/$triple/release"

targets() { (cd "$fuzz" && cargo +nightly fuzz list); }

build() {
  local started=$SECONDS
  say "building the targets (sanitizer: $sanitizer)"
  (cd "$fuzz" && nice -n 10 cargo +nightly fuzz build "${build_flags[@]}" "$@")
  say "built in $((SECONDS - started)) s"
}

# run TARGET SECONDS [libFuzzer flags...]: 0 when the target ran clean.
run() {
  local target=$1 seconds=$2
  shift 2
  local work="${FUZZ_WORK:-$fuzz/target/corpus}/$target" artifacts="$fuzz/artifacts/$target"
  local log="$fuzz/target/logs/$target.log" seeds=()
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  [ -d "$fuzz/corpus/$target" ] && seeds=("$fuzz/corpus/$target")
  local marker
  marker=$(mktemp)
  local rc=0
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  (cd "$fuzz" && nice -n 10 "$bin_dir/$target" "$work" "${seeds[@]}" \
    -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@" ${FUZZ_ARGS:-}) >"$log" 2>&1 || rc=$?
  local stats
  stats=$(grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" |
    sed 's/^stat:://; s/: */=/' | tr '\n' ' ' || true)
  if [ $rc -eq 0 ]; then
    say "$target: ok ($stats)"
    rm -f "$marker"
    return 0
  fi
  local input
  input=$(find "$artifacts" -type f -newer "$marker" -printf '%T@ %p\n' 2>/dev/null | sort -n | tail -n1 | cut -d' ' -f2-)
  rm -f "$marker"
  say "$target: FAILED (exit $rc; log $log)"
  grep -m1 -B1 -A12 -E 'panicked at|ERROR: libFuzzer|==ERROR|SUMMARY' "$log" | sed 's/^/    /' | cut -c1-400 || true
  if [ -n "$input" ]; then
    say "$target: crashing input: $input"
    say "reproduce: cd fuzz && cargo +nightly fuzz run ${build_flags[*]} $target $input"
  fi
  return 1
}

# every SECONDS [libFuzzer flags...]: each target in turn (FUZZ_JOBS at once); fails if any did.
every() {
  local seconds=$1
  shift
  local failed=() pids=() names=() target
  for target in $(targets); do
    if [ "$jobs" -le 1 ]; then
      run "$target" "$seconds" "$@" || failed+=("$target")
      continue
    fi
    run "$target" "$seconds" "$@" &
    pids+=($!)
    names+=("$target")
    if [ ${#pids[@]} -ge "$jobs" ]; then
      wait "${pids[0]}" || failed+=("${names[0]}")
      pids=("${pids[@]:1}")
      names=("${names[@]:1}")
    fi
  done
  local i
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${names[$i]}")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    say "failed: ${failed[*]} (inputs under fuzz/artifacts/)"
    return 1
  fi
  say "every target ran clean"
}

seed() {
  python3 "$fuzz/seeds.py"
  # Then inputs found by fuzzing (the targets that read their input with `arbitrary` have no
  # test strings to start from): those of fuzz/target/corpus/<target> that keep its coverage
  # (a short run from nothing first if there are none), spread over their sizes, up to 60
  # seeds per target in all.
  build
  local target merged have work
  for target in $(targets); do
    work="$fuzz/target/corpus/$target"
    mkdir -p "$work" "$fuzz/corpus/$target"
    if [ -z "$(ls -A "$work")" ]; then
      (cd "$fuzz" && "$bin_dir/$target" "$work" -max_total_time=60 >/dev/null 2>&1) || true
    fi
    merged=$(mktemp -d)
    (cd "$fuzz" && "$bin_dir/$target" -merge=1 "$merged" "$work" >/dev/null 2>&1) || true
    have=$(find "$fuzz/corpus/$target" -type f | wc -l)
    find "$merged" -type f -printf '%s %p\n' | sort -n | cut -d' ' -f2- |
      awk -v want=$((60 - have)) '{ f[NR] = $0 } END {
        if (want <= 0) exit
        step = NR / want; if (step < 1) step = 1
        for (i = 1; i <= NR && n < want; i += step) { print f[int(i)]; n++ } }' |
      while read -r file; do cp "$file" "$fuzz/corpus/$target/$(basename "$file")"; done
    rm -rf "$merged"
    say "$target: $(find "$fuzz/corpus/$target" -type f | wc -l) seeds"
  done
}

started=$SECONDS
case "${1:-}" in
  smoke)
    build
    # A few seconds each from the committed seeds (what long runs found is not loaded, so the
    # time stays the same however long they ran), with a cap on runs.
    FUZZ_WORK=$(mktemp -d)
    export FUZZ_WORK
    trap 'rm -rf "$FUZZ_WORK"' EXIT
    every "${FUZZ_SMOKE_SECONDS:-10}" -runs=2000000
    ;;
  long)
    build
    every "${2:-600}"
    ;;
  run)
    [ -n "${2:-}" ] || { say "usage: $0 run TARGET [SECONDS]"; exit 2; }
    build "$2"
    run "$2" "${3:-600}"
    ;;
  seed) seed ;;
  list) targets ;;
  *)
    sed -n '2,/^set -euo/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
say "done in $((SECONDS - started)) s"
