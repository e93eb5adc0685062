"""The docs test's own checks, on small made-up docs: each kind of mistake it
exists to catch is caught, with the doc line in the message, and what is right
passes.

    .venv/bin/python tests/docs/test_docs_test.py --build-dir build
"""
import argparse
import json
import sys
import tempfile
import unittest
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test.blocks import DocError, read_doc, unlabelled_commands  # noqa: E402
from docs_test.commands import block_commands  # noqa: E402
from docs_test.figures import Figures, quote_pattern  # noqa: E402
from docs_test.references import References  # noqa: E402
from docs_test.samples import check_sample  # noqa: E402
from docs_test.session import different_metrics, output_segments  # noqa: E402
from docs_test.static_checks import StaticChecks  # noqa: E402

SOURCE_DIR = Path(__file__).resolve().parents[2]
BUILD_DIR = SOURCE_DIR / "build"


def write_doc(folder, text, name="docs/page.md"):
    path = Path(folder) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return read_doc(folder, name)


class BlocksTest(unittest.TestCase):
    def test_marks_belong_to_the_next_fence(self):
        with tempfile.TemporaryDirectory() as folder:
            doc = write_doc(folder, "Text.\n\n<!-- doc-test: skip=gpu id=one -->\n```sh\nls\n```\n\n```sh\npwd\n```\n")
        self.assertEqual([(block.line, block.marks) for block in doc.blocks],
                         [(4, {"skip": "gpu", "id": "one"}), (8, {})])

    def test_unknown_marks_reasons_and_stray_marks_are_errors(self):
        with tempfile.TemporaryDirectory() as folder:
            for text, message in [("<!-- doc-test: skp=gpu -->\n```sh\nls\n```\n", "docs/page.md:1: unknown doc-test mark 'skp'"),
                                  ("<!-- doc-test: skip=cloud -->\n```sh\nls\n```\n", "unknown skip reason 'cloud'"),
                                  ("<!-- doc-test: skip=gpu -->\n\nA paragraph.\n", "must stand right before a fenced block")]:
                with self.assertRaises(DocError) as raised:
                    write_doc(folder, text)
                self.assertIn(message, str(raised.exception))

    def test_a_command_in_an_unlabelled_block_is_named(self):
        with tempfile.TemporaryDirectory() as folder:
            doc = write_doc(folder, "```\nbuild/bin/ptrain train -c configs/sft.toml\n```\n\n```\nsdk/   headers\n```\n")
        self.assertEqual(len(unlabelled_commands(doc)), 1)
        self.assertIn("docs/page.md:2", unlabelled_commands(doc)[0])


class CommandsTest(unittest.TestCase):
    def test_continuations_pipes_redirections_and_comments(self):
        text = ("echo '{\"a\": 1}' |\n  ptrain tokenize --tokenizer bytes   # ids\n"
                "FOO=1 scripts/x.sh --flag \\\n  value > out.txt 2>&1 < in.txt\n# a comment\n")
        commands = block_commands(text)
        self.assertEqual([command.argv for command in commands],
                         [["echo", '{"a": 1}'], ["ptrain", "tokenize", "--tokenizer", "bytes"],
                          ["scripts/x.sh", "--flag", "value"]])
        self.assertEqual((commands[2].line_index, commands[2].inputs, commands[2].outputs), (2, ["in.txt"], ["out.txt"]))


class StaticChecksTest(unittest.TestCase):
    refs = None

    @classmethod
    def setUpClass(cls):
        cls.refs = References(SOURCE_DIR, BUILD_DIR, sys.executable)

    def failures(self, text):
        with tempfile.TemporaryDirectory() as folder:
            doc = write_doc(folder, text)
            return StaticChecks(self.refs, [doc]).run()

    def test_right_names_pass(self):
        self.assertEqual(self.failures(
            "# The `ptrain launch` page\n\nSet `batch.packing` or `[lora] rank`; see `plugins/sft/sft_loss.h` and "
            "[the heading](#the-ptrain-launch-page).\n\n"
            "```sh\nbuild/bin/ptrain train -c configs/sft.toml --set optim.lr=1e-3 --overwrite\n"
            "python3 scripts/make_arith_data.py --count 10 -o /tmp/x.jsonl\nscripts/build.sh --target ptrain\n```\n\n"
            "```toml\n[eval]\nevery_steps = 5\n```\n"), [])

    def test_each_wrong_name_is_named_with_its_line(self):
        found = self.failures(
            "Use `data.packing`.\n\n"
            "```sh\nbuild/bin/ptrain train -c configs/sft.toml --sett x\n"
            "build/bin/ptrain trian -c configs/nothing.toml\n"
            "python3 scripts/make_arith_data.py --counts 3\n"
            "scripts/build.sh --target no_such_target\n"
            "ls scripts/no_such_script.sh\n```\n\n"
            "```toml\n[optim]\nlrr = 1\n```\n\n"
            "A [link](missing.md) and [an anchor](#no-such-heading).\n\n# A heading\n\n[Right](#a-heading).\n\n"
            "```sh\nfor x in\n```\n")
        expected = ["docs/page.md:1: no config key `data.packing` (did you mean batch.packing?)",
                    "docs/page.md:4: `ptrain train` has no flag `--sett`",
                    "docs/page.md:5: ptrain has no command `trian`",
                    "docs/page.md:5: `configs/nothing.toml` does not exist in the checkout",
                    "docs/page.md:6: `scripts/make_arith_data.py` has no flag `--counts`",
                    "docs/page.md:7: the build has no target `no_such_target`",
                    "docs/page.md:8: `scripts/no_such_script.sh` does not exist in the checkout",
                    "docs/page.md:11: no config key `optim.lrr`",
                    "docs/page.md:16: link to `missing.md`: docs/missing.md does not exist",
                    "docs/page.md:16: link to `#no-such-heading`: docs/page.md has no heading",
                    "docs/page.md:22: shell syntax"]
        for message in expected:
            self.assertTrue(any(failure.startswith(message) for failure in found), f"{message}\nin\n{found}")
        self.assertEqual(len(found), len(expected), found)

    def test_an_excerpt_must_stand_in_its_file(self):
        excerpt = "<!-- doc-test: excerpt=scripts/jsonl_output.py -->\n```python\n{}\n```\n"
        self.assertEqual(self.failures(excerpt.format("import json\n...\ndef write_jsonl(path, records):  # note")), [])
        self.assertIn("not in scripts/jsonl_output.py", self.failures(excerpt.format("import yaml"))[0])


class SamplesTest(unittest.TestCase):
    def sample(self, text):
        return SimpleNamespace(text=text, doc="docs/page.md", line=10, marks={"sample-of": "run"},
                               text_line=lambda index: 11 + index)

    printed = ("01:02:03.456 r0 info  [train] step 20/300 | loss 1.9203 | tok/s 1125 | eta 1m27s\n"
               "01:02:04.000 r0 info  [checkpoint] saved runs/sft/checkpoints/step_100\n"
               "01:02:05.000 r0 info  [train] done: 300 steps in 1m41s; final model in runs/sft/final\n")

    def test_times_rates_and_prefixes_vary_figures_do_not(self):
        self.assertEqual(check_sample(self.sample(
            "09:09:09.999 r0 info  [train] step 20/300 | loss 1.9203 | tok/s 9999 | eta 3s\n...\n"
            "[train] done: 300 steps in 12s; final model in …/final\n"), self.printed), [])
        failure = check_sample(self.sample("[train] step 20/300 | loss 1.9204 | tok/s 1 | eta 1s\n"), self.printed)
        self.assertIn("docs/page.md:11: the sample line", failure[0])

    def test_a_line_left_out_of_a_chunk_fails(self):
        failure = check_sample(self.sample("[train] step 20/300 | loss 1.9203 | tok/s 1 | eta 1s\n"
                                           "[train] done: 300 steps in 1s; final model in runs/sft/final\n"),
                               self.printed)
        self.assertIn("docs/page.md:12: the sample says", failure[0])
        self.assertIn("[checkpoint] saved", failure[0])


class FiguresAndRunsTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.root = Path(self.folder.name)
        for run, losses in (("runs/a", [3.0, 2.0, 1.0]), ("runs/b", [3.0, 2.0, 1.5])):
            (self.root / run).mkdir(parents=True)
            (self.root / run / "metrics.jsonl").write_text(
                "".join(json.dumps({"step": step + 1, "loss": loss, "step_s": step}) + "\n"
                        for step, loss in enumerate(losses)))

    def tearDown(self):
        self.folder.cleanup()

    def test_metrics_compare_timings_aside(self):
        self.assertEqual(different_metrics(self.root, "runs/a", "runs/a"), [])
        self.assertEqual(different_metrics(self.root, "runs/a", "runs/b"),
                         ["same-metrics: at step 3, runs/a logs loss = 1.0, runs/b 1.5"])

    def test_a_quote_is_found_across_a_line_break_and_its_figures_compared(self):
        (self.root / "tests" / "docs").mkdir(parents=True)
        (self.root / "tests" / "docs" / "figures.toml").write_text(
            '[runs]\na = "runs/a"\nb = "runs/b"\n[groups]\nab = ["a", "b"]\n[[quote]]\ndoc = "page.md"\n'
            "text = 'loss falls from {mean(a, \"loss\", 1, 2):.2f} to {lo(at(ab, \"loss\", 3)):.1f}-{hi(at(ab, \"loss\", 3)):.1f}'\n")
        values = {'mean(a, "loss", 1, 2)': 2.5, 'lo(at(ab, "loss", 3))': 1.0, 'hi(at(ab, "loss", 3))': 1.5}
        (self.root / "tests" / "docs" / "figures.json").write_text(json.dumps(values))
        figures = Figures(self.root, self.root)
        self.assertEqual(figures.check_quote(figures.spec["quote"][0], "x\nthe loss falls\nfrom 2.50 to 1.0-1.5.\n",
                                             self.root), [])
        failures = figures.check_quote(figures.spec["quote"][0], "x\nthe loss falls\nfrom 2.40 to 1.0-1.5.\n", self.root)
        self.assertEqual(failures[0], 'page.md:2: quotes 2.40 for mean(a, "loss", 1, 2); the runs give 2.50')
        self.assertIn("no longer holds", figures.check_quote(figures.spec["quote"][0], "nothing\n", self.root)[0])
        (self.root / "tests" / "docs" / "figures.json").write_text(json.dumps({**values, 'mean(a, "loss", 1, 2)': 2.25}))
        stale = Figures(self.root, self.root).check_quote(figures.spec["quote"][0], "the loss falls from 2.50 to 1.0-1.5",
                                                          self.root)
        self.assertEqual(stale, ['page.md:1: tests/docs/figures.json has 2.25 for mean(a, "loss", 1, 2), the runs give '
                                 '2.50 (run the session with --figure-runs --write-figures)'])
        self.assertIsNotNone(quote_pattern("a {x:.2f}").fullmatch("a -1.5e-03"))

    def test_output_lines_follow_their_command(self):
        block = SimpleNamespace(text="echo a\n# a\necho b | cat\n# b\n")
        self.assertEqual(output_segments(block), [("echo a", "a"), ("echo b | cat", "b")])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=BUILD_DIR)
    args, rest = parser.parse_known_args()
    BUILD_DIR = args.build_dir.resolve()
    unittest.main(argv=[sys.argv[0]] + rest)
