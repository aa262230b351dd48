"""The package's layers: CDK-free planning/vllm/ops, no construct importing ops, no cycles."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import cdk_llm_serving
from tests.support.run_order import COSTLIEST_FIRST, pytest_collection_modifyitems

PACKAGE = Path(cdk_llm_serving.__file__).parent
CDK_FREE = ("planning", "vllm", "ops")
CONSTRUCT_PACKAGES = ("sagemaker", "hyperpod")


def _modules(subpackage: str) -> list[str]:
    path = [str(PACKAGE / subpackage)]
    prefix = f"cdk_llm_serving.{subpackage}."
    return [f"cdk_llm_serving.{subpackage}"] + [
        info.name for info in pkgutil.walk_packages(path, prefix)
    ]


def test_cdk_free_layers_load_no_cdk_in_a_fresh_interpreter():
    modules = [name for layer in CDK_FREE for name in _modules(layer)] + [
        "cdk_llm_serving",
        "cdk_llm_serving.errors",
    ]
    script = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('aws_cdk', 'jsii', 'constructs'))))\n"
    )
    loaded = json.loads(subprocess.check_output([sys.executable, "-c", script], text=True))
    assert loaded == [], f"CDK modules loaded by the CDK-free layers: {loaded[:5]}"


def test_the_layer_test_can_fail():
    script = "import cdk_llm_serving.sagemaker, sys; print('aws_cdk' in sys.modules)"
    assert subprocess.check_output([sys.executable, "-c", script], text=True).strip() == "True"


def _imports(path: Path) -> list[str]:
    """Absolute names of the package modules ``path`` imports (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.removesuffix(".__init__")
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            found.append(".".join(base + ([node.module] if node.module else [])))
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.startswith("cdk_llm_serving")]


def _find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph as a path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> list[str] | None:
        state[module] = 1
        for dep in sorted(edges.get(module, ())):
            if state.get(dep) == 1:
                return [*trail, module, dep]
            if dep not in state and (cycle := visit(dep, [*trail, module])):
                return cycle
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state and (cycle := visit(module, [])):
            return cycle
    return None


def _package_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports; a module's own ancestors are left out
    (a package's ``__init__`` re-exporting its modules is no cycle of the modules)."""
    graph: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        graph[module.removesuffix(".__init__")] = _imports(path)

    def resolve(name: str) -> str:
        while name not in graph:
            name = name.rpartition(".")[0]
        return name

    return {
        module: {
            target
            for name in names
            if (target := resolve(name)) != module and not module.startswith(target + ".")
        }
        for module, names in graph.items()
    }


def test_constructs_never_import_ops():
    for subpackage in CONSTRUCT_PACKAGES:
        for path in (PACKAGE / subpackage).rglob("*.py"):
            bad = [name for name in _imports(path) if name.startswith("cdk_llm_serving.ops")]
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_each_serving_path_imports_only_the_shared_core():
    """``hyperpod/`` imports nothing from ``sagemaker/`` (nor the reverse), and ``core/``
    imports neither path: the shared endpoint code lives in ``core/``."""
    forbidden = {
        "hyperpod": "sagemaker",
        "sagemaker": "hyperpod",
        "core": ("sagemaker", "hyperpod"),
    }
    for subpackage, others in forbidden.items():
        for path in (PACKAGE / subpackage).rglob("*.py"):
            bad = [
                name
                for name in _imports(path)
                for other in ((others,) if isinstance(others, str) else others)
                if name.startswith(f"cdk_llm_serving.{other}")
            ]
            assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"


def test_no_function_level_imports_inside_the_package():
    """The package's own modules are imported at module level: no cycle hides in a function.
    (The CLI loads its boto3-backed commands lazily, which keeps ``plan`` fast.)"""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "cli.py" or "assets" in path.parts:
            continue
        tree = ast.parse(path.read_text())
        functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        nested = [
            node.module or "."
            for function in functions
            for node in ast.walk(function)
            if isinstance(node, ast.ImportFrom)
            and (node.level or (node.module or "").startswith("cdk_llm_serving"))
        ]
        assert not nested, f"{path.relative_to(PACKAGE)} imports {nested} inside a function"


def test_no_import_cycles():
    assert _find_cycle(_package_graph()) is None


def test_the_cycle_check_can_fail():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _find_cycle(edges) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_top_level_exports_every_public_construct_lazily():
    """``__all__`` is the construct modules' ``__all__`` plus the eager CDK-free names, and
    each resolves; the fresh-interpreter test above shows the import itself loads no CDK."""
    from cdk_llm_serving import hyperpod, model_sources, sagemaker

    construct_names = {*sagemaker.__all__, *hyperpod.__all__, *model_sources.__all__}
    eager = {
        "ConfigurationError",
        "InstanceType",
        "ModelSizing",
        "ModelSpec",
        "PlanningError",
        "Problem",
        "WeightFormat",
        "Eagle3Speculation",
        "MtpSpeculation",
        "NgramSpeculation",
        "VllmConfig",
        "VllmConfigError",
        "default_catalog",
        "install_error_display",
        "plan",
    }
    assert set(cdk_llm_serving.__all__) == construct_names | eager
    for name in cdk_llm_serving.__all__:
        assert getattr(cdk_llm_serving, name) is not None
    assert set(dir(cdk_llm_serving)) >= set(cdk_llm_serving.__all__)
    with pytest.raises(AttributeError):
        cdk_llm_serving.NoSuchConstruct  # noqa: B018


def test_tests_do_not_import_test_modules():
    tests = Path(__file__).parent
    for path in tests.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                leaf = node.module.rsplit(".", 1)[-1]
                assert not leaf.startswith("test_"), f"{path.name} imports {node.module}"


def test_the_costliest_first_list_names_test_files_that_exist():
    root = PACKAGE.parent
    missing = [path for path in COSTLIEST_FIRST if not (root / path).is_file()]
    assert missing == [], "tests/support/run_order.py names files that are gone"
    assert len(set(COSTLIEST_FIRST)) == len(COSTLIEST_FIRST)


def test_costliest_files_go_first_and_each_file_keeps_its_order():
    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    ids = [
        "tests/a.py::x",
        "tests/test_documentation.py::b",
        "tests/a.py::y",
        f"{COSTLIEST_FIRST[1]}::c",
    ]
    items = [Item(nodeid) for nodeid in ids]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [ids[1], ids[3], ids[0], ids[2]]
