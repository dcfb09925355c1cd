"""The docstring examples of the algorithm modules are tests too."""

import doctest

import cave.training.advantages
import cave.training.cli
import cave.training.config
import cave.training.datasets
import cave.training.diagnostics
import cave.training.evaluate
import cave.training.experiments.drmas_claim
import cave.training.experiments.gradspike
import cave.training.experiments.search_team
import cave.training.experiments.warmstart
import cave.training.loss
import cave.training.rewards
import cave.training.samples
import cave.training.sft
import pytest


@pytest.mark.parametrize(
    "module",
    [
        cave.training.advantages,
        cave.training.loss,
        cave.training.samples,
        cave.training.experiments.gradspike,
        cave.training.datasets,
        cave.training.diagnostics,
        cave.training.evaluate,
        cave.training.sft,
        cave.training.cli,
        cave.training.config,
        cave.training.experiments.warmstart,
        cave.training.rewards,
        cave.training.experiments.drmas_claim,
        cave.training.experiments.search_team,
    ],
)
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
