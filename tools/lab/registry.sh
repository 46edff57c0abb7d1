#!/usr/bin/env bash
# The lab's local image registry, for closed networks: Debian's docker-registry (distribution
# 2.8) run in the background, so lab nodes pull every image (upstream names kept, see
# components/config/image_refs.py) from this host instead of the internet.
#   start  [--listen ADDR:PORT] [--tls CERT KEY]
#                                start it and print its URL (already running there the same way:
#                                say where, exit 0)
#   stop                         stop the registry this script started (its pid file), nothing else
#   status                       where it runs (exit 0), or that it does not (exit 3)
# It listens only where this host's own containers reach it: by default the gateway of Docker's
# `bridge` network, port 5000 (node containers on any Docker network reach it through the host,
# nothing outside the host does), or a loopback address; any other address is refused (exit 2).
# One registry per cache: its config, storage, log and pid file live in
# ${GPU_TENANCY_CACHE:-$HOME/.cache/gpu-tenancy}/registry. Plain HTTP (prints http://ADDR:PORT), or
# with --tls CERT KEY (PEM files: the server certificate, optionally followed by its chain, and its
# private key; the config names them where they are) HTTPS only (prints https://ADDR:PORT). Nodes
# must then trust the certificate's CA (the stack's mirror CA, written into each node's
# hosts.toml); start warns when the certificate does not verify for ADDR with CERT itself as the
# trust anchor (e.g. no IP:ADDR in its subjectAltName). No authentication, delete enabled.
# docker-registry is installed with apt-get where missing (its system service, which would listen
# on every address, is stopped and disabled if the package started it).
set -euo pipefail
CACHE=${GPU_TENANCY_CACHE:-$HOME/.cache/gpu-tenancy}
DIR=$CACHE/registry
CONFIG=$DIR/config.yml
PIDFILE=$DIR/registry.pid
LOG=$DIR/registry.log
DEFAULT_PORT=5000

usage() { echo "usage: tools/lab/registry.sh start [--listen ADDR:PORT] [--tls CERT KEY] | stop | status" >&2; exit 2; }
refuse() { echo "error: $*" >&2; exit 2; }

# running: the PID in the pid file when it is the registry this script started (not a reused PID).
running() {
  local pid
  [ -s "$PIDFILE" ] || return 1
  pid=$(cat "$PIDFILE")
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "docker-registry serve $CONFIG" || return 1
  echo "$pid"
}

# listening: the ADDR:PORT of the running registry's config.
listening() { sed -n 's/^  addr: "\(.*\)"$/\1/p' "$CONFIG"; }

# serving_tls: "CERT KEY" of the running registry's config, nothing when it speaks plain HTTP.
serving_tls() {
  local cert key
  cert=$(sed -n 's/^    certificate: "\(.*\)"$/\1/p' "$CONFIG")
  key=$(sed -n 's/^    key: "\(.*\)"$/\1/p' "$CONFIG")
  [ -z "$cert" ] || echo "$cert $key"
}

url() { # url ADDR:PORT [TLS] (an IPv6 address in brackets already; TLS non-empty: https)
  if [ -n "${2:-}" ]; then echo "https://$1"; else echo "http://$1"; fi
}

# gateways NETWORK...: each network's gateway addresses. A fresh engine may list only a subnet (no
# Gateway in its IPAM config): Docker gives the bridge the subnet's first address then.
gateways() {
  docker network inspect -f '{{range .IPAM.Config}}{{if .Gateway}}{{.Gateway}}{{else}}{{.Subnet}}{{end}} {{end}}' "$@" |
    python3 -c 'import ipaddress, sys
print(" ".join(str(ipaddress.ip_network(w)[1]) if "/" in w else w for w in sys.stdin.read().split()))'
}

docker_gateways() {
  local ids
  ids=$(docker network ls -q) || return 1
  # shellcheck disable=SC2086 # one id per word
  [ -z "$ids" ] || gateways $ids
}

bridge_gateway() {
  gateways bridge 2>/dev/null | awk '{print $1}'
}

is_loopback() { case "$1" in 127.*|::1|localhost) return 0 ;; *) return 1 ;; esac; }

# check_listen ADDR:PORT: refused unless ADDR is loopback or a Docker network's gateway.
check_listen() {
  local listen=$1 addr port gateways
  port=${listen##*:}
  addr=${listen%:*}
  addr=${addr#\[}; addr=${addr%\]}
  if ! [[ "$listen" == *:* && "$port" =~ ^[0-9]{1,5}$ && "$port" -ge 1 && "$port" -le 65535 && -n "$addr" ]]; then
    refuse "--listen $listen: expected ADDR:PORT (e.g. 172.17.0.1:5000)"
  fi
  is_loopback "$addr" && return 0
  gateways=$(docker_gateways 2>/dev/null) ||
    refuse "--listen $listen: no Docker engine answers to say its networks' gateways (start one: bash tools/lab/docker.sh)"
  # shellcheck disable=SC2086 # one word per gateway
  for gw in $gateways; do [ "$gw" = "$addr" ] && return 0; done
  refuse "--listen $listen: $addr is neither a loopback address nor a Docker network's gateway" \
    "($(echo "$gateways" | xargs | tr ' ' ',' || true)); the registry listens only where this host's containers reach it"
}

# check_tls CERT KEY: both readable PEM files; prints their absolute paths, as the config names them.
check_tls() {
  local cert=$1 key=$2 path full=()
  for path in "$cert" "$key"; do
    if ! [ -f "$path" ] || ! [ -r "$path" ]; then refuse "--tls $cert $key: $path is not a readable file"; fi
    path=$(realpath -e "$path")
    if [[ "$path" == *[[:space:]\"\\]* ]]; then
      refuse "--tls $cert $key: $path: a path with a space, quote or backslash is not written into the config"
    fi
    full+=("$path")
  done
  grep -q -- '-----BEGIN CERTIFICATE-----' "$cert" || refuse "--tls $cert $key: $cert holds no PEM certificate"
  grep -q -- '-----BEGIN .*PRIVATE KEY-----' "$key" || refuse "--tls $cert $key: $key holds no PEM private key"
  echo "${full[*]}"
}

install_registry() {
  command -v docker-registry >/dev/null && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "error: no docker-registry (apt-get install docker-registry)" >&2
    exit 1
  fi
  echo "registry: installing docker-registry (apt-get)" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry; } >/dev/null
  if [ -d /run/systemd/system ] && systemctl is-active --quiet docker-registry 2>/dev/null; then
    systemctl disable --now docker-registry >/dev/null 2>&1
    echo "registry: stopped and disabled the package's docker-registry service (it listens on every address)" >&2
  fi
}

write_config() { # write_config ADDR:PORT [CERT KEY]
  local tls=""
  if [ -n "${2:-}" ]; then
    tls=$(printf '  tls:\n    certificate: "%s"\n    key: "%s"' "$2" "$3")
  fi
  mkdir -p "$DIR/storage"
  cat > "$CONFIG" <<EOF
# Written by tools/lab/registry.sh start.
version: 0.1
log:
  level: info
  formatter: text
  fields:
    service: registry
storage:
  filesystem:
    rootdirectory: $DIR/storage
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: "$1"
${tls:+$tls
}  headers:
    X-Content-Type-Options: [nosniff]
EOF
}

start() { # start ADDR:PORT ["CERT KEY"]
  local listen=$1 tls=${2:-} pid now cert="" key="" out rc
  if pid=$(running); then
    now=$(serving_tls)
    if [ "$(listening)" = "$listen" ] && [ "$now" = "$tls" ]; then url "$listen" "$tls"; exit 0; fi
    echo "error: the registry already runs at $(url "$(listening)" "$now") (pid $pid${now:+, certificate ${now% *}}); stop it first (tools/lab/registry.sh stop)" >&2
    exit 1
  fi
  [ -z "$tls" ] || { cert=${tls% *}; key=${tls#* }; }
  install_registry
  write_config "$listen" "$cert" "$key"
  rm -f "$PIDFILE"
  nohup docker-registry serve "$CONFIG" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  echo "$pid" > "$PIDFILE"
  for _ in $(seq 1 50); do
    # Over HTTPS the certificate itself is the trust anchor (curl accepts a partial chain); curl's
    # exit 60: the registry answered, with a certificate that does not verify for this address.
    rc=0
    out=$(curl -fsS -o /dev/null --max-time 1 ${cert:+--cacert "$cert"} "$(url "$listen" "$tls")/v2/" 2>&1) || rc=$?
    if [ "$rc" = 0 ]; then url "$listen" "$tls"; exit 0; fi
    if [ "$rc" = 60 ]; then
      echo "registry: warning: its certificate does not verify for $(url "$listen" "$tls") (${out%%$'\n'*}); nodes asking that address will refuse it" >&2
      url "$listen" "$tls"
      exit 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill "$pid" 2>/dev/null || true
  rm -f "$PIDFILE"
  echo "error: the registry did not answer at $(url "$listen" "$tls")/v2/ within 10 s; its log: $LOG" >&2
  tail -n 5 "$LOG" >&2 || true
  exit 1
}

stop() {
  local pid
  if ! pid=$(running); then
    [ ! -e "$PIDFILE" ] || { rm -f "$PIDFILE"; echo "registry: not running (stale pid file removed)" >&2; exit 0; }
    echo "registry: not running" >&2
    exit 0
  fi
  kill "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; echo "registry: stopped (pid $pid)" >&2; exit 0; }
    sleep 0.2
  done
  echo "error: the registry (pid $pid) did not stop within 10 s" >&2
  exit 1
}

status() {
  local pid
  if pid=$(running); then echo "$(url "$(listening)" "$(serving_tls)") (pid $pid, log $LOG)"; exit 0; fi
  echo "registry: not running" >&2
  exit 3
}

action=${1:-}
[ $# -gt 0 ] && shift
listen=""
tls_cert=""
tls_key=""
while [ $# -gt 0 ]; do
  case "$1" in
    --listen) listen=${2:-}; [ -n "$listen" ] || usage; shift 2 ;;
    --tls)
      tls_cert=${2:-}; tls_key=${3:-}
      if [ -z "$tls_cert" ] || [ -z "$tls_key" ] || [[ "$tls_cert" == --* || "$tls_key" == --* ]]; then usage; fi
      shift 3
      ;;
    *) usage ;;
  esac
done
case "$action" in
  start)
    tls=""
    if [ -n "$tls_cert" ]; then tls=$(check_tls "$tls_cert" "$tls_key"); fi
    if [ -z "$listen" ]; then
      gateway=$(bridge_gateway)
      [ -n "$gateway" ] || refuse "no Docker bridge network to listen on (start an engine: bash tools/lab/docker.sh), or give --listen ADDR:PORT"
      listen=$gateway:$DEFAULT_PORT
    fi
    check_listen "$listen"
    start "$listen" "$tls"
    ;;
  stop) [ -z "$listen$tls_cert" ] || usage; stop ;;
  status) [ -z "$listen$tls_cert" ] || usage; status ;;
  *) usage ;;
esac
