"""Stack tests: Pulumi mocks are set here, once, before any test module imports a component."""

from tests.stacks import harness  # noqa: F401  (sets the mocks and puts stacks/ on sys.path)
