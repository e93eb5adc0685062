"""TRL's GRPOTrainer against the GRPO plugin's loss, on the same per-token
log-probs, advantages and completion masks: every loss type both implement
(docs/grpo.md lists what only one of them has)."""
import torch

from .trl_support import ptrain_losses, relative_error, tiny_model_dir, tiny_tokenizer, trainer_arguments

EXACT = 1e-10  # both sides in float64
SAPO_TOLERANCE = 1e-6
ROWS, LENGTH = 4, 6  # completions, max_completion_length
CLIP = ({"epsilon_low": 0.2, "epsilon_high": 0.28}, {"epsilon": 0.2, "epsilon_high": 0.28})

# (name, the plugin's [module] keys, TRL's GRPOConfig keys). TRL's loss_type
# names a surrogate and an aggregation at once; ptrain sets them apart
# (policy_loss, loss_type).
CASES = [
    *[(loss, {"loss_type": loss, **CLIP[0]}, {"loss_type": loss, **CLIP[1]})
      for loss in ("grpo", "bnpo", "dr_grpo", "dapo")],
    # TRL multiplies the KL term by the importance ratio unless told not to (use_bias_correction_kl,
    # DeepSeek-V3.2); ptrain has no such weighting (docs/grpo.md).
    ("grpo_kl", {"loss_type": "grpo", "beta": 0.04, **CLIP[0]},
     {"loss_type": "grpo", "beta": 0.04, "use_bias_correction_kl": False, **CLIP[1]}),
    ("gspo", {"loss_type": "grpo", "importance_sampling_level": "sequence", **CLIP[0]},
     {"loss_type": "grpo", "importance_sampling_level": "sequence", **CLIP[1]}),
    # TRL's two-sided clip caps the ratio at δ; for A < 0 that is the dual clip, for A > 0 the clip at
    # 1 + ε_high < δ already acts, so the two agree.
    ("dual_clip", {"loss_type": "grpo", "delta": 3.0, **CLIP[0]}, {"loss_type": "grpo", "delta": 3.0, **CLIP[1]}),
    # TRL's cispo caps the weight at epsilon_high, absolute, with no lower bound: ptrain's 1 + ε_high^IS,
    # with ε_low^IS = 1 (its default); aggregated as dapo.
    ("cispo", {"policy_loss": "cispo", "loss_type": "dapo", "cispo_epsilon_high": 2.0},
     {"loss_type": "cispo", "epsilon_high": 3.0}),
    ("cispo_kl", {"policy_loss": "cispo", "loss_type": "dapo", "cispo_epsilon_high": 2.0, "beta": 0.04},
     {"loss_type": "cispo", "epsilon_high": 3.0, "beta": 0.04, "use_bias_correction_kl": False}),
    # TRL's sapo is aggregated as grpo; it holds the two temperatures in float32 (torch.where of Python
    # floats), hence SAPO_TOLERANCE.
    ("sapo", {"policy_loss": "sapo", "loss_type": "grpo", "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05},
     {"loss_type": "sapo", "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.05}),
]


def make_batch(seed=0):
    """Completions of 1 to LENGTH tokens, advantages of both signs, old and reference log-probs off the
    current ones by enough that some ratios leave [1 − ε, 1 + ε]."""
    generator = torch.Generator().manual_seed(seed)

    def noise():
        return 0.3 * torch.randn(ROWS, LENGTH, generator=generator, dtype=torch.float64)

    log_probs = -3.0 * torch.rand(ROWS, LENGTH, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([LENGTH, 3, 1, 5])
    mask = (torch.arange(LENGTH).unsqueeze(0) < lengths.unsqueeze(1)).long()
    return {"log_probs": log_probs, "old_log_probs": log_probs + noise(), "ref_log_probs": log_probs + noise(),
            "advantages": torch.tensor([1.0, -0.7, 0.4, -1.2], dtype=torch.float64), "mask": mask}


def grpo_trainer(session, config):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(**trainer_arguments(session.work), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=LENGTH, **config)
    def no_reward(completions, **_):
        return [0.0] * len(completions)

    trainer = GRPOTrainer(model=tiny_model_dir(session.work), reward_funcs=[no_reward], args=args,
                          train_dataset=Dataset.from_list([{"prompt": "t1 t2"}] * 2), processing_class=tiny_tokenizer())
    trainer.model.eval()
    return trainer


def trl_loss(trainer, batch):
    """GRPOTrainer's own loss code, its model's per-token log-probs replaced by the batch's."""
    log_probs, mask = batch["log_probs"], batch["mask"]
    trainer._get_per_token_logps_and_entropies = lambda *args, **kwargs: (log_probs, torch.zeros_like(log_probs), None)
    inputs = {"prompt_ids": torch.ones(ROWS, 2, dtype=torch.long), "prompt_mask": torch.ones(ROWS, 2, dtype=torch.long),
              "completion_ids": torch.ones(ROWS, LENGTH, dtype=torch.long), "completion_mask": mask,
              "advantages": batch["advantages"], "old_per_token_logps": batch["old_log_probs"],
              "ref_per_token_logps": batch["ref_log_probs"], "num_items_in_batch": mask.sum()}
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, inputs).item()


def check_grpo_losses(session):
    """Every case of CASES on the same batch."""
    batch = make_batch()
    request = {key: value.tolist() for key, value in batch.items()}
    for name, module, config in CASES:
        ours = ptrain_losses(session, {"algorithm": "grpo", "module": {"max_completion_length": LENGTH, **module},
                                       **request})["loss"]
        theirs = trl_loss(grpo_trainer(session, config), batch)
        tolerance = SAPO_TOLERANCE if name == "sapo" else EXACT
        session.compare(f"{name}: loss", relative_error(ours, theirs), tolerance,
                        f"(ptrain {ours:.10g}, TRL {theirs:.10g})")
