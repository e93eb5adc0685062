"""TRL's KTOTrainer against the KTO plugin: the loss, the KL reference point
z0 and the logged rewards and log-probs on the same per-token log-probs, for
both loss types, with weights, and with z0 clamped at 0; and the KL pairs
themselves: which examples TRL keeps and whose completion each one's
mismatched pair takes, against the plugin's pairing."""
import torch

from .trl_dpo import FusedHeadOutputs
from .trl_support import ptrain_losses, relative_error, tiny_model_dir, tiny_tokenizer, trainer_arguments

EXACT = 1e-10  # both sides in float64
PAIRS_MAX_LENGTH = 8

# (name, the plugin's [module] keys, TRL's KTOConfig keys, the KL pairs' log-ratio shift); β = 0.1 unless set.
# A negative shift makes the mean KL log-ratio negative, so that z0 is clamped at 0.
CASES = [
    ("kto", {"loss_type": "kto"}, {"loss_type": "kto"}, 0.4),
    ("kto_weighted", {"loss_type": "kto", "beta": 0.5, "desirable_weight": 1.33, "undesirable_weight": 0.8},
     {"loss_type": "kto", "beta": 0.5, "desirable_weight": 1.33, "undesirable_weight": 0.8}, 0.4),
    ("kto_clamped_z0", {"loss_type": "kto", "beta": 0.5}, {"loss_type": "kto", "beta": 0.5}, -0.6),
    ("apo_zero_unpaired", {"loss_type": "apo_zero_unpaired", "beta": 0.5, "desirable_weight": 1.2},
     {"loss_type": "apo_zero_unpaired", "beta": 0.5, "desirable_weight": 1.2}, 0.4),
]


def make_examples(kl_shift, seed=0, count=6):
    """Examples of different prompt and completion lengths, both labels; per-token log-probs of the policy,
    a reference near it, and the same for each example's KL pair (the reference's shifted by kl_shift)."""
    generator = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(count):
        length, kl_length = 2 + i % 3, 1 + (i * 2) % 4
        policy = -3.0 * torch.rand(length, generator=generator, dtype=torch.float64)
        kl_policy = -3.0 * torch.rand(kl_length, generator=generator, dtype=torch.float64)
        noise = 0.3 * torch.randn(length, generator=generator, dtype=torch.float64)
        kl_noise = 0.3 * torch.randn(kl_length, generator=generator, dtype=torch.float64)
        examples.append({"desirable": i % 3 != 2, "prompt_length": 1 + i % 2,
                         "policy": policy.tolist(), "reference": (policy + noise).tolist(),
                         "kl_policy": kl_policy.tolist(), "kl_reference": (kl_policy + kl_noise - kl_shift).tolist()})
    return examples


def rows(examples, prefix):
    """input_ids, attention_mask, completion_mask of <prompt><completion><pad> rows, and per-token values of
    the policy and the reference at position t − 1 for token t, 0 outside the completions."""
    lengths = [(example["prompt_length"], len(example[f"{prefix}policy"])) for example in examples]
    width = max(prompt + completion for prompt, completion in lengths)
    shape = (len(examples), width)
    input_ids, attention, completion = (torch.zeros(shape, dtype=torch.long) for _ in range(3))
    policy, reference = (torch.zeros(len(examples), width - 1, dtype=torch.float64) for _ in range(2))
    for row, (example, (start, count)) in enumerate(zip(examples, lengths)):
        input_ids[row, :start + count] = 1
        attention[row, :start + count] = 1
        completion[row, start:start + count] = 1
        policy[row, start - 1:start + count - 1] = torch.tensor(example[f"{prefix}policy"], dtype=torch.float64)
        reference[row, start - 1:start + count - 1] = torch.tensor(example[f"{prefix}reference"], dtype=torch.float64)
    return (input_ids, attention, completion), policy, reference


class TwoForwards:
    """A model with TRL's fused LM head for the batch's two forwards: the examples' and, when its input_ids
    are the KL tensor itself, the KL pairs'."""

    def __init__(self, kl_input_ids, outputs, kl_outputs):
        self.kl_input_ids, self.outputs, self.kl_outputs = kl_input_ids, outputs, kl_outputs

    def __call__(self, input_ids=None, **kwargs):
        return (self.kl_outputs if input_ids is self.kl_input_ids else self.outputs)(**kwargs)


def kto_trainer(session, config):
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer

    args = KTOConfig(**trainer_arguments(session.work), per_device_train_batch_size=2, precompute_ref_log_probs=False,
                     **config)
    dataset = Dataset.from_list([{"prompt": "t1 t2", "completion": " t3", "label": True},
                                 {"prompt": "t4", "completion": " t5 t6", "label": False}])
    trainer = KTOTrainer(model=tiny_model_dir(session.work), args=args, train_dataset=dataset,
                         processing_class=tiny_tokenizer())
    trainer.model.eval()
    return trainer


def trl_loss(trainer, examples):
    """TRL's loss of `examples` (its mean over them) and its logged metrics, by KTOTrainer's own loss code."""
    (input_ids, attention, completion), policy, reference = rows(examples, "")
    (kl_ids, kl_attention, kl_completion), kl_policy, kl_reference = rows(examples, "kl_")
    inputs = {"input_ids": input_ids, "attention_mask": attention, "completion_mask": completion,
              "KL_input_ids": kl_ids, "KL_attention_mask": kl_attention, "KL_completion_mask": kl_completion,
              "label": torch.tensor([example["desirable"] for example in examples])}
    trainer.ref_model = TwoForwards(kl_ids, FusedHeadOutputs(reference), FusedHeadOutputs(kl_reference))
    model = TwoForwards(kl_ids, FusedHeadOutputs(policy), FusedHeadOutputs(kl_policy))
    with torch.no_grad():
        loss = trainer._compute_loss(model, inputs, return_outputs=False).item()
    return loss, {name: values[-1] for name, values in trainer._metrics["eval"].items() if values}


def mean_where(values, keep):
    chosen = [value for value, flag in zip(values, keep) if flag]
    return sum(chosen) / len(chosen)


def check_kto_losses(session):
    """Every case of CASES on six examples, four desirable."""
    for name, module, config, kl_shift in CASES:
        examples = make_examples(kl_shift)
        request = {"algorithm": "kto", "module": module,
                   "examples": [{key: example[key] for key in ("desirable", "policy", "reference", "kl_policy",
                                                               "kl_reference")} for example in examples]}
        ours = ptrain_losses(session, request)
        loss, metrics = trl_loss(kto_trainer(session, config), examples)
        ours_loss = sum(ours["losses"]) / len(examples)
        session.compare(f"{name}: loss of {len(examples)} examples", relative_error(ours_loss, loss), EXACT,
                        f"(ptrain {ours_loss:.10g}, TRL {loss:.10g})")
        session.compare(f"{name}: z0 (TRL's kl)", relative_error(ours["z0"], metrics["kl"]), EXACT,
                        f"(ptrain {ours['z0']:.10g}, TRL {metrics['kl']:.10g})")
        if name == "kto_clamped_z0":
            session.compare(f"{name}: z0 is clamped", abs(ours["z0"]), 0.0)
        desirable = [example["desirable"] for example in examples]
        undesirable = [not flag for flag in desirable]
        for metric, values, keep in (("rewards/chosen", ours["rewards"], desirable),
                                     ("rewards/rejected", ours["rewards"], undesirable),
                                     ("logps/chosen", ours["logps"], desirable),
                                     ("logps/rejected", ours["logps"], undesirable)):
            session.compare(f"{name}: {metric}", relative_error(mean_where(values, keep), metrics[metric]), EXACT)


def check_kto_pairs(session):
    """TRL's own dataset preparation of seven examples, one whose prompt fills max_length: TRL drops that one
    and rotates the completions of the rest by one; the plugin must leave out the same example and give each
    the same partner."""
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer

    words = [["t1", "t2"], ["t3"], ["t4", "t5", "t6"], [f"t{i}" for i in range(1, PAIRS_MAX_LENGTH + 2)], ["t7"],
             ["t8", "t9"], ["t10"]]
    lines = [{"prompt": " ".join(prompt), "completion": f" t{20 + i}" + " t11" * (i % 3), "label": i % 2 == 0}
             for i, prompt in enumerate(words)]
    args = KTOConfig(**trainer_arguments(session.work), per_device_train_batch_size=len(lines),
                     max_length=PAIRS_MAX_LENGTH, precompute_ref_log_probs=False)
    trainer = KTOTrainer(model=tiny_model_dir(session.work), args=args, train_dataset=Dataset.from_list(lines),
                         processing_class=tiny_tokenizer())
    prepared = trainer.train_dataset
    tokenizer = tiny_tokenizer()
    prompt_lengths = [len(tokenizer(line["prompt"])["input_ids"]) for line in lines]
    ours = ptrain_losses(session, {"algorithm": "kto_partners", "prompt_lengths": prompt_lengths,
                                   "max_length": PAIRS_MAX_LENGTH})
    kept = [i for i, flag in enumerate(ours["scorable"]) if flag]
    session.compare("examples kept (TRL's count − ptrain's)", abs(len(prepared) - len(kept)), 0)
    session.compare("TRL and ptrain leave out example 3", 0 if kept == [0, 1, 2, 4, 5, 6] else 1, 0, f"(ptrain keeps {kept})")
    mismatched = 0
    for row, original in enumerate(kept):
        partner = ours["partners"][original]
        if prepared[row]["KL_completion_ids"] != prepared[kept.index(partner)]["completion_ids"]:
            mismatched += 1
    session.compare("KL pairs whose completion differs from TRL's", mismatched, 0)
