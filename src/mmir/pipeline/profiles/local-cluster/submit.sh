#!/usr/bin/env bash
# submit.sh JOBSCRIPT: start Snakemake's job script as its own detached process, as a batch scheduler would;
# print the job id. The job's output, PID and exit status land in .snakemake/local-cluster/<id>.{out,pid,exit}.
set -euo pipefail
jobscript="${@: -1}"
dir=".snakemake/local-cluster"
mkdir -p "$dir"
id="$(date +%s%N)-$$"
setsid bash -c 'bash "$1" > "$2.out" 2>&1; echo $? > "$2.exit.tmp" && mv "$2.exit.tmp" "$2.exit"' _ "$jobscript" "$dir/$id" \
  < /dev/null > /dev/null 2>&1 &
echo "$!" > "$dir/$id.pid"
echo "$id"
