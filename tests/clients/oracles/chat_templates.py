"""The tokenizer files ptrain writes to final/ (tokenizer.json and
tokenizer_config.json with the chat template): transformers'
AutoTokenizer.apply_chat_template renders and tokenizes every conversation of
tests/fixtures/tokenizers/chat_template_cases.json as `ptrain tokenize
--template auto` does, with and without the generation prompt."""
import json

from .harness import ROOT


def final_with_tokenizer(session, name):
    """One SFT step of a tiny model with the bundled tokenizer `name` and its own template; final/."""
    from tokenizers import Tokenizer

    tokenizer_json = session.build_dir / "fixtures" / "tokenizers" / name / "tokenizer.json"
    vocab_size = Tokenizer.from_file(str(tokenizer_json)).get_vocab_size()
    data = session.work / "chat.jsonl"
    data.write_text(json.dumps({"messages": [{"role": "user", "content": "2+3="},
                                             {"role": "assistant", "content": "5"}]}) + "\n")
    config = {
        "model": {"vocab_size": vocab_size, "hidden_size": 16, "intermediate_size": 32, "num_layers": 1,
                  "num_heads": 2, "num_kv_heads": 1, "max_position_embeddings": 128},
        "tokenizer": {"path": str(tokenizer_json), "chat_template": "auto"},
        "data": {"train": str(data), "max_length": 64},
        "batch": {"global_size": 1},
        "train": {"max_steps": 1, "log_every": 1},
        "checkpoint": {"every_steps": 0},
    }
    return session.train(name, config) / "final"


def tokenize_command(session, final, generation_prompt):
    command = [session.executable("ptrain"), "tokenize", "--tokenizer", final / "tokenizer.json", "--template", "auto"]
    return command + (["--generation-prompt"] if generation_prompt else [])


def ptrain_renderings(session, final, conversations, generation_prompt):
    """`ptrain tokenize --template auto` on final/'s tokenizer: (texts, ids), one per conversation."""
    stdin = "".join(json.dumps({"messages": messages}) + "\n" for messages in conversations)
    command = tokenize_command(session, final, generation_prompt)
    texts = [json.loads(line) for line in session.run(command + ["--render"], stdin=stdin).splitlines()]
    ids = [json.loads(line) for line in session.run(command, stdin=stdin).splitlines()]
    return texts, ids


def transformers_rendering(tokenizer, messages, generation_prompt):
    """(text, ids) of apply_chat_template, or None where the template raises (e.g. roles that do not alternate)."""
    from jinja2.exceptions import TemplateError

    try:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
        encoded = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation_prompt)
    except TemplateError:
        return None
    return text, list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def check_chat_template(session, name):
    from transformers import AutoTokenizer

    final = final_with_tokenizer(session, name)
    tokenizer = AutoTokenizer.from_pretrained(final)
    cases = json.loads((ROOT / "tests/fixtures/tokenizers/chat_template_cases.json").read_text())
    for generation_prompt in (False, True):
        when = f"{'with' if generation_prompt else 'without'} the generation prompt"
        theirs = {case["name"]: transformers_rendering(tokenizer, case["messages"], generation_prompt)
                  for case in cases}
        rendered = [case for case in cases if theirs[case["name"]] is not None]
        texts, ids = ptrain_renderings(session, final, [case["messages"] for case in rendered], generation_prompt)
        mismatches = [{"case": case["name"], "ptrain": [text, case_ids], "transformers": theirs[case["name"]]}
                      for case, text, case_ids in zip(rendered, texts, ids)
                      if [text, case_ids] != list(theirs[case["name"]])]
        session.compare(f"{name}: conversations rendered or tokenized differently ({when})", len(mismatches), 0,
                        f"of {len(rendered)}" + (f"; first: {json.dumps(mismatches[0])[:1500]}" if mismatches else ""))
        # What the template refuses in transformers, ptrain refuses too, naming the template's error.
        accepted = []
        for case in cases:
            if theirs[case["name"]] is None:
                stdin = json.dumps({"messages": case["messages"]}) + "\n"
                done = session.run_status(tokenize_command(session, final, generation_prompt), stdin=stdin)
                if done.returncode == 0 or "refuses the conversation" not in done.stderr:
                    accepted.append(case["name"])
        refused = len(cases) - len(rendered)
        session.compare(f"{name}: conversations transformers refuses that ptrain accepts ({when})", len(accepted), 0,
                        f"of {refused}" + (f": {', '.join(accepted)}" if accepted else ""))
