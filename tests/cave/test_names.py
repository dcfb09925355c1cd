import doctest

import pytest

import cave.names
from cave.names import check_backend, check_runtime


def test_doctests():
    assert doctest.testmod(cave.names).failed == 0


def test_unknown_names_say_what_to_use():
    with pytest.raises(ValueError, match=r"unknown backend 'locl'; did you mean 'local'\? use one of: .*scripted"):
        check_backend("locl")
    with pytest.raises(ValueError, match=r"unknown runtime 'docker'; use one of: .*inprocess.*kernel"):
        check_runtime("docker")
    assert check_backend("scripted") == "scripted" and check_runtime("kernel") == "kernel"
