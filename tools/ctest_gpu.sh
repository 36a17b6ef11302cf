#!/bin/sh
# Runs a command on the GPU(s) CTest gave the test: CTest's resource allocation (a test with
# RESOURCE_GROUPS "gpus:1", ctest --resource-spec-file SPEC) arrives in the environment as
# CTEST_RESOURCE_GROUP_COUNT and CTEST_RESOURCE_GROUP_<i>_GPUS="id:0,slots:1;..."; this sets
# CUDA_VISIBLE_DEVICES to those ids, so the command's device 0 is the GPU allotted to it.
# Without an allocation (ctest run without a spec) the command runs unchanged.
#   ctest_gpu.sh COMMAND [ARGS...]
if [ -n "${CTEST_RESOURCE_GROUP_COUNT:-}" ]; then
  ids=""
  i=0
  while [ "$i" -lt "$CTEST_RESOURCE_GROUP_COUNT" ]; do
    eval "groups=\${CTEST_RESOURCE_GROUP_${i}_GPUS:-}"
    old_ifs=$IFS
    IFS=';'
    for g in $groups; do
      id=${g#id:}
      id=${id%%,*}
      case ",$ids," in *",$id,"*) ;; *) ids=${ids:+$ids,}$id;; esac
    done
    IFS=$old_ifs
    i=$((i + 1))
  done
  if [ -z "$ids" ]; then
    echo "ctest_gpu.sh: CTEST_RESOURCE_GROUP_COUNT=$CTEST_RESOURCE_GROUP_COUNT but no gpus allotted" >&2
    exit 2
  fi
  CUDA_VISIBLE_DEVICES=$ids
  export CUDA_VISIBLE_DEVICES
fi
exec "$@"
