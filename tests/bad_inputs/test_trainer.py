"""lmcourse.training.trainconfig: every number of a training run is checked where it is given."""
import math

import pytest

from lmcourse.training.trainer import TrainConfig

from .helpers import assert_one_sentence

# --------------------------------------------------------------------------- the training settings


@pytest.mark.parametrize("kwargs, pattern", [
    ({"seed": -1}, r"TrainConfig\.seed must be a whole number from 0 to 2147483647, got -1"),
    ({"seed": "abc"}, r"TrainConfig\.seed must be a whole number .*got 'abc'"),
    ({"seed": 2**40}, r"TrainConfig\.seed must be a whole number"),
    ({"lr_decay": math.inf}, r"TrainConfig\.lr_decay must be a finite number >= 1"),
    ({"lr": math.nan}, r"TrainConfig\.lr must be a finite number >= 0, got nan"),
    ({"variable_bptt": "yes"}, r"TrainConfig\.variable_bptt must be True or False, got 'yes'"),
    ({"out_dir": ""}, r"TrainConfig\.out_dir is empty: give a path, or None"),
])
def test_train_config_checks_every_number_at_construction(kwargs, pattern):
    with pytest.raises(ValueError) as err:
        TrainConfig(epochs=1, **kwargs)
    assert_one_sentence(str(err.value), pattern)
