"""The docstring examples of the algorithm modules are tests too."""

import doctest

import pytest

import training.advantages
import training.experiments.gradspike
import training.loss
import training.samples


@pytest.mark.parametrize(
    "module", [training.advantages, training.loss, training.samples, training.experiments.gradspike]
)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
