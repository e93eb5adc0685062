"""The fenced blocks and the prose of the docs, with the line each sits on.

A block may carry marks in an HTML comment right before its fence (invisible
on the rendered page):

    <!-- doc-test: skip=minutes id=quickstart -->

Marks (MARKS below): `skip=REASON[,REASON]` (not run; REASONS), `figure-runs`
(a block marked skip=minutes whose runs give figures the docs quote: run with
the session's --figure-runs, which regenerates those figures), `exit=N`
(the exit status the block promises, 0 unless marked), `id=NAME` (for
`sample-of`), `sample-of=ID` (this plain block is what the block ID prints),
`output` (in a command block, `# ` lines right after a command are its
standard output), `excerpt=PATH` (the block's lines, `...` aside, stand in
PATH in this order), `runs-in=DOC` (every command of the block is one of a
block of DOC that the session runs, where it is checked), `same-metrics=A,B`
(after the block, the run directories A and B log the same metrics, to the
last bit, on every step A has; timings aside).

Every block that runs must leave the checkout's files as committed (a
generator run again must write the bundled file as it is).
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

COMMAND_LANGUAGES = {"sh", "bash"}
# Why a command block may stay unrun; it is then checked for syntax and names only.
REASONS = {
    "gpu": "needs a GPU",
    "nodes": "needs a second machine or a cluster",
    "network": "needs the network or files from elsewhere (a model, a download)",
    "minutes": "takes minutes of compute",
}
MARKS = {"skip", "exit", "id", "sample-of", "output", "excerpt", "runs-in", "same-metrics", "figure-runs"}
MARK_COMMENT = re.compile(r"^\s*<!--\s*doc-test:(.*?)-->\s*$", re.S)
# First words of a line that make an unlabelled block look like commands.
COMMAND_WORDS = re.compile(r"^\s*((build/bin|scripts|bench|\.venv/bin)/\S|ptrain (train|validate|plugins|schema|tokenize|launch|report)( |$)"
                           r"|(python3?|cmake|ctest|torchrun|srun|sbatch) )")


class DocError(Exception):
    """A doc that the test cannot read as it promises (a bad mark, say)."""


@dataclass
class Block:
    doc: str                      # path relative to the checkout, e.g. "docs/grpo.md"
    line: int                     # 1-based line of the opening fence
    lang: str
    text: str
    marks: dict = field(default_factory=dict)

    @property
    def where(self):
        return f"{self.doc}:{self.line}"

    @property
    def is_command(self):
        return self.lang in COMMAND_LANGUAGES

    @property
    def skip_reasons(self):
        return [reason for reason in self.marks.get("skip", "").split(",") if reason]

    def text_line(self, index):
        """The doc line of the block's `index`-th text line (0-based)."""
        return self.line + 1 + index


@dataclass
class Prose:
    doc: str
    line: int                     # 1-based
    text: str                     # an inline code span or a run of plain text
    is_code: bool


@dataclass
class Doc:
    root: Path                    # the folder `path` is relative to
    path: str
    lines: list
    blocks: list
    prose: list
    headings: list                # (line, text)
    links: list                   # (line, target)


def read_marks(comment, where):
    marks = {}
    for item in comment.split():
        key, _, value = item.partition("=")
        if key not in MARKS:
            raise DocError(f"{where}: unknown doc-test mark '{key}' (known: {', '.join(sorted(MARKS))})")
        marks[key] = value
    for reason in marks.get("skip", "").split(","):
        if reason and reason not in REASONS:
            raise DocError(f"{where}: unknown skip reason '{reason}' (known: {', '.join(REASONS)})")
    if "skip" in marks and not marks["skip"]:
        raise DocError(f"{where}: skip needs a reason ({', '.join(REASONS)})")
    return marks


def line_of(lines, first, last, text):
    """The 1-based line within lines [first, last) (0-based) where `text` starts (it may wrap)."""
    words = text.split()[:4]
    if not words:
        return first + 1
    paragraph = "\n".join(lines[first:last])
    match = re.search(r"\s+".join(re.escape(word) for word in words), paragraph)
    return first + 1 + (paragraph.count("\n", 0, match.start()) if match else 0)


def inline_items(token, lines, doc):
    first, last = token.map
    prose, links = [], []
    for child in token.children or []:
        if child.type == "code_inline":
            prose.append(Prose(doc, line_of(lines, first, last, child.content), child.content, True))
        elif child.type == "text" and child.content.strip():
            prose.append(Prose(doc, line_of(lines, first, last, child.content), child.content, False))
        elif child.type == "link_open":
            target = child.attrs.get("href", "")
            links.append((line_of(lines, first, last, f"]({target}"), target))
    return prose, links


def read_doc(root, relative):
    text = (Path(root) / relative).read_text(encoding="utf-8")
    lines = text.split("\n")
    tokens = MarkdownIt("commonmark").parse(text)
    blocks, prose, headings, links = [], [], [], []
    pending = None               # (marks, line) of a doc-test comment waiting for its fence
    for index, token in enumerate(tokens):
        if token.type == "html_block" and MARK_COMMENT.match(token.content):
            where = f"{relative}:{token.map[0] + 1}"
            pending = (read_marks(MARK_COMMENT.match(token.content).group(1), where), where)
            continue
        if token.type in ("fence", "code_block"):
            lang = token.info.split()[0] if token.info.strip() else ""
            marks = pending[0] if pending else {}
            blocks.append(Block(relative, token.map[0] + 1, lang, token.content, marks))
            pending = None
            continue
        if pending and token.type not in ("list_item_open", "bullet_list_open", "ordered_list_open"):
            raise DocError(f"{pending[1]}: a doc-test mark must stand right before a fenced block")
        if token.type == "inline":
            items, found = inline_items(token, lines, relative)
            prose += items
            links += found
            if index > 0 and tokens[index - 1].type == "heading_open":
                headings.append((token.map[0] + 1, token.content))
    if pending:
        raise DocError(f"{pending[1]}: a doc-test mark must stand right before a fenced block")
    return Doc(Path(root), relative, lines, blocks, prose, headings, links)


def doc_paths(root):
    """README.md, then docs/*.md by name: the order the session reads them in."""
    docs = sorted(str(path.relative_to(root)) for path in (Path(root) / "docs").glob("*.md"))
    return ["README.md"] + docs


def read_docs(root):
    return [read_doc(root, relative) for relative in doc_paths(root)]


def unlabelled_commands(doc):
    """Blocks without a language whose lines look like commands: they must say `sh`."""
    found = []
    for block in doc.blocks:
        if block.lang:
            continue
        for index, line in enumerate(block.text.split("\n")):
            if COMMAND_WORDS.match(line):
                found.append(f"{doc.path}:{block.text_line(index)}: a command in a block without a language: "
                             f"mark the block `sh` (and `<!-- doc-test: skip=... -->` if it cannot run here)")
                break
    return found
