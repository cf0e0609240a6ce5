"""Shared test set-up. Fixture modules are plugins so every test package can use them."""

pytest_plugins = ["tests.fixtures.nodes", "tests.fixtures.aws"]
