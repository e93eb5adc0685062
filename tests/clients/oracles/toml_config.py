"""ptrain configs as TOML text, from {key: value | {key: value}} dicts (the
client checks' runs and the benchmarks' runs)."""
import json


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value)


def toml_text(config):
    """Top-level keys first, then one table per dict value."""
    lines = [f"{k} = {toml_value(v)}" for k, v in config.items() if not isinstance(v, dict)]
    for section, table in config.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
