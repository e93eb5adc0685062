"""Shell command blocks as a reader pastes them: logical lines (continued by
`\\`, a trailing `|`, `&&` or `||`) and the simple commands within them."""
import re
import shlex
from dataclasses import dataclass

CONTROL = {"|", "||", "&&", ";", "&", "(", ")", ";;"}
REDIRECT_OUT = {">", ">>", ">&", "&>", ">|"}
REDIRECT_IN = {"<"}
ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")


@dataclass
class Command:
    line_index: int               # the block line the command starts on (0-based)
    argv: list
    inputs: list                  # files read through `<`
    outputs: list                 # files written through `>`


def tokens(text):
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def logical_lines(text):
    """[(first block line index, text)] with continuations joined; comments stay."""
    joined, buffer, start = [], "", None
    for index, line in enumerate(text.split("\n")):
        if start is None:
            if not line.strip():
                continue
            start = index
        if line.rstrip().endswith("\\"):
            buffer += line.rstrip()[:-1] + " "
            continue
        buffer += line
        try:
            last = tokens(buffer)[-1:] if buffer.strip() else []
        except ValueError:        # an open quote: the command goes on
            buffer += "\n"
            continue
        if last and last[0] in ("|", "&&", "||"):
            buffer += " "
            continue
        joined.append((start, buffer))
        buffer, start = "", None
    if buffer.strip():
        joined.append((start, buffer))
    return joined


def simple_commands(line_index, line):
    """The simple commands of one logical line, assignments before argv[0] dropped."""
    commands, argv, inputs, outputs = [], [], [], []
    words = tokens(line)
    position = 0
    while position < len(words):
        word = words[position]
        if word in CONTROL:
            if argv:
                commands.append(Command(line_index, argv, inputs, outputs))
            argv, inputs, outputs = [], [], []
        elif word in REDIRECT_OUT or word in REDIRECT_IN:
            if argv and argv[-1].isdigit():
                argv.pop()                               # 2>&1, 2> file
            target = words[position + 1] if position + 1 < len(words) else ""
            if not target.isdigit():
                (inputs if word in REDIRECT_IN else outputs).append(target)
            position += 1
        elif not argv and ASSIGNMENT.match(word):
            pass
        else:
            argv.append(word)
        position += 1
    if argv:
        commands.append(Command(line_index, argv, inputs, outputs))
    return commands


def block_commands(text):
    commands = []
    for line_index, line in logical_lines(text):
        if line.lstrip().startswith("#"):
            continue
        commands += simple_commands(line_index, line)
    return commands


def command_lines(text):
    """The block's simple commands as normalised text (to compare blocks)."""
    return [shlex.join(command.argv) for command in block_commands(text)]
