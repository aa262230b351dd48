#!/bin/bash
# HyperPod lifecycle script (OnCreate) written by cdk-llm-serving.
#
# HyperPod EKS nodes keep container images and kubelet state on the small root volume by
# default; multi-GB inference images fill it. This script moves containerd and kubelet
# storage onto the instance's largest volume (local NVMe where present, otherwise the
# extra EBS volume HyperPod mounts at /opt/sagemaker) and logs every step.
set -euo pipefail

LOG=/var/log/cdk-llm-serving-on-create.log
exec > >(tee -a "$LOG") 2>&1
log() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }

log "on_create.sh starting on $(hostname)"

# The largest mounted data volume: /opt/dlami/nvme (NVMe RAID HyperPod assembles) or /opt/sagemaker (EBS).
TARGET=""
for candidate in /opt/dlami/nvme /opt/sagemaker; do
  if mountpoint -q "$candidate"; then
    TARGET="$candidate"
    break
  fi
done

if [[ -z "$TARGET" ]]; then
  log "no secondary volume mounted; leaving container storage on the root volume"
  exit 0
fi
log "moving container and kubelet storage to $TARGET ($(df -h --output=size "$TARGET" | tail -1 | tr -d ' ') total)"

move_dir() {
  local source="$1" destination="$2"
  mkdir -p "$destination"
  if [[ -d "$source" && ! -L "$source" ]]; then
    rsync -a "$source"/ "$destination"/ && rm -rf "$source"
  fi
  ln -sfn "$destination" "$source"
  log "  $source -> $destination"
}

systemctl stop kubelet 2>/dev/null || true
systemctl stop containerd 2>/dev/null || true
move_dir /var/lib/containerd "$TARGET/containerd"
move_dir /var/lib/kubelet "$TARGET/kubelet"
systemctl start containerd 2>/dev/null || true
systemctl start kubelet 2>/dev/null || true

log "on_create.sh finished"
