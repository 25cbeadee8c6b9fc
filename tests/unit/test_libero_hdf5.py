"""LIBERO's HDF5 demonstration files read as rlpipe episodes (files written here in
LIBERO's layout), and every malformed file refused with the file and the part named."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from rl_core.data import demos as demos_format
from rl_core.data.demos import DemosError
from rl_core.data.libero_hdf5 import libero_files, read_libero_file, upright_images
from tests.libero_files import INSTRUCTION, frames, write_libero


def test_episodes_have_upright_images_states_instruction_and_success(tmp_path: Path) -> None:
    path = write_libero(tmp_path / "put_the_black_bowl_on_the_plate_demo.hdf5")
    episodes = list(read_libero_file(path, "rgb+state", image_size=16, first_seed=7))
    assert [len(e) for e in episodes] == [5, 3]
    first = episodes[0]
    with h5py.File(path) as f:
        raw = f["data/demo_0/obs/agentview_rgb"][()]
        ee = f["data/demo_0/obs/ee_states"][()]
    # LIBERO's frames are upside down: turned by 180 degrees, as the env shows them
    np.testing.assert_array_equal(first.observations["main_images"], raw[:, ::-1, ::-1])
    assert first.observations["states"].dtype == np.float32
    np.testing.assert_allclose(first.observations["states"][:, :6], ee, rtol=1e-6)
    np.testing.assert_allclose(first.observations["states"][:, 6:], 0.04)
    assert first.actions.shape == (5, 7) and first.actions.dtype == np.float32
    assert (first.instruction, first.task) == (INSTRUCTION, "put_the_black_bowl_on_the_plate")
    assert [e.seed for e in episodes] == [7, 8]
    assert all(e.success and e.terminated for e in episodes)
    assert first.rewards.tolist() == [0, 0, 0, 0, 1]


def test_rgb_mode_keeps_only_the_camera_and_images_are_resized(tmp_path: Path) -> None:
    path = write_libero(tmp_path / "task_demo.hdf5", size=16)
    (episode, _) = read_libero_file(path, "rgb", image_size=8)
    assert set(episode.observations) == {"main_images"}
    assert episode.observations["main_images"].shape == (5, 8, 8, 3)


def test_episodes_round_trip_through_the_dataset_format(tmp_path: Path) -> None:
    path = write_libero(tmp_path / "task_demo.hdf5")
    episodes = list(read_libero_file(path, "rgb+state", image_size=16))
    shard = demos_format.write_shard(tmp_path / "ds", 0, episodes)
    manifest = demos_format.write_manifest(tmp_path / "ds", [shard], {"env_type": "libero"}, "x")
    assert (manifest["episodes"], manifest["steps"], manifest["successes"]) == (2, 8, 2)
    loaded = demos_format.load_demos(tmp_path / "ds")
    assert loaded.instructions.tolist() == [INSTRUCTION] * 8
    np.testing.assert_array_equal(
        loaded.observations["main_images"][:5], episodes[0].observations["main_images"]
    )


def test_a_folder_gives_its_hdf5_files_in_order(tmp_path: Path) -> None:
    for name in ("b_demo.hdf5", "a_demo.hdf5", "notes.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in libero_files(tmp_path)] == ["a_demo.hdf5", "b_demo.hdf5"]
    with pytest.raises(DemosError, match="no such file or folder"):
        libero_files(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DemosError, match=r"no \.hdf5 file in the folder"):
        libero_files(tmp_path / "empty")


def test_state_observations_cannot_be_made_from_the_files(tmp_path: Path) -> None:
    path = write_libero(tmp_path / "task_demo.hdf5")
    with pytest.raises(DemosError, match="obs_mode must be 'rgb' or 'rgb\\+state', got 'state'"):
        next(read_libero_file(path, "state", 16))


def break_file(path: Path, how: str) -> None:
    with h5py.File(path, "a") as f:
        if how == "no problem_info":
            del f["data"].attrs["problem_info"]
        elif how == "bad problem_info":
            f["data"].attrs["problem_info"] = "{not json"
        elif how == "actions shape":
            del f["data/demo_0/actions"]
            f["data/demo_0"].create_dataset("actions", data=np.zeros((5, 6)))
        elif how == "nan action":
            f["data/demo_0/actions"][1, 2] = np.nan
        elif how == "strings":
            del f["data/demo_0/obs/ee_states"]
            f["data/demo_0/obs"].create_dataset("ee_states", data=np.array([b"x"] * 5))
        elif how == "short camera":
            del f["data/demo_0/obs/agentview_rgb"]
            f["data/demo_0/obs"].create_dataset("agentview_rgb", data=frames(4))
        elif how == "no demos":
            for name in list(f["data"]):
                del f["data"][name]


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("no problem_info", "no 'problem_info' attribute"),
        ("bad problem_info", "not JSON with a 'language_instruction'"),
        ("actions shape", r"demo_0/actions: shape \[T, 7\] expected, got \(5, 6\)"),
        ("nan action", "demo_0/actions: not all finite"),
        ("strings", "obs/ee_states: numeric data expected"),
        ("short camera", "obs/agentview_rgb: 4 steps, but 5 actions"),
        ("no demos", r"no data/demo_<n> groups"),
    ],
)
def test_malformed_files_are_refused_naming_the_file_and_the_part(
    tmp_path: Path, how: str, message: str
) -> None:
    path = write_libero(tmp_path / "task_demo.hdf5")
    break_file(path, how)
    with pytest.raises(DemosError, match=message) as caught:
        list(read_libero_file(path, "rgb+state", 16))
    assert str(path) in str(caught.value)


def test_a_file_that_is_not_hdf5_is_named(tmp_path: Path) -> None:
    path = tmp_path / "task_demo.hdf5"
    path.write_text("not hdf5")
    with pytest.raises(DemosError, match="not an HDF5 file"):
        next(read_libero_file(path, "rgb", 16))


def test_frames_must_be_rgb_uint8() -> None:
    with pytest.raises(DemosError, match=r"\[T, H, W, 3\] uint8 expected"):
        upright_images(np.zeros((2, 4, 4, 3), np.float32), 4)


def test_demos_without_files_or_expert_are_refused_before_any_worker(tmp_path: Path) -> None:
    from flows.demos import _play
    from flows.demos_import import check_importable
    from rl_core.config import load_config

    cartpole = load_config("ppo_cartpole", [f"run.output_dir={tmp_path}"])
    with pytest.raises(DemosError, match="env type 'gym' has no scripted expert.*import_from"):
        _play(cartpole, str(tmp_path / "ds"))
    metaworld = load_config(
        "sft_mlp_metaworld", [f"demos.import_from={tmp_path}", f"run.output_dir={tmp_path}"]
    )
    with pytest.raises(DemosError, match="env.env_type must be 'libero', got 'metaworld'"):
        check_importable(metaworld)
    assert not (tmp_path / "ds").exists()


def test_chunked_envs_get_chunks_of_actions_from_their_first_observation(tmp_path: Path) -> None:
    path = write_libero(tmp_path / "task_demo.hdf5", lengths=(5,))
    (single,) = read_libero_file(path, "rgb+state", 16)
    (chunked,) = read_libero_file(path, "rgb+state", 16, action_chunk=2)
    assert len(chunked) == 3 and chunked.actions.shape == (3, 14)
    np.testing.assert_array_equal(chunked.actions[0], single.actions[:2].reshape(-1))
    # the last chunk (one step left) is padded with the episode's final action
    np.testing.assert_array_equal(chunked.actions[2], np.tile(single.actions[4], 2))
    for key in ("main_images", "states"):
        np.testing.assert_array_equal(chunked.observations[key], single.observations[key][::2])
    assert chunked.rewards.tolist() == [0, 0, 1]  # summed per chunk
    assert (chunked.success, chunked.instruction) == (single.success, single.instruction)
