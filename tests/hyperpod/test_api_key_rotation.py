"""The README's key rotation, run as written: fake ``aws`` and ``kubectl`` record what it does,
the leader's own start (from the synthesized LeaderWorkerSet) reads each value it puts, its
patch is applied to that LeaderWorkerSet and checked against the LWS CRD, and its ``aws``
commands against botocore's Secrets Manager model."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import botocore.session
import jsonschema
import pytest
import yaml

from cdk_llm_serving.hyperpod.serving_security import API_KEY_FILE
from cdk_llm_serving.vllm.multinode import API_KEYS_CONFIG
from tests.support.hyperpod import lws_crd_schema
from tests.support.kubernetes_schemas import concretize
from tests.support.start_script import run_in_container
from tests.support.template_helpers import manifest_objects

ROOT = Path(__file__).resolve().parents[2]
SECRET = "arn:aws:secretsmanager:us-west-2:111122223333:secret:api-key-AbCdEf"

_FAKE_AWS = """#!/bin/sh
printf '%s\\0' aws "$@" >> "$LOG"; printf '\\036' >> "$LOG"
case "$2" in get-secret-value) echo old-key;; get-random-password) echo new-key;; esac
"""
#: Its status alternates: a rollout under way (1 of 2 replicas updated), then done, so each
#: restart's two waits (the rollout started, then finished) each end once.
_FAKE_KUBECTL = """#!/bin/sh
printf '%s\\0' kubectl "$@" >> "$LOG"; printf '\\036' >> "$LOG"
case " $* " in *" get "*)
  echo x >> "$LOG.gets"
  if [ $(($(wc -l < "$LOG.gets") % 2)) -eq 1 ]; then echo "2 2 1 2"; else echo "2 2 2 2"; fi;;
esac
"""


def rotation_block() -> str:
    readme = (ROOT / "README.md").read_text()
    at = readme.index("**Rotating the key without an outage:**")
    (block,) = re.findall(r"^  ```bash\n(.*?)^  ```$", readme[at:], re.M | re.S)[:1]
    return "\n".join(line.removeprefix("  ") for line in block.splitlines())


@pytest.fixture(scope="module")
def calls(lws, tmp_path_factory) -> list[list[str]]:
    """Every ``aws`` and ``kubectl`` command of the README's block, in order."""
    tmp = tmp_path_factory.mktemp("rotation")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, text in (("aws", _FAKE_AWS), ("kubectl", _FAKE_KUBECTL), ("sleep", "#!/bin/sh\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    first, rest = rotation_block().split("\n", 1)
    assert first.startswith("SECRET=<")
    values = f"SECRET={SECRET}; NS={lws['metadata']['namespace']}; LWS={lws['metadata']['name']}"
    log = tmp / "calls"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "LOG": str(log)}
    done = subprocess.run(
        ["bash", "-euc", f"{values}\n{rest}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [call.split("\0")[:-1] for call in log.read_text().split("\x1e")[:-1]]


def option(call: list[str], name: str) -> str:
    return call[call.index(name) + 1]


def keys_after(value: str, lws: dict, tmp_path: Path) -> list[str]:
    """The keys vLLM gets from the leader's start (the template's) when the secret is ``value``."""
    (container,) = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"]
    key_file, config = tmp_path / "api-key", tmp_path / "keys.yaml"
    key_file.write_text(value)
    script = container["args"][0].replace(API_KEY_FILE, str(key_file))
    script = script.replace(API_KEYS_CONFIG, str(config))
    out = run_in_container(container["command"], [script, *container["args"][1:]], tmp_path)
    assert out.startswith("rc=0\n"), out
    return list(yaml.safe_load(config.read_text())["api-key"])


def test_both_keys_work_during_the_rollout_and_only_the_new_one_after(calls, lws, tmp_path):
    puts = [c for c in calls if c[:3] == ["aws", "secretsmanager", "put-secret-value"]]
    assert [option(c, "--secret-id") for c in puts] == [SECRET, SECRET]
    both, new = (option(c, "--secret-string") for c in puts)
    assert keys_after(both, lws, tmp_path) == ["old-key", "new-key"]
    assert keys_after(new, lws, tmp_path) == ["new-key"]
    restarts = [i for i, c in enumerate(calls) if "patch" in c]
    assert len(restarts) == 2 and calls.index(puts[0]) < restarts[0] < calls.index(puts[1])
    assert restarts[1] > calls.index(puts[1])


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch, the semantics of ``kubectl patch --type merge`` (RFC 7386)."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def test_the_restart_rolls_the_leader_worker_set_and_stays_valid(calls, lws, shared_dir):
    patches = [c for c in calls if "patch" in c]
    assert all(c[:3] == ["kubectl", "-n", lws["metadata"]["namespace"]] for c in patches)
    first, second = (json.loads(option(c, "-p")) for c in patches)
    assert option(patches[0], "--type") == "merge" and "leaderworkerset" in patches[0]
    assert lws["metadata"]["name"] in patches[0]
    patched = merge_patch(lws, first)
    jsonschema.validate(concretize(patched), lws_crd_schema(shared_dir))
    # A changed leaderWorkerTemplate is a new LWS revision, which LWS rolls out
    # (kubernetes-sigs/lws pkg/utils/revision/revision_utils.go, getPatch).
    assert patched["spec"]["leaderWorkerTemplate"] != lws["spec"]["leaderWorkerTemplate"]
    # ... and the annotation is all that changes (the rollout strategy, the pods stay ours).
    template = patched["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    (annotation,) = template.pop("annotations")
    assert annotation.startswith("cdk-llm-serving/") and patched == lws
    # The wait reads fields the CRD's status has.
    (get,) = {tuple(c) for c in calls if "get" in c}
    status = lws_crd_schema(shared_dir)["properties"]["status"]["properties"]
    for field in re.findall(r"\{\.status\.(\w+)\}", option(list(get), "-o")):
        assert field in status


def test_the_aws_commands_are_secrets_managers(calls):
    model = botocore.session.get_session().get_service_model("secretsmanager")
    names = {re.sub(r"(?<!^)(?=[A-Z])", "-", op).lower(): op for op in model.operation_names}
    global_options = {"--query", "--output"}
    for call in (c for c in calls if c[0] == "aws"):
        assert call[1] == "secretsmanager"
        operation = model.operation_model(names[call[2]])
        members = {
            re.sub(r"(?<!^)(?=[A-Z])", "-", m).lower() for m in operation.input_shape.members
        }
        for flag in (a for a in call[3:] if a.startswith("--")):
            assert flag in global_options or flag[2:] in members, (call[2], flag)


def test_a_restarting_leader_mounts_the_value_just_put(hyperpod):
    """put-secret-value moves AWSCURRENT to the new value, and the provider class names no
    version, so the AWS provider fetches AWSCURRENT (GetSecretValue's default)."""
    model = botocore.session.get_session().get_service_model("secretsmanager")
    put = model.operation_model("PutSecretValue").documentation
    assert "automatically moves the staging label <code>AWSCURRENT</code> to this version" in put
    get = model.operation_model("GetSecretValue").input_shape.members["VersionStage"]
    assert "returns the <code>AWSCURRENT</code> version" in get.documentation
    (spc,) = manifest_objects(hyperpod, "ServingApiKeyProvider")
    (obj,) = yaml.safe_load(spc["spec"]["parameters"]["objects"])
    assert not {"objectVersion", "objectVersionLabel"} & set(obj)


def test_each_restart_waits_for_the_rollout_to_start_then_to_end(calls):
    """The status has no observedGeneration: a wait that only asked "all updated and ready?"
    could read the status from before the patch and end at once."""
    kinds = ["patch" if "patch" in c else "get" for c in calls if c[0] == "kubectl"]
    assert kinds == ["patch", "get", "get"] * 2
