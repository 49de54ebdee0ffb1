#!/usr/bin/env bash
# cancel.sh JOBID...: stop the jobs' process groups (see submit.sh).
for id in "$@"; do
  pid="$(cat ".snakemake/local-cluster/$id.pid" 2>/dev/null)" && kill -- "-$pid" 2>/dev/null || true
done
