"""Shared pytest setup: the `slow` marker (larger sizes), skipped unless asked for with `-m slow`."""
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: larger sizes of a test; run them with `pytest -m slow`")


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="larger sizes: run with pytest -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
