"""No unencrypted serving path on HyperPod: vLLM serves TLS with a cert-manager certificate.

The reference templates' Services, the leader's command line and volumes, the cert-manager
objects (validated against cert-manager's own CRDs, v1.18.2 = the pinned add-on, from the
chart in ``../shared/charts``), the load balancer's annotations per mode, the scrape
configuration, the deploy order and the one cert-manager add-on per cluster.
"""

from __future__ import annotations

import base64
import json

import jsonschema
import pytest
import yaml

from cdk_llm_serving import ConfigurationError
from cdk_llm_serving.hyperpod._facts import inference_operator_facts
from cdk_llm_serving.hyperpod.addons import CERT_MANAGER_NAMESPACE, CERT_MANAGER_WEBHOOK
from cdk_llm_serving.hyperpod.inference_operator import HyperPodInferenceOperator
from cdk_llm_serving.hyperpod.multi_node_service import Exposure
from cdk_llm_serving.hyperpod.serving_tls import TLS_CERT_FILE, TLS_KEY_FILE, TLS_MOUNT
from cdk_llm_serving.model_sources import ModelData
from cdk_llm_serving.vllm import VllmConfig
from tests.support import yaml_files
from tests.support.app import ROOT, SHARED
from tests.support.builders import new_stack, template_of
from tests.support.hyperpod import deepseek_service, small_cluster
from tests.support.kubernetes_schemas import concretize, undeclared_fields, validate_core
from tests.support.template_helpers import (
    flatten,
    manifest_objects,
    only_resource,
    resources_of_type,
)

CERT_MANAGER_CHART = SHARED / "charts" / "hyperpod-dependencies-011ca92" / "charts" / "cert-manager"
LB = "service.beta.kubernetes.io/aws-load-balancer"
ACM = "arn:aws:acm:us-east-1:123456789012:certificate/abc"


@pytest.fixture(scope="session")
def cert_manager_objects(hyperpod) -> list[dict]:
    return [
        obj
        for obj in manifest_objects(hyperpod, "Serving")
        if obj["apiVersion"].startswith("cert-manager.io/")
    ]


def _crd_schemas() -> dict[str, dict]:
    """kind -> openAPIV3Schema (v1) from cert-manager's chart (template lines dropped)."""
    if not CERT_MANAGER_CHART.is_dir():
        pytest.skip(f"{CERT_MANAGER_CHART} (upstream charts) sits beside the checkout only in CI")
    text = (CERT_MANAGER_CHART / "templates" / "crds.yaml").read_text()
    plain = "\n".join(line for line in text.splitlines() if "{{" not in line)
    schemas = {}
    for crd in yaml_files.load_all(plain):
        if crd:
            (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
            schemas[crd["spec"]["names"]["kind"]] = v1["schema"]["openAPIV3Schema"]
    return schemas


def _leader(lws: dict) -> dict:
    return dict(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"])


# -- no plaintext listener --------------------------------------------------------------


def test_no_service_in_any_reference_template_listens_in_plain_http(
    reference_templates, inference_operator_template
):
    templates = {**reference_templates, "inference-operator": inference_operator_template}
    services = [
        (name, obj)
        for name, template in templates.items()
        for obj in manifest_objects(template, "")
        if obj["kind"] == "Service"
    ]
    assert services, "the HyperPod reference stack deploys a Service"
    for name, service in services:
        for port in service["spec"]["ports"]:
            assert port["port"] == 443 and port["name"] == "https", (name, port)
        annotations = service["metadata"].get("annotations", {})
        assert annotations.get(f"{LB}-healthcheck-protocol") == "HTTPS", name


def test_base_url_is_https(hyperpod):
    (output,) = [v for k, v in hyperpod["Outputs"].items() if k.startswith("ServingBaseUrl")]
    assert output["Value"]["Fn::Join"][1][0] == "https://"


# -- vLLM serves TLS from the certificate's Secret ---------------------------------------


def test_the_leader_serves_tls_from_the_mounted_certificate_secret(lws, cert_manager_objects):
    leader = _leader(lws)
    (container,) = leader["containers"]
    args = container["args"]
    assert args[args.index("--ssl-keyfile") + 1] == TLS_KEY_FILE
    assert args[args.index("--ssl-certfile") + 1] == TLS_CERT_FILE
    assert "--enable-ssl-refresh" in args
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == TLS_MOUNT]
    assert mount["readOnly"] is True
    (volume,) = [v for v in leader["volumes"] if v["name"] == mount["name"]]
    files = {item["path"] for item in volume["secret"]["items"]}
    assert {f"{TLS_MOUNT}/{name}" for name in files} == {TLS_KEY_FILE, TLS_CERT_FILE}
    (serving,) = [
        obj
        for obj in cert_manager_objects
        if obj["kind"] == "Certificate" and not obj["spec"].get("isCA")
    ]
    assert serving["spec"]["secretName"] == volume["secret"]["secretName"]


def test_workers_serve_no_api_and_carry_no_tls_flags(lws):
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    (container,) = worker["containers"]
    assert not [a for a in container["args"] if "ssl" in a]
    assert "ports" not in container


def test_probes_and_port_are_https(lws):
    (container,) = _leader(lws)["containers"]
    assert container["ports"] == [{"name": "https", "containerPort": 8000}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["scheme"] == "HTTPS", probe


def test_network_policy_admits_the_https_container_port(hyperpod, lws):
    (container,) = _leader(lws)["containers"]
    policies = manifest_objects(hyperpod, "ServingNetworkPolicies")
    (api,) = [p for p in policies if p["metadata"]["name"].endswith("-api")]
    (rule,) = api["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": container["ports"][0]["containerPort"]}]


# -- cert-manager objects ------------------------------------------------------------------


def test_cert_manager_objects_match_the_crds(cert_manager_objects):
    schemas = _crd_schemas()
    kinds = sorted(obj["kind"] for obj in cert_manager_objects)
    assert kinds == ["Certificate", "Certificate", "Issuer", "Issuer"]
    for obj in cert_manager_objects:
        schema = schemas[obj["kind"]]
        jsonschema.validate(concretize(obj), schema)
        assert undeclared_fields(obj, schema) == [], obj["metadata"]["name"]


def test_the_longest_names_pass_cert_manager_s_64_character_common_name_limit():
    """cert-manager's webhook refuses a commonName over 64 characters (validation/certificate.go,
    ``field.TooLong``); a service's name may have 59 (its API Service, ``<name>-api``, 63) and
    its namespace 63."""
    name, namespace = "s" * 59, "n" * 63
    stack = new_stack("TlsLongNames")
    cluster, addons, _ = small_cluster(stack)
    deepseek_service(
        stack,
        cluster,
        addons,
        name=name,
        namespace=namespace,
        weights=ModelData.from_s3_uri("s3://weights-bucket/deepseek-v3/"),
    )
    objects = [
        obj
        for obj in manifest_objects(template_of(stack), "Serving")
        if obj["apiVersion"].startswith("cert-manager.io/")
    ]
    certificates = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Certificate"}
    assert sorted(certificates) == [f"{name}-ca", f"{name}-tls"]
    for spec in certificates.values():
        assert len(spec.get("commonName", "")) <= 64
        for values in spec.get("subject", {}).values():
            assert all(len(value) <= 64 for value in values)  # RFC 5280 upper bounds
    assert "commonName" not in certificates[f"{name}-tls"]
    assert certificates[f"{name}-ca"]["subject"] == {"organizationalUnits": [namespace, name]}
    schemas = _crd_schemas()
    for obj in objects:
        jsonschema.validate(concretize(obj), schemas[obj["kind"]])
        assert undeclared_fields(obj, schemas[obj["kind"]]) == [], obj["metadata"]["name"]


def test_the_crd_check_can_fail(cert_manager_objects):
    schemas = _crd_schemas()
    (ca,) = [
        o for o in cert_manager_objects if o["kind"] == "Certificate" and o["spec"].get("isCA")
    ]
    broken = {**ca, "spec": {**ca["spec"], "privateKey": {"algorithm": "DSA"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(concretize(broken), schemas["Certificate"])
    misspelt = {**ca, "spec": {**ca["spec"], "dnsName": ["x"]}}
    assert undeclared_fields(misspelt, schemas["Certificate"]) == [".spec.dnsName"]


def test_the_crds_are_the_pinned_add_on_version():
    if not CERT_MANAGER_CHART.is_dir():
        pytest.skip(f"{CERT_MANAGER_CHART} (upstream charts) sits beside the checkout only in CI")
    chart = yaml.safe_load((CERT_MANAGER_CHART / "Chart.yaml").read_text())
    pinned = inference_operator_facts()["dependencies"]["cert-manager"]
    assert pinned.startswith(f"{chart['version']}-eksbuild.")


def test_ca_chain_and_serving_names(cert_manager_objects):
    by_name = {(o["kind"], o["metadata"]["name"]): o["spec"] for o in cert_manager_objects}
    name, namespace = "reference-moe-nvfp4", "inference"
    assert by_name[("Issuer", f"{name}-tls-bootstrap")] == {"selfSigned": {}}
    ca = by_name[("Certificate", f"{name}-ca")]
    assert ca["isCA"] is True and ca["issuerRef"]["name"] == f"{name}-tls-bootstrap"
    assert by_name[("Issuer", f"{name}-ca")] == {"ca": {"secretName": ca["secretName"]}}
    serving = by_name[("Certificate", f"{name}-tls")]
    assert serving["issuerRef"]["name"] == f"{name}-ca"
    api = f"{name}-api"  # the load-balanced Service (the LWS's name is its headless one's)
    assert serving["dnsNames"][:4] == [
        api,
        f"{api}.{namespace}",
        f"{api}.{namespace}.svc",
        f"{api}.{namespace}.svc.cluster.local",
    ]
    assert serving["dnsNames"][4] == "deploy-time-value"  # the load balancer's hostname
    assert serving["usages"] == ["server auth", "digital signature", "key encipherment"]


def test_the_serving_certificate_outlives_a_leader_s_first_reload_by_a_year(cert_manager_objects):
    """vLLM's watcher reloads only the first renewal after a leader starts (serving_tls,
    "Rotation"): the certificate it reloads must last 1 year, renewed 30 days before its end, and
    the README must say when to restart the leader."""
    (serving,) = [
        o["spec"]
        for o in cert_manager_objects
        if o["kind"] == "Certificate" and not o["spec"].get("isCA")
    ]
    assert (serving["duration"], serving["renewBefore"]) == ("8760h", "720h")
    assert serving["privateKey"]["rotationPolicy"] == "Always"
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "the serving Certificate (1 year, new key at each renewal 30 days" in readme
    assert "restart each leader within a year of its start" in readme


def test_every_cert_manager_manifest_waits_for_the_add_on_and_the_leader_for_its_certificate(
    hyperpod,
):
    resources = hyperpod["Resources"]
    (addon,) = [
        k
        for k, v in resources_of_type(hyperpod, "AWS::EKS::Addon").items()
        if v["Properties"]["AddonName"] == "cert-manager"
    ]
    (issuers,) = [k for k in resources if k.startswith("ServingTlsIssuers")]
    (certificate,) = [k for k in resources if k.startswith("ServingServingCertificate")]
    (lws_key,) = [k for k in resources if k.startswith("ServingLeaderWorkerSet")]
    (hostname,) = [k for k in resources if k.startswith("ServingLoadBalancerHostname")]
    wait, _ = _webhook_wait(hyperpod)  # after the add-on, and its webhook serving
    assert addon in resources[wait]["DependsOn"] and wait in resources[issuers]["DependsOn"]
    assert issuers in resources[certificate]["DependsOn"]
    # the load balancer's hostname is one of its names: an implicit dependency
    assert {"Fn::GetAtt": [hostname, "Value"]} in resources[certificate]["Properties"]["Manifest"][
        "Fn::Join"
    ][1]
    assert certificate in resources[lws_key]["DependsOn"]


def _webhook_wait(template: dict) -> tuple[str, dict]:
    (found,) = [
        (key, resource)
        for key, resource in template["Resources"].items()
        if "CertManagerWebhookReady" in key
        and resource["Type"] == "Custom::AWSCDK-EKS-KubernetesObjectValue"
    ]
    return found


def test_every_cert_manager_manifest_waits_for_the_webhook_to_be_ready(hyperpod):
    """cert-manager refuses its resources until its webhook serves (``cmctl check api``): one
    wait per cluster on the webhook Deployment's ready replicas, after the add-on."""
    resources = hyperpod["Resources"]
    key, wait = _webhook_wait(hyperpod)
    props = wait["Properties"]
    assert (props["ObjectType"], props["ObjectName"], props["ObjectNamespace"]) == (
        "deployment",
        CERT_MANAGER_WEBHOOK,
        CERT_MANAGER_NAMESPACE,
    )
    assert props["JsonPath"] == ".status.readyReplicas"
    (addon,) = [
        k
        for k, v in resources_of_type(hyperpod, "AWS::EKS::Addon").items()
        if v["Properties"]["AddonName"] == "cert-manager"
    ]
    assert addon in wait["DependsOn"]
    cert_manager_manifests = [
        k
        for k, v in resources_of_type(hyperpod, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if any(
            o["apiVersion"].startswith("cert-manager.io/")
            for o in json.loads(flatten(v["Properties"]["Manifest"], "x"))
        )
    ]
    assert len(cert_manager_manifests) == 2  # the CA and its Issuers; the serving Certificate
    for manifest in cert_manager_manifests:
        assert key in resources[manifest]["DependsOn"], manifest


def test_one_webhook_wait_per_cluster():
    """Two services on one cluster share the add-on and its wait."""
    stack = new_stack("TwoTlsServices")
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store, name="first")
    deepseek_service(stack, cluster, addons, store, id="Second", name="second")
    template = template_of(stack)
    key, _ = _webhook_wait(template)
    issuers = [k for k in template["Resources"] if "TlsIssuers" in k]
    assert len(issuers) == 2
    for issuer in issuers:
        assert key in template["Resources"][issuer]["DependsOn"]


def test_the_webhook_wait_names_the_chart_s_deployment(helm_binary):
    """The upstream chart at the add-on's version (stand-in for the add-on, whose manifests AWS
    does not publish), rendered by the real ``helm`` as release ``cert-manager`` in namespace
    ``cert-manager``: a Deployment of that name there, with a readiness probe (what
    ``readyReplicas`` counts)."""
    if not CERT_MANAGER_CHART.is_dir():
        pytest.skip(f"{CERT_MANAGER_CHART} (upstream charts) sits beside the checkout only in CI")
    helm_support = pytest.importorskip("tests.support.helm", reason="helm from the kubectl layer")
    objects = helm_support.helm_template(
        helm_binary, CERT_MANAGER_CHART, "cert-manager", CERT_MANAGER_NAMESPACE, {}
    )
    deployments = {
        (helm_support.namespace_of(o), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] == "Deployment"
    }
    webhook = deployments[(CERT_MANAGER_NAMESPACE, CERT_MANAGER_WEBHOOK)]
    (container,) = webhook["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"


def test_the_ca_certificate_is_an_output_read_from_the_serving_secret(hyperpod):
    (output,) = [v for k, v in hyperpod["Outputs"].items() if k.startswith("ServingCaCertificate")]
    (key,) = [k for k in hyperpod["Resources"] if k.startswith("ServingCaCertificateValue")]
    assert output["Value"] == {"Fn::GetAtt": [key, "Value"]}
    props = hyperpod["Resources"][key]["Properties"]
    assert (props["ObjectType"], props["ObjectName"], props["JsonPath"]) == (
        "secret",
        "reference-moe-nvfp4-tls",
        ".data.ca\\.crt",
    )


# -- the load balancer per mode -------------------------------------------------------------


def test_passthrough_by_default(lws, hyperpod):
    (service,) = manifest_objects(hyperpod, "ServingService")
    annotations = service["metadata"]["annotations"]
    assert annotations[f"{LB}-healthcheck-protocol"] == "HTTPS"
    assert f"{LB}-ssl-cert" not in annotations and f"{LB}-backend-protocol" not in annotations


def test_acm_certificate_terminates_and_re_encrypts_to_the_pod():
    stack = new_stack("TlsAcm")
    service = deepseek_service(stack, *small_cluster(stack), exposure=Exposure(certificate_arn=ACM))
    annotations = service.service["metadata"]["annotations"]
    assert annotations[f"{LB}-ssl-cert"] == ACM
    assert annotations[f"{LB}-ssl-ports"] == "443"
    assert annotations[f"{LB}-backend-protocol"] == "ssl"
    assert annotations[f"{LB}-ssl-negotiation-policy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    assert annotations[f"{LB}-healthcheck-protocol"] == "HTTPS"
    assert service.service["spec"]["ports"][0]["port"] == 443


def test_extra_dns_names_join_the_certificate_and_bad_ones_are_refused():
    stack = new_stack("TlsNames")
    service = deepseek_service(
        stack, *small_cluster(stack), exposure=Exposure(tls_dns_names=("llm.example.com",))
    )
    assert service.certificate["spec"]["dnsNames"][-1] == "llm.example.com"
    validate_core(service.service)
    stack = new_stack("BadTlsNames")
    with pytest.raises(ConfigurationError) as raised:
        deepseek_service(
            stack, *small_cluster(stack), exposure=Exposure(tls_dns_names=("not a name",))
        )
    assert "exposure.tls_dns_names[0]" in str(raised.value)


def test_a_config_may_not_set_the_tls_flags():
    stack = new_stack("TlsFlags")
    with pytest.raises(ConfigurationError) as raised:
        deepseek_service(
            stack,
            *small_cluster(stack),
            config=VllmConfig(
                model="x", max_model_len=32768, extra_flags={"ssl-keyfile": "/tmp/k"}
            ),
        )
    assert "config.extra_flags['ssl-keyfile']" in str(raised.value)


# -- scraper and the shared add-on ------------------------------------------------------------


def test_the_scraper_scrapes_https(hyperpod):
    _, scraper = only_resource(hyperpod, "AWS::APS::Scraper")
    blob = flatten(scraper["Properties"]["ScrapeConfiguration"]["ConfigurationBlob"])
    jobs = yaml.safe_load(base64.b64decode(blob))["scrape_configs"]
    (job,) = [j for j in jobs if j["job_name"] == "vllm"]
    assert job["scheme"] == "https"
    assert job["tls_config"] == {"insecure_skip_verify": True}


def test_one_cert_manager_add_on_serves_both_paths(inference_operator_template):
    addons = [
        v
        for v in resources_of_type(inference_operator_template, "AWS::EKS::Addon").values()
        if v["Properties"]["AddonName"] == "cert-manager"
    ]
    assert len(addons) == 1
    assert manifest_objects(inference_operator_template, "ServingTlsIssuers")


def test_the_shared_add_on_keeps_the_operator_s_logical_id(inference_operator_template):
    """Before it was shared the operator created it: a new id would mean a second add-on."""
    addons = resources_of_type(inference_operator_template, "AWS::EKS::Addon")
    (key,) = [k for k, v in addons.items() if v["Properties"]["AddonName"] == "cert-manager"]
    assert key == "ServingAddonsInferenceOperatorAddoncertmanager9D2C49A5"


def test_the_operator_and_the_service_share_the_add_on():
    stack = new_stack("SharedCertManager")
    cluster, addons, store = small_cluster(stack)
    deepseek_service(stack, cluster, addons, store)
    operator = HyperPodInferenceOperator.of(
        addons, hyperpod_cluster_arn="arn:aws:sagemaker:us-east-1:111122223333:cluster/abc123"
    )
    assert operator.dependencies["cert-manager"] is addons.enable_cert_manager()


def test_a_ray_started_leader_serves_tls_too():
    """Ray start: the leader's shell script runs ``vllm serve`` with the TLS flags; workers
    only join the Ray head."""
    stack = new_stack("TlsRay")
    service = deepseek_service(
        stack,
        *small_cluster(stack),
        model="llama-3.3-70b",
        weight_format="bf16",
        nodes_per_replica=2,
        startup="ray",
    )
    template = service.lws["spec"]["leaderWorkerTemplate"]
    (leader,) = template["leaderTemplate"]["spec"]["containers"]
    script = leader["args"][0]
    assert "exec vllm serve" in script and f"--ssl-certfile {TLS_CERT_FILE}" in script
    assert f"--ssl-keyfile {TLS_KEY_FILE}" in script
    (worker,) = template["workerTemplate"]["spec"]["containers"]
    assert "ssl" not in " ".join(worker["args"])
