"""CirrusMQ local stack: moto + template.yaml's resources + an API Gateway stand-in + schedules.

``from cirrusmq_local import LocalStack``; see :mod:`cirrusmq_local.stack`.
"""

from __future__ import annotations

from cirrusmq_local.stack import LocalStack, default_template_path
from cirrusmq_local.template import TemplateError

__all__ = ["LocalStack", "TemplateError", "default_template_path"]
