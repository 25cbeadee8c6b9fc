"""Code run in spawned processes by the megatron bridge tests (one process per rank)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import torch
import torch.distributed as dist


def _init(rank: int, world: int, port: int) -> None:
    warnings.filterwarnings("ignore", message=".*Transformer Engine.*")
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)


def all_checks(rank: int, world: int, port: int, jobs: list[tuple[str, str, bool]]) -> None:
    """Every check below in one process group, for each ``(model_dir, out_dir, every_loss)``
    of ``jobs``; rank ``r`` writes ``out_dir/rank{r}.json``.

    ``every_loss=False`` checks the update with the default policy loss and aggregation mode
    only (the loss matrix does not depend on how the weights are laid out on the ranks)."""
    _init(rank, world, port)
    for model_dir, out_dir, every_loss in jobs:
        result = {
            "logits": logits_parity(world, model_dir),
            "policy": policy_parity(world, model_dir),
            "update": update_parity(world, model_dir, every_loss),
        }
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


def megatron_policy(hf_state: dict, shape, tp: int):
    """This rank's megatron policy at tensor-parallel size ``tp`` holding ``hf_state``'s
    weights (initializes megatron's model parallelism; the caller destroys it)."""
    from megatron.core import parallel_state

    from rl_core.models.megatron.config import kv_copies, padded_vocab_size
    from rl_core.models.megatron.gpt import build_gpt_model
    from rl_core.models.megatron.policy import MegatronCausalLM, kv_copy_group
    from rl_core.models.megatron.weights import hf_to_megatron

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    tp_rank = parallel_state.get_tensor_model_parallel_rank()
    model = build_gpt_model(shape, tp=tp, cpu_attention=True)
    padded = padded_vocab_size(shape.vocab_size, tp)
    missing, unexpected = model.load_state_dict(
        hf_to_megatron(hf_state, shape, tp, tp_rank, padded), strict=False
    )
    assert not unexpected and all(k.endswith("_extra_state") for k in missing), missing
    return MegatronCausalLM(
        model,
        shape,
        parallel_state.get_tensor_model_parallel_group(),
        tp_rank,
        parallel_state.get_data_parallel_group(),
        kv_copy_group(tp, kv_copies(shape, tp)),
    )


def logits_parity(world: int, model_dir: str) -> dict:
    """For TP = world and TP = 1: the max |megatron logits − HF logits| and the round trip."""
    from megatron.core import parallel_state
    from transformers import AutoModelForCausalLM

    from rl_core.models.megatron.config import HFShape

    hf = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    shape = HFShape.from_hf(hf.config)
    hf_state = hf.state_dict()
    ids = torch.randint(0, shape.vocab_size, (3, 11), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = hf(input_ids=ids).logits
    result = {}
    for tp in sorted({world, 1}, reverse=True):
        policy = megatron_policy(hf_state, shape, tp).eval()
        positions = torch.arange(ids.shape[1]).expand_as(ids)
        with torch.no_grad():
            part = policy.model(ids, positions, attention_mask=None)
        parts = [torch.empty_like(part) for _ in range(tp)]
        dist.all_gather(parts, part.contiguous(), group=policy.tp_group)
        logits = torch.cat(parts, dim=-1)[..., : shape.vocab_size]
        back = policy.hf_state_dict()
        result[f"tp{tp}"] = {
            "max_abs_diff": float((logits - expected).abs().max()),
            "round_trip_exact": sorted(back) == sorted(hf_state)
            and all(torch.equal(back[k], hf_state[k]) for k in hf_state),
        }
        parallel_state.destroy_model_parallel()
    return result


def policy_parity(world: int, model_dir: str) -> dict:
    """Megatron policy vs the HF policy on a padded batch: log-probs, entropy, gradients;
    and the megatron policy's packed rows vs its padded rows (both computed on each rank)."""
    from megatron.core import parallel_state

    from kinds.reasoning.sections import ReasoningModelConfig as ModelConfig
    from rl_core.llm.packing import pack_rows
    from rl_core.models.causal_lm import build_causal_lm
    from rl_core.models.megatron.config import HFShape
    from rl_core.models.megatron.policy import FORWARD_INPUT_KEYS
    from rl_core.models.megatron.sequences import packed_logits
    from rl_core.models.megatron.weights import megatron_to_hf
    from tests.llm_batches import random_llm_batch

    hf_policy = build_causal_lm(ModelConfig(model_type="hf_causal_lm", model_path=model_dir))
    shape = HFShape.from_hf(hf_policy.model.config)
    batch = random_llm_batch(6, seed=1)
    inputs = {k: batch[k] for k in FORWARD_INPUT_KEYS}
    weights = batch["advantages"] * batch["response_mask"]
    mask = batch["response_mask"].bool()

    def loss_of(out):
        return (out["logprobs"] * weights).sum() + 0.1 * (out["entropy"] * weights).sum()

    def diff(a, b):
        return float((a - b).detach().abs().max())

    expected = hf_policy(forward_type="default_forward", forward_inputs=inputs, temperature=0.7)
    loss_of(expected).backward()
    hf_grads = {k: p.grad for k, p in hf_policy.model.named_parameters()}
    result = {}
    for tp in sorted({world, 1}, reverse=True):
        policy = megatron_policy(hf_policy.model.state_dict(), shape, tp)
        runs = {}
        for packed in (False, True):
            policy.zero_grad(set_to_none=True)
            out = policy(
                forward_type="default_forward",
                forward_inputs=inputs,
                temperature=0.7,
                packed=packed,
            )
            loss_of(out).backward()
            policy.reduce_gradients()  # what the trainer does first (sums key/value copies)
            runs[packed] = out, {k: p.grad for k, p in policy.model.named_parameters()}
        out, grads = runs[False]
        ranks: list = [None] * tp
        dist.all_gather_object(ranks, grads, group=policy.tp_group)
        as_hf = megatron_to_hf(ranks, shape)
        packed_out, packed_grads = runs[True]
        rows = pack_rows(*(inputs[k] for k in FORWARD_INPUT_KEYS))
        with torch.no_grad():  # a filler sequence after the rows (sequence parallelism's)
            alone = packed_logits(policy.model, rows)
            filled = packed_logits(policy.model, rows, multiple=rows.num_tokens + 3)
        result[f"tp{tp}"] = {
            "logprobs": diff(out["logprobs"][mask], expected["logprobs"][mask]),
            "entropy": diff(out["entropy"][mask], expected["entropy"][mask]),
            "grads": max(diff(as_hf[k], g) for k, g in hf_grads.items() if k != "lm_head.weight"),
            "grad_scale": max(float(g.abs().max()) for g in hf_grads.values()),
            "packed": {
                "supported": policy.supports_packing,
                "logprobs": diff(packed_out["logprobs"][mask], out["logprobs"][mask]),
                "entropy": diff(packed_out["entropy"][mask], out["entropy"][mask]),
                "padding": max(float(packed_out[k][~mask].abs().max()) for k in packed_out),
                "grads": max(diff(packed_grads[k], g) for k, g in grads.items()),
                "filler": diff(alone, filled),
            },
        }
        parallel_state.destroy_model_parallel()
    return result


#: Micro-batching of the megatron runs checked against the default one (packed rows,
#: ``actor.micro_batch_size`` rows each), for the default loss and aggregation mode.
MICRO_BATCHING = {
    "padded": ["actor.packing=false"],
    "token-budget": [  # packed micro-batches of up to 12 tokens (rows: 3 to 9 tokens)
        "actor.max_tokens_per_micro_batch=12",
        "data.max_prompt_length=5",
        "rollout.max_new_tokens=4",
    ],
}


def update_parity(world: int, model_dir: str, every_loss: bool = True) -> dict:
    """One GRPO update (2 epochs × 2 minibatches, micro-batches of 3) with the megatron
    policy at TP = world (one replica) and at TP 1 × DP = world, against the HF policy in
    one process, for every registered policy loss and loss aggregation mode (or only the
    defaults when ``every_loss`` is False); the default loss and mode also with padded
    micro-batches and with packed ones cut by a token budget (:data:`MICRO_BATCHING`),
    whose weights are compared with the default (packed) run's too."""

    from megatron.core import parallel_state

    from rl_core.algorithms.aggregation import LOSS_AGG_MODES
    from rl_core.algorithms.registry import POLICY_LOSSES
    from rl_core.config import load_config
    from rl_core.models.causal_lm import build_causal_lm
    from rl_core.models.megatron.config import HFShape
    from rl_core.training.llm_update import (
        LOSS_TERMS,
        llm_update,
        minibatch_totals,
        rank_rows,
    )
    from rl_core.training.optim import adam_eps
    from tests.llm_batches import random_llm_batch

    compared = [f"train/{t}" for t in (*LOSS_TERMS, "grad_norm")]
    batch = random_llm_batch(8, seed=2)
    batch.pop("ref_logprobs")
    defaults = load_config("grpo_arith", [f"model.model_path={model_dir}"])
    default = (defaults.algorithm.loss_type, defaults.algorithm.loss_agg_mode)
    modes = LOSS_AGG_MODES.names() if every_loss else [default[1]]
    result = {}
    for loss in POLICY_LOSSES.names() if every_loss else [default[0]]:
        for mode in modes:
            variants = {"": []}
            if (loss, mode) == default:
                variants.update(MICRO_BATCHING)

            def cfg_of(*extra, loss=loss, mode=mode):
                return load_config(
                    overrides=[
                        "model.model_type=hf_causal_lm",
                        f"model.model_path={model_dir}",
                        "algorithm.adv_type=grpo",
                        "reward.reward_type=math_verify",
                        "algorithm.kl_coef=0.0",
                        f"algorithm.loss_type={loss}",
                        f"algorithm.loss_agg_mode={mode}",
                        "algorithm.loss_agg_norm=4",
                        "actor.micro_batch_size=3",
                        "actor.update_epochs=2",
                        "actor.num_minibatches=2",
                        "actor.lr=1e-3",
                        "actor.max_grad_norm=0.5",
                        *extra,
                    ]
                )

            cfg = cfg_of()
            torch.manual_seed(0)
            hf = build_causal_lm(cfg.model)
            shape = HFShape.from_hf(hf.model.config)
            start = {k: v.clone() for k, v in hf.model.state_dict().items()}
            opt = torch.optim.Adam(hf.parameters(), lr=1e-3, eps=adam_eps(cfg.actor))
            want = llm_update(
                hf, opt, batch, minibatch_totals([batch], 2), cfg.algorithm, cfg.actor, 1, 0.7, 4.0
            )
            expected = hf.model.state_dict()
            for tp in sorted({world, 1}, reverse=True):
                finals = {}
                for variant, extra in variants.items():
                    run = cfg_of(*extra)
                    args = (run.algorithm, run.actor)
                    dp = world // tp
                    policy = megatron_policy(start, shape, tp)
                    dp_rank = parallel_state.get_data_parallel_rank()
                    rows = rank_rows(8, 2, dp)
                    shards = [{k: v[r] for k, v in batch.items()} for r in rows]
                    opt = torch.optim.Adam(policy.parameters(), lr=1e-3, eps=adam_eps(run.actor))
                    totals = minibatch_totals(shards, 2)
                    got = llm_update(policy, opt, shards[dp_rank], totals, *args, dp, 0.7, 4.0)
                    summed = {}
                    for key, value in got.items():  # the driver adds the replicas' shares
                        t = torch.tensor(value, dtype=torch.float64)
                        dist.all_reduce(t)
                        summed[key] = float(t) / tp
                    back = policy.hf_state_dict()  # the gather a weight sync or export uses
                    finals[variant] = back
                    name = f"{loss}/{mode}/tp{tp}" + (f"/{variant}" if variant else "")
                    result[name] = {
                        "weights": max(
                            float((back[k] - expected[k]).abs().max())
                            for k in expected
                            if k != "lm_head.weight"
                        ),
                        "moved": max(float((expected[k] - start[k]).abs().max()) for k in expected),
                        "metrics": {k: abs(summed[k] - want[k]) for k in compared if k in want},
                        "grad_norm": want["train/grad_norm"],
                    }
                    if variant:  # this micro-batching against the default one, directly
                        result[name]["vs_default"] = max(
                            float((back[k] - finals[""][k]).abs().max()) for k in back
                        )
                    parallel_state.destroy_model_parallel()
    return result
