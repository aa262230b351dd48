#!/bin/bash
# HyperPod lifecycle script (OnCreate) written by cdk-llm-serving.
#
# HyperPod EKS nodes keep container images and kubelet state on the small root volume by
# default; multi-GB inference images fill it. This script moves containerd and kubelet
# storage onto the instance's largest volume (local NVMe where present, otherwise the
# extra EBS volume HyperPod mounts at /opt/sagemaker) and logs every step.
#
# It neither stops nor starts containerd or kubelet: HyperPod brings them up after the
# lifecycle scripts, as AWS's own script assumes (aws-samples/awsome-distributed-training,
# 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create.sh only
# reports their status). A directory whose service is already running is left in place.
#
# LIFECYCLE_ROOT prefixes every path (empty on a node; the tests point it at a fake root).
set -euo pipefail

ROOT="${LIFECYCLE_ROOT:-}"
LOG="$ROOT/var/log/cdk-llm-serving-on-create.log"
mkdir -p "$(dirname "$LOG")"
exec > >(tee -a "$LOG") 2>&1
log() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }

log "on_create.sh starting on $(hostname)"

# The largest mounted data volume: /opt/dlami/nvme (NVMe RAID HyperPod assembles) or /opt/sagemaker (EBS).
TARGET=""
for candidate in /opt/dlami/nvme /opt/sagemaker; do
  if mountpoint -q "$ROOT$candidate"; then
    TARGET="$ROOT$candidate"
    break
  fi
done

if [[ -z "$TARGET" ]]; then
  log "no secondary volume mounted; leaving container storage on the root volume"
  exit 0
fi
log "moving container and kubelet storage to $TARGET ($(df -h --output=size "$TARGET" | tail -1 | tr -d ' ') total)"

# Copy with rsync where the image has it, else cp -a (both keep owners, modes and links).
copy_tree() {
  local source="$1" destination="$2"
  if command -v rsync >/dev/null 2>&1; then
    rsync -a "$source"/ "$destination"/
  else
    cp -a "$source"/. "$destination"/
  fi
}

# Move one directory onto the target volume and leave a symlink in its place; report
# "moved" only when the source really became that symlink.
move_dir() {
  local source="$1" destination="$2" service="$3"
  if systemctl is-active --quiet "$service" 2>/dev/null; then
    log "  $service is running: leaving $source in place"
    return 0
  fi
  mkdir -p "$destination"
  local verb="linked"
  if [[ -d "$source" && ! -L "$source" ]]; then
    if ! copy_tree "$source" "$destination"; then
      log "  copy of $source to $destination failed: left in place"
      return 0
    fi
    rm -rf "$source"
    verb="moved"
  fi
  if [[ -e "$source" && ! -L "$source" ]]; then
    log "  $source still exists: not linked"
    return 0
  fi
  mkdir -p "$(dirname "$source")"
  ln -sfn "$destination" "$source"
  log "  $verb $source -> $destination"
}

move_dir "$ROOT/var/lib/containerd" "$TARGET/containerd" containerd
move_dir "$ROOT/var/lib/kubelet" "$TARGET/kubelet" kubelet

log "on_create.sh finished"
