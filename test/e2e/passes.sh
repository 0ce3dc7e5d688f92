#!/usr/bin/env bash
# Runs the e2e passes (package.json's test:e2e* scripts), up to SLUICE_E2E_PASSES_AT_ONCE at a time
# (default 2), longest first. Each pass has a deployment of its own (processes on free ports, a key
# prefix, roles and users of random names, its own Redis Cluster, Sentinels or S3 server) and
# spends most of its time waiting on it, so passes can overlap; but a pass's deadlines (start-ups,
# timeouts, lockouts) are missed once the CPU is oversubscribed. So another pass starts beside
# those running only while the machine has CPU to spare: at least SLUICE_E2E_IDLE_PERCENT (30) of
# it idle over the last 5 seconds, read from /proc/stat, and 15 seconds after the last start (a
# pass takes its CPU once its deployment starts). On a machine busy with other work the passes run
# one after another. (The 1-minute load average, used before, lags a minute behind.)
# A pass is a script's name, with arguments for jest after it: the two longest passes, the cluster
# and the standalone suites, run as two shards each (jest --shard), each shard with a deployment of
# its own, when passes may overlap.
# Each pass's output is printed whole when it ends; every pass runs even if one fails.
set -uo pipefail
cd "$(dirname "$0")/../.."

at_once=${SLUICE_E2E_PASSES_AT_ONCE:-2}
if ! [[ $at_once =~ ^[1-9][0-9]*$ ]]; then
  echo "SLUICE_E2E_PASSES_AT_ONCE: a whole number from 1, not '$at_once'" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  passes=("$@")
elif [ "$at_once" -gt 1 ]; then
  passes=(
    'test:e2e --shard=1/2'
    'test:e2e:standalone --shard=1/2'
    'test:e2e --shard=2/2'
    'test:e2e:standalone --shard=2/2'
    test:e2e:redis-cluster
    test:e2e:spool-s3
    test:e2e:redis-sentinel
  )
else
  passes=(test:e2e test:e2e:standalone test:e2e:redis-cluster test:e2e:spool-s3 test:e2e:redis-sentinel)
fi
cores=$(nproc 2>/dev/null || echo 1)
idle_needed=${SLUICE_E2E_IDLE_PERCENT:-30}
if ! [[ $idle_needed =~ ^[0-9]+$ ]] || [ "$idle_needed" -gt 100 ]; then
  echo "SLUICE_E2E_IDLE_PERCENT: a whole number from 0 to 100, not '$idle_needed'" >&2
  exit 2
fi
# Seconds between two starts, for the last one to show in the CPU it takes.
spacing=15

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A started_at=()
failed=()
summary=()
next=0
last_start=-$spacing

minutes() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

start() {
  local i=$next words
  read -r -a words <<<"${passes[$i]}"
  local args=()
  [ ${#words[@]} -gt 1 ] && args=(-- "${words[@]:1}")
  printf '== %s: started (%d running, %s%% of %d cores idle)\n' "${passes[$i]}" \
    $((${#started_at[@]} + 1)) "$idle" "$cores"
  (
    npm run --silent "${words[0]}" "${args[@]}" >"$logs/$i.log" 2>&1
    # Whole or not at all: the loop below reads it once it is there.
    echo $? >"$logs/$i.rc.part" && mv "$logs/$i.rc.part" "$logs/$i.rc"
  ) &
  started_at[$i]=$SECONDS
  last_start=$SECONDS
  next=$((next + 1))
}

finish() {
  local i=$1 code outcome=passed
  code=$(cat "$logs/$i.rc")
  local took=$((SECONDS - started_at[$i]))
  [ "$code" -eq 0 ] || { outcome="FAILED (exit $code)"; failed+=("${passes[$i]}"); }
  printf '\n== %s: %s in %s\n' "${passes[$i]}" "$outcome" "$(minutes $took)"
  cat "$logs/$i.log"
  summary+=("$(printf '%-30s %-18s %s' "${passes[$i]}" "$outcome" "$(minutes $took)")")
  unset "started_at[$i]"
}

# The machine's idle and total CPU time so far (/proc/stat's first line: idle and iowait of all).
cpu_times() {
  local _cpu user nice system idle iowait irq softirq steal _rest
  read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat
  echo "$((idle + iowait)) $((user + nice + system + idle + iowait + irq + softirq + steal))"
}

# The percentage of the machine's CPU that was idle over the last 5 seconds, in $idle; '?' where
# /proc/stat cannot be read.
idle='?'
idle_samples=()
sample_idle() {
  local now
  now=$(cpu_times 2>/dev/null) || { idle='?'; return; }
  idle_samples+=("$SECONDS $now")
  # Keep the samples of the last 5 seconds and the one just before them.
  while [ ${#idle_samples[@]} -gt 1 ]; do
    local second
    read -r second _ <<<"${idle_samples[1]}"
    [ $((SECONDS - second)) -ge 5 ] || break
    idle_samples=("${idle_samples[@]:1}")
  done
  local at0 idle0 total0 idle1 total1
  read -r at0 idle0 total0 <<<"${idle_samples[0]}"
  read -r idle1 total1 <<<"$now"
  if [ $((SECONDS - at0)) -lt 4 ] || [ $((total1 - total0)) -le 0 ]; then
    idle='?'
  else
    idle=$(((idle1 - idle0) * 100 / (total1 - total0)))
  fi
}

# Whether the next pass may start beside those running.
may_start() {
  [ ${#started_at[@]} -eq 0 ] && return 0
  [ ${#started_at[@]} -lt "$at_once" ] || return 1
  [ $((SECONDS - last_start)) -ge $spacing ] || return 1
  [ "$idle" != '?' ] && [ "$idle" -ge "$idle_needed" ]
}

while [ $next -lt ${#passes[@]} ] || [ ${#started_at[@]} -gt 0 ]; do
  for i in "${!started_at[@]}"; do
    [ -f "$logs/$i.rc" ] && finish "$i"
  done
  sample_idle
  if [ $next -lt ${#passes[@]} ] && may_start; then
    start
  else
    sleep 2
  fi
done
wait

printf '\n== e2e passes, up to %d at once, in %s\n' "$at_once" "$(minutes $SECONDS)"
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
