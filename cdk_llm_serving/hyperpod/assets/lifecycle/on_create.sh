#!/bin/bash
# HyperPod lifecycle script (OnCreate) written by cdk-llm-serving.
#
# HyperPod EKS nodes keep container images and kubelet state on the small root volume by
# default; multi-GB inference images fill it. This script puts containerd's root and the
# kubelet's directory on the instance's data volume: the local NVMe RAID HyperPod assembles at
# /opt/dlami/nvme on instances with NVMe instance storage, else the EBS volume HyperPod mounts
# at /opt/sagemaker (every group of a HyperPodEksCluster has one: InstanceStorageConfigs).
# What AWS's own script does (aws-samples/awsome-distributed-training,
# 1.architectures/7.sagemaker-hyperpod-eks/LifecycleScripts/base-config/on_create_main.sh),
# written anew:
#
# * wait up to 60 s for the volume to be mounted (12 polls, 5 s apart);
# * set containerd's root in its configuration (Amazon Linux 2: the EKS bootstrap's template
#   /etc/eks/containerd/containerd-config.toml; Amazon Linux 2023: a configuration on the data
#   volume and a systemd drop-in that starts containerd with it), copying what containerd
#   already holds; not a symlink of /var/lib/containerd;
# * move /var/lib/kubelet to the volume behind a symlink (AWS's script does the same).
#
# No silent fallback to the root volume: when no data volume is mounted after the wait, or
# containerd's configuration cannot be set (an OS other than Amazon Linux 2 or 2023, the two
# AWS's script configures), the script fails (exit 1). ASSUMED: HyperPod then reports the node
# in Failure (ListClusterNodes), which fails the node wait with that status; AWS's script exits
# 1 the same way after keeping 60 s for its log to be uploaded. An
# instance with NVMe instance storage whose NVMe volume does not appear uses /opt/sagemaker
# and says so: a WARNING in the log and `fallback` in the marker file.
#
# The outcome is written to the marker $ROOT/var/lib/cdk-llm-serving/container-storage
# (key=value lines: outcome, volume, containerd_root, kubelet_dir).
#
# It neither stops nor starts containerd or kubelet: HyperPod brings them up after the
# lifecycle scripts, as AWS's own script assumes (it only reports their status). On Amazon
# Linux 2023 the configuration is written whole, with AWS's settings (see step 2), not copied.
#
# LIFECYCLE_ROOT prefixes every file path (empty on a node; the tests point it at a fake root);
# paths written into configuration files are the node's, without it.
set -euo pipefail

ROOT="${LIFECYCLE_ROOT:-}"
LOG="$ROOT/var/log/cdk-llm-serving-on-create.log"
MARKER="$ROOT/var/lib/cdk-llm-serving/container-storage"
NVME=/opt/dlami/nvme
EBS=/opt/sagemaker
MOUNT_POLLS=12
MOUNT_POLL_SECONDS=5
mkdir -p "$(dirname "$LOG")" "$(dirname "$MARKER")"
exec > >(tee -a "$LOG") 2>&1
log() { echo "[$(date -u +%Y-%m-%dT%H:%M:%SZ)] $*"; }

# Record the outcome, and on failure leave time for the log to be uploaded (as AWS's script
# does: 60 s before it exits with an error).
mark() { printf '%s\n' "$@" > "$MARKER"; }
fail() {
  log "ERROR: $*"
  mark "outcome=failed" "reason=$*"
  sync || true
  sleep 60
  exit 1
}

log "on_create.sh starting on $(hostname)"

# -- 1. the data volume --------------------------------------------------------------------------

# EC2 names NVMe instance-store devices by their model, "Amazon EC2 NVMe Instance Storage"
# (EC2 user guide, "SSD instance store volumes"); udev links them by id.
has_instance_storage() {
  compgen -G "$ROOT/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*" >/dev/null
}

mounted() { mountpoint -q "$ROOT$1"; }

WANTED="$EBS"
if has_instance_storage; then
  WANTED="$NVME"
fi
log "data volume expected at $WANTED"
for ((poll = 1; poll <= MOUNT_POLLS; poll++)); do
  if mounted "$WANTED"; then
    break
  fi
  log "waiting for $WANTED to be mounted ($poll/$MOUNT_POLLS)"
  sleep "$MOUNT_POLL_SECONDS"
done

OUTCOME="$([[ "$WANTED" == "$NVME" ]] && echo nvme || echo ebs)"
VOLUME="$WANTED"
if ! mounted "$WANTED"; then
  if [[ "$WANTED" == "$NVME" ]] && mounted "$EBS"; then
    log "WARNING: $NVME not mounted after $((MOUNT_POLLS * MOUNT_POLL_SECONDS)) s on an instance with NVMe instance storage: using $EBS instead"
    OUTCOME=fallback
    VOLUME="$EBS"
  else
    fail "no data volume mounted after $((MOUNT_POLLS * MOUNT_POLL_SECONDS)) s ($WANTED): container images would fill the root volume"
  fi
fi
log "container and kubelet storage go to $VOLUME ($(df -h --output=size "$ROOT$VOLUME" | tail -1 | tr -d ' ') total)"

# -- 2. containerd's root, in its configuration --------------------------------------------------

CONTAINERD_ROOT="$VOLUME/containerd"

# Copy with rsync where the image has it, else cp -a (both keep owners, modes and links).
copy_tree() {
  local source="$1" destination="$2"
  if command -v rsync >/dev/null 2>&1; then
    rsync -a "$source"/ "$destination"/
  else
    cp -a "$source"/. "$destination"/
  fi
}

# Print config file $1 with its top-level `root` set to $2 (replaced, or added before the
# first table when the file has none).
with_root() {
  local file="$1" root="$2"
  awk -v line="root = \"$root\"" '
    !done && /^[[:space:]]*root[[:space:]]*=/ { print line; done = 1; next }
    !done && /^[[:space:]]*\[/ { print line; done = 1 }
    { print }
    END { if (!done) print line }
  ' "$file"
}

OS_VERSION=""
if [[ -f "$ROOT/etc/os-release" ]]; then
  OS_VERSION="$(. "$ROOT/etc/os-release" && echo "${VERSION_ID:-}")"
fi

mkdir -p "$ROOT$CONTAINERD_ROOT"
if [[ -d "$ROOT/var/lib/containerd" && ! -L "$ROOT/var/lib/containerd" ]]; then
  copy_tree "$ROOT/var/lib/containerd" "$ROOT$CONTAINERD_ROOT" ||
    fail "copying /var/lib/containerd to $CONTAINERD_ROOT failed"
fi

case "$OS_VERSION" in
  2)
    # Amazon Linux 2: the EKS bootstrap installs this template as containerd's configuration.
    TEMPLATE="$ROOT/etc/eks/containerd/containerd-config.toml"
    [[ -f "$TEMPLATE" ]] || fail "Amazon Linux 2 without $TEMPLATE: cannot set containerd's root"
    with_root "$TEMPLATE" "$CONTAINERD_ROOT" > "$TEMPLATE.new"
    mv "$TEMPLATE.new" "$TEMPLATE"
    log "  containerd root = $CONTAINERD_ROOT in /etc/eks/containerd/containerd-config.toml"
    ;;
  2023)
    # A whole configuration, as AWS's HyperPod EKS lifecycle script writes on Amazon Linux 2023
    # (aws-samples/awsome-distributed-training 1.architectures/7.sagemaker-hyperpod-eks/
    # LifecycleScripts/base-config/on_create_main.sh), not a copy of /etc/containerd/config.toml:
    # at this point that file may not be the one containerd serves GPU pods with (awslabs/
    # awsome-distributed-ai PR 825, "Pods were not running on AL23 ami"). The settings are the
    # ones AWS's script gives: CRI with CDI, the NVIDIA runtime as the default, the node's pause
    # image, registry hosts and CNI directories; the root is ours.
    CONFIG="$VOLUME/containerd-config.toml"
    {
      echo 'version = 2'
      echo "root = \"$CONTAINERD_ROOT\""
      echo 'state = "/run/containerd"'
      echo '[grpc]'
      echo 'address = "/run/containerd/containerd.sock"'
      echo '[plugins."io.containerd.grpc.v1.cri"]'
      echo 'sandbox_image = "localhost/kubernetes/pause"'
      echo 'enable_cdi = true'
      echo '[plugins."io.containerd.grpc.v1.cri".containerd]'
      echo 'default_runtime_name = "nvidia"'
      echo 'discard_unpacked_layers = true'
      echo '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]'
      echo 'runtime_type = "io.containerd.runc.v2"'
      echo 'base_runtime_spec = "/etc/containerd/base-runtime-spec.json"'
      echo '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]'
      echo 'BinaryName = "/usr/bin/nvidia-container-runtime"'
      echo 'SystemdCgroup = true'
      echo '[plugins."io.containerd.grpc.v1.cri".registry]'
      echo 'config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"'
      echo '[plugins."io.containerd.grpc.v1.cri".cni]'
      echo 'bin_dir = "/opt/cni/bin"'
      echo 'conf_dir = "/etc/cni/net.d"'
    } > "$ROOT$CONFIG"
    DROP_IN="$ROOT/etc/systemd/system/containerd.service.d"
    mkdir -p "$DROP_IN"
    CONTAINERD_BIN="$(command -v containerd || echo /usr/bin/containerd)"
    printf '%s\n' "[Service]" "ExecStart=" "ExecStart=${CONTAINERD_BIN#"$ROOT"} --config $CONFIG" \
      > "$DROP_IN/50-cdk-llm-serving-root.conf"
    systemctl daemon-reload
    log "  containerd root = $CONTAINERD_ROOT in $CONFIG (systemd drop-in containerd.service.d/50-cdk-llm-serving-root.conf)"
    ;;
  *)
    fail "unsupported OS (VERSION_ID '${OS_VERSION}'): cannot set containerd's root"
    ;;
esac
if systemctl is-active --quiet containerd 2>/dev/null; then
  log "WARNING: containerd is running: its new root applies from its next start"
fi

# -- 3. the kubelet's directory, moved behind a symlink ------------------------------------------

# Move one directory onto the volume and leave a symlink in its place; report "moved" only
# when the source really became that symlink.
move_dir() {
  local source="$1" destination="$2" service="$3"
  if systemctl is-active --quiet "$service" 2>/dev/null; then
    log "  $service is running: leaving $source in place"
    return 1
  fi
  mkdir -p "$destination"
  local verb="linked"
  if [[ -d "$source" && ! -L "$source" ]]; then
    copy_tree "$source" "$destination" || fail "copying $source to $destination failed"
    rm -rf "$source"
    verb="moved"
  fi
  mkdir -p "$(dirname "$source")"
  ln -sfn "$destination" "$source"
  log "  $verb $source -> $destination"
}

KUBELET_DIR="$VOLUME/kubelet"
if ! move_dir "$ROOT/var/lib/kubelet" "$ROOT$KUBELET_DIR" kubelet; then
  KUBELET_DIR=/var/lib/kubelet
fi

mark "outcome=$OUTCOME" "volume=$VOLUME" "containerd_root=$CONTAINERD_ROOT" "kubelet_dir=$KUBELET_DIR"
log "on_create.sh finished ($OUTCOME)"
