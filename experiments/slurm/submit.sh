#!/usr/bin/env bash
# submit.sh: submit an experiment as a Slurm job array of N shards plus the merge job that
# waits for it (afterok). One GPU per task (--gres=gpu:1) when the experiment says
# `device = gpu`; extra arguments go to both sbatch calls (e.g. --partition=..., --output=...).
#   experiments/slurm/submit.sh experiments/ladder.ini /scratch/$USER/ladder 8 [SBATCH-OPTIONS...]
# Prints "array job ID" and "merge job ID"; results end in BASE/merged/.
set -euo pipefail
ini=${1:?usage: submit.sh EXPERIMENT.ini BASE N [sbatch options]}
base=${2:?usage: submit.sh EXPERIMENT.ini BASE N [sbatch options]}
n=${3:?usage: submit.sh EXPERIMENT.ini BASE N [sbatch options]}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
ini=$(cd "$(dirname "$ini")" && pwd)/$(basename "$ini")
mkdir -p "$base"
base=$(cd "$base" && pwd)
gres=()
if sed -n '/^\[device\]/,/^\[/p' "$ini" | grep -Eq '^[[:space:]]*device[[:space:]]*=[[:space:]]*gpu'; then
  gres=(--gres=gpu:1)
fi
array=$(sbatch --parsable --array=0-$((n - 1)) "${gres[@]}" "$@" "$here/run-array.sbatch" "$ini" "$base")
array=${array%%;*}
merge=$(sbatch --parsable --dependency=afterok:"$array" "$@" "$here/merge.sbatch" "$base")
merge=${merge%%;*}
echo "array job $array: $n tasks of dsgap run $ini --shard k/$n --out $base/shard-k"
echo "merge job $merge: dsgap merge $base/shard-* --out $base/merged (after the array succeeds)"
