#!/usr/bin/env bash
# status.sh JOBID: running | success | failed, from the job's exit file (see submit.sh).
dir=".snakemake/local-cluster"
if [ -f "$dir/$1.exit" ]; then
  [ "$(cat "$dir/$1.exit")" = "0" ] && echo success || echo failed
elif [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; then
  echo running
else
  echo failed
fi
