#!/usr/bin/env bash
# Make a Docker daemon and debootstrap available on a bare Debian 12 runner (root, no systemd).
# Idempotent: installs only what is missing and starts dockerd only if no daemon answers.
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
DOCKERD_WAIT_S="${DOCKERD_WAIT_S:-60}"
apt_get="$(cd "$(dirname "$0")/.." && pwd)/scripts/apt-get-waiting"

die() {
  echo "docker.sh: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (installs packages and starts dockerd)"

# Checking for the daemon binary, not the client: a runner may ship a bare `docker` CLI.
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
# debootstrap verifies the mirror's Release signature; without the keyring it cannot.
[ -e /usr/share/keyrings/debian-archive-keyring.gpg ] || need+=(debian-archive-keyring)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)

if [ "${#need[@]}" -gt 0 ]; then
  echo "docker.sh: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 400 "$apt_get" update -qq || die "apt-get update failed; check /etc/apt sources and network"
  # Recommends would drag in apparmor, git and needrestart, none of which this runner needs.
  timeout 1200 "$apt_get" install -y -qq --no-install-recommends \
    "${need[@]}" ||
    die "apt-get install ${need[*]} failed"
fi

# Every systemd container takes inotify instances from the host's per-user budget (128 by
# default); a cluster of 16 containers plus a Molecule scenario runs out, and systemd in the
# next container stalls at boot.
if [ "$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo 0)" -lt 1024 ]; then
  sysctl -q -w fs.inotify.max_user_instances=1024 ||
    echo "docker.sh: could not raise fs.inotify.max_user_instances; large local clusters may stall" >&2
fi

if timeout 10 docker info >/dev/null 2>&1; then
  echo "docker.sh: daemon already running"
  exit 0
fi

if pgrep -x dockerd >/dev/null 2>&1; then
  echo "docker.sh: dockerd process exists but does not answer yet; waiting"
else
  echo "docker.sh: starting dockerd (log: $DOCKERD_LOG)"
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  # A stale pid file from a killed daemon makes dockerd refuse to start.
  rm -f /var/run/docker.pid
  # setsid detaches dockerd from this script's session so it outlives the CI step.
  setsid dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
fi

deadline=$((SECONDS + DOCKERD_WAIT_S))
until timeout 10 docker info >/dev/null 2>&1; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "---- last lines of $DOCKERD_LOG ----" >&2
    tail -n 30 "$DOCKERD_LOG" >&2 || true
    die "dockerd did not answer within ${DOCKERD_WAIT_S}s; see $DOCKERD_LOG"
  fi
  sleep 1
done

echo "docker.sh: daemon ready ($(docker version --format '{{.Server.Version}}'))"
