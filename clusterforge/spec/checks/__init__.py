"""Semantic checks on a cluster spec against the hardware and software catalogues.

Phase two of validation (phase one is the schema, in ``clusterforge.spec.loader``): every
check runs, every finding is reported at once, each with file, line and key path.
"""

from clusterforge.spec.checks.base import Check, CheckContext, Issue
from clusterforge.spec.checks.registry import CHECKS, Report, check_file, check_ids, run_checks

__all__ = ["CHECKS", "Check", "CheckContext", "Issue", "Report", "check_file", "check_ids", "run_checks"]
