"""``actor.backend: megatron``: layouts checked before any worker starts, and how tensor-
parallel peers share rows (ParallelLayout)."""

import pytest

from rl_core.config import ConfigError, load_config
from rl_core.models.tiny_lm import create_tiny_lm
from rl_core.training.parallel_layout import ParallelLayout


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    return {kv: str(create_tiny_lm(root / f"kv{kv}", num_key_value_heads=kv)) for kv in (1, 2)}


def megatron(model_dir, *extra):
    return [
        "model.model_type=hf_causal_lm",
        f"model.model_path={model_dir}",
        "algorithm.adv_type=grpo",
        "reward.reward_type=math_verify",
        "actor.backend=megatron",
        *extra,
    ]


def error_of(overrides):
    with pytest.raises(ConfigError) as info:
        load_config(None, overrides)
    return str(info.value)


def test_a_fitting_layout_gives_tensor_and_data_parallel_sizes(model_dirs):
    cfg = load_config(
        None,
        megatron(
            model_dirs[2],
            "actor.num_workers=4",
            "actor.megatron.tensor_model_parallel_size=2",
            "actor.megatron.micro_batch_size=2",
        ),
    )
    assert (cfg.actor.tensor_parallel_size, cfg.actor.data_parallel_size) == (2, 2)
    assert cfg.actor.update_micro_batch_size == 2
    fsdp = load_config(None, megatron(model_dirs[2])[:-1] + ["actor.num_workers=4"])
    assert (fsdp.actor.tensor_parallel_size, fsdp.actor.data_parallel_size) == (1, 4)
    assert fsdp.actor.update_micro_batch_size == fsdp.actor.micro_batch_size


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            ["actor.num_workers=3", "actor.megatron.tensor_model_parallel_size=2"],
            "actor.num_workers = 3 is not a multiple of",
        ),
        (["model.value_head=true"], "model.value_head = true: the megatron trainer has no"),
        (["actor.megatron.sequence_parallel=true"], "sequence_parallel = true needs"),
        (["actor.megatron.pipeline_model_parallel_size=2"], "pipeline_model_parallel_size = 2"),
        (["actor.megatron.precision=fp8"], "actor.megatron.precision = 'fp8'"),
    ],
)
def test_bad_layouts_name_the_field_and_value(model_dirs, extra, expected):
    assert expected in error_of(megatron(model_dirs[2], *extra))


def test_tensor_parallel_must_divide_the_models_heads(model_dirs):
    message = error_of(
        megatron(
            model_dirs[2], "actor.num_workers=4", "actor.megatron.tensor_model_parallel_size=4"
        )
    )
    assert "tensor_model_parallel_size 4 does not divide num_attention_heads (2)" in message
    assert model_dirs[2] in message
    # one key/value head is copied to both ranks of tensor parallel 2
    copied = megatron(
        model_dirs[1], "actor.num_workers=2", "actor.megatron.tensor_model_parallel_size=2"
    )
    assert load_config(None, copied).actor.tensor_parallel_size == 2


def test_the_batch_divides_into_data_parallel_replicas_not_ranks(model_dirs):
    # 16 prompts x group 8 = 128 rows: 128 minibatches x 1 replica fit, x 2 ranks would not
    fits = megatron(
        model_dirs[2],
        "actor.num_workers=2",
        "actor.megatron.tensor_model_parallel_size=2",
        "actor.num_minibatches=128",
        "data.prompts_per_batch=16",
        "algorithm.group_size=8",
    )
    assert load_config(None, fits).actor.data_parallel_size == 1
    message = error_of([*fits, "actor.megatron.tensor_model_parallel_size=1"])
    assert "actor.num_minibatches*actor.num_workers = 256" in message


def test_embodied_models_cannot_use_megatron():
    message = error_of(["actor.backend=megatron"])
    assert "actor.backend: read by reasoning runs only" in message


def test_layout_gives_peers_the_same_rows_and_reads_one_answer_per_replica():
    layout = ParallelLayout(world=6, tensor_parallel=2)
    assert layout.replicas == 3
    assert layout.per_rank(["a", "b", "c"]) == ["a", "a", "b", "b", "c", "c"]
    assert layout.per_replica([0, 1, 2, 3, 4, 5]) == [0, 2, 4]
    assert ParallelLayout(3).per_rank([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(ValueError, match="do not split"):
        ParallelLayout(world=3, tensor_parallel=2)
    with pytest.raises(ValueError, match="for 3 replicas"):
        layout.per_rank(["a"])
