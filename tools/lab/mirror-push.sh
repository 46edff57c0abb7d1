#!/usr/bin/env bash
# Copies images from the local Docker engine into the lab's registry mirror under their upstream
# names, so nodes whose runtime sends every registry through the mirror find them there:
#   tools/lab/mirror-push.sh [--ca FILE] MIRROR IMAGE...      (or the images one per line on stdin)
# MIRROR is host[:port] (e.g. 172.17.0.1:5000), or the URL tools/lab/registry.sh start prints
# (http:// or https://); without a scheme the mirror is asked over plain HTTP first and taken for
# HTTPS when that is not what it speaks. Each image goes to ImageRef.parse(image).in_mirror(host)
# (components/config/image_refs.py, the one place the layout is said): registry.k8s.io/pause:3.10.1
# -> 172.17.0.1:5000/registry.k8s.io/pause:3.10.1, busybox:1.36 ->
# 172.17.0.1:5000/docker.io/library/busybox:1.36. A mirror answering plain HTTP is written to with
# TLS verification off (skopeo's --dest-tls-verify=false, which also allows HTTP); over HTTPS its
# certificate is always verified: against this machine's CAs, plus with --ca FILE (PEM) a private
# CA, the one the stack gives its nodes for the mirror (skopeo's --dest-cert-dir with the CA as
# ca.crt in a temporary directory, removed at exit). --ca for a mirror speaking plain HTTP is
# refused (exit 2). An image the engine does not have is listed at the end as missing (exit 1), as
# is one that failed to copy; nothing is skipped silently.
# Needs: skopeo (apt-get install skopeo), a Docker engine, curl, python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

usage() { echo "usage: tools/lab/mirror-push.sh [--ca FILE] MIRROR_HOST[:PORT] IMAGE... (or images on stdin)" >&2; exit 2; }

ca=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ca) ca=${2:-}; if [ -z "$ca" ] || [[ "$ca" == --* ]]; then usage; fi; shift 2 ;;
    --*) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
mirror=$1
shift
if [ -n "$ca" ]; then
  if ! [ -f "$ca" ] || ! [ -r "$ca" ]; then echo "error: --ca $ca: not a readable file" >&2; exit 2; fi
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca" || { echo "error: --ca $ca: no PEM certificate in it" >&2; exit 2; }
fi
case "$mirror" in
  http://*) host=${mirror#http://}; scheme=http ;;
  https://*) host=${mirror#https://}; scheme=https ;;
  *) host=$mirror; scheme="" ;;
esac
host=${host%/}
if [ -z "$host" ] || [[ "$host" == */* ]]; then
  echo "error: $mirror: expected a mirror as host[:port] (no path)" >&2
  exit 2
fi

images=("$@")
if [ ${#images[@]} -eq 0 ]; then
  while read -r line _ || [ -n "${line:-}" ]; do
    [ -z "$line" ] || [[ "$line" == \#* ]] || images+=("$line")
  done
fi
[ ${#images[@]} -gt 0 ] || usage

command -v skopeo >/dev/null || { echo "error: no skopeo (apt-get install skopeo)" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "error: no Docker engine answers (start one: bash tools/lab/docker.sh)" >&2; exit 2; }

if [ -z "$scheme" ]; then
  # A registry's API root answers 200 (or 401 when it asks for credentials) over the protocol it speaks.
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$host/v2/" || true)
  case "$code" in 200|401) scheme=http ;; *) scheme=https ;; esac
fi
tls=()
if [ "$scheme" = http ]; then
  if [ -n "$ca" ]; then
    echo "error: --ca $ca: $host speaks plain HTTP; a CA is for a mirror over HTTPS (give https://$host if it is one)" >&2
    exit 2
  fi
  tls=(--dest-tls-verify=false)
  echo "mirror-push: $host speaks plain HTTP: pushing with --dest-tls-verify=false" >&2
elif [ -n "$ca" ]; then
  certs=$(mktemp -d)
  trap 'rm -rf "$certs"' EXIT
  cp "$ca" "$certs/ca.crt"
  tls=(--dest-cert-dir "$certs")
  echo "mirror-push: $host over HTTPS, its certificate verified against the CA in $ca" >&2
else
  echo "mirror-push: $host over HTTPS, its certificate verified" >&2
fi

# One line per image: SOURCE<TAB>DESTINATION, or !<TAB>IMAGE<TAB>why.
mapping=$(cd "$ROOT" && python3 -c '
import sys
from components.config.image_refs import ImageRef
host = sys.argv[1]
for image in sys.argv[2:]:
    ref = ImageRef.parse(image)
    if ref.digest:
        print(f"!\t{image}\ta digest names content, not a tag the engine keeps: push it by tag")
        continue
    if not ref.tag:  # what the engine and registries call it
        image, ref = image + ":latest", ImageRef(ref.registry, ref.repository, "latest")
    print(f"{image}\t{ref.in_mirror(host)}")
' "$host" "${images[@]}")

missing=()
failed=()
pushed=0
while IFS=$'\t' read -r src dest why; do
  if [ "$src" = "!" ]; then failed+=("$dest ($why)"); continue; fi
  if ! docker image inspect --format '{{.Id}}' "$src" >/dev/null 2>&1; then missing+=("$src"); continue; fi
  start=$SECONDS
  if out=$(skopeo copy --quiet "${tls[@]}" "docker-daemon:$src" "docker://$dest" 2>&1); then
    echo "mirror-push: $src -> $dest ($((SECONDS - start)) s)" >&2
    pushed=$((pushed + 1))
  else
    failed+=("$src ($(echo "$out" | tail -n 1))")
  fi
done <<< "$mapping"

echo "mirror-push: $pushed of ${#images[@]} pushed to $host" >&2
status=0
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing (not in the local Docker engine): ${missing[*]}" >&2
  status=1
fi
for f in "${failed[@]}"; do echo "not pushed: $f" >&2; status=1; done
exit $status
