#!/usr/bin/env bash
# The test command (README, .ci/run): lint, then the whole suite against
# real throwaway PostgreSQL clusters, once per server version.
#
#   scripts/test.sh            PG 15 (Debian's), PG 17 and PG 18 (fetched from Maven)
#   PGTIDE_VERSIONS="15" scripts/test.sh   only some versions
#   PGTIDE_SKIP_WHEEL=1 scripts/test.sh     without the wheel check at the end
set -euo pipefail
cd "$(dirname "$0")/.."

versions=${PGTIDE_VERSIONS:-"15 17.5.0 18.1.0"}

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
# Every public item documented, no broken doc link (issue 11).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --quiet
# No unused dependency (cargo-machete, installed by scripts/setup.sh).
cargo machete --skip-target-dir
# No import cycle between the files of any crate (docs/ARCHITECTURE.md).
python3 scripts/check-cycles.py
# Build everything once; each server version then only runs the tests.
cargo test --workspace --no-run --quiet
cargo bench --workspace --no-run --quiet

for v in $versions; do
  case "$v" in
    15) bin=/usr/lib/postgresql/15/bin ;;
    *) bin=$(scripts/fetch-postgres.sh "$v") ;;
  esac
  echo "== tests against PostgreSQL $v ($bin)"
  PGTIDE_TEST_PGBIN="$bin" cargo test --workspace --quiet
done

# The Python wheel (issue 13): built, pip-installed into a fresh venv, then
# `pgtide --version` and one load from it. The release build shares every
# dependency with `cargo bench --no-run` above; only the binary's own crate
# is compiled again (about 2 minutes on 2 cores), the rest takes ~25 s.
if [ -z "${PGTIDE_SKIP_WHEEL:-}" ]; then
  echo "== the Python wheel (scripts/test-wheel.sh)"
  scripts/test-wheel.sh
fi
