"""One staging endpoint per copy of a pool endpoint, so each copy can be evaluated alone.

A pool endpoint chooses the pool per request, so an eval sent to it may be answered by any
copy; a one-pool endpoint per copy (its model reused) lets ``cdk-llm-serving eval`` target each
(docs/design/pool-endpoints.md, "Staging endpoints").
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

import yaml
from aws_cdk import CfnOutput, Duration, Names, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .._cdk.function_role import acknowledge_lambda_hipaa, role_with_own_logs
from .._cdk.nag import acknowledge
from .._cdk.role_grants import acknowledge_bearer_token
from ..errors import ConfigurationError, Problem, Problems, checked_props
from ..evals.tasks import load_tasks
from ..planning.instance_types import InstanceType
from .endpoint_options import PoolEndpointProps, with_defaults
from .instance_pool import InstancePool
from .pool_endpoint import InstancePoolEndpoint
from .serving_model import ServingModel
from .vllm_pool_endpoint import VllmPoolEndpoint, _construct_id

#: The gate function's longest run: within the 2 minutes of integ-tests-alpha's assertion
#: provider (lib/assertions/providers/provider.ts), so the gate reports why it stops.
GATE_TIMEOUT = Duration.seconds(110)
#: The modules the gate function runs (the package's, without its CDK-importing ``__init__``).
_GATE_MODULES = (
    "_extras.py",
    "errors.py",
    "ops/bearer_token.py",
    "ops/exit_codes.py",
    "ops/smoke.py",
    "ops/evals/__init__.py",
    "ops/evals/gate_handler.py",
    "ops/evals/run.py",
    "ops/evals/scoring.py",
    "evals/__init__.py",
    "evals/tasks.py",
    "evals/task_file.schema.json",
)
#: ``jsonschema`` and what it imports (the ``[eval]`` extra), copied from this environment; the
#: function's runtime is this interpreter's Python (``rpds`` is a compiled extension).
_GATE_LIBRARIES = (
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "attr",
    "attrs",
    "typing_extensions",
)


@dataclass(frozen=True)
class StagingCopy:
    """One copy's staging endpoint."""

    #: The copy's own served name (what its answers report as ``model``).
    served_model_name: str
    #: The name clients send (every copy serves it).
    client_model_name: str
    instance_type: InstanceType
    endpoint: InstancePoolEndpoint

    @property
    def openai_base_url(self) -> str:
        return self.endpoint.openai_base_url


class StagingEndpoints(Construct):
    """A one-pool endpoint per copy of ``source``, for per-copy evals (``cdk-llm-serving eval``).

    :param source: the pool endpoint whose copies to stage (its models are reused): a
        ``VllmPoolEndpoint`` or an ``InstancePoolEndpoint``.
    :param props: each staging endpoint's options, as ``InstancePoolEndpoint``'s
        (``PoolEndpointProps``), with the defaults of a copy that is asked, not watched:
        ``enhanced_metrics`` and ``detailed_observability`` off, the source's ``catalog``.
        ``initial_instance_count`` is 1-10; ``endpoint_name`` is each copy's own (derived
        from its construct path).

    Each copy has two outputs, ``<Copy>BaseUrl`` (``eval --base-url``) and ``<Copy>Name``
    (``eval --expect-copy``). ``copies`` lists them in the source's pool order; the first is
    the reference copy (the most preferred pool's).
    """

    @checked_props
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        source: VllmPoolEndpoint | InstancePoolEndpoint,
        **props: Unpack[PoolEndpointProps],
    ) -> None:
        super().__init__(scope, id)
        self._check_props(props)
        self.source = source
        self.copies: list[StagingCopy] = []
        pooled = source.endpoint if isinstance(source, VllmPoolEndpoint) else source
        staging: PoolEndpointProps = {
            "enhanced_metrics": False,
            "detailed_observability": False,
            "catalog": source.catalog,
            **props,
        }
        for index, pool in enumerate(pooled.pools):
            model = pool.model or pooled.model
            assert model is not None  # an InstancePoolEndpoint serves a model on every pool
            self.copies.append(self._stage(index, pool, model, staging))

    def _check_props(self, props: PoolEndpointProps) -> None:
        """Each endpoint's options (``with_defaults``), a small fleet, and no shared name."""
        subject = f"StagingEndpoints '{self.node.path}'"
        count = with_defaults(subject, props, ("source",))["initial_instance_count"]
        problems = Problems(subject)
        if not 1 <= count <= 10:
            problems.add("initial_instance_count", count, "a whole number from 1 to 10")
        if (name := props.get("endpoint_name")) is not None:
            problems.add("endpoint_name", name, "each copy's endpoint is named from its path")
        problems.raise_if_any()

    def _stage(
        self, index: int, pool: InstancePool, model: ServingModel, props: PoolEndpointProps
    ) -> StagingCopy:
        """One copy's one-pool endpoint on its pool's type, and its two outputs."""
        served = model.served_model_name
        if served is None:
            problems = Problems(f"StagingEndpoints '{self.node.path}'")
            required = "a served name: the copy's answers report it and the gate checks it"
            problems.add(f"source.pools[{index}].model.served_model_name", None, required)
            problems.raise_if_any()
        assert served is not None
        instance_type = InstanceType(str(pool.instance_type))
        copy_id = _construct_id(f"{served}-{str(instance_type).removeprefix('ml.')}")
        endpoint = InstancePoolEndpoint(
            self,
            copy_id,
            model=model,
            pools=[InstancePool(pool.instance_type, max_concurrency=pool.max_concurrency)],
            **props,
        )
        CfnOutput(
            self,
            f"{copy_id}BaseUrl",
            value=endpoint.openai_base_url,
            description=f"eval --base-url for the copy {served} on {instance_type}",
        )
        CfnOutput(
            self,
            f"{copy_id}Name",
            value=served,
            description="eval --expect-copy (the copy's own served name)",
        )
        return StagingCopy(served, model.client_model_name or served, instance_type, endpoint)

    def eval_gate(self, tasks: str | Path, *, id: str = "EvalGate") -> EvalGate:
        """A function that scores every copy on ``tasks`` and gates each on its delta to the
        first copy (the reference), for an integ-tests-alpha assertion (``EvalGate.event``).

        :param tasks: a task file (``cdk_llm_serving.evals.tasks``), validated now: a bad
            file is a ``ConfigurationError`` at synth time.
        :param id: the function's construct id. Default: ``EvalGate``.
        """
        return EvalGate(self, id, staging=self, tasks=tasks)


class EvalGate(Construct):
    """The gate function of ``StagingEndpoints.eval_gate``.

    ``function`` runs ``cdk_llm_serving.ops.evals.gate_handler`` with a SageMaker bearer token
    from its role (``grant_invoke`` on every staging endpoint) and at most ``GATE_TIMEOUT``;
    ``event`` is the JSON payload to invoke it with (the tasks, every copy's URL and name).
    """

    @checked_props
    def __init__(
        self, scope: Construct, id: str, *, staging: StagingEndpoints, tasks: str | Path
    ) -> None:
        super().__init__(scope, id)
        self.tasks = load_tasks(tasks)  # ConfigurationError: every problem of the file
        raw = yaml.safe_load(Path(tasks).read_text(encoding="utf-8"))
        role, log_group = role_with_own_logs(
            self,
            role_id="Role",
            logs_id="Logs",
            description="cdk-llm-serving eval gate: calls the staging endpoints",
            logs_removal=RemovalPolicy.DESTROY,  # a staging stack's, destroyed with it
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=_runtime(),
            architecture=lambda_.Architecture.X86_64,
            handler="cdk_llm_serving.ops.evals.gate_handler.handler",
            code=lambda_.Code.from_asset(str(_gate_code())),
            timeout=GATE_TIMEOUT,
            memory_size=256,
            role=role,
            log_group=log_group,
            description="cdk-llm-serving eval gate: scores each staging copy against the first",
            # An integ-tests-alpha assertion stack (another environment) invokes it by name:
            # derived from the construct path (Lambda: 1-64 of [A-Za-z0-9_-]).
            function_name=Names.unique_resource_name(self, max_length=64, separator="-"),
        )
        for copy in staging.copies:
            copy.endpoint.grant_invoke(self.function)
        acknowledge_bearer_token(self.function)
        acknowledge_lambda_hipaa(
            self.function,
            concurrency="Invoked once per deployment by the integ assertion.",
            dead_letter="Invoked synchronously by the assertion: no event to dead-letter.",
            outside_vpc="Calls only the SageMaker runtime's public, bearer-token HTTPS API.",
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            "The runtime is the synthesizing Python's: the bundled rpds (jsonschema's) is "
            "a compiled extension built for it.",
        )
        self.event: dict[str, Any] = {
            "tasks": raw,
            "auth": "sagemaker",
            "copies": [
                {
                    "base_url": copy.openai_base_url,
                    "model": copy.client_model_name,
                    "expect_copy": copy.served_model_name,
                }
                for copy in staging.copies
            ],
        }

    @property
    def payload(self) -> str:
        """``event`` as the JSON text an ``invoke_function`` assertion sends."""
        return Stack.of(self).to_json_string(self.event)


def _runtime() -> lambda_.Runtime:
    """The Lambda runtime of this interpreter's Python (the bundled ``rpds`` is built for it)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    runtimes = {"3.11": lambda_.Runtime.PYTHON_3_11, "3.12": lambda_.Runtime.PYTHON_3_12}
    if version not in runtimes:
        raise ConfigurationError(
            "EvalGate",
            [Problem("python", version, f"synthesize with Python {' or '.join(runtimes)}")],
        )
    return runtimes[version]


@functools.cache
def _gate_code() -> Path:
    """A directory with the gate's modules under ``cdk_llm_serving/`` (an empty package
    ``__init__``: the real one imports the CDK) and ``jsonschema`` with its imports."""
    package = Path(__file__).resolve().parents[1]
    root = Path(tempfile.mkdtemp(prefix="cdk-llm-serving-gate-"))
    for relative in ("__init__.py", "ops/__init__.py"):
        (root / "cdk_llm_serving" / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / "cdk_llm_serving" / relative).write_text("")
    for relative in _GATE_MODULES:
        target = root / "cdk_llm_serving" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(package / relative, target)
    for name in _GATE_LIBRARIES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ConfigurationError(
                "EvalGate", [Problem(name, None, "installed: pip install 'cdk-llm-serving[eval]'")]
            )
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(
                origin.parent,
                root / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "tests"),
            )
        else:
            shutil.copyfile(origin, root / origin.name)
    return root
