"""Drift: skip the converge of nodes whose inputs and managed state are unchanged (issue 15)."""
