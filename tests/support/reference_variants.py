"""The reference app's documented variants (README "Reference app" context keys), one each."""

from __future__ import annotations

VARIANTS: dict[str, dict[str, str]] = {
    "keda": {"llm-serving:reference-moe:max-replicas": "2"},
    "keda-routed": {
        "llm-serving:reference-moe:max-replicas": "2",
        "llm-serving:reference-moe:prefix-routing": "true",
    },
    "keda-zero": {
        "llm-serving:reference-moe:max-replicas": "2",
        "llm-serving:reference-moe:scale-to-zero": "true",
    },
    "inference-operator": {"llm-serving:hyperpod:inference-operator": "true"},
    "p5en": {"llm-serving:reference-moe:gpu-instance-type": "ml.p5en.48xlarge"},
    "gpu-az": {"llm-serving:hyperpod:gpu-az-id": "usw2-az2"},
}
