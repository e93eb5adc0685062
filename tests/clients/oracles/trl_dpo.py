"""TRL's DPOTrainer against the DPO plugin's losses, on the same policy and
reference log-probs: per-pair losses and rewards for every loss type both
implement, LD-DPO, WPO and a weighted mix (docs/dpo.md lists what only one of
them has)."""
import torch

from .trl_support import ptrain_losses, relative_error, tiny_model_dir, tiny_tokenizer, trainer_arguments

VOCAB = 16  # the logits WPO reads
EXACT = 1e-10  # both sides in float64
# Where TRL rounds through float32: WPO's log Σ p² (its chunked kernel), exo_pair's ε (a torch.tensor of a
# Python float).
TOLERANCES = {"wpo": 1e-5, "exo_pair": 1e-6}

# (name, the plugin's [module] keys, TRL's DPOConfig keys); β = 0.1 unless set.
CASES = [
    *[(loss, {"loss": [loss]}, {"loss_type": [loss]})
      for loss in ("sigmoid", "nca_pair", "bco_pair", "apo_zero", "apo_down", "discopop", "sigmoid_norm")],
    *[(loss, {"loss": [loss], "beta": 0.5}, {"loss_type": [loss], "beta": 0.5})
      for loss in ("hinge", "ipo", "sppo_hard")],
    *[(loss, {"loss": [loss], "label_smoothing": 0.1}, {"loss_type": [loss], "label_smoothing": 0.1})
      for loss in ("robust", "exo_pair")],
    ("ld_dpo", {"loss": ["sigmoid"], "ld_alpha": 0.5}, {"loss_type": ["sigmoid"], "ld_alpha": 0.5}),
    ("wpo", {"loss": ["sigmoid"], "use_weighting": True}, {"loss_type": ["sigmoid"], "use_weighting": True}),
    ("mpo_mix", {"loss": ["sigmoid", "bco_pair", "sft"], "loss_weights": [0.8, 0.2, 1.0]},
     {"loss_type": ["sigmoid", "bco_pair", "sft"], "loss_weights": [0.8, 0.2, 1.0]}),
]
# ptrain reports these losses' rewards per completion token; TRL always in the sum form.
TOKEN_MEAN_REWARDS = {"ipo", "sigmoid_norm"}


def make_pairs(seed=0, count=4):
    """Pairs of different lengths (LD-DPO's split matters), with the policy's logits over VOCAB for each
    completion token, the policy's log-probs of the tokens and a reference's close to them."""
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for i in range(count):
        pair = {"prompt_length": 2 + i % 3}
        for side, length in (("chosen", 3 + i), ("rejected", 6 - i % 3)):
            logits = 2.0 * torch.randn(length, VOCAB, generator=generator, dtype=torch.float64)
            ids = torch.randint(0, VOCAB, (length,), generator=generator)
            log_probs = torch.log_softmax(logits, -1).gather(1, ids.unsqueeze(1)).squeeze(1)
            noise = 0.3 * torch.randn(length, generator=generator, dtype=torch.float64)
            pair.update({f"{side}_ids": ids.tolist(), f"{side}_logits": logits.tolist(),
                         f"policy_{side}": log_probs.tolist(), f"reference_{side}": (log_probs + noise).tolist()})
        pairs.append(pair)
    return pairs


class FusedHeadOutputs:
    """Stands in for a model with TRL's fused LM head (trl.trainer.utils.add_fused_lm_head): returns given
    per-token outputs, as the model would for labels that are -100 outside the completions."""

    def __init__(self, log_probs, log_sum_sq_probs=None):
        self.log_probs, self.log_sum_sq_probs = log_probs, log_sum_sq_probs

    def __call__(self, **kwargs):
        from trl.trainer.utils import FusedCausalLMOutput

        zeros = torch.zeros_like(self.log_probs)
        return FusedCausalLMOutput(log_probs=self.log_probs, entropy=zeros, mean_logits=zeros,
                                   is_top1=zeros.bool(), log_sum_sq_probs=self.log_sum_sq_probs)


def trl_log_sum_sq_probs(logits, ids):
    """log Σ_v p_v² of each token's distribution, by TRL's own chunked kernel (logits = logits · I)."""
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    eye = torch.eye(logits.size(1), dtype=logits.dtype)
    outputs = ChunkedLogProbFunction.apply(logits, eye, None, ids, 1.0, VOCAB, None, 1.0, ("log_sum_sq_probs",))
    return outputs[2].double()


def trl_batch(pairs):
    """TRL's batch of `pairs`: rows chosen then rejected, <prompt><completion><pad>; the model's per-token
    outputs at position t − 1 for token t, 0 outside the completions."""
    sides = [(pair, "chosen") for pair in pairs] + [(pair, "rejected") for pair in pairs]
    width = max(pair["prompt_length"] + len(pair[f"{side}_ids"]) for pair, side in sides)
    shape = (len(sides), width)
    input_ids, attention, completion = (torch.zeros(shape, dtype=torch.long) for _ in range(3))
    policy, reference, sum_sq = (torch.zeros(len(sides), width - 1, dtype=torch.float64) for _ in range(3))
    for row, (pair, side) in enumerate(sides):
        start, ids = pair["prompt_length"], torch.tensor(pair[f"{side}_ids"])
        end = start + len(ids)
        input_ids[row, :start] = 1
        input_ids[row, start:end] = ids
        attention[row, :end] = 1
        completion[row, start:end] = 1
        policy[row, start - 1:end - 1] = torch.tensor(pair[f"policy_{side}"], dtype=torch.float64)
        reference[row, start - 1:end - 1] = torch.tensor(pair[f"reference_{side}"], dtype=torch.float64)
        sum_sq[row, start - 1:end - 1] = trl_log_sum_sq_probs(torch.tensor(pair[f"{side}_logits"]), ids)
    inputs = {"input_ids": input_ids, "attention_mask": attention, "completion_mask": completion}
    return inputs, FusedHeadOutputs(policy, sum_sq), FusedHeadOutputs(reference)


def dpo_trainer(session, config):
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(**trainer_arguments(session.work), precompute_ref_log_probs=False, **{"beta": 0.1, **config})
    dataset = Dataset.from_list([{"prompt": "t1 t2", "chosen": " t3", "rejected": " t4 t5"}])
    trainer = DPOTrainer(model=tiny_model_dir(session.work), args=args, train_dataset=dataset,
                         processing_class=tiny_tokenizer())
    trainer.model.eval()
    return trainer


def trl_loss(trainer, pairs):
    """TRL's loss of `pairs` (its mean over them) and its logged rewards, by DPOTrainer's own loss code."""
    inputs, policy, reference = trl_batch(pairs)
    trainer.ref_model = reference
    with torch.no_grad():
        loss = trainer._compute_loss(policy, inputs, return_outputs=False).item()
    metrics = trainer._metrics["eval"]
    return loss, metrics["rewards/chosen"][-1], metrics["rewards/rejected"][-1]


def check_case(session, name, module, config, pairs):
    trainer = dpo_trainer(session, config)
    ours = ptrain_losses(session, {"algorithm": "dpo", "module": module, "pairs": pairs})
    batch_loss, _, _ = trl_loss(trainer, pairs)
    ours_batch = sum(ours["losses"]) / len(pairs) + ours["sft_loss"]
    tolerance = TOLERANCES.get(name, EXACT)
    session.compare(f"{name}: loss of {len(pairs)} pairs", relative_error(ours_batch, batch_loss), tolerance,
                    f"(ptrain {ours_batch:.10g}, TRL {batch_loss:.10g})")
    if "wpo_weights" in ours:  # ptrain caps WPO's weight at 1, TRL 1.16 does not (docs/dpo.md)
        session.compare(f"{name}: largest weight, below the cap", max(ours["wpo_weights"]), 1.0 - 1e-9)
    if "sft" in module["loss"]:
        return  # TRL's sft term is a mean over the batch's tokens: no per-pair value
    per_pair = [trl_loss(trainer, [pair]) for pair in pairs]
    session.compare(f"{name}: per-pair losses",
                    relative_error(ours["losses"], [loss for loss, _, _ in per_pair]), tolerance)
    if name in TOKEN_MEAN_REWARDS:
        return
    rewards = [chosen for _, chosen, _ in per_pair] + [rejected for _, _, rejected in per_pair]
    session.compare(f"{name}: per-pair rewards (chosen, rejected)",
                    relative_error(ours["rewards_chosen"] + ours["rewards_rejected"], rewards), EXACT)


def check_dpo_losses(session):
    """Every case of CASES on the same four pairs."""
    pairs = make_pairs()
    for name, module, config in CASES:
        check_case(session, name, module, config, pairs)

