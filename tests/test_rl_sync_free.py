"""Act, replay add/sample, reward observation and updates run under the host-sync audit.

:func:`unilab_gpu.utils.sync_audit.no_host_sync` raises on every aten op that would read a
device value back to the host or produce a data-dependent shape on a GPU, so this CPU test
guards the GPU hot path. Compiled functions are audited through their traced Python.
"""

import pytest
import torch
from rl_agent_helpers import synthetic_batch

from unilab_gpu.rl.flashsac import FlashSacAgent, FlashSacConfig
from unilab_gpu.rl.replay import ReplayBuffer
from unilab_gpu.rl.sac import SacAgent, SacConfig
from unilab_gpu.utils.sync_audit import no_host_sync


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_act_replay_and_update_do_no_host_sync(algo):
    num_envs, batch = 4, synthetic_batch(16, 5, 7, 2)
    common = dict(max_grad_norm=1.0, compile=False)  # clipping on to audit it too
    if algo == "sac":
        agent = SacAgent(SacConfig(actor_hidden_dims=(16,), critic_hidden_dims=(16,), **common), 5, 7, 2)
    else:
        cfg = FlashSacConfig(actor_hidden_dim=8, critic_hidden_dim=8, actor_num_blocks=1, critic_num_blocks=1, **common)
        agent = FlashSacAgent(cfg, 5, 7, 2, num_envs=num_envs)
    replay = ReplayBuffer(8, num_envs, 5, 7, 2, n_step=2, final_obs_fraction=0.5)
    obs, critic_obs = torch.randn(num_envs, 5), torch.randn(num_envs, 7)
    ended = torch.tensor([True, False, False, True])
    with no_host_sync():
        for _ in range(4):
            action = agent.act(obs)
            agent.act(obs, deterministic=True)
            reward = -action.square().sum(-1)
            replay.add(obs, critic_obs, action, reward, ended, ~ended, obs, critic_obs)
            if algo == "flashsac":
                agent.observe_step(reward, ended, ~ended)
                agent.noise.reset(ended)
        sampled = replay.sample(16)
        for _ in range(2):  # one update with and one without the actor step
            info = agent.update(batch)
        agent.update(sampled)
    assert set(info) == {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"}
