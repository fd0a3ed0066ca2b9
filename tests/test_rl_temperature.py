"""Temperature loss gradient: alpha falls when entropy exceeds the target, rises below it."""

import math

import pytest
import torch

from unilab_gpu.rl.temperature import Temperature


@pytest.mark.parametrize(("entropy", "direction"), [(1.0, -1.0), (-5.0, 1.0)])
def test_gradient_step_direction(entropy, direction):
    temperature = Temperature(init=0.1, target_entropy=-2.0)
    assert temperature.alpha().item() == pytest.approx(0.1)
    temperature.loss(torch.tensor(entropy)).backward()
    # d loss / d log_alpha = entropy - target
    assert temperature.log_alpha.grad.item() == pytest.approx(entropy + 2.0)
    with torch.no_grad():
        temperature.log_alpha -= 0.1 * temperature.log_alpha.grad
    assert math.copysign(1.0, temperature.alpha().item() - 0.1) == direction


def test_invalid_init_is_named():
    with pytest.raises(ValueError, match="temperature"):
        Temperature(init=0.0, target_entropy=-1.0)
