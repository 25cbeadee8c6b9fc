"""The demonstration dataset format: write, read, validate; expert episodes."""

import json

import numpy as np
import pytest

from rl_core.config import load_config
from rl_core.data import demos as fmt
from rl_core.data import expert_play


def episode(length, seed, success, text="push the block", image=False):
    rng = np.random.default_rng(seed)
    obs = {"states": rng.normal(size=(length, 3)).astype(np.float32)}
    if image:
        obs["main_images"] = rng.integers(0, 255, (length, 4, 4, 3), dtype=np.uint8)
    return fmt.Episode(
        observations=obs,
        actions=rng.uniform(-1, 1, (length, 2)).astype(np.float32),
        rewards=np.ones(length, np.float32),
        seed=seed,
        success=success,
        instruction=text,
        task="push-v3",
    )


def write(folder, shards):
    names = [fmt.write_shard(folder, i, eps) for i, eps in enumerate(shards)]
    return fmt.write_manifest(folder, names, {"env_type": "toy"}, "test")


def test_round_trip_keeps_every_step_and_instruction(tmp_path):
    eps = [[episode(3, 0, True, image=True), episode(2, 1, False, "open", image=True)]]
    eps.append([episode(4, 2, True, "reach", image=True)])
    manifest = write(tmp_path, eps)
    assert (manifest["episodes"], manifest["steps"], manifest["successes"]) == (3, 9, 2)
    assert manifest["spaces"]["main_images"] == {"shape": [4, 4, 3], "dtype": "uint8"}
    data = fmt.load_demos(tmp_path)
    assert len(data) == 9
    flat = [e for shard in eps for e in shard]
    np.testing.assert_array_equal(data.actions, np.concatenate([e.actions for e in flat]))
    np.testing.assert_array_equal(
        data.observations["main_images"],
        np.concatenate([e.observations["main_images"] for e in flat]),
    )
    assert data.instructions.tolist() == ["push the block"] * 3 + ["open"] * 2 + ["reach"] * 4
    assert data.episode_index.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    obs = data.env_obs(np.array([4, 5]))
    assert obs["task_descriptions"].tolist() == ["open", "reach"]
    assert obs["states"].shape == (2, 3)


def test_successful_only_drops_failed_episodes(tmp_path):
    write(tmp_path, [[episode(3, 0, True), episode(5, 1, False), episode(2, 2, True)]])
    data = fmt.load_demos(tmp_path, successful_only=True)
    assert len(data) == 5
    assert sorted(set(data.episode_index.tolist())) == [0, 2]
    write(tmp_path / "none", [[episode(3, 0, False)]])
    with pytest.raises(fmt.DemosError, match="no successful episodes"):
        fmt.load_demos(tmp_path / "none", successful_only=True)


def test_bad_datasets_fail_with_the_file_named(tmp_path):
    with pytest.raises(fmt.DemosError, match="demos.json is missing"):
        fmt.load_demos(tmp_path)
    write(tmp_path, [[episode(3, 0, True)]])
    manifest = json.loads((tmp_path / "demos.json").read_text())
    (tmp_path / "demos.json").write_text(json.dumps({**manifest, "version": 99}))
    with pytest.raises(fmt.DemosError, match="version 99"):
        fmt.load_demos(tmp_path)
    (tmp_path / "demos.json").write_text(json.dumps(manifest))
    (tmp_path / "shard-00000.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(fmt.DemosError, match="shard-00000.safetensors is not a readable"):
        fmt.load_demos(tmp_path)
    bad = episode(3, 0, True)
    bad.actions[1, 0] = np.nan
    fmt.write_shard(tmp_path, 0, [bad])
    with pytest.raises(fmt.DemosError, match="actions row 1 is not finite"):
        fmt.load_demos(tmp_path)


def test_expert_episodes_record_the_observation_each_action_was_taken_in():
    env = load_config("ppo_pendulum").env

    def expert(env, obs, info):
        return np.clip(-2.0 * obs[1:2], -2, 2)  # push against the angular sine

    first = expert_play.play_expert_episodes(env, [3, 4], expert)
    again = expert_play.play_expert_episodes(env, [3, 4], expert)
    assert [e.seed for e in first] == [3, 4]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a.observations["states"], b.observations["states"])
        assert len(a) == len(a.observations["states"]) == len(a.rewards)
    expected = np.clip(-2.0 * first[0].observations["states"][:, 1:2], -2, 2)
    np.testing.assert_allclose(first[0].actions, expected)
    noisy = expert_play.play_expert_episodes(env, [3], expert, action_noise=0.5, noise_seed=1)
    assert not np.allclose(noisy[0].actions, first[0].actions)
    assert np.abs(noisy[0].actions).max() <= 2.0


def test_split_seeds_covers_every_seed_once():
    parts = expert_play.split_seeds(list(range(10)), 3)
    assert [s for p in parts for s in p] == list(range(10))
    assert len(parts) == 3
    assert expert_play.split_seeds([1, 2], 5) == [[1], [2]]
