#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test pgtide: OpenSSL
# headers and pkg-config (for TLS), a PostgreSQL server and psql, Python's
# venv (for scripts/test-wheel.sh), and cargo-machete (the unused-dependency
# check). Safe to run again; does nothing when everything is there.
set -euo pipefail

need=()
command -v pkg-config >/dev/null || need+=(pkg-config)
[ -f /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v psql >/dev/null || need+=(postgresql-client)
command -v xz >/dev/null || need+=(xz-utils)
command -v unzip >/dev/null || need+=(unzip)
# scripts/test-wheel.sh makes virtual environments (Debian splits venv out).
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi

# scripts/test.sh checks that no dependency is unused. Built once (about 3
# minutes on 2 cores), then found on PATH.
if ! command -v cargo-machete >/dev/null; then
  echo "setup: installing cargo-machete"
  cargo install --locked --quiet cargo-machete --version 0.9.2
fi
