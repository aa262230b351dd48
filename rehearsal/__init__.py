"""The deploy rehearsal: plays a synthesized cloud assembly's deployment without AWS.

``make rehearse`` synthesizes the reference app's HyperPod variants and plays each: the
resources in CloudFormation's order, the Kubernetes objects through models of the controllers
the deployment relies on (each rule citing its source), then the serving pods for real, as
vLLM processes (``rehearsal.live``). It stops at the first thing that would keep the service
from answering (``rehearsal.findings.Finding``) and names the resource, the rule and its source.

Not shipped in the wheel: a project tool beside ``bench/``.
"""
