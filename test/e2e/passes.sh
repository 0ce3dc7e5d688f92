#!/usr/bin/env bash
# Runs the e2e passes (package.json's test:e2e* scripts), SLUICE_E2E_PASSES_AT_ONCE at a time
# (default 3, longest first). A pass spends most of its time waiting on its services, not on the
# CPU, and each has a deployment of its own (processes on free ports, a key prefix, roles and
# users of random names, its own Redis Cluster, Sentinels or S3 server), so passes can overlap.
# Each pass's output is printed whole when it ends; every pass runs even if one fails.
# A pass is a script's name, with arguments for jest after it: the cluster-mode pass, the longest,
# runs as two shards (jest --shard), each with a deployment of its own.
set -uo pipefail
cd "$(dirname "$0")/../.."

at_once=${SLUICE_E2E_PASSES_AT_ONCE:-3}
if ! [[ $at_once =~ ^[1-9][0-9]*$ ]]; then
  echo "SLUICE_E2E_PASSES_AT_ONCE: a whole number from 1, not '$at_once'" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  passes=("$@")
else
  passes=(
    test:e2e:standalone
    'test:e2e --shard=1/2'
    'test:e2e --shard=2/2'
    test:e2e:redis-cluster
    test:e2e:spool-s3
    test:e2e:redis-sentinel
  )
fi

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
declare -A name_of=() started_at=() log_of=()
failed=()
summary=()

finish() {
  local pid=$1 code=$2
  local pass=${name_of[$pid]}
  local took=$((SECONDS - started_at[$pid]))
  local outcome=passed
  [ "$code" -eq 0 ] || { outcome="FAILED (exit $code)"; failed+=("$pass"); }
  printf '\n== %s: %s in %dm%02ds\n' "$pass" "$outcome" $((took / 60)) $((took % 60))
  cat "${log_of[$pid]}"
  summary+=("$(printf '%-30s %-18s %dm%02ds' "$pass" "$outcome" $((took / 60)) $((took % 60)))")
  unset "name_of[$pid]"
}

wait_one() {
  local pid code
  wait -n -p pid "${!name_of[@]}"
  code=$?
  finish "$pid" "$code"
}

for pass in "${passes[@]}"; do
  while [ ${#name_of[@]} -ge "$at_once" ]; do wait_one; done
  printf '== %s: started (%d at once)\n' "$pass" "$at_once"
  read -r -a words <<<"$pass"
  log="$logs/${#log_of[@]}.log"
  if [ ${#words[@]} -gt 1 ]; then
    npm run --silent "${words[0]}" -- "${words[@]:1}" >"$log" 2>&1 &
  else
    npm run --silent "${words[0]}" >"$log" 2>&1 &
  fi
  name_of[$!]=$pass
  log_of[$!]=$log
  started_at[$!]=$SECONDS
done
while [ ${#name_of[@]} -gt 0 ]; do wait_one; done

printf '\n== e2e passes, %d at once, in %dm%02ds\n' "$at_once" $((SECONDS / 60)) $((SECONDS % 60))
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}" >&2
  exit 1
fi
